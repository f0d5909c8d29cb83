// The paper's pictures as numbers (see teach.h). Each computation is written as
// xtensor expressions on the containers and views, and names the numpy/PyTorch
// line it equals. Two exceptions, both for bit-exactness with the forward pass:
// the logit lens runs the forward's own LayerNorm, Linear and softmax kernels
// (ops::layernorm, ops::linear, ops::softmax_rows), so its last row equals
// `probs` exactly; and the eigen solver is LAPACK's (OpenBLAS ships it).
#include "core/teach/teach.h"
#include "core/model/rope.h"

#include "core/teach/analysis.h"
#include "core/teach/interventions.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>
#include <xtensor/xadapt.hpp>
#include <xtensor/xbroadcast.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xreducer.hpp>
#include <xtensor/xsort.hpp>
#include <xtensor/xview.hpp>

#include "core/io/dataset.h"
#include "core/model/forward.h"
#include "core/kernels/ops.h"

// LAPACK (Fortran calling convention, as OpenBLAS exports it): the eigenvalues and
// eigenvectors of a symmetric matrix by divide and conquer. The two trailing size_t
// are gfortran's hidden lengths of the character arguments.
extern "C" void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
                        double* work, const int* lwork, int* iwork, const int* liwork, int* info, size_t, size_t);

namespace vit {

namespace {

using Tensor2d = xt::xtensor<double, 2>;

std::string num(double v) {
    char b[40];
    std::snprintf(b, sizeof b, "%.7g", v);
    return b;
}
std::string idx_str(const std::vector<size_t>& ix) {
    std::string s = "[";
    for (size_t i = 0; i < ix.size(); ++i) s += (i ? ", " : "") + std::to_string(ix[i]);
    return s + "]";
}

const Array& pattern_of(const Trace& t, int l) {
    const StageId id{StageKind::AttnPattern, l};
    const Array* p = t.find(id);
    if (!p) throw std::invalid_argument("the trace has no " + t.table().name(id));
    if (p->dimension() != 3 || p->shape(1) != p->shape(2))
        throw std::invalid_argument(t.table().name(id) + " has shape " + shape_str_of(*p) +
                                    ", not (heads, tokens, tokens)");
    return *p;
}

// The weights must be the ones the trace was computed with (shapes at least).
void check_weights_fit(const Weights& w, const Trace& t) {
    const Config& a = w.cfg;
    const Config& b = t.table().config();
    if (a.width != b.width || a.depth != b.depth || a.heads != b.heads || a.mlp != b.mlp || a.classes != b.classes ||
        a.patch != b.patch || a.channels != b.channels)
        throw std::invalid_argument("the weights given (" + a.describe() + ") are not those of the model the trace "
                                    "was computed with (" + b.describe() + ")");
}

// Patch-centre distances in input pixels: (N, N), P * |(row, col)_q - (row, col)_k| on a gh x gw grid.
// numpy: r, c = np.divmod(np.arange(N), gw); P * np.hypot(r[:, None] - r, c[:, None] - c)
Tensor2 patch_distances(size_t gh, size_t gw, size_t P) {
    const size_t N = gh * gw;
    xt::xtensor<float, 1> idx = xt::arange<float>(float(N));
    xt::xtensor<float, 1> r = xt::floor(idx / float(gw)), c = idx - r * float(gw);
    auto dr = xt::view(r, xt::all(), xt::newaxis()) - xt::view(r, xt::newaxis(), xt::all());
    auto dc = xt::view(c, xt::all(), xt::newaxis()) - xt::view(c, xt::newaxis(), xt::all());
    return float(P) * xt::sqrt(dr * dr + dc * dc);
}

}  // namespace

// ---------------------------------------------------------------- weights alone

EmbedFilters embed_filters(const Weights& w, int kmax) {
    const Config& c = w.cfg;
    const size_t D = w.patch_w.shape(0), CPP = w.patch_w.shape(1), C = c.channels, P = c.patch;
    if (CPP != C * P * P)
        throw std::invalid_argument("patch_embed weight has shape " + shape_str_of(w.patch_w) + ", expected (" +
                                    std::to_string(c.width) + ", " + std::to_string(C * P * P) + ")");
    if (D < 2) throw std::invalid_argument("patch_embed weight has fewer than 2 filters: no principal components");
    const size_t k = std::min(CPP, size_t(std::max(kmax, 1)));

    // numpy: Wc = W - W.mean(0); cov = Wc.T @ Wc / (D - 1)    (in double)
    Tensor2d Wc = xt::cast<double>(w.patch_w);
    Wc -= xt::view(xt::mean(Wc, {0}), xt::newaxis(), xt::all());
    Tensor2d cov = Tensor2d::from_shape({CPP, CPP});
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(CPP), int(CPP), int(D), 1.0 / double(D - 1), Wc.data(),
                int(CPP), Wc.data(), int(CPP), 0.0, cov.data(), int(CPP));

    // numpy: lam, V = np.linalg.eigh(cov)   (ascending; column j of V is eigenvector j)
    // The matrix is symmetric, so its row-major storage is its column-major storage too;
    // LAPACK returns eigenvector j in the j-th column, i.e. contiguous at a[j * n].
    const int n = int(CPP);
    xt::xtensor<double, 1> lam = xt::zeros<double>({CPP});
    int info = 0, lwork = -1, liwork = -1, iwq = 0;
    double wq = 0;
    dsyevd_("V", "U", &n, cov.data(), &n, lam.data(), &wq, &lwork, &iwq, &liwork, &info, 1, 1);
    if (info != 0) throw std::runtime_error("LAPACK dsyevd workspace query failed (info " + std::to_string(info) + ")");
    lwork = int(wq);
    liwork = iwq;
    std::vector<double> work(size_t(std::max(lwork, 1)));
    std::vector<int> iwork(size_t(std::max(liwork, 1)));
    dsyevd_("V", "U", &n, cov.data(), &n, lam.data(), work.data(), &lwork, iwork.data(), &liwork, &info, 1, 1);
    if (info != 0) throw std::runtime_error("LAPACK dsyevd did not converge (info " + std::to_string(info) + ")");

    // variance ratio: lam[::-1][:k] / lam.sum()   (tiny negative eigenvalues from rounding count as 0)
    const double total = xt::sum(xt::maximum(lam, 0.0))();
    EmbedFilters out;
    out.filters = Tensor4::from_shape({k, C, P, P});
    out.variance = Tensor1::from_shape({k});
    auto comps = xt::adapt(out.filters.data(), k * CPP, xt::no_ownership(), std::array<size_t, 2>{k, CPP});
    for (size_t j = 0; j < k; ++j) {
        const size_t col = CPP - 1 - j;  // largest first
        auto v = xt::adapt(cov.data() + col * CPP, CPP, xt::no_ownership(), std::array<size_t, 1>{CPP});
        // Sign: the entry of largest magnitude is positive (first one on a tie).
        const size_t big = size_t(xt::argmax(xt::abs(v))());
        const double sgn = v(big) < 0 ? -1.0 : 1.0;
        const double norm = std::sqrt(xt::sum(v * v)());  // LAPACK's are unit norm already
        xt::view(comps, j, xt::all()) = xt::cast<float>(v * (sgn / norm));
        out.variance(j) = total > 0 ? float(std::max(lam(col), 0.0) / total) : 0.f;
    }
    return out;
}

Tensor2 pos_similarity(const Weights& w) {
    if (!w.cfg.pos_table)
        throw std::invalid_argument("the model has no position table: its positions are rotations of q and k (RoPE)");
    const size_t T = w.pos.shape(0), D = w.pos.shape(1), pre = size_t(w.cfg.pos_prefix());
    if (T <= pre) throw std::invalid_argument("pos_embed has shape " + shape_str_of(w.pos) + ": no patch positions");
    const size_t N = T - pre;
    // pos[pre:] (N, D), the grid's rows (cls and dist positions left out); G = pos @ pos.T, norms |pos_i|
    const float* p = w.pos.data() + pre * D;
    Tensor2 gram = Tensor2::from_shape({N, N});
    ops::gemm(false, true, int(N), int(N), int(D), 1.f, p, int(D), p, int(D), 0.f, gram.data(), int(N));
    auto patches = xt::adapt(p, N * D, xt::no_ownership(), std::array<size_t, 2>{N, D});
    Tensor1 norm = xt::sqrt(xt::sum(patches * patches, {1}));
    // torch: F.cosine_similarity(a, b) = a.b / max(|a| |b|, 1e-8)
    return gram / xt::maximum(xt::view(norm, xt::all(), xt::newaxis()) * xt::view(norm, xt::newaxis(), xt::all()),
                              1e-8f);
}

Tensor2 rope_similarity(const Weights& w) {
    const Config& c = w.cfg;
    if (!c.rope) throw std::invalid_argument("the model has no rotary position embeddings (RoPE)");
    const RopeAngles a = rope_angles(c, w.rope_periods, run_dims(c, Options{}));
    const size_t N = a.cos.size() / std::max<size_t>(1, a.half), h = a.half;
    Tensor2 out = Tensor2::from_shape({N, N});
    for (size_t i = 0; i < N; ++i)
        for (size_t j = 0; j < N; ++j) {
            double s = 0;
            for (size_t k = 0; k < h; ++k)
                s += double(a.cos[i * h + k]) * a.cos[j * h + k] + double(a.sin[i * h + k]) * a.sin[j * h + k];
            out(i, j) = float(s / double(h));
        }
    return out;
}

// ---------------------------------------------------------------- one traced image

Tensor2 attn_distance(const Trace& t) {
    const Config& c = t.table().config();
    const RunDims& rd = t.table().dims();
    const size_t P = c.patch, pre = size_t(rd.prefix), T = size_t(rd.T);
    const int L = t.depth();
    if (L == 0) throw std::invalid_argument("the model has no blocks: no attention");
    Tensor2 dist = patch_distances(size_t(rd.gh), size_t(rd.gw), P);
    if (rd.dropped()) {  // dropped patches have no token: the distances between the patches kept
        const auto k = xt::adapt(rd.kept, {rd.kept.size()});
        dist = xt::view(xt::view(dist, xt::keep(k), xt::all()), xt::all(), xt::keep(k));
    }
    const size_t H = pattern_of(t, 0).shape(0);
    Tensor2 out = xt::zeros<float>({size_t(L), H});
    for (int l = 0; l < L; ++l) {
        const Array& pat = pattern_of(t, l);
        if (pat.shape(0) != H || pat.shape(1) != T)
            throw std::invalid_argument(t.table().name({StageKind::AttnPattern, l}) + " has shape " +
                                        shape_str_of(pat) + ", the model has " + std::to_string(T) + " tokens");
        // numpy: (pattern[:, pre:, pre:] * dist).sum(-1).mean(-1)   (pre: cls, registers, dist)
        auto pp = xt::view(pat, xt::all(), xt::range(pre, T), xt::range(pre, T));
        xt::view(out, l, xt::all()) = xt::mean(xt::sum(pp * dist, {2}), {1});
    }
    return out;
}

float uniform_attn_distance(const Config& c) {
    if (c.patch <= 0 || c.grid() <= 0) throw std::invalid_argument("model '" + c.name + "' has no patch grid");
    return xt::mean(patch_distances(size_t(c.grid()), size_t(c.grid()), size_t(c.patch)))();
}

float uniform_attn_distance(const Trace& t) {
    const RunDims& rd = t.table().dims();
    return xt::mean(patch_distances(size_t(rd.gh), size_t(rd.gw), size_t(t.table().config().patch)))();
}

Tensor2 attn_distance_mean(const Weights& w, const std::vector<Tensor3>& inputs, const Options& opt,
                           const std::function<bool(int, int)>& progress, int* done_out) {
    if (inputs.empty()) throw std::invalid_argument("attn_distance_mean: no inputs");
    Tensor2 acc;
    Trace t;  // reused: every run records the same names and shapes, so no reallocation
    int done = 0;
    const int total = int(inputs.size());
    for (const Tensor3& x : inputs) {
        forward(w, x, opt, t);
        Tensor2 d = attn_distance(t);
        if (done == 0) acc = d;
        else acc += d;
        ++done;
        if (progress && !progress(done, total)) break;
    }
    if (done_out) *done_out = done;
    if (done == 0) throw std::invalid_argument("attn_distance_mean: nothing was run");
    return acc / float(done);
}

std::vector<Tensor3> dataset_inputs(const Dataset& d, int n, const Config& c, int h, int w) {
    // Each image through the model's own preprocessing (dataset_input -> preprocess): for a
    // 3-channel model the gray plane is repeated (PIL's convert("RGB")), then resized and
    // cropped as the model's config says, as a gray PNG of the same image would be.
    if (c.channels != 1 && c.channels != 3)
        throw std::invalid_argument("model '" + c.name + "' takes " + std::to_string(c.channels) +
                                    " channels; grayscale images convert to 1 or 3");
    const int m = n <= 0 ? d.n : std::min(n, d.n);
    std::vector<Tensor3> v;
    v.reserve(size_t(m));
    for (int i = 0; i < m; ++i) v.push_back(dataset_input(d, i, c, h, w));
    return v;
}

Tensor1 attention_from(const Trace& t, int layer, int head, int query) {
    const int L = t.depth();
    if (layer < 0 || layer >= L)
        throw std::invalid_argument("layer " + std::to_string(layer) + " out of range (the model has " +
                                    std::to_string(L) + " blocks)");
    const Array& p = pattern_of(t, layer);
    const size_t H = p.shape(0), T = p.shape(1), pre = size_t(t.table().dims().prefix);
    if (head < -1 || head >= int(H))
        throw std::invalid_argument("head " + std::to_string(head) + " out of range (-1 for the mean, 0.." +
                                    std::to_string(H - 1) + ")");
    if (query < 0 || query >= int(T))
        throw std::invalid_argument("query token " + std::to_string(query) + " out of range (" +
                                    token_range_text(t) + ")");
    // torch: pattern[head, query, pre:]  or  pattern[:, query, pre:].mean(0)   (the patch keys)
    Tensor1 row = head >= 0 ? Tensor1(xt::view(p, head, query, xt::range(pre, T)))
                            : Tensor1(xt::mean(xt::view(p, xt::all(), query, xt::range(pre, T)), {0}));
    if (!t.table().dims().dropped()) return row;
    const std::vector<float> grid = on_patch_grid(t, std::vector<float>(row.begin(), row.end()));
    return xt::adapt(grid, {grid.size()});
}

Tensor2 logit_lens(const Weights& w, const Trace& t) {
    check_weights_fit(w, t);
    const Options& opt = t.options();
    const Config& c = w.cfg;
    if (!c.has_logits())
        throw std::invalid_argument("the logit lens reads class scores, and this model (" +
                                    std::string(family_label(c.family)) + ") has no classifier: its output is an embedding");
    const size_t D = c.width, K = c.classes, T = size_t(t.table().dims().T), pre = size_t(t.table().dims().prefix);
    const int L = t.depth();
    const Pooling pool = opt.pooling_for(c);
    const bool distilled = c.head == Head::Distilled;
    const size_t dist_row = 1 + size_t(c.registers);
    Tensor2 out = Tensor2::from_shape({size_t(L), K});
    Tensor2 x = Tensor2::from_shape({1, D}), normed = Tensor2::from_shape({1, D}), logits = Tensor2::from_shape({1, K});
    Tensor2 logits2 = Tensor2::from_shape({1, K});
    for (int l = 0; l < L; ++l) {
        const StageId id{StageKind::ResidPost, l};
        const Array& r = t.get(id);
        if (r.size() != T * D)
            throw std::invalid_argument(t.table().name(id) + " has shape " + shape_str_of(r) + ", the model's is " +
                                        shape_str({T, D}));
        auto r3 = xt::adapt(r.data(), T * D, xt::no_ownership(), std::array<size_t, 3>{1, T, D});
        auto lens_of = [&](size_t row, const Tensor2& W, const Tensor1& bias, Tensor2& into) {
            if (pool == Pooling::NormMean) {  // the final norm on every row, then the mean of the patch rows
                Tensor2 rows = Tensor2::from_shape({T, D});
                ops::layernorm(rows.data(), nullptr, nullptr, nullptr, r.data(), opt.affine ? w.ln_f.g.data() : nullptr,
                               opt.affine ? w.ln_f.b.data() : nullptr, int(T), int(D), c.eps, opt.unbiased);
                auto rows3 = xt::adapt(rows.data(), T * D, xt::no_ownership(), std::array<size_t, 3>{1, T, D});
                xt::noalias(normed) = xt::mean(xt::view(rows3, xt::all(), xt::range(pre, T), xt::all()), {1});
                ops::linear(into.data(), normed.data(), W.data(), bias.data(), 1, int(D), int(K));
                return;
            }
            if (pool == Pooling::Mean)  // x_l = resid_post[pre:].mean(0), the same reduction the forward's pooling runs
                xt::noalias(x) = xt::mean(xt::view(r3, xt::all(), xt::range(pre, T), xt::all()), {1});
            else  // x_l = resid_post[row] (the cls row; DeiT's dist row for its second head)
                xt::noalias(x) = xt::view(r3, xt::all(), row, xt::all());
            // torch: F.layer_norm(x_l, (D,), norm.weight, norm.bias, eps) (the options' variant), then
            // head(.) -- through the forward's own kernels, so the last row is `probs` exactly.
            ops::layernorm(normed.data(), nullptr, nullptr, nullptr, x.data(), opt.affine ? w.ln_f.g.data() : nullptr,
                           opt.affine ? w.ln_f.b.data() : nullptr, 1, int(D), c.eps, opt.unbiased);
            ops::linear(into.data(), normed.data(), W.data(), bias.data(), 1, int(D), int(K));
        };
        lens_of(0, w.head_w, w.head_b, logits);
        if (distilled) {  // DeiT: (head(cls) + head_dist(dist)) / 2
            lens_of(dist_row, w.head_dist_w, w.head_dist_b, logits2);
            logits = (logits + logits2) / 2.f;
        }
        ops::softmax_rows(out.data() + size_t(l) * K, logits.data(), 1, int(K));
    }
    return out;
}

// ---------------------------------------------------------------- the math of one cell

namespace {

std::string token_name(size_t i, const Trace& t) {
    return token_label(t, int(i), true);
}

// Lines for a sum of terms: the largest `max_terms` by magnitude (in index order), the rest summed.
void term_lines(CellMath& m, int max_terms, bool exp_form = false) {
    max_terms = std::max(max_terms, 0);
    const size_t n = m.terms.size();
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    const bool all = int(n) <= max_terms;
    if (!all) {
        std::partial_sort(order.begin(), order.begin() + max_terms, order.end(), [&](size_t a, size_t b) {
            return std::fabs(m.terms[a].value) > std::fabs(m.terms[b].value);
        });
        order.resize(size_t(max_terms));
        std::sort(order.begin(), order.end());
    }
    double shown = 0;
    for (size_t i : order) {
        const MathTerm& t = m.terms[i];
        m.lines.push_back("  " + t.label + " = " + (exp_form ? "exp(" + num(t.a) + ")" : num(t.a) + " * " + num(t.b)) +
                          " = " + num(t.value));
        shown += t.value;
    }
    if (!all) {
        double total = 0;
        for (auto& t : m.terms) total += t.value;
        m.lines.push_back("  + " + std::to_string(n - order.size()) + " smaller terms = " + num(total - shown) +
                          " (the " + std::to_string(order.size()) + " largest of " + std::to_string(n) +
                          " terms shown)");
    }
}

double sum_abs(const std::vector<MathTerm>& v) {
    double s = 0;
    for (auto& t : v) s += std::fabs(t.value);
    return s;
}
double sum_of(const std::vector<MathTerm>& v) {
    double s = 0;
    for (auto& t : v) s += t.value;
    return s;
}

const Array& need(const Trace& t, StageId id, const std::string& for_stage) {
    const Array* a = t.find(id);
    if (!a) throw std::invalid_argument(for_stage + ": the trace has no " + t.table().name(id));
    return *a;
}

}  // namespace

namespace {

using SK = StageKind;

// What the math of one cell reads (cell_math's checked arguments).
struct CellCtx {
    const Weights& w;
    const Trace& t;
    const Config& c;
    const Options& opt;
    const StageInfo* si;
    const std::string& stage;
    const std::vector<size_t>& index;
    StageId id;
    int l, max_terms;
    size_t d;
    double inv_sqrt_d;
    // one function per rule: the cell's terms, value and scale into m
    void scaled_dot(CellMath& m) const;
    void softmax(CellMath& m) const;
    void weighted_sum(CellMath& m) const;
    void layernorm(CellMath& m) const;
    void activation(CellMath& m) const;
    void head_linear(CellMath& m) const;
};

void CellCtx::scaled_dot(CellMath& m) const {
    const size_t h = index[0], i = index[1], j = index[2];
    // with RoPE the scores are the rotated q and k's (attn.q_rot, attn.k_rot)
    const bool rope = t.table().has({SK::AttnQRot, l});
    const Array &q = need(t, {rope ? SK::AttnQRot : SK::AttnQ, l}, stage),
                &k = need(t, {rope ? SK::AttnKRot : SK::AttnK, l}, stage);
    m.formula = opt.bug_scale_after_softmax
                    ? "scores[h, i, j] = sum_t q[h, i, t] * k[h, j, t]   (BUG on: no / sqrt(d) here)"
                    : "scores[h, i, j] = sum_t q[h, i, t] * k[h, j, t] / sqrt(d)";
    if (rope) m.formula += "   (q and k after RoPE: q_rot, k_rot)";
    m.lines.push_back("head " + std::to_string(h) + ", query token " + std::to_string(i) + " (" +
                      token_name(i, t) + "), key token " + std::to_string(j) + " (" + token_name(j, t) + ")");
    m.lines.push_back("q . k over the d = " + std::to_string(d) + " head dims:");
    for (size_t u = 0; u < d; ++u) {
        const double qa = q(h, i, u), kb = k(h, j, u);
        m.terms.push_back({"q[" + std::to_string(u) + "]*k[" + std::to_string(u) + "]", qa, kb, qa * kb});
    }
    term_lines(m, max_terms);
    const double dot = sum_of(m.terms);
    m.lines.push_back("sum = " + num(dot));
    if (opt.bug_scale_after_softmax) {
        m.value = dot;
        m.scale = sum_abs(m.terms);
        m.lines.push_back("BUG (scale after softmax) on: the score is not divided by sqrt(" + std::to_string(d) +
                          ") = " + num(std::sqrt(double(d))) + "; the pattern is, after the softmax");
    } else {
        m.value = dot * inv_sqrt_d;
        m.scale = sum_abs(m.terms) * inv_sqrt_d;
        m.lines.push_back("/ sqrt(" + std::to_string(d) + ") = " + num(dot) + " / " + num(std::sqrt(double(d))));
    }
}

void CellCtx::softmax(CellMath& m) const {
    const size_t h = index[0], i = index[1], j = index[2];
    const Array& s = need(t, {SK::AttnScores, l}, stage);
    const size_t T = s.shape(2);
    m.formula = std::string("pattern[h, i, j] = exp(scores[h, i, j] - max_k scores[h, i, k]) / "
                            "sum_k exp(scores[h, i, k] - max)") +
                (opt.bug_scale_after_softmax ? " / sqrt(d)   (BUG on: scaled after the softmax)" : "");
    m.lines.push_back("head " + std::to_string(h) + ", query token " + std::to_string(i) + " (" +
                      token_name(i, t) + "), key token " + std::to_string(j) + " (" + token_name(j, t) + ")");
    double mx = s(h, i, 0);
    for (size_t u = 1; u < T; ++u) mx = std::max(mx, double(s(h, i, u)));
    for (size_t u = 0; u < T; ++u) {
        const double e = std::exp(double(s(h, i, u)) - mx);
        m.terms.push_back({"exp(score[" + std::to_string(u) + "] - max)", double(s(h, i, u)) - mx, 1.0, e});
    }
    m.lines.push_back("max over the row's " + std::to_string(T) + " scores = " + num(mx));
    m.lines.push_back("exp(score - max) for every key:");
    term_lines(m, max_terms, true);
    const double Z = sum_of(m.terms), e = m.terms[j].value;
    m.lines.push_back("row sum Z = " + num(Z));
    m.lines.push_back("exp(" + num(double(s(h, i, j))) + " - " + num(mx) + ") / Z = " + num(e) + " / " + num(Z) +
                      " = " + num(e / Z));
    m.value = e / Z;
    if (opt.bug_scale_after_softmax) {
        m.value *= inv_sqrt_d;
        m.lines.push_back("BUG (scale after softmax) on: / sqrt(" + std::to_string(d) + ") = * " +
                          num(inv_sqrt_d) + " (the row now sums to " + num(inv_sqrt_d) + ", not 1)");
    }
    m.scale = 1e-30;  // products and a quotient of positives: the rounding is relative to the value
}

void CellCtx::weighted_sum(CellMath& m) const {
    const size_t h = index[0], i = index[1], u = index[2];
    const Array &pa = need(t, {SK::AttnPattern, l}, stage), &v = need(t, {SK::AttnV, l}, stage);
    const size_t T = pa.shape(2);
    m.formula = "z[h, i, u] = sum_j pattern[h, i, j] * v[h, j, u]";
    m.lines.push_back("head " + std::to_string(h) + ", token " + std::to_string(i) + " (" + token_name(i, t) +
                      "), head dim " + std::to_string(u) + ": the attention-weighted sum over " +
                      std::to_string(T) + " keys");
    for (size_t j = 0; j < T; ++j) {
        const double pj = pa(h, i, j), vj = v(h, j, u);
        m.terms.push_back({"pattern[" + std::to_string(j) + "]*v[" + std::to_string(j) + "]", pj, vj, pj * vj});
    }
    term_lines(m, max_terms);
    m.value = sum_of(m.terms);
    m.scale = sum_abs(m.terms);
    m.lines.push_back("sum = " + num(m.value));
}

void CellCtx::layernorm(CellMath& m) const {
    const LnSite site = ln_site(id.kind);
    const bool is_out = ln_part(id.kind) == LnPart::Out;
    // What this LayerNorm normalizes: the stage table's `from`.
    if (si->from.empty()) throw std::invalid_argument(stage + ": unknown LayerNorm");
    const StageId src_id = si->from[0];
    const std::string src_name = t.table().name(src_id);
    const Array& src = need(t, src_id, stage);
    const size_t r = index[0], col = index[1], D = size_t(site == LnSite::Mlp ? c.mlp : c.width);
    auto weights_of = [&]() -> const LayerNormW& {
        return site == LnSite::Final ? w.ln_f
               : site == LnSite::Mlp ? w.blocks.at(size_t(l)).mlp_norm  // EVA-02 Base/Large's norm inside the MLP
               : site == LnSite::Pre ? w.ln_pre         // CLIP's ln_pre
               : site == LnSite::Head ? w.map.ln        // SigLIP's pooling head
               : site == LnSite::Patch ? w.patch_norm   // AIMv2's norm on the patch embeddings
               : site == LnSite::Ln1 ? w.blocks.at(size_t(l)).ln1
                                     : w.blocks.at(size_t(l)).ln2;
    };
    if (c.norm == Norm::RmsNorm && site != LnSite::Head && site != LnSite::Mlp) {
        // RMSNorm: x / sqrt(mean(x^2) + eps) * gamma, from the recorded input and rms
        const Array& rms_a = need(t, {ln_kind(site, LnPart::Rms), l}, stage);
        const size_t srow = src.size() / D;
        if (src.size() % D || r >= srow)
            throw std::invalid_argument(stage + ": input " + src_name + " has shape " + shape_str_of(src));
        const double x = src.data()[r * D + col], rms = rms_a(r), ms = rms * rms;
        const double n = x / std::sqrt(ms + double(c.eps));
        m.formula = is_out ? (opt.affine ? "out = x / sqrt(mean(x^2) + eps) * gamma"
                                         : "out = x / sqrt(mean(x^2) + eps)   (elementwise_affine=False)")
                           : "normalized = x / sqrt(mean(x^2) + eps)";
        m.lines.push_back("token row " + std::to_string(r) + (srow > 1 ? " (" + token_name(r, t) + ")" : "") + ", dim " +
                          std::to_string(col) + " of " + src_name + ": x = " + num(x));
        m.lines.push_back("rms = sqrt(mean of the row's " + std::to_string(D) + " squares) = " + num(rms) +
                          ", mean(x^2) = " + num(ms) + "   (no mean is subtracted)");
        m.lines.push_back("x / sqrt(mean(x^2) + eps) = " + num(x) + " / sqrt(" + num(ms) + " + " + num(double(c.eps)) +
                          ") = " + num(n));
        m.value = n;
        m.scale = std::fabs(n);
        if (is_out && opt.affine) {
            const LayerNormW& lw = weights_of();
            if (lw.g.size() != D) throw std::invalid_argument(stage + ": the weights have no gamma of width " + std::to_string(D));
            const double g = lw.g(col);
            m.value = n * g;
            m.lines.push_back("* gamma = " + num(n) + " * " + num(g) + " = " + num(m.value) + "   (elementwise_affine=True)");
        } else if (is_out) {
            m.lines.push_back("elementwise_affine=False: gamma is ignored, out = normalized");
        }
        return;
    }
    const Array &mu_a = need(t, {ln_kind(site, LnPart::Mean), l}, stage),
                &sd_a = need(t, {ln_kind(site, LnPart::Std), l}, stage);
    const size_t srow = src.size() / D;  // (T, D), or (D) for the mean-pooled vector
    if (src.size() % D || r >= srow)
        throw std::invalid_argument(stage + ": input " + src_name + " has shape " + shape_str_of(src));
    const double x = src.data()[r * D + col], mu = mu_a(r), sd = sd_a(r), var = sd * sd;
    const double n = (x - mu) / std::sqrt(var + double(c.eps));
    m.formula = is_out ? (opt.affine ? "out = (x - mu) / sqrt(var + eps) * gamma + beta"
                                     : "out = (x - mu) / sqrt(var + eps)   (elementwise_affine=False)")
                       : "normalized = (x - mu) / sqrt(var + eps)";
    m.lines.push_back("token row " + std::to_string(r) + (srow > 1 ? " (" + token_name(r, t) + ")" : "") +
                      ", dim " + std::to_string(col) + " of " + src_name + ": x = " + num(x));
    m.lines.push_back("mu = mean of the row's " + std::to_string(D) + " values = " + num(mu));
    m.lines.push_back(std::string("sigma = std over ") + (opt.unbiased ? "D-1 = " + std::to_string(D - 1) +
                                                                           " (unbiased=True)"
                                                                     : "D = " + std::to_string(D) +
                                                                           " (unbiased=False)") +
                      " = " + num(sd) + ", var = sigma^2 = " + num(var));
    m.lines.push_back("(x - mu) / sqrt(var + eps) = (" + num(x) + " - " + num(mu) + ") / sqrt(" + num(var) +
                      " + " + num(double(c.eps)) + ") = " + num(n));
    m.value = n;
    m.scale = std::fabs(n);
    if (is_out) {
        if (opt.affine) {
            const LayerNormW& lw = weights_of();
            if (lw.g.size() != D || lw.b.size() != D)
                throw std::invalid_argument(stage + ": the weights have no gamma and beta of width " + std::to_string(D));
            const double g = lw.g(col), b = lw.b(col);
            m.value = n * g + b;
            m.scale = std::fabs(n * g) + std::fabs(b);
            m.lines.push_back("* gamma + beta = " + num(n) + " * " + num(g) + " + " + num(b) + " = " +
                              num(m.value) + "   (elementwise_affine=True)");
        } else {
            m.lines.push_back("elementwise_affine=False: gamma and beta are ignored, out = normalized");
        }
    }
}

void CellCtx::activation(CellMath& m) const {
    const Array& pre = need(t, {SK::MlpPre, l}, stage);
    const double x = pre(index[0], index[1]);
    m.lines.push_back("token " + std::to_string(index[0]) + " (" + token_name(index[0], t) + "), hidden unit " +
                      std::to_string(index[1]) + ": pre = " + num(x));
    if (c.act == Act::QuickGelu) {
        const double sg = 1.0 / (1.0 + std::exp(-1.702 * x));
        m.formula = "post = QuickGELU(pre) = pre * sigmoid(1.702 * pre)";
        m.lines.push_back("sigmoid(1.702 * pre) = sigmoid(" + num(1.702 * x) + ") = " + num(sg));
        m.value = x * sg;
        m.lines.push_back(num(x) + " * " + num(sg) + " = " + num(m.value));
    } else if (c.act == Act::GeluTanh) {
        const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), th = std::tanh(u);
        m.formula = "post = 0.5 * pre * (1 + tanh(sqrt(2/pi) * (pre + 0.044715 * pre^3)))   (tanh GELU)";
        m.lines.push_back("tanh(sqrt(2/pi) * (pre + 0.044715 pre^3)) = tanh(" + num(u) + ") = " + num(th));
        m.value = 0.5 * x * (1 + th);
        m.lines.push_back("0.5 * " + num(x) + " * (1 + " + num(th) + ") = " + num(m.value));
    } else {
        const double e = std::erf(x * M_SQRT1_2);
        m.formula = "post = GELU(pre) = 0.5 * pre * (1 + erf(pre / sqrt(2)))   (exact GELU)";
        m.lines.push_back("erf(pre / sqrt(2)) = erf(" + num(x * M_SQRT1_2) + ") = " + num(e));
        m.value = 0.5 * x * (1 + e);
        m.lines.push_back("0.5 * " + num(x) + " * (1 + " + num(e) + ") = " + num(m.value));
    }
    m.scale = std::fabs(x);
}

void CellCtx::head_linear(CellMath& m) const {
    const size_t k = index[0], D = size_t(c.width);
    if (si->from.empty()) throw std::invalid_argument(stage + ": no input in the stage table");
    if (id.kind == SK::Logits && c.head == Head::Distilled) {
        // DeiT distilled: logits = (logits_cls + logits_dist) / 2, both recorded
        const Array& a = need(t, {SK::LogitsCls, -1}, stage);
        const Array& b = need(t, {SK::LogitsDist, -1}, stage);
        const double x = a.data()[k], y = b.data()[k];
        m.formula = "logits[k] = (logits_cls[k] + logits_dist[k]) / 2   (DeiT distilled: head(cls) and head_dist(dist))";
        m.lines.push_back("class " + std::to_string(k) + (k < c.class_names.size() ? " (" + c.class_names[k] + ")" : "") +
                          ": (" + num(x) + " + " + num(y) + ") / 2");
        m.value = (x + y) / 2;
        m.scale = (std::fabs(x) + std::fabs(y)) / 2;
        return;
    }
    const bool dist = id.kind == SK::LogitsDist;  // DeiT's distillation head reads the dist token
    const Tensor2& hw = dist ? w.head_dist_w : w.head_w;
    const Tensor1& hb = dist ? w.head_dist_b : w.head_b;
    const char* hname = dist ? "head_dist" : "head";
    if (hw.dimension() != 2 || hw.shape(0) <= k || hw.shape(1) != D)
        throw std::invalid_argument(stage + ": the weights have no " + hname + " of width " + std::to_string(D));
    const StageId fid = si->from[0];
    const std::string fname = t.table().name(fid);
    const Array& f = need(t, fid, stage);
    if (f.size() != D) throw std::invalid_argument(stage + ": " + fname + " has shape " + shape_str_of(f));
    m.formula = stage + "[k] = sum_u " + fname + "[u] * " + hname + ".weight[k, u] + " + hname + ".bias[k]";
    m.lines.push_back("class " + std::to_string(k) +
                      (size_t(k) < c.class_names.size() ? " (" + c.class_names[k] + ")" : "") + ": " + fname +
                      " . " + hname + " row " + std::to_string(k) + " over " + std::to_string(D) + " dims:");
    for (size_t u = 0; u < D; ++u) {
        const double fu = f.data()[u], wu = hw(k, u);
        m.terms.push_back({"f[" + std::to_string(u) + "]*W[" + std::to_string(k) + "," + std::to_string(u) + "]",
                           fu, wu, fu * wu});
    }
    term_lines(m, max_terms);
    const double dot = sum_of(m.terms), b = hb(k);
    m.value = dot + b;
    m.scale = sum_abs(m.terms) + std::fabs(b);
    m.lines.push_back("sum = " + num(dot) + ", + bias " + num(b) + " = " + num(m.value));
}

}  // namespace


CellMath cell_math(const Weights& w, const Trace& t, StageId id, const std::vector<size_t>& index, int max_terms) {
    check_weights_fit(w, t);
    const Config& c = w.cfg;
    const Options& opt = t.options();
    const StageInfo* si = t.table().find(id);
    if (!si) throw std::invalid_argument("this model has no stage '" + t.table().name(id) + "'");
    const std::string& stage = si->name;
    if (si->cell == CellRule::None)
        throw std::invalid_argument("no math panel for stage '" + stage +
                                    "' (supported: attn.scores, attn.pattern, attn.z, LayerNorm .out/.normalized, "
                                    "mlp.post, logits)");
    const Array& a = need(t, id, stage);
    if (index.size() != a.dimension())
        throw std::invalid_argument(stage + " has shape " + shape_str_of(a) + ": the index " + idx_str(index) +
                                    " needs " + std::to_string(a.dimension()) + " numbers");
    for (size_t i = 0; i < index.size(); ++i)
        if (index[i] >= a.shape(i))
            throw std::invalid_argument(stage + " has shape " + shape_str_of(a) + ": index " + idx_str(index) +
                                        " is out of range on axis " + std::to_string(i));
    CellMath m;
    m.stage = id;
    m.name = stage;
    m.index = index;
    m.recorded = a.element(index.begin(), index.end());
    const int l = id.layer;
    const size_t d = size_t(c.head_dim());
    const double inv_sqrt_d = 1.0 / std::sqrt(double(d));

    const CellCtx cx{w, t, c, opt, si, stage, index, id, l, max_terms, d, inv_sqrt_d};
    switch (si->cell) {
    case CellRule::None: break;
    case CellRule::ScaledDot: cx.scaled_dot(m); break;
    case CellRule::Softmax: cx.softmax(m); break;
    case CellRule::WeightedSum: cx.weighted_sum(m); break;
    case CellRule::LayerNorm: cx.layernorm(m); break;
    case CellRule::Gelu: cx.activation(m); break;
    case CellRule::HeadLinear: cx.head_linear(m); break;
    }
    m.lines.push_back("= " + num(m.value) + "   (the trace holds " + num(m.recorded) + ")");
    return m;
}

std::string options_json(const Options& opt, const Config& c) {
    auto b = [](bool v) { return v ? "true" : "false"; };
    return std::string("{\"elementwise_affine\": ") + b(opt.affine) + ", \"unbiased\": " + b(opt.unbiased) +
           ", \"pooling\": \"" + pooling_name(opt.pooling_for(c)) +
           "\", \"bug_scale_after_softmax\": " + b(opt.bug_scale_after_softmax) +
           ", \"bug_reshape_patches\": " + b(opt.bug_reshape_patches) +
           ", \"interventions\": " + interventions_json(opt.iv) + "}";
}

}  // namespace vit
