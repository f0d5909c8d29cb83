// What the ViT paper shows about a model, computed from its weights and a trace:
// the principal components of the patch-embedding filters, the similarity of the
// position embeddings, the mean attention distance, any token's attention row,
// the logit lens, and "the math of one cell" (the numbers that produced one value
// of a recorded stage). The app draws these; `vitscope-cli analyze` writes them.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/model/trace.h"

namespace vit {

struct Dataset;  // dataset.h

// ---------------------------------------------------------------- weights alone

// The top k = min(28, C*P*P) principal components of the D patch-embedding filters
// (the rows of patch_w (D, C*P*P), centred over the D rows), as unit-norm filters.
// Computed by LAPACK's dsyevd (OpenBLAS) on the (CPP, CPP) covariance, in double.
// Sign convention: each component's entry of largest magnitude is positive (the first
// such entry on a tie). Components past the rank of the centred weight (at most D - 1)
// have explained variance ~0 and an arbitrary direction within that null space.
struct EmbedFilters {
    Tensor4 filters;   // (k, C, P, P)
    Tensor1 variance;  // (k) explained-variance ratio: eigenvalue / sum of all CPP eigenvalues
};
// numpy: Wc = W - W.mean(0); U, S, Vt = np.linalg.svd(Wc); filters = Vt[:k].reshape(k, C, P, P),
//        variance = S[:k]**2 / (S**2).sum()
EmbedFilters embed_filters(const Weights& w, int k = 28);

// (N, N) cosine similarity between the position embeddings of the N patch tokens
// (row 0, the cls position, excluded), row-major patch order. A zero vector gives 0.
// torch: F.cosine_similarity(pos[1:, None, :], pos[None, 1:, :], dim=-1)
Tensor2 pos_similarity(const Weights& w);

// ---------------------------------------------------------------- one traced image

// (L, H) mean attention distance in input pixels: for each layer and head,
// mean over patch queries q of sum over patch keys k of pattern[h, 1+q, 1+k] * |centre(q) - centre(k)|,
// centres P pixels apart on the G x G grid (cls row and column dropped, weights not renormalised).
// numpy: dist = P * np.hypot(r[:, None] - r[None], c[:, None] - c[None]);
//        (pattern[:, 1:, 1:] * dist).sum(-1).mean(-1)
// The grid and patch size are the trace's own (its stage table's config). With patches dropped (an
// intervention), the patches kept: their rows and columns of the pattern and of dist.
Tensor2 attn_distance(const Trace& t);

// The mean attention distance a head would have if it spread its weight evenly over all N patches
// (none on cls): the mean distance between two patch centres, a reference for attn_distance.
// numpy: dist.mean()   (the same dist as attn_distance's)
float uniform_attn_distance(const Config& c);

// The mean of attn_distance over several inputs (C, S, S), each run through forward()
// under `opt`. `progress(done, total)` is called after each image; returning false stops
// early (the mean is then over the images done; `done_out` says how many). Throws
// std::invalid_argument for an empty list or when nothing was run.
Tensor2 attn_distance_mean(const Weights& w, const std::vector<Tensor3>& inputs, const Options& opt,
                           const std::function<bool(int, int)>& progress = {}, int* done_out = nullptr);
// The first n images (n <= 0: all) of a dataset as the model's inputs, each through the model's
// preprocessing (preprocess(): a gray image becomes 3 channels for an RGB model, resized and
// cropped to its image size). Throws std::invalid_argument for a model of another channel count.
std::vector<Tensor3> dataset_inputs(const Dataset& d, int n, const Config& c);

// The attention row of query token `query` (0 = cls, 1..N = patches) over the N patches,
// at `layer`, for `head` (-1: the mean over heads): pattern[head, query, 1:]. With patches dropped,
// `query` is a token of the run's shorter sequence and the row is on the full grid, NaN at the
// dropped patches (on_patch_grid, analysis.h).
Tensor1 attention_from(const Trace& t, int layer, int head, int query);

// (L, K) logit lens: for each layer l, softmax(head(ln_final(x_l))), x_l the cls row of
// blocks.l.resid_post (cls pooling) or the mean of its patch rows (mean pooling), with
// the options the trace was computed with. The last row equals the trace's `probs` bit
// for bit (the same kernels in the same order). `w` must be the trace's model's weights
// (checked by shape).
// torch: [model.heads(model.encoder.ln(h[:, 0])).softmax(-1) for h in hooked resid_posts]
Tensor2 logit_lens(const Weights& w, const Trace& t);

// ---------------------------------------------------------------- the math of one cell

// One term of a sum written out: a * b = value (b is 1 where there is only a).
struct MathTerm {
    std::string label;  // "q[3]*k[3]", "attn[0,5]*v[5,2]", "pooled[7]*W[2,7]"
    double a = 0, b = 0, value = 0;
};
struct CellMath {
    StageId stage;
    std::string name;           // "blocks.1.attn.scores"
    std::vector<size_t> index;  // the cell, one index per axis of the stage
    std::string formula;        // "scores[h, i, j] = sum_t q[h, i, t] * k[h, j, t] / sqrt(d)"
    std::vector<std::string> lines;  // the computation with the numbers, one step a line
    std::vector<MathTerm> terms;     // every term of the sum (all of them, in order), if there is one
    double value = 0;     // the result recomputed (in double) from the recorded inputs shown
    float recorded = 0;   // the trace's value at `index`
    // The magnitude the float computation's rounding is relative to (e.g. the sum of |terms|
    // of a dot product): |value - recorded| <= 1e-6 * max(|recorded|, scale) is the check.
    double scale = 0;
};

// Explains one cell of a stage whose table row has a cell rule (StageInfo::cell: attn.scores,
// attn.pattern, attn.z, any LayerNorm's .out and .normalized, mlp.post, logits), with the
// options the trace was computed with. `w` must be the trace's model's weights. Throws
// std::invalid_argument naming the stage (no rule, or absent from the trace) or the index
// (wrong rank or out of range). Writes at most `max_terms` terms into `lines` (the largest
// by magnitude, then the rest summed); `terms` has them all.
CellMath cell_math(const Weights& w, const Trace& t, StageId stage, const std::vector<size_t>& index,
                   int max_terms = 16);

// ---------------------------------------------------------------- options in files

// The options in force as a JSON object, the text of the `__options__` entry that
// `vitscope-cli trace`/`analyze` write into their .npz (a 0-d numpy unicode array:
// json.loads(str(np.load(f)["__options__"]))):
// {"elementwise_affine": true, "unbiased": false, "pooling": "cls",
//  "bug_scale_after_softmax": false, "bug_reshape_patches": false,
//  "interventions": {"heads": [], "sublayers": [], "dropped": [], "patch": null}}
// `pooling` is the one in force (the override, else the model's); `interventions` is
// interventions_json (core/teach/interventions.h): every file says which ones produced it.
std::string options_json(const Options& opt, const Config& c);

}  // namespace vit
