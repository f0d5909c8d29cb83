// The backward pass for every stage of the batched forward (forward.cpp).
// Rows of the residual stream are (b, t), b-major: R = B*T. Every backward
// names the PyTorch quantity it computes.
#include "core/model/backward.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <xtensor/xadapt.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xstrided_view.hpp>
#include <xtensor/xview.hpp>

#include "core/kernels/ops.h"
#include "core/model/rope.h"

namespace vit {

namespace {

template <size_t N>
auto as(const float* p, const std::array<size_t, N>& shape) {
    size_t n = 1;
    for (size_t s : shape) n *= s;
    return xt::adapt(const_cast<float*>(p), n, xt::no_ownership(), shape);
}

// dW(O,I) += dY(R,O).T @ X(R,I); db(O) += dY.sum(0) (if dW: the stage gradients alone do not
// need the weights'); dX(R,I) = dY @ W (if dX).
// The products are split into blocks of kBlock output columns (dW) and rows (dX) fixed by the
// shapes, never by the thread count: a BLAS product's value for one row can depend on how many rows
// the call has (oneDNN's AVX2 sgemm does), and the thread count changes between a full backward and
// one on demand (another job's budget, the busy-core fallback), whose gradients must be the same bits.
void linear_backward(float* dX, Tensor2* dW, Tensor1* db, const float* dY, const float* X, const Tensor2& W, int R,
                     int I, int O) {
    constexpr int kBlock = 32;
    // two regions, each of blocks that cost the same (a dW block is R x I x 32, a dX block 32 x I x O:
    // in one range split by count, fc1's 96 dW blocks and 7 dX blocks left one thread 3x the other's work)
    const bool worth = int64_t(R) * I * O > 200000;
    if (dW)
        ops::for_range((O + kBlock - 1) / kBlock, worth, [&](int i) {
            const int o0 = i * kBlock, o1 = std::min(O, o0 + kBlock);
            ops::gemm(true, false, o1 - o0, I, R, 1.f, dY + o0, O, X, I, 1.f, dW->data() + size_t(o0) * I, I);
            for (int r = 0; r < R; ++r) {
                const float* y = dY + size_t(r) * O;
                for (int o = o0; o < o1; ++o) (*db)(o) += y[o];
            }
        });
    if (dX)
        ops::for_range((R + kBlock - 1) / kBlock, worth, [&](int i) {
            const int r0 = i * kBlock, r1 = std::min(R, r0 + kBlock);
            ops::gemm(false, false, r1 - r0, I, O, 1.f, dY + size_t(r0) * O, O, W.data(), I, 0.f, dX + size_t(r0) * I,
                      I);
        });
}

// 1 / sqrt(var + eps) per row, from the recorded std = sqrt(var).
std::vector<float> rstd_of(const float* sd, size_t R, float eps) {
    std::vector<float> r(R);
    for (size_t i = 0; i < R; ++i) r[i] = float(1.0 / std::sqrt(double(sd[i]) * sd[i] + eps));
    return r;
}

// dx (=, or += if accumulate) from dy through LayerNorm; dxhat_out optional (the
// gradient at `normalized`). With n the variance divisor (D, or D-1 unbiased):
// dx = rstd * (dxhat - mean(dxhat) - xhat * sum(dxhat * xhat) / n)
// RMSNorm (rms): no mean was removed and n is D: dx = rstd * (dxhat - xhat * sum(dxhat * xhat) / D), rstd = 1 /
// sqrt(mean(x^2) + eps) (d/dx_i of x_j / sqrt(mean(x^2) + eps) is rstd (delta_ij - xhat_i xhat_j / D)).
// g: where d gamma and d beta (LayerNorm only) accumulate (null: not computed).
void ln_backward(float* dx, bool accumulate, LayerNormW* g, float* dxhat_out, const float* dy, const float* xhat,
                 const float* rstd, const LayerNormW& w, int R, int D, const Options& opt, bool rms = false) {
    const float nv = float(!rms && opt.unbiased ? std::max(D - 1, 1) : D);
    if (opt.affine && g) {  // d gamma = sum(dy * xhat), d beta = sum(dy) over the rows
        const bool beta = !rms && g->b.size();
        for (int r = 0; r < R; ++r) {
            const float* y = dy + size_t(r) * D;
            const float* xh = xhat + size_t(r) * D;
            for (int i = 0; i < D; ++i) g->g(i) += y[i] * xh[i];
            if (beta) for (int i = 0; i < D; ++i) g->b(i) += y[i];
        }
    }
#pragma omp parallel if (R * D > 20000)
    {
        std::vector<float> dxh(D);
#pragma omp for schedule(static)
        for (int r = 0; r < R; ++r) {
            const float* y = dy + size_t(r) * D;
            const float* xh = xhat + size_t(r) * D;
            float* gg = dxhat_out ? dxhat_out + size_t(r) * D : dxh.data();
            double s1 = 0, s2 = 0;
            for (int i = 0; i < D; ++i) {
                float v = opt.affine ? y[i] * w.g(i) : y[i];
                gg[i] = v;
                s1 += v;
                s2 += double(v) * xh[i];
            }
            float m1 = rms ? 0.f : float(s1 / D), m2 = float(s2 / nv), rs = rstd[r];
            float* o = dx + size_t(r) * D;
            if (accumulate) for (int i = 0; i < D; ++i) o[i] += rs * (gg[i] - m1 - xh[i] * m2);
            else for (int i = 0; i < D; ++i) o[i] = rs * (gg[i] - m1 - xh[i] * m2);
        }
    }
}

// The norm at `site` backward: RMSNorm where the model norms with it (every site but SigLIP's head and the MLP's
// LayerNorm), else LayerNorm; its row statistic (std or rms) and `normalized` read through `at` (the site's stage
// kinds), R rows of the model's width (or the MLP's hidden width at LnSite::Mlp).
void norm_backward(const Config& c, LnSite site, const std::function<const float*(StageKind)>& at, float* dx,
                   bool accumulate, LayerNormW* g, float* dxhat_out, const float* dy, const LayerNormW& w, size_t R,
                   const Options& opt) {
    const bool rms = c.norm == Norm::RmsNorm && site != LnSite::Head && site != LnSite::Mlp;
    const std::vector<float> rs = rstd_of(at(ln_kind(site, rms ? LnPart::Rms : LnPart::Std)), R, c.eps);
    ln_backward(dx, accumulate, g, dxhat_out, dy, at(ln_kind(site, LnPart::Normalized)), rs.data(), w, int(R),
                site == LnSite::Mlp ? c.mlp : c.width, opt, rms);
}

// d/dx gelu(x) = Phi(x) + x phi(x), as an expression on chunks fixed by n (not by the thread count:
// where the vector loop's scalar tail falls must not depend on it), split across the threads.
void gelu_backward(float* dx, const float* dy, const float* x, size_t n) {
    constexpr size_t kChunk = 16384;
    ops::for_range(int((n + kChunk - 1) / kChunk), n > 50000, [&](int i) {
        const size_t b = size_t(i) * kChunk, e = std::min(n, b + kChunk);
        const std::array<size_t, 1> sh{e - b};
        auto X = as(x + b, sh);
        xt::noalias(as(dx + b, sh)) =
            as(dy + b, sh) * (0.5f * (1.f + xt::erf(X * float(M_SQRT1_2))) +
                              X * float(0.3989422804014327) * xt::exp(-0.5f * X * X));
    });
}

// The MLP's other nonlinearities, elementwise over (R, M) (SwiGLU: over fc1's two halves, (R, 2M) -> (R, M)):
//   QuickGELU x*sigmoid(1.702x): s + 1.702 x s (1 - s);  tanh-GELU 0.5x(1 + tanh u), u = sqrt(2/pi)(x + 0.044715x^3):
//   0.5(1 + tanh u) + 0.5x(1 - tanh^2 u) sqrt(2/pi)(1 + 3 * 0.044715 x^2);  SwiGLU silu(x1) * x2: d x1 = dy x2
//   silu'(x1), silu'(a) = s(a)(1 + a(1 - s(a))), d x2 = dy silu(x1). Computed in double, row by row.
void act_backward(Act act, float* dpre, const float* dpost, const float* pre, size_t R, size_t M) {
    if (act == Act::Gelu) return gelu_backward(dpre, dpost, pre, R * M);
    ops::for_range(int(R), R * M > 50000, [&](int ri) {
        const size_t r = size_t(ri);
        if (act == Act::SwiGlu) {
            const float *x1 = pre + r * 2 * M, *x2 = x1 + M, *dy = dpost + r * M;
            float *d1 = dpre + r * 2 * M, *d2 = d1 + M;
            for (size_t j = 0; j < M; ++j) {
                const double a = x1[j], sg = 1.0 / (1.0 + std::exp(-a));
                d1[j] = float(double(dy[j]) * x2[j] * sg * (1.0 + a * (1.0 - sg)));
                d2[j] = float(double(dy[j]) * a * sg);
            }
            return;
        }
        for (size_t j = r * M; j < (r + 1) * M; ++j) {
            const double x = pre[j];
            double g;
            if (act == Act::QuickGelu) {
                const double sg = 1.0 / (1.0 + std::exp(-1.702 * x));
                g = sg + 1.702 * x * sg * (1.0 - sg);
            } else {  // GeluTanh
                const double k = 0.7978845608028654, t = std::tanh(k * (x + 0.044715 * x * x * x));
                g = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
            }
            dpre[j] = float(double(dpost[j]) * g);
        }
    });
}

// Where a backward pass reads the forward's stages (of block `layer`, or -1 outside the blocks) and
// where it writes the gradient of a stage (shaped as the stage table says), by id. A null StagePut
// records nothing: the per-stage copies are skipped, the numbers passed on are the same.
using StageGet = std::function<const float*(StageKind, int)>;
using StagePut = std::function<void(StageKind, int, const float*)>;

// The scratch a block's backward reuses from one block to the next.
struct BlockScratch {
    Tensor2 da, dqkv, dzcat, dpre, dpost, dxh, dls;
    Array dq, dk, dv;
};

// SigLIP's attention-pooling head (HF SiglipMultiheadAttentionPoolingHead; PE's timm AttentionPoolLatent), from d head.resid_post (B, D) back to
// d ln_final.out (B*T, D): res = ao + fc2(act(fc1(ln(ao)))), ao = out_proj(concat_h softmax(q_h k_h^T / sqrt(d)) v_h),
// q from the probe, k and v from the tokens. The weights' gradients are not computed (stages only).
void map_head_backward(const Weights& w, const Options& opt, size_t B, const StageGet& get, const Tensor2& dres,
                       Tensor2& dtok, const StagePut* put) {
    using SK = StageKind;
    const Config& c = w.cfg;
    const MapHeadW& m = w.map;
    const size_t T = run_dims(c, opt).T, D = c.width, H = size_t(c.pool_heads()), d = D / H, M = c.mlp, R = B * T;
    auto put_if = [&](SK k, const float* src) { if (put) (*put)(k, -1, src); };
    put_if(SK::HeadResidPost, dres.data());
    put_if(SK::HeadMlpOut, dres.data());  // res = ao + mo
    Tensor2 dpost = Tensor2::from_shape({B, M}), dpre = Tensor2::from_shape({B, M}), dhl = Tensor2::from_shape({B, D});
    linear_backward(dpost.data(), nullptr, nullptr, dres.data(), nullptr, m.fc2_w, int(B), int(M), int(D));
    put_if(SK::HeadMlpPost, dpost.data());
    act_backward(c.act == Act::SwiGlu ? Act::Gelu : c.act, dpre.data(), dpost.data(), get(SK::HeadMlpPre, -1), B, M);
    put_if(SK::HeadMlpPre, dpre.data());
    linear_backward(dhl.data(), nullptr, nullptr, dpre.data(), nullptr, m.fc1_w, int(B), int(D), int(M));
    put_if(SK::HeadLnOut, dhl.data());
    Tensor2 dao = dres, dxhat = Tensor2::from_shape({B, D});  // the skip, plus the way through the head's LayerNorm
    norm_backward(c, LnSite::Head, [&](SK k) { return get(k, -1); }, dao.data(), true, nullptr, dxhat.data(), dhl.data(),
                  m.ln, B, opt);
    put_if(SK::HeadLnNormalized, dxhat.data());
    put_if(SK::HeadAttnOut, dao.data());
    Tensor2 dz = Tensor2::from_shape({B, D});  // (B, H, 1, d): the heads concatenated
    linear_backward(dz.data(), nullptr, nullptr, dao.data(), nullptr, m.out_w, int(B), int(D), int(D));
    put_if(SK::HeadAttnZ, dz.data());
    const float *q = get(SK::HeadAttnQ, -1), *k = get(SK::HeadAttnK, -1), *v = get(SK::HeadAttnV, -1),
                *pat = get(SK::HeadAttnPattern, -1);
    const double scale = 1.0 / std::sqrt(double(d));
    Tensor2 dq = xt::zeros<float>({B, D}), dpat = Tensor2::from_shape({B, H * T}), dsc = Tensor2::from_shape({B, H * T});
    Tensor2 dkv = xt::zeros<float>({R, 2 * D});  // [d k, d v] per token, heads concatenated
    Tensor2 dk = xt::zeros<float>({B, H * T * d}), dv = xt::zeros<float>({B, H * T * d});
    for (size_t img = 0; img < B; ++img)
        for (size_t h = 0; h < H; ++h) {
            const float* zg = dz.data() + img * D + h * d;
            const float *qh = q + (img * H + h) * d, *kh = k + (img * H + h) * T * d, *vh = v + (img * H + h) * T * d;
            const float* ph = pat + (img * H + h) * T;
            float *dp = dpat.data() + img * H * T + h * T, *ds = dsc.data() + img * H * T + h * T;
            double dot = 0;
            for (size_t t = 0; t < T; ++t) {  // d pattern = dz . v_t; d v_t = pattern_t dz
                double a = 0;
                for (size_t u = 0; u < d; ++u) a += double(zg[u]) * vh[t * d + u];
                dp[t] = float(a);
                dot += a * ph[t];
                float* dvt = dv.data() + img * H * T * d + (h * T + t) * d;
                for (size_t u = 0; u < d; ++u) dvt[u] = float(double(ph[t]) * zg[u]);
            }
            for (size_t t = 0; t < T; ++t) {  // softmax: d scores = p (d p - sum(d p * p)); scores = q k^T * scale
                ds[t] = float(double(ph[t]) * (double(dp[t]) - dot));
                float* dkt = dk.data() + img * H * T * d + (h * T + t) * d;
                for (size_t u = 0; u < d; ++u) {
                    dq(img, h * d + u) += float(double(ds[t]) * kh[t * d + u] * scale);
                    dkt[u] = float(double(ds[t]) * qh[u] * scale);
                }
            }
            for (size_t t = 0; t < T; ++t)
                for (size_t u = 0; u < d; ++u) {
                    dkv(img * T + t, h * d + u) = dk(img, (h * T + t) * d + u);
                    dkv(img * T + t, D + h * d + u) = dv(img, (h * T + t) * d + u);
                }
        }
    put_if(SK::HeadAttnPattern, dpat.data());
    put_if(SK::HeadAttnScores, dsc.data());
    put_if(SK::HeadAttnQ, dq.data());  // (B, H, 1, d) == the heads concatenated
    put_if(SK::HeadAttnK, dk.data());
    put_if(SK::HeadAttnV, dv.data());
    // k, v = ln_final(x) @ W[k; v].T: d ln_final.out = d [k, v] @ W[k; v]
    const Tensor2 wkv = xt::view(m.in_w, xt::range(D, 3 * D), xt::all());
    dtok = Tensor2::from_shape({R, D});
    linear_backward(dtok.data(), nullptr, nullptr, dkv.data(), nullptr, wkv, int(R), int(D), int(2 * D));
}

// The head, from dlogits (B, K) back to dx (B*T, D), the gradient of the residual stream leaving the
// last block. g: where the weights' gradients accumulate (null: not computed).
// Poolings: cls (ln_final on every token, its row 0; DeiT distilled: and the dist token's row, each to its
// head, the logits their mean), norm-then-mean (ln_final on every token, the mean of the patch rows) and
// mean-then-norm (the mean of the patch rows, ln_final on that one row).
void head_backward(const Weights& w, Weights* g, const Options& opt, size_t B, const StageGet& get,
                   const Tensor2& dlogits, Tensor2& dx, const StagePut* put) {
    using SK = StageKind;
    const Config& c = w.cfg;
    const RunDims rd = run_dims(c, opt);
    const size_t T = rd.T, D = c.width, K = c.classes, R = B * T, pf = size_t(rd.prefix), Np = T - pf;
    const Pooling pool = opt.pooling_for(c);
    const bool distilled = c.head == Head::Distilled;
    const bool embedding = c.head == Head::Identity;  // the output is the pooled feature: d feat = d embedding
    const bool projection = c.head == Head::Projection;  // CLIP: embedding = feat @ proj
    const auto at_head = [&](SK k) { return get(k, -1); };
    if (put) (*put)(embedding || projection ? SK::Embedding : SK::Logits, -1, dlogits.data());
    // logits = feat @ Wh.T + bh (distilled: (head(pooled) + head_dist(pooled_dist)) / 2)
    Tensor2 dl_half;
    const Tensor2* dl = &dlogits;
    if (distilled) {
        dl_half = dlogits / 2.f;
        dl = &dl_half;
        if (put) { (*put)(SK::LogitsCls, -1, dl_half.data()); (*put)(SK::LogitsDist, -1, dl_half.data()); }
    }
    Tensor2 dfeat = xt::zeros<float>({B, D});
    const bool normed_row = pool == Pooling::Mean || pool == Pooling::ClsThenNorm;  // the norm on the one pooled row
    const float* feat = embedding ? nullptr
                        : get(normed_row ? SK::LnFinalOut : pool == Pooling::Map ? SK::HeadResidPost : SK::Pooled, -1);
    if (embedding) {
        std::copy_n(dlogits.data(), B * D, dfeat.data());
    } else if (projection) {
        // embedding (B, E) = feat (B, D) @ proj (D, E): d feat = d embedding @ proj.T; d proj += feat.T @ d embedding
        const size_t E = size_t(c.embed_dim);
        ops::gemm(false, true, int(B), int(D), int(E), 1.f, dlogits.data(), int(E), w.proj.data(), int(E), 0.f,
                  dfeat.data(), int(D));
        if (g && g->proj.size())
            ops::gemm(true, false, int(D), int(E), int(B), 1.f, feat, int(D), dlogits.data(), int(E), 1.f, g->proj.data(),
                      int(E));
    } else {
        linear_backward(dfeat.data(), g ? &g->head_w : nullptr, g ? &g->head_b : nullptr, dl->data(), feat, w.head_w,
                        int(B), int(D), int(K));
    }
    dx = xt::zeros<float>({R, D});
    auto dx3 = as(dx.data(), std::array<size_t, 3>{B, T, D});
    if (normed_row) {
        // pooled = x[:, prefix:].mean(1) (CLIP's ClsThenNorm: x[:, 0]); feat = ln_final(pooled)
        Tensor2 dfin = Tensor2::from_shape({B, D}), dxhat = Tensor2::from_shape({B, D});
        norm_backward(c, LnSite::Final, at_head, dfin.data(), false, g ? &g->ln_f : nullptr, dxhat.data(), dfeat.data(),
                      w.ln_f, B, opt);
        if (pool == Pooling::ClsThenNorm)
            xt::view(dx3, xt::all(), 0, xt::all()) = dfin;
        else
            xt::view(dx3, xt::all(), xt::range(pf, T), xt::all()) =
                xt::view(dfin / float(Np), xt::all(), xt::newaxis(), xt::all());
        if (put) {
            (*put)(SK::LnFinalOut, -1, dfeat.data());
            (*put)(SK::LnFinalNormalized, -1, dxhat.data());
            (*put)(SK::Pooled, -1, dfin.data());
        }
        return;
    }
    // ln_final on every token: the gradient of its output, row by row, then back through it
    Tensor2 dout = xt::zeros<float>({R, D}), dxhat = Tensor2::from_shape({R, D});
    auto dout3 = as(dout.data(), std::array<size_t, 3>{B, T, D});
    if (pool == Pooling::Cls) {
        xt::view(dout3, xt::all(), 0, xt::all()) = dfeat;  // pooled = ln_final(x)[:, 0]
        if (put && !embedding) (*put)(SK::Pooled, -1, dfeat.data());  // (an embedding is ln_final.out[0]: no pooled)
        if (distilled) {  // pooled_dist = ln_final(x)[:, 1 + registers]
            const size_t row = 1 + size_t(c.registers);
            Tensor2 dpd = xt::zeros<float>({B, D});
            linear_backward(dpd.data(), g ? &g->head_dist_w : nullptr, g ? &g->head_dist_b : nullptr, dl->data(),
                            get(SK::PooledDist, -1), w.head_dist_w, int(B), int(D), int(K));
            xt::view(dout3, xt::all(), row, xt::all()) = dpd;
            if (put) (*put)(SK::PooledDist, -1, dpd.data());
        }
    } else if (pool == Pooling::Map) {  // SigLIP: the attention-pooling head over ln_final's every token
        map_head_backward(w, opt, B, get, dfeat, dout, put);
    } else {  // NormMean: pooled = ln_final(x)[:, prefix:].mean(1)
        xt::view(dout3, xt::all(), xt::range(pf, T), xt::all()) =
            xt::view(dfeat / float(Np), xt::all(), xt::newaxis(), xt::all());
        if (put) (*put)(SK::Pooled, -1, dfeat.data());
    }
    norm_backward(c, LnSite::Final, at_head, dx.data(), false, g ? &g->ln_f : nullptr, dxhat.data(), dout.data(), w.ln_f,
                  R, opt);
    if (put) {
        (*put)(SK::LnFinalOut, -1, dout.data());
        (*put)(SK::LnFinalNormalized, -1, dxhat.data());
    }
}

// Block l, from dx = d resid_post (B*T, D) to dx = d the residual stream entering the block (in
// place). zcat: the block's heads concatenated (B*T, D), the output projection's input, read only for
// the weights' gradient (null with g null).
void block_backward(const Weights& w, Weights* g, int l, const Options& opt, size_t B, const StageGet& get,
                    const float* zcat, Tensor2& dx, BlockScratch& st, const StagePut* put) {
    using SK = StageKind;
    const Config& c = w.cfg;
    const RunDims rd = run_dims(c, opt);
    const size_t T = rd.T, D = c.width, H = c.heads, d = c.head_dim(), M = c.mlp, R = B * T;
    const bool rec = put != nullptr;
    auto put_if = [&](StageKind k, const float* src) { if (put) (*put)(k, l, src); };
    auto at = [&](StageKind k) { return get(k, l); };
    const float scale = 1.f / std::sqrt(float(d));
    const float alpha = opt.bug_scale_after_softmax ? 1.f : scale;   // scores = alpha * q k^T
    const float post_scale = opt.bug_scale_after_softmax ? scale : 1.f;  // attn = post_scale * softmax(scores)
    st.da.resize({R, D});
    st.dqkv.resize({R, 3 * D});
    st.dzcat.resize({R, D});
    st.dpre.resize({R, size_t(c.mlp_in())});
    st.dpost.resize({R, M});
    st.dq.resize({B, H, T, d});
    st.dk.resize({B, H, T, d});
    st.dv.resize({B, H, T, d});
    st.dxh.resize({rec ? R : 0, D});
    st.dls.resize({c.layer_scale ? R : 0, D});
    float* dxh_p = rec ? st.dxh.data() : nullptr;
    const BlockW& bw = w.blocks[size_t(l)];
    BlockW* gb = g ? &g->blocks[size_t(l)] : nullptr;
    // packed-only matrices (pack_blocks) are unpacked for this block alone
    Tensor2 t_fc2, t_fc1, t_proj, t_qkv;
    const Tensor2& fc2_w = plain_matrix(bw.fc2_w, bw.fc2_p, t_fc2);
    const Tensor2& fc1_w = plain_matrix(bw.fc1_w, bw.fc1_p, t_fc1);
    const Tensor2& proj_w = plain_matrix(bw.proj_w, bw.proj_p, t_proj);
    const Tensor2& qkv_w = plain_matrix(bw.qkv_w, bw.qkv_p, t_qkv);
    const Shape HTd{H, T, d}, HTT{H, T, T};
    // layer scale: ls = gamma * branch; d branch = gamma * d ls, d gamma = sum over the rows of branch * d ls
    auto layer_scale = [&](StageKind ls, StageKind branch, const Tensor1& gamma, Tensor1* dgamma) -> const float* {
        put_if(ls, dx.data());
        const float* b = at(branch);
        for (size_t r = 0; r < R; ++r) {
            const float* y = dx.data() + r * D;
            float* o = st.dls.data() + r * D;
            for (size_t i = 0; i < D; ++i) o[i] = gamma(i) * y[i];
            if (dgamma && dgamma->size())
                for (size_t i = 0; i < D; ++i) (*dgamma)(i) += b[r * D + i] * y[i];
        }
        return st.dls.data();
    };
    // dx holds d resid_post. MLP branch: out = fc2(gelu(fc1(ln2(resid_mid)))) (times ls2's gamma)
    put_if(SK::ResidPost, dx.data());
    const float* dmo = c.layer_scale ? layer_scale(SK::Ls2, SK::MlpOut, bw.ls2, gb ? &gb->ls2 : nullptr) : dx.data();
    put_if(SK::MlpOut, dmo);
    // (EVA-02 Base/Large: fc2 reads the MLP's LayerNorm, mlp.norm.out; back through it to mlp.post)
    linear_backward(st.dpost.data(), gb ? &gb->fc2_w : nullptr, gb ? &gb->fc2_b : nullptr, dmo,
                    at(c.mlp_norm ? SK::MlpNormOut : SK::MlpPost), fc2_w, int(R), int(M), int(D));
    if (c.mlp_norm) {
        put_if(SK::MlpNormOut, st.dpost.data());
        Tensor2 dhid = Tensor2::from_shape({R, M}), dxhm = Tensor2::from_shape({rec ? R : 0, M});
        norm_backward(c, LnSite::Mlp, at, dhid.data(), false, gb ? &gb->mlp_norm : nullptr, rec ? dxhm.data() : nullptr,
                      st.dpost.data(), bw.mlp_norm, R, opt);
        put_if(SK::MlpNormNormalized, dxhm.data());
        st.dpost = std::move(dhid);
    }
    put_if(SK::MlpPost, st.dpost.data());
    act_backward(c.act, st.dpre.data(), st.dpost.data(), at(SK::MlpPre), R, M);
    put_if(SK::MlpPre, st.dpre.data());
    linear_backward(st.da.data(), gb ? &gb->fc1_w : nullptr, gb ? &gb->fc1_b : nullptr, st.dpre.data(), at(SK::Ln2Out),
                    fc1_w, int(R), int(D), c.mlp_in());
    put_if(SK::Ln2Out, st.da.data());
    // d resid_mid = d resid_post (the skip) + d through LayerNorm
    norm_backward(c, LnSite::Ln2, at, dx.data(), true, gb ? &gb->ln2 : nullptr, dxh_p, st.da.data(), bw.ln2, R, opt);
    put_if(SK::Ln2Normalized, dxh_p);
    put_if(SK::ResidMid, dx.data());
    const float* dao = c.layer_scale ? layer_scale(SK::Ls1, SK::AttnOut, bw.ls1, gb ? &gb->ls1 : nullptr) : dx.data();
    put_if(SK::AttnOut, dao);
    // attention output projection: attn_out = proj(zcat)
    linear_backward(st.dzcat.data(), gb ? &gb->proj_w : nullptr, gb ? &gb->proj_b : nullptr, dao, zcat, proj_w,
                    int(R), int(D), int(D));
    // per image and head: z = attn @ v, attn = post_scale * softmax(alpha * q k^T)
    // (RoPE: the scores were made of the rotated q and k)
    const float *q = at(c.rope ? SK::AttnQRot : SK::AttnQ), *k = at(c.rope ? SK::AttnKRot : SK::AttnK),
                *v = at(SK::AttnV), *pat = at(SK::AttnPattern);
    Array rz, rP, rS;
    if (rec) { rz = empty_array(HTd); rP = empty_array(HTT); rS = empty_array(HTT); }
#pragma omp parallel
    {
        std::vector<float> dP(T * T);
#pragma omp for schedule(static)
        for (size_t bh = 0; bh < B * H; ++bh) {
            const size_t img = bh / H, h = bh % H, o = bh * T * d, oo = bh * T * T;
            const float* Pb = pat + oo;
            const float* dz = st.dzcat.data() + img * T * D + h * d;
            // dP = dz @ v.T ; dv = attn.T @ dz
            ops::gemm(false, true, int(T), int(T), int(d), 1.f, dz, int(D), v + o, int(d), 0.f, dP.data(), int(T));
            ops::gemm(true, false, int(T), int(d), int(T), 1.f, Pb, int(T), dz, int(D), 0.f, st.dv.data() + o,
                      int(d));
            if (rec) {
                for (size_t t = 0; t < T; ++t) std::copy_n(dz + t * D, d, rz.data() + (h * T + t) * d);
                std::copy_n(dP.data(), T * T, rP.data() + h * T * T);
            }
            // softmax backward, with attn = c * softmax(s) (c = 1 unless the bug is on):
            // ds = attn * (dP - sum(dP * attn, -1) / c)
            for (size_t i = 0; i < T; ++i) {
                float* r = dP.data() + i * T;
                const float* pr = Pb + i * T;
                float s = 0;
                for (size_t j = 0; j < T; ++j) s += r[j] * pr[j];
                s /= post_scale;
                for (size_t j = 0; j < T; ++j) r[j] = pr[j] * (r[j] - s);
            }
            if (rec) std::copy_n(dP.data(), T * T, rS.data() + h * T * T);
            // scores = alpha q k.T: dq = alpha ds k ; dk = alpha ds.T q
            ops::gemm(false, false, int(T), int(d), int(T), alpha, dP.data(), int(T), k + o, int(d), 0.f,
                      st.dq.data() + o, int(d));
            ops::gemm(true, false, int(T), int(d), int(T), alpha, dP.data(), int(T), q + o, int(d), 0.f,
                      st.dk.data() + o, int(d));
        }
    }
    if (rec) {
        put_if(SK::AttnZ, rz.data());
        put_if(SK::AttnPattern, rP.data());
        put_if(SK::AttnScores, rS.data());
    }
    if (c.rope) {  // dq, dk were those of q_rot, k_rot: back through the rotation (rope_rotate_back) to q and k
        put_if(SK::AttnQRot, st.dq.data());
        put_if(SK::AttnKRot, st.dk.data());
        const RopeAngles ang = rope_angles(c, w.rope_periods, rd);
        rope_rotate_back(st.dq.data(), ang, B * H, T);
        rope_rotate_back(st.dk.data(), ang, B * H, T);
    }
    if (rec) {
        put_if(SK::AttnQ, st.dq.data());
        put_if(SK::AttnK, st.dk.data());
        put_if(SK::AttnV, st.dv.data());
    }
    // back to the fused layout (R, 3D) of the qkv Linear: the inverse of the forward's split
    const float* d3[3] = {st.dq.data(), st.dk.data(), st.dv.data()};
    for (size_t bt = 0; bt < R; ++bt)
        for (size_t s3 = 0; s3 < 3; ++s3)
            for (size_t h = 0; h < H; ++h)
                std::copy_n(d3[s3] + (((bt / T) * H + h) * T + bt % T) * d, d,
                            st.dqkv.data() + bt * 3 * D + s3 * D + h * d);
    linear_backward(st.da.data(), gb ? &gb->qkv_w : nullptr, gb ? &gb->qkv_b : nullptr, st.dqkv.data(), at(SK::Ln1Out),
                    qkv_w, int(R), int(D), int(3 * D));
    put_if(SK::Ln1Out, st.da.data());
    norm_backward(c, LnSite::Ln1, at, dx.data(), true, gb ? &gb->ln1 : nullptr, dxh_p, st.da.data(), bw.ln1, R, opt);
    put_if(SK::Ln1Normalized, dxh_p);
}

// The embedding, from dx = d (the stream entering block 0) (B*T, D) to the patches and the image. With
// registers the stream is with_registers (the register rows after the cls token, or first without one)
// and embed is the rest; tokens = cat(cls, dist, patch_embed); embed = tokens + pos_embed.
void embed_backward(const Weights& w, Weights* g, const Options& opt, size_t B, const StageGet& get,
                    const Tensor2& dstream, const StagePut* put) {
    using SK = StageKind;
    const Config& c = w.cfg;
    const RunDims rd = run_dims(c, opt);
    const size_t C = c.channels, Hi = rd.img_h, Wi = rd.img_w, P = c.patch, gh = rd.gh, gw = rd.gw, N = rd.N,
                 T = rd.T, T0 = rd.T0, D = c.width, CPP = c.patch_dim(), Rg = size_t(c.registers);
    const bool rec = put != nullptr;
    const size_t pc = c.cls_token ? 1 : 0;  // where the registers go
    // CLIP's ln_pre: dstream is d ln_pre.out; back through it to the tokens it normalized
    Tensor2 dlnpre;
    const Tensor2* din = &dstream;
    if (c.ln_pre) {
        const size_t R = B * T;
        dlnpre = Tensor2::from_shape({R, D});
        Tensor2 dxhat = Tensor2::from_shape({R, D});
        norm_backward(c, LnSite::Pre, [&](SK k) { return get(k, -1); }, dlnpre.data(), false, g ? &g->ln_pre : nullptr,
                      dxhat.data(), dstream.data(), w.ln_pre, R, opt);
        if (rec) {
            (*put)(SK::LnPreOut, -1, dstream.data());
            (*put)(SK::LnPreNormalized, -1, dxhat.data());
        }
        din = &dlnpre;
    }
    const Tensor2& dsin = *din;
    Tensor2 dembed_regs;
    const Tensor2* demb = &dsin;
    if (Rg) {
        // with_registers = cat(x[:, :pc], reg, x[:, pc:]): the register rows' gradient is the tokens' own
        if (rec) (*put)(SK::WithRegisters, -1, dsin.data());
        auto ds3 = as(dsin.data(), std::array<size_t, 3>{B, T, D});
        if (g && g->reg.size()) g->reg += xt::sum(xt::view(ds3, xt::all(), xt::range(pc, pc + Rg), xt::all()), {0});
        dembed_regs = Tensor2::from_shape({B * T0, D});
        auto de3 = as(dembed_regs.data(), std::array<size_t, 3>{B, T0, D});
        xt::view(de3, xt::all(), xt::range(0, pc), xt::all()) = xt::view(ds3, xt::all(), xt::range(0, pc), xt::all());
        xt::view(de3, xt::all(), xt::range(pc, T0), xt::all()) = xt::view(ds3, xt::all(), xt::range(pc + Rg, T), xt::all());
        demb = &dembed_regs;
    }
    auto dx3 = as(demb->data(), std::array<size_t, 3>{B, T0, D});
    const size_t p0 = T0 - N;  // the patch rows of tokens: after cls and dist
    if (rec) {
        (*put)(SK::Embed, -1, demb->data());
        (*put)(SK::Tokens, -1, demb->data());
        // embed = tokens + pos_embed: the same gradient reaches both (no table, DINOv3's RoPE: embed is the tokens)
        if (c.pos_table) (*put)(SK::PosEmbed, -1, demb->data());
    }
    if (g) {
        // the stored table: [cls, dist,] the grid, or the grid alone (no row for the tokens before the patches)
        if (!rd.resized && g->pos.size())  // resized: the stored table's gradient would need the resize's adjoint
            g->pos += xt::sum(xt::view(dx3, xt::all(), xt::range(c.pos_no_cls ? p0 : 0, T0), xt::all()), {0});
        if (c.cls_token && g->cls.size()) g->cls += xt::sum(xt::view(dx3, xt::all(), 0, xt::all()), {0});
        if (c.dist_token && g->dist.size()) g->dist += xt::sum(xt::view(dx3, xt::all(), pc, xt::all()), {0});
    }
    if (!g && !rec) return;
    Tensor3 dpe = xt::view(dx3, xt::all(), xt::range(p0, T0), xt::all());
    if (c.patch_norm) {  // AIMv2: the tokens' patch rows are patch_embed.norm's output; back through the norm
        Tensor3 dconv = Tensor3::from_shape({B, N, D}), dxhat = Tensor3::from_shape({B, N, D});
        norm_backward(c, LnSite::Patch, [&](SK k) { return get(k, -1); }, dconv.data(), false,
                      g ? &g->patch_norm : nullptr, dxhat.data(), dpe.data(), w.patch_norm, B * N, opt);
        if (rec) {
            (*put)(SK::PatchNormOut, -1, dpe.data());
            (*put)(SK::PatchNormNormalized, -1, dxhat.data());
        }
        dpe = std::move(dconv);
    }
    if (rec) (*put)(SK::PatchEmbed, -1, dpe.data());
    Tensor2 dpatch = Tensor2::from_shape({rec ? N : 0, CPP});
    linear_backward(rec ? dpatch.data() : nullptr, g ? &g->patch_w : nullptr, g ? &g->patch_b : nullptr, dpe.data(),
                    get(SK::Patches, -1), w.patch_w, int(B * N), int(CPP), int(D));
    if (rec) {
        (*put)(SK::Patches, -1, dpatch.data());
        // input.grad: the patches' gradient put back where each pixel came from
        Tensor3 dimg = Tensor3::from_shape({C, Hi, Wi});
        if (opt.bug_reshape_patches) std::copy(dpatch.begin(), dpatch.end(), dimg.begin());
        else
            xt::noalias(as(dimg.data(), std::array<size_t, 5>{C, gh, P, gw, P})) =
                xt::transpose(as(dpatch.data(), std::array<size_t, 5>{gh, gw, C, P, P}), {2, 0, 3, 1, 4});
        (*put)(SK::Input, -1, dimg.data());
    }
}

}  // namespace

struct Batch::State {
    Trace acts;                    // the stages the forward kept (training)
    const Trace* src = nullptr;    // where backward reads them (acts, or the caller's trace)
    WorkspacePtr ws = make_workspace();
    Options opt;
    size_t B = 0;
    Tensor2 dx;
    BlockScratch scratch;
};

Batch::Batch() : s_(new State) {}
Batch::~Batch() = default;

const Array& Batch::forward(const Weights& w, const Tensor4& x, const Options& opt, Trace* record,
                            const ModelIdentity& model, const std::atomic<bool>* cancel) {
    s_->opt = opt;
    s_->B = x.shape(0);
    Trace& t = record ? *record : s_->acts;
    s_->src = &t;
    return forward_batch(w, x, opt, t, record ? Keep::All : Keep::ForBackward, *s_->ws, model, cancel);
}

// The stage kinds whose gradient backward() writes (record_grad below): the stage
// table's has_grad must be exactly these (check_stage_definitions).
const std::vector<StageKind>& backward_grad_kinds() {
    using K = StageKind;
    static const std::vector<StageKind> kinds{
        K::Input, K::Patches, K::PatchEmbed, K::PatchNormNormalized, K::PatchNormOut, K::Tokens, K::PosEmbed, K::Embed, K::WithRegisters, K::LnPreNormalized,
        K::LnPreOut,
        K::Ln1Normalized, K::Ln1Out, K::AttnQ, K::AttnK, K::AttnV, K::AttnQRot, K::AttnKRot, K::AttnScores, K::AttnPattern, K::AttnZ,
        K::AttnOut, K::Ls1, K::ResidMid, K::Ln2Normalized, K::Ln2Out, K::MlpPre, K::MlpPost, K::MlpNormNormalized,
        K::MlpNormOut, K::MlpOut, K::Ls2,
        K::ResidPost, K::LnFinalNormalized, K::LnFinalOut, K::Pooled, K::PooledDist, K::LogitsCls, K::LogitsDist,
        K::Logits, K::HeadAttnQ, K::HeadAttnK, K::HeadAttnV, K::HeadAttnScores, K::HeadAttnPattern, K::HeadAttnZ,
        K::HeadAttnOut, K::HeadLnNormalized, K::HeadLnOut, K::HeadMlpPre, K::HeadMlpPost, K::HeadMlpOut, K::HeadResidPost,
        K::Embedding};
    return kinds;
}

float Batch::cross_entropy(const Array& logits, const int* labels, Tensor2& dlogits, int* correct) {
    const size_t K = logits.shape().back(), B = logits.size() / K;
    dlogits.resize({B, K});
    double loss = 0;
    int ok = 0;
    for (size_t b = 0; b < B; ++b) {
        const float* z = logits.data() + b * K;
        float m = *std::max_element(z, z + K);
        double s = 0;
        for (size_t i = 0; i < K; ++i) s += std::exp(double(z[i] - m));
        double lse = m + std::log(s);
        loss += lse - z[labels[b]];
        if (int(std::max_element(z, z + K) - z) == labels[b]) ++ok;
        // d loss / d logits = (softmax - onehot) / B
        for (size_t i = 0; i < K; ++i)
            dlogits(b, i) = float((std::exp(z[i] - lse) - (int(i) == labels[b])) / double(B));
    }
    if (correct) *correct = ok;
    return float(loss / double(B));
}

std::string backward_unsupported(const Config& c, const Options& o) {
    // An intervention replaces a stage by something its gradient formula does not describe (an ablated
    // head's constant, a patched row from another run, a shorter sequence): no gradients with one.
    if (!o.iv.empty())
        return "the backward pass does not run with interventions (" + o.iv.describe() +
               "): the gradients would not be those of the intervened pass";
    // every family's parts have their backward (RMSNorm, the patch norm, RoPE, no position table included): what is
    // left is a pooling the model cannot run
    if (o.pooling_for(c) == Pooling::Cls && !c.cls_token)
        return "the backward pass follows the model's own pooling; this model (" + std::string(family_label(c.family)) +
               ") is asked for cls pooling without a cls token";
    return "";
}

void Batch::backward(const Weights& w, const Tensor2& dlogits, Weights& g, Trace* rec) { backward(w, dlogits, &g, rec); }

void Batch::backward(const Weights& w, const Tensor2& dlogits, Weights* g, Trace* rec) {
    const Config& c = w.cfg;
    State& st = *s_;
    if (const std::string why = backward_unsupported(c, st.opt); !why.empty()) throw std::invalid_argument(why);
    if (rec && st.B != 1) throw std::logic_error("gradient recording needs a batch of one");
    const Trace& A = *st.src;
    const StageGet get = [&](StageKind k, int l) { return A.get(StageId{k, l}).data(); };
    // Gradients recorded into the traced run's own trace, by id, shaped as the table says.
    const StagePut put = [&](StageKind k, int l, const float* src) {
        Array& a = rec->record_grad(StageId{k, l});
        std::copy_n(src, a.size(), a.data());
    };
    const StagePut* putp = rec ? &put : nullptr;
    head_backward(w, g, st.opt, st.B, get, dlogits, st.dx, putp);
    for (int l = c.depth - 1; l >= 0; --l)
        block_backward(w, g, l, st.opt, st.B, get, workspace_zcat(*st.ws, l).data(), st.dx, st.scratch, putp);
    embed_backward(w, g, st.opt, st.B, get, st.dx, putp);
}

}  // namespace vit

// ---- Gradients on demand (Trace::set_on_demand): the backward pass checkpointed at the
// residual stream between blocks.

namespace vit {

Tensor2 d_logit(const Config& c, const Array& logits, int& cls) {
    const int K = c.out_dim();  // classes, or the embedding's width
    if (cls < 0) cls = int(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (cls >= K)
        throw std::invalid_argument(c.has_logits() ? "class " + std::to_string(cls) + " is out of range (the model has " +
                                                         std::to_string(c.classes) + " classes)"
                                                   : "embedding dimension " + std::to_string(cls) +
                                                         " is out of range (the embedding has " + std::to_string(K) + ")");
    Tensor2 dl = xt::zeros<float>({size_t(1), size_t(K)});
    dl(0, size_t(cls)) = 1.f;
    return dl;
}

std::string grad_target(const Config& c, int cls) {
    return std::string(c.has_logits() ? "logit[" : "embedding[") + std::to_string(cls) + "]";
}

Trace::BlockGrads backward_on_demand(std::shared_ptr<const Weights> wp, Trace& t, const RunRequest& req) {
    const Weights& w = *wp;
    const Config& c = w.cfg;
    const Options& opt = t.options();
    if (const std::string why = backward_unsupported(c, opt); !why.empty()) throw std::invalid_argument(why);
    if (!t.on_demand()) throw std::logic_error("backward_on_demand: the trace is not on demand");
    const StageTable& tab = t.table();
    const StageId out_id{c.has_logits() ? StageKind::Logits : StageKind::Embedding};
    const Array* logits = t.kept(size_t(std::max(0, tab.index(out_id)))) ? t.find(out_id) : nullptr;
    if (!logits) throw std::invalid_argument("on-demand gradients: the model's output is not in the trace");
    int cls = req.grad_class;
    const Tensor2 dl = d_logit(c, *logits, cls);
    // outside the blocks: the kept stages, and every gradient recorded
    const StageGet get_kept = [&](StageKind k, int l) { return t.get(StageId{k, l}).data(); };
    const StagePut put_kept = [&](StageKind k, int l, const float* src) {
        Array& a = t.record_grad(StageId{k, l});
        std::copy_n(src, a.size(), a.data());
    };
    Tensor2 dx;
    head_backward(w, nullptr, opt, 1, get_kept, dl, dx, &put_kept);
    BlockScratch scratch;
    for (int l = c.depth - 1; l >= 0; --l) {
        if (req.cancel && req.cancel->load(std::memory_order_relaxed)) throw Cancelled();
        const Trace blk = t.block(l);  // the block's stages, in a trace of this pass's own
        const StageGet get_block = [&](StageKind k, int b) { return blk.get(StageId{k, b}).data(); };
        // in a block: the gradients of the rows the pass kept (the stream leaving it, the kept kinds)
        const StagePut put_block = [&](StageKind k, int b, const float* src) {
            const int r = tab.index(StageId{k, b});
            if (r >= 0 && t.kept(size_t(r))) put_kept(k, b, src);
        };
        block_backward(w, nullptr, l, opt, 1, get_block, nullptr, dx, scratch, &put_block);
        t.add_progress(1);  // a unit per block (Trace::set_progress)
    }
    embed_backward(w, nullptr, opt, 1, get_kept, dx, &put_kept);
    t.set_grad_class(cls);
    // A block's gradients on demand: its backward from the kept gradient of the stream leaving it, with
    // this pass's thread count (the kernels split their sums by it: another count could change the last bits).
    const int threads = ops::threads();
    return [wp, threads](const Trace& kept, int l, const Trace::StageRead& stage, Trace& out) {
        ops::Budget budget(threads);
        const StageTable& tb = kept.table();
        const Config& cf = wp->cfg;
        const Array* leaving = kept.grad(StageId{StageKind::ResidPost, l});
        if (!leaving || !kept.grad_kept(size_t(tb.index(StageId{StageKind::ResidPost, l}))))
            throw std::logic_error("gradients on demand: no kept gradient of the stream leaving block " + std::to_string(l));
        Tensor2 d = Tensor2::from_shape({leaving->size() / size_t(cf.width), size_t(cf.width)});
        std::copy_n(leaving->data(), d.size(), d.data());
        const StageGet get = [&](StageKind k, int b) { return stage(size_t(tb.index(StageId{k, b}))).data(); };
        const StagePut put = [&](StageKind k, int b, const float* src) {
            Array& a = out.record_grad(StageId{k, b});
            std::copy_n(src, a.size(), a.data());
        };
        BlockScratch st;
        block_backward(*wp, nullptr, l, kept.options(), 1, get, nullptr, d, st, &put);
    };
}

}  // namespace vit
