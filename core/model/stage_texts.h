// The stages' texts (internal to core/model): the sizes and options a description reads
// (StageContext) and one describe function per kind of stage, which stages.cpp's definitions name.
// stage_texts_embed.cpp: the embedding, the LayerNorms and attention; stage_texts_head.cpp: the MLP,
// the residual stream and everything after the blocks.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "core/model/stages.h"

namespace vit {

// The sizes, options and family parts every description reads.
struct StageContext {
    const Config& c;
    const Options& o;
    RunDims r;
    size_t C, P, G0, N, T, T0, D, H, d, M, Mi, K, CPP, R, E;
    int L;
    Pooling pool;
    StageContext(const Config& cfg, const Options& opt) : c(cfg), o(opt), r(run_dims(cfg, opt)) {
        C = c.channels; P = c.patch; G0 = c.stored_grid(); N = r.N; T = r.T; R = c.registers;
        T0 = r.T0;  // cls, dist and every patch: the tokens before patches are dropped or registers inserted
        D = c.width; H = c.heads; d = c.head_dim(); M = c.mlp; Mi = c.mlp_in(); K = c.classes;
        CPP = c.patch_dim(); E = c.out_dim();
        L = c.depth;
        pool = o.pooling_for(c);
    }
    std::string grid() const { return std::to_string(r.gh) + "x" + std::to_string(r.gw); }
    std::string size() const { return std::to_string(r.img_h) + "x" + std::to_string(r.img_w); }
    // The residual stream entering block 0 (after the registers and ln_pre, when the model has them).
    StageId stream0() const {
        if (c.ln_pre) return {StageKind::LnPreOut, -1};
        if (R) return {StageKind::WithRegisters, -1};
        return embedded();
    }
    // The embedded tokens the blocks start from: embed, or embed.kept when patches were dropped.
    StageId embedded() const { return r.dropped() ? StageId{StageKind::EmbedKept, -1} : StageId{StageKind::Embed, -1}; }
    int kept() const { return r.kept_n(); }
    // The interventions on block l, for texts.
    std::vector<const HeadAblation*> heads_ablated(int l) const {
        std::vector<const HeadAblation*> v;
        for (const HeadAblation& h : o.iv.heads) if (h.layer == l) v.push_back(&h);
        return v;
    }
    bool sublayer_ablated(int l, bool mlp) const {
        for (const SublayerAblation& s : o.iv.sublayers) if (s.layer == l && s.mlp == mlp) return true;
        return false;
    }
    StageId last_stream() const { return L ? StageId{StageKind::ResidPost, L - 1} : stream0(); }
    // "cls, dist, reg0..reg3, patches": the token order, for texts.
    std::string order() const {
        std::string s;
        if (c.cls_token) s += "cls, ";
        if (R) s += "reg0.." + std::string("reg") + std::to_string(R - 1) + ", ";
        if (c.dist_token) s += "dist, ";
        return s + std::to_string(kept()) + " patches";
    }
    // The module names a family's own code uses, for the hooks and PyTorch lines.
    bool clip() const { return c.family == ModelFamily::Clip; }
};


namespace stage_texts {

using Ctx = StageContext;
using K = StageKind;
inline const std::vector<std::string> kTD{"tokens", "embedding dims"};
inline std::string num(float v) {  // eps as Python prints it: 1e-06, 1e-12 (%g has Python's two-digit exponent)
    char b[32];
    std::snprintf(b, sizeof b, "%g", double(v));
    return b;
}
inline std::string str(size_t v) { return std::to_string(v); }
inline const char* py(bool b) { return b ? "True" : "False"; }

void d_input(const Ctx& x, StageInfo& s);
void d_patches(const Ctx& x, StageInfo& s);
void d_patch_embed(const Ctx& x, StageInfo& s);
void d_tokens(const Ctx& x, StageInfo& s);
std::string pos_layout(const Ctx& x);
void d_pos_embed_learned(const Ctx& x, StageInfo& s);
void d_pos_embed(const Ctx& x, StageInfo& s);
void d_embed(const Ctx& x, StageInfo& s);
void d_embed_kept(const Ctx& x, StageInfo& s);
void d_with_registers(const Ctx& x, StageInfo& s);
void d_layernorm(const Ctx& x, StageInfo& s);
void attn_sub(const Ctx& x, StageInfo& s);
void d_qkv(const Ctx& x, StageInfo& s);
void d_scores(const Ctx& x, StageInfo& s);
void d_rope(const Ctx& x, StageInfo& s);
void d_pattern(const Ctx& x, StageInfo& s);
void d_z(const Ctx& x, StageInfo& s);
void d_attn_out(const Ctx& x, StageInfo& s);
void d_layer_scale(const Ctx& x, StageInfo& s);
void d_resid_mid(const Ctx& x, StageInfo& s);
void mlp_sub(const Ctx& x, StageInfo& s);
void d_mlp_pre(const Ctx& x, StageInfo& s);
void d_mlp_post(const Ctx& x, StageInfo& s);
void d_mlp_out(const Ctx& x, StageInfo& s);
void d_resid_post(const Ctx& x, StageInfo& s);
void d_pooled(const Ctx& x, StageInfo& s);
void d_pooled_dist(const Ctx& x, StageInfo& s);
StageId head_input(const Ctx& x);
void logits_sub(const Ctx& x, StageInfo& s);
void d_logits_cls(const Ctx& x, StageInfo& s);
void d_logits_dist(const Ctx& x, StageInfo& s);
void d_logits(const Ctx& x, StageInfo& s);
void d_probs(const Ctx& x, StageInfo& s);
void map_sub(const Ctx& x, StageInfo& s);
void d_head_probe(const Ctx& x, StageInfo& s);
void d_head_attn(const Ctx& x, StageInfo& s);
void d_head_mlp(const Ctx& x, StageInfo& s);
void d_embedding(const Ctx& x, StageInfo& s);

}  // namespace stage_texts
}  // namespace vit
