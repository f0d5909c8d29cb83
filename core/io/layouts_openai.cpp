// The OpenAI CLIP and open_clip convention (visual.*, TorchScript archives read as data).
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <sstream>

#include "core/io/layouts_internal.h"

namespace vit {
namespace layouts_detail {

// ---------------------------------------------------------------- OpenAI CLIP and open_clip
namespace {
// The image tower's names in OpenAI's convention (CLIP's and Meta's PE releases): V is "visual." under the root.
Src openai_visual_source(const std::string& V, const std::string& n) {
    if (n == "cls_token") return one(V + "class_embedding");
    if (n == "pos_embed") return one(V + "positional_embedding");
    if (n == "patch_embed.proj.weight") return one(V + "conv1.weight");
    if (n == "patch_embed.proj.bias") return Src{};
    if (starts(n, "norm_pre.")) return one(V + "ln_pre." + n.substr(9));
    auto [i, rest] = block_of(n);
    if (i >= 0) {
        const std::string b = V + "transformer.resblocks." + std::to_string(i) + ".";
        auto [mod, prm] = split_param(rest);
        if (mod == "attn.qkv") return one(b + "attn.in_proj_" + prm);
        if (mod == "attn.proj") return one(b + "attn.out_proj." + prm);
        if (mod == "norm1") return one(b + "ln_1." + prm);
        if (mod == "norm2") return one(b + "ln_2." + prm);
        if (mod == "mlp.fc1") return one(b + "mlp.c_fc." + prm);
        if (mod == "mlp.fc2") return one(b + "mlp.c_proj." + prm);
        if (mod == "ls1") return one(b + "ls_1.gamma");
        if (mod == "ls2") return one(b + "ls_2.gamma");
        return one(b + rest);
    }
    if (starts(n, "norm.")) return one(V + "ln_post." + n.substr(5));
    return one(V + n);  // proj
}
}  // namespace

// openai/CLIP clip/model.py (VisionTransformer, build_model), open_clip transformer.py
Plan plan_openai(const Keys& k, const std::string& R, const Meta& meta, const SideConfig& side, const std::string& what) {
    const std::string V = R + "visual.";
    if (k.has(V + "attn_pool.probe")) return plan_pe_meta(k, R, what);
    Plan p = start_plan(Kind::OpenAI, Family::Timm, R, V + "transformer.resblocks.");  // the family: set below
    Config& c = p.c;
    c.family = ModelFamily::Clip;
    c.ln_pre = k.has(V + "ln_pre.weight");
    c.patch_bias = false;
    c.eps = 1e-5f;  // torch's LayerNorm default, which both use
    c.pos_rule = PosRule::OpenClip;
    c.head = k.has(V + "proj") ? Head::Projection : Head::Identity;
    c.layer_scale = k.has(p.blocks + "0.ls_1.gamma");
    const bool archive = meta.count("pth.torchscript") != 0;
    const bool buffers = k.has(R + "input_resolution") || k.has(R + "context_length") || k.has(R + "vocab_size");
    const bool openai = archive || buffers;
    const ModelConfigFile* oc = side.open_clip ? &side.open_clip->model
                                : side.config && side.config->model.kind == ConfigKind::OpenClip ? &side.config->model : nullptr;
    const std::string oc_path = side.open_clip ? side.open_clip_path : side.path;
    // The text tower and the archive's integer buffers are not part of the image model.
    for (const char* t : {"token_embedding.", "positional_embedding", "transformer.", "ln_final.", "text_projection",
                          "logit_scale", "attn_mask"})
        p.ignore.push_back({R + t, "the text tower (token_embedding, positional_embedding, transformer.*, ln_final, "
                                   "text_projection, logit_scale)"});
    for (const char* b : {"input_resolution", "context_length", "vocab_size"})
        p.ignore.push_back({R + b, "the archive's integer buffers (input_resolution, context_length, vocab_size)"});
    // QuickGELU or GELU: not in the weights.
    std::string act_from;
    const std::set<std::string> name = words(side.name);
    const ModelConfigFile* hf = side.config && side.config->model.kind == ConfigKind::HuggingFace ? &side.config->model : nullptr;
    if (oc) {
        if (oc->timm_model_name)
            throw FileError(oc_path + ": model_cfg.vision_cfg.timm_model_name '" + *oc->timm_model_name +
                            "': an open_clip model with a timm image tower, which " + what + " does not hold");
        if (oc->pool_type && *oc->pool_type != "tok")
            throw FileError(oc_path + ": model_cfg.vision_cfg.pool_type '" + *oc->pool_type +
                            "': open_clip's pooling other than the cls token is not supported");
        c.act = oc->quick_gelu.value_or(false) ? Act::QuickGelu : Act::Gelu;
        act_from = oc_path + " model_cfg.quick_gelu" + (oc->quick_gelu ? std::string("") : " (absent: open_clip's nn.GELU)");
        c.pooling = oc->final_ln_after_pool.value_or(false) ? Pooling::ClsThenNorm : Pooling::Cls;
        if (oc->layer_norm_eps) c.eps = float(*oc->layer_norm_eps);
        p.layout = Family::OpenClip;
        p.it = std::string("CLIP (open_clip layout, ") + (c.act == Act::QuickGelu ? "QuickGELU" : "GELU") + " from its config)";
    } else if (openai) {
        c.act = Act::QuickGelu;
        act_from = "OpenAI's CLIP (QuickGELU in every model of openai/CLIP's clip/model.py)";
        c.pooling = Pooling::ClsThenNorm;
        p.layout = Family::OpenAI;
        p.it = archive ? "CLIP (OpenAI's TorchScript archive, read as data: its code is never run)"
                       : "CLIP (OpenAI layout: the state dict of a released archive)";
    } else if (name.count("quickgelu") || side.name.find("quick_gelu") != std::string::npos) {
        c.act = Act::QuickGelu;
        c.pooling = Pooling::Cls;
        act_from = "the name '" + side.name + "' (open_clip's -quickgelu models)";
        p.layout = Family::OpenClip;
        p.it = "CLIP (open_clip layout, QuickGELU from its name)";
    } else if (hf && hf->hidden_act) {
        const ActKind a = activation_of(*hf);
        if (a != ActKind::GeluErf && a != ActKind::QuickGelu)
            throw FileError(side.path + ": hidden_act '" + *hf->hidden_act + "' is not an activation of OpenAI's or open_clip's CLIP");
        c.act = a == ActKind::QuickGelu ? Act::QuickGelu : Act::Gelu;
        c.pooling = Pooling::Cls;
        act_from = side.path + " " + (hf->from_vision_config ? "vision_config." : "") + "hidden_act";
        p.layout = Family::OpenClip;
        p.it = "CLIP (open_clip layout, the activation from the Hugging Face config.json beside it)";
    } else {
        throw FileError(what + ": a CLIP image tower in the OpenAI / open_clip layout (visual.*), but its MLP's activation "
                               "is not recorded in the weights: QuickGELU (OpenAI's models, open_clip's -quickgelu ones) or "
                               "GELU (open_clip's own). Put the model's open_clip_config.json beside it (model_cfg.quick_gelu) "
                               "or keep its released name (open_clip: ...-quickgelu...)");
    }
    p.notes.push_back("the MLP's activation (" + std::string(act_label(c.act)) + ") is not in the weights: from " + act_from);
    p.clip_rule = true;
    p.source = [V](const std::string& n) -> Src { return openai_visual_source(V, n); };
    return p;
}

// Meta's Perception Encoder release (facebookresearch/perception_models: PE-Core-*.pt, the CLIP model's state dict, the
// names timm's _convert_pe renames): visual.{conv1 (no bias), class_embedding, positional_embedding, ln_pre,
// transformer.resblocks.N.{ln_1, attn.in_proj_weight/bias, attn.out_proj, ln_2, mlp.c_fc, mlp.c_proj}, ln_post,
// attn_pool.{probe, attn.in_proj_weight/bias, attn.out_proj, layernorm, mlp.c_fc, mlp.c_proj}, proj}; the text tower
// beside it. The same model as timm's vit_pe_core_* (plan_pe): RoPE not in the file, made as timm makes it.
Plan plan_pe_meta(const Keys& k, const std::string& R, const std::string& what) {
    const std::string V = R + "visual.";
    Plan p = start_plan(Kind::OpenAI, Family::Facebook, R, V + "transformer.resblocks.");
    Config& c = p.c;
    auto has = [&](const std::string& n) { return k.has(V + n); };
    if (has("transformer.resblocks.0.ls_1.gamma") || !has("ln_post.weight"))
        throw FileError(what + ": a Perception Encoder with " +
                        (has("transformer.resblocks.0.ls_1.gamma") ? V + "transformer.resblocks.0.ls_1.gamma (layer scale: PE-Lang)"
                                                                    : "no " + V + "ln_post.weight (PE-Spatial)") +
                        ": only PE-Core is implemented");
    pe_core_parts(k, V + "attn_pool.mlp.c_fc.weight", V + "transformer.resblocks.0.mlp.c_fc.weight", has("class_embedding"),
                  what, p);
    c.head = has("proj") ? Head::Projection : Head::Identity;
    p.clip_rule = true;  // heads of 64, as every PE-Core
    p.eps_default_from = "PE's LayerNorm (eps 1e-5)";
    p.it = "Perception Encoder PE-Core (Meta's release: PE-Core-*.pt, the CLIP model's visual.*)";
    for (const char* t : {"token_embedding.", "positional_embedding", "transformer.", "ln_final.", "text_projection",
                          "logit_scale", "logit_bias", "attn_mask"})
        p.ignore.push_back({R + t, "the text tower (token_embedding, positional_embedding, transformer.*, ln_final, "
                                   "text_projection, logit_scale)"});
    p.notes.push_back("RoPE is not in the file: made as timm makes it for these weights (vit_pe_core_*: at the position "
                      "table's grid, rows and columns counted from 1, the column's angles first, neighbouring dims paired)");
    p.notes.push_back("the attention pool has 8 heads (PE-Core's attn_pool), over every token; the position table is resized "
                      "by timm's rule at another size");
    p.source = [V](const std::string& n) -> Src {
        if (n == "map.probe") return one(V + "attn_pool.probe");
        if (starts(n, "map.attn.")) return one(V + "attn_pool.attn." + n.substr(9));  // in_proj_*, out_proj.*
        if (starts(n, "map.norm.")) return one(V + "attn_pool.layernorm." + n.substr(9));
        if (starts(n, "map.mlp.fc1.")) return one(V + "attn_pool.mlp.c_fc." + n.substr(12));
        if (starts(n, "map.mlp.fc2.")) return one(V + "attn_pool.mlp.c_proj." + n.substr(12));
        return openai_visual_source(V, n);
    };
    return p;
}

}  // namespace layouts_detail
}  // namespace vit
