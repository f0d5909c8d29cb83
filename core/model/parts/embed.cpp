// The embedding: image -> patches -> patch embeddings -> tokens (cls, dist) -> + position
// embeddings (the stored table, resized by the family's rule for another grid) -> dropped patches
// removed -> registers inserted -> ln_pre. Each stage reads like its PyTorch line, named in a comment.
#include <algorithm>
#include <stdexcept>
#include <xtensor/xbroadcast.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xstrided_view.hpp>
#include <xtensor/xview.hpp>

#include "core/kernels/profile.h"
#include "core/model/pass.h"
#include "core/model/pos_embed.h"

namespace vit {

namespace {

// The family's rule for resizing its position embeddings (core/model/pos_embed.h).
PosEmbedRule pos_rule_of(PosRule r) {
    switch (r) {
        case PosRule::Timm: return pos_rule_timm();
        case PosRule::Dino: return pos_rule_dino();
        case PosRule::Dinov2: return pos_rule_dinov2(false);
        case PosRule::Dinov2Reg: return pos_rule_dinov2(true);
        case PosRule::Hf: return pos_rule_hf(false);
        case PosRule::HfAntialias: return pos_rule_hf(true);
        case PosRule::OpenClip: return pos_rule_open_clip();
        case PosRule::Mae: return pos_rule_mae();
    }
    throw std::invalid_argument("unknown position-embedding rule");
}

// input, patches, patch_embed
void patches_part(Pass& p, const Tensor4& x) {
    const Config& c = p.c;
    const size_t B = p.B, C = size_t(c.channels), Hi = size_t(p.rd.img_h), Wi = size_t(p.rd.img_w), P = size_t(c.patch),
                 gh = size_t(p.rd.gh), gw = size_t(p.rd.gw), N = size_t(p.rd.N);
    // input: (C, Hi, Wi), normalized
    Array& in = p.rec(StageKind::Input, {C, Hi, Wi});
    if (!p.dry) xt::noalias(as(in, std::array<size_t, 4>{B, C, Hi, Wi})) = x;

    // patches: (N, C*P*P). torch: x.unfold(1,P,P).unfold(2,P,P) is (C, gh, gw, P, P);
    // permuted to (gh, gw, C, P, P), each patch is channel-major, as the Conv2d weight.
    Array& patches = p.rec(StageKind::Patches, {N, size_t(c.patch_dim())});
    if (p.dry) {
    } else if (p.opt.bug_reshape_patches) {
        // BUG (on purpose, a teaching switch): x.reshape(N, C*P*P) keeps image rows, not patches.
        xt::noalias(as(patches, std::array<size_t, 4>{B, C, Hi, Wi})) = x;
    } else {
        auto grid = xt::reshape_view(x, std::array<size_t, 6>{B, C, gh, P, gw, P});
        xt::noalias(as(patches, std::array<size_t, 6>{B, gh, gw, C, P, P})) = xt::transpose(grid, {0, 2, 4, 1, 3, 5});
    }

    // patch_embed: (N, D) = patches @ W.T + b == Conv2d(C, D, P, stride=P)(x).flatten(2).transpose(1, 2)
    Array& pe = p.rec(StageKind::PatchEmbed, {N, p.D});
    if (!p.dry) linear("patch_embed.proj", pe.data(), patches.data(), p.w.patch_w, p.w.patch_b, B * N, p.packs);
    // patch_embed.norm (AIMv2: timm's embed_norm_layer, PatchEmbed's norm after the flatten): x = norm(x), before
    // the position table; the tokens read its output (the last stage handed out)
    if (p.c.patch_norm) layernorm_part(p, LnSite::Patch, pe.data(), p.w.patch_norm, N);
}

// tokens, pos_embed.learned, pos_embed, embed: the sequence before the blocks (without registers)
void position_part(Pass& p) {
    const Config& c = p.c;
    const Weights& w = p.w;
    const size_t B = p.B, D = p.D, N = size_t(p.rd.N), T0 = size_t(p.rd.T0), gh = size_t(p.rd.gh),
                 gw = size_t(p.rd.gw);
    const Array& pe = p.rec.last();  // patch_embed (or its norm's output)

    // tokens: (T0, D) = torch.cat([cls_token, (dist_token,) patch_embed])
    const size_t pre0 = size_t(c.cls_token) + size_t(c.dist_token);
    Array& tok = p.rec(StageKind::Tokens, {T0, D});
    if (!p.dry) {
        auto tok3 = as(tok, std::array<size_t, 3>{B, T0, D});
        if (c.cls_token) xt::view(tok3, xt::all(), 0, xt::all()) = xt::broadcast(w.cls, {B, D});
        if (c.dist_token) xt::view(tok3, xt::all(), 1, xt::all()) = xt::broadcast(w.dist, {B, D});
        xt::view(tok3, xt::all(), xt::range(pre0, T0), xt::all()) =
            as(pe.data(), pe.size(), std::array<size_t, 3>{B, N, D});
    }

    if (!c.pos_table) {
        // no position table (DINOv3): embed is the tokens unchanged; the positions enter every block's
        // attention as rotations of the patch tokens' q and k (attention_part's RoPE)
        Array& emb = p.rec(StageKind::Embed, {T0, D});
        if (p.dry) return;
        std::copy_n(tok.data(), B * T0 * D, emb.data());
        p.patch(StageKind::Embed, -1, emb);
        p.x = emb.data();
        return;
    }
    // pos_embed.learned: the stored table, when this run's grid is another size
    const size_t G0 = size_t(c.stored_grid()), prow = size_t(c.pos_prefix());
    if (p.rd.resized) {
        Array& pl = p.rec(StageKind::PosEmbedLearned, {prow + G0 * G0, D});
        if (!p.dry)
            xt::noalias(as(pl, std::array<size_t, 3>{B, prow + G0 * G0, D})) = xt::broadcast(w.pos, {B, prow + G0 * G0, D});
    }
    // pos_embed: (T0, D), what is added: the stored rows, the grid resized by the family's rule;
    // tokens without a stored position (timm no_embed_class's cls) get 0.
    Array& pos = p.rec(StageKind::PosEmbed, {T0, D});
    if (!p.dry) {
        std::vector<float> table_rows;
        const float* src = w.pos.data();
        if (p.rd.resized) {
            profile::Scope prof([] { return std::string("position embeddings resized"); }, 0);
            table_rows = resize_pos_embed(w.pos.data(), int(w.pos.shape(0)), int(D), int(prow), int(G0), int(G0),
                                          int(gh), int(gw), pos_rule_of(c.pos_rule));
            src = table_rows.data();
        }
        // pos[b, :zero_rows] = 0; pos[b, zero_rows:] = table, for every image b of the batch (whole rows,
        // copied as such: a broadcast view assignment walks them element by element)
        const size_t zero_rows = pre0 - prow;  // tokens the table has no row for
        for (size_t b = 0; b < B; ++b) {
            float* dst = pos.data() + b * T0 * D;
            std::fill(dst, dst + zero_rows * D, 0.f);
            std::copy(src, src + (T0 - zero_rows) * D, dst + zero_rows * D);
        }
    }

    // embed: (T0, D) = tokens + pos_embed
    Array& emb = p.rec(StageKind::Embed, {T0, D});
    if (p.dry) return;
    xt::noalias(as(emb, std::array<size_t, 3>{B, T0, D})) =
        as(tok, std::array<size_t, 3>{B, T0, D}) + as(pos, std::array<size_t, 3>{B, T0, D});
    p.patch(StageKind::Embed, -1, emb);
    p.x = emb.data();
}

}  // namespace

void embed_part(Pass& p, const Tensor4& x) {
    const Config& c = p.c;
    const size_t B = p.B, D = p.D, T = p.T, Rg = size_t(c.registers), T0 = size_t(p.rd.T0), Tk = T - Rg;
    p.enter(-1);
    patches_part(p, x);
    position_part(p);
    const float* seq = p.x;  // the tokens without registers: (B, Tk, D)

    // embed.kept: (Tk, D) = x[:, keep], the dropped patches removed (an intervention)
    if (p.rd.dropped()) {
        const size_t pre0 = size_t(c.cls_token) + size_t(c.dist_token);
        const Array& emb = p.rec.last();
        Array& kept = p.rec(StageKind::EmbedKept, {Tk, D});
        if (!p.dry) {
            auto k3 = as(kept, std::array<size_t, 3>{B, Tk, D});
            auto e3 = as(emb.data(), emb.size(), std::array<size_t, 3>{B, T0, D});
            xt::view(k3, xt::all(), xt::range(0, pre0), xt::all()) = xt::view(e3, xt::all(), xt::range(0, pre0), xt::all());
            for (size_t i = 0; i < p.rd.kept.size(); ++i)
                xt::view(k3, xt::all(), pre0 + i, xt::all()) = xt::view(e3, xt::all(), pre0 + size_t(p.rd.kept[i]), xt::all());
            p.x = seq = kept.data();
        }
    }

    // with_registers: (T, D) = torch.cat([x[:, :1], register_tokens, x[:, 1:]], dim=1), after the cls
    // token; without one (timm's vit_*_reg4_gap), torch.cat([register_tokens, x], dim=1)
    if (Rg) {
        Array& wr = p.rec(StageKind::WithRegisters, {T, D});
        if (!p.dry) {
            const size_t pc = size_t(c.cls_token);
            auto wr3 = as(wr, std::array<size_t, 3>{B, T, D});
            auto e3 = as(seq, B * Tk * D, std::array<size_t, 3>{B, Tk, D});
            xt::view(wr3, xt::all(), xt::range(0, pc), xt::all()) = xt::view(e3, xt::all(), xt::range(0, pc), xt::all());
            xt::view(wr3, xt::all(), xt::range(pc, pc + Rg), xt::all()) = xt::broadcast(p.w.reg, {B, Rg, D});
            xt::view(wr3, xt::all(), xt::range(pc + Rg, T), xt::all()) = xt::view(e3, xt::all(), xt::range(pc, Tk), xt::all());
            p.x = wr.data();
        }
    }
    // ln_pre (CLIP): x = ln_pre(x)
    if (c.ln_pre) p.x = layernorm_part(p, LnSite::Pre, p.x, p.w.ln_pre, T);
}

}  // namespace vit
