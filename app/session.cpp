#include "session.h"

#include <chrono>
#include <cstdio>

#include "core/kernels/ops.h"
#include "core/model/finite.h"
#include "core/train/train.h"

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
        note_nonfinite_weights(spec);
        refresh_input();
        return true;
    } catch (const std::exception& e) {
        add_error("Could not load the model '" + spec + "'", e.what());
        return false;
    }
}

// NaN / Inf in the file's tensors: loaded as they are, and named in the error panel.
void Session::note_nonfinite_weights(const std::string& spec) {
    if (!model_->nonfinite.empty())
        add_error("Non-finite weights in '" + spec + "' (loaded as they are)", model_->nonfinite_warning());
}

void Session::add_error(const std::string& title, const std::string& detail) {
    error_ = title + ": " + detail.substr(0, detail.find('\n'));
    errors_.push_back({title, detail});
}

void Session::dismiss_error(size_t i) {
    if (i < errors_.size()) errors_.erase(errors_.begin() + long(i));
    if (errors_.empty()) error_.clear();
}

void Session::begin_load_model(const std::string& spec, int heads) {
    if (loading_) { add_error("Could not load the model '" + spec + "'", "still loading the previous model (" + load_spec_ + ")"); return; }
    if (loader_.joinable()) loader_.join();
    loading_ = true;
    load_done_ = false;
    load_spec_ = spec;
    load_heads_ = heads;
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

// The image as the current model sees it (its size, channels, mean and std). With no image
// there is no input and nothing runs: the views say so (never a run on zeros).
void Session::refresh_input() {
    if (!image_path_.empty()) {
        try {
            input_ = name_out_of_memory(image_path_, "preprocessing the image", [&] { return preprocess(image_, preprocess_config()); });
        } catch (const std::exception& e) {  // the image stays on screen; without an input nothing runs
            add_error("Could not preprocess the image '" + image_path_ + "' for this model", e.what());
            input_ = Tensor3();
        }
    } else { input_ = Tensor3(); res_ = Result{}; ++version_; }
    dirty_ = true;
}

Config Session::preprocess_config() const {
    Config c = config();
    if (squash_) c.pre.squash = *squash_;
    return c;
}

void Session::set_squash(std::optional<bool> squash) {
    if (squash == squash_) return;
    squash_ = squash;
    refresh_input();
}

void Session::set_grad_mode(GradMode m) {
    if (m == grad_mode_) return;
    grad_mode_ = m;
    dirty_ = true;
}

bool Session::want_grads() const {
    int64_t n = param_count(config());
    if (grad_mode_ == GradMode::Off) return false;
    if (grad_mode_ == GradMode::On) return n <= kMaxGradParams;
    return n < kAutoGradParams;
}

bool Session::can_compute_grads() const {
    return !want_grads() && param_count(config()) <= kMaxGradParams;
}

std::string Session::grads_unavailable_reason() const {
    if (want_grads()) return "";
    int64_t n = param_count(config());
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1fM", double(n) / 1e6);
    if (n > kMaxGradParams)
        return "gradients are not computed for this model: " + std::string(buf) +
               " parameters is over the app's limit of 100M for a backward pass";
    if (grad_mode_ == GradMode::Off) return "gradients are off for this session (--no-grads): only the forward pass ran";
    return "gradients are not computed automatically for this model: " + std::string(buf) +
           " parameters (automatic only up to 30M, where the backward pass costs about a frame)";
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
        add_error("Could not load the class names '" + path + "'", e.what());
        return false;
    }
}

bool Session::load_image(const std::string& path) {
    try {
        Image im = vit::load_image(path);
        Tensor3 x = name_out_of_memory(path, "preprocessing the image", [&] { return preprocess(im, preprocess_config()); });
        image_ = std::move(im);
        image_path_ = path;
        input_ = std::move(x);
        dirty_ = true;
        return true;
    } catch (const std::exception& e) {
        add_error("Could not load the image '" + path + "'", e.what());
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
    bool want_grads = this->want_grads();
    std::string no_grads_why = grads_unavailable_reason();
    // Small models run single-threaded: a fork/join per kernel costs more than it saves.
    int threads = param_count(c) < 2'000'000 ? 1 : 0;
    auto xp = std::make_shared<Tensor3>(std::move(x));
    auto job = [this, model, xp, opt, want_grads, threads, no_grads_why]() {
        const Tensor3& x = *xp;
        if (threads) ops::set_threads(threads);
        else ops::set_threads(int(std::thread::hardware_concurrency()));
        Result r;
        r.model = model;
        r.options = opt;
        r.no_grads_why = no_grads_why;
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
            if (auto nf = first_nonfinite_stage(*r.trace)) r.nonfinite = nf->describe(r.trace->entries().size());
        } catch (const std::bad_alloc&) {
            r.error = "out of memory (std::bad_alloc) while running the forward pass of " + model->source;
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
            note_nonfinite_weights(model_spec_);
            refresh_input();
        } else {
            add_error("Could not load the model '" + load_spec_ + "'", load_error_);
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
        add_error("The forward pass failed (" + model_spec_ + ")", r.error);
        return false;
    }
    res_ = std::move(r);
    ++version_;
    // Once per change of report, not at every re-run (a dismissed one stays dismissed while it holds).
    if (!res_.nonfinite.empty() && res_.nonfinite != nonfinite_reported_)
        add_error("NaN / Inf in the forward pass (" + model_spec_ + ")", res_.nonfinite);
    nonfinite_reported_ = res_.nonfinite;
    if (dirty_) launch();  // inputs changed while running
    return true;
}

}  // namespace vit::app
