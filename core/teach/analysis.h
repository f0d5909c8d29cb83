// What the views show, computed in the core: statistics,
// attention maps over the patch grid, and differences between traces.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/model/stages.h"
#include "core/model/trace.h"

namespace vit {

struct Stats {
    float min = 0, max = 0, mean = 0, std = 0;
    size_t argmin = 0, argmax = 0;
    std::vector<float> hist;  // counts per bin over [min, max]
};
Stats stats(const float* x, size_t n, int bins = 40);

enum class Fusion { Mean, Max, Min };

// The maps over the patch grid below have one value per patch of the run's grid (N, row-major).
// With patches dropped (an intervention), a dropped patch has no token and its value is NaN (the
// views draw it as absent); `kept` values, one per patch token of the run in order, go on the grid so.
std::vector<float> on_patch_grid(const Trace& t, const std::vector<float>& kept);

// The cls token's attention to every patch (N), at `layer`, for `head` (-1: mean over heads).
// Throws std::invalid_argument for a model without a cls token (SigLIP: probe_attention).
std::vector<float> cls_attention(const Trace& t, int layer, int head);
// SigLIP's pooling probe's attention to every patch (N), head.attn.pattern, for `head` (-1: mean).
std::vector<float> probe_attention(const Trace& t, int head);
// Attention rollout (Abnar & Zuidema 2020) through blocks 0..upto: per layer fuse
// heads, drop the lowest `discard` fraction of each row's weights (keeping the
// diagonal), A <- (A + I) / 2 renormalised, R <- A R. Returns the cls row over patches (N).
std::vector<float> attention_rollout(const Trace& t, int upto, Fusion f, float discard);
// Gradient-weighted rollout (Chefer et al. 2021): A_bar = mean_h relu(dL/dA * A),
// R <- R + A_bar R from R = I, through blocks 0..upto. The trace must hold its gradients
// (a run with RunRequest::grads); throws std::invalid_argument otherwise.
std::vector<float> grad_rollout(const Trace& t, int upto);

// A stage of `base` as it compares with the same stage of `now`: as it is when the shapes agree;
// when `now` dropped patches that `base` kept (an intervention), base's rows, columns or per-head
// rows of the tokens `now` kept (every token axis: the axes whose length is the run's token count).
// Empty when they do not compare (absent, or other shapes).
Array comparable_base(const Trace& base, const Trace& now, StageId id);

// Per-stage L2 norm of (b - a) and of a, for stages present in both that compare (comparable_base:
// with patches dropped in `now`, over the tokens it kept). Every stage of on-demand traces too: their
// blocks are recomputed one at a time into traces of this call's own (their caches are not touched,
// so a job may call it), `progress(block, depth)` told as each block starts.
struct StageChange { StageId id; std::string name; double diff_norm, base_norm; };
std::vector<StageChange> trace_changes(const Trace& base, const Trace& now,
                                       const std::function<void(int, int)>& progress = {});

// Why a run with `now` equals the run with `base` at every stage (the Changes view found nothing that
// moved), in words a learner can check: "every LayerNorm of this model has gamma = 1 and beta = 0 ...".
// Names each switch that differs and why it cannot act on this model and input; "" when `now` equals
// `base`. The words never claim an effect: they explain its absence.
std::string why_nothing_changed(const Weights& w, const Options& now, const Options& base);

}  // namespace vit
