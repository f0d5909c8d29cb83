// What the app is looking at: a model, an image, the options, and the traces
// the core computed from them. Forward passes run on a worker thread; the UI
// keeps drawing the last complete trace and shows progress meanwhile.
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include "core/io/checkpoint.h"
#include "core/model/forward.h"
#include "core/io/image.h"
#include "core/model/stages.h"

namespace vit::app {

struct Result {
    std::shared_ptr<const Trace> trace;       // with the current options
    std::shared_ptr<const Trace> base;        // with the default options (for the difference view)
    std::shared_ptr<const Trace> grads;       // d logit[pred] / d stage (null when not computed)
    std::string no_grads_why;                 // why grads is null ("" when computed)
    std::shared_ptr<const LoadedModel> model; // the model that produced this result
    Options options;                          // the options that produced trace
    double ms = 0;
    std::string error;
    // Where NaN / Inf first appear in `trace` ("" when nowhere): vit::first_nonfinite_stage's words.
    std::string nonfinite;
};

// An error the window shows until the user dismisses it: which file, and the full reason.
struct ErrorItem {
    std::string title;   // "Could not load the model 'x.safetensors'"
    std::string detail;  // the loader's whole message (every missing or mis-shaped tensor)
};

// Whether the backward pass runs with each forward pass.
enum class GradMode { Auto, Off, On };  // Auto: for models up to kAutoGradParams parameters
constexpr int64_t kAutoGradParams = 30'000'000;   // ViT-S and smaller: backward costs about a frame
constexpr int64_t kMaxGradParams = 100'000'000;   // ViT-B: on request (seconds); ViT-L and up: never

class Session {
public:
    Session();
    ~Session();
    // Each returns false and sets error() on a bad file; the old state stays.
    // load_model blocks; begin_load_model loads on a background thread (large
    // checkpoints and presets take seconds) and poll() swaps the model in.
    // Every failure is also added to errors() (title naming the file, full reason).
    bool load_model(const std::string& spec, int heads = 0);
    void begin_load_model(const std::string& spec, int heads = 0);
    bool loading() const { return loading_; }
    bool load_image(const std::string& path);
    bool load_labels(const std::string& path);
    void set_options(const Options& o);
    const Options& options() const { return opt_; }
    // Preprocessing: the model's own resize policy, or squash to a square (aspect lost).
    void set_squash(std::optional<bool> squash);
    std::optional<bool> squash() const { return squash_; }
    Config preprocess_config() const;       // the model's config with the squash choice applied
    bool has_image() const { return !image_path_.empty(); }
    const Image& image() const { return image_; }
    void set_grad_mode(GradMode m);
    GradMode grad_mode() const { return grad_mode_; }
    // Why gradients are not computed for the current model ("" when they are, or will be).
    std::string grads_unavailable_reason() const;
    bool can_compute_grads() const;         // small enough for the "compute gradients" button

    // Starts a run if inputs changed; returns true when a new result was taken.
    // Waits up to wait_ms for a run to finish (small models update in the same frame).
    bool poll(double wait_ms);
    bool busy() const { return running_; }
    float progress() const;  // 0..1 of the run in flight

    const Result& result() const { return res_; }
    const Trace* trace() const { return res_.trace.get(); }
    const Weights& weights() const { return model_->weights; }
    const Config& config() const { return model_->weights.cfg; }
    // The config of the model that produced the trace on screen (views read the trace with it:
    // while a new model runs, the old trace stays and is described by its own model).
    const Config& shown_config() const { return res_.model ? res_.model->weights.cfg : model_->weights.cfg; }
    const LoadedModel& model() const { return *model_; }
    const std::string& model_spec() const { return model_spec_; }
    const std::string& image_path() const { return image_path_; }
    const Tensor3& input() const { return input_; }
    // Replace the weights (the Train panel's live model).
    void set_weights(std::shared_ptr<LoadedModel> m, const std::string& label);
    // The last error, one line (status bar); errors() keeps every unread one in full.
    std::string& error() { return error_; }
    const std::vector<ErrorItem>& errors() const { return errors_; }
    void add_error(const std::string& title, const std::string& detail);
    void dismiss_error(size_t i);
    void dismiss_errors() { errors_.clear(); }
    uint64_t version() const { return version_; }  // bumps with every new result

private:
    void launch();
    void refresh_input();
    void note_nonfinite_weights(const std::string& spec);
    std::shared_ptr<LoadedModel> model_;
    bool want_grads() const;
    std::string model_spec_, image_path_, error_;
    std::string nonfinite_reported_;  // the last pass's Result::nonfinite, reported once
    std::vector<ErrorItem> errors_;
    std::optional<bool> squash_;
    GradMode grad_mode_ = GradMode::Auto;
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
    int load_heads_ = 0;
    std::atomic<int> stages_done_{0};
    int stages_total_ = 1;
    Result res_;
    uint64_t version_ = 0;
};

}  // namespace vit::app
