// The Hugging Face conventions: ViT, DeiT, Dinov2 (ViTModel-style) and the CLIP and SigLIP vision towers.
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

// ---------------------------------------------------------------- Hugging Face ViT, DeiT, Dinov2
// transformers models/vit, deit, dinov2, dinov2_with_registers: modeling_*.py
Plan plan_hf_vit(const Keys& k, const std::string& R, const SideConfig& side, const std::string& what) {
    Plan p = start_plan(Kind::HfVit, Family::HuggingFace, R, R + "encoder.layer.");
    Config& c = p.c;
    auto has = [&](const std::string& n) { return k.has(R + n); };
    const bool dist = has("embeddings.distillation_token");
    const bool dinov2 = has("encoder.layer.0.layer_scale1.lambda1") || has("embeddings.register_tokens") ||
                        has("encoder.layer.0.norm1.weight");
    const bool regs = has("embeddings.register_tokens");
    const bool swiglu = has("encoder.layer.0.mlp.weights_in.weight");
    const bool classifier = k.has("classifier.weight"), two_heads = k.has("cls_classifier.weight");
    c.pos_rule = PosRule::Hf;
    c.eps = 1e-12f;  // ViTConfig / DeiTConfig layer_norm_eps
    if (dist) {
        if (!two_heads)
            throw FileError(what + ": a Hugging Face DeiT with a distillation token but " +
                            (classifier ? std::string("one classifier (DeiTForImageClassification reads cls alone beside "
                                                      "the distillation token)") : "no classifier (DeiTModel)") +
                            ": not supported; DeiTForImageClassificationWithTeacher's checkpoints (cls_classifier and "
                            "distillation_classifier) and timm's load");
        c.family = ModelFamily::DeiT;
        c.dist_token = true;
        c.head = Head::Distilled;
        p.pos_prefix = 2;
        p.it = "DeiT distilled (Hugging Face DeiTForImageClassificationWithTeacher)";
    } else if (dinov2) {
        if (classifier)
            throw FileError(what + ": a Hugging Face Dinov2ForImageClassification: its classifier reads the cls token "
                                   "concatenated with the mean of the patch tokens (classifier.weight is (K, 2D)), which "
                                   "ViTScope's forward does not compute; load the backbone (Dinov2Model)");
        c.family = ModelFamily::Dinov2;
        c.head = Head::Identity;
        c.layer_scale = has("encoder.layer.0.layer_scale1.lambda1");
        c.eps = 1e-6f;  // the value every released Dinov2 config.json states
        p.registers = regs;
        if (swiglu) c.act = Act::SwiGlu;
        c.pos_rule = regs ? PosRule::HfAntialias : PosRule::Hf;
        p.it = regs ? "DINOv2 with registers (Hugging Face Dinov2WithRegistersModel)" : "DINOv2 (Hugging Face Dinov2Model)";
        if (has("embeddings.mask_token"))
            p.ignore.push_back({R + "embeddings.mask_token", "mask_token (DINOv2's placeholder for masked patches in training)"});
    } else if (classifier) {
        c.family = ModelFamily::ViT;
        p.it = "ViT (Hugging Face ViTForImageClassification)";
    } else {
        // ViTModel: no classifier. facebook/dino-* are ViTModels; only their name says DINO.
        c.head = Head::Identity;
        const std::set<std::string> name = words(side.name);
        if (name.count("dino")) {
            c.family = ModelFamily::Dino;
            p.it = "DINO (Hugging Face ViTModel, told by its name)";
        } else {
            c.family = ModelFamily::ViT;
            p.it = "headless ViT (Hugging Face ViTModel)";
        }
        p.ignore.push_back({R + "pooler.", "ViTModel's pooler (dense + tanh on the cls token, untrained in DINO)"});
        p.notes.push_back("the output is the final-norm cls token (last_hidden_state[:, 0]), as DINO's own code returns it");
    }
    const bool d2 = dinov2;
    p.source = [R, d2, swiglu, dist](const std::string& n) -> Src {
        const std::string e = R + "embeddings.";
        if (n == "cls_token") return one(e + "cls_token");
        if (n == "dist_token") return one(e + "distillation_token");
        if (n == "reg_token") return one(e + "register_tokens");
        if (n == "pos_embed") return one(e + "position_embeddings");
        if (starts(n, "patch_embed.proj.")) return one(e + "patch_embeddings.projection." + n.substr(17));
        auto [i, rest] = block_of(n);
        if (i >= 0) {
            const std::string b = R + "encoder.layer." + std::to_string(i) + ".";
            auto [mod, prm] = split_param(rest);
            if (mod == "attn.qkv") {
                const std::string a = b + "attention.attention.";
                return Src{{a + "query." + prm, a + "key." + prm, a + "value." + prm}, false, ""};
            }
            if (mod == "attn.proj") return one(b + "attention.output.dense." + prm);
            if (mod == "norm1") return one(b + (d2 ? "norm1." : "layernorm_before.") + prm);
            if (mod == "norm2") return one(b + (d2 ? "norm2." : "layernorm_after.") + prm);
            if (mod == "mlp.fc1") return one(b + (swiglu ? "mlp.weights_in." : d2 ? "mlp.fc1." : "intermediate.dense.") + prm);
            if (mod == "mlp.fc2") return one(b + (swiglu ? "mlp.weights_out." : d2 ? "mlp.fc2." : "output.dense.") + prm);
            if (mod == "ls1") return one(b + "layer_scale1.lambda1");
            if (mod == "ls2") return one(b + "layer_scale2.lambda1");
            return one(b + rest);
        }
        if (starts(n, "norm.")) return one(R + "layernorm." + n.substr(5));
        if (starts(n, "head.")) return one((dist ? "cls_classifier." : "classifier.") + n.substr(5));
        if (starts(n, "head_dist.")) return one("distillation_classifier." + n.substr(10));
        return one(R + n);
    };
    return p;
}

// ---------------------------------------------------------------- Hugging Face CLIP and SigLIP vision towers
// transformers models/clip/modeling_clip.py, models/siglip/modeling_siglip.py
Plan plan_hf_clip(const Keys& k, const std::string& R, const SideConfig& side, const std::string& what) {
    Plan p = start_plan(Kind::HfClip, Family::HuggingFace, R, R + "encoder.layers.");
    Config& c = p.c;
    auto has = [&](const std::string& n) { return k.has(R + n); };
    const bool clip = has("embeddings.class_embedding");
    const bool text = k.any_prefix("text_model.");
    c.pos_rule = PosRule::Hf;
    const char* tower = clip ? "the text tower (text_model.*, text_projection, logit_scale)"
                             : "the text tower (text_model.*, logit_scale, logit_bias)";
    for (const char* t : {"text_model.", "text_projection.", "logit_scale", "logit_bias"}) p.ignore.push_back({t, tower});
    p.ignore.push_back({R + "embeddings.position_ids", "position_ids (an index buffer)"});
    if (clip) {
        c.family = ModelFamily::Clip;
        c.ln_pre = true;
        c.patch_bias = false;
        c.eps = 1e-5f;  // CLIPVisionConfig layer_norm_eps
        c.pooling = Pooling::ClsThenNorm;
        const bool proj = k.has("visual_projection.weight");
        c.head = proj ? Head::Projection : Head::Identity;
        p.it = text ? "CLIP (Hugging Face CLIPModel: its vision half)"
                    : proj ? "CLIP vision tower (Hugging Face CLIPVisionModelWithProjection)" : "CLIP vision tower (Hugging Face CLIPVisionModel)";
    } else {
        c.family = ModelFamily::Siglip;
        c.cls_token = false;
        c.pos_no_cls = true;
        c.eps = 1e-6f;  // SiglipVisionConfig layer_norm_eps
        c.pooling = Pooling::Map;
        c.head = Head::Identity;
        p.pos_prefix = 0;
        p.it = text ? "SigLIP (Hugging Face SiglipModel: its vision half)" : "SigLIP vision tower (Hugging Face SiglipVisionModel)";
        if (!has("head.probe"))
            throw FileError(what + ": a SigLIP vision tower without its attention-pooling head (no " + R +
                            "head.probe: vision_use_head false): its output is the whole last hidden state, no pooled "
                            "vector; not supported");
    }
    const bool is_clip = clip;
    p.source = [R, is_clip](const std::string& n) -> Src {
        const std::string e = R + "embeddings.";
        if (n == "cls_token") return one(e + "class_embedding");
        if (n == "pos_embed") return one(e + "position_embedding.weight");
        if (n == "patch_embed.proj.weight") return one(e + "patch_embedding.weight");
        if (n == "patch_embed.proj.bias") return is_clip ? Src{} : one(e + "patch_embedding.bias");
        if (starts(n, "norm_pre.")) return one(R + "pre_layrnorm." + n.substr(9));
        auto [i, rest] = block_of(n);
        if (i >= 0) {
            const std::string b = R + "encoder.layers." + std::to_string(i) + ".";
            auto [mod, prm] = split_param(rest);
            if (mod == "attn.qkv") return Src{{b + "self_attn.q_proj." + prm, b + "self_attn.k_proj." + prm, b + "self_attn.v_proj." + prm}, false, ""};
            if (mod == "attn.proj") return one(b + "self_attn.out_proj." + prm);
            if (mod == "norm1") return one(b + "layer_norm1." + prm);
            if (mod == "norm2") return one(b + "layer_norm2." + prm);
            return one(b + rest);  // mlp.fc1, mlp.fc2
        }
        if (starts(n, "norm.")) return one(R + "post_layernorm." + n.substr(5));
        if (n == "proj") return Src{{"visual_projection.weight"}, true, ""};
        if (n == "map.probe") return one(R + "head.probe");
        if (starts(n, "map.attn.")) return one(R + "head.attention." + n.substr(9));
        if (starts(n, "map.norm.")) return one(R + "head.layernorm." + n.substr(9));
        if (starts(n, "map.mlp.")) return one(R + "head.mlp." + n.substr(8));
        return one(R + n);
    };
    return p;
}

}  // namespace layouts_detail
}  // namespace vit
