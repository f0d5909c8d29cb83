// What the families are studied for (teach.h): token norms and high-norm tokens, the principal
// components of the final patch features, and DINO's per-head self-attention maps with their
// "keep x% of the attention mass" masks. Each is computed from the trace's own stages and grid, and
// names the numpy line it equals (tests/parity/test_studied.py checks them against numpy).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xview.hpp>

#include "core/kernels/ops.h"
#include "core/teach/teach.h"

// LAPACK (Fortran calling convention, as OpenBLAS exports it): selected eigenvalues and eigenvectors
// of a symmetric matrix (the relatively robust representations algorithm). The three trailing size_t
// are gfortran's hidden lengths of the character arguments.
extern "C" void dsyevr_(const char* jobz, const char* range, const char* uplo, const int* n, double* a, const int* lda,
                        const double* vl, const double* vu, const int* il, const int* iu, const double* abstol, int* m,
                        double* w, double* z, const int* ldz, int* isuppz, double* work, const int* lwork, int* iwork,
                        const int* liwork, int* info, size_t, size_t, size_t);

namespace vit {

namespace {

const Array& stage_or_throw(const Trace& t, StageId id, const char* what) {
    const Array* a = t.find(id);
    if (!a) throw std::invalid_argument(std::string(what) + ": the trace has no " + t.table().name(id));
    return *a;
}

}  // namespace

Tensor2 token_norms(const Trace& t) {
    const int L = t.depth();
    if (L == 0) throw std::invalid_argument("token norms: the model has no blocks");
    const size_t T = size_t(t.table().dims().T), D = size_t(t.table().config().width);
    Tensor2 out = Tensor2::from_shape({size_t(L), T});
    for (int l = 0; l < L; ++l) {
        const StageId id{StageKind::ResidPost, l};
        const Array& r = stage_or_throw(t, id, "token norms");
        if (r.size() != T * D)
            throw std::invalid_argument(t.table().name(id) + " has shape " + shape_str_of(r) + ", not " + shape_str({T, D}));
        for (size_t i = 0; i < T; ++i) {
            double s = 0;  // in double: a 1024-wide row of large values keeps its digits
            const float* x = r.data() + i * D;
            for (size_t k = 0; k < D; ++k) s += double(x[k]) * double(x[k]);
            out(size_t(l), i) = float(std::sqrt(s));
        }
    }
    return out;
}

std::vector<int> high_norm_tokens(const Tensor2& norms, int layer, int prefix, float factor) {
    if (norms.dimension() != 2 || layer < 0 || size_t(layer) >= norms.shape(0))
        throw std::invalid_argument("high-norm tokens: layer " + std::to_string(layer) + " is not a row of the norms " +
                                    shape_str_of(norms));
    const size_t T = norms.shape(1);
    if (prefix < 0 || size_t(prefix) >= T) throw std::invalid_argument("high-norm tokens: no patch tokens");
    // numpy's median: the middle value, or the mean of the two middle ones
    std::vector<double> p;
    for (size_t i = size_t(prefix); i < T; ++i) p.push_back(norms(size_t(layer), i));
    std::sort(p.begin(), p.end());
    const size_t n = p.size();
    const double median = n % 2 ? p[n / 2] : 0.5 * (p[n / 2 - 1] + p[n / 2]);
    std::vector<int> out;
    for (size_t i = 0; i < T; ++i)
        if (double(norms(size_t(layer), i)) > double(factor) * median) out.push_back(int(i));
    return out;
}

FeaturePca feature_pca(const Trace& t, float threshold) {
    const StageTable& tab = t.table();
    const RunDims& rd = tab.dims();
    // N: the patches of the grid; K of them are in the run's sequence (all, unless some were dropped)
    const size_t N = size_t(rd.N), K = size_t(rd.kept_n()), pre = size_t(rd.prefix), T = size_t(rd.T),
                 D = size_t(tab.config().width);
    if (K < 4) throw std::invalid_argument("patch features: " + std::to_string(K) + " patches are too few for three components");
    FeaturePca f;
    f.gh = rd.gh;
    f.gw = rd.gw;
    // the final patch features: ln_final.out when it is over every token, else the last block's output
    const Array* ln = t.find(StageId{StageKind::LnFinalOut});
    if (ln && ln->dimension() == 2 && ln->shape(0) == T) f.source = StageId{StageKind::LnFinalOut};
    else if (t.depth() > 0) f.source = StageId{StageKind::ResidPost, t.depth() - 1};
    else throw std::invalid_argument("patch features: the model has no blocks and no final norm over the tokens");
    f.source_name = tab.name(f.source);
    const Array& a = stage_or_throw(t, f.source, "patch features");
    if (a.dimension() != 2 || a.shape(0) != T || a.shape(1) != D)
        throw std::invalid_argument(f.source_name + " has shape " + shape_str_of(a) + ", not " + shape_str({T, D}));

    // X = feats[pre:] - feats[pre:].mean(0)   (in double)
    std::vector<double> X(K * D), mean(D, 0.0);
    for (size_t i = 0; i < K; ++i)
        for (size_t k = 0; k < D; ++k) mean[k] += a((pre + i), k);
    for (auto& m : mean) m /= double(K);
    for (size_t i = 0; i < K; ++i)
        for (size_t k = 0; k < D; ++k) X[i * D + k] = double(a(pre + i, k)) - mean[k];
    // cov = X.T @ X / (N - 1)   (upper triangle; symmetric, so row- and column-major agree)
    std::vector<double> cov(D * D, 0.0);
    for (size_t i = 0; i < K; ++i) {
        const double* x = &X[i * D];
        for (size_t r = 0; r < D; ++r) {
            const double xr = x[r];
            if (xr == 0) continue;
            double* c = &cov[r * D];
            for (size_t k = r; k < D; ++k) c[k] += xr * x[k];
        }
    }
    double trace = 0;
    for (size_t r = 0; r < D; ++r) {
        for (size_t k = r; k < D; ++k) {
            cov[r * D + k] /= double(K - 1);
            cov[k * D + r] = cov[r * D + k];
        }
        trace += cov[r * D + r];
    }
    // the top three eigenpairs: il..iu = D-2..D (1-based, ascending)
    const int n = int(D), k = int(std::min<size_t>(3, D));
    const int il = n - k + 1, iu = n;
    const double zero = 0, abstol = 0;
    int m = 0, info = 0, lwork = -1, liwork = -1, iwq = 0;
    double wq = 0;
    std::vector<double> w(D), z(D * size_t(k));
    std::vector<int> isuppz(2 * size_t(k));
    dsyevr_("V", "I", "U", &n, cov.data(), &n, &zero, &zero, &il, &iu, &abstol, &m, w.data(), z.data(), &n,
            isuppz.data(), &wq, &lwork, &iwq, &liwork, &info, 1, 1, 1);
    if (info != 0) throw std::runtime_error("LAPACK dsyevr workspace query failed (info " + std::to_string(info) + ")");
    lwork = int(wq);
    liwork = iwq;
    std::vector<double> work(size_t(std::max(lwork, 1)));
    std::vector<int> iwork(size_t(std::max(liwork, 1)));
    dsyevr_("V", "I", "U", &n, cov.data(), &n, &zero, &zero, &il, &iu, &abstol, &m, w.data(), z.data(), &n,
            isuppz.data(), work.data(), &lwork, iwork.data(), &liwork, &info, 1, 1, 1);
    if (info != 0 || m != k) throw std::runtime_error("LAPACK dsyevr did not converge (info " + std::to_string(info) + ")");

    Tensor2 proj = xt::zeros<float>({K, size_t(3)}), rgb = Tensor2::from_shape({K, size_t(3)});
    f.variance = xt::zeros<float>({size_t(3)});
    for (int j = 0; j < k; ++j) {
        const double* v = &z[size_t(k - 1 - j) * D];  // largest first
        size_t big = 0;
        for (size_t r = 1; r < D; ++r)
            if (std::fabs(v[r]) > std::fabs(v[big])) big = r;
        const double sgn = v[big] < 0 ? -1.0 : 1.0;
        for (size_t i = 0; i < K; ++i) {
            double s = 0;
            for (size_t r = 0; r < D; ++r) s += X[i * D + r] * v[r];
            proj(i, size_t(j)) = float(sgn * s);
        }
        f.variance(size_t(j)) = trace > 0 ? float(std::max(w[size_t(k - 1 - j)], 0.0) / trace) : 0.f;
    }
    for (size_t j = 0; j < 3; ++j) {
        float lo = proj(0, j), hi = lo;
        for (size_t i = 1; i < K; ++i) { lo = std::min(lo, proj(i, j)); hi = std::max(hi, proj(i, j)); }
        for (size_t i = 0; i < K; ++i) rgb(i, j) = hi > lo ? (proj(i, j) - lo) / (hi - lo) : 0.5f;
    }
    // on the grid: row n is patch n; a dropped patch has no features (NaN) and is not foreground
    const float nan = std::numeric_limits<float>::quiet_NaN();
    f.proj = xt::full_like(Tensor2::from_shape({N, size_t(3)}), nan);
    f.rgb = xt::full_like(Tensor2::from_shape({N, size_t(3)}), nan);
    f.fg = xt::zeros<float>({N});
    for (size_t i = 0; i < K; ++i) {
        const size_t n = size_t(rd.kept[i]);
        for (size_t j = 0; j < 3; ++j) {
            f.proj(n, j) = proj(i, j);
            f.rgb(n, j) = rgb(i, j);
        }
        f.fg(n) = proj(i, 0) > threshold ? 1.f : 0.f;
    }
    return f;
}

Tensor2 pos_similarity(const Trace& t) {
    const StageTable& tab = t.table();
    const StageId id{StageKind::PosEmbed};
    const Array& p = stage_or_throw(t, id, "position similarity");
    const size_t N = size_t(tab.dims().N), pre = size_t(tab.dims().prefix - tab.config().registers);  // cls, dist
    if (p.dimension() != 2 || p.shape(0) != pre + N)
        throw std::invalid_argument(tab.name(id) + " has shape " + shape_str_of(p) + ", not (" + std::to_string(pre + N) +
                                    ", width)");
    const size_t D = p.shape(1);
    std::vector<double> norm(N);
    for (size_t i = 0; i < N; ++i) {
        double s = 0;
        for (size_t k = 0; k < D; ++k) s += double(p(pre + i, k)) * p(pre + i, k);
        norm[i] = std::sqrt(s);
    }
    // G = rows @ rows.T (the forward's GEMM), then torch's a.b / max(|a| |b|, 1e-8)
    const float* rows = p.data() + pre * D;
    Tensor2 out = Tensor2::from_shape({N, N});
    ops::gemm(false, true, int(N), int(N), int(D), 1.f, rows, int(D), rows, int(D), 0.f, out.data(), int(N));
    for (size_t i = 0; i < N; ++i)
        for (size_t j = 0; j < N; ++j) out(i, j) = float(double(out(i, j)) / std::max(norm[i] * norm[j], 1e-8));
    return out;
}

HeadMaps cls_head_maps(const Trace& t, int layer, float keep) {
    if (!(keep > 0.f && keep <= 1.f))
        throw std::invalid_argument("self-attention masks: keep must be in (0, 1], not " + std::to_string(keep));
    const StageTable& tab = t.table();
    const RunDims& rd = tab.dims();
    const Config& c = tab.config();
    HeadMaps h;
    h.gh = rd.gh;
    h.gw = rd.gw;
    h.keep = keep;
    const size_t N = size_t(rd.N), K = size_t(rd.kept_n()), pre = size_t(rd.prefix);
    if (c.cls_token) {
        const int L = t.depth();
        if (L == 0) throw std::invalid_argument("self-attention maps: the model has no blocks");
        h.layer = layer < 0 ? L - 1 : layer;
        if (h.layer >= L)
            throw std::invalid_argument("self-attention maps: layer " + std::to_string(layer) + " out of range (0.." +
                                        std::to_string(L - 1) + ")");
        h.source = StageId{StageKind::AttnPattern, h.layer};
        h.query = "cls";
    } else if (tab.has(StageId{StageKind::HeadAttnPattern})) {
        h.source = StageId{StageKind::HeadAttnPattern};
        h.query = "the pooling probe";
    } else {
        throw std::invalid_argument("self-attention maps: this model has neither a cls token nor a pooling probe");
    }
    h.source_name = tab.name(h.source);
    const Array& p = stage_or_throw(t, h.source, "self-attention maps");
    if (p.dimension() != 3 || p.shape(2) != pre + K)
        throw std::invalid_argument(h.source_name + " has shape " + shape_str_of(p) + ", not (heads, queries, " +
                                    std::to_string(pre + K) + ")");
    const size_t H = p.shape(0);
    // on the grid: a dropped patch has no attention (NaN) and is outside every mask
    h.attn = xt::full_like(Tensor2::from_shape({H, N}), std::numeric_limits<float>::quiet_NaN());
    h.mask = xt::zeros<float>({H, N});
    h.kept_mass = Tensor1::from_shape({H});
    std::vector<size_t> idx(K);
    std::vector<float> row(K);
    for (size_t hd = 0; hd < H; ++hd) {
        for (size_t j = 0; j < K; ++j) {  // row 0: the cls query (the probe's one row)
            row[j] = p(hd, 0, pre + j);
            h.attn(hd, size_t(rd.kept[j])) = row[j];
        }
        // ascending by weight (stable: equal weights keep their patch order)
        std::iota(idx.begin(), idx.end(), 0);
        std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return row[a] < row[b]; });
        double total = 0;
        for (size_t j = 0; j < K; ++j) total += row[j];
        double cum = 0, kept = 0;
        for (size_t j = 0; j < K; ++j) {
            const double v = total > 0 ? double(row[idx[j]]) / total : 0.0;
            cum += v;
            if (cum > 1.0 - double(keep)) {
                h.mask(hd, size_t(rd.kept[idx[j]])) = 1.f;
                kept += v;
            }
        }
        h.kept_mass(hd) = float(kept);
    }
    return h;
}

}  // namespace vit
