// The encoder block: x + attn(ln1(x)) (times the layer scale), then + mlp(ln2(.)) (times the layer
// scale). The residual adds run inside the LayerNorm that reads their sum (one pass over the rows
// instead of two) unless an intervention patches a stage between them; resid_post's add waits for
// the next block's ln1 (the last block's runs on its own).
#include <algorithm>
#include <xtensor/xnoalias.hpp>

#include "core/model/pass.h"

namespace vit {

namespace {

// ls: (T, D) = gamma * branch (layer scale: DINOv2, DeiT III, CaiT). torch: x * self.gamma
const float* layer_scale_part(Pass& p, StageKind kind, const Array& branch, const Tensor1& gamma) {
    Array& ls = p.rec(kind, {p.T, p.D});
    if (p.dry) return nullptr;
    xt::noalias(as(ls, std::array<size_t, 2>{p.R, p.D})) =
        as(branch.data(), branch.size(), std::array<size_t, 2>{p.R, p.D}) * gamma;
    return ls.data();
}

// mlp.pre = fc1(ln2); mlp.post = act(mlp.pre); mlp.out = fc2(mlp.post)   (an ablation sets mlp.out to 0)
// EVA-02 Base/Large (Config::mlp_norm, timm SwiGLU's norm): mlp.out = fc2(mlp.norm(mlp.post)), a LayerNorm over the
// hidden units.
Array& mlp_part(Pass& p, const BlockW& b, const float* h2) {
    const Config& c = p.c;
    const int li = p.layer;
    Array& pre = p.rec(StageKind::MlpPre, {p.T, size_t(c.mlp_in())});
    Array& post = p.rec(StageKind::MlpPost, {p.T, p.M});
    if (!p.dry) {
        linear_act("mlp.fc1", c.act, pre.data(), post.data(), h2, b.fc1_w, b.fc1_b, p.R, p.M, p.packs, b.fc1_p,
                   p.rec.stream());
        p.patch(StageKind::MlpPost, li, post);
    }
    const float* hidden = c.mlp_norm ? layernorm_part(p, LnSite::Mlp, post.data(), b.mlp_norm, p.T, nullptr, p.M)
                                     : post.data();
    Array& out = p.rec(StageKind::MlpOut, {p.T, p.D});
    if (p.dry) return out;
    if (sublayer_ablated(p.opt, li, true)) std::fill_n(out.data(), out.size(), 0.f);
    else linear("mlp.fc2", out.data(), hidden, b.fc2_w, b.fc2_b, p.R, p.packs, b.fc2_p);
    p.patch(StageKind::MlpOut, li, out);
    return out;
}

}  // namespace

void block_part(Pass& p, int l, bool last) {
    p.enter(l);
    const Config& c = p.c;
    const bool patching = bool(p.opt.iv.patch);
    const BlockW* b = p.dry ? nullptr : &p.w.blocks[size_t(l)];
    static const BlockW none;
    const BlockW& bw = b ? *b : none;
    const size_t R = p.R, D = p.D;

    const float* h1 = layernorm_part(p, LnSite::Ln1, p.x, bw.ln1, p.T, p.pending ? &*p.pending : nullptr);
    p.pending.reset();
    attention_part(p, bw, h1);
    const Array& ao = p.rec.last();
    const float* attn_branch = ao.data();
    if (c.layer_scale) attn_branch = layer_scale_part(p, StageKind::Ls1, ao, bw.ls1);

    // resid_mid = x + attn_out
    Array& rm = p.rec(StageKind::ResidMid, {p.T, D});
    const PendingAdd mid{rm.data(), p.x, attn_branch};
    if (!p.dry && patching) {
        residual_add(rm.data(), p.x, attn_branch, R, D);
        p.patch(StageKind::ResidMid, l, rm);
    }
    const float* h2 = layernorm_part(p, LnSite::Ln2, rm.data(), bw.ln2, p.T, patching ? nullptr : &mid);

    const Array& mo = mlp_part(p, bw, h2);
    const float* mlp_branch = mo.data();
    if (c.layer_scale) mlp_branch = layer_scale_part(p, StageKind::Ls2, mo, bw.ls2);

    // resid_post = resid_mid + mlp_out
    Array& rp = p.rec(StageKind::ResidPost, {p.T, D});
    if (p.dry) return;
    if (!patching && !last) {
        p.pending = PendingAdd{rp.data(), rm.data(), mlp_branch};
    } else {
        residual_add(rp.data(), rm.data(), mlp_branch, R, D);
        p.patch(StageKind::ResidPost, l, rp);
    }
    p.x = rp.data();
}

}  // namespace vit
