#include "session.h"

#include <chrono>

#include "core/ops.h"
#include "core/train.h"

#include <xtensor/xbuilder.hpp>

namespace vit::app {

Session::Session() : model_(std::make_shared<LoadedModel>(vit::load_model("default"))), model_spec_("default") {
    worker_ = std::thread([this] {
        std::unique_lock<std::mutex> lk(mu_);
        for (;;) {
            cv_.wait(lk, [this] { return have_job_ || quit_; });
            if (quit_) return;
            auto job = std::move(job_);
            have_job_ = false;
            lk.unlock();
            Result r = job();
            lk.lock();
            pending_ = std::move(r);
            have_result_ = true;
            cv_.notify_all();
        }
    });
}

Session::~Session() {
    if (loader_.joinable()) loader_.join();
    {
        std::lock_guard<std::mutex> g(mu_);
        quit_ = true;
    }
    cv_.notify_all();
    worker_.join();
}

bool Session::load_model(const std::string& spec, int heads) {
    try {
        LoadOverrides ov;
        ov.heads = heads;
        auto m = std::make_shared<LoadedModel>(vit::load_model(spec, ov));
        model_ = std::move(m);
        model_spec_ = spec;
        refresh_input();
        error_.clear();
        return true;
    } catch (const std::exception& e) {
        error_ = e.what();
        return false;
    }
}

void Session::begin_load_model(const std::string& spec, int heads) {
    if (loading_) { error_ = "still loading the previous model"; return; }
    if (loader_.joinable()) loader_.join();
    loading_ = true;
    load_done_ = false;
    load_spec_ = spec;
    loader_ = std::thread([this, spec, heads] {
        try {
            LoadOverrides ov;
            ov.heads = heads;
            loaded_ = std::make_shared<LoadedModel>(vit::load_model(spec, ov));
        } catch (const std::exception& e) {
            load_error_ = e.what();
            loaded_.reset();
        }
        load_done_ = true;
    });
}

void Session::set_weights(std::shared_ptr<LoadedModel> m, const std::string& label) {
    model_ = std::move(m);
    model_spec_ = label;
    refresh_input();
}

// The image as the current model sees it (its size, channels, mean and std).
void Session::refresh_input() {
    const Config& c = config();
    if (!image_path_.empty()) input_ = preprocess(image_, c);
    else input_ = xt::zeros<float>({size_t(c.channels), size_t(c.image_size), size_t(c.image_size)});
    dirty_ = true;
}

bool Session::load_labels(const std::string& path) {
    try {
        auto m = std::make_shared<LoadedModel>();
        m->weights = model_->weights;
        m->family = model_->family; m->source = model_->source; m->metadata = model_->metadata;
        apply_labels_file(m->weights.cfg, path);
        model_ = std::move(m);
        dirty_ = true;
        return true;
    } catch (const std::exception& e) {
        error_ = e.what();
        return false;
    }
}

bool Session::load_image(const std::string& path) {
    try {
        Image im = vit::load_image(path);
        Tensor3 x = preprocess(im, config());
        image_ = std::move(im);
        image_path_ = path;
        input_ = std::move(x);
        dirty_ = true;
        error_.clear();
        return true;
    } catch (const std::exception& e) {
        error_ = e.what();
        return false;
    }
}

void Session::set_options(const Options& o) {
    if (o != opt_) { opt_ = o; dirty_ = true; }
}

float Session::progress() const {
    return running_ ? std::min(1.f, float(stages_done_.load()) / float(std::max(1, stages_total_))) : 1.f;
}

void Session::launch() {
    auto model = model_;
    Tensor3 x = input_;
    Options opt = opt_;
    stages_done_ = 0;
    const Config& c = model->weights.cfg;
    stages_total_ = int(stage_names(c, opt).size()) * (opt == Options{} ? 1 : 2);
    bool want_grads = param_count(c) < 30'000'000;  // the full backward of ViT-B+ is not worth a frame
    // Small models run single-threaded: a fork/join per kernel costs more than it saves.
    int threads = param_count(c) < 2'000'000 ? 1 : 0;
    auto xp = std::make_shared<Tensor3>(std::move(x));
    auto job = [this, model, xp, opt, want_grads, threads]() {
        const Tensor3& x = *xp;
        if (threads) ops::set_threads(threads);
        else ops::set_threads(int(std::thread::hardware_concurrency()));
        Result r;
        auto t0 = std::chrono::steady_clock::now();
        try {
            auto t = std::make_shared<Trace>();
            t->set_progress(&stages_done_);
            forward(model->weights, x, opt, *t);
            t->set_progress(nullptr);
            r.trace = t;
            if (opt == Options{}) r.base = t;
            else {
                auto b = std::make_shared<Trace>();
                b->set_progress(&stages_done_);
                forward(model->weights, x, Options{}, *b);
                b->set_progress(nullptr);
                r.base = b;
            }
            if (want_grads) r.grads = std::make_shared<Trace>(gradient_trace(model->weights, x, opt, -1));
        } catch (const std::exception& e) {
            r.error = e.what();
        }
        r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        return r;
    };
    {
        std::lock_guard<std::mutex> g(mu_);
        job_ = std::move(job);
        have_job_ = true;
        have_result_ = false;
    }
    cv_.notify_all();
    running_ = true;
    dirty_ = false;
}

bool Session::poll(double wait_ms) {
    if (loading_ && load_done_) {
        loader_.join();
        loading_ = false;
        if (loaded_) {
            model_ = std::move(loaded_);
            model_spec_ = load_spec_;
            refresh_input();
            error_.clear();
        } else {
            error_ = load_error_;
        }
    }
    if (!running_ && dirty_ && input_.size()) launch();
    if (!running_) return false;
    Result r;
    {
        std::unique_lock<std::mutex> lk(mu_);
        if (!cv_.wait_for(lk, std::chrono::microseconds(int64_t(wait_ms * 1000)), [this] { return have_result_; }))
            return false;
        r = std::move(pending_);
        have_result_ = false;
    }
    running_ = false;
    if (!r.error.empty()) {
        error_ = r.error;
        return false;
    }
    res_ = std::move(r);
    ++version_;
    if (dirty_) launch();  // inputs changed while running
    return true;
}

}  // namespace vit::app
