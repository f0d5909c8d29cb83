// The ViT forward pass, recording every intermediate. Each stage is computed
// straight into its trace buffer (no copies), GEMMs go to BLAS, elementwise
// work runs in tight SIMD loops; xtensor handles the reshapes and views.
#include "forward.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <xtensor/xadapt.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xstrided_view.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include "ops.h"

namespace vit {

namespace {

struct Rec {
    Trace& tr;
    float* operator()(const std::string& name, const Shape& s, int layer = -1) {
        return tr.record(name, layer, s);
    }
};

// LayerNorm stage with all of its internals recorded under prefix.
const float* layernorm_stage(Rec& rec, const std::string& p, int layer, const float* x,
                             const LayerNormW& w, size_t R, size_t D, float eps,
                             const Options& opt) {
    float* mean = rec(p + ".mean", {R}, layer);
    float* sd = rec(p + ".std", {R}, layer);
    float* norm = rec(p + ".normalized", {R, D}, layer);
    float* out = rec(p + ".out", {R, D}, layer);
    ops::layernorm(out, norm, mean, sd, x, opt.affine ? w.g.data() : nullptr,
                   opt.affine ? w.b.data() : nullptr, int(R), int(D), eps, opt.unbiased);
    return out;
}

}  // namespace

void forward(const Weights& w, const Tensor& input, const Options& opt, Trace& trace) {
    const Config& c = w.cfg;
    const size_t C = c.channels, S = c.image_size, P = c.patch, G = c.grid(), N = c.patches(),
                 T = c.tokens(), D = c.width, H = c.heads, d = c.head_dim(), M = c.mlp,
                 K = c.classes;
    if (input.shape != Shape{C, S, S})
        throw std::invalid_argument("input has shape " + shape_str(input.shape) + " but model '" +
                                    c.name + "' takes " + shape_str({C, S, S}));
    if (w.blocks.size() != size_t(c.depth)) throw std::invalid_argument("weights do not match config depth");
    const Pooling pool = opt.pooling < 0 ? c.pooling : Pooling(opt.pooling);

    trace.begin();
    Rec rec{trace};

    // input: (C, H, W)
    float* in = rec("input", input.shape);
    std::copy(input.data(), input.data() + input.size(), in);

    // patches: (N, C*P*P). torch: x.unfold(2,P,P).unfold(3,P,P) -> (C,G,G,P,P),
    // permuted to (G,G,C,P,P): channel-major inside a patch, as Conv2d weights are.
    // (A plain reshape of (C,H,W) to (N, C*P*P) mixes pixels of different patches.)
    float* pt = rec("patches", {N, C * P * P});
    {
        auto img = xt::adapt(in, C * S * S, xt::no_ownership(), std::vector<size_t>{C, G, P, G, P});
        auto dst = xt::adapt(pt, N * C * P * P, xt::no_ownership(), std::vector<size_t>{G, G, C, P, P});
        dst = xt::transpose(img, {1, 3, 0, 2, 4});
    }

    // patch_embed: (N, D) = patches @ W.T + b == Conv2d(C, D, P, stride=P) flattened
    float* pe = rec("patch_embed", {N, D});
    ops::linear(pe, pt, w.patch_w.data(), w.patch_b.data(), int(N), int(C * P * P), int(D));

    // tokens: (T, D) = cat([cls, patch_embed])
    float* tok = rec("tokens", {T, D});
    std::copy(w.cls.data(), w.cls.data() + D, tok);
    std::copy(pe, pe + N * D, tok + D);

    // embed: (T, D) = tokens + pos_embed
    float* x = rec("embed", {T, D});
    ops::add(x, tok, w.pos.data(), T * D);

    std::vector<float> qkv(T * 3 * D), cat(T * D);  // scratch, not recorded
    const float scale = 1.f / std::sqrt(float(d));
    for (size_t l = 0; l < size_t(c.depth); ++l) {
        const BlockW& b = w.blocks[l];
        const std::string p = "blocks." + std::to_string(l) + ".";
        const int L = int(l);

        const float* h1 = layernorm_stage(rec, p + "ln1", L, x, b.ln1, T, D, c.eps, opt);

        // qkv: (T, 3D) = ln1 @ Wqkv.T + b, rows of W are [q; k; v], each split in heads.
        ops::linear(qkv.data(), h1, b.qkv_w.data(), b.qkv_b.data(), int(T), int(D), int(3 * D));
        float* q = rec(p + "attn.q", {H, T, d}, L);
        float* k = rec(p + "attn.k", {H, T, d}, L);
        float* v = rec(p + "attn.v", {H, T, d}, L);
        // (T, 3, H, d) -> (3, H, T, d): a strided copy of d-float runs (a tight
        // loop: xtensor's generic strided assignment was ~10x slower here).
        {
            float* dsts[3] = {q, k, v};
            for (size_t t = 0; t < T; ++t)
                for (size_t s3 = 0; s3 < 3; ++s3)
                    for (size_t h = 0; h < H; ++h)
                        std::copy_n(qkv.data() + t * 3 * D + s3 * D + h * d, d, dsts[s3] + (h * T + t) * d);
        }

        // Per head, in parallel: scores (H, T, T) = q @ k.T / sqrt(d) -- the scale
        // comes BEFORE the softmax; pattern = scores.softmax(-1) (rows: queries,
        // columns: keys); z (H, T, d) = pattern @ v.
        float* sc = rec(p + "attn.scores", {H, T, T}, L);
        float* pat = rec(p + "attn.pattern", {H, T, T}, L);
        float* z = rec(p + "attn.z", {H, T, d}, L);
#pragma omp parallel for schedule(dynamic) if (H > 1 && T * T * d > 20000)
        for (size_t h = 0; h < H; ++h) {
            ops::gemm(false, true, int(T), int(T), int(d), scale, q + h * T * d, int(d), k + h * T * d, int(d), 0.f,
                      sc + h * T * T, int(T));
            ops::softmax_rows(pat + h * T * T, sc + h * T * T, int(T), int(T));
            ops::gemm(false, false, int(T), int(d), int(T), 1.f, pat + h * T * T, int(T), v + h * T * d, int(d), 0.f,
                      z + h * T * d, int(d));
        }

        // attn.out: (T, D) = concat_heads(z) @ Wo.T + bo;  z (H, T, d) -> (T, H*d)
        for (size_t h = 0; h < H; ++h)
            for (size_t t = 0; t < T; ++t) std::copy_n(z + (h * T + t) * d, d, cat.data() + t * D + h * d);
        float* ao = rec(p + "attn.out", {T, D}, L);
        ops::linear(ao, cat.data(), b.proj_w.data(), b.proj_b.data(), int(T), int(D), int(D));

        // resid_mid = x + attn.out
        float* rm = rec(p + "resid_mid", {T, D}, L);
        ops::add(rm, x, ao, T * D);

        const float* h2 = layernorm_stage(rec, p + "ln2", L, rm, b.ln2, T, D, c.eps, opt);

        // mlp: pre = fc1(ln2), post = gelu(pre), out = fc2(post)
        float* pre = rec(p + "mlp.pre", {T, M}, L);
        ops::linear(pre, h2, b.fc1_w.data(), b.fc1_b.data(), int(T), int(D), int(M));
        float* post = rec(p + "mlp.post", {T, M}, L);
        ops::gelu(post, pre, T * M);
        float* mo = rec(p + "mlp.out", {T, D}, L);
        ops::linear(mo, post, b.fc2_w.data(), b.fc2_b.data(), int(T), int(M), int(D));

        float* rp = rec(p + "resid_post", {T, D}, L);
        ops::add(rp, rm, mo, T * D);
        x = rp;
    }

    const float* feat;
    if (pool == Pooling::Cls) {
        const float* lf = layernorm_stage(rec, "ln_final", -1, x, w.ln_f, T, D, c.eps, opt);
        float* pooled = rec("pooled", {D});
        std::copy(lf, lf + D, pooled);  // the cls token's row
        feat = pooled;
    } else {
        // timm's global_pool='avg': mean over the patch tokens, then LayerNorm (fc_norm).
        float* pooled = rec("pooled", {D});
        for (size_t j = 0; j < D; ++j) pooled[j] = 0.f;
        for (size_t t = 1; t < T; ++t)
            for (size_t j = 0; j < D; ++j) pooled[j] += x[t * D + j];
        for (size_t j = 0; j < D; ++j) pooled[j] /= float(N);
        feat = layernorm_stage(rec, "ln_final", -1, pooled, w.ln_f, 1, D, c.eps, opt);
    }
    float* logits = rec("logits", {K});
    ops::linear(logits, feat, w.head_w.data(), w.head_b.data(), 1, int(D), int(K));
    float* probs = rec("probs", {K});
    ops::softmax_rows(probs, logits, 1, int(K));
    trace.end();
}

Trace run(const Weights& w, const Tensor& input, const Options& opt) {
    Trace t;
    forward(w, input, opt, t);
    return t;
}

std::vector<std::string> stage_names(const Config& c, const Options& opt) {
    std::vector<std::string> v{"input", "patches", "patch_embed", "tokens", "embed"};
    auto ln = [&](const std::string& p) {
        for (auto s : {".mean", ".std", ".normalized", ".out"}) v.push_back(p + s);
    };
    for (int l = 0; l < c.depth; ++l) {
        std::string p = "blocks." + std::to_string(l) + ".";
        ln(p + "ln1");
        for (auto s : {"attn.q", "attn.k", "attn.v", "attn.scores", "attn.pattern", "attn.z", "attn.out",
                       "resid_mid"})
            v.push_back(p + s);
        ln(p + "ln2");
        for (auto s : {"mlp.pre", "mlp.post", "mlp.out", "resid_post"}) v.push_back(p + s);
    }
    Pooling pool = opt.pooling < 0 ? c.pooling : Pooling(opt.pooling);
    if (pool == Pooling::Cls) { ln("ln_final"); v.push_back("pooled"); }
    else { v.push_back("pooled"); ln("ln_final"); }
    v.push_back("logits");
    v.push_back("probs");
    return v;
}

std::vector<std::pair<std::string, Shape>> stage_shapes(const Config& c, const Options& opt) {
    const size_t C = c.channels, S = c.image_size, N = c.patches(), T = c.tokens(), D = c.width, H = c.heads,
                 d = c.head_dim(), M = c.mlp, K = c.classes, CPP = c.patch_dim();
    const bool mean_pool = (opt.pooling < 0 ? c.pooling : Pooling(opt.pooling)) == Pooling::Mean;
    std::vector<std::pair<std::string, Shape>> v;
    for (auto& n : stage_names(c, opt)) {
        std::string r = n;
        if (n.rfind("blocks.", 0) == 0) r = n.substr(n.find('.', 7) + 1);
        Shape s;
        const size_t rows = (n.rfind("ln_final", 0) == 0 && mean_pool) ? 1 : T;
        if (r == "input") s = {C, S, S};
        else if (r == "patches") s = {N, CPP};
        else if (r == "patch_embed") s = {N, D};
        else if (r.size() > 5 && (r.compare(r.size() - 5, 5, ".mean") == 0 || r.compare(r.size() - 4, 4, ".std") == 0)) s = {rows};
        else if (r == "attn.q" || r == "attn.k" || r == "attn.v" || r == "attn.z") s = {H, T, d};
        else if (r == "attn.scores" || r == "attn.pattern") s = {H, T, T};
        else if (r == "mlp.pre" || r == "mlp.post") s = {T, M};
        else if (r == "pooled") s = {D};
        else if (r == "logits" || r == "probs") s = {K};
        else s = {rows, D};
        v.emplace_back(n, s);
    }
    return v;
}

}  // namespace vit
