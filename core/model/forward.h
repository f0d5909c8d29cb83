// The ViT forward pass: one batched implementation for tracing and training, and
// the traced run that records every stage (and, when asked, every gradient).
#pragma once
#include <atomic>
#include <memory>
#include <stdexcept>

#include "core/model/model.h"
#include "core/model/stages.h"
#include "core/model/trace.h"

namespace vit {

// What a forward pass keeps. All: every stage of the table (a traced run, a batch
// of one, shapes exactly as the table's). ForBackward: the stages the backward
// pass reads (the table's `kept`), with a leading batch axis; the others go to
// reused scratch arrays. Output: nothing but the returned output (the sweeps that
// ablate one head or drop one patch at a time and read the logits).
enum class Keep { All, ForBackward, Output };

// Where a pass starts when it reuses the stages before a block (an intervention at block L
// leaves everything before it as it was): the residual stream entering block `layer`.
struct RunFrom {
    int layer = 0;
    const float* stream = nullptr;  // (B, T, D): the trace's stage before block `layer`
    int until = -1;                 // -1: on to the output; else only blocks [layer, until), nothing after
};

struct Workspace;  // scratch arrays reused across runs (defined in pass.h)
struct WorkspaceDeleter { void operator()(Workspace*) const; };
using WorkspacePtr = std::unique_ptr<Workspace, WorkspaceDeleter>;
WorkspacePtr make_workspace();

// Thrown when a run's cancel flag is raised (checked between blocks).
struct Cancelled : std::runtime_error {
    Cancelled() : std::runtime_error("the run was cancelled") {}
};

// Runs the model on a batch x (B, C, S, S), already normalized, recording each stage
// into `acts` through the stage table for (config, opt), in its order (with Keep::All,
// B must be 1). Returns the logits (B, K), which are also the stage `logits`.
// Throws std::invalid_argument if the input does not fit the config, Cancelled when
// *cancel becomes true.
// With `from`, the embedding and the blocks before from->layer are not run (x is not read;
// B is x.shape(0)); with Keep::All the skipped stages are absent from the trace.
// With `record_rows` (Keep::All only), a row whose entry is 0 is computed into a scratch array and
// left absent from the trace (on-demand stages, below). With from->until, the pass returns an
// empty array after block until-1.
const Array& forward_batch(const Weights& w, const Tensor4& x, const Options& opt, Trace& acts, Keep keep,
                           Workspace& ws, const ModelIdentity& model = {},
                           const std::atomic<bool>* cancel = nullptr, const RunFrom* from = nullptr,
                           const std::vector<char>* record_rows = nullptr);
// The concatenated heads (B*T, D) of block l from the last forward_batch (the
// output projection's input, which the backward pass needs).
const Tensor2& workspace_zcat(const Workspace& ws, int l);

// What a traced run computes besides the stages.
struct RunRequest {
    bool grads = false;      // also the backward pass: d logit[grad_class] / d every stage with a gradient
    int grad_class = -1;     // -1: the predicted class (top-1, ties to the lower index)
    ModelIdentity model;     // recorded in the trace ("" name: the config's)
    const std::atomic<bool>* cancel = nullptr;  // raise to stop the run (Cancelled is thrown)
    // Non-null: the stages on demand (Trace::set_on_demand). The pass keeps the stages outside the
    // blocks, the residual stream leaving every block and the block stages of the kinds in
    // `keep_kinds`; the trace holds these weights (the same as the pass's) to recompute any other
    // block stage when it is read. With grads, the backward pass is checkpointed the same way
    // (backward_on_demand, backward.h): the gradients outside the blocks and of the kept rows are
    // kept, any other block gradient is computed when it is read (Trace::grad_at), bit for bit.
    std::shared_ptr<const Weights> on_demand;
    std::vector<StageKind> keep_kinds;
    // On demand: every row of this block recorded too (the block the window shows: its picture needs
    // no recompute after the pass). -1: none.
    int keep_block = -1;
};

// Weights for RunRequest::on_demand that the caller owns and keeps alive as long as the trace is
// read (a command's pass over a model it loaded): a shared_ptr that owns nothing.
inline std::shared_ptr<const Weights> borrowed(const Weights& w) { return {std::shared_ptr<const Weights>(), &w}; }

// A traced run on one image (C, S, S): a batch of one that records every stage, and
// with req.grads, the gradient of every stage that has one, in the same trace.
void forward(const Weights& w, const Tensor3& input, const Options& opt, Trace& trace, const RunRequest& req = {});
Trace run(const Weights& w, const Tensor3& input, const Options& opt = {}, const RunRequest& req = {});

// The first block whose stages can differ between passes with options a and b on the same model and
// input: 0..depth-1, depth when only the stages after the blocks can differ (pooling, a patched
// ln_final.out), or -1 when stages before the blocks can differ too (the switches, the input size,
// dropped patches, a patched embedding). With a == b: depth.
int first_changed_block(const Config& c, const Options& a, const Options& b);

// The residual stream entering block `layer` of a traced pass (layer == depth: leaving the last block),
// its table's stage: ln_pre.out, with_registers, embed.kept or embed before block 0, else resid_post.
StageId stream_into(const StageTable& t, int layer);

// The rows an on-demand pass of `t` keeps (RunRequest::on_demand): every row outside the blocks,
// blocks.L.resid_post, the block rows of the kinds in `also`, and every row of block `block` (-1: none).
std::vector<char> on_demand_rows(const StageTable& t, const std::vector<StageKind>& also, int block = -1);

// A traced pass with `opt` that reuses the stages of `prev` before block `layer` (copied in, as they
// are) and computes the rest from prev's residual stream entering that block. prev must be a pass of
// the same weights and input whose stages before `layer` are those of `opt` (first_changed_block of
// their options is at least `layer`; checked, std::invalid_argument otherwise). The result equals a
// full forward() bit for bit. No gradients (req.grads: std::invalid_argument). With req.on_demand the result is on demand (the rows of
// prev before `layer` that it keeps are copied in; prev may be on demand or full).
void forward_from(const Weights& w, const Trace& prev, const Options& opt, int layer, Trace& out,
                  const RunRequest& req = {});

}  // namespace vit
