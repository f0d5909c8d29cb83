#include "core/model/stages.h"
#include "core/model/stage_texts.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace vit {

using namespace stage_texts;

namespace {

// ---------------------------------------------------------------- the definitions

#define LN_MEAN_STD(Site, site_name, box_, block_, row_, hook_, grad_)                                                  \
    {K::Site##Mean, site_name ".mean", block_, false, false, false, true, CellRule::None, box_, "LN", row_,        \
     hook_ " (input: x.mean(-1))", d_layernorm},                                                                    \
    {K::Site##Std, site_name ".std", block_, false, grad_, false, false, CellRule::None, box_, "LN", row_,         \
     hook_ " (input: x.std(-1))", d_layernorm},
#define LN_RMS(Site, site_name, box_, block_, row_, hook_, grad_)                                                      \
    {K::Site##Rms, site_name ".rms", block_, false, grad_, false, false, CellRule::None, box_, "LN", row_,          \
     hook_ " (input: x.pow(2).mean(-1).sqrt())", d_layernorm},
#define LN_NORM_OUT(Site, site_name, box_, block_, row_, hook_, grad_)                                                 \
    {K::Site##Normalized, site_name ".normalized", block_, grad_, grad_, false, true, CellRule::LayerNorm, box_,   \
     "LN", row_, hook_ " (input, normalized: F.layer_norm without weight and bias)", d_layernorm},                 \
    {K::Site##Out, site_name ".out", block_, grad_, grad_, false, true, CellRule::LayerNorm, box_, "LN", row_,     \
     hook_ " (output)", d_layernorm, grad_}
// A LayerNorm site (mean, std, normalized, out); one that may also be an RMSNorm's (and its rms).
#define LN_DEFS(Site, site_name, box_, block_, row_, hook_, grad_)                                                     \
    LN_MEAN_STD(Site, site_name, box_, block_, row_, hook_, grad_) LN_NORM_OUT(Site, site_name, box_, block_, row_, hook_, grad_)
#define LN_RMS_DEFS(Site, site_name, box_, block_, row_, hook_, grad_)                                                 \
    LN_MEAN_STD(Site, site_name, box_, block_, row_, hook_, grad_) LN_RMS(Site, site_name, box_, block_, row_, hook_, grad_)   \
    LN_NORM_OUT(Site, site_name, box_, block_, row_, hook_, grad_)

// In StageKind order (checked by check_stage_definitions).
const std::vector<StageDef> kDefs = {
    //  kind            pattern               block  grad   kept   head   signed cell                 box           label     row hook
    {K::Input,        "input",              false, true,  false, false, true,  CellRule::None,        "input",       "input",  0, "model.patch_embed.proj (input)", d_input},
    {K::Patches,      "patches",            false, true,  true,  false, true,  CellRule::None,        "patches",     "patches", 0, "model.patch_embed.proj (input, unfolded by the conv)", d_patches},
    {K::PatchEmbed,   "patch_embed",        false, true,  false, false, true,  CellRule::None,        "patch_embed", "patch_embed", 0, "model.patch_embed (output)", d_patch_embed},
    // (an RMSNorm's alone: AIMv2's; a LayerNorm on the patch embeddings would add its mean and std)
    LN_RMS(PatchNorm, "patch_embed.norm", "patch_embed", false, 0, "model.patch_embed.norm", true)
    {K::PatchNormNormalized, "patch_embed.norm.normalized", false, true, true, false, true, CellRule::LayerNorm,
     "patch_embed", "LN", 0, "model.patch_embed.norm (input, normalized: F.layer_norm without weight and bias)", d_layernorm},
    {K::PatchNormOut, "patch_embed.norm.out", false, true, true, false, true, CellRule::LayerNorm, "patch_embed", "LN", 0,
     "model.patch_embed.norm (output)", d_layernorm},  // (not a patch point)
    {K::Tokens,       "tokens",             false, true,  false, false, true,  CellRule::None,        "tokens",      "tokens", 0, "model._pos_embed (inside: torch.cat with model.cls_token)", d_tokens},
    {K::PosEmbedLearned, "pos_embed.learned", false, false, false, false, true, CellRule::None,       "embed",       "embed",  0, "model.pos_embed (the parameter, as stored)", d_pos_embed_learned},
    {K::PosEmbed,     "pos_embed",          false, true,  false, false, true,  CellRule::None,        "embed",       "embed",  0, "model._pos_embed (the position table, resized when the grid differs)", d_pos_embed},
    {K::Embed,        "embed",              false, true,  false, false, true,  CellRule::None,        "embed",       "embed",  0, "model.pos_drop (output)", d_embed, true},
    {K::EmbedKept,    "embed.kept",         false, false, false, false, true,  CellRule::None,        "dropped",     "drop",   0, "x[:, keep] after model.pos_drop (an intervention)", d_embed_kept},
    {K::WithRegisters, "with_registers",    false, true, false, false, true,  CellRule::None,        "registers",   "+reg",   0, "model.prepare_tokens_with_masks (output, dinov2)", d_with_registers},
    LN_DEFS(LnPre, "ln_pre", "ln_pre", false, 0, "model.norm_pre", true),
    LN_RMS_DEFS(Ln1, "blocks.{l}.ln1", "ln1", true, 1, "blocks[{l}].norm1", true),
    {K::AttnQ,        "blocks.{l}.attn.q",  true,  true,  true,  true,  true,  CellRule::None,        "attn", "MHA", 1, "blocks[{l}].attn.qkv (output, reshaped and split: q)", d_qkv},
    {K::AttnK,        "blocks.{l}.attn.k",  true,  true,  true,  true,  true,  CellRule::None,        "attn", "MHA", 1, "blocks[{l}].attn.qkv (output, reshaped and split: k)", d_qkv},
    {K::AttnV,        "blocks.{l}.attn.v",  true,  true,  true,  true,  true,  CellRule::None,        "attn", "MHA", 1, "blocks[{l}].attn.qkv (output, reshaped and split: v)", d_qkv},
    {K::AttnQRot,     "blocks.{l}.attn.q_rot", true, true,  true,  true, true,  CellRule::None,        "attn", "MHA", 1, "blocks[{l}].attn.apply_rope (output: q)", d_rope},
    {K::AttnKRot,     "blocks.{l}.attn.k_rot", true, true,  true,  true, true,  CellRule::None,        "attn", "MHA", 1, "blocks[{l}].attn.apply_rope (output: k)", d_rope},
    {K::AttnScores,   "blocks.{l}.attn.scores", true, true, false, true, true, CellRule::ScaledDot,   "attn", "MHA", 1, "blocks[{l}].attn.forward (q @ k.transpose(-2, -1) * scale)", d_scores},
    {K::AttnPattern,  "blocks.{l}.attn.pattern", true, true, true, true, false, CellRule::Softmax,    "attn", "MHA", 1, "blocks[{l}].attn.attn_drop (input, with fused_attn off)", d_pattern},
    {K::AttnZ,        "blocks.{l}.attn.z",  true,  true,  false, true,  true,  CellRule::WeightedSum, "attn", "MHA", 1, "blocks[{l}].attn.proj (input, before the heads are concatenated)", d_z, true},
    {K::AttnOut,      "blocks.{l}.attn.out", true, true,  false, false, true,  CellRule::None,        "attn", "MHA", 1, "blocks[{l}].attn (output)", d_attn_out, true},
    {K::Ls1,          "blocks.{l}.ls1",     true, true, false, false, true,  CellRule::None,        "ls1", "LS", 1, "blocks[{l}].ls1 (output)", d_layer_scale},
    {K::ResidMid,     "blocks.{l}.resid_mid", true, true, false, false, true,  CellRule::None,        "resid_mid", "+", 1, "blocks[{l}].norm2 (input)", d_resid_mid, true},
    LN_RMS_DEFS(Ln2, "blocks.{l}.ln2", "ln2", true, 1, "blocks[{l}].norm2", true),
    {K::MlpPre,       "blocks.{l}.mlp.pre", true,  true,  true,  false, true,  CellRule::None,        "mlp", "MLP", 1, "blocks[{l}].mlp.fc1 (output)", d_mlp_pre},
    {K::MlpPost,      "blocks.{l}.mlp.post", true, true,  true,  false, true,  CellRule::Gelu,        "mlp", "MLP", 1, "blocks[{l}].mlp.act (output)", d_mlp_post, true},
    // EVA-02 Base/Large's LayerNorm over the hidden units (timm SwiGLU's norm, scale_mlp): kept for the backward, no
    // patch point
    {K::MlpNormMean,  "blocks.{l}.mlp.norm.mean", true, false, false, false, true, CellRule::None, "mlp", "MLP", 1,
     "blocks[{l}].mlp.norm (input: x.mean(-1))", d_layernorm},
    {K::MlpNormStd,   "blocks.{l}.mlp.norm.std", true, false, true, false, false, CellRule::None, "mlp", "MLP", 1,
     "blocks[{l}].mlp.norm (input: x.std(-1))", d_layernorm},
    {K::MlpNormNormalized, "blocks.{l}.mlp.norm.normalized", true, true, true, false, true, CellRule::LayerNorm, "mlp", "MLP",
     1, "blocks[{l}].mlp.norm (input, normalized: F.layer_norm without weight and bias)", d_layernorm},
    {K::MlpNormOut,   "blocks.{l}.mlp.norm.out", true, true, true, false, true, CellRule::LayerNorm, "mlp", "MLP", 1,
     "blocks[{l}].mlp.norm (output)", d_layernorm},
    {K::MlpOut,       "blocks.{l}.mlp.out", true,  true,  false, false, true,  CellRule::None,        "mlp", "MLP", 1, "blocks[{l}].mlp (output)", d_mlp_out, true},
    {K::Ls2,          "blocks.{l}.ls2",     true, true, false, false, true,  CellRule::None,        "ls2", "LS", 1, "blocks[{l}].ls2 (output)", d_layer_scale},
    {K::ResidPost,    "blocks.{l}.resid_post", true, true, false, false, true, CellRule::None,        "resid_post", "+", 1, "blocks[{l}] (output)", d_resid_post, true},
    LN_RMS_DEFS(LnFinal, "ln_final", "ln_final", false, 2, "model.norm (or model.fc_norm with mean pooling)", true),
    {K::Pooled,       "pooled",             false, true,  true,  false, true,  CellRule::None,        "pooled", "pool", 2, "model.head (input)", d_pooled},
    {K::PooledDist,   "pooled_dist",        false, true, false, false, true,  CellRule::None,        "pooled", "pool", 2, "model.head_dist (input)", d_pooled_dist},
    {K::LogitsCls,    "logits_cls",         false, true, false, false, true,  CellRule::HeadLinear,  "logits", "head", 2, "model.head (output)", d_logits_cls},
    {K::LogitsDist,   "logits_dist",        false, true, false, false, true,  CellRule::HeadLinear,  "logits", "head", 2, "model.head_dist (output)", d_logits_dist},
    {K::Logits,       "logits",             false, true,  true,  false, true,  CellRule::HeadLinear,  "logits", "head", 2, "model.head (output)", d_logits},
    {K::Probs,        "probs",              false, false, false, false, false, CellRule::None,        "probs", "softmax", 2, "model(x).softmax(-1)", d_probs},
    {K::HeadProbe,    "head.probe",         false, false, false, false, true,  CellRule::None,        "map", "attn pool", 2, "model.head.probe (the parameter)", d_head_probe},
    {K::HeadAttnQ,    "head.attn.q",        false, true,  false, true,  true,  CellRule::None,        "map", "attn pool", 2, "model.head.attention (in_proj of the probe: q)", d_head_attn},
    {K::HeadAttnK,    "head.attn.k",        false, true,  false, true,  true,  CellRule::None,        "map", "attn pool", 2, "model.head.attention (in_proj of the tokens: k)", d_head_attn},
    {K::HeadAttnV,    "head.attn.v",        false, true,  false, true,  true,  CellRule::None,        "map", "attn pool", 2, "model.head.attention (in_proj of the tokens: v)", d_head_attn},
    {K::HeadAttnScores, "head.attn.scores", false, true,  false, true,  true,  CellRule::None,        "map", "attn pool", 2, "model.head.attention (q @ k.T / sqrt(d))", d_head_attn},
    {K::HeadAttnPattern, "head.attn.pattern", false, true,  false, true, false, CellRule::None,       "map", "attn pool", 2, "model.head.attention (attn weights, average_attn_weights=False)", d_head_attn},
    {K::HeadAttnZ,    "head.attn.z",        false, true,  false, true,  true,  CellRule::None,        "map", "attn pool", 2, "model.head.attention.out_proj (input, per head)", d_head_attn},
    {K::HeadAttnOut,  "head.attn.out",      false, true,  false, false, true,  CellRule::None,        "map", "attn pool", 2, "model.head.attention (output)", d_head_attn},
    LN_DEFS(HeadLn, "head.ln", "map", false, 2, "model.head.layernorm", true),
    {K::HeadMlpPre,   "head.mlp.pre",       false, true,  false, false, true,  CellRule::None,        "map", "attn pool", 2, "model.head.mlp.fc1 (output)", d_head_mlp},
    {K::HeadMlpPost,  "head.mlp.post",      false, true,  false, false, true,  CellRule::None,        "map", "attn pool", 2, "model.head.mlp.activation_fn (output)", d_head_mlp},
    {K::HeadMlpOut,   "head.mlp.out",       false, true,  false, false, true,  CellRule::None,        "map", "attn pool", 2, "model.head.mlp (output)", d_head_mlp},
    {K::HeadResidPost, "head.resid_post",   false, true,  false, false, true,  CellRule::None,        "map", "attn pool", 2, "model.head (output, before [:, 0])", d_head_mlp},
    {K::Embedding,    "embedding",          false, true,  true,  false, true,  CellRule::None,        "embedding", "embedding", 2, "model(x) (output)", d_embedding},
};
#undef LN_DEFS
#undef LN_RMS_DEFS
#undef LN_MEAN_STD
#undef LN_RMS
#undef LN_NORM_OUT

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
    // (layer scale's d gamma reads the branch it scales: attn.out and mlp.out, kept only in models that have it)
    s.kept = def.kept || (x.c.layer_scale && (id.kind == StageKind::AttnOut || id.kind == StageKind::MlpOut));
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
    if (x.c.has_logits()) {
        s.grad_what = "How the chosen class's logit changes with each value of '" + s.name + "': d logit[class] / d " +
                      s.name + ", from the backward pass.";
        s.grad_torch = "logits[0, k].backward(); " + s.name + ".grad";
    } else {  // an embedding model: one number of its output is the target
        s.grad_what = "How the chosen number of the embedding changes with each value of '" + s.name +
                      "': d embedding[k] / d " + s.name + ", from the backward pass (the model has no classifier).";
        s.grad_torch = "embedding[0, k].backward(); " + s.name + ".grad";
    }
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
             double(c.stored_grid()), double(c.pos_table), double(c.rope), double(c.norm), double(c.qkv_bias),
             double(c.proj_bias), double(c.patch_norm), double(c.mlp_norm), double(c.rope_kind),
             double(c.rope_ref_grid)},
            oo};
}

}  // namespace

namespace {
// [site][part]: the stages of each norm site (LnSite order, None excluded; LnPart order); kNone where no model
// has that part there (an RMSNorm only at ln1, ln2, the final norm and on the patch embeddings, which only
// AIMv2's RMSNorm normalizes: Config::validate refuses the rest).
constexpr int kLnSites = 7, kLnParts = 5;
constexpr StageKind kNone = StageKind(255);
const StageKind kLnKinds[kLnSites][kLnParts] = {
    {K::Ln1Mean, K::Ln1Std, K::Ln1Normalized, K::Ln1Out, K::Ln1Rms},
    {K::Ln2Mean, K::Ln2Std, K::Ln2Normalized, K::Ln2Out, K::Ln2Rms},
    {K::LnFinalMean, K::LnFinalStd, K::LnFinalNormalized, K::LnFinalOut, K::LnFinalRms},
    {K::LnPreMean, K::LnPreStd, K::LnPreNormalized, K::LnPreOut, kNone},
    {K::HeadLnMean, K::HeadLnStd, K::HeadLnNormalized, K::HeadLnOut, kNone},
    {kNone, kNone, K::PatchNormNormalized, K::PatchNormOut, K::PatchNormRms},
    {K::MlpNormMean, K::MlpNormStd, K::MlpNormNormalized, K::MlpNormOut, kNone}};
}  // namespace

LnSite ln_site(StageKind k) {
    for (int s = 0; s < kLnSites; ++s)
        for (int p = 0; p < kLnParts; ++p)
            if (kLnKinds[s][p] == k) return LnSite(s + 1);
    return LnSite::None;
}

LnPart ln_part(StageKind k) {
    for (int s = 0; s < kLnSites; ++s)
        for (int p = 0; p < kLnParts; ++p)
            if (kLnKinds[s][p] == k) return LnPart(p);
    return LnPart::Out;
}

bool ln_has(LnSite site, LnPart part) { return site != LnSite::None && kLnKinds[int(site) - 1][int(part)] != kNone; }

StageKind ln_kind(LnSite site, LnPart part) {
    if (site == LnSite::None) throw std::invalid_argument("ln_kind: no LayerNorm site");
    const StageKind k = kLnKinds[int(site) - 1][int(part)];
    if (k == kNone) throw std::invalid_argument("ln_kind: no model has that part of a norm at that site");
    return k;
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
