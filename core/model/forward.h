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

struct Workspace;  // scratch arrays reused across runs (defined in forward.cpp)
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

// ---- Every stage on demand (issue 22): a traced pass that keeps what is read across layers and
// recomputes any other stage when it is asked for, bit for bit as a full trace records it.
//
// The pass keeps every stage outside the blocks (the embedding, the pooling, the head: a few rows
// of tokens), the residual stream leaving every block (blocks.L.resid_post) and the block stages
// of the kinds in `also` (for example the attention patterns that rollout reads); a block's other
// stages are computed into scratch arrays and dropped. A stage of block L is materialized by
// running block L alone from the kept residual stream entering it (RunFrom with until = L + 1),
// which is the same code on the same numbers as the full pass.
class OnDemandTrace {
public:
    // `w` must outlive this object (it recomputes blocks with it).
    OnDemandTrace(const Weights& w, const Tensor3& input, const Options& opt, const RunRequest& req = {},
                  std::vector<StageKind> also = {});
    const Trace& kept() const { return kept_; }      // the kept rows (the others are absent)
    const StageTable& table() const { return kept_.table(); }
    size_t size() const { return kept_.table().size(); }
    bool is_kept(size_t row) const { return kept_.index(kept_.table()[row].id) >= 0; }
    // Any row of the table: the kept array, or (recomputing its block when it is not the block
    // held) the block's array. The reference stays valid until another block is materialized.
    const Array& at(size_t row);
    const Array& get(StageId id);
    // The block held (-1: none) and a way to drop it.
    int block_held() const { return held_; }
    void release_block();
    size_t bytes() const { return kept_.bytes() + block_.bytes() + grad_bytes(); }

    // ---- Gradients on demand (req.grads; the model and options must pass backward_unsupported):
    // the same checkpointing. The constructor runs the backward pass from the last block to the
    // first, recomputing each block's stages from the kept stream entering it (as at() does), and
    // keeps only the gradient of the residual stream leaving every block (blocks.L.resid_post) and
    // of the stages outside the blocks, in kept(). A block's other gradients are computed when
    // asked for: its stages recomputed, its backward run from the kept gradient of the stream
    // leaving it. Each equals the full traced run's (run() with req.grads) bit for bit; the weights'
    // gradients are not computed.
    bool has_grads() const { return kept_.has_grads(); }
    int grad_class() const { return kept_.grad_class(); }
    // Any row's gradient (null for a row without one, or without req.grads). The pointer stays valid
    // until another block's gradients are materialized.
    const Array* grad_at(size_t row);
    const Array* grad(StageId id);
    int grads_held() const { return grads_held_; }  // the block whose gradients are held (-1: none)

private:
    void backward_kept(const RunRequest& req);  // the checkpointed backward pass (backward.cpp)
    size_t grad_bytes() const;
    const Weights& w_;
    Trace kept_, block_;
    int held_ = -1;
    ModelIdentity model_;
    std::vector<Array> block_grads_;  // by row: the gradients of block grads_held_'s stages
    std::vector<char> block_graded_;
    int grads_held_ = -1;
};

}  // namespace vit
