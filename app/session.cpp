#include "session.h"

#include <chrono>

#include "core/train.h"

namespace vit::app {

Session::Session() : model_(std::make_shared<LoadedModel>(vit::load_model("default"))), model_spec_("default") {}

Session::~Session() {
    if (job_.valid()) job_.wait();
}

bool Session::load_model(const std::string& spec, int heads) {
    try {
        LoadOverrides ov;
        ov.heads = heads;
        auto m = std::make_shared<LoadedModel>(vit::load_model(spec, ov));
        model_ = std::move(m);
        model_spec_ = spec;
        if (!image_path_.empty()) input_ = preprocess(image_, model_->weights.cfg);
        else input_ = Tensor::zeros({size_t(config().channels), size_t(config().image_size), size_t(config().image_size)});
        dirty_ = true;
        error_.clear();
        return true;
    } catch (const std::exception& e) {
        error_ = e.what();
        return false;
    }
}

void Session::set_weights(std::shared_ptr<LoadedModel> m, const std::string& label) {
    model_ = std::move(m);
    model_spec_ = label;
    if (!image_path_.empty()) input_ = preprocess(image_, model_->weights.cfg);
    dirty_ = true;
}

bool Session::load_image(const std::string& path) {
    try {
        Image im = vit::load_image(path);
        Tensor x = preprocess(im, config());
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
    Tensor x = input_.clone();
    Options opt = opt_;
    stages_done_ = 0;
    const Config& c = model->weights.cfg;
    stages_total_ = int(stage_names(c, opt).size()) * (opt == Options{} ? 1 : 2);
    bool want_grads = param_count(c) < 30'000'000;  // the full backward of ViT-B+ is not worth a frame
    job_ = std::async(std::launch::async, [this, model, x = std::move(x), opt, want_grads]() {
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
    });
    running_ = true;
    dirty_ = false;
}

bool Session::poll(double wait_ms) {
    if (!running_ && dirty_ && input_.size()) launch();
    if (!running_) return false;
    if (job_.wait_for(std::chrono::microseconds(int64_t(wait_ms * 1000))) != std::future_status::ready) return false;
    Result r = job_.get();
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
