// The EVA-02 convention: timm's Eva (eva.py eva02_tiny/small_patch14_*, as state_dict() and the hub's
// model.safetensors hold it): cls_token, pos_embed (with the cls row), patch_embed.proj, blocks.N.{norm1,
// attn.qkv.weight (no bias: attn.q_bias and attn.v_bias beside it, the K bias a zero buffer not saved), attn.proj,
// norm2, mlp.fc1 (SwiGLU packed: [gate; value], GluMlp gate_last=False), mlp.fc2}, fc_norm (global_pool 'avg') or
// norm, head. EVA-02 Base and Large (eva02_base/large_patch14_*: qkv_fused=False, scale_mlp=True): attn.q_proj (with
// a bias), attn.k_proj (without), attn.v_proj (with), and the SwiGLU unpacked with its LayerNorm: mlp.fc1_g, mlp.fc1_x,
// mlp.norm (over the hidden units), mlp.fc2. RoPE is not in the file (RotaryEmbeddingCat's buffers are not
// persistent): every eva02_* model builds it with ref_feat_shape (16, 16), temperature 10000, in_pixels=False.
#include "core/io/layouts_internal.h"

namespace vit {
namespace layouts_detail {

Plan plan_eva02(const Keys& k, const std::string& R, const std::string& what, const SideConfig& side) {
    Plan p = start_plan(Kind::Eva02, Family::Timm, R, R + "blocks.");
    Config& c = p.c;
    auto has = [&](const std::string& n) { return k.has(R + n); };
    const std::string b0 = R + "blocks.0.";
    // the EVA-02 parts not implemented yet: refused by name rather than run without them
    if (k.has(b0 + "attn.norm.weight"))
        throw FileError(what + ": an EVA-02 with a LayerNorm inside its attention (" + b0 + "attn.norm.weight: timm's "
                               "scale_attn_inner, the EVA-02 CLIP towers): not supported yet");
    if (has("norm_pre.weight") || k.any_prefix(R + "attn_pool."))
        throw FileError(what + ": an Eva with " + (has("norm_pre.weight") ? "norm_pre" : "an attention-pooling head") +
                        " (Perception Encoder): not supported yet");
    const bool unpacked = k.has(b0 + "mlp.fc1_g.weight"), separate = k.has(b0 + "attn.q_proj.weight");
    const bool mlp_norm = k.has(b0 + "mlp.norm.weight");
    const Array* fc1 = k.get(b0 + (unpacked ? "mlp.fc1_g.weight" : "mlp.fc1.weight"));
    const Array* fc2 = k.get(b0 + "mlp.fc2.weight");
    if (!fc1 || !fc2 || fc1->dimension() != 2 || fc2->dimension() != 2 ||
        fc1->shape(0) != (unpacked ? 1 : 2) * fc2->shape(1))
        throw FileError(what + ": an Eva checkpoint (" + b0 + (separate ? "attn.q_proj" : "attn.q_bias") +
                        ") whose MLP is not EVA-02's SwiGLU (" + b0 + "mlp.fc1.weight with twice the rows of "
                        "mlp.fc2.weight's columns, or mlp.fc1_g and mlp.fc1_x): EVA (v1) is not supported");
    if (mlp_norm && !unpacked)
        throw FileError(what + ": " + b0 + "mlp.norm.weight beside a packed mlp.fc1: timm's SwiGLU with a norm has fc1_g "
                               "and fc1_x; not an EVA-02 layout");
    c.family = ModelFamily::Eva02;
    c.act = Act::SwiGlu;
    c.rope = true;
    c.rope_kind = RopeKind::Eva;
    c.rope_ref_grid = 16;
    c.eps = 1e-6f;
    c.layer_scale = has("blocks.0.gamma_1");
    c.mlp_norm = mlp_norm;
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
    const bool qkv_bias = has(separate ? "blocks.0.attn.q_proj.bias" : "blocks.0.attn.q_bias");
    if (!qkv_bias) c.qkv_bias = false;
    p.it = "EVA-02 (timm layout: eva02_*)";
    if (separate) p.notes.push_back("q, k and v from three Linears (attn.q_proj, k_proj, v_proj: timm's qkv_fused=False), "
                                    "stacked into one q/k/v product; k_proj has no bias (zeros)");
    p.source = [R, qkv_bias, fc_norm, separate, unpacked](const std::string& n) -> Src {
        auto [i, rest] = block_of(n);
        if (i >= 0) {
            const std::string b = R + "blocks." + std::to_string(i) + ".";
            if (separate && rest == "attn.qkv.weight")
                return Src{{b + "attn.q_proj.weight", b + "attn.k_proj.weight", b + "attn.v_proj.weight"}, false, ""};
            if (separate && rest == "attn.qkv.bias")  // q_proj's bias, none on k_proj, v_proj's
                return qkv_bias ? Src{{b + "attn.q_proj.bias", "", b + "attn.v_proj.bias"}, false, ""} : Src{};
            if (rest == "attn.qkv.bias")  // q_bias, the zero K bias (a buffer, not saved), v_bias
                return qkv_bias ? Src{{b + "attn.q_bias", "", b + "attn.v_bias"}, false, ""} : Src{};
            if (unpacked && rest == "mlp.fc1.weight") return Src{{b + "mlp.fc1_g.weight", b + "mlp.fc1_x.weight"}, false, ""};
            if (unpacked && rest == "mlp.fc1.bias") return Src{{b + "mlp.fc1_g.bias", b + "mlp.fc1_x.bias"}, false, ""};
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
