// What the model uses, measured by intervening (issue 21): knock out one head at a time (head
// importance) or drop one patch at a time (occlusion) and see how far the output moves from the
// clean run's; and the source of an activation patch (a stage of a run on another input).
//
// A sweep recomputes only what changed: an ablation in block L starts from the clean run's residual
// stream entering block L (RunFrom), and a dropped patch from the clean run's stream entering block 0
// with that patch's row removed (every stage before the blocks is computed row by row); its passes
// record nothing (Keep::Output). Both give the same bits as full passes (tests/test_interventions.cpp).
#pragma once
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/model/trace.h"

namespace vit {

// What a sweep measures against the clean run: for a model with logits, the drop of the logit of
// the class the clean run predicts, clean[c] - intervened[c]; for an embedding model, how far the
// embedding turns, 1 - cosine(clean, intervened).
struct SweepTarget {
    bool logits = true;
    int cls = -1;               // the class the clean run predicts (top-1, ties to the lower index); -1: embedding
    std::vector<float> clean;   // the clean run's output: its logits (K) or its embedding (E)
    // The effect of a pass whose output (logits or embedding, the size of `clean`) is `out`.
    double effect(const float* out) const;
    // "logit[3] (clean) - logit[3] (intervened)" or "1 - cosine(clean embedding, intervened embedding)"
    std::string measure() const;
};
// From a clean trace: its logits and predicted class, or its embedding.
SweepTarget sweep_target(const Trace& clean);

struct SweepControl {
    // Called after each pass with (done, total); returning false stops the sweep (Cancelled is thrown).
    std::function<bool(int, int)> progress;
    const std::atomic<bool>* cancel = nullptr;  // raised: the next pass throws Cancelled
    // false: every intervention a full traced pass from the input (the naive cost: benchmarks, and the
    // tests that check the reuse gives the same numbers).
    bool reuse = true;
};

struct SweepResult {
    Array values;         // head_importance: (L, H); occlusion: (N)
    SweepTarget target;
    Options options;      // the clean options every pass starts from (the options without interventions)
    int passes = 0;       // passes run, the clean one excluded
    double blocks = 0;    // encoder blocks computed by those passes (full passes: passes x depth)
};

// (L, H): for each block l and head h, the effect of zero-ablating head h of block l alone
// (blocks.l.attn.z's slice h set to 0) on the clean run: the options `opt` without their
// interventions (Options::clean), on the input x (C, H, W). `clean`, when given, must be a trace of
// those options on x (it saves the clean pass). Throws Cancelled when stopped.
SweepResult head_importance(const Weights& w, const Tensor3& x, const Options& opt, const SweepControl& ctl = {},
                            const Trace* clean = nullptr);
// (N): for each patch p of the run's grid (row-major), the effect of dropping patch p alone
// (Options::iv.dropped = {p}) on the clean run. Needs at least two patches.
SweepResult occlusion(const Weights& w, const Tensor3& x, const Options& opt, const SweepControl& ctl = {},
                      const Trace* clean = nullptr);

// The source of activation patching: `stage` of a pass on `source` (C, H, W at the run's input size)
// with the options of `opt` and no interventions, to replace the same stage of a pass with `opt`
// (all its token rows, or those in `tokens`: token indices of the stage, cls = 0). Throws
// std::invalid_argument naming the stage or the token when the stage cannot be patched, is not in
// the model, has another shape in the pass with `opt` (dropped patches shorten every stage after
// embed), or has no such token.
ActivationPatch make_activation_patch(const Weights& w, const Tensor3& source, const Options& opt, StageId stage,
                                      std::vector<int> tokens, std::string source_name);

// The intervention flags of the command lines (vitscope-cli trace / analyze, vitscope), as typed.
struct InterventionFlags {
    std::vector<std::string> ablate_heads;  // --ablate-head L.H[:mean], repeatable
    std::vector<std::string> ablate;        // --ablate blocks.L.attn.out | blocks.L.mlp.out, repeatable
    std::string drop_patches;               // --drop-patches i,j,...
    std::string patch_from;                 // --patch-from IMAGE | X.npy
    std::string patch_stage;                // --patch-stage STAGE
    std::string patch_tokens;               // --patch-tokens i,j,...
    bool any() const {
        return !ablate_heads.empty() || !ablate.empty() || !drop_patches.empty() || !patch_from.empty() ||
               !patch_stage.empty() || !patch_tokens.empty();
    }
};
// The flags checked against the model `c` and the run's options `opt` (its input size), written
// into opt.iv; the activation patch's source is run here (the image or .npy of --patch-from,
// prepared as the run's input: `squash` as --squash). A bad value throws UsageError (the command
// lines exit 2) whose message starts with the flag; a source file that cannot be read, FileError.
// run_source false: the patch is described but has no values (for the stage table alone: `info`).
void interventions_from_flags(const InterventionFlags& f, const Weights& w, Options& opt, bool squash = false,
                              bool run_source = true);

// Parses "i,j,k" (non-negative integers) into a sorted list without repeats; throws
// std::invalid_argument saying what is wrong (for the command line and the window's fields).
std::vector<int> parse_index_list(const std::string& text);
// "L.H" or "L.H:mean" (a head ablation); throws std::invalid_argument.
HeadAblation parse_head_ablation(const std::string& text);
// "blocks.L.attn.out" or "blocks.L.mlp.out" (a sub-layer ablation); throws std::invalid_argument.
SublayerAblation parse_sublayer_ablation(const std::string& text);
// The interventions as a JSON object (the "interventions" field of __options__):
// {"heads": [{"layer": 1, "head": 2, "mean": false}], "sublayers": ["blocks.0.mlp.out"],
//  "dropped": [3, 4], "patch": {"stage": "blocks.1.resid_post", "tokens": [0], "source": "cat.png"} or null}
std::string interventions_json(const Interventions& iv);

}  // namespace vit
