// Batched training forward/backward. Rows are (b, t) b-major: R = B*T.
// Every backward names the PyTorch quantity it computes.
#include "train.h"

#include <zlib.h>

#include <algorithm>
#include <functional>
#include <cmath>
#include <cstring>
#include <omp.h>

#include "forward.h"
#include "image.h"
#include "io.h"
#include "ops.h"

namespace vit {

using V = std::vector<float>;

Weights zeros_like(const Weights& w) {
    Weights z;
    z.cfg = w.cfg;
    z.blocks.resize(w.blocks.size());
    auto src = w.named();
    auto dst = z.named();
    for (size_t i = 0; i < src.size(); ++i) *dst[i].second = Tensor::zeros(src[i].second->shape);
    return z;
}

Weights clone(const Weights& w) {
    Weights c = zeros_like(w);
    auto src = w.named();
    auto dst = c.named();
    for (size_t i = 0; i < src.size(); ++i) std::copy_n(src[i].second->data(), src[i].second->size(), dst[i].second->data());
    return c;
}

void scale_(Weights& w, float s) {
    for (auto& [n, t] : w.named())
        for (size_t i = 0; i < t->size(); ++i) (*t)(i) *= s;
}

namespace {

// dW(O,I) += dY(R,O).T @ X(R,I); db(O) += dY.sum(0); dX(R,I) = dY @ W (if dX).
void linear_backward(float* dX, float* dW, float* db, const float* dY, const float* X, const float* W, int R,
                     int I, int O) {
#pragma omp parallel
    {
        int t = omp_get_thread_num(), n = omp_get_num_threads();
        int o0 = int(int64_t(O) * t / n), o1 = int(int64_t(O) * (t + 1) / n);
        if (o1 > o0) {
            ops::gemm(true, false, o1 - o0, I, R, 1.f, dY + o0, O, X, I, 1.f, dW + size_t(o0) * I, I);
            if (db)
                for (int r = 0; r < R; ++r) {
                    const float* y = dY + size_t(r) * O;
                    for (int o = o0; o < o1; ++o) db[o] += y[o];
                }
        }
        if (dX) {
            int r0 = int(int64_t(R) * t / n), r1 = int(int64_t(R) * (t + 1) / n);
            if (r1 > r0) ops::gemm(false, false, r1 - r0, I, O, 1.f, dY + size_t(r0) * O, O, W, I, 0.f,
                                   dX + size_t(r0) * I, I);
        }
    }
}

// LayerNorm forward keeping xhat and 1/sqrt(var+eps) for backward.
void ln_forward(float* out, float* xhat, float* rstd, const float* x, const LayerNormW& w, int R, int D, float eps,
                const Options& opt) {
    V sd(R);
    ops::layernorm(out, xhat, nullptr, sd.data(), x, opt.affine ? w.g.data() : nullptr,
                   opt.affine ? w.b.data() : nullptr, R, D, eps, opt.unbiased);
    for (int r = 0; r < R; ++r) rstd[r] = float(1.0 / std::sqrt(double(sd[r]) * sd[r] + eps));
}

// dx (=, or += if accumulate) from dy through LayerNorm; dxhat_out optional (the
// gradient at `normalized`). With N the variance divisor (D, or D-1 unbiased):
// dx = rstd * (dxhat - mean(dxhat) - xhat * sum(dxhat * xhat) / N)
void ln_backward(float* dx, bool accumulate, float* dg, float* db, float* dxhat_out, const float* dy,
                 const float* xhat, const float* rstd, const LayerNormW& w, int R, int D, const Options& opt) {
    const float nv = float(opt.unbiased ? std::max(D - 1, 1) : D);
    if (opt.affine) {
        for (int r = 0; r < R; ++r) {
            const float* y = dy + size_t(r) * D;
            const float* xh = xhat + size_t(r) * D;
            for (int i = 0; i < D; ++i) { dg[i] += y[i] * xh[i]; db[i] += y[i]; }
        }
    }
#pragma omp parallel if (R * D > 20000)
    {
    V dxh(D);
#pragma omp for schedule(static)
    for (int r = 0; r < R; ++r) {
        const float* y = dy + size_t(r) * D;
        const float* xh = xhat + size_t(r) * D;
        float* g = dxhat_out ? dxhat_out + size_t(r) * D : dxh.data();
        double s1 = 0, s2 = 0;
        for (int i = 0; i < D; ++i) {
            float v = opt.affine ? y[i] * w.g(i) : y[i];
            g[i] = v;
            s1 += v;
            s2 += double(v) * xh[i];
        }
        float m1 = float(s1 / D), m2 = float(s2 / nv), rs = rstd[r];
        float* o = dx + size_t(r) * D;
        if (accumulate) for (int i = 0; i < D; ++i) o[i] += rs * (g[i] - m1 - xh[i] * m2);
        else for (int i = 0; i < D; ++i) o[i] = rs * (g[i] - m1 - xh[i] * m2);
    }
    }
}

// d/dx gelu(x) = Phi(x) + x phi(x)
void gelu_backward(float* dx, const float* dy, const float* x, size_t n) {
#pragma omp parallel for schedule(static) if (n > 50000)
    for (size_t i = 0; i < n; ++i) {
        float v = x[i];
        float cdf = 0.5f * (1.f + std::erf(v * float(M_SQRT1_2)));
        float pdf = float(0.3989422804014327) * std::exp(-0.5f * v * v);
        dx[i] = dy[i] * (cdf + v * pdf);
    }
}

}  // namespace

struct LayerCache {
    V x_in, xhat1, rstd1, a1, qkv, P, zcat, rmid, xhat2, rstd2, a2, pre, post;
};

struct TrainCache {
    int B = 0;
    Options opt;
    V input, patches, x_last, feat_in, xhatf, rstdf, feat;
    std::vector<LayerCache> L;
    // backward scratch
    V dx, dtmp, dqkv, dzcat, dpre, dpost, da;
};

Batch::Batch() : c_(new TrainCache) {}
Batch::~Batch() = default;

void Batch::forward(const Weights& w, const float* x, int B, const Options& opt, float* logits) {
    const Config& c = w.cfg;
    const int C = c.channels, S = c.image_size, P = c.patch, G = c.grid(), N = c.patches(), T = c.tokens(),
              D = c.width, H = c.heads, d = c.head_dim(), M = c.mlp, K = c.classes, CPP = c.patch_dim();
    const int R = B * T;
    TrainCache& k = *c_;
    k.B = B;
    k.opt = opt;
    const Pooling pool = opt.pooling < 0 ? c.pooling : Pooling(opt.pooling);
    k.input.assign(x, x + size_t(B) * C * S * S);
    k.patches.resize(size_t(B) * N * CPP);
    // patches (B*N, C*P*P): x.unfold(2,P,P).unfold(3,P,P).permute(0,2,3,1,4,5)
#pragma omp parallel for schedule(static) if (B > 1)
    for (int b = 0; b < B; ++b)
        for (int gy = 0; gy < G; ++gy)
            for (int gx = 0; gx < G; ++gx)
                for (int ch = 0; ch < C; ++ch)
                    for (int py = 0; py < P; ++py)
                        std::copy_n(x + ((size_t(b) * C + ch) * S + gy * P + py) * S + gx * P, P,
                                    k.patches.data() + ((size_t(b) * N + gy * G + gx) * CPP + (ch * P + py) * P));
    V pe(size_t(B) * N * D);
    ops::linear(pe.data(), k.patches.data(), w.patch_w.data(), w.patch_b.data(), B * N, CPP, D);
    k.L.resize(c.depth);
    V x0(size_t(R) * D);
    for (int b = 0; b < B; ++b)
        for (int t = 0; t < T; ++t) {
            float* o = x0.data() + (size_t(b) * T + t) * D;
            const float* src = t == 0 ? w.cls.data() : pe.data() + (size_t(b) * N + t - 1) * D;
            for (int j = 0; j < D; ++j) o[j] = src[j] + w.pos(size_t(t) * D + j);
        }
    const float scale = 1.f / std::sqrt(float(d));
    V tmp(size_t(R) * D);
    const float* xin = x0.data();
    for (int l = 0; l < c.depth; ++l) {
        const BlockW& bw = w.blocks[l];
        LayerCache& lc = k.L[l];
        lc.x_in.assign(xin, xin + size_t(R) * D);
        lc.xhat1.resize(size_t(R) * D); lc.rstd1.resize(R); lc.a1.resize(size_t(R) * D);
        ln_forward(lc.a1.data(), lc.xhat1.data(), lc.rstd1.data(), lc.x_in.data(), bw.ln1, R, D, c.eps, opt);
        lc.qkv.resize(size_t(R) * 3 * D);
        ops::linear(lc.qkv.data(), lc.a1.data(), bw.qkv_w.data(), bw.qkv_b.data(), R, D, 3 * D);
        lc.P.resize(size_t(B) * H * T * T);
        lc.zcat.resize(size_t(R) * D);
#pragma omp parallel for schedule(static)
        for (int bh = 0; bh < B * H; ++bh) {
            int b = bh / H, h = bh % H;
            const float* q = lc.qkv.data() + size_t(b) * T * 3 * D + h * d;
            float* Pb = lc.P.data() + size_t(bh) * T * T;
            ops::gemm(false, true, T, T, d, scale, q, 3 * D, q + D, 3 * D, 0.f, Pb, T);
            ops::softmax_rows(Pb, Pb, T, T);
            ops::gemm(false, false, T, d, T, 1.f, Pb, T, q + 2 * D, 3 * D, 0.f,
                      lc.zcat.data() + size_t(b) * T * D + h * d, D);
        }
        ops::linear(tmp.data(), lc.zcat.data(), bw.proj_w.data(), bw.proj_b.data(), R, D, D);
        lc.rmid.resize(size_t(R) * D);
        ops::add(lc.rmid.data(), lc.x_in.data(), tmp.data(), size_t(R) * D);
        lc.xhat2.resize(size_t(R) * D); lc.rstd2.resize(R); lc.a2.resize(size_t(R) * D);
        ln_forward(lc.a2.data(), lc.xhat2.data(), lc.rstd2.data(), lc.rmid.data(), bw.ln2, R, D, c.eps, opt);
        lc.pre.resize(size_t(R) * M); lc.post.resize(size_t(R) * M);
        ops::linear(lc.pre.data(), lc.a2.data(), bw.fc1_w.data(), bw.fc1_b.data(), R, D, M);
        ops::gelu(lc.post.data(), lc.pre.data(), size_t(R) * M);
        ops::linear(tmp.data(), lc.post.data(), bw.fc2_w.data(), bw.fc2_b.data(), R, M, D);
        ops::add(tmp.data(), lc.rmid.data(), tmp.data(), size_t(R) * D);
        k.x_last.assign(tmp.begin(), tmp.end());  // resid_post; tmp is scratch again
        xin = k.x_last.data();
    }
    if (c.depth == 0) k.x_last = x0;
    // Pooling on the final residual stream; LayerNorm on the B pooled rows
    // (for cls pooling LayerNorm is per token, so only the cls rows matter).
    k.feat_in.assign(size_t(B) * D, 0.f);
    for (int b = 0; b < B; ++b) {
        float* f = k.feat_in.data() + size_t(b) * D;
        if (pool == Pooling::Cls) std::copy_n(k.x_last.data() + size_t(b) * T * D, D, f);
        else {
            for (int t = 1; t < T; ++t)
                for (int j = 0; j < D; ++j) f[j] += k.x_last[(size_t(b) * T + t) * D + j];
            for (int j = 0; j < D; ++j) f[j] /= float(N);
        }
    }
    k.xhatf.resize(size_t(B) * D); k.rstdf.resize(B); k.feat.resize(size_t(B) * D);
    ln_forward(k.feat.data(), k.xhatf.data(), k.rstdf.data(), k.feat_in.data(), w.ln_f, B, D, c.eps, opt);
    ops::linear(logits, k.feat.data(), w.head_w.data(), w.head_b.data(), B, D, K);
}

float Batch::cross_entropy(const float* logits, const int* labels, int B, int K, float* dlogits, int* correct) {
    double loss = 0;
    int ok = 0;
    for (int b = 0; b < B; ++b) {
        const float* z = logits + size_t(b) * K;
        float m = *std::max_element(z, z + K);
        double s = 0;
        for (int i = 0; i < K; ++i) s += std::exp(double(z[i] - m));
        double lse = m + std::log(s);
        loss += lse - z[labels[b]];
        if (int(std::max_element(z, z + K) - z) == labels[b]) ++ok;
        if (dlogits)
            for (int i = 0; i < K; ++i)
                dlogits[size_t(b) * K + i] = float((std::exp(z[i] - lse) - (i == labels[b])) / B);
    }
    if (correct) *correct = ok;
    return float(loss / B);
}

void Batch::backward(const Weights& w, const float* dlogits, Weights& g, Trace* rec) {
    const Config& c = w.cfg;
    TrainCache& k = *c_;
    const int B = k.B;
    const int C = c.channels, S = c.image_size, P = c.patch, G = c.grid(), N = c.patches(), T = c.tokens(),
              D = c.width, H = c.heads, d = c.head_dim(), M = c.mlp, K = c.classes, CPP = c.patch_dim();
    const int R = B * T;
    const Options& opt = k.opt;
    const Pooling pool = opt.pooling < 0 ? c.pooling : Pooling(opt.pooling);
    if (rec && B != 1) throw std::logic_error("gradient recording needs a batch of one");
    auto put = [&](const std::string& name, const Shape& s, const float* src) {
        if (rec) std::copy_n(src, shape_numel(s), rec->record(name + ".grad", -1, s));
    };
    auto put_layer = [&](const std::string& name, int l, const Shape& s, const float* src) {
        if (rec) std::copy_n(src, shape_numel(s), rec->record(name + ".grad", l, s));
    };
    const size_t uD = D, uT = T, uH = H, ud = d, uM = M, uN = N;
    if (rec) { rec->begin(); put("logits", {size_t(K)}, dlogits); }

    // head: logits = feat @ Wh.T + bh
    V dfeat(size_t(B) * D), dfin(size_t(B) * D), dxhat(rec ? size_t(B) * D : 0);
    linear_backward(dfeat.data(), g.head_w.data(), g.head_b.data(), dlogits, k.feat.data(), w.head_w.data(), B, D, K);
    ln_backward(dfin.data(), false, g.ln_f.g.data(), g.ln_f.b.data(), rec ? dxhat.data() : nullptr, dfeat.data(),
                k.xhatf.data(), k.rstdf.data(), w.ln_f, B, D, opt);
    k.dx.assign(size_t(R) * D, 0.f);
    if (pool == Pooling::Cls) {
        if (rec) {
            put("pooled", {uD}, dfeat.data());
            V full(size_t(T) * D, 0.f);
            std::copy_n(dfeat.data(), D, full.data());
            put("ln_final.out", {uT, uD}, full.data());
            std::copy_n(dxhat.data(), D, full.data());
            put("ln_final.normalized", {uT, uD}, full.data());
        }
        for (int b = 0; b < B; ++b) std::copy_n(dfin.data() + size_t(b) * D, D, k.dx.data() + size_t(b) * T * D);
    } else {
        if (rec) {
            put("ln_final.out", {1, uD}, dfeat.data());
            put("ln_final.normalized", {1, uD}, dxhat.data());
            put("pooled", {uD}, dfin.data());
        }
        for (int b = 0; b < B; ++b)
            for (int t = 1; t < T; ++t)
                for (int j = 0; j < D; ++j) k.dx[(size_t(b) * T + t) * D + j] = dfin[size_t(b) * D + j] / float(N);
    }

    const float scale = 1.f / std::sqrt(float(d));
    k.dtmp.resize(size_t(R) * D); k.dqkv.resize(size_t(R) * 3 * D); k.dzcat.resize(size_t(R) * D);
    k.dpre.resize(size_t(R) * M); k.dpost.resize(size_t(R) * M); k.da.resize(size_t(R) * D);
    V dxh(rec ? size_t(R) * D : 0);
    for (int l = c.depth - 1; l >= 0; --l) {
        const BlockW& bw = w.blocks[l];
        BlockW& gb = g.blocks[l];
        LayerCache& lc = k.L[l];
        const std::string p = "blocks." + std::to_string(l) + ".";
        // k.dx holds d resid_post. MLP branch: out = fc2(gelu(fc1(ln2(rmid))))
        put_layer(p + "resid_post", l, {uT, uD}, k.dx.data());
        put_layer(p + "mlp.out", l, {uT, uD}, k.dx.data());
        linear_backward(k.dpost.data(), gb.fc2_w.data(), gb.fc2_b.data(), k.dx.data(), lc.post.data(), bw.fc2_w.data(), R, M, D);
        put_layer(p + "mlp.post", l, {uT, uM}, k.dpost.data());
        gelu_backward(k.dpre.data(), k.dpost.data(), lc.pre.data(), size_t(R) * M);
        put_layer(p + "mlp.pre", l, {uT, uM}, k.dpre.data());
        linear_backward(k.da.data(), gb.fc1_w.data(), gb.fc1_b.data(), k.dpre.data(), lc.a2.data(), bw.fc1_w.data(), R, D, M);
        put_layer(p + "ln2.out", l, {uT, uD}, k.da.data());
        // d rmid = d resid_post (skip) + LayerNorm backward
        ln_backward(k.dx.data(), true, gb.ln2.g.data(), gb.ln2.b.data(), rec ? dxh.data() : nullptr, k.da.data(),
                    lc.xhat2.data(), lc.rstd2.data(), bw.ln2, R, D, opt);
        put_layer(p + "ln2.normalized", l, {uT, uD}, dxh.data());
        put_layer(p + "resid_mid", l, {uT, uD}, k.dx.data());
        put_layer(p + "attn.out", l, {uT, uD}, k.dx.data());
        // attention output projection
        linear_backward(k.dzcat.data(), gb.proj_w.data(), gb.proj_b.data(), k.dx.data(), lc.zcat.data(), bw.proj_w.data(), R, D, D);
        // per (batch, head): z = P v, P = softmax(scale q k.T)
        Tensor rz, rP, rS;
        if (rec) { rz = Tensor({uH, uT, ud}); rP = Tensor({uH, uT, uT}); rS = Tensor({uH, uT, uT}); }
#pragma omp parallel
        {
            V dP(size_t(T) * T);
#pragma omp for schedule(static)
            for (int bh = 0; bh < B * H; ++bh) {
                int b = bh / H, h = bh % H;
                const float* q = lc.qkv.data() + size_t(b) * T * 3 * D + h * d;
                const float* kk = q + D;
                const float* v = q + 2 * D;
                const float* Pb = lc.P.data() + size_t(bh) * T * T;
                const float* dz = k.dzcat.data() + size_t(b) * T * D + h * d;
                float* dq = k.dqkv.data() + size_t(b) * T * 3 * D + h * d;
                // dP = dz @ v.T ; dv = P.T @ dz
                ops::gemm(false, true, T, T, d, 1.f, dz, D, v, 3 * D, 0.f, dP.data(), T);
                ops::gemm(true, false, T, d, T, 1.f, Pb, T, dz, D, 0.f, dq + 2 * D, 3 * D);
                if (rec) {
                    for (int t = 0; t < T; ++t) std::copy_n(dz + size_t(t) * D, d, rz.data() + (size_t(h) * T + t) * d);
                    std::copy_n(dP.data(), size_t(T) * T, rP.data() + size_t(h) * T * T);
                }
                // softmax backward: dS = P * (dP - sum(dP * P, -1))
                for (int i = 0; i < T; ++i) {
                    float* r = dP.data() + size_t(i) * T;
                    const float* pr = Pb + size_t(i) * T;
                    float s = 0;
                    for (int j = 0; j < T; ++j) s += r[j] * pr[j];
                    for (int j = 0; j < T; ++j) r[j] = pr[j] * (r[j] - s);
                }
                if (rec) std::copy_n(dP.data(), size_t(T) * T, rS.data() + size_t(h) * T * T);
                // scores = scale q k.T: dq = scale dS k ; dk = scale dS.T q
                ops::gemm(false, false, T, d, T, scale, dP.data(), T, kk, 3 * D, 0.f, dq, 3 * D);
                ops::gemm(true, false, T, d, T, scale, dP.data(), T, q, 3 * D, 0.f, dq + D, 3 * D);
            }
        }
        if (rec) {
            put_layer(p + "attn.z", l, {uH, uT, ud}, rz.data());
            put_layer(p + "attn.pattern", l, {uH, uT, uT}, rP.data());
            put_layer(p + "attn.scores", l, {uH, uT, uT}, rS.data());
            for (int s3 = 0; s3 < 3; ++s3) {
                Tensor t3({uH, uT, ud});
                for (int h = 0; h < H; ++h)
                    for (int t = 0; t < T; ++t)
                        std::copy_n(k.dqkv.data() + size_t(t) * 3 * D + s3 * D + h * d, d, t3.data() + (size_t(h) * T + t) * d);
                put_layer(p + (s3 == 0 ? "attn.q" : s3 == 1 ? "attn.k" : "attn.v"), l, {uH, uT, ud}, t3.data());
            }
        }
        linear_backward(k.da.data(), gb.qkv_w.data(), gb.qkv_b.data(), k.dqkv.data(), lc.a1.data(), bw.qkv_w.data(), R, D, 3 * D);
        put_layer(p + "ln1.out", l, {uT, uD}, k.da.data());
        ln_backward(k.dx.data(), true, gb.ln1.g.data(), gb.ln1.b.data(), rec ? dxh.data() : nullptr, k.da.data(),
                    lc.xhat1.data(), lc.rstd1.data(), bw.ln1, R, D, opt);
        put_layer(p + "ln1.normalized", l, {uT, uD}, dxh.data());
    }
    // embed = tokens + pos ; tokens = cat(cls, patch_embed)
    put("embed", {uT, uD}, k.dx.data());
    put("tokens", {uT, uD}, k.dx.data());
    V dpe(size_t(B) * N * D);
    for (int b = 0; b < B; ++b)
        for (int t = 0; t < T; ++t) {
            const float* r = k.dx.data() + (size_t(b) * T + t) * D;
            for (int j = 0; j < D; ++j) g.pos(size_t(t) * D + j) += r[j];
            if (t == 0) for (int j = 0; j < D; ++j) g.cls(j) += r[j];
            else std::copy_n(r, D, dpe.data() + (size_t(b) * N + t - 1) * D);
        }
    put("patch_embed", {uN, uD}, dpe.data());
    V dpatch(rec ? size_t(N) * CPP : 0);
    linear_backward(rec ? dpatch.data() : nullptr, g.patch_w.data(), g.patch_b.data(), dpe.data(), k.patches.data(),
                    w.patch_w.data(), B * N, CPP, D);
    if (rec) {
        put("patches", {uN, size_t(CPP)}, dpatch.data());
        Tensor dimg({size_t(C), size_t(S), size_t(S)});
        for (int gy = 0; gy < G; ++gy)
            for (int gx = 0; gx < G; ++gx)
                for (int ch = 0; ch < C; ++ch)
                    for (int py = 0; py < P; ++py)
                        std::copy_n(dpatch.data() + size_t(gy * G + gx) * CPP + (ch * P + py) * P, P,
                                    dimg.data() + (size_t(ch) * S + gy * P + py) * S + gx * P);
        put("input", dimg.shape, dimg.data());
        rec->end();
    }
}

void AdamW::init(const Weights& w) {
    m = zeros_like(w);
    v = zeros_like(w);
    step = 0;
}

void AdamW::update(Weights& w, const Weights& g, float lr_now) {
    ++step;
    const float bc1 = 1.f - std::pow(beta1, float(step)), bc2 = 1.f - std::pow(beta2, float(step));
    auto P = w.named();
    auto Gs = g.named();
    auto Ms = m.named(), Vs = v.named();
    for (size_t i = 0; i < P.size(); ++i) {
        Tensor& p = *P[i].second;
        const Tensor& gr = *Gs[i].second;
        Tensor& mm = *Ms[i].second;
        Tensor& vv = *Vs[i].second;
        bool decay = decay_all || (p.dim() >= 2 && P[i].first != "pos_embed");
        const float wd = decay ? lr_now * weight_decay : 0.f;
        const float stepsize = lr_now / bc1, rbc2 = 1.f / std::sqrt(bc2);
        float* pd = p.data();
        const float* gd = gr.data();
        float* md = mm.data();
        float* vd = vv.data();
        const size_t n = p.size();
        for (size_t j = 0; j < n; ++j) {
            pd[j] *= 1.f - wd;
            md[j] = beta1 * md[j] + (1.f - beta1) * gd[j];
            vd[j] = beta2 * vd[j] + (1.f - beta2) * gd[j] * gd[j];
            pd[j] -= stepsize * md[j] / (std::sqrt(vd[j]) * rbc2 + eps);
        }
    }
}

float lr_schedule(int64_t step, int64_t warmup, int64_t total, float lr, float min_lr) {
    if (step < warmup) return lr * float(step + 1) / float(warmup);
    double prog = double(step - warmup) / double(std::max<int64_t>(1, total - warmup));
    prog = std::min(1.0, prog);
    return float(min_lr + 0.5 * (lr - min_lr) * (1 + std::cos(M_PI * prog)));
}

namespace {
uint32_t be32(const std::string& s, size_t o) {
    return uint32_t(uint8_t(s[o])) << 24 | uint32_t(uint8_t(s[o + 1])) << 16 | uint32_t(uint8_t(s[o + 2])) << 8 |
           uint32_t(uint8_t(s[o + 3]));
}
// At most 512 MiB of pixels (Fashion-MNIST's training set is 47 MB).
constexpr uint64_t kMaxIdxBytes = uint64_t(1) << 29;

// The file's bytes, gunzipped in memory if it is gzip. The header (its first
// `head` bytes) is parsed by `total` as soon as it is out, which validates it
// and returns the whole size the file must have: nothing past that size is
// ever inflated, so a small .gz cannot make us allocate gigabytes.
std::string idx_bytes(const std::string& raw, const std::string& path, size_t head,
                      const std::function<uint64_t(const std::string&)>& total) {
    if (raw.size() < 2 || uint8_t(raw[0]) != 0x1f || uint8_t(raw[1]) != 0x8b) {
        if (raw.size() >= head) total(raw);
        return raw;
    }
    z_stream z{};
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw FileError(path + ": cannot start gzip decoding");
    std::string out;
    uint64_t want = 0;  // 0 until the header is out
    size_t in_at = 0;
    char buf[1 << 16];
    int r = Z_OK;
    while (in_at < raw.size()) {
        z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data() + in_at));
        z.avail_in = uInt(std::min<size_t>(raw.size() - in_at, 1u << 30));
        z.next_out = reinterpret_cast<Bytef*>(buf);
        z.avail_out = sizeof buf;
        size_t before = z.avail_in;
        r = inflate(&z, Z_NO_FLUSH);
        in_at += before - z.avail_in;
        if (r != Z_OK && r != Z_STREAM_END && r != Z_BUF_ERROR) {
            std::string m = z.msg ? z.msg : "error " + std::to_string(r);
            inflateEnd(&z);
            throw FileError(path + ": corrupt gzip data (" + m + ")");
        }
        out.append(buf, sizeof buf - z.avail_out);
        if (!want && out.size() >= head) {
            try { want = total(out); } catch (...) { inflateEnd(&z); throw; }
        }
        if (want && out.size() > want) {
            inflateEnd(&z);
            throw FileError(path + ": more data than its header says (" + std::to_string(want) + " bytes): corrupt");
        }
        if (r == Z_STREAM_END) {
            if (in_at < raw.size()) inflateReset(&z);  // another gzip member follows (as gzread reads)
            else break;
        } else if (r == Z_BUF_ERROR && sizeof buf == z.avail_out) break;  // no progress: input ends mid-stream
    }
    inflateEnd(&z);
    if (r != Z_STREAM_END) throw FileError(path + ": truncated gzip data");
    return out;
}
}  // namespace

Dataset load_idx(const std::string& ip, const std::string& lp) {
    return parse_idx(read_file(ip, size_t(1) << 30), read_file(lp, size_t(1) << 30), ip, lp);
}

Dataset parse_idx(const std::string& im_raw, const std::string& lb_raw, const std::string& ip, const std::string& lp) {
    // Headers are validated before any pixel is inflated or allocated.
    std::string im = idx_bytes(im_raw, ip, 16, [&](const std::string& h) -> uint64_t {
        if (be32(h, 0) != 0x00000803)
            throw FileError(ip + ": not an IDX image file (magic must be 0x00000803: unsigned bytes, 3 dimensions)");
        uint64_t n = be32(h, 4), rows = be32(h, 8), cols = be32(h, 12);
        if (rows == 0 || cols == 0 || rows > 4096 || cols > 4096)
            throw FileError(ip + ": implausible image size " + std::to_string(rows) + "x" + std::to_string(cols));
        if (n * rows * cols > kMaxIdxBytes)
            throw FileError(ip + ": " + std::to_string(n) + " images of " + std::to_string(rows) + "x" + std::to_string(cols) +
                            " are over the limit of " + std::to_string(kMaxIdxBytes) + " bytes of pixels");
        return 16 + n * rows * cols;
    });
    std::string lb = idx_bytes(lb_raw, lp, 8, [&](const std::string& h) -> uint64_t {
        if (be32(h, 0) != 0x00000801) throw FileError(lp + ": not an IDX label file (magic must be 0x00000801)");
        if (be32(h, 4) > kMaxIdxBytes) throw FileError(lp + ": " + std::to_string(be32(h, 4)) + " labels: too many");
        return 8 + uint64_t(be32(h, 4));
    });
    if (im.size() < 16 || be32(im, 0) != 0x00000803)
        throw FileError(ip + ": not an IDX image file (magic must be 0x00000803: unsigned bytes, 3 dimensions)");
    if (lb.size() < 8 || be32(lb, 0) != 0x00000801)
        throw FileError(lp + ": not an IDX label file (magic must be 0x00000801)");
    Dataset d;
    uint32_t n = be32(im, 4), rows = be32(im, 8), cols = be32(im, 12), nl = be32(lb, 4);
    if (n != nl)
        throw FileError(ip + " has " + std::to_string(n) + " images but " + lp + " has " + std::to_string(nl) + " labels");
    if (im.size() != 16 + size_t(n) * rows * cols)
        throw FileError(ip + ": " + std::to_string(im.size() - 16) + " bytes of pixels for " + std::to_string(n) + " images of " +
                        std::to_string(rows) + "x" + std::to_string(cols) + ": truncated or corrupt");
    if (lb.size() != 8 + size_t(n)) throw FileError(lp + ": " + std::to_string(lb.size() - 8) + " labels for " + std::to_string(n) + " images: truncated or corrupt");
    d.n = int(n); d.rows = int(rows); d.cols = int(cols);
    d.images.assign(im.begin() + 16, im.end());
    d.labels.assign(lb.begin() + 8, lb.end());
    return d;
}

std::string default_fashion_mnist_dir() { return "/usr/share/datasets/fashion-mnist"; }

Dataset load_fashion_mnist(const std::string& dir, bool train) {
    std::string pre = dir + "/" + (train ? "train" : "t10k");
    auto pick = [](const std::string& base) {
        if (::access((base + ".gz").c_str(), R_OK) == 0) return base + ".gz";
        if (::access(base.c_str(), R_OK) == 0) return base;
        throw FileError(base + "[.gz]: not found (Debian's dataset-fashion-mnist installs it in "
                               "/usr/share/datasets/fashion-mnist)");
    };
    return load_idx(pick(pre + "-images-idx3-ubyte"), pick(pre + "-labels-idx1-ubyte"));
}

Tensor dataset_input(const Dataset& d, int i, const Config& c) {
    Tensor x({1, size_t(d.rows), size_t(d.cols)});
    const uint8_t* src = d.images.data() + size_t(i) * d.rows * d.cols;
    for (size_t j = 0; j < x.size(); ++j) x(j) = src[j] / 255.f;
    Image im;
    im.pixels = std::move(x);
    im.width = d.cols; im.height = d.rows; im.channels = 1;
    return preprocess(im, c);
}

Trace gradient_trace(const Weights& w, const Tensor& input, const Options& opt, int cls) {
    Batch b;
    std::vector<float> logits(w.cfg.classes), dl(w.cfg.classes, 0.f);
    b.forward(w, input.data(), 1, opt, logits.data());
    if (cls < 0) cls = int(std::max_element(logits.begin(), logits.end()) - logits.begin());
    dl.at(size_t(cls)) = 1.f;
    Weights g = zeros_like(w);
    Trace t;
    b.backward(w, dl.data(), g, &t);
    return t;
}

EvalResult evaluate(const Weights& w, const Dataset& d, int limit, int batch,
                    const std::function<void(int, int)>& progress) {
    const Config& c = w.cfg;
    int n = limit > 0 ? std::min(limit, d.n) : d.n;
    EvalResult r;
    r.n = n;
    r.confusion.assign(size_t(c.classes) * c.classes, 0);
    Batch b;
    size_t per = size_t(c.channels) * c.image_size * c.image_size;
    std::vector<float> x, logits;
    int correct = 0;
    for (int s = 0; s < n; s += batch) {
        int B = std::min(batch, n - s);
        x.resize(per * B);
        logits.resize(size_t(B) * c.classes);
        for (int i = 0; i < B; ++i) {
            Tensor xi = dataset_input(d, s + i, c);
            std::copy_n(xi.data(), per, x.data() + per * i);
        }
        b.forward(w, x.data(), B, {}, logits.data());
        for (int i = 0; i < B; ++i) {
            const float* z = logits.data() + size_t(i) * c.classes;
            int pred = int(std::max_element(z, z + c.classes) - z);
            int lab = d.labels[s + i];
            if (lab < c.classes) r.confusion[size_t(lab) * c.classes + pred]++;
            correct += pred == lab;
        }
        if (progress) progress(s + B, n);
    }
    r.accuracy = n ? double(correct) / n : 0;
    return r;
}

}  // namespace vit
