// The DINOv3 convention: facebookresearch/dinov3's DinoVisionTransformer as torch.hub saves it
// (dinov3_vit*16_pretrain_*.pth): cls_token, storage_tokens, mask_token, patch_embed.proj, rope_embed.periods
// (a buffer), blocks.N.{norm1, attn.qkv (with its bias_mask buffer), attn.proj, ls1.gamma, norm2,
// mlp.fc1, mlp.fc2, ls2.gamma}, norm; no position table. dinov3 models/vision_transformer.py,
// layers/attention.py (LinearKMaskedBias), layers/rope_position_encoding.py. And the same model as
// transformers' DINOv3ViTModel saves it (modeling_dinov3_vit.py): embeddings.{cls_token, mask_token,
// register_tokens, patch_embeddings}, layer.N.{norm1, attention.{q,k,v,o}_proj, layer_scale1.lambda1,
// norm2, mlp.{up,down}_proj | mlp.{gate,up,down}_proj, layer_scale2.lambda1}, norm; no k_proj bias (the
// masked K bias), no periods (inv_freq is not saved: config.json's rope_theta makes them).
#include "core/io/layouts_internal.h"

namespace vit {
namespace layouts_detail {

namespace {

// What both layouts are: DINOv3's parts (no table, RoPE, LayerNorm eps 1e-5: the hub's "layernormbf16",
// transformers' DINOv3ViTConfig default), an embedding output.
Plan dinov3_plan(Family layout, const std::string& R, const std::string& blocks) {
    Plan p = start_plan(Kind::Dinov3, layout, R, R + blocks);
    p.pos_prefix = 0;
    Config& c = p.c;
    c.family = ModelFamily::Dinov3;
    c.head = Head::Identity;
    c.pos_table = false;
    c.rope = true;
    c.eps = 1e-5f;
    return p;
}

Plan plan_dinov3_hf(const Keys& k, const std::string& R, const std::string& what, const SideConfig& side) {
    Plan p = dinov3_plan(Family::HuggingFace, R, "layer.");
    Config& c = p.c;
    auto has = [&](const std::string& n) { return k.has(R + n); };
    const ModelConfigFile* cfg =
        side.config && side.config->model.kind == ConfigKind::HuggingFace ? &side.config->model : nullptr;
    if (cfg && cfg->model_type && *cfg->model_type != "dinov3_vit")
        throw FileError(side.path + " (the config beside " + what + ") says model_type '" + *cfg->model_type +
                        "', but the keys are DINOv3ViTModel's (embeddings.patch_embeddings.weight)");
    c.layer_scale = has("layer.0.layer_scale1.lambda1");
    p.eps_default_from = "transformers' DINOv3ViTConfig (layer_norm_eps 1e-5)";
    p.registers = has("embeddings.register_tokens");
    p.rope_from_base = true;
    c.rope_base = cfg && cfg->rope_theta ? float(*cfg->rope_theta) : 100.f;
    p.notes.push_back(std::string("RoPE's periods are not in the file (transformers does not save inv_freq): made from ") +
                      (cfg && cfg->rope_theta ? side.path + " rope_theta" : "DINOv3ViTConfig's default rope_theta, 100") +
                      ", as DINOv3ViTRopePositionEmbedding does");
    p.it = "DINOv3 (Hugging Face DINOv3ViTModel layout)";
    if (has("embeddings.mask_token")) p.ignore.push_back({R + "embeddings.mask_token", "embeddings.mask_token (DINOv3's placeholder for masked patches in training)"});
    const bool gated = has("layer.0.mlp.gate_proj.weight");
    if (gated) {
        if (cfg && cfg->hidden_act && *cfg->hidden_act != "silu" && *cfg->hidden_act != "swish")
            throw FileError(what + ": a gated MLP (mlp.gate_proj) with hidden_act '" + *cfg->hidden_act + "' in " + side.path +
                            ": only silu (SwiGLU) is implemented");
        c.act = Act::SwiGlu;
    }
    const bool k_bias = has("layer.0.attention.k_proj.bias"), q_bias = has("layer.0.attention.q_proj.bias");
    if (q_bias && !k_bias)
        p.notes.push_back("no k_proj bias (DINOv3's masked K bias): the K third of the q/k/v bias is zero, as the model's "
                          "nn.Linear(bias=False) adds nothing");
    p.source = [R, gated, q_bias, k_bias](const std::string& n) -> Src {
        auto [i, rest] = block_of(n);
        if (i >= 0) {
            const std::string b = R + "layer." + std::to_string(i) + ".";
            auto [mod, param] = split_param(rest);
            if (mod == "attn.qkv") {
                if (param == "bias" && !q_bias) return Src{};
                const std::string kk = param == "bias" && !k_bias ? "" : b + "attention.k_proj." + param;
                return Src{{b + "attention.q_proj." + param, kk, b + "attention.v_proj." + param}, false, ""};
            }
            if (mod == "attn.proj") return one(b + "attention.o_proj." + param);
            if (rest == "ls1.gamma") return one(b + "layer_scale1.lambda1");
            if (rest == "ls2.gamma") return one(b + "layer_scale2.lambda1");
            if (mod == "mlp.fc1")
                return gated ? Src{{b + "mlp.gate_proj." + param, b + "mlp.up_proj." + param}, false, ""} : one(b + "mlp.up_proj." + param);
            if (mod == "mlp.fc2") return one(b + "mlp.down_proj." + param);
            return one(b + rest);  // norm1, norm2
        }
        if (n == "patch_embed.proj.weight") return one(R + "embeddings.patch_embeddings.weight");
        if (n == "patch_embed.proj.bias") return one(R + "embeddings.patch_embeddings.bias");
        if (n == "cls_token") return one(R + "embeddings.cls_token");
        if (n == "reg_token") return one(R + "embeddings.register_tokens");
        if (n == "rope_embed.periods") return Src{};  // made from the base after the mapping
        return one(R + n);  // norm
    };
    return p;
}

// timm's Eva (eva.py vit_*_patch16_dinov3*, as checkpoint_filter_fn converts the hub's): reg_token, gamma_1/2,
// attn.qkv.weight with q_bias and v_bias (the K bias a zero buffer; the _qkvb models) or no bias, mlp.fc1/fc2 or
// SwiGLU mlp.fc1_g/fc1_x/fc2 (swiglu_align_to: S+, H+); the periods are not saved (RotaryEmbeddingDinoV3 makes
// them in float32 from rope_temperature 100); its default head is global_pool 'avg' (norm on every token, then the
// mean of the patch tokens), where dinov3 reads the cls token.
Plan plan_dinov3_timm(const Keys& k, const std::string& R, const std::string& what, const SideConfig& side) {
    Plan p = dinov3_plan(Family::Timm, R, "blocks.");
    Config& c = p.c;
    auto has = [&](const std::string& n) { return k.has(R + n); };
    const ModelConfigFile* timm = side.config && side.config->model.kind == ConfigKind::Timm ? &side.config->model : nullptr;
    if (has("head.weight"))
        throw FileError(what + ": a timm DINOv3 with a 'head.weight': DINOv3's classifiers are not supported; load the "
                               "backbone alone");
    c.layer_scale = has("blocks.0.gamma_1");
    p.eps_default_from = "timm's vit_*_dinov3 (LayerNorm eps 1e-5)";
    p.registers = has("reg_token");
    p.rope_from_base = true;
    c.rope_base = 100.f;
    p.notes.push_back("RoPE's periods are not in the file (timm's RotaryEmbeddingDinoV3 does not save them): made in "
                      "float32 from rope_temperature 100, as timm does (the hub's .pth holds them rounded to bfloat16)");
    // timm's global_pool: 'avg' unless the config beside it says 'token' (the cls token, as dinov3 reads it)
    const std::string gp = timm && timm->global_pool ? *timm->global_pool : "avg";
    if (gp == "token") {
        c.pooling = Pooling::Cls;
    } else if (gp == "avg") {
        c.pooling = Pooling::NormMean;
        p.notes.push_back(std::string("pooled as timm does by default (global_pool 'avg'") +
                          (timm && timm->global_pool ? ", " + side.path : "") +
                          "): the final norm on every token, then the mean of the patch tokens; dinov3 itself reads the "
                          "cls token (the pooling switch: cls token)");
    } else {
        throw FileError(side.path + " (beside " + what + ") says global_pool '" + gp +
                        "': only 'avg' and 'token' are implemented for DINOv3");
    }
    const bool qkv_bias = has("blocks.0.attn.q_bias");
    if (!qkv_bias) c.qkv_bias = false;
    const bool swiglu = has("blocks.0.mlp.fc1_g.weight");
    if (swiglu) c.act = Act::SwiGlu;
    p.it = "DINOv3 (timm layout: vit_*_dinov3)";
    p.source = [R, qkv_bias, swiglu](const std::string& n) -> Src {
        auto [i, rest] = block_of(n);
        if (i >= 0) {
            const std::string b = R + "blocks." + std::to_string(i) + ".";
            if (rest == "attn.qkv.bias")  // q_bias, the zero K bias (not saved), v_bias
                return qkv_bias ? Src{{b + "attn.q_bias", "", b + "attn.v_bias"}, false, ""} : Src{};
            if (rest == "ls1.gamma") return one(b + "gamma_1");
            if (rest == "ls2.gamma") return one(b + "gamma_2");
            if (swiglu && rest == "mlp.fc1.weight") return Src{{b + "mlp.fc1_g.weight", b + "mlp.fc1_x.weight"}, false, ""};
            if (swiglu && rest == "mlp.fc1.bias") return Src{{b + "mlp.fc1_g.bias", b + "mlp.fc1_x.bias"}, false, ""};
            return one(b + rest);
        }
        if (n == "rope_embed.periods") return Src{};  // made from the base after the mapping
        return one(R + n);  // cls_token, reg_token, patch_embed.proj.*, norm.*
    };
    return p;
}

}  // namespace

Plan plan_dinov3(const Keys& k, const std::string& R, const std::string& what, const SideConfig& side) {
    if (k.has(R + "embeddings.patch_embeddings.weight")) return plan_dinov3_hf(k, R, what, side);
    if (k.has(R + "reg_token") && !k.has(R + "storage_tokens")) return plan_dinov3_timm(k, R, what, side);
    Plan p = dinov3_plan(Family::Facebook, R, "blocks.");
    Config& c = p.c;
    auto has = [&](const std::string& n) { return k.has(R + n); };
    if (!has("rope_embed.periods"))
        throw FileError(what + ": a DINOv3 checkpoint (" + R + "storage_tokens) without " + R +
                        "rope_embed.periods: the periods of its rotary position embeddings are not in the file");
    if (has("cls_norm.weight"))
        throw FileError(what + ": a DINOv3 checkpoint with untied cls and patch norms (" + R +
                        "cls_norm.weight, untie_cls_and_patch_norms): not supported yet");
    if (has("head.weight"))
        throw FileError(what + ": a DINOv3 backbone with a 'head.weight' beside it: DINOv3's linear classifiers are "
                               "separate models; load the backbone alone");
    c.layer_scale = has("blocks.0.ls1.gamma");
    p.eps_default_from = "DINOv3's layernormbf16 (nn.LayerNorm, eps 1e-5)";
    p.registers = has("storage_tokens");
    p.it = "DINOv3 (facebookresearch/dinov3 layout, as torch.hub loads it)";
    if (has("mask_token")) p.ignore.push_back({R + "mask_token", "mask_token (DINOv3's placeholder for masked patches in training)"});
    if (has("local_cls_norm.weight"))
        p.ignore.push_back({R + "local_cls_norm.", "local_cls_norm (DINOv3 applies it to local crops in training only)"});
    // SwiGLU: dinov3 SwiGLUFFN's w1, w2 (the two halves) and w3 (the S+/H+ backbones)
    const bool swiglu = has("blocks.0.mlp.w1.weight");
    if (swiglu) c.act = Act::SwiGlu;
    const bool masked = has("blocks.0.attn.qkv.bias_mask");
    if (masked)
        p.notes.push_back("the q/k/v bias is multiplied by its bias_mask (LinearKMaskedBias): the K third is zero, as "
                          "DINOv3's forward makes it");
    p.source = [R, swiglu, masked](const std::string& n) -> Src {
        auto [i, rest] = block_of(n);
        if (i >= 0) {
            const std::string b = R + "blocks." + std::to_string(i) + ".";
            if (rest == "attn.qkv.bias" && masked) {
                Src s = one(b + rest);
                s.mask = b + "attn.qkv.bias_mask";
                return s;
            }
            if (swiglu && rest == "mlp.fc1.weight") return Src{{b + "mlp.w1.weight", b + "mlp.w2.weight"}, false, ""};
            if (swiglu && rest == "mlp.fc1.bias") return Src{{b + "mlp.w1.bias", b + "mlp.w2.bias"}, false, ""};
            if (swiglu && starts(rest, "mlp.fc2.")) return one(b + "mlp.w3." + rest.substr(8));
            return one(R + n);
        }
        if (n == "reg_token") return one(R + "storage_tokens");
        return one(R + n);
    };
    return p;
}

}  // namespace layouts_detail
}  // namespace vit
