#include "session.h"

#include <chrono>
#include <cstdio>
#include <thread>

#include "core/kernels/ops.h"
#include "core/train/train.h"

namespace vit::app {

Session::Session(JobQueue& jobs)
    : jobs_(jobs), model_(std::make_shared<LoadedModel>(vit::load_model("default"))), model_spec_("default") {}

Session::~Session() {
    // the jobs hold what they need (model, input, their result): nothing of this session
    if (run_job_) run_job_->cancel();
    if (load_job_) load_job_->cancel();
}

bool Session::load_model(const std::string& spec, int heads) {
    try {
        LoadOverrides ov;
        ov.heads = heads;
        auto m = std::make_shared<LoadedModel>(vit::load_model(spec, ov));
        model_ = std::move(m);
        model_spec_ = spec;
        refresh_input();
        return true;
    } catch (const std::exception& e) {
        add_error("Could not load the model '" + spec + "'", e.what());
        return false;
    }
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
    if (load_job_) load_job_->cancel();  // a newer request supersedes it: its model is dropped
    load_spec_ = spec;
    auto out = std::make_shared<std::shared_ptr<LoadedModel>>();
    load_out_ = out;
    load_job_ = jobs_.submit("loading " + spec, all_threads(), [spec, heads, out](Job& job) {
        job.set_step("reading");
        LoadOverrides ov;
        ov.heads = heads;
        auto m = std::make_shared<LoadedModel>(vit::load_model(spec, ov));
        ops::cancellation_point();
        *out = std::move(m);
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
    if (!image_path_.empty()) input_ = preprocess(image_, preprocess_config());
    else { input_ = Tensor3(); res_ = Result{}; ++version_; }
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
        Tensor3 x = preprocess(im, preprocess_config());
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

float Session::progress() const { return run_job_ ? std::max(0.f, run_job_->progress()) : 1.f; }

void Session::launch() {
    if (run_job_) run_job_->cancel();  // a newer request supersedes the pass in flight
    auto model = model_;
    auto xp = std::make_shared<const Tensor3>(input_);
    const Options opt = opt_;
    const Config& c = model->weights.cfg;
    const int total = int(stage_names(c, opt).size()) * (opt == Options{} ? 1 : 2);
    const bool want_grads = this->want_grads();
    auto out = std::make_shared<Result>();
    out->model = model;
    out->options = opt;
    out->no_grads_why = grads_unavailable_reason();
    run_out_ = out;
    run_job_ = jobs_.submit("forward pass", job_threads(param_count(c)), [model, xp, opt, want_grads, total, out](Job& job) {
        const Tensor3& x = *xp;
        Result& r = *out;
        job.set_total(total);
        auto t0 = std::chrono::steady_clock::now();
        auto t = std::make_shared<Trace>();
        t->set_progress(&job.units());
        forward(model->weights, x, opt, *t);
        t->set_progress(nullptr);
        r.trace = t;
        if (opt == Options{}) {
            r.base = t;
        } else {
            job.set_step("the default options' run (for Changes)");
            auto b = std::make_shared<Trace>();
            b->set_progress(&job.units());
            forward(model->weights, x, Options{}, *b);
            b->set_progress(nullptr);
            r.base = b;
        }
        if (want_grads) {
            job.set_step("gradients");
            r.grads = std::make_shared<Trace>(gradient_trace(model->weights, x, opt, -1));
        }
        r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    });
    dirty_ = false;
}

bool Session::poll(double wait_ms) {
    if (load_job_ && load_job_->finished()) {
        const auto job = std::move(load_job_);
        const auto out = std::move(load_out_);
        if (job->state() == Job::State::Done && *out) {
            model_ = std::move(*out);
            model_spec_ = load_spec_;
            refresh_input();
        } else if (job->state() == Job::State::Failed) {
            add_error("Could not load the model '" + load_spec_ + "'", job->error());
        }
    }
    if (dirty_ && input_.size()) launch();
    if (!run_job_ || !run_job_->wait_for(wait_ms)) return false;
    const auto job = std::move(run_job_);
    const auto out = std::move(run_out_);
    if (job->state() == Job::State::Failed) {
        add_error("The forward pass failed (" + model_spec_ + ")", job->error());
        return false;
    }
    if (job->state() != Job::State::Done || job->cancelled()) return false;
    res_ = std::move(*out);
    ++version_;
    return true;
}

}  // namespace vit::app
