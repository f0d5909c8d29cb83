// The AIMv2 convention, in the two layouts its weights come in: timm's (vision_transformer.py
// aimv2_*_patch14_*: patch_embed.proj, patch_embed.norm (RmsNorm, no bias), pos_embed (the patches only: no cls
// token), blocks.N.{norm1, attn.qkv, attn.proj, norm2, mlp.fc1_g, mlp.fc1_x, mlp.fc2}, norm; no bias in the
// blocks) and Apple's (apple/ml-aim aim-v2 AIMv2VisionEncoder, the names timm's _convert_aimv2 renames:
// preprocessor.patchifier.{proj, norm}, preprocessor.pos_embed, trunk.blocks.N.{norm_1, attn.qkv, attn.proj,
// norm_2, mlp.fc1 (the gate), mlp.fc3 (the value), mlp.fc2}, trunk.post_trunk_norm).
#include "core/io/layouts_internal.h"

namespace vit {
namespace layouts_detail {

Plan plan_aimv2(const Keys& k, const std::string& R, const std::string& what) {
    const bool apple = k.has(R + "preprocessor.patchifier.proj.weight");
    Plan p = start_plan(Kind::Aimv2, apple ? Family::Apple : Family::Timm, R, R + (apple ? "trunk.blocks." : "blocks."));
    p.pos_prefix = 0;
    Config& c = p.c;
    // timm aimv2_*: class_token=False, global_pool='avg', fc_norm=False (norm on every token, then the mean),
    // RmsNorm(eps=1e-5) everywhere and on the patch embeddings, SwiGLU, qkv_bias=False, proj_bias=False
    c.family = ModelFamily::Aimv2;
    c.cls_token = false;
    c.pos_no_cls = true;
    c.pooling = Pooling::NormMean;
    c.head = Head::Identity;
    c.act = Act::SwiGlu;
    c.norm = Norm::RmsNorm;
    c.patch_norm = true;
    c.qkv_bias = false;
    c.proj_bias = false;
    c.eps = 1e-5f;
    p.eps_default_from = apple ? "Apple's AIMv2VisionEncoder (RMSNorm eps 1e-5)" : "timm's aimv2_* (RmsNorm eps 1e-5)";
    const std::string b0 = p.blocks + "0.";
    for (const char* b : {"attn.qkv.bias", "attn.proj.bias"})
        if (k.has(b0 + b))
            throw FileError(what + ": an AIMv2 checkpoint with a bias in its attention (" + b0 + b +
                            "): AIMv2 has none; not supported");
    if (k.has(R + (apple ? "trunk.post_trunk_norm.bias" : "norm.bias")))
        throw FileError(what + ": an AIMv2 checkpoint whose final norm has a bias (" + R +
                        (apple ? "trunk.post_trunk_norm.bias" : "norm.bias") + "): AIMv2's RMSNorm has none");
    if (k.any_prefix(R + "head."))
        throw FileError(what + ": an AIMv2 checkpoint with a head (" + k.containing("head.") +
                        "): the attention-pooling probes of AIMv2 are not supported; load the encoder alone");
    p.it = apple ? "AIMv2 (apple/ml-aim layout: AIMv2VisionEncoder)" : "AIMv2 (timm layout: aimv2_*)";
    p.notes.push_back("the output is the mean of the final norm's tokens (timm's global_pool 'avg'); Apple's encoder "
                      "returns every token, which is ln_final.out here");
    p.source = [R, apple](const std::string& n) -> Src {
        auto [i, rest] = block_of(n);
        auto [mod, param] = split_param(rest);
        // no biases in the blocks, none in the RMSNorms: zeros (never read for the norms)
        if (param == "bias" && n != "patch_embed.proj.bias") return Src{};
        if (i >= 0) {
            const std::string b = R + (apple ? "trunk.blocks." : "blocks.") + std::to_string(i) + ".";
            if (mod == "mlp.fc1")  // the SwiGLU's two halves, the gate first: silu(fc1_g(x)) * fc1_x(x)
                return apple ? Src{{b + "mlp.fc1.weight", b + "mlp.fc3.weight"}, false, ""}
                             : Src{{b + "mlp.fc1_g.weight", b + "mlp.fc1_x.weight"}, false, ""};
            if (apple && mod == "norm1") return one(b + "norm_1.weight");
            if (apple && mod == "norm2") return one(b + "norm_2.weight");
            return one(b + rest);  // attn.qkv, attn.proj, mlp.fc2, norm1, norm2
        }
        if (!apple) return one(R + n);
        if (n == "pos_embed") return one(R + "preprocessor.pos_embed");
        if (starts(n, "patch_embed.")) return one(R + "preprocessor.patchifier." + n.substr(12));
        if (n == "norm.weight") return one(R + "trunk.post_trunk_norm.weight");
        return one(R + n);
    };
    return p;
}

}  // namespace layouts_detail
}  // namespace vit
