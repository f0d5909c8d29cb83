#include "core/model/stages.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace vit {

namespace {

std::string num(float v) {  // eps as Python prints it: 1e-06, 1e-12 (%g has Python's two-digit exponent)
    char b[32];
    std::snprintf(b, sizeof b, "%g", double(v));
    return b;
}
std::string str(size_t v) { return std::to_string(v); }
const char* py(bool b) { return b ? "True" : "False"; }

}  // namespace

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

namespace {
using Ctx = StageContext;
using K = StageKind;
const std::vector<std::string> kTD{"tokens", "embedding dims"};

// ---------------------------------------------------------------- embedding

void d_input(const Ctx& x, StageInfo& s) {
    s.axes = {"channels", "rows", "columns"};
    s.title = "Input image";
    s.what = "The image as the model sees it: resized, cropped, and normalized per channel with the model's "
             "mean and std, shape (" + str(x.C) + ", " + str(size_t(x.r.img_h)) + ", " + str(size_t(x.r.img_w)) + ").";
    if (x.r.img_h != x.c.image_size || x.r.img_w != x.c.image_size)
        s.what += " The model's own input is " + std::to_string(x.c.image_size) + "x" + std::to_string(x.c.image_size) +
                  "; this run uses " + x.size() + ".";
    s.torch = "x = (img - mean[:, None, None]) / std[:, None, None]";
    s.box.sub = std::string(x.C == 1 ? "gray " : x.C == 3 ? "RGB " : "") + x.size();
}

void d_patches(const Ctx& x, StageInfo& s) {
    const std::string sN = str(x.N), sCPP = str(x.CPP), sP = str(x.P);
    s.axes = {"patches", "pixels in a patch"};
    s.from = {{K::Input, -1}};
    if (x.o.bug_reshape_patches) {
        s.title = "Patches (BUG: plain reshape)";
        s.what = "BUG switched on: the image is reshaped to (" + sN + ", " + sCPP +
                 ") without cutting it into patches, so each row holds runs of image rows (and channels), "
                 "not a " + sP + "x" + sP + " patch. Compare with the Changes view.";
        s.torch = "x.reshape(" + sN + ", " + sCPP + ")  # BUG: not patches";
        s.box.bug = true;
        s.box.sub = "BUG: plain reshape";
    } else {
        s.title = "Patches";
        s.what = "The image cut into " + sN + " patches of " + sP + "x" + sP + " (a " + x.grid() +
                 " grid, row-major), each flattened channel-major to " + sCPP +
                 " numbers, the layout of the Conv2d weight.";
        s.torch = "x.unfold(1, " + sP + ", " + sP + ").unfold(2, " + sP + ", " + sP +
                  ").permute(1, 2, 0, 3, 4).reshape(" + sN + ", " + sCPP + ")";
        s.box.sub = sP + "x" + sP + " tiles";
    }
}

void d_patch_embed(const Ctx& x, StageInfo& s) {
    s.axes = {"patches", "embedding dims"};
    s.from = {{K::Patches, -1}};
    s.title = "Patch embedding";
    s.what = "Each patch mapped linearly to a " + str(x.D) +
             "-dim token: the same as a Conv2d with kernel = stride = " + str(x.P) +
             (x.c.patch_bias ? "." : ", without a bias (as in CLIP).");
    s.torch = "nn.Conv2d(" + str(x.C) + ", " + str(x.D) + ", " + str(x.P) + ", stride=" + str(x.P) +
              (x.c.patch_bias ? "" : ", bias=False") + ")(x).flatten(2).transpose(1, 2)";
    s.box.sub = "linear to " + str(x.D);
}

void d_tokens(const Ctx& x, StageInfo& s) {
    s.axes = kTD;
    s.from = {{K::PatchEmbed, -1}};
    const bool cls = x.c.cls_token, dist = x.c.dist_token;
    if (!cls) {
        s.title = "Tokens (no cls token)";
        s.what = "This model has no cls token: its " + str(x.N) + " tokens are the patch embeddings themselves. "
                 "What the head reads comes from all of them (" +
                 std::string(x.pool == Pooling::Map ? "an attention-pooling head" : "their mean") + ").";
        s.torch = "x  # no cls token";
        s.box.sub = "no cls";
        return;
    }
    s.title = dist ? "cls and distillation tokens prepended" : "cls token prepended";
    s.what = std::string(dist ? "A learned cls token and a learned distillation token are" : "A learned cls token is") +
             " put in front of the " + str(x.N) + " patch tokens: " + str(x.T0) + " tokens.";
    if (dist)
        s.what += " The head reads both: the cls token's final state through `head`, the distillation token's "
                  "through `head_dist`, and averages their logits.";
    else if (x.pool == Pooling::Cls || x.pool == Pooling::ClsThenNorm)
        s.what += x.c.has_logits() ? " Its final state is what the classifier reads."
                                   : " Its final state is the model's output (the image embedding).";
    else
        s.what += " (This model pools the mean of the patch tokens, so the head does not read it.)";
    if (x.R) s.what += " The " + str(x.R) + " register tokens are inserted after the position embeddings are added.";
    s.torch = dist ? "torch.cat([cls_token, dist_token, x], dim=1)" : "torch.cat([cls_token, x], dim=1)";
    s.box.sub = dist ? "+cls +dist" : "+cls";
}

std::string pos_layout(const Ctx& x) {
    return std::to_string(x.c.pos_rows()) + " rows: " +
           (x.c.pos_prefix() ? std::string(x.c.dist_token ? "cls and dist positions, then " : "the cls position, then ")
                             : std::string()) +
           "a " + str(x.G0) + "x" + str(x.G0) + " grid";
}

void d_pos_embed_learned(const Ctx& x, StageInfo& s) {
    s.axes = {"positions", "embedding dims"};
    s.title = "Position embeddings as learned";
    s.what = "The position embeddings as the checkpoint stores them (" + pos_layout(x) + "). This run's patch grid is " +
             x.grid() + ", so the grid is resized: see pos_embed.";
    s.torch = "model.pos_embed[0]  # (" + str(size_t(x.c.pos_rows())) + ", " + str(x.D) + ")";
    s.box.sub = "+pos resized";
}

void d_pos_embed(const Ctx& x, StageInfo& s) {
    s.axes = kTD;
    if (x.r.resized) s.from = {{K::PosEmbedLearned, -1}};
    s.title = "Position embeddings";
    std::string rows = x.c.cls_token ? (x.c.dist_token ? "rows 0 and 1 for the cls and dist tokens" : "row 0 for the cls token")
                                     : "no cls token";
    s.what = "The position embeddings added to the tokens: one " + str(x.D) + "-dim vector per token (" + rows +
             ", then the " + str(x.N) + " patches of the " + x.grid() + " grid, row-major).";
    if (x.c.pos_no_cls && x.c.cls_token)
        s.what += " This model stores positions for the patches only: the cls token's is folded into cls_token, "
                  "so its row here is 0.";
    if (x.r.resized)
        s.what += " The learned " + str(x.G0) + "x" + str(x.G0) + " grid was resized to " + x.grid() + " by " +
                  pos_rule_label(x.c.pos_rule) + ".";
    s.what += " Without them the model could not tell where a patch came from.";
    s.torch = x.r.resized ? "interpolate_pos_encoding(model.pos_embed, " + std::to_string(x.r.gh) + ", " +
                                std::to_string(x.r.gw) + ")  # " + pos_rule_label(x.c.pos_rule)
                          : "model.pos_embed[0]  # (" + str(x.T0) + ", " + str(x.D) + ")";
    s.box.sub = x.r.resized ? "+pos resized" : "+pos learned";
}

void d_embed(const Ctx& x, StageInfo& s) {
    s.axes = kTD;
    s.from = {{K::Tokens, -1}, {K::PosEmbed, -1}};
    s.title = "Position embedding added";
    s.what = "A learned vector per position is added, so attention can tell where a patch came from.";
    if (x.stream0() == s.id) s.what += " This is the residual stream entering block 0.";
    s.torch = "x = x + pos_embed";
    s.box.sub = x.r.resized ? "+pos resized" : "+pos learned";
}

void d_embed_kept(const Ctx& x, StageInfo& s) {
    const int dropped = x.r.N - x.kept();
    s.axes = kTD;
    s.from = {{K::Embed, -1}};
    s.intervened = true;
    s.title = "Patches dropped";
    Interventions only_dropped;
    only_dropped.dropped = x.o.iv.dropped;
    s.what = "An intervention: " + std::to_string(dropped) + " of the " + str(x.N) + " patch tokens are removed from "
             "the sequence right after the position embeddings are added (" + only_dropped.describe() + "). The model "
             "runs on the " + std::to_string(x.kept()) + " patches left, as MAE's encoder does: every later stage has " +
             str(x.T) + " tokens instead of " + str(x.T + size_t(dropped)) + ".";
    s.torch = "x = x[:, keep]  # keep = the prefix tokens and the patches not dropped";
    s.box.sub = std::to_string(dropped) + " dropped";
}

void d_with_registers(const Ctx& x, StageInfo& s) {
    s.axes = kTD;
    s.from = {x.embedded()};
    s.title = "Register tokens inserted";
    s.what = str(x.R) + " learned register tokens are inserted " +
             std::string(x.c.cls_token ? "after the cls token" : "before the patches (this model has no cls token)") +
             ", after the position embeddings were added (registers get no position): the sequence is now " +
             x.order() + ", " + str(x.T) + " tokens. They give the model scratch space, so patch tokens are not used "
             "for it.";
    if (x.stream0() == s.id) s.what += " This is the residual stream entering block 0.";
    s.torch = x.c.cls_token ? "x = torch.cat([x[:, :1], register_tokens.expand(B, -1, -1), x[:, 1:]], dim=1)"
                            : "x = torch.cat([reg_token.expand(B, -1, -1), x], dim=1)";
    s.box.sub = str(x.R) + " registers";
}

// ---------------------------------------------------------------- LayerNorm (every site, every part)

void d_layernorm(const Ctx& x, StageInfo& s) {
    const LnSite site = ln_site(s.id.kind);
    const LnPart part = ln_part(s.id.kind);
    const int l = s.id.layer;
    const std::string L = std::to_string(l), D = str(x.D);
    // What it normalizes, and the module that does it.
    StageId src;
    std::string src_desc, mod;
    switch (site) {
        case LnSite::Pre:
            src = x.R ? StageId{K::WithRegisters, -1} : x.embedded();
            src_desc = "the tokens, before the first block (CLIP's ln_pre)";
            mod = "model.ln_pre";
            break;
        case LnSite::Ln1:
            src = l ? StageId{K::ResidPost, l - 1} : x.stream0();
            src_desc = "the residual stream entering block " + L;
            mod = "blocks[" + L + "].norm1";
            break;
        case LnSite::Ln2:
            src = {K::ResidMid, l};
            src_desc = "the residual stream after attention in block " + L;
            mod = "blocks[" + L + "].norm2";
            break;
        case LnSite::Head:
            src = {K::HeadAttnOut, -1};
            src_desc = "the attention-pooled vector";
            mod = "model.head.layernorm";
            break;
        default:
            if (x.pool == Pooling::Cls || x.pool == Pooling::Map || x.pool == Pooling::NormMean) {
                src = x.last_stream();
                src_desc = "the last residual stream";
                mod = x.clip() ? "model.ln_post" : "model.norm";
            } else {
                src = {K::Pooled, -1};
                src_desc = x.pool == Pooling::Mean ? "the pooled vector" : "the cls token's row";
                mod = x.clip() ? "model.ln_post" : "model.fc_norm";
            }
    }
    s.from = {src};
    s.ln = site;
    s.box.sub = x.o.affine ? "affine" : "no affine";
    if (x.o.unbiased) s.box.sub += ", N-1";
    if (site == LnSite::Head) s.box.sub = "probe, " + str(x.H) + " heads";  // inside the pooling head's box
    const std::string eps = num(x.c.eps), ddof = x.o.unbiased ? "D-1 = " + str(x.D - 1) : "D = " + D;
    const std::string intro = "LayerNorm over the " + D + " dims of each token of " + src_desc + ". ";
    switch (part) {
        case LnPart::Mean:
            s.axes = {"tokens"};
            s.title = "LayerNorm: mean";
            s.what = intro + "The mean of each token's " + D + " values.";
            s.torch = "mu = x.mean(-1)";
            return;
        case LnPart::Std:
            s.axes = {"tokens"};
            s.title = "LayerNorm: std";
            s.what = intro + "The standard deviation of each token: the squared deviations summed and divided by " +
                     ddof + (x.o.unbiased ? " (unbiased: the toggle is on; nn.LayerNorm itself always divides by D)"
                                          : " (biased, as nn.LayerNorm does)") +
                     ". Shown without eps; the next stage divides by sqrt(var + eps).";
            s.torch = std::string("sigma = x.std(-1, unbiased=") + py(x.o.unbiased) + ")";
            s.signed_values = false;
            return;
        case LnPart::Normalized:
            s.axes = kTD;
            s.title = "LayerNorm: normalized";
            s.what = intro + "(x - mean) / sqrt(var + " + eps + "), var divided by " + ddof +
                     ": every token now has mean 0 and a standard deviation of " +
                     (x.o.unbiased ? "sqrt((D-1)/D) = slightly under 1 (measured with D)" : "1") + ".";
            s.torch = "(x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=" + std::string(py(x.o.unbiased)) +
                      ", keepdim=True) + " + eps + ")";
            return;
        case LnPart::Out:
            s.axes = kTD;
            s.title = "LayerNorm: output";
            if (x.o.affine) {
                s.what = intro + "normalized * gamma + beta: elementwise_affine is on, so the learned scale gamma and "
                                 "shift beta (" + D + " values each) are applied.";
                s.torch = x.o.unbiased ? "normalized * " + mod + ".weight + " + mod + ".bias  # elementwise_affine=True"
                                       : mod + "(x)  # nn.LayerNorm(" + D + ", eps=" + eps +
                                             ", elementwise_affine=True)";
            } else {
                s.what = intro + "elementwise_affine is off: gamma and beta are ignored, so the output equals "
                                 "'normalized'.";
                s.torch = x.o.unbiased ? "normalized  # elementwise_affine=False"
                                       : "F.layer_norm(x, (" + D + ",), eps=" + eps + ")  # nn.LayerNorm(" + D +
                                             ", elementwise_affine=False)";
            }
            return;
    }
}

// ---------------------------------------------------------------- attention

void attn_sub(const Ctx& x, StageInfo& s) {
    s.box.bug = x.o.bug_scale_after_softmax;
    s.box.sub = s.box.bug ? "BUG: scale after softmax" : str(x.H) + " heads of " + str(x.d);
    const auto heads = x.heads_ablated(s.id.layer);
    if (!heads.empty()) {
        std::string hs;
        for (auto* h : heads) hs += (hs.empty() ? "" : ",") + std::to_string(h->head);
        s.box.sub += ", head " + hs + " ablated";
    }
    if (x.sublayer_ablated(s.id.layer, false)) s.box.sub += ", output zeroed";
}

void d_qkv(const Ctx& x, StageInfo& s) {
    const int j = s.id.kind == K::AttnQ ? 0 : s.id.kind == K::AttnK ? 1 : 2;
    const char* names[3] = {"Queries", "Keys", "Values"};
    const std::string L = std::to_string(s.id.layer);
    s.axes = {"heads", "tokens", "head dims"};
    s.from = {{K::Ln1Out, s.id.layer}};
    s.title = names[j];
    s.what = std::string(names[j]) + " of every token for each of the " + str(x.H) + " heads (" + str(x.d) +
             " dims each): rows " + str(j * x.D) + ".." + str((j + 1) * x.D - 1) +
             " of the fused qkv Linear, split into heads.";
    s.torch = "q, k, v = blocks[" + L + "].attn.qkv(x).reshape(" + str(x.T) + ", 3, " + str(x.H) + ", " + str(x.d) +
              ").permute(1, 2, 0, 3)";
    attn_sub(x, s);
}

void d_scores(const Ctx& x, StageInfo& s) {
    const std::string sd = str(x.d), scale = "math.sqrt(" + sd + ")";
    s.axes = {"heads", "tokens (queries)", "tokens (keys)"};
    s.from = {{K::AttnQ, s.id.layer}, {K::AttnK, s.id.layer}};
    if (x.o.bug_scale_after_softmax) {
        s.title = "Attention scores (BUG: not scaled)";
        s.what = "BUG switched on: q.k without the 1/sqrt(" + sd +
                 ") scale, which is applied after the softmax instead. Unscaled scores make the softmax "
                 "sharper than the model was trained with.";
        s.torch = "scores = q @ k.transpose(-2, -1)  # BUG: no / " + scale;
    } else {
        s.title = "Attention scores";
        s.what = "How much each query token matches each key token: q.k over the " + sd +
                 " head dims, scaled by 1/sqrt(" + sd + ") before the softmax.";
        s.torch = "scores = q @ k.transpose(-2, -1) / " + scale;
    }
    attn_sub(x, s);
}

void d_pattern(const Ctx& x, StageInfo& s) {
    const std::string sd = str(x.d), scale = "math.sqrt(" + sd + ")";
    s.axes = {"heads", "tokens (queries)", "tokens (keys)"};
    s.from = {{K::AttnScores, s.id.layer}};
    if (x.o.bug_scale_after_softmax) {
        s.title = "Attention pattern (BUG: scaled after softmax)";
        s.what = "BUG switched on: softmax of the unscaled scores, then divided by sqrt(" + sd +
                 "): rows now sum to 1/sqrt(" + sd + ") instead of 1, and the weights are too peaked.";
        s.torch = "attn = scores.softmax(dim=-1) / " + scale + "  # BUG: scaling after the softmax";
    } else {
        s.title = "Attention pattern";
        s.what = "Softmax over the keys: each row sums to 1 and says where that query token looks. " +
                 std::string(x.c.cls_token ? "Row 0 is the cls token." : "Row i is patch i (this model has no cls token).");
        s.torch = "attn = scores.softmax(dim=-1)";
    }
    attn_sub(x, s);
}

void d_z(const Ctx& x, StageInfo& s) {
    s.axes = {"heads", "tokens", "head dims"};
    s.from = {{K::AttnPattern, s.id.layer}, {K::AttnV, s.id.layer}};
    s.title = "Attention-weighted values";
    s.what = "Each token's new value per head: the attention-weighted mix of all tokens' values.";
    s.torch = "z = attn @ v";
    for (const HeadAblation* h : x.heads_ablated(s.id.layer)) {
        s.intervened = true;
        s.what += " Intervention: head " + std::to_string(h->head) + "'s slice is set to " +
                  (h->mean ? "its mean over the tokens (mean ablation)" : "0 (zero ablation)") +
                  ": this is what enters the output projection.";
        s.torch += "; z[" + std::to_string(h->head) + "] = " + (h->mean ? "z[" + std::to_string(h->head) + "].mean(0)" : "0") +
                   "  # ablated";
    }
    attn_sub(x, s);
}

void d_attn_out(const Ctx& x, StageInfo& s) {
    const std::string L = std::to_string(s.id.layer);
    s.axes = kTD;
    s.from = {{K::AttnZ, s.id.layer}};
    s.title = "Attention output";
    s.what = "The " + str(x.H) + " heads concatenated back to " + str(x.D) + " dims and mixed by the output projection.";
    s.torch = "blocks[" + L + "].attn.proj(z.transpose(0, 1).reshape(" + str(x.T) + ", " + str(x.D) + "))";
    if (x.sublayer_ablated(s.id.layer, false)) {
        s.intervened = true;
        s.title = "Attention output (ablated)";
        s.what = "Intervention: this block's attention output is set to 0, so the residual stream passes the block's "
                 "attention unchanged.";
        s.torch = "attn_out = torch.zeros(" + str(x.T) + ", " + str(x.D) + ")  # ablated";
    }
    attn_sub(x, s);
}

void d_layer_scale(const Ctx& x, StageInfo& s) {
    const bool first = s.id.kind == K::Ls1;
    const std::string L = std::to_string(s.id.layer), which = first ? "ls1" : "ls2";
    s.axes = kTD;
    s.from = {{first ? K::AttnOut : K::MlpOut, s.id.layer}};
    s.title = std::string("Layer scale (") + (first ? "attention" : "MLP") + ")";
    s.what = std::string("The ") + (first ? "attention" : "MLP") + " output scaled per dimension by the learned " +
             which + ".gamma (" + str(x.D) + " values) before it is added to the residual stream: DINOv2's LayerScale.";
    s.torch = "x = blocks[" + L + "]." + which + "(" + (first ? "attn_out" : "mlp_out") + ")  # * " + which + ".gamma";
    s.box.sub = "x gamma";
}

void d_resid_mid(const Ctx& x, StageInfo& s) {
    const int l = s.id.layer;
    s.axes = kTD;
    s.from = {l ? StageId{K::ResidPost, l - 1} : x.stream0(), {x.c.layer_scale ? K::Ls1 : K::AttnOut, l}};
    s.title = "Residual after attention";
    s.what = std::string("The attention output") + (x.c.layer_scale ? ", layer-scaled," : "") +
             " added to the block's input (the skip connection).";
    s.torch = x.c.layer_scale ? "x = x + ls1(attn_out)" : "x = x + attn_out";
    s.box.sub = "residual";
}

// ---------------------------------------------------------------- MLP

void mlp_sub(const Ctx& x, StageInfo& s) {
    s.box.sub = std::string(act_label(x.c.act)) + ", " + str(x.M) + " hidden";
    if (x.sublayer_ablated(s.id.layer, true)) s.box.sub += ", output zeroed";
}

void d_mlp_pre(const Ctx& x, StageInfo& s) {
    s.axes = {"tokens", "hidden units"};
    s.from = {{K::Ln2Out, s.id.layer}};
    s.title = std::string("MLP hidden (before ") + act_label(x.c.act) + ")";
    s.what = "The MLP's first Linear: " + str(x.D) + " -> " + str(x.Mi) + " dims per token" +
             (x.c.act == Act::SwiGlu ? ": two halves of " + str(x.M) + ", x1 and x2, for SwiGLU." : ".");
    s.torch = x.c.act == Act::SwiGlu ? "h = blocks[" + std::to_string(s.id.layer) + "].mlp.w12(x)"
                                     : "h = blocks[" + std::to_string(s.id.layer) + "].mlp.fc1(x)";
    mlp_sub(x, s);
}

void d_mlp_post(const Ctx& x, StageInfo& s) {
    s.axes = {"tokens", "hidden units"};
    s.from = {{K::MlpPre, s.id.layer}};
    s.title = std::string("MLP hidden (after ") + act_label(x.c.act) + ")";
    switch (x.c.act) {
        case Act::Gelu:
            s.what = "GELU, the exact form x * Phi(x) with the normal CDF (erf), applied to every value: the MLP's "
                     "nonlinearity. Large negative inputs go to about 0, positive ones pass almost unchanged.";
            s.torch = "h = F.gelu(h)  # 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))";
            break;
        case Act::QuickGelu:
            s.what = "QuickGELU, x * sigmoid(1.702 x), applied to every value: OpenAI CLIP's cheaper approximation "
                     "of GELU (it is not in the weights: the model was trained with it).";
            s.torch = "h = h * torch.sigmoid(1.702 * h)  # QuickGELU";
            break;
        case Act::GeluTanh:
            s.what = "GELU in its tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), applied to "
                     "every value (SigLIP's gelu_pytorch_tanh).";
            s.torch = "h = F.gelu(h, approximate='tanh')";
            break;
        case Act::SwiGlu:
            s.what = "SwiGLU: the first half x1 through SiLU (x * sigmoid(x)) gates the second half x2, "
                     "silu(x1) * x2: " + str(x.Mi) + " -> " + str(x.M) + " dims per token.";
            s.torch = "x1, x2 = h.chunk(2, dim=-1); h = F.silu(x1) * x2";
            s.cell = CellRule::None;  // two inputs per cell: not written out
            break;
    }
    mlp_sub(x, s);
}

void d_mlp_out(const Ctx& x, StageInfo& s) {
    s.axes = kTD;
    s.from = {{K::MlpPost, s.id.layer}};
    s.title = "MLP output";
    s.what = "The MLP's second Linear: back to " + str(x.D) + " dims.";
    s.torch = x.c.act == Act::SwiGlu ? "blocks[" + std::to_string(s.id.layer) + "].mlp.w3(h)"
                                     : "blocks[" + std::to_string(s.id.layer) + "].mlp.fc2(h)";
    if (x.sublayer_ablated(s.id.layer, true)) {
        s.intervened = true;
        s.title = "MLP output (ablated)";
        s.what = "Intervention: this block's MLP output is set to 0, so the residual stream passes the MLP unchanged.";
        s.torch = "mlp_out = torch.zeros(" + str(x.T) + ", " + str(x.D) + ")  # ablated";
    }
    mlp_sub(x, s);
}

void d_resid_post(const Ctx& x, StageInfo& s) {
    const int l = s.id.layer;
    s.axes = kTD;
    s.from = {{K::ResidMid, l}, {x.c.layer_scale ? K::Ls2 : K::MlpOut, l}};
    s.title = "Residual after the MLP";
    s.what = l + 1 < x.L ? "The block's output: the residual stream entering block " + std::to_string(l + 1) + "."
                         : "The last block's output, which goes to the final LayerNorm.";
    s.torch = x.c.layer_scale ? "x = x + ls2(mlp_out)" : "x = x + mlp_out";
    s.box.sub = "residual";
}

// ---------------------------------------------------------------- the head

void d_pooled(const Ctx& x, StageInfo& s) {
    s.axes = {"embedding dims"};
    switch (x.pool) {
        case Pooling::Cls:
            s.from = {{K::LnFinalOut, -1}};
            s.title = "Pooled (cls token)";
            s.what = std::string("The cls token's row of the final LayerNorm: the summary of the image that the ") +
                     (x.c.head == Head::Projection ? "projection" : "head") + " reads.";
            s.torch = "pooled = x[:, 0]";
            s.box.sub = x.c.head == Head::Distilled ? "cls and dist tokens" : "cls token";  // DeiT pools both
            break;
        case Pooling::Mean:
            s.from = {x.last_stream()};
            s.title = "Pooled (mean of patch tokens)";
            s.what = "The mean of the " + str(x.N) + " patch tokens (" +
                     (x.r.prefix ? "the " + std::string(x.r.prefix > 1 ? "prefix tokens are" : "cls token is") + " left out"
                                 : std::string("all the tokens")) +
                     "); the final LayerNorm (timm's fc_norm) follows.";
            s.torch = x.r.prefix ? "pooled = x[:, " + std::to_string(x.r.prefix) + ":].mean(dim=1)" : "pooled = x.mean(dim=1)";
            s.box.sub = "mean of patches";
            break;
        case Pooling::ClsThenNorm:
            s.from = {x.last_stream()};
            s.title = "Pooled (cls token)";
            s.what = "The cls token's row of the last residual stream; the final LayerNorm (ln_post) is applied to "
                     "this row alone, as CLIP does.";
            s.torch = "pooled = x[:, 0]";
            s.box.sub = "cls token";
            break;
        case Pooling::NormMean:
            s.from = {{K::LnFinalOut, -1}};
            s.title = "Pooled (mean of the normed patch tokens)";
            s.what = "The mean of the " + std::to_string(x.kept()) + " patch tokens of the final LayerNorm's output (" +
                     (x.r.prefix ? "the registers are left out" : std::string("every token: the model has no cls token")) +
                     "): the final norm comes first, on every token, then the average (timm's fc_norm=False).";
            s.torch = x.r.prefix ? "pooled = norm(x)[:, " + std::to_string(x.r.prefix) + ":].mean(dim=1)"
                                 : "pooled = norm(x).mean(dim=1)";
            s.box.sub = "mean of normed patches";
            break;
        case Pooling::Map:
            break;  // SigLIP: the head's stages pool
    }
}

void d_pooled_dist(const Ctx& x, StageInfo& s) {
    s.axes = {"embedding dims"};
    s.from = {{K::LnFinalOut, -1}};
    s.title = "Pooled (distillation token)";
    s.what = "The distillation token's row of the final LayerNorm: what head_dist reads.";
    s.torch = "pooled_dist = x[:, 1]";
    s.box.sub = "cls and dist tokens";  // one box with pooled
}

// The vector a classifier head reads: the pooled row, or the final norm of the pooled row.
StageId head_input(const Ctx& x) {
    return x.pool == Pooling::Cls || x.pool == Pooling::NormMean ? StageId{K::Pooled, -1} : StageId{K::LnFinalOut, -1};
}

// The head box's note: DeiT's two heads and their mean are one box, so it says so.
void logits_sub(const Ctx& x, StageInfo& s) {
    s.box.sub = x.c.head == Head::Distilled ? "2 heads averaged, " + str(x.K) + " classes" : str(x.K) + " classes";
}

void d_logits_cls(const Ctx& x, StageInfo& s) {
    s.axes = {"classes"};
    s.from = {{K::Pooled, -1}};
    s.title = "Logits of the cls head";
    s.what = "The class scores the cls token's head gives (" + str(x.K) + " classes).";
    s.torch = "logits_cls = model.head(pooled)";
    logits_sub(x, s);
}

void d_logits_dist(const Ctx& x, StageInfo& s) {
    s.axes = {"classes"};
    s.from = {{K::PooledDist, -1}};
    s.title = "Logits of the distillation head";
    s.what = "The class scores the distillation token's head gives: trained to match a CNN teacher's predictions.";
    s.torch = "logits_dist = model.head_dist(pooled_dist)";
    logits_sub(x, s);
}

void d_logits(const Ctx& x, StageInfo& s) {
    s.axes = {"classes"};
    if (x.c.head == Head::Distilled) {
        s.from = {{K::LogitsCls, -1}, {K::LogitsDist, -1}};
        s.title = "Logits (both heads averaged)";
        s.what = "DeiT's prediction at inference: the mean of the cls head's and the distillation head's logits.";
        s.torch = "logits = (logits_cls + logits_dist) / 2";
        s.cell = CellRule::None;
    } else {
        s.from = {head_input(x)};
        s.title = "Logits";
        s.what = "One score per class (" + str(x.K) + "): a Linear layer on the pooled vector.";
        s.torch = "logits = model.head(pooled)";
    }
    logits_sub(x, s);
}

void d_probs(const Ctx& x, StageInfo& s) {
    s.axes = {"classes"};
    s.from = {{K::Logits, -1}};
    s.title = "Probabilities";
    s.what = "Softmax of the logits: " + str(x.K) + " probabilities that sum to 1.";
    s.torch = "probs = logits.softmax(-1)";
    s.signed_values = false;
}

// SigLIP's attention-pooling head: a learned probe attends over every token.
void map_sub(const Ctx& x, StageInfo& s) { s.box.sub = "probe, " + str(x.H) + " heads"; }  // as head.ln's

void d_head_probe(const Ctx& x, StageInfo& s) {
    s.axes = {"probe", "embedding dims"};
    s.title = "Attention-pooling probe";
    s.what = "The learned probe: one query vector that attends over all " + str(x.T) +
             " tokens to pool them (SigLIP has no cls token; this probe takes its place).";
    s.torch = "probe = model.head.probe  # (1, 1, " + str(x.D) + ")";
    map_sub(x, s);
}

void d_head_attn(const Ctx& x, StageInfo& s) {
    const std::string sd = str(x.d);
    map_sub(x, s);
    switch (s.id.kind) {
        case K::HeadAttnQ:
            s.axes = {"heads", "probe", "head dims"};
            s.from = {{K::HeadProbe, -1}};
            s.title = "Probe queries";
            s.what = "The probe's query for each of the " + str(x.H) + " heads: rows 0.." + str(x.D - 1) +
                     " of the head's in_proj.";
            s.torch = "q = F.linear(probe, in_proj_weight[:D], in_proj_bias[:D]).reshape(1, H, d).transpose(0, 1)";
            return;
        case K::HeadAttnK: case K::HeadAttnV: {
            const bool k = s.id.kind == K::HeadAttnK;
            s.axes = {"heads", "tokens", "head dims"};
            s.from = {{K::LnFinalOut, -1}};
            s.title = k ? "Keys of the tokens (pooling head)" : "Values of the tokens (pooling head)";
            s.what = std::string(k ? "Keys" : "Values") + " of every token for the pooling attention: rows " +
                     str((k ? 1 : 2) * x.D) + ".." + str((k ? 2 : 3) * x.D - 1) + " of the head's in_proj.";
            s.torch = std::string(k ? "k" : "v") + " = F.linear(x, in_proj_weight[" + (k ? "D:2D" : "2D:") +
                      "], ...).reshape(T, H, d).transpose(0, 1)";
            return;
        }
        case K::HeadAttnScores:
            s.axes = {"heads", "probe", "tokens (keys)"};
            s.from = {{K::HeadAttnQ, -1}, {K::HeadAttnK, -1}};
            s.title = "Probe attention scores";
            s.what = "How much the probe matches each token, per head: q.k / sqrt(" + sd + ").";
            s.torch = "scores = q @ k.transpose(-2, -1) / math.sqrt(" + sd + ")";
            return;
        case K::HeadAttnPattern:
            s.axes = {"heads", "probe", "tokens (keys)"};
            s.from = {{K::HeadAttnScores, -1}};
            s.title = "Probe attention";
            s.what = "Softmax over the tokens: where the probe looks, per head. This is SigLIP's counterpart of the "
                     "cls token's attention: the weights that pool the image into one vector.";
            s.torch = "attn = scores.softmax(dim=-1)";
            s.signed_values = false;
            return;
        case K::HeadAttnZ:
            s.axes = {"heads", "probe", "head dims"};
            s.from = {{K::HeadAttnPattern, -1}, {K::HeadAttnV, -1}};
            s.title = "Probe's weighted values";
            s.what = "Per head, the attention-weighted mix of the tokens' values.";
            s.torch = "z = attn @ v";
            return;
        default:  // HeadAttnOut
            s.axes = {"probe", "embedding dims"};
            s.from = {{K::HeadAttnZ, -1}};
            s.title = "Pooling attention output";
            s.what = "The heads concatenated and mixed by the head's out_proj: the pooled vector.";
            s.torch = "h = model.head.attention.out_proj(z.transpose(0, 1).reshape(1, " + str(x.D) + "))";
            return;
    }
}

void d_head_mlp(const Ctx& x, StageInfo& s) {
    map_sub(x, s);
    switch (s.id.kind) {
        case K::HeadMlpPre:
            s.axes = {"probe", "hidden units"};
            s.from = {{K::HeadLnOut, -1}};
            s.title = "Pooling head MLP hidden (before GELU)";
            s.what = "The head's MLP, first Linear: " + str(x.D) + " -> " + str(x.M) + ".";
            s.torch = "h2 = model.head.mlp.fc1(model.head.layernorm(h))";
            return;
        case K::HeadMlpPost:
            s.axes = {"probe", "hidden units"};
            s.from = {{K::HeadMlpPre, -1}};
            s.title = std::string("Pooling head MLP hidden (after ") + act_label(x.c.act) + ")";
            s.what = std::string("The head MLP's nonlinearity, ") + act_label(x.c.act) + ".";
            s.torch = x.c.act == Act::GeluTanh ? "h2 = F.gelu(h2, approximate='tanh')" : "h2 = F.gelu(h2)";
            return;
        case K::HeadMlpOut:
            s.axes = {"probe", "embedding dims"};
            s.from = {{K::HeadMlpPost, -1}};
            s.title = "Pooling head MLP output";
            s.what = "The head MLP's second Linear: back to " + str(x.D) + " dims.";
            s.torch = "model.head.mlp.fc2(h2)";
            return;
        default:  // HeadResidPost
            s.axes = {"probe", "embedding dims"};
            s.from = {{K::HeadAttnOut, -1}, {K::HeadMlpOut, -1}};
            s.title = "Pooling head output";
            s.what = "The pooled vector plus its MLP (a residual, as in a block): h = h + mlp(layernorm(h)).";
            s.torch = "h = h + model.head.mlp(model.head.layernorm(h))";
            return;
    }
}

void d_embedding(const Ctx& x, StageInfo& s) {
    s.axes = {"embedding dims"};
    s.title = "Image embedding";
    s.box.sub = str(x.E) + " dims";
    if (x.c.pooling == Pooling::Map) {
        s.from = {{K::HeadResidPost, -1}};
        s.what = "The model's output: the attention-pooled vector (" + str(x.E) + " dims). SigLIP compares it with "
                 "text embeddings; there is no classifier.";
        s.torch = "embedding = h[:, 0]";
        return;
    }
    const bool pooled_first = x.pool == Pooling::Cls && x.c.head == Head::Projection;
    const StageId in = pooled_first ? StageId{K::Pooled, -1} : StageId{K::LnFinalOut, -1};
    s.from = {in};
    if (x.c.head == Head::Projection) {
        s.what = "The model's output: the " + std::string(pooled_first ? "pooled cls row" : "normalized cls row") +
                 " projected by x @ proj (" + str(x.D) + " -> " + str(x.E) + "), CLIP's image embedding, compared "
                 "with text embeddings by cosine similarity. There is no classifier.";
        s.torch = "embedding = " + std::string(pooled_first ? "pooled" : "x[:, 0]") + " @ model.proj";
    } else {
        s.what = "The model's output: the cls token's row of the final LayerNorm (" + str(x.D) +
                 " dims). This checkpoint has no classification head; the embedding is what its own forward "
                 "returns.";
        s.torch = "embedding = x[:, 0]";
    }
}

// ---------------------------------------------------------------- the definitions

#define LN_DEFS(Site, site_name, box_, block_, row_, hook_, grad_)                                                      \
    {K::Site##Mean, site_name ".mean", block_, false, false, false, true, CellRule::None, box_, "LN", row_,        \
     hook_ " (input: x.mean(-1))", d_layernorm},                                                                    \
    {K::Site##Std, site_name ".std", block_, false, grad_, false, false, CellRule::None, box_, "LN", row_,         \
     hook_ " (input: x.std(-1))", d_layernorm},                                                                     \
    {K::Site##Normalized, site_name ".normalized", block_, grad_, grad_, false, true, CellRule::LayerNorm, box_,   \
     "LN", row_, hook_ " (input, normalized: F.layer_norm without weight and bias)", d_layernorm},                 \
    {K::Site##Out, site_name ".out", block_, grad_, grad_, false, true, CellRule::LayerNorm, box_, "LN", row_,     \
     hook_ " (output)", d_layernorm, grad_}

// In StageKind order (checked by check_stage_definitions).
const std::vector<StageDef> kDefs = {
    //  kind            pattern               block  grad   kept   head   signed cell                 box           label     row hook
    {K::Input,        "input",              false, true,  false, false, true,  CellRule::None,        "input",       "input",  0, "model.patch_embed.proj (input)", d_input},
    {K::Patches,      "patches",            false, true,  true,  false, true,  CellRule::None,        "patches",     "patches", 0, "model.patch_embed.proj (input, unfolded by the conv)", d_patches},
    {K::PatchEmbed,   "patch_embed",        false, true,  false, false, true,  CellRule::None,        "patch_embed", "patch_embed", 0, "model.patch_embed (output)", d_patch_embed},
    {K::Tokens,       "tokens",             false, true,  false, false, true,  CellRule::None,        "tokens",      "tokens", 0, "model._pos_embed (inside: torch.cat with model.cls_token)", d_tokens},
    {K::PosEmbedLearned, "pos_embed.learned", false, false, false, false, true, CellRule::None,       "embed",       "embed",  0, "model.pos_embed (the parameter, as stored)", d_pos_embed_learned},
    {K::PosEmbed,     "pos_embed",          false, true,  false, false, true,  CellRule::None,        "embed",       "embed",  0, "model._pos_embed (the position table, resized when the grid differs)", d_pos_embed},
    {K::Embed,        "embed",              false, true,  false, false, true,  CellRule::None,        "embed",       "embed",  0, "model.pos_drop (output)", d_embed, true},
    {K::EmbedKept,    "embed.kept",         false, false, false, false, true,  CellRule::None,        "dropped",     "drop",   0, "x[:, keep] after model.pos_drop (an intervention)", d_embed_kept},
    {K::WithRegisters, "with_registers",    false, false, false, false, true,  CellRule::None,        "registers",   "+reg",   0, "model.prepare_tokens_with_masks (output, dinov2)", d_with_registers},
    LN_DEFS(LnPre, "ln_pre", "ln_pre", false, 0, "model.norm_pre", false),
    LN_DEFS(Ln1, "blocks.{l}.ln1", "ln1", true, 1, "blocks[{l}].norm1", true),
    {K::AttnQ,        "blocks.{l}.attn.q",  true,  true,  true,  true,  true,  CellRule::None,        "attn", "MHA", 1, "blocks[{l}].attn.qkv (output, reshaped and split: q)", d_qkv},
    {K::AttnK,        "blocks.{l}.attn.k",  true,  true,  true,  true,  true,  CellRule::None,        "attn", "MHA", 1, "blocks[{l}].attn.qkv (output, reshaped and split: k)", d_qkv},
    {K::AttnV,        "blocks.{l}.attn.v",  true,  true,  true,  true,  true,  CellRule::None,        "attn", "MHA", 1, "blocks[{l}].attn.qkv (output, reshaped and split: v)", d_qkv},
    {K::AttnScores,   "blocks.{l}.attn.scores", true, true, false, true, true, CellRule::ScaledDot,   "attn", "MHA", 1, "blocks[{l}].attn.forward (q @ k.transpose(-2, -1) * scale)", d_scores},
    {K::AttnPattern,  "blocks.{l}.attn.pattern", true, true, true, true, false, CellRule::Softmax,    "attn", "MHA", 1, "blocks[{l}].attn.attn_drop (input, with fused_attn off)", d_pattern},
    {K::AttnZ,        "blocks.{l}.attn.z",  true,  true,  false, true,  true,  CellRule::WeightedSum, "attn", "MHA", 1, "blocks[{l}].attn.proj (input, before the heads are concatenated)", d_z, true},
    {K::AttnOut,      "blocks.{l}.attn.out", true, true,  false, false, true,  CellRule::None,        "attn", "MHA", 1, "blocks[{l}].attn (output)", d_attn_out, true},
    {K::Ls1,          "blocks.{l}.ls1",     true,  false, false, false, true,  CellRule::None,        "ls1", "LS", 1, "blocks[{l}].ls1 (output)", d_layer_scale},
    {K::ResidMid,     "blocks.{l}.resid_mid", true, true, false, false, true,  CellRule::None,        "resid_mid", "+", 1, "blocks[{l}].norm2 (input)", d_resid_mid, true},
    LN_DEFS(Ln2, "blocks.{l}.ln2", "ln2", true, 1, "blocks[{l}].norm2", true),
    {K::MlpPre,       "blocks.{l}.mlp.pre", true,  true,  true,  false, true,  CellRule::None,        "mlp", "MLP", 1, "blocks[{l}].mlp.fc1 (output)", d_mlp_pre},
    {K::MlpPost,      "blocks.{l}.mlp.post", true, true,  true,  false, true,  CellRule::Gelu,        "mlp", "MLP", 1, "blocks[{l}].mlp.act (output)", d_mlp_post, true},
    {K::MlpOut,       "blocks.{l}.mlp.out", true,  true,  false, false, true,  CellRule::None,        "mlp", "MLP", 1, "blocks[{l}].mlp (output)", d_mlp_out, true},
    {K::Ls2,          "blocks.{l}.ls2",     true,  false, false, false, true,  CellRule::None,        "ls2", "LS", 1, "blocks[{l}].ls2 (output)", d_layer_scale},
    {K::ResidPost,    "blocks.{l}.resid_post", true, true, false, false, true, CellRule::None,        "resid_post", "+", 1, "blocks[{l}] (output)", d_resid_post, true},
    LN_DEFS(LnFinal, "ln_final", "ln_final", false, 2, "model.norm (or model.fc_norm with mean pooling)", true),
    {K::Pooled,       "pooled",             false, true,  true,  false, true,  CellRule::None,        "pooled", "pool", 2, "model.head (input)", d_pooled},
    {K::PooledDist,   "pooled_dist",        false, false, false, false, true,  CellRule::None,        "pooled", "pool", 2, "model.head_dist (input)", d_pooled_dist},
    {K::LogitsCls,    "logits_cls",         false, false, false, false, true,  CellRule::HeadLinear,  "logits", "head", 2, "model.head (output)", d_logits_cls},
    {K::LogitsDist,   "logits_dist",        false, false, false, false, true,  CellRule::HeadLinear,  "logits", "head", 2, "model.head_dist (output)", d_logits_dist},
    {K::Logits,       "logits",             false, true,  true,  false, true,  CellRule::HeadLinear,  "logits", "head", 2, "model.head (output)", d_logits},
    {K::Probs,        "probs",              false, false, false, false, false, CellRule::None,        "probs", "softmax", 2, "model(x).softmax(-1)", d_probs},
    {K::HeadProbe,    "head.probe",         false, false, false, false, true,  CellRule::None,        "map", "attn pool", 2, "model.head.probe (the parameter)", d_head_probe},
    {K::HeadAttnQ,    "head.attn.q",        false, false, false, true,  true,  CellRule::None,        "map", "attn pool", 2, "model.head.attention (in_proj of the probe: q)", d_head_attn},
    {K::HeadAttnK,    "head.attn.k",        false, false, false, true,  true,  CellRule::None,        "map", "attn pool", 2, "model.head.attention (in_proj of the tokens: k)", d_head_attn},
    {K::HeadAttnV,    "head.attn.v",        false, false, false, true,  true,  CellRule::None,        "map", "attn pool", 2, "model.head.attention (in_proj of the tokens: v)", d_head_attn},
    {K::HeadAttnScores, "head.attn.scores", false, false, false, true,  true,  CellRule::None,        "map", "attn pool", 2, "model.head.attention (q @ k.T / sqrt(d))", d_head_attn},
    {K::HeadAttnPattern, "head.attn.pattern", false, false, false, true, false, CellRule::None,       "map", "attn pool", 2, "model.head.attention (attn weights, average_attn_weights=False)", d_head_attn},
    {K::HeadAttnZ,    "head.attn.z",        false, false, false, true,  true,  CellRule::None,        "map", "attn pool", 2, "model.head.attention.out_proj (input, per head)", d_head_attn},
    {K::HeadAttnOut,  "head.attn.out",      false, false, false, false, true,  CellRule::None,        "map", "attn pool", 2, "model.head.attention (output)", d_head_attn},
    LN_DEFS(HeadLn, "head.ln", "map", false, 2, "model.head.layernorm", false),
    {K::HeadMlpPre,   "head.mlp.pre",       false, false, false, false, true,  CellRule::None,        "map", "attn pool", 2, "model.head.mlp.fc1 (output)", d_head_mlp},
    {K::HeadMlpPost,  "head.mlp.post",      false, false, false, false, true,  CellRule::None,        "map", "attn pool", 2, "model.head.mlp.activation_fn (output)", d_head_mlp},
    {K::HeadMlpOut,   "head.mlp.out",       false, false, false, false, true,  CellRule::None,        "map", "attn pool", 2, "model.head.mlp (output)", d_head_mlp},
    {K::HeadResidPost, "head.resid_post",   false, false, false, false, true,  CellRule::None,        "map", "attn pool", 2, "model.head (output, before [:, 0])", d_head_mlp},
    {K::Embedding,    "embedding",          false, false, false, false, true,  CellRule::None,        "embedding", "embedding", 2, "model(x) (output)", d_embedding},
};
#undef LN_DEFS

const char* const kKindNames[] = {
#define VIT_STAGE_NAME(k) #k,
    VIT_STAGE_KINDS(VIT_STAGE_NAME)
#undef VIT_STAGE_NAME
};

std::string expand(const char* pattern, int layer) {
    std::string s = pattern;
    const size_t at = s.find("{l}");
    if (at != std::string::npos) s.replace(at, 3, std::to_string(layer));
    return s;
}

StageInfo describe(const Ctx& x, StageId id, const Shape& shape) {
    const StageDef& def = stage_def(id.kind);
    StageInfo s;
    s.id = id;
    s.layer = id.layer;
    s.shape = shape;  // from the forward pass's parts (forward_stages)
    s.name = expand(def.pattern, id.layer);
    s.hook = expand(def.hook, id.layer);
    s.per_head = def.per_head;
    s.signed_values = def.signed_values;
    s.has_grad = def.has_grad;
    s.kept = def.kept;
    s.cell = def.cell;
    s.box.id = def.box;
    s.box.label = def.box_label;
    s.box.row = def.box_row;
    s.patchable = def.patchable;
    def.describe(x, s);
    if (const auto& p = x.o.iv.patch; p && p->stage == id) {
        s.intervened = true;
        std::string rows = "every row";
        if (!p->tokens.empty()) {
            rows = "the rows of tokens";
            for (size_t i = 0; i < p->tokens.size() && i < 16; ++i) rows += (i ? ", " : " ") + std::to_string(p->tokens[i]);
            if (p->tokens.size() > 16) rows += ", ...";
        }
        s.what += " Intervention (activation patching): " + rows + " of this stage are replaced by the same stage of "
                  "a run on " + p->source + " (same options, no interventions); every later stage is computed from "
                  "the patched tensor.";
        s.torch += "  # then: x[" + std::string(p->tokens.empty() ? ":" : "tokens") + "] = run_on(" + p->source + ")['" +
                   s.name + "'][...]";
    }
    s.grad_title = "Gradient of " + s.title;
    s.grad_what = "How the chosen class's logit changes with each value of '" + s.name + "': d logit[class] / d " +
                  s.name + ", from the backward pass.";
    s.grad_torch = "logits[0, k].backward(); " + s.name + ".grad";
    return s;
}

// The fields of a config the table depends on (class names and preprocessing do not matter).
struct TableKey {
    std::vector<double> v;
    Options o;
    bool operator==(const TableKey& k) const { return v == k.v && o == k.o; }
};
// The options a table keeps: a patch's values are not part of it (only its stage, tokens, source).
Options table_options(const Options& o) {
    Options oo = o;
    if (oo.iv.patch) oo.iv.patch->values = nullptr;
    return oo;
}

TableKey key_of(const Config& c, const Options& o) {
    Options oo = table_options(o);
    oo.pooling = o.pooling_for(c);
    return {{double(c.image_size), double(c.channels), double(c.patch), double(c.width), double(c.depth),
             double(c.heads), double(c.mlp), double(c.classes), double(c.eps), double(c.family), double(c.cls_token),
             double(c.dist_token), double(c.registers), double(c.layer_scale), double(c.ln_pre), double(c.patch_bias),
             double(c.pos_no_cls), double(c.act), double(c.head), double(c.embed_dim), double(c.pos_rule),
             double(c.stored_grid())},
            oo};
}

}  // namespace

namespace {
// [site][part]: the four stages of each LayerNorm site (LnSite order, None excluded).
const StageKind kLnKinds[5][4] = {{K::Ln1Mean, K::Ln1Std, K::Ln1Normalized, K::Ln1Out},
                                  {K::Ln2Mean, K::Ln2Std, K::Ln2Normalized, K::Ln2Out},
                                  {K::LnFinalMean, K::LnFinalStd, K::LnFinalNormalized, K::LnFinalOut},
                                  {K::LnPreMean, K::LnPreStd, K::LnPreNormalized, K::LnPreOut},
                                  {K::HeadLnMean, K::HeadLnStd, K::HeadLnNormalized, K::HeadLnOut}};
}  // namespace

LnSite ln_site(StageKind k) {
    for (int s = 0; s < 5; ++s)
        for (int p = 0; p < 4; ++p)
            if (kLnKinds[s][p] == k) return LnSite(s + 1);
    return LnSite::None;
}

LnPart ln_part(StageKind k) {
    for (int s = 0; s < 5; ++s)
        for (int p = 0; p < 4; ++p)
            if (kLnKinds[s][p] == k) return LnPart(p);
    return LnPart::Out;
}

StageKind ln_kind(LnSite site, LnPart part) {
    if (site == LnSite::None) throw std::invalid_argument("ln_kind: no LayerNorm site");
    return kLnKinds[int(site) - 1][int(part)];
}

const StageDef& stage_def(StageKind k) { return kDefs[size_t(k)]; }
const std::vector<StageDef>& stage_defs() { return kDefs; }
const char* stage_kind_name(StageKind k) { return kKindNames[size_t(k)]; }

std::string stage_name(StageId id) { return expand(stage_def(id.kind).pattern, id.layer); }

std::string stage_local_name(StageId id) {
    const std::string p = stage_def(id.kind).pattern;
    return p.rfind("blocks.{l}.", 0) == 0 ? p.substr(11) : p;
}

bool before_registers(StageKind k) { return k == K::Tokens || k == K::PosEmbed || k == K::Embed; }

std::string token_label(const StageTable& t, int i, bool long_form, bool before_regs) {
    const Config& c = t.config();
    const RunDims& r = t.dims();
    const int regs = before_regs ? 0 : c.registers;
    int k = i;
    if (c.cls_token) {
        if (k == 0) return "cls";
        --k;
    }
    if (k < regs) return "reg" + std::to_string(k);
    k -= regs;
    if (c.dist_token) {
        if (k == 0) return "dist";
        --k;
    }
    if (!before_regs && r.dropped()) {  // the blocks' sequence holds the patches kept, in order
        if (k < 0 || k >= r.kept_n()) return "token " + std::to_string(i);
        k = r.kept[size_t(k)];
    }
    if (k < 0 || k >= r.N) return "token " + std::to_string(i);
    if (!long_form) return "p" + std::to_string(k);
    return "patch " + std::to_string(k) + " (row " + std::to_string(k / r.gw) + ", col " + std::to_string(k % r.gw) + ")";
}

std::string token_range_text(const StageTable& t) {
    const Config& c = t.config();
    const RunDims& r = t.dims();
    std::string s;
    int i = 0;
    auto part = [&](int n, const std::string& what) {
        if (n <= 0) return;
        s += (s.empty() ? "" : ", ") + (n == 1 ? std::to_string(i) : std::to_string(i) + ".." + std::to_string(i + n - 1)) +
             " = " + what;
        i += n;
    };
    part(c.cls_token, "cls");
    part(c.registers, c.registers == 1 ? "reg0" : "reg0..reg" + std::to_string(c.registers - 1));
    part(c.dist_token, "dist");
    if (r.dropped())
        part(r.kept_n(), "the " + std::to_string(r.kept_n()) + " patches kept of p0..p" + std::to_string(r.N - 1) + " (" +
                             std::to_string(r.N - r.kept_n()) + " dropped)");
    else
        part(r.N, "patches p0..p" + std::to_string(r.N - 1));
    return s;
}

std::optional<StageId> parse_stage_name(const std::string& name) {
    int layer = -1;
    std::string pattern = name;
    if (name.rfind("blocks.", 0) == 0) {
        size_t i = 7, j = i;
        while (j < name.size() && name[j] >= '0' && name[j] <= '9') ++j;
        if (j == i || j - i > 6 || j >= name.size() || name[j] != '.') return std::nullopt;
        if (name[i] == '0' && j - i > 1) return std::nullopt;  // no leading zeros: one name per stage
        layer = std::atoi(name.c_str() + i);
        pattern = "blocks.{l}" + name.substr(j);
    }
    for (const StageDef& d : kDefs)
        if (pattern == d.pattern && d.block == (layer >= 0)) return StageId{d.kind, layer};
    return std::nullopt;
}

StageTable::StageTable(const Config& c, const Options& o) : cfg_(c), opt_(table_options(o)) {
    cfg_.class_names.clear();
    const Ctx x(cfg_, opt_);
    dims_ = x.r;
    slot_.assign(size_t(c.depth + 1) * size_t(kStageKinds), -1);
    for (const auto& [id, shape] : forward_stages(cfg_, opt_)) {
        const int i = int(rows_.size());
        rows_.push_back(describe(x, id, shape));
        slot_[size_t(id.layer + 1) * size_t(kStageKinds) + size_t(id.kind)] = i;
        by_name_[rows_.back().name] = i;
    }
}

std::shared_ptr<const StageTable> StageTable::get(const Config& c, const Options& o) {
    // A few tables stay cached: a session moves between a model's options and back.
    static std::mutex mu;
    static std::vector<std::pair<TableKey, std::shared_ptr<const StageTable>>> cache;
    const TableKey key = key_of(c, o);
    std::lock_guard<std::mutex> g(mu);
    for (size_t i = 0; i < cache.size(); ++i)
        if (cache[i].first == key) {
            auto t = cache[i].second;
            std::rotate(cache.begin(), cache.begin() + long(i), cache.begin() + long(i) + 1);  // most recent first
            return t;
        }
    auto t = std::make_shared<const StageTable>(c, o);
    cache.insert(cache.begin(), {key, t});
    if (cache.size() > 16) cache.pop_back();
    return t;
}

int StageTable::index(StageId id) const {
    if (id.layer < -1 || id.layer >= cfg_.depth) return -1;
    return slot_[size_t(id.layer + 1) * size_t(kStageKinds) + size_t(id.kind)];
}

const StageInfo* StageTable::find(StageId id) const {
    const int i = index(id);
    return i < 0 ? nullptr : &rows_[size_t(i)];
}

const StageInfo& StageTable::info(StageId id) const {
    const int i = index(id);
    if (i < 0) throw std::out_of_range("this model has no stage '" + stage_name(id) + "'");
    return rows_[size_t(i)];
}

const StageInfo* StageTable::find(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &rows_[size_t(it->second)];
}

std::string StageTable::name(StageId id) const {
    const StageInfo* s = find(id);
    return s ? s->name : stage_name(id);
}

std::string stage_table_json(const StageTable& t) {
    static const char* const rules[] = {nullptr, "scaled_dot", "softmax", "weighted_sum", "layer_norm", "gelu",
                                        "head_linear"};
    nlohmann::json rows = nlohmann::json::array();
    for (const StageInfo& s : t) {
        nlohmann::json box{{"id", s.box.id}, {"label", s.box.label}, {"row", s.box.row}, {"sub", s.box.sub},
                           {"bug", s.box.bug}};
        nlohmann::json from = nlohmann::json::array();
        for (StageId f : s.from) from.push_back(t.name(f));
        const char* rule = rules[int(s.cell)];
        rows.push_back({{"name", s.name}, {"kind", stage_kind_name(s.id.kind)}, {"layer", s.layer}, {"shape", s.shape},
                        {"axes", s.axes}, {"from", from}, {"has_grad", s.has_grad}, {"kept", s.kept},
                        {"cell", rule ? nlohmann::json(rule) : nlohmann::json()}, {"box", box}, {"hook", s.hook},
                        {"title", s.title}, {"what", s.what}, {"torch", s.torch}, {"patchable", s.patchable},
                        {"intervened", s.intervened}});
    }
    return rows.dump(1);
}

std::vector<std::string> check_stage_definitions() { return check_stage_definitions(kDefs, backward_grad_kinds()); }

std::vector<std::string> check_stage_definitions(const std::vector<StageDef>& defs,
                                                 const std::vector<StageKind>& grads) {
    std::vector<std::string> bad;
    if (defs.size() != size_t(kStageKinds))
        bad.push_back(std::to_string(defs.size()) + " definitions for " + std::to_string(kStageKinds) +
                      " stage kinds: one definition per kind");
    for (int i = 0; i < int(defs.size()); ++i) {
        const StageDef& d = defs[size_t(i)];
        const std::string k = i < kStageKinds ? kKindNames[i] : "definition " + std::to_string(i);
        if (int(d.kind) != i) bad.push_back(k + ": definition out of StageKind order");
        if (!d.pattern || !*d.pattern) { bad.push_back(k + ": no name pattern"); continue; }
        if (!d.box || !*d.box || !d.box_label || !*d.box_label) bad.push_back(k + ": no box on the map");
        if (!d.hook || !*d.hook) bad.push_back(k + ": no PyTorch hook");
        if (!d.describe) bad.push_back(k + ": no description");
        if (d.block != (std::string(d.pattern).find("{l}") != std::string::npos))
            bad.push_back(k + ": a block stage's pattern needs {l}, and only a block stage's");
        if (&defs == &kDefs) {  // names parse through the real definitions only
            auto p = parse_stage_name(expand(d.pattern, d.block ? 3 : -1));
            if (!p || p->kind != d.kind) bad.push_back(k + ": its name does not parse back to it");
        }
        const bool in_backward = std::find(grads.begin(), grads.end(), d.kind) != grads.end();
        if (d.has_grad != in_backward)
            bad.push_back(k + (d.has_grad ? ": has_grad, but the backward pass does not write its gradient"
                                          : ": the backward pass writes a gradient the table does not declare"));
    }
    for (size_t i = 0; i < defs.size(); ++i)
        for (size_t j = i + 1; j < defs.size(); ++j)
            if (defs[i].pattern && defs[j].pattern && std::string(defs[i].pattern) == defs[j].pattern)
                bad.push_back(std::string(defs[i].pattern) + ": two kinds share this name pattern");
    return bad;
}

std::vector<std::string> check_table(const StageTable& t) {
    std::vector<std::string> bad;
    for (size_t i = 0; i < t.size(); ++i) {
        const StageInfo& s = t[i];
        if (t.index(s.id) != int(i)) bad.push_back(s.name + ": the id does not find its row");
        if (s.title.empty() || s.what.empty() || s.torch.empty()) bad.push_back(s.name + ": missing texts");
        if (s.axes.size() != s.shape.size()) bad.push_back(s.name + ": one axis label per axis");
        if (s.shape.empty() || shape_numel(s.shape) == 0) bad.push_back(s.name + ": empty shape");
        for (StageId f : s.from) {
            const int fi = t.index(f);
            if (fi < 0 || fi >= int(i)) bad.push_back(s.name + ": computed from " + stage_name(f) + ", which is not before it");
        }
        if (i > 0 && t[i - 1].box.id == s.box.id && t[i - 1].box.sub != s.box.sub && t[i - 1].layer == s.layer)
            bad.push_back(s.name + ": the stages of one map box disagree on its sub-label");
    }
    return bad;
}

}  // namespace vit
