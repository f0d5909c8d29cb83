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
// The same for the position embeddings a run added (the trace's pos_embed stage: after any resizing to
// the run's gh x gw grid): (N, N) over its patch rows (the cls and dist rows left out).
// numpy: F.cosine_similarity on pos_embed[pre:] (pre: cls + dist, the rows before the patches)
Tensor2 pos_similarity(const Trace& t);
// A RoPE model (Config::rope, no table) at its native square grid: (N, N), the mean over the d/2 rotation
// pairs of cos(angle_i - angle_j), what q.k keeps of q = k (spread evenly over the pairs) when one is
// turned as patch i and the other as patch j. It depends on where the two patches are relative to each
// other only. numpy: (cos @ cos.T + sin @ sin.T) / (d/2), cos and sin (N, d/2) of the model's angles.
Tensor2 rope_similarity(const Weights& w);

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

// The same for the trace's own run (its grid gh x gw, which may not be square).
float uniform_attn_distance(const Trace& t);

// The mean of attn_distance over several inputs (C, S, S), each run through forward()
// under `opt`. `progress(done, total)` is called after each image; returning false stops
// early (the mean is then over the images done; `done_out` says how many). Throws
// std::invalid_argument for an empty list or when nothing was run.
Tensor2 attn_distance_mean(const Weights& w, const std::vector<Tensor3>& inputs, const Options& opt,
                           const std::function<bool(int, int)>& progress = {}, int* done_out = nullptr);
// The first n images (n <= 0: all) of a dataset as the model's inputs, each through the model's
// preprocessing (preprocess(): a gray image becomes 3 channels for an RGB model, resized and
// cropped to its image size). Throws std::invalid_argument for a model of another channel count.
// h, w > 0: at that input size (a run with Options::image_h, image_w), else the model's own.
std::vector<Tensor3> dataset_inputs(const Dataset& d, int n, const Config& c, int h = 0, int w = 0);

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

// ---------------------------------------------------------------- what the families are studied for
// (core/teach/studied.cpp; the Token norms, Patch features and Self-attention tabs draw these, and
// `vitscope-cli analyze` writes them.)

// (L, T) the L2 norm of every token of blocks.l.resid_post (the residual stream after block l), in
// the trace's token order (cls, registers, dist, patches). High-norm "artifact" tokens of large ViTs
// without registers (Darcet et al. 2024) stand out in it.
// numpy: np.linalg.norm(np.stack([resid_post[l] for l in range(L)]), axis=-1)
Tensor2 token_norms(const Trace& t);

// The tokens whose norm at `layer` is more than `factor` times the median norm of the patch tokens at
// that layer (all tokens, prefix included, are candidates), in index order.
// numpy: np.flatnonzero(norms[l] > factor * np.median(norms[l, prefix:]))
std::vector<int> high_norm_tokens(const Tensor2& norms, int layer, int prefix, float factor);

// The first three principal components of the final patch features, mapped to RGB over the image
// (DINOv2's picture), with foreground / background by the first component.
// The features: the patch rows of ln_final.out when the final norm is over every token (timm cls
// pooling, DINO, DINOv2, DeiT, SigLIP), else of the last block's resid_post (the final norm is then
// over one pooled row: mean pooling, CLIP's ln_post on the cls row).
// Centred over the N patches; the components are the top eigenvectors of the (D, D) covariance
// (LAPACK dsyevr, in double), each signed so that its entry of largest magnitude is positive (the
// sign of a principal component is otherwise arbitrary).
// numpy: X = feats - feats.mean(0); lam, V = np.linalg.eigh(X.T @ X / (N - 1)); V = V[:, ::-1][:, :3]
//        (signed as above); proj = X @ V; var = lam[::-1][:3] / np.trace(X.T @ X / (N - 1));
//        rgb = (proj - proj.min(0)) / (proj.max(0) - proj.min(0)) (0.5 where a component is constant);
//        fg = proj[:, 0] > threshold
struct FeaturePca {
    StageId source;       // the stage whose patch rows were read
    std::string source_name;
    int gh = 0, gw = 0;   // the patch grid (rows of proj are patches, row-major)
    // rows are the grid's patches; a patch the run dropped (an intervention) has NaN and is not foreground
    Tensor2 proj;         // (N, 3) each patch's coordinates on the three components
    Tensor2 rgb;          // (N, 3) each component min-max scaled to 0..1 over the patches
    Tensor1 variance;     // (3) explained-variance ratio of each component
    Tensor1 fg;           // (N) 1 where the first component is above the threshold (foreground), else 0
};
// Throws std::invalid_argument when the trace has fewer than 4 patches or no such stage.
FeaturePca feature_pca(const Trace& t, float threshold = 0.f);

// DINO's self-attention maps: each head's attention from the cls token to the patches at `layer`
// (-1: the last), as recorded (not renormalised), and for each head the mask of the patches that
// hold `keep` of its attention mass over the patches (DINO's visualize_attention.py --threshold):
// the patches sorted by weight, normalised to sum 1, kept where the cumulative sum from the smallest
// exceeds 1 - keep. For a model without a cls token (SigLIP) the row is the pooling probe's
// (head.attn.pattern; `layer` is then ignored).
// numpy: a = pattern[:, 0, pre:]; idx = np.argsort(a, 1, kind='stable'); v = np.take_along_axis(a, idx, 1);
//        cum = np.cumsum(v / v.sum(1, keepdims=True), 1); mask[h, idx[h]] = cum[h] > 1 - keep
struct HeadMaps {
    StageId source;       // blocks.l.attn.pattern or head.attn.pattern
    std::string source_name, query;  // the stage and the query row read ("cls", "the pooling probe")
    int layer = -1, gh = 0, gw = 0;
    float keep = 0;
    Tensor2 attn;         // (H, N); NaN at a patch the run dropped (outside every mask)
    Tensor2 mask;         // (H, N) 1 kept, 0 not
    Tensor1 kept_mass;    // (H) the share of each head's patch attention inside its mask
};
// Throws std::invalid_argument for keep outside (0, 1], a layer out of range, or a model with neither
// a cls token nor a pooling probe.
HeadMaps cls_head_maps(const Trace& t, int layer, float keep);

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
// `pooling` is the one in force (the override, else the model's), as pooling_name() says it: "cls", "mean",
// "cls, then norm" (CLIP), "map" (SigLIP's attention-pooling head); `interventions` is
// interventions_json (core/teach/interventions.h): every file says which ones produced it.
std::string options_json(const Options& opt, const Config& c);

}  // namespace vit
