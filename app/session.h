// What the app is looking at: a model, an image, the options, and the traces
// the core computed from them. Forward passes run on a worker thread; the UI
// keeps drawing the last complete trace and shows progress meanwhile.
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "core/forward.h"
#include "core/image.h"
#include "core/stages.h"

namespace vit::app {

struct Result {
    std::shared_ptr<const Trace> trace;       // with the current options
    std::shared_ptr<const Trace> base;        // with the default options (for the difference view)
    std::shared_ptr<const Trace> grads;       // d logit[pred] / d stage (may be null for huge models)
    double ms = 0;
    std::string error;
};

class Session {
public:
    Session();
    ~Session();
    // Each returns false and sets error() on a bad file; the old state stays.
    // load_model blocks; begin_load_model loads on a background thread (large
    // checkpoints and presets take seconds) and poll() swaps the model in.
    bool load_model(const std::string& spec, int heads = 0);
    void begin_load_model(const std::string& spec, int heads = 0);
    bool loading() const { return loading_; }
    bool load_image(const std::string& path);
    bool load_labels(const std::string& path);
    void set_options(const Options& o);
    const Options& options() const { return opt_; }

    // Starts a run if inputs changed; returns true when a new result was taken.
    // Waits up to wait_ms for a run to finish (small models update in the same frame).
    bool poll(double wait_ms);
    bool busy() const { return running_; }
    float progress() const;  // 0..1 of the run in flight

    const Result& result() const { return res_; }
    const Trace* trace() const { return res_.trace.get(); }
    const Weights& weights() const { return model_->weights; }
    const Config& config() const { return model_->weights.cfg; }
    const LoadedModel& model() const { return *model_; }
    const std::string& model_spec() const { return model_spec_; }
    const std::string& image_path() const { return image_path_; }
    const Tensor3& input() const { return input_; }
    // Replace the weights (the Train panel's live model).
    void set_weights(std::shared_ptr<LoadedModel> m, const std::string& label);
    std::string& error() { return error_; }
    uint64_t version() const { return version_; }  // bumps with every new result

private:
    void launch();
    void refresh_input();
    std::shared_ptr<LoadedModel> model_;
    std::string model_spec_, image_path_, error_;
    Image image_;
    Tensor3 input_;
    Options opt_;
    bool dirty_ = true;
    bool running_ = false;
    // One persistent worker thread: its OpenMP pool survives between runs.
    std::thread worker_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::function<Result()> job_;
    bool have_job_ = false, have_result_ = false, quit_ = false;
    Result pending_;
    std::thread loader_;
    std::atomic<bool> loading_{false}, load_done_{false};
    std::shared_ptr<LoadedModel> loaded_;
    std::string load_spec_, load_error_;
    std::atomic<int> stages_done_{0};
    int stages_total_ = 1;
    Result res_;
    uint64_t version_ = 0;
};

}  // namespace vit::app
