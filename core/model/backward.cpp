// The backward pass for every stage of the batched forward (forward.cpp).
// Rows of the residual stream are (b, t), b-major: R = B*T. Every backward
// names the PyTorch quantity it computes.
#include "core/model/backward.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <xtensor/xadapt.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xstrided_view.hpp>
#include <xtensor/xview.hpp>

#include "core/kernels/ops.h"

namespace vit {

namespace {

template <size_t N>
auto as(const float* p, const std::array<size_t, N>& shape) {
    size_t n = 1;
    for (size_t s : shape) n *= s;
    return xt::adapt(const_cast<float*>(p), n, xt::no_ownership(), shape);
}

// dW(O,I) += dY(R,O).T @ X(R,I); db(O) += dY.sum(0); dX(R,I) = dY @ W (if dX).
void linear_backward(float* dX, Tensor2& dW, Tensor1& db, const float* dY, const float* X, const Tensor2& W, int R,
                     int I, int O) {
#pragma omp parallel
    {
        int t = omp_get_thread_num(), n = omp_get_num_threads();
        int o0 = int(int64_t(O) * t / n), o1 = int(int64_t(O) * (t + 1) / n);
        if (o1 > o0) {
            ops::gemm(true, false, o1 - o0, I, R, 1.f, dY + o0, O, X, I, 1.f, dW.data() + size_t(o0) * I, I);
            for (int r = 0; r < R; ++r) {
                const float* y = dY + size_t(r) * O;
                for (int o = o0; o < o1; ++o) db(o) += y[o];
            }
        }
        if (dX) {
            int r0 = int(int64_t(R) * t / n), r1 = int(int64_t(R) * (t + 1) / n);
            if (r1 > r0)
                ops::gemm(false, false, r1 - r0, I, O, 1.f, dY + size_t(r0) * O, O, W.data(), I, 0.f,
                          dX + size_t(r0) * I, I);
        }
    }
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
void ln_backward(float* dx, bool accumulate, LayerNormW& g, float* dxhat_out, const float* dy, const float* xhat,
                 const float* rstd, const LayerNormW& w, int R, int D, const Options& opt) {
    const float nv = float(opt.unbiased ? std::max(D - 1, 1) : D);
    if (opt.affine) {  // d gamma = sum(dy * xhat), d beta = sum(dy) over the rows
        for (int r = 0; r < R; ++r) {
            const float* y = dy + size_t(r) * D;
            const float* xh = xhat + size_t(r) * D;
            for (int i = 0; i < D; ++i) { g.g(i) += y[i] * xh[i]; g.b(i) += y[i]; }
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
            float m1 = float(s1 / D), m2 = float(s2 / nv), rs = rstd[r];
            float* o = dx + size_t(r) * D;
            if (accumulate) for (int i = 0; i < D; ++i) o[i] += rs * (gg[i] - m1 - xh[i] * m2);
            else for (int i = 0; i < D; ++i) o[i] = rs * (gg[i] - m1 - xh[i] * m2);
        }
    }
}

// d/dx gelu(x) = Phi(x) + x phi(x), as an expression split across the threads.
void gelu_backward(float* dx, const float* dy, const float* x, size_t n) {
#pragma omp parallel if (n > 50000)
    {
        const size_t t = size_t(omp_get_thread_num()), nt = size_t(omp_get_num_threads());
        const size_t b = n * t / nt, e = n * (t + 1) / nt;
        const std::array<size_t, 1> sh{e - b};
        auto X = as(x + b, sh);
        xt::noalias(as(dx + b, sh)) =
            as(dy + b, sh) * (0.5f * (1.f + xt::erf(X * float(M_SQRT1_2))) +
                              X * float(0.3989422804014327) * xt::exp(-0.5f * X * X));
    }
}

}  // namespace

struct Batch::State {
    Trace acts;                    // the stages the forward kept (training)
    const Trace* src = nullptr;    // where backward reads them (acts, or the caller's trace)
    WorkspacePtr ws = make_workspace();
    Options opt;
    size_t B = 0;
    Tensor2 dx, da, dqkv, dzcat, dpre, dpost;
    Array dq, dk, dv;
};

Batch::Batch() : s_(new State) {}
Batch::~Batch() = default;

const Array& Batch::forward(const Weights& w, const Tensor4& x, const Options& opt, Trace* record) {
    s_->opt = opt;
    s_->B = x.shape(0);
    Trace& t = record ? *record : s_->acts;
    s_->src = &t;
    return forward_batch(w, x, opt, t, record ? Keep::All : Keep::ForBackward, *s_->ws);
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

void Batch::backward(const Weights& w, const Tensor2& dlogits, Weights& g, Trace* rec) {
    const Config& c = w.cfg;
    State& st = *s_;
    const Trace& A = *st.src;
    const size_t B = st.B, C = c.channels, S = c.image_size, P = c.patch, G = c.grid(), N = c.patches(),
                 T = c.tokens(), D = c.width, H = c.heads, d = c.head_dim(), M = c.mlp, K = c.classes,
                 CPP = c.patch_dim(), R = B * T;
    const Options& opt = st.opt;
    const Pooling pool = opt.pooling_for(c);
    if (rec && B != 1) throw std::logic_error("gradient recording needs a batch of one");
    auto get = [&](const std::string& n) { return A.get(n).data(); };
    // Gradients recorded for the app: "<stage>.grad", same shape as the stage.
    auto put = [&](const std::string& name, int l, const Shape& s, const float* src) {
        if (rec) std::copy_n(src, shape_numel(s), rec->record(name + ".grad", l, s).data());
    };
    if (rec) {
        rec->begin();
        put("logits", -1, {K}, dlogits.data());
    }

    // head: logits = feat @ Wh.T + bh
    const float* feat = pool == Pooling::Cls ? get("pooled") : get("ln_final.out");
    Tensor2 dfeat = xt::zeros<float>({B, D}), dfin = Tensor2::from_shape({B, D}), dxhat = Tensor2::from_shape({B, D});
    linear_backward(dfeat.data(), g.head_w, g.head_b, dlogits.data(), feat, w.head_w, int(B), int(D), int(K));
    st.dx = xt::zeros<float>({R, D});
    auto dx3 = as(st.dx.data(), std::array<size_t, 3>{B, T, D});
    if (pool == Pooling::Cls) {
        // pooled = ln_final(x)[:, 0]: only the cls rows get a gradient.
        auto rows = [&](const char* n) {
            return xt::eval(xt::view(as(get(n), std::array<size_t, 3>{B, T, D}), xt::all(), 0, xt::all()));
        };
        Tensor2 xh = rows("ln_final.normalized");
        std::vector<float> sd(B);
        for (size_t b = 0; b < B; ++b) sd[b] = get("ln_final.std")[b * T];
        auto rs = rstd_of(sd.data(), B, c.eps);
        ln_backward(dfin.data(), false, g.ln_f, dxhat.data(), dfeat.data(), xh.data(), rs.data(), w.ln_f, int(B),
                    int(D), opt);
        xt::view(dx3, xt::all(), 0, xt::all()) = dfin;
        if (rec) {
            put("pooled", -1, {D}, dfeat.data());
            Tensor2 full = xt::zeros<float>({T, D});
            xt::view(full, 0, xt::all()) = xt::view(dfeat, 0, xt::all());
            put("ln_final.out", -1, {T, D}, full.data());
            xt::view(full, 0, xt::all()) = xt::view(dxhat, 0, xt::all());
            put("ln_final.normalized", -1, {T, D}, full.data());
        }
    } else {
        // pooled = x[:, 1:].mean(1); feat = ln_final(pooled)
        auto rs = rstd_of(get("ln_final.std"), B, c.eps);
        ln_backward(dfin.data(), false, g.ln_f, dxhat.data(), dfeat.data(), get("ln_final.normalized"), rs.data(),
                    w.ln_f, int(B), int(D), opt);
        xt::view(dx3, xt::all(), xt::range(1, T), xt::all()) =
            xt::view(dfin / float(N), xt::all(), xt::newaxis(), xt::all());
        if (rec) {
            put("ln_final.out", -1, {1, D}, dfeat.data());
            put("ln_final.normalized", -1, {1, D}, dxhat.data());
            put("pooled", -1, {D}, dfin.data());
        }
    }

    const float scale = 1.f / std::sqrt(float(d));
    const float alpha = opt.bug_scale_after_softmax ? 1.f : scale;   // scores = alpha * q k^T
    const float post_scale = opt.bug_scale_after_softmax ? scale : 1.f;  // attn = post_scale * softmax(scores)
    st.da.resize({R, D});
    st.dqkv.resize({R, 3 * D});
    st.dzcat.resize({R, D});
    st.dpre.resize({R, M});
    st.dpost.resize({R, M});
    st.dq.resize({B, H, T, d});
    st.dk.resize({B, H, T, d});
    st.dv.resize({B, H, T, d});
    Tensor2 dxh = Tensor2::from_shape({rec ? R : 0, D});
    float* dxh_p = rec ? dxh.data() : nullptr;
    for (int l = c.depth - 1; l >= 0; --l) {
        const BlockW& bw = w.blocks[l];
        BlockW& gb = g.blocks[l];
        const std::string p = "blocks." + std::to_string(l) + ".";
        const Shape TD{T, D}, TM{T, M}, HTd{H, T, d}, HTT{H, T, T};
        // st.dx holds d resid_post. MLP branch: out = fc2(gelu(fc1(ln2(resid_mid))))
        put(p + "resid_post", l, TD, st.dx.data());
        put(p + "mlp.out", l, TD, st.dx.data());
        linear_backward(st.dpost.data(), gb.fc2_w, gb.fc2_b, st.dx.data(), get(p + "mlp.post"), bw.fc2_w, int(R),
                        int(M), int(D));
        put(p + "mlp.post", l, TM, st.dpost.data());
        gelu_backward(st.dpre.data(), st.dpost.data(), get(p + "mlp.pre"), R * M);
        put(p + "mlp.pre", l, TM, st.dpre.data());
        linear_backward(st.da.data(), gb.fc1_w, gb.fc1_b, st.dpre.data(), get(p + "ln2.out"), bw.fc1_w, int(R),
                        int(D), int(M));
        put(p + "ln2.out", l, TD, st.da.data());
        // d resid_mid = d resid_post (the skip) + d through LayerNorm
        auto rs2 = rstd_of(get(p + "ln2.std"), R, c.eps);
        ln_backward(st.dx.data(), true, gb.ln2, dxh_p, st.da.data(), get(p + "ln2.normalized"), rs2.data(), bw.ln2,
                    int(R), int(D), opt);
        put(p + "ln2.normalized", l, TD, dxh_p);
        put(p + "resid_mid", l, TD, st.dx.data());
        put(p + "attn.out", l, TD, st.dx.data());
        // attention output projection: attn_out = proj(zcat)
        linear_backward(st.dzcat.data(), gb.proj_w, gb.proj_b, st.dx.data(), workspace_zcat(*st.ws, l).data(),
                        bw.proj_w, int(R), int(D), int(D));
        // per image and head: z = attn @ v, attn = post_scale * softmax(alpha * q k^T)
        const float *q = get(p + "attn.q"), *k = get(p + "attn.k"), *v = get(p + "attn.v"),
                    *pat = get(p + "attn.pattern");
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
            put(p + "attn.z", l, HTd, rz.data());
            put(p + "attn.pattern", l, HTT, rP.data());
            put(p + "attn.scores", l, HTT, rS.data());
            put(p + "attn.q", l, HTd, st.dq.data());
            put(p + "attn.k", l, HTd, st.dk.data());
            put(p + "attn.v", l, HTd, st.dv.data());
        }
        // back to the fused layout (R, 3D) of the qkv Linear: the inverse of the forward's split
        const float* d3[3] = {st.dq.data(), st.dk.data(), st.dv.data()};
        for (size_t bt = 0; bt < R; ++bt)
            for (size_t s3 = 0; s3 < 3; ++s3)
                for (size_t h = 0; h < H; ++h)
                    std::copy_n(d3[s3] + (((bt / T) * H + h) * T + bt % T) * d, d,
                                st.dqkv.data() + bt * 3 * D + s3 * D + h * d);
        linear_backward(st.da.data(), gb.qkv_w, gb.qkv_b, st.dqkv.data(), get(p + "ln1.out"), bw.qkv_w, int(R),
                        int(D), int(3 * D));
        put(p + "ln1.out", l, TD, st.da.data());
        auto rs1 = rstd_of(get(p + "ln1.std"), R, c.eps);
        ln_backward(st.dx.data(), true, gb.ln1, dxh_p, st.da.data(), get(p + "ln1.normalized"), rs1.data(), bw.ln1,
                    int(R), int(D), opt);
        put(p + "ln1.normalized", l, TD, dxh_p);
    }
    // embed = tokens + pos_embed ; tokens = cat(cls, patch_embed)
    put("embed", -1, {T, D}, st.dx.data());
    put("tokens", -1, {T, D}, st.dx.data());
    g.pos += xt::sum(dx3, {0});
    g.cls += xt::sum(xt::view(dx3, xt::all(), 0, xt::all()), {0});
    Tensor3 dpe = xt::view(dx3, xt::all(), xt::range(1, T), xt::all());
    put("patch_embed", -1, {N, D}, dpe.data());
    Tensor2 dpatch = Tensor2::from_shape({rec ? N : 0, CPP});
    linear_backward(rec ? dpatch.data() : nullptr, g.patch_w, g.patch_b, dpe.data(), get("patches"), w.patch_w,
                    int(B * N), int(CPP), int(D));
    if (rec) {
        put("patches", -1, {N, CPP}, dpatch.data());
        // input.grad: the patches' gradient put back where each pixel came from
        Tensor3 dimg = Tensor3::from_shape({C, S, S});
        if (opt.bug_reshape_patches) std::copy(dpatch.begin(), dpatch.end(), dimg.begin());
        else
            xt::noalias(as(dimg.data(), std::array<size_t, 5>{C, G, P, G, P})) =
                xt::transpose(as(dpatch.data(), std::array<size_t, 5>{G, G, C, P, P}), {2, 0, 3, 1, 4});
        put("input", -1, {C, S, S}, dimg.data());
        rec->end();
    }
}

}  // namespace vit
