// The EVA-02 convention: timm's Eva (eva.py eva02_tiny/small_patch14_*, as state_dict() and the hub's
// model.safetensors hold it): cls_token, pos_embed (with the cls row), patch_embed.proj, blocks.N.{norm1,
// attn.qkv.weight (no bias: attn.q_bias and attn.v_bias beside it, the K bias a zero buffer not saved), attn.proj,
// norm2, mlp.fc1 (SwiGLU packed: [gate; value], GluMlp gate_last=False), mlp.fc2}, fc_norm (global_pool 'avg') or
// norm, head. RoPE is not in the file (RotaryEmbeddingCat's buffers are not persistent): every eva02_* model builds
// it with ref_feat_shape (16, 16), temperature 10000, in_pixels=False.
#include "core/io/layouts_internal.h"

namespace vit {
namespace layouts_detail {

Plan plan_eva02(const Keys& k, const std::string& R, const std::string& what, const SideConfig& side) {
    Plan p = start_plan(Kind::Eva02, Family::Timm, R, R + "blocks.");
    Config& c = p.c;
    auto has = [&](const std::string& n) { return k.has(R + n); };
    const std::string b0 = R + "blocks.0.";
    // the EVA-02 parts not implemented yet: refused by name rather than run without them
    if (k.has(b0 + "mlp.norm.weight"))
        throw FileError(what + ": an EVA-02 with a LayerNorm inside its MLP (" + b0 + "mlp.norm.weight: timm's scale_mlp, "
                               "EVA-02 Base and Large): not supported yet (EVA-02 Tiny and Small are)");
    if (k.has(b0 + "attn.norm.weight"))
        throw FileError(what + ": an EVA-02 with a LayerNorm inside its attention (" + b0 + "attn.norm.weight: timm's "
                               "scale_attn_inner, the EVA-02 CLIP towers): not supported yet");
    if (has("norm_pre.weight") || k.any_prefix(R + "attn_pool."))
        throw FileError(what + ": an Eva with " + (has("norm_pre.weight") ? "norm_pre" : "an attention-pooling head") +
                        " (Perception Encoder): not supported yet");
    const Array* fc1 = k.get(b0 + "mlp.fc1.weight");
    const Array* fc2 = k.get(b0 + "mlp.fc2.weight");
    if (!fc1 || !fc2 || fc1->dimension() != 2 || fc2->dimension() != 2 || fc1->shape(0) != 2 * fc2->shape(1))
        throw FileError(what + ": an Eva checkpoint (" + b0 + "attn.q_bias) whose MLP is not EVA-02's packed SwiGLU (" + b0 +
                        "mlp.fc1.weight with twice the rows of mlp.fc2.weight's columns): EVA (v1) is not supported");
    c.family = ModelFamily::Eva02;
    c.act = Act::SwiGlu;
    c.rope = true;
    c.rope_kind = RopeKind::Eva;
    c.rope_ref_grid = 16;
    c.eps = 1e-6f;
    c.layer_scale = has("blocks.0.gamma_1");
    c.head = has("head.weight") ? Head::Classifier : Head::Identity;
    p.eps_default_from = "timm's Eva (LayerNorm eps 1e-6)";
    p.head_width = 64;
    p.heads_rule = "EVA-02's heads of 64 (timm eva02_*: num_heads = width / 64)";
    p.notes.push_back("RoPE is not in the file (timm's RotaryEmbeddingCat does not save it): made as every eva02_* model "
                      "makes it, for a reference grid of 16x16 (ref_feat_shape), the patch tokens' q and k rotated in "
                      "neighbouring pairs of dims");
    // timm Eva: fc_norm after the mean when global_pool is 'avg' (the default), else the norm on every token
    const ModelConfigFile* timm = side.config && side.config->model.kind == ConfigKind::Timm ? &side.config->model : nullptr;
    const bool fc_norm = has("fc_norm.weight");
    if (fc_norm && has("norm.weight"))
        throw FileError(what + ": an EVA-02 with both norm and fc_norm: a norm after the blocks and after the pooling is "
                               "not implemented");
    const std::string gp = timm && timm->global_pool ? *timm->global_pool : "avg";
    if (fc_norm) c.pooling = Pooling::Mean;
    else if (gp == "token") c.pooling = Pooling::Cls;
    else if (gp == "avg") c.pooling = Pooling::NormMean;
    else throw FileError(side.path + " (beside " + what + ") says global_pool '" + gp + "': only 'avg' and 'token' are implemented for EVA-02");
    const bool qkv_bias = has("blocks.0.attn.q_bias");
    if (!qkv_bias) c.qkv_bias = false;
    p.it = "EVA-02 (timm layout: eva02_*)";
    p.source = [R, qkv_bias, fc_norm](const std::string& n) -> Src {
        auto [i, rest] = block_of(n);
        if (i >= 0) {
            const std::string b = R + "blocks." + std::to_string(i) + ".";
            if (rest == "attn.qkv.bias")  // q_bias, the zero K bias (a buffer, not saved), v_bias
                return qkv_bias ? Src{{b + "attn.q_bias", "", b + "attn.v_bias"}, false, ""} : Src{};
            if (rest == "ls1.gamma") return one(b + "gamma_1");
            if (rest == "ls2.gamma") return one(b + "gamma_2");
            return one(b + rest);
        }
        if (fc_norm && starts(n, "norm.")) return one(R + "fc_norm." + n.substr(5));
        return one(R + n);  // cls_token, pos_embed, patch_embed.proj.*, head.*
    };
    return p;
}

}  // namespace layouts_detail
}  // namespace vit
