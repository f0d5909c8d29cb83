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

// The sizes and options every description reads.
struct StageContext {
    const Config& c;
    const Options& o;
    size_t C, S, P, G, N, T, D, H, d, M, K, CPP;
    int L;
    Pooling pool;
    StageContext(const Config& cfg, const Options& opt) : c(cfg), o(opt) {
        C = c.channels; S = c.image_size; P = c.patch; G = c.grid(); N = c.patches(); T = c.tokens();
        D = c.width; H = c.heads; d = c.head_dim(); M = c.mlp; K = c.classes; CPP = c.patch_dim();
        L = c.depth;
        pool = o.pooling_for(c);
    }
    StageId last_stream() const {  // the residual stream after the last block
        return L ? StageId{StageKind::ResidPost, L - 1} : StageId{StageKind::Embed, -1};
    }
};

namespace {
using Ctx = StageContext;

using K = StageKind;
const std::vector<std::string> kTD{"tokens", "embedding dims"};

// ---------------------------------------------------------------- embedding

void d_input(const Ctx& x, StageInfo& s) {
    s.shape = {x.C, x.S, x.S};
    s.axes = {"channels", "rows", "columns"};
    s.title = "Input image";
    s.what = "The image as the model sees it: resized, cropped, and normalized per channel with the model's "
             "mean and std, shape (" + str(x.C) + ", " + str(x.S) + ", " + str(x.S) + ").";
    s.torch = "x = (img - mean[:, None, None]) / std[:, None, None]";
    s.box.sub = std::string(x.C == 1 ? "gray " : x.C == 3 ? "RGB " : "") + str(x.S) + "x" + str(x.S);
}

void d_patches(const Ctx& x, StageInfo& s) {
    const std::string sN = str(x.N), sCPP = str(x.CPP), sP = str(x.P);
    s.shape = {x.N, x.CPP};
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
        s.what = "The image cut into " + sN + " patches of " + sP + "x" + sP + " (a " + str(x.G) + "x" + str(x.G) +
                 " grid, row-major), each flattened channel-major to " + sCPP +
                 " numbers, the layout of the Conv2d weight.";
        s.torch = "x.unfold(1, " + sP + ", " + sP + ").unfold(2, " + sP + ", " + sP +
                  ").permute(1, 2, 0, 3, 4).reshape(" + sN + ", " + sCPP + ")";
        s.box.sub = sP + "x" + sP + " tiles";
    }
}

void d_patch_embed(const Ctx& x, StageInfo& s) {
    s.shape = {x.N, x.D};
    s.axes = {"patches", "embedding dims"};
    s.from = {{K::Patches, -1}};
    s.title = "Patch embedding";
    s.what = "Each patch mapped linearly to a " + str(x.D) +
             "-dim token: the same as a Conv2d with kernel = stride = " + str(x.P) + ".";
    s.torch = "nn.Conv2d(" + str(x.C) + ", " + str(x.D) + ", " + str(x.P) + ", stride=" + str(x.P) +
              ")(x).flatten(2).transpose(1, 2)";
    s.box.sub = "linear to " + str(x.D);
}

void d_tokens(const Ctx& x, StageInfo& s) {
    s.shape = {x.T, x.D};
    s.axes = kTD;
    s.from = {{K::PatchEmbed, -1}};
    s.title = "cls token prepended";
    s.what = "A learned cls token is put in front of the " + str(x.N) + " patch tokens: " + str(x.T) + " tokens." +
             (x.pool == Pooling::Cls ? " Its final state is what the classifier reads."
                                     : " (This model pools the mean of the patch tokens, so the classifier does "
                                       "not read it.)");
    s.torch = "torch.cat([cls_token, x], dim=1)";
    s.box.sub = "learned";
}

void d_pos_embed(const Ctx& x, StageInfo& s) {
    s.shape = {x.T, x.D};
    s.axes = kTD;
    s.title = "Position embeddings";
    s.what = "The learned position embeddings: one " + str(x.D) + "-dim vector per token position (row 0 for the "
             "cls token, then the " + str(x.N) + " patches of the " + str(x.G) + "x" + str(x.G) +
             " grid, row-major). The next stage adds them to the tokens; without them the model could not tell "
             "where a patch came from.";
    s.torch = "model.pos_embed[0]  # (" + str(x.T) + ", " + str(x.D) + ")";
    s.box.sub = "learned";
}

void d_embed(const Ctx& x, StageInfo& s) {
    s.shape = {x.T, x.D};
    s.axes = kTD;
    s.from = {{K::Tokens, -1}, {K::PosEmbed, -1}};
    s.title = "Position embedding added";
    s.what = "A learned vector per position is added, so attention can tell where a patch came from. This is "
             "the residual stream entering block 0.";
    s.torch = "x = x + pos_embed";
    s.box.sub = "learned";
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
    size_t rows = x.T;
    switch (site) {
        case LnSite::Ln1:
            src = l ? StageId{K::ResidPost, l - 1} : StageId{K::Embed, -1};
            src_desc = "the residual stream entering block " + L;
            mod = "blocks[" + L + "].norm1";
            break;
        case LnSite::Ln2:
            src = {K::ResidMid, l};
            src_desc = "the residual stream after attention in block " + L;
            mod = "blocks[" + L + "].norm2";
            break;
        default:
            if (x.pool == Pooling::Cls) {
                src = x.last_stream();
                src_desc = "the last residual stream";
                mod = "model.norm";
            } else {
                src = {K::Pooled, -1};
                src_desc = "the pooled vector";
                mod = "model.fc_norm";
                rows = 1;
            }
    }
    s.from = {src};
    s.ln = site;
    s.box.sub = x.o.affine ? "affine" : "no affine";
    if (x.o.unbiased) s.box.sub += ", N-1";
    const std::string eps = num(x.c.eps), ddof = x.o.unbiased ? "D-1 = " + str(x.D - 1) : "D = " + D;
    const std::string intro = "LayerNorm over the " + D + " dims of each token of " + src_desc + ". ";
    switch (part) {
        case LnPart::Mean:
            s.shape = {rows};
            s.axes = {"tokens"};
            s.title = "LayerNorm: mean";
            s.what = intro + "The mean of each token's " + D + " values.";
            s.torch = "mu = x.mean(-1)";
            return;
        case LnPart::Std:
            s.shape = {rows};
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
            s.shape = {rows, x.D};
            s.axes = kTD;
            s.title = "LayerNorm: normalized";
            s.what = intro + "(x - mean) / sqrt(var + " + eps + "), var divided by " + ddof +
                     ": every token now has mean 0 and a standard deviation of " +
                     (x.o.unbiased ? "sqrt((D-1)/D) = slightly under 1 (measured with D)" : "1") + ".";
            s.torch = "(x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=" + std::string(py(x.o.unbiased)) +
                      ", keepdim=True) + " + eps + ")";
            return;
        case LnPart::Out:
            s.shape = {rows, x.D};
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
}

void d_qkv(const Ctx& x, StageInfo& s) {
    const int j = s.id.kind == K::AttnQ ? 0 : s.id.kind == K::AttnK ? 1 : 2;
    const char* names[3] = {"Queries", "Keys", "Values"};
    const std::string L = std::to_string(s.id.layer);
    s.shape = {x.H, x.T, x.d};
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
    s.shape = {x.H, x.T, x.T};
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
    s.shape = {x.H, x.T, x.T};
    s.axes = {"heads", "tokens (queries)", "tokens (keys)"};
    s.from = {{K::AttnScores, s.id.layer}};
    if (x.o.bug_scale_after_softmax) {
        s.title = "Attention pattern (BUG: scaled after softmax)";
        s.what = "BUG switched on: softmax of the unscaled scores, then divided by sqrt(" + sd +
                 "): rows now sum to 1/sqrt(" + sd + ") instead of 1, and the weights are too peaked.";
        s.torch = "attn = scores.softmax(dim=-1) / " + scale + "  # BUG: scaling after the softmax";
    } else {
        s.title = "Attention pattern";
        s.what = "Softmax over the keys: each row sums to 1 and says where that query token looks. Row 0 "
                 "is the cls token.";
        s.torch = "attn = scores.softmax(dim=-1)";
    }
    attn_sub(x, s);
}

void d_z(const Ctx& x, StageInfo& s) {
    s.shape = {x.H, x.T, x.d};
    s.axes = {"heads", "tokens", "head dims"};
    s.from = {{K::AttnPattern, s.id.layer}, {K::AttnV, s.id.layer}};
    s.title = "Attention-weighted values";
    s.what = "Each token's new value per head: the attention-weighted mix of all tokens' values.";
    s.torch = "z = attn @ v";
    attn_sub(x, s);
}

void d_attn_out(const Ctx& x, StageInfo& s) {
    const std::string L = std::to_string(s.id.layer);
    s.shape = {x.T, x.D};
    s.axes = kTD;
    s.from = {{K::AttnZ, s.id.layer}};
    s.title = "Attention output";
    s.what = "The " + str(x.H) + " heads concatenated back to " + str(x.D) + " dims and mixed by the output projection.";
    s.torch = "blocks[" + L + "].attn.proj(z.transpose(0, 1).reshape(" + str(x.T) + ", " + str(x.D) + "))";
    attn_sub(x, s);
}

void d_resid_mid(const Ctx& x, StageInfo& s) {
    const int l = s.id.layer;
    s.shape = {x.T, x.D};
    s.axes = kTD;
    s.from = {l ? StageId{K::ResidPost, l - 1} : StageId{K::Embed, -1}, {K::AttnOut, l}};
    s.title = "Residual after attention";
    s.what = "The attention output added to the block's input (the skip connection).";
    s.torch = "x = x + attn_out";
    s.box.sub = "residual";
}

// ---------------------------------------------------------------- MLP

void mlp_sub(const Ctx& x, StageInfo& s) { s.box.sub = "GELU, " + str(x.M) + " hidden"; }

void d_mlp_pre(const Ctx& x, StageInfo& s) {
    s.shape = {x.T, x.M};
    s.axes = {"tokens", "hidden units"};
    s.from = {{K::Ln2Out, s.id.layer}};
    s.title = "MLP hidden (before GELU)";
    s.what = "The MLP's first Linear: " + str(x.D) + " -> " + str(x.M) + " dims per token.";
    s.torch = "h = blocks[" + std::to_string(s.id.layer) + "].mlp.fc1(x)";
    mlp_sub(x, s);
}

void d_mlp_post(const Ctx& x, StageInfo& s) {
    s.shape = {x.T, x.M};
    s.axes = {"tokens", "hidden units"};
    s.from = {{K::MlpPre, s.id.layer}};
    s.title = "MLP hidden (after GELU)";
    s.what = "GELU, the exact form x * Phi(x) with the normal CDF (erf), applied to every value: the MLP's "
             "nonlinearity. Large negative inputs go to about 0, positive ones pass almost unchanged.";
    s.torch = "h = F.gelu(h)  # 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))";
    mlp_sub(x, s);
}

void d_mlp_out(const Ctx& x, StageInfo& s) {
    s.shape = {x.T, x.D};
    s.axes = kTD;
    s.from = {{K::MlpPost, s.id.layer}};
    s.title = "MLP output";
    s.what = "The MLP's second Linear: back to " + str(x.D) + " dims.";
    s.torch = "blocks[" + std::to_string(s.id.layer) + "].mlp.fc2(h)";
    mlp_sub(x, s);
}

void d_resid_post(const Ctx& x, StageInfo& s) {
    const int l = s.id.layer;
    s.shape = {x.T, x.D};
    s.axes = kTD;
    s.from = {{K::ResidMid, l}, {K::MlpOut, l}};
    s.title = "Residual after the MLP";
    s.what = l + 1 < x.L ? "The block's output: the residual stream entering block " + std::to_string(l + 1) + "."
                         : "The last block's output, which goes to the final LayerNorm.";
    s.torch = "x = x + mlp_out";
    s.box.sub = "residual";
}

// ---------------------------------------------------------------- the head

void d_pooled(const Ctx& x, StageInfo& s) {
    s.shape = {x.D};
    s.axes = {"embedding dims"};
    if (x.pool == Pooling::Cls) {
        s.from = {{K::LnFinalOut, -1}};
        s.title = "Pooled (cls token)";
        s.what = "The cls token's row of the final LayerNorm: the summary of the image that the head reads.";
        s.torch = "pooled = x[:, 0]";
        s.box.sub = "cls token";
    } else {
        s.from = {x.last_stream()};
        s.title = "Pooled (mean of patch tokens)";
        s.what = "The mean of the " + str(x.N) + " patch tokens (the cls token is left out); the final LayerNorm "
                 "(timm's fc_norm) follows.";
        s.torch = "pooled = x[:, 1:].mean(dim=1)";
        s.box.sub = "mean of patches";
    }
}

void d_logits(const Ctx& x, StageInfo& s) {
    s.shape = {x.K};
    s.axes = {"classes"};
    s.from = {x.pool == Pooling::Cls ? StageId{K::Pooled, -1} : StageId{K::LnFinalOut, -1}};
    s.title = "Logits";
    s.what = "One score per class (" + str(x.K) + "): a Linear layer on the pooled vector.";
    s.torch = "logits = model.head(pooled)";
    s.box.sub = str(x.K) + " classes";
}

void d_probs(const Ctx& x, StageInfo& s) {
    s.shape = {x.K};
    s.axes = {"classes"};
    s.from = {{K::Logits, -1}};
    s.title = "Probabilities";
    s.what = "Softmax of the logits: " + str(x.K) + " probabilities that sum to 1.";
    s.torch = "probs = logits.softmax(-1)";
    s.signed_values = false;
}

// ---------------------------------------------------------------- the definitions

#define LN_DEFS(Site, site_name, box_, block_, row_, hook_)                                                               \
    {K::Site##Mean, site_name ".mean", block_, false, false, false, true, CellRule::None, box_, "LN", row_,        \
     hook_ " (input: x.mean(-1))", d_layernorm},                                                                    \
    {K::Site##Std, site_name ".std", block_, false, true, false, false, CellRule::None, box_, "LN", row_,          \
     hook_ " (input: x.std(-1))", d_layernorm},                                                                     \
    {K::Site##Normalized, site_name ".normalized", block_, true, true, false, true, CellRule::LayerNorm, box_,     \
     "LN", row_, hook_ " (input, normalized: F.layer_norm without weight and bias)", d_layernorm},                 \
    {K::Site##Out, site_name ".out", block_, true, true, false, true, CellRule::LayerNorm, box_, "LN", row_,       \
     hook_ " (output)", d_layernorm}

// In StageKind order (checked by check_stage_definitions).
const std::vector<StageDef> kDefs = {
    //  kind            pattern               block  grad   kept   head   signed cell                 box           label     row hook
    {K::Input,        "input",              false, true,  false, false, true,  CellRule::None,        "input",       "image",  0, "model.patch_embed.proj (input)", d_input},
    {K::Patches,      "patches",            false, true,  true,  false, true,  CellRule::None,        "patches",     "patches", 0, "model.patch_embed.proj (input, unfolded by the conv)", d_patches},
    {K::PatchEmbed,   "patch_embed",        false, true,  false, false, true,  CellRule::None,        "patch_embed", "embed",  0, "model.patch_embed (output)", d_patch_embed},
    {K::Tokens,       "tokens",             false, true,  false, false, true,  CellRule::None,        "tokens",      "+cls",   0, "model._pos_embed (inside: torch.cat with model.cls_token)", d_tokens},
    {K::PosEmbed,     "pos_embed",          false, true,  false, false, true,  CellRule::None,        "embed",       "+pos",   0, "model.pos_embed (the parameter)", d_pos_embed},
    {K::Embed,        "embed",              false, true,  false, false, true,  CellRule::None,        "embed",       "+pos",   0, "model.pos_drop (output)", d_embed},
    LN_DEFS(Ln1, "blocks.{l}.ln1", "ln1", true, 1, "blocks[{l}].norm1"),
    {K::AttnQ,        "blocks.{l}.attn.q",  true,  true,  true,  true,  true,  CellRule::None,        "attn", "MHA", 1, "blocks[{l}].attn.qkv (output, reshaped and split: q)", d_qkv},
    {K::AttnK,        "blocks.{l}.attn.k",  true,  true,  true,  true,  true,  CellRule::None,        "attn", "MHA", 1, "blocks[{l}].attn.qkv (output, reshaped and split: k)", d_qkv},
    {K::AttnV,        "blocks.{l}.attn.v",  true,  true,  true,  true,  true,  CellRule::None,        "attn", "MHA", 1, "blocks[{l}].attn.qkv (output, reshaped and split: v)", d_qkv},
    {K::AttnScores,   "blocks.{l}.attn.scores", true, true, false, true, true, CellRule::ScaledDot,   "attn", "MHA", 1, "blocks[{l}].attn.forward (q @ k.transpose(-2, -1) * scale)", d_scores},
    {K::AttnPattern,  "blocks.{l}.attn.pattern", true, true, true, true, false, CellRule::Softmax,    "attn", "MHA", 1, "blocks[{l}].attn.attn_drop (input, with fused_attn off)", d_pattern},
    {K::AttnZ,        "blocks.{l}.attn.z",  true,  true,  false, true,  true,  CellRule::WeightedSum, "attn", "MHA", 1, "blocks[{l}].attn.proj (input, before the heads are concatenated)", d_z},
    {K::AttnOut,      "blocks.{l}.attn.out", true, true,  false, false, true,  CellRule::None,        "attn", "MHA", 1, "blocks[{l}].attn (output)", d_attn_out},
    {K::ResidMid,     "blocks.{l}.resid_mid", true, true, false, false, true,  CellRule::None,        "resid_mid", "+", 1, "blocks[{l}].norm2 (input)", d_resid_mid},
    LN_DEFS(Ln2, "blocks.{l}.ln2", "ln2", true, 1, "blocks[{l}].norm2"),
    {K::MlpPre,       "blocks.{l}.mlp.pre", true,  true,  true,  false, true,  CellRule::None,        "mlp", "MLP", 1, "blocks[{l}].mlp.fc1 (output)", d_mlp_pre},
    {K::MlpPost,      "blocks.{l}.mlp.post", true, true,  true,  false, true,  CellRule::Gelu,        "mlp", "MLP", 1, "blocks[{l}].mlp.act (output)", d_mlp_post},
    {K::MlpOut,       "blocks.{l}.mlp.out", true,  true,  false, false, true,  CellRule::None,        "mlp", "MLP", 1, "blocks[{l}].mlp (output)", d_mlp_out},
    {K::ResidPost,    "blocks.{l}.resid_post", true, true, false, false, true, CellRule::None,        "resid_post", "+", 1, "blocks[{l}] (output)", d_resid_post},
    LN_DEFS(LnFinal, "ln_final", "ln_final", false, 2, "model.norm (or model.fc_norm with mean pooling)"),
    {K::Pooled,       "pooled",             false, true,  true,  false, true,  CellRule::None,        "pooled", "pool", 2, "model.head (input)", d_pooled},
    {K::Logits,       "logits",             false, true,  true,  false, true,  CellRule::HeadLinear,  "logits", "head", 2, "model.head (output)", d_logits},
    {K::Probs,        "probs",              false, false, false, false, false, CellRule::None,        "probs", "softmax", 2, "model(x).softmax(-1)", d_probs},
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

// The order a forward pass records its stages: the architecture, written once.
std::vector<StageId> sequence(const Ctx& x) {
    std::vector<StageId> v;
    auto add = [&](StageKind k, int l = -1) { v.push_back({k, l}); };
    auto ln = [&](LnSite site, int l) {
        for (LnPart p : {LnPart::Mean, LnPart::Std, LnPart::Normalized, LnPart::Out}) add(ln_kind(site, p), l);
    };
    for (StageKind k : {K::Input, K::Patches, K::PatchEmbed, K::Tokens, K::PosEmbed, K::Embed}) add(k);
    for (int l = 0; l < x.L; ++l) {
        ln(LnSite::Ln1, l);
        for (StageKind k : {K::AttnQ, K::AttnK, K::AttnV, K::AttnScores, K::AttnPattern, K::AttnZ, K::AttnOut,
                            K::ResidMid})
            add(k, l);
        ln(LnSite::Ln2, l);
        for (StageKind k : {K::MlpPre, K::MlpPost, K::MlpOut, K::ResidPost}) add(k, l);
    }
    if (x.pool == Pooling::Cls) {
        ln(LnSite::Final, -1);
        add(K::Pooled);
    } else {
        add(K::Pooled);
        ln(LnSite::Final, -1);
    }
    add(K::Logits);
    add(K::Probs);
    return v;
}

StageInfo describe(const Ctx& x, StageId id) {
    const StageDef& def = stage_def(id.kind);
    StageInfo s;
    s.id = id;
    s.layer = id.layer;
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
    def.describe(x, s);
    s.grad_title = "Gradient of " + s.title;
    s.grad_what = "How the chosen class's logit changes with each value of '" + s.name + "': d logit[class] / d " +
                  s.name + ", from the backward pass.";
    s.grad_torch = "logits[0, k].backward(); " + s.name + ".grad";
    return s;
}

// The fields of a config the table depends on (class names and preprocessing do not matter).
struct TableKey {
    int S, C, P, D, L, H, M, K;
    float eps;
    Options o;
    bool operator==(const TableKey& k) const {
        return S == k.S && C == k.C && P == k.P && D == k.D && L == k.L && H == k.H && M == k.M && K == k.K &&
               eps == k.eps && o == k.o;
    }
};
TableKey key_of(const Config& c, const Options& o) {
    Options oo = o;
    oo.pooling = o.pooling_for(c);
    return {c.image_size, c.channels, c.patch, c.width, c.depth, c.heads, c.mlp, c.classes, c.eps, oo};
}

}  // namespace

LnSite ln_site(StageKind k) {
    switch (k) {
        case K::Ln1Mean: case K::Ln1Std: case K::Ln1Normalized: case K::Ln1Out: return LnSite::Ln1;
        case K::Ln2Mean: case K::Ln2Std: case K::Ln2Normalized: case K::Ln2Out: return LnSite::Ln2;
        case K::LnFinalMean: case K::LnFinalStd: case K::LnFinalNormalized: case K::LnFinalOut: return LnSite::Final;
        default: return LnSite::None;
    }
}

LnPart ln_part(StageKind k) {
    switch (k) {
        case K::Ln1Mean: case K::Ln2Mean: case K::LnFinalMean: return LnPart::Mean;
        case K::Ln1Std: case K::Ln2Std: case K::LnFinalStd: return LnPart::Std;
        case K::Ln1Normalized: case K::Ln2Normalized: case K::LnFinalNormalized: return LnPart::Normalized;
        default: return LnPart::Out;
    }
}

StageKind ln_kind(LnSite site, LnPart part) {
    static const StageKind k[3][4] = {{K::Ln1Mean, K::Ln1Std, K::Ln1Normalized, K::Ln1Out},
                                      {K::Ln2Mean, K::Ln2Std, K::Ln2Normalized, K::Ln2Out},
                                      {K::LnFinalMean, K::LnFinalStd, K::LnFinalNormalized, K::LnFinalOut}};
    if (site == LnSite::None) throw std::invalid_argument("ln_kind: no LayerNorm site");
    return k[int(site) - 1][int(part)];
}

const StageDef& stage_def(StageKind k) { return kDefs[size_t(k)]; }
const std::vector<StageDef>& stage_defs() { return kDefs; }
const char* stage_kind_name(StageKind k) { return kKindNames[size_t(k)]; }

std::string stage_name(StageId id) { return expand(stage_def(id.kind).pattern, id.layer); }

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

StageTable::StageTable(const Config& c, const Options& o) : cfg_(c), opt_(o) {
    cfg_.class_names.clear();
    const Ctx x(cfg_, opt_);
    slot_.assign(size_t(c.depth + 1) * size_t(kStageKinds), -1);
    for (StageId id : sequence(x)) {
        const int i = int(rows_.size());
        rows_.push_back(describe(x, id));
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
                        {"title", s.title}, {"what", s.what}, {"torch", s.torch}});
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
