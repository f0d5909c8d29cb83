// The DINOv3 convention: facebookresearch/dinov3's DinoVisionTransformer as torch.hub saves it
// (dinov3_vit*16_pretrain_*.pth): cls_token, storage_tokens, mask_token, patch_embed.proj, rope_embed.periods
// (a buffer), blocks.N.{norm1, attn.qkv (with its bias_mask buffer), attn.proj, ls1.gamma, norm2,
// mlp.fc1, mlp.fc2, ls2.gamma}, norm; no position table. dinov3 models/vision_transformer.py,
// layers/attention.py (LinearKMaskedBias), layers/rope_position_encoding.py.
#include "core/io/layouts_internal.h"

namespace vit {
namespace layouts_detail {

Plan plan_dinov3(const Keys& k, const std::string& R, const std::string& what) {
    Plan p;
    p.kind = Kind::Dinov3;
    p.layout = Family::Facebook;
    p.root = R;
    p.blocks = R + "blocks.";
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
    c.family = ModelFamily::Dinov3;
    c.head = Head::Identity;
    c.layer_scale = has("blocks.0.ls1.gamma");
    c.pos_table = false;
    c.rope = true;
    c.eps = 1e-5f;  // hub backbones: norm_layer "layernormbf16", nn.LayerNorm(eps=1e-5)
    p.eps_default_from = "DINOv3's layernormbf16 (nn.LayerNorm, eps 1e-5)";
    p.registers = has("storage_tokens");
    p.pos_prefix = 0;
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
            if (swiglu && rest == "mlp.fc1.weight") return Src{{b + "mlp.w1.weight", b + "mlp.w2.weight"}, false};
            if (swiglu && rest == "mlp.fc1.bias") return Src{{b + "mlp.w1.bias", b + "mlp.w2.bias"}, false};
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
