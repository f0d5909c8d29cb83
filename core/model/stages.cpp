#include "core/model/stages.h"

#include <cstdio>
#include <cstdlib>

namespace vit {

namespace {

std::string num(float v) {  // eps as Python prints it: 1e-06, 1e-12 (%g has Python's two-digit exponent)
    char b[32];
    std::snprintf(b, sizeof b, "%g", double(v));
    return b;
}
std::string str(size_t v) { return std::to_string(v); }
const char* py(bool b) { return b ? "True" : "False"; }

struct Builder {
    const Config& c;
    const Options& o;
    std::vector<StageInfo> out;
    size_t C, S, P, G, N, T, D, H, d, M, K, CPP;
    Pooling pool;

    Builder(const Config& cfg, const Options& opt) : c(cfg), o(opt) {
        C = c.channels; S = c.image_size; P = c.patch; G = c.grid(); N = c.patches(); T = c.tokens();
        D = c.width; H = c.heads; d = c.head_dim(); M = c.mlp; K = c.classes; CPP = c.patch_dim();
        pool = o.pooling_for(c);
    }

    StageInfo& add(Stage k, std::string name, int layer, Shape shape, std::vector<std::string> axes,
                   std::vector<std::string> from, bool has_grad = true) {
        StageInfo s;
        s.kind = k; s.name = std::move(name); s.layer = layer; s.shape = std::move(shape);
        s.axes = std::move(axes); s.from = std::move(from); s.has_grad = has_grad;
        out.push_back(std::move(s));
        return out.back();
    }

    // The LayerNorm's four recorded stages; `src` is what it normalizes, `mod` its PyTorch module.
    void layernorm(const std::string& prefix, LnSite site, int layer, const std::string& src,
                   const std::string& src_desc, const std::string& mod, size_t rows) {
        const std::string eps = num(c.eps), ddof = o.unbiased ? "D-1 = " + str(D - 1) : "D = " + str(D);
        const std::string intro = "LayerNorm over the " + str(D) + " dims of each token of " + src_desc + ". ";
        auto& mean = add(Stage::LnMean, prefix + ".mean", layer, {rows}, {"tokens"}, {src}, false);
        mean.title = "LayerNorm: mean";
        mean.what = intro + "The mean of each token's " + str(D) + " values.";
        mean.torch = "mu = x.mean(-1)";
        auto& sd = add(Stage::LnStd, prefix + ".std", layer, {rows}, {"tokens"}, {src}, false);
        sd.title = "LayerNorm: std";
        sd.what = intro + "The standard deviation of each token: the squared deviations summed and divided by " +
                  ddof + (o.unbiased ? " (unbiased: the toggle is on; nn.LayerNorm itself always divides by D)"
                                     : " (biased, as nn.LayerNorm does)") +
                  ". Shown without eps; the next stage divides by sqrt(var + eps).";
        sd.torch = std::string("sigma = x.std(-1, unbiased=") + py(o.unbiased) + ")";
        sd.signed_values = false;
        auto& nz = add(Stage::LnNormalized, prefix + ".normalized", layer, {rows, D}, {"tokens", "embedding dims"},
                       {src});
        nz.title = "LayerNorm: normalized";
        nz.what = intro + "(x - mean) / sqrt(var + " + eps + "), var divided by " + ddof +
                  ": every token now has mean 0 and a standard deviation of " +
                  (o.unbiased ? "sqrt((D-1)/D) = slightly under 1 (measured with D)" : "1") + ".";
        nz.torch = "(x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=" + std::string(py(o.unbiased)) +
                   ", keepdim=True) + " + eps + ")";
        auto& lo = add(Stage::LnOut, prefix + ".out", layer, {rows, D}, {"tokens", "embedding dims"}, {src});
        lo.title = "LayerNorm: output";
        if (o.affine) {
            lo.what = intro + "normalized * gamma + beta: elementwise_affine is on, so the learned scale gamma and "
                              "shift beta (" + str(D) + " values each) are applied.";
            lo.torch = o.unbiased ? "normalized * " + mod + ".weight + " + mod + ".bias  # elementwise_affine=True"
                                  : mod + "(x)  # nn.LayerNorm(" + str(D) + ", eps=" + eps +
                                        ", elementwise_affine=True)";
        } else {
            lo.what = intro + "elementwise_affine is off: gamma and beta are ignored, so the output equals "
                              "'normalized'.";
            lo.torch = o.unbiased ? "normalized  # elementwise_affine=False"
                                  : "F.layer_norm(x, (" + str(D) + ",), eps=" + eps + ")  # nn.LayerNorm(" + str(D) +
                                        ", elementwise_affine=False)";
        }
        for (size_t i = out.size() - 4; i < out.size(); ++i) out[i].ln = site;
    }

    void build() {
        const std::string sT = str(T), sD = str(D), sN = str(N), sH = str(H), sd = str(d), sM = str(M), sP = str(P),
                          sC = str(C), sS = str(S), sK = str(K), sCPP = str(CPP);
        auto& in = add(Stage::Input, "input", -1, {C, S, S}, {"channels", "rows", "columns"}, {});
        in.title = "Input image";
        in.what = "The image as the model sees it: resized, cropped, and normalized per channel with the model's "
                  "mean and std, shape (" + sC + ", " + sS + ", " + sS + ").";
        in.torch = "x = (img - mean[:, None, None]) / std[:, None, None]";
        in.signed_values = true;

        auto& pt = add(Stage::Patches, "patches", -1, {N, CPP}, {"patches", "pixels in a patch"}, {"input"});
        pt.title = "Patches";
        pt.signed_values = true;
        if (o.bug_reshape_patches) {
            pt.title = "Patches (BUG: plain reshape)";
            pt.what = "BUG switched on: the image is reshaped to (" + sN + ", " + sCPP +
                      ") without cutting it into patches, so each row holds runs of image rows (and channels), "
                      "not a " + sP + "x" + sP + " patch. Compare with the Changes view.";
            pt.torch = "x.reshape(" + sN + ", " + sCPP + ")  # BUG: not patches";
        } else {
            pt.what = "The image cut into " + sN + " patches of " + sP + "x" + sP + " (a " + str(G) + "x" + str(G) +
                      " grid, row-major), each flattened channel-major to " + sCPP +
                      " numbers, the layout of the Conv2d weight.";
            pt.torch = "x.unfold(1, " + sP + ", " + sP + ").unfold(2, " + sP + ", " + sP +
                       ").permute(1, 2, 0, 3, 4).reshape(" + sN + ", " + sCPP + ")";
        }
        auto& pe = add(Stage::PatchEmbed, "patch_embed", -1, {N, D}, {"patches", "embedding dims"}, {"patches"});
        pe.title = "Patch embedding";
        pe.what = "Each patch mapped linearly to a " + sD + "-dim token: the same as a Conv2d with kernel = stride = " +
                  sP + ".";
        pe.torch = "nn.Conv2d(" + sC + ", " + sD + ", " + sP + ", stride=" + sP + ")(x).flatten(2).transpose(1, 2)";
        auto& tk = add(Stage::Tokens, "tokens", -1, {T, D}, {"tokens", "embedding dims"}, {"patch_embed"});
        tk.title = "cls token prepended";
        tk.what = "A learned cls token is put in front of the " + sN + " patch tokens: " + sT + " tokens." +
                  (pool == Pooling::Cls ? " Its final state is what the classifier reads."
                                        : " (This model pools the mean of the patch tokens, so the classifier does "
                                          "not read it.)");
        tk.torch = "torch.cat([cls_token, x], dim=1)";
        auto& em = add(Stage::Embed, "embed", -1, {T, D}, {"tokens", "embedding dims"}, {"tokens"});
        em.title = "Position embedding added";
        em.what = "A learned vector per position is added, so attention can tell where a patch came from. This is "
                  "the residual stream entering block 0.";
        em.torch = "x = x + pos_embed";

        for (int l = 0; l < c.depth; ++l) {
            const std::string L = std::to_string(l), p = "blocks." + L + ".";
            const std::string prev = l ? "blocks." + std::to_string(l - 1) + ".resid_post" : "embed";
            layernorm(p + "ln1", LnSite::Ln1, l, prev, "the residual stream entering block " + L,
                      "blocks[" + L + "].norm1", T);
            const char* names[3] = {"Queries", "Keys", "Values"};
            const Stage kinds[3] = {Stage::AttnQ, Stage::AttnK, Stage::AttnV};
            const char* sfx[3] = {"attn.q", "attn.k", "attn.v"};
            for (int j = 0; j < 3; ++j) {
                auto& q = add(kinds[j], p + sfx[j], l, {H, T, d}, {"heads", "tokens", "head dims"}, {p + "ln1.out"});
                q.title = names[j];
                q.per_head = true;
                q.what = std::string(names[j]) + " of every token for each of the " + sH + " heads (" + sd +
                         " dims each): rows " + str(j * D) + ".." + str((j + 1) * D - 1) +
                         " of the fused qkv Linear, split into heads.";
                q.torch = "q, k, v = blocks[" + L + "].attn.qkv(x).reshape(" + sT + ", 3, " + sH + ", " + sd +
                          ").permute(1, 2, 0, 3)";
            }
            const std::string scale = "math.sqrt(" + sd + ")";
            auto& sc = add(Stage::AttnScores, p + "attn.scores", l, {H, T, T},
                           {"heads", "tokens (queries)", "tokens (keys)"}, {p + "attn.q", p + "attn.k"});
            sc.per_head = true;
            auto& pa = add(Stage::AttnPattern, p + "attn.pattern", l, {H, T, T},
                           {"heads", "tokens (queries)", "tokens (keys)"}, {p + "attn.scores"});
            pa.per_head = true;
            pa.signed_values = false;
            if (o.bug_scale_after_softmax) {
                sc.title = "Attention scores (BUG: not scaled)";
                sc.what = "BUG switched on: q.k without the 1/sqrt(" + sd +
                          ") scale, which is applied after the softmax instead. Unscaled scores make the softmax "
                          "sharper than the model was trained with.";
                sc.torch = "scores = q @ k.transpose(-2, -1)  # BUG: no / " + scale;
                pa.title = "Attention pattern (BUG: scaled after softmax)";
                pa.what = "BUG switched on: softmax of the unscaled scores, then divided by sqrt(" + sd +
                          "): rows now sum to 1/sqrt(" + sd + ") instead of 1, and the weights are too peaked.";
                pa.torch = "attn = scores.softmax(dim=-1) / " + scale + "  # BUG: scaling after the softmax";
            } else {
                sc.title = "Attention scores";
                sc.what = "How much each query token matches each key token: q.k over the " + sd +
                          " head dims, scaled by 1/sqrt(" + sd + ") before the softmax.";
                sc.torch = "scores = q @ k.transpose(-2, -1) / " + scale;
                pa.title = "Attention pattern";
                pa.what = "Softmax over the keys: each row sums to 1 and says where that query token looks. Row 0 "
                          "is the cls token.";
                pa.torch = "attn = scores.softmax(dim=-1)";
            }
            auto& z = add(Stage::AttnZ, p + "attn.z", l, {H, T, d}, {"heads", "tokens", "head dims"},
                          {p + "attn.pattern", p + "attn.v"});
            z.title = "Attention-weighted values";
            z.per_head = true;
            z.what = "Each token's new value per head: the attention-weighted mix of all tokens' values.";
            z.torch = "z = attn @ v";
            auto& ao = add(Stage::AttnOut, p + "attn.out", l, {T, D}, {"tokens", "embedding dims"}, {p + "attn.z"});
            ao.title = "Attention output";
            ao.what = "The " + sH + " heads concatenated back to " + sD + " dims and mixed by the output projection.";
            ao.torch = "blocks[" + L + "].attn.proj(z.transpose(0, 1).reshape(" + sT + ", " + sD + "))";
            auto& rm = add(Stage::ResidMid, p + "resid_mid", l, {T, D}, {"tokens", "embedding dims"},
                           {prev, p + "attn.out"});
            rm.title = "Residual after attention";
            rm.what = "The attention output added to the block's input (the skip connection).";
            rm.torch = "x = x + attn_out";
            layernorm(p + "ln2", LnSite::Ln2, l, p + "resid_mid", "the residual stream after attention in block " + L,
                      "blocks[" + L + "].norm2", T);
            auto& pr = add(Stage::MlpPre, p + "mlp.pre", l, {T, M}, {"tokens", "hidden units"}, {p + "ln2.out"});
            pr.title = "MLP hidden (before GELU)";
            pr.what = "The MLP's first Linear: " + sD + " -> " + sM + " dims per token.";
            pr.torch = "h = blocks[" + L + "].mlp.fc1(x)";
            auto& po = add(Stage::MlpPost, p + "mlp.post", l, {T, M}, {"tokens", "hidden units"}, {p + "mlp.pre"});
            po.title = "MLP hidden (after GELU)";
            po.what = "GELU, the exact form x * Phi(x) with the normal CDF (erf), applied to every value: the MLP's "
                      "nonlinearity. Large negative inputs go to about 0, positive ones pass almost unchanged.";
            po.torch = "h = F.gelu(h)  # 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))";
            auto& mo = add(Stage::MlpOut, p + "mlp.out", l, {T, D}, {"tokens", "embedding dims"}, {p + "mlp.post"});
            mo.title = "MLP output";
            mo.what = "The MLP's second Linear: back to " + sD + " dims.";
            mo.torch = "blocks[" + L + "].mlp.fc2(h)";
            auto& rp = add(Stage::ResidPost, p + "resid_post", l, {T, D}, {"tokens", "embedding dims"},
                           {p + "resid_mid", p + "mlp.out"});
            rp.title = "Residual after the MLP";
            rp.what = l + 1 < c.depth ? "The block's output: the residual stream entering block " + std::to_string(l + 1) + "."
                                      : "The last block's output, which goes to the final LayerNorm.";
            rp.torch = "x = x + mlp_out";
        }
        const std::string last = c.depth ? "blocks." + std::to_string(c.depth - 1) + ".resid_post" : "embed";
        if (pool == Pooling::Cls) {
            layernorm("ln_final", LnSite::Final, -1, last, "the last residual stream", "model.norm", T);
            auto& po = add(Stage::Pooled, "pooled", -1, {D}, {"embedding dims"}, {"ln_final.out"});
            po.title = "Pooled (cls token)";
            po.what = "The cls token's row of the final LayerNorm: the summary of the image that the head reads.";
            po.torch = "pooled = x[:, 0]";
        } else {
            auto& po = add(Stage::Pooled, "pooled", -1, {D}, {"embedding dims"}, {last});
            po.title = "Pooled (mean of patch tokens)";
            po.what = "The mean of the " + sN + " patch tokens (the cls token is left out); the final LayerNorm "
                      "(timm's fc_norm) follows.";
            po.torch = "pooled = x[:, 1:].mean(dim=1)";
            layernorm("ln_final", LnSite::Final, -1, "pooled", "the pooled vector", "model.fc_norm", 1);
        }
        auto& lg = add(Stage::Logits, "logits", -1, {K}, {"classes"},
                       {pool == Pooling::Cls ? "pooled" : "ln_final.out"});
        lg.title = "Logits";
        lg.what = "One score per class (" + sK + "): a Linear layer on the pooled vector.";
        lg.torch = "logits = model.head(pooled)";
        auto& pb = add(Stage::Probs, "probs", -1, {K}, {"classes"}, {"logits"}, false);
        pb.title = "Probabilities";
        pb.what = "Softmax of the logits: " + sK + " probabilities that sum to 1.";
        pb.torch = "probs = logits.softmax(-1)";
        pb.signed_values = false;
    }
};

}  // namespace

std::vector<StageInfo> stage_table(const Config& c, const Options& o) {
    Builder b(c, o);
    b.build();
    return std::move(b.out);
}

int stage_layer(const std::string& name, std::string* rest) {
    if (name.rfind("blocks.", 0) != 0) { if (rest) *rest = name; return -1; }
    size_t dot = name.find('.', 7);
    if (dot == std::string::npos) { if (rest) *rest = name; return -1; }
    if (rest) *rest = name.substr(dot + 1);
    return std::atoi(name.c_str() + 7);
}

StageInfo stage_info(const std::string& name, const Config& c, const Options& o) {
    const bool grad = name.size() > 5 && name.compare(name.size() - 5, 5, ".grad") == 0;
    const std::string base = grad ? name.substr(0, name.size() - 5) : name;
    for (auto& s : stage_table(c, o)) {
        if (s.name != base) continue;
        if (!grad) return s;
        StageInfo g = s;
        g.name = name;
        g.is_grad = true;
        g.title = "Gradient of " + s.title;
        g.what = "How the chosen class's logit changes with each value of '" + base +
                 "': d logit[class] / d " + base + ", from the backward pass.";
        g.torch = "logits[0, k].backward(); " + base + ".grad";
        g.signed_values = true;
        return g;
    }
    StageInfo unknown;
    unknown.name = name;
    return unknown;
}

std::vector<std::string> stage_names(const Config& c, const Options& o) {
    std::vector<std::string> v;
    for (auto& s : stage_table(c, o)) v.push_back(s.name);
    return v;
}

std::vector<std::pair<std::string, Shape>> stage_shapes(const Config& c, const Options& o) {
    std::vector<std::pair<std::string, Shape>> v;
    for (auto& s : stage_table(c, o)) v.emplace_back(s.name, s.shape);
    return v;
}

}  // namespace vit
