// The texts of the embedding's, the LayerNorms' and attention's stages (stage_texts.h).
#include <algorithm>
#include <string>

#include "core/model/stage_texts.h"

namespace vit {
namespace stage_texts {

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
    s.from = {{x.c.patch_norm ? K::PatchNormOut : K::PatchEmbed, -1}};
    const bool cls = x.c.cls_token, dist = x.c.dist_token;
    if (!cls) {
        s.title = "Tokens (no cls token)";
        s.what = "This model has no cls token: its " + str(x.N) + " tokens are the patch embeddings themselves" +
                 std::string(x.c.patch_norm ? std::string(", after their ") + norm_label(x.c.norm) : "") + ". "
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
    if (!x.c.pos_table) {
        s.from = {{K::Tokens, -1}};
        s.title = "Tokens (no position table)";
        s.what = "This model adds no position embedding here: the tokens go on unchanged. Where a patch is enters "
                 "every block's attention instead, as rotations of its query and key (RoPE: attn.q_rot, attn.k_rot).";
        if (x.stream0() == s.id) s.what += " This is the residual stream entering block 0.";
        s.torch = "x = torch.cat([cls_token, x], dim=1)  # no pos_embed: RoPE in every block";
        s.box.sub = "no pos table: RoPE";
        return;
    }
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

// RMSNorm (AIMv2; timm RmsNorm, torch nn.RMSNorm): x / sqrt(mean(x^2) + eps) * gamma, no centring, no beta.
static void d_rmsnorm(const Ctx& x, StageInfo& s, LnPart part, const std::string& src_desc, const std::string& mod) {
    const std::string D = str(x.D), eps = num(x.c.eps);
    s.box.sub = x.o.affine ? "affine" : "no affine";
    if (s.box.label == "LN") s.box.label = "RMS";  // (the patch norm sits in patch_embed's box)
    const std::string intro = "RMSNorm over the " + D + " dims of each token of " + src_desc +
                              ": unlike LayerNorm it does not subtract the mean and has no beta; it only divides by the "
                              "root mean square. ";
    const std::string unb = x.o.unbiased ? " The unbiased-std switch is on, but RMSNorm has no variance to correct: "
                                           "it changes nothing here."
                                         : "";
    s.hook = mod + (part == LnPart::Rms ? " (input: x.pow(2).mean(-1).sqrt())"
                    : part == LnPart::Normalized ? " (input, normalized: x * torch.rsqrt(x.pow(2).mean(-1) + eps))"
                                                 : " (output)");
    switch (part) {
        case LnPart::Rms:
            s.axes = {"tokens"};
            s.title = "RMSNorm: rms";
            s.what = intro + "The root mean square of each token's " + D +
                     " values, sqrt(mean(x^2)), shown without eps; the next stage divides by sqrt(mean(x^2) + " + eps +
                     ")." + unb;
            s.torch = "rms = x.pow(2).mean(-1).sqrt()";
            s.signed_values = false;
            return;
        case LnPart::Normalized:
            s.axes = kTD;
            s.title = "RMSNorm: normalized";
            s.what = intro + "x / sqrt(mean(x^2) + " + eps + "): every token now has a root mean square of 1, but "
                     "its mean is not 0 (nothing was subtracted)." + unb;
            s.torch = "x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + " + eps + ")";
            return;
        case LnPart::Out:
            s.axes = kTD;
            s.title = "RMSNorm: output";
            if (x.o.affine) {
                s.what = intro + "normalized * gamma: elementwise_affine is on, so the learned scale gamma (" + D +
                         " values) is applied; there is no shift." + unb;
                s.torch = mod + "(x)  # nn.RMSNorm(" + D + ", eps=" + eps + ")";
            } else {
                s.what = intro + "elementwise_affine is off: gamma is ignored, so the output equals 'normalized'." + unb;
                s.torch = "F.rms_norm(x, (" + D + ",), eps=" + eps + ")  # nn.RMSNorm(" + D +
                          ", elementwise_affine=False)";
            }
            return;
        default:
            return;  // (an RMSNorm records no mean or std)
    }
}

void d_layernorm(const Ctx& x, StageInfo& s) {
    const LnSite site = ln_site(s.id.kind);
    const LnPart part = ln_part(s.id.kind);
    const int l = s.id.layer;
    const std::string L = std::to_string(l), D = str(site == LnSite::Mlp ? x.M : x.D);
    // What it normalizes, and the module that does it.
    StageId src;
    std::string src_desc, mod;
    switch (site) {
        case LnSite::Mlp:
            src = {K::MlpPost, l};
            src_desc = "the MLP's hidden units (after " + std::string(act_label(x.c.act)) + ") in block " + L +
                       ", before fc2 (EVA-02's scale_mlp)";
            mod = "blocks[" + L + "].mlp.norm";
            break;
        case LnSite::Patch:
            src = {K::PatchEmbed, -1};
            src_desc = "the patch embeddings, before the position table is added";
            mod = "model.patch_embed.norm";
            break;
        case LnSite::Pre:
            src = x.R ? StageId{K::WithRegisters, -1} : x.embedded();
            src_desc = x.clip() ? "the tokens, before the first block (CLIP's ln_pre)"
                                : "the tokens, before the first block (timm's norm_pre)";
            mod = x.clip() ? "model.ln_pre" : "model.norm_pre";
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
            mod = x.c.family == ModelFamily::Pe ? "model.attn_pool.norm" : "model.head.layernorm";
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
    const std::vector<std::string> axes2 = site == LnSite::Mlp ? std::vector<std::string>{"tokens", "hidden units"} : kTD;
    if (x.c.norm == Norm::RmsNorm && site != LnSite::Head) return d_rmsnorm(x, s, part, src_desc, mod);
    s.box.sub = x.o.affine ? "affine" : "no affine";
    if (x.o.unbiased) s.box.sub += ", N-1";
    if (site == LnSite::Head) s.box.sub = "probe, " + str(x.H) + " heads";  // inside the pooling head's box
    const std::string eps = num(x.c.eps), ddof = x.o.unbiased ? "D-1 = " + str((site == LnSite::Mlp ? x.M : x.D) - 1) : "D = " + D;
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
            s.axes = axes2;
            s.title = "LayerNorm: normalized";
            s.what = intro + "(x - mean) / sqrt(var + " + eps + "), var divided by " + ddof +
                     ": every token now has mean 0 and a standard deviation of " +
                     (x.o.unbiased ? "sqrt((D-1)/D) = slightly under 1 (measured with D)" : "1") + ".";
            s.torch = "(x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=" + std::string(py(x.o.unbiased)) +
                      ", keepdim=True) + " + eps + ")";
            return;
        case LnPart::Out:
            s.axes = axes2;
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
        case LnPart::Rms:  // (a LayerNorm records no rms)
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

void d_rope(const Ctx& x, StageInfo& s) {
    const bool q = s.id.kind == K::AttnQRot;
    const std::string L = std::to_string(s.id.layer), h2 = str(x.d / 2), h4 = str(x.d / 4);
    s.axes = {"heads", "tokens", "head dims"};
    s.from = {{q ? K::AttnQ : K::AttnK, s.id.layer}};
    s.title = q ? "Queries, rotated by position (RoPE)" : "Keys, rotated by position (RoPE)";
    const std::string who = std::string(q ? "The queries" : "The keys") + " of every patch turned by angles that depend on "
                            "where the patch is: ";
    const std::string after = (x.r.prefix == 1 ? std::string("The token before the patches is not turned. ")
                                               : "The " + str(size_t(x.r.prefix)) + " tokens before the patches are not turned. ") +
                              "After both q and k are turned, q.k depends on how far apart two patches are, not on where "
                              "each one is";
    if (x.c.rope_kind != RopeKind::Dinov3) {
        const int ref = x.c.rope_ref_grid > 0 ? x.c.rope_ref_grid : 0;
        const bool pe = x.c.rope_kind == RopeKind::Pe;  // timm grid_offset 1, 'xy': counted from 1, the column first
        const std::string a1 = pe ? "column" : "row", a2 = pe ? "row" : "column";
        s.what = who + "each head's dims 2m and 2m+1 are a pair, turned by t/10000^(j/" + h4 + ") for the first " + h4 +
                 " pairs (t: the patch's " + a1 + ", j = m) and the next " + h4 + " (t: its " + a2 + ", j = m - " + h4 + ")" +
                 (pe ? std::string(", rows and columns counted from 1") : std::string()) +
                 (ref ? ", the row and column counted on a " + str(size_t(ref)) + "x" + str(size_t(ref)) +
                            " grid (the one the model was trained at) and scaled to this run's " + x.grid() + " grid"
                      : std::string()) +
                 ". " + after + ": on top of the learned position table added before the blocks, every attention sees "
                 "the patches' relative positions.";
        s.torch = "q, k = apply_rot_embed_cat(q, rope), apply_rot_embed_cat(k, rope)  # patches only: x * cos + rot(x) * "
                  "sin, rot(x) = [-x1, x0, -x3, x2, ...]";
    } else {
        s.what = who + "each head's dims i and i+" + h2 + " are a pair, turned by 2*pi*row/period for the first " + h4 +
                 " pairs and 2*pi*column/period for the next " + h4 + ", with the patch centre's row and column scaled to "
                 "-1..1 across the " + x.grid() + " grid. " + after + ": that is how this model knows positions, with no "
                 "position table.";
        s.torch = "q, k = rope_apply(q, sin, cos), rope_apply(k, sin, cos)  # patches only: x * cos + rotate_half(x) * sin";
    }
    attn_sub(x, s);
}

void d_scores(const Ctx& x, StageInfo& s) {
    const std::string sd = str(x.d), scale = "math.sqrt(" + sd + ")";
    s.axes = {"heads", "tokens (queries)", "tokens (keys)"};
    s.from = x.c.rope ? std::vector<StageId>{{K::AttnQRot, s.id.layer}, {K::AttnKRot, s.id.layer}}
                      : std::vector<StageId>{{K::AttnQ, s.id.layer}, {K::AttnK, s.id.layer}};
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

}  // namespace stage_texts
}  // namespace vit
