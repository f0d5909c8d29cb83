// After the blocks: the final norm and pooling (cls, mean of patches, cls then norm, SigLIP's
// attention-pooling head), then the output: logits from a Linear head (DeiT's two heads averaged),
// or the embedding (the pooled feature itself, or projected by CLIP's proj).
#include <algorithm>
#include <cmath>
#include <xtensor/xbroadcast.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xview.hpp>

#include "core/kernels/ops.h"
#include "core/model/pass.h"

namespace vit {

namespace {

// (B, rows, D)[:, r] as (B, D)
auto row_of(const Pass& p, const float* src, size_t rows, size_t r) {
    return xt::view(as(src, p.B * rows * p.D, std::array<size_t, 3>{p.B, rows, p.D}), xt::all(), r, xt::all());
}

// SigLIP, PE (timm AttentionPoolLatent): h = MHA(probe, x, x); h = h + mlp(layernorm(h)), over the final norm's output
// p.lf, every token (PE's cls too); the head's own number of heads (Config::pool_heads: PE's 8)
void map_head_part(Pass& p) {
    const size_t B = p.B, T = p.T, R = p.R, D = p.D, M = p.M, H = size_t(p.c.pool_heads()), d = D / H;
    Array& probe = p.rec(StageKind::HeadProbe, {1, D});
    float* hq = p.rec(StageKind::HeadAttnQ, {H, 1, d}).data();
    float* hk = p.rec(StageKind::HeadAttnK, {H, T, d}).data();
    float* hv = p.rec(StageKind::HeadAttnV, {H, T, d}).data();
    float* hs = p.rec(StageKind::HeadAttnScores, {H, 1, T}).data();
    float* hp = p.rec(StageKind::HeadAttnPattern, {H, 1, T}).data();
    float* hz = p.rec(StageKind::HeadAttnZ, {H, 1, d}).data();
    Array& hao = p.rec(StageKind::HeadAttnOut, {1, D});
    const MapHeadW& m = p.w.map;
    if (!p.dry) {
        xt::noalias(as(probe, std::array<size_t, 2>{B, D})) = xt::broadcast(m.probe, {B, D});
        Tensor2 qp = Tensor2::from_shape({B, D}), kv = Tensor2::from_shape({R, 2 * D});
        const Tensor2 wq = xt::view(m.in_w, xt::range(0, D), xt::all()), wkv = xt::view(m.in_w, xt::range(D, 3 * D), xt::all());
        const Tensor1 bq = xt::view(m.in_b, xt::range(0, D)), bkv = xt::view(m.in_b, xt::range(D, 3 * D));
        linear("head.q", qp.data(), probe.data(), wq, bq, B, nullptr);
        linear("head.kv", kv.data(), p.lf, wkv, bkv, R, nullptr);
        for (size_t img = 0; img < B; ++img)
            for (size_t h = 0; h < H; ++h) {
                std::copy_n(qp.data() + img * D + h * d, d, hq + (img * H + h) * d);
                for (size_t t = 0; t < T; ++t) {
                    std::copy_n(kv.data() + (img * T + t) * 2 * D + h * d, d, hk + ((img * H + h) * T + t) * d);
                    std::copy_n(kv.data() + (img * T + t) * 2 * D + D + h * d, d, hv + ((img * H + h) * T + t) * d);
                }
            }
        Tensor2 zc = Tensor2::from_shape({B, D});
        attention(hs, hp, hz, nullptr, D, hq, hk, hv, B, H, 1, T, d, 1.f / std::sqrt(float(d)), 1.f, p.rec.stream());
        for (size_t img = 0; img < B; ++img)
            for (size_t h = 0; h < H; ++h) std::copy_n(hz + (img * H + h) * d, d, zc.data() + img * D + h * d);
        linear("head.out_proj", hao.data(), zc.data(), m.out_w, m.out_b, B, nullptr);
    }
    const float* hl = layernorm_part(p, LnSite::Head, hao.data(), m.ln, 1);
    Array& hpre = p.rec(StageKind::HeadMlpPre, {1, M});
    Array& hpost = p.rec(StageKind::HeadMlpPost, {1, M});
    Array& hmo = p.rec(StageKind::HeadMlpOut, {1, D});
    Array& hres = p.rec(StageKind::HeadResidPost, {1, D});
    if (p.dry) return;
    linear("head.fc1", hpre.data(), hl, m.fc1_w, m.fc1_b, B, nullptr);
    activation(p.c.act == Act::SwiGlu ? Act::Gelu : p.c.act, hpost.data(), hpre.data(), B, M);
    linear("head.fc2", hmo.data(), hpost.data(), m.fc2_w, m.fc2_b, B, nullptr);
    residual_add(hres.data(), hao.data(), hmo.data(), B, D);
    p.feat = hres.data();
}

// The final norm and the pooling: sets p.lf (the final norm's output) and p.feat (what the head reads)
void pool_part(Pass& p) {
    const Config& c = p.c;
    const Weights& w = p.w;
    const size_t B = p.B, T = p.T, R = p.R, D = p.D;
    switch (p.pool) {
        case Pooling::Cls: {
            // LayerNorm on every token (as the model does), then the cls token's row: x[:, 0]
            p.lf = layernorm_part(p, LnSite::Final, p.x, w.ln_f, T);
            if (c.head != Head::Identity) {  // Identity: the embedding is ln_final.out[0] itself
                Array& pooled = p.rec(StageKind::Pooled, {D});
                if (p.dry) return;
                xt::noalias(as(pooled, std::array<size_t, 2>{B, D})) = row_of(p, p.lf, T, 0);
                p.feat = pooled.data();
            }
            return;
        }
        case Pooling::Mean: {
            // timm's global_pool='avg': x[:, prefix:].mean(1), then LayerNorm (fc_norm)
            Array& pooled = p.rec(StageKind::Pooled, {D});
            const size_t pf = size_t(p.rd.prefix);
            if (!p.dry)
                xt::noalias(as(pooled, std::array<size_t, 2>{B, D})) = xt::mean(
                    xt::view(as(p.x, R * D, std::array<size_t, 3>{B, T, D}), xt::all(), xt::range(pf, T), xt::all()), {1});
            p.lf = p.feat = layernorm_part(p, LnSite::Final, pooled.data(), w.ln_f, 1);
            return;
        }
        case Pooling::ClsThenNorm: {
            // CLIP: pooled = x[:, 0]; ln_post(pooled)
            Array& pooled = p.rec(StageKind::Pooled, {D});
            if (!p.dry) xt::noalias(as(pooled, std::array<size_t, 2>{B, D})) = row_of(p, p.x, T, 0);
            p.lf = p.feat = layernorm_part(p, LnSite::Final, pooled.data(), w.ln_f, 1);
            return;
        }
        case Pooling::NormMean: {
            // timm's vit_*_gap_* (fc_norm=False): x = norm(x) on every token, then x[:, prefix:].mean(1)
            p.lf = layernorm_part(p, LnSite::Final, p.x, w.ln_f, T);
            Array& pooled = p.rec(StageKind::Pooled, {D});
            if (p.dry) return;
            const size_t pf = size_t(p.rd.prefix);
            xt::noalias(as(pooled, std::array<size_t, 2>{B, D})) = xt::mean(
                xt::view(as(p.lf, R * D, std::array<size_t, 3>{B, T, D}), xt::all(), xt::range(pf, T), xt::all()), {1});
            p.feat = pooled.data();
            return;
        }
        case Pooling::Map:
            // SigLIP: post_layernorm on every token, then the attention-pooling head
            p.lf = layernorm_part(p, LnSite::Final, p.x, w.ln_f, T);
            map_head_part(p);
            return;
    }
}

// logits = head(pooled); probs = logits.softmax(-1). DeiT distilled: pooled_dist = x[:, 1];
// logits = (head(pooled) + head_dist(pooled_dist)) / 2
const Array& classifier_part(Pass& p) {
    const Weights& w = p.w;
    const size_t B = p.B, D = p.D, K = size_t(p.c.classes);
    if (p.c.head == Head::Distilled) {
        Array& pd = p.rec(StageKind::PooledDist, {D});
        if (!p.dry) xt::noalias(as(pd, std::array<size_t, 2>{B, D})) = row_of(p, p.lf, p.T, 1 + size_t(p.c.registers));
        Array& lc = p.rec(StageKind::LogitsCls, {K});
        Array& ld = p.rec(StageKind::LogitsDist, {K});
        Array& logits = p.rec(StageKind::Logits, {K});
        Array& probs = p.rec(StageKind::Probs, {K});
        if (p.dry) return logits;
        linear("head", lc.data(), p.feat, w.head_w, w.head_b, B, p.packs);
        linear("head_dist", ld.data(), pd.data(), w.head_dist_w, w.head_dist_b, B, p.packs);
        xt::noalias(as(logits, std::array<size_t, 2>{B, K})) =
            (as(lc, std::array<size_t, 2>{B, K}) + as(ld, std::array<size_t, 2>{B, K})) / 2.f;
        ops::softmax_rows(probs.data(), logits.data(), int(B), int(K));
        return logits;
    }
    Array& logits = p.rec(StageKind::Logits, {K});
    Array& probs = p.rec(StageKind::Probs, {K});
    if (p.dry) return logits;
    linear("head", logits.data(), p.feat, w.head_w, w.head_b, B, p.packs);
    ops::softmax_rows(probs.data(), logits.data(), int(B), int(K));
    return logits;
}

// embedding: the model's output without a classifier (Cls + Projection: pooled @ proj; Cls + Identity:
// ln_final.out[0]; Map: the attention-pooled vector, and PE's: that vector @ proj)
const Array& embedding_part(Pass& p) {
    const size_t B = p.B, D = p.D, E = size_t(p.c.out_dim());
    Array& emb_out = p.rec(StageKind::Embedding, {E});
    if (p.dry) return emb_out;
    if (p.pool == Pooling::Map && p.c.head != Head::Projection) {
        std::copy_n(p.feat, B * D, emb_out.data());
        return emb_out;
    }
    const float* f = p.feat;
    Tensor2 first;
    if (!f) {
        first = row_of(p, p.lf, p.T, 0);
        f = first.data();
    }
    if (p.c.head == Head::Projection)  // embedding = f @ proj, proj (D, E)
        ops::gemm(false, false, int(B), int(E), int(D), 1.f, f, int(D), p.w.proj.data(), int(E), 0.f, emb_out.data(),
                  int(E));
    else
        std::copy_n(f, B * D, emb_out.data());
    return emb_out;
}

}  // namespace

const Array& head_part(Pass& p) {
    p.enter(-1);
    pool_part(p);
    return p.c.has_logits() ? classifier_part(p) : embedding_part(p);
}

}  // namespace vit
