// What the app is looking at: a model, an image, the options, and the traces
// the core computed from them. Forward passes and model loads run as jobs
// (jobs.h); the UI keeps drawing the last complete trace and shows progress
// meanwhile, and a newer request cancels the one in flight.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/io/checkpoint.h"
#include "core/model/forward.h"
#include "core/io/image.h"
#include "core/io/scenes.h"
#include "core/model/stages.h"
#include "core/teach/analysis.h"
#include "jobs.h"

namespace vit::app {

struct Result {
    std::shared_ptr<const Trace> trace;       // the stages, and their gradients when computed (Trace::has_grads)
    std::shared_ptr<const Trace> base;        // what the Changes tab compares with (base_options), same input
    std::string no_grads_why;                 // why the trace holds no gradients ("" when it does)
    std::shared_ptr<const LoadedModel> model; // the model that produced this result
    double ms = 0;       // the job: the pass, the scan for NaN / Inf, the baseline's pass when it ran
    double pass_ms = 0;  // the forward (and backward) pass alone
    bool reused_base = false;  // no pass ran: the cached baseline has these options (a toggle back)
    std::string error;
    // Where NaN / Inf first appear in `trace` ("" when nowhere): vit::first_nonfinite_stage's words.
    std::string nonfinite;
    // The pass reused the stages of the trace before it up to this block (forward_from); -1: a full pass.
    int from_block = -1;
};

// The options the Changes view compares with: with interventions, the same options without them
// (what the interventions change); else the defaults at the same input size (what the switches change).
Options base_options(const Options& o);
// A model load's step, said before it starts: "making random weights (304M parameters)", "reading
// the file (346 MB)", "finding it in the Hugging Face cache, or downloading".
std::string load_step(const std::string& spec);
// A forward pass's step from the stages recorded so far (units; past the table's rows: the
// checkpointed backward's blocks when backward_blocks > 0, then the baseline's pass): "running block 3
// of 24", "running the head", "first pass, packing the weights: ...", "the backward pass
// (checkpointed): block 24 of 24, its stages recomputed".
std::string run_step_text(const StageTable& t, int units, bool first_pass, int backward_blocks = 0);

// Activation patching's other input, as the window holds it: an image file (prepared like the
// model's input) or a normalized .npy. The patch's values are computed in the forward pass's job
// from it, with the options in force without interventions, and kept while those stay.
struct PatchSource {
    std::string path;
    Image image;           // an image file's pixels (empty for a .npy)
    Tensor3 array;         // a .npy's values
};

// An error the window shows until the user dismisses it: which file, and the full reason.
struct ErrorItem {
    std::string title;   // "Could not load the model 'x.safetensors'"
    std::string detail;  // the loader's whole message (every missing or mis-shaped tensor)
};

// A checkpoint that does not say how many attention heads it has: the window asks (heads_prompt.cpp)
// instead of guessing, then loads it again with the answer.
struct HeadsRequest {
    std::string spec;          // the checkpoint
    int width = 0;             // its width: the head count must divide it
    std::vector<int> choices;  // the divisors of the width
    std::string why;           // the loader's message (names the file, says --heads N is needed)
};

// How the window records a pass's stages. Auto: every stage when the full trace is small (up to
// kOnDemandBytes: ViT-S/16 at 224 and smaller); larger ones keep the residual stream and what the
// overview tabs read for every block (on_demand_keep_kinds) and recompute any other stage's block
// when a view reads it (Trace::set_on_demand). Small models keep the full trace because it costs the
// same single pass, every stage is then there at once (a switch of stage recomputes nothing), and it
// is small. A pass with gradients runs the same way: on demand, its backward pass is checkpointed
// (the gradients of the kept rows kept, a block's others recomputed when a view reads them).
enum class StagesMode { Auto, OnDemand, All };
constexpr double kOnDemandBytes = 128e6;
// The block stages an on-demand pass of the window keeps for every block (the residual stream is
// always kept): the attention patterns that the attention maps, rollout, attention distance and
// the cls-attention overlay read across all layers. The logit lens and token norms read the stream.
const std::vector<StageKind>& on_demand_keep_kinds();
// Whether a pass of `c` with `opt` runs on demand under `mode` (with or without gradients).
bool runs_on_demand(StagesMode mode, const Config& c, const Options& opt);

// The Changes comparison of the result on screen (Session::changes): every stage's change from the
// baseline. On-demand traces are compared in a job, a block at a time.
struct ChangesState {
    const std::vector<StageChange>* list = nullptr;  // null while it is being computed (or failed)
    bool pending = false;
    float progress = 0;  // 0..1 while pending
    std::string error;   // why it failed
};

// Whether the backward pass runs with each forward pass. Auto: for models under kAutoGradParams
// parameters; On: on request (the "compute gradients" button, --grads); Off: --no-grads. Auto and On
// only while the pass with its gradients fits the window's memory limit (GradPlan).
enum class GradMode { Auto, Off, On };
constexpr int64_t kAutoGradParams = 30'000'000;   // ViT-S and smaller: backward costs about a frame
// The window's memory limit for a pass with gradients: issue 22's target for a big model's session,
// kGradLimitWeights x the weights + kGradLimitExtra bytes.
constexpr double kGradLimitWeights = 1.25, kGradLimitExtra = 0.5e9;

// What a pass with gradients would hold: the weights, the stages and gradients it keeps (every one,
// or on demand those of the kept rows), and at most one block's stages and gradients more (the
// backward pass's block, the views' block). An estimate of the arrays, in bytes.
struct GradBytes {
    double weights = 0, kept = 0, block = 0;
    double total() const { return weights + kept + block; }
    double limit() const { return kGradLimitWeights * weights + kGradLimitExtra; }
};
GradBytes grad_bytes(const Config& c, const Options& opt, bool on_demand);

// What the window does about gradients for a model and options.
struct GradPlan {
    bool run = false;          // the pass computes them
    bool can_request = false;  // not computed now; the "compute gradients" button (GradMode::On) would
    bool on_demand = false;    // the pass runs on demand: the backward is checkpointed
    std::string why;           // why they are not computed ("" when they are)
};
GradPlan grad_plan(GradMode mode, StagesMode stages, const Config& c, const Options& opt);

class Session {
public:
    explicit Session(JobQueue& jobs);
    ~Session();  // cancels its jobs (their results are dropped)
    // Each returns false and sets error() on a bad file; the old state stays.
    // load_model blocks; begin_load_model loads as a job (large checkpoints and
    // presets take seconds; a newer request cancels it) and poll() swaps the model in.
    // Every failure is also added to errors() (title naming the file, full reason).
    bool load_model(const std::string& spec, int heads = 0);
    void begin_load_model(const std::string& spec, int heads = 0);
    bool loading() const { return load_job_ != nullptr; }
    const std::string& loading_spec() const { return load_spec_; }  // the model a load in flight is for
    // Set when a load stopped because the head count is unknown (not an error-panel entry: the
    // window asks). answer_heads loads the same file with n heads; cancel_heads keeps what is loaded.
    const std::optional<HeadsRequest>& heads_request() const { return heads_request_; }
    void answer_heads(int n);
    void cancel_heads() { heads_request_.reset(); }
    // hf:ORG/NAME models: from the cache only (--offline), and the download under way while one
    // loads (active false when none). cancel_download() stops it; its bytes stay for the next try.
    struct Download {
        bool active = false, waiting = false;
        std::string repo_id, file;
        uint64_t done = 0, total = 0, resumed_from = 0;
        int index = 0, count = 0;
    };
    void set_offline(bool offline) { offline_ = offline; }
    bool offline() const { return offline_; }
    Download download() const;
    void cancel_download() { download_->cancel = true; }
    bool load_image(const std::string& path);
    bool load_labels(const std::string& path);
    // The truth of a generated scene: its entry in labels.json beside the image (core/io/scenes.h), the
    // object's box in the image file's pixels; empty for any other image. scene_truth_note(): why a
    // labels.json there could not be read ("" when there was none, or it was read).
    const std::optional<SceneTruth>& scene_truth() const { return truth_; }
    const std::string& scene_truth_note() const { return truth_note_; }
    // The image menu's Scenes source: a new scene of a random Fashion-MNIST test item, written with its
    // labels.json to <cache>/vitscope/scenes/<seed>/ and loaded. False (and an error entry naming what is
    // missing) without the test split or a writable cache folder.
    bool new_scene();
    // Activation patching (options().iv.patch): the other input. False (and an error panel entry)
    // when it cannot be read; the patch itself is set with set_options (values left empty: the
    // forward pass's job computes them from this source).
    bool load_patch_source(const std::string& path);
    const std::optional<PatchSource>& patch_source() const { return patch_src_; }
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
    bool can_compute_grads() const;         // within the limit, for the "compute gradients" button
    GradPlan grad_plan() const;             // for the current model, options and modes

    // Takes a finished load; starts a run if inputs changed (cancelling one in flight:
    // the newer request supersedes it); returns true when a new result was taken.
    // Waits up to wait_ms for a run to finish (small models update in the same frame).
    bool poll(double wait_ms);
    bool busy() const { return run_job_ != nullptr; }
    float progress() const;  // 0..1 of the run in flight

    const Result& result() const { return res_; }
    const Trace* trace() const { return res_.trace.get(); }
    // What is on screen: the trace drawn and the options and model it was computed with. Every view,
    // export and explanation reads these, never options() or model() (what was requested since: a
    // pass with them may still be running). With no trace, what is requested.
    const Options& shown_options() const { return res_.trace ? res_.trace->options() : opt_; }
    std::shared_ptr<const LoadedModel> shown_model() const { return res_.model ? res_.model : model_; }
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

    // ---- stages on demand
    void set_stages_mode(StagesMode m);
    StagesMode stages_mode() const { return stages_mode_; }
    // Drops the blocks of the traces on screen (and their baseline) materialized but not read since
    // the last call: at the start of a frame, when no view holds a reference into them.
    void trim_stages();
    // The block the views look at (the selected stage's; -1: none): an on-demand pass records all of
    // its rows, so the picture after a toggle needs no recompute. Takes effect at the next pass.
    void set_view_block(int layer) { view_block_ = layer; }
    // The comparison of every stage with the baseline for the Changes tab and the tour: computed here
    // for full traces, in a job (started by the first call) for on-demand ones.
    ChangesState changes() const;

private:
    void launch();
    void refresh_input();
    JobQueue& jobs_;
    void note_nonfinite_weights(const std::string& spec);
    std::shared_ptr<LoadedModel> model_;
    bool want_grads() const;
    std::string model_spec_, image_path_, error_;
    std::string nonfinite_reported_;  // the last pass's Result::nonfinite, reported once
    std::vector<ErrorItem> errors_;
    std::optional<bool> squash_;
    GradMode grad_mode_ = GradMode::Auto;
    int view_block_ = -1;
    Image image_;
    std::optional<SceneTruth> truth_;
    std::string truth_note_;
    Tensor3 input_;
    Options opt_;
    bool dirty_ = true;
    // The forward pass in flight and the result it fills (read once it has finished).
    std::shared_ptr<Job> run_job_;
    std::shared_ptr<Result> run_out_;
    // The model load in flight and what it loads.
    std::shared_ptr<Job> load_job_;
    // What a load job gives: the model, or the question of its head count.
    struct LoadOut {
        std::shared_ptr<LoadedModel> model;
        std::optional<HeadsRequest> heads;
    };
    std::shared_ptr<LoadOut> load_out_;
    std::string load_spec_;
    LoadOverrides load_overrides(int heads);
    bool offline_ = false;
    // The download's progress, written by the load job, read by the UI thread.
    struct DownloadBox {
        std::mutex mu;
        Download now;
        std::atomic<bool> cancel{false};
        void clear();
    };
    std::shared_ptr<DownloadBox> download_ = std::make_shared<DownloadBox>();
    std::optional<HeadsRequest> heads_request_;
    Tensor3 preprocess_for_run(const Image& im) const;
    uint64_t input_version_ = 0;  // bumps with every new input
    uint64_t res_input_version_ = 0;  // the input of the result on screen (its trace may be reused)
    uint64_t run_input_version_ = 0;  // the input of the run in flight
    std::optional<PatchSource> patch_src_;
    // The patched stage of the last run on the patch source, for the options it was computed with.
    struct PatchValues {
        std::shared_ptr<const LoadedModel> model;
        std::string path, stage;
        Options clean;              // the options without interventions it was computed with
        std::optional<bool> squash;
        std::shared_ptr<const Array> values;
    } patch_values_;
    std::shared_ptr<PatchValues> run_patch_;  // the patch values the run in flight computes (null: none)
    const void* packed_model_ = nullptr;  // the model of the last pass started (its first pass packs its weights)
    // The Changes baseline of the last result, reused while model, input and its options stay.
    struct BaseCache {
        std::shared_ptr<const Trace> trace;
        std::shared_ptr<const LoadedModel> model;
        uint64_t input_version = 0;
        Options options;
    } base_;
    Result res_;
    // The trace that was on screen before res_'s: the next pass records into its arrays when nothing
    // else holds it (a ViT-B trace is ~200 MB: fresh pages cost a page fault each, ~10% of a pass).
    std::shared_ptr<const Trace> retired_;
    uint64_t version_ = 0;
    StagesMode stages_mode_ = StagesMode::Auto;
    bool trim_heap_ = false;  // a big pass ended: trim_stages gives the allocator's free memory back
    // The Changes comparison of res_ (trace, base), and the job computing it.
    struct ChangesCache {
        std::shared_ptr<const Trace> base, now;
        std::shared_ptr<std::vector<StageChange>> out;
        std::shared_ptr<Job> job;
    };
    mutable ChangesCache changes_;
};

}  // namespace vit::app
