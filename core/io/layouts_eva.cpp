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
        throw FileError(what + ": an Eva with EVA-02's q_bias / q_proj and " +
                        (has("norm_pre.weight") ? "norm_pre" : "an attention-pooling head") +
                        ": not a layout ViTScope knows (the Perception Encoder's attention has one fused qkv with its bias)");
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

// PE-Core's parts, whatever names its file has (plan_pe, plan_pe_meta): norm_pre, the cls token (if any) with its
// row in the table, LayerNorm eps 1e-5, PE's RoPE at the table's grid, the attention pool of 8 heads over every
// token. Refuses a pool whose MLP (pool_fc1) is not the blocks' width (block_fc1: PE-Core G's 8960 against 6144).
void pe_core_parts(const Keys& k, const std::string& pool_fc1, const std::string& block_fc1, bool cls, const std::string& what,
                   Plan& p) {
    const Array* pf1 = k.get(pool_fc1);
    const Array* bf1 = k.get(block_fc1);
    if (pf1 && bf1 && pf1->dimension() == 2 && bf1->dimension() == 2 && pf1->shape(0) != bf1->shape(0))
        throw FileError(what + ": " + pool_fc1 + " " + shape_str_of(*pf1) + " and " + block_fc1 + " " + shape_str_of(*bf1) +
                        ": an attention pool whose MLP is not the blocks' width (PE-Core G) is not implemented");
    Config& c = p.c;
    c.family = ModelFamily::Pe;
    c.cls_token = cls;
    c.pos_no_cls = !cls;
    c.ln_pre = true;
    c.patch_bias = false;
    c.eps = 1e-5f;
    c.rope = true;
    c.rope_kind = RopeKind::Pe;
    c.pooling = Pooling::Map;
    c.map_heads = 8;
    p.pos_prefix = cls ? 1 : 0;
    p.rope_ref_from_grid = true;  // every vit_pe_core_* sets ref_feat_shape to its native grid
}

// The Perception Encoder (Meta's PE-Core) as timm's Eva holds it (eva.py vit_pe_core_{tiny,small}_patch16_384,
// _base_patch16_224, _large_patch14_336: attn_type 'rope', use_pre_transformer_norm, global_pool 'map'): cls_token,
// pos_embed (with the cls row), patch_embed.proj without a bias, norm_pre, blocks.N.{norm1, attn.qkv (weight and
// bias: AttentionRope), attn.proj, norm2, mlp.fc1, mlp.fc2} (GELU), norm, attn_pool.{latent, q, kv, proj, norm,
// mlp.fc1, mlp.fc2} (AttentionPoolLatent, 8 heads, over every token) and head: the CLIP projection to the text
// space (timm's checkpoint_filter_fn turns PE's proj into head.weight and a zero head.bias; num_classes is its
// width). RoPE is not in the file: RotaryEmbeddingCat with ref_feat_shape the native grid, grid_offset 1 and 'xy'.
Plan plan_pe(const Keys& k, const std::string& R, const std::string& what) {
    Plan p = start_plan(Kind::Pe, Family::Timm, R, R + "blocks.");
    Config& c = p.c;
    auto has = [&](const std::string& n) { return k.has(R + n); };
    const std::string b0 = R + "blocks.0.";
    if (has("blocks.0.gamma_1") || has("blocks.0.attn.q_bias") || has("blocks.0.mlp.fc1_g.weight"))
        throw FileError(what + ": a Perception Encoder (norm_pre and attn_pool) with " +
                        (has("blocks.0.gamma_1") ? b0 + "gamma_1 (layer scale: PE-Lang)"
                         : has("blocks.0.attn.q_bias") ? b0 + "attn.q_bias (EVA-02's attention)" : b0 + "mlp.fc1_g (a SwiGLU)") +
                        ": only PE-Core's blocks are implemented");
    if (!has("norm.weight"))
        throw FileError(what + ": a Perception Encoder without 'norm.weight' (the norm before attn_pool): PE-Spatial and "
                               "PE-Lang are not supported; PE-Core is");
    pe_core_parts(k, R + "attn_pool.mlp.fc1.weight", b0 + "mlp.fc1.weight", has("cls_token"), what, p);
    c.patch_bias = has("patch_embed.proj.bias");
    p.eps_default_from = "timm's vit_pe_core_* (LayerNorm eps 1e-5)";
    p.head_width = 64;
    p.heads_rule = "PE's heads of 64 (timm vit_pe_core_*: num_heads = width / 64)";
    p.notes.push_back("RoPE is not in the file (timm's RotaryEmbeddingCat does not save it): made as every vit_pe_core_* "
                      "makes it, at the position table's grid (ref_feat_shape), rows and columns counted from 1 "
                      "(grid_offset 1), the column's angles first ('xy'), the patch tokens' q and k rotated in "
                      "neighbouring pairs of dims");
    p.notes.push_back("the attention pool has 8 heads (timm vit_pe_core_*: attn_pool_num_heads 8), over every token");
    const Array* hb = k.get(R + "head.bias");
    if (has("head.weight")) {
        // PE's proj (the CLIP projection) as timm's conversion saves it: head.weight, and a head.bias of zeros
        if (hb)
            for (size_t i = 0; i < hb->size(); ++i)
                if (hb->data()[i] != 0.f)
                    throw FileError(what + ": " + R + "head.bias element " + std::to_string(i) + " is " + std::to_string(hb->data()[i]) +
                                    ": a classifier after PE's attention pool is not implemented (PE's projection, as "
                                    "timm converts it, has a bias of zeros)");
        c.head = Head::Projection;
        const Array* hw = k.get(R + "head.weight");
        if (!hw || hw->dimension() != 2)
            throw FileError(what + ": " + R + "head.weight is not a matrix (PE's projection, (embedding width, width))");
        c.embed_dim = int(hw->shape(0));
        if (hb) p.ignore.push_back({R + "head.bias", "head.bias (zeros: timm's form of PE's projection, which has no bias)"});
        p.notes.push_back("head.weight is PE's projection to the text space (proj; timm's num_classes is its width): the "
                          "embedding is the attention pool's output @ head.weight.T");
    } else {
        c.head = Head::Identity;
    }
    p.it = "Perception Encoder PE-Core (timm layout: vit_pe_core_*)";
    // open_clip's PE-Core-*: the timm model as visual.trunk.* (its head the projection), the text tower beside it
    if (ends(R, "visual.trunk.")) {
        const std::string top = R.substr(0, R.size() - std::string("visual.trunk.").size());
        p.layout = Family::OpenClip;
        p.it = "Perception Encoder PE-Core (open_clip layout: PE-Core-*, timm's vit_pe_core_* as visual.trunk.*)";
        for (const char* t : {"text.", "logit_scale", "logit_bias"})
            p.ignore.push_back({top + t, "the text tower (text.*, logit_scale)"});
    }
    p.source = [R](const std::string& n) -> Src {
        if (n == "proj") return Src{{R + "head.weight"}, true, ""};
        if (n == "patch_embed.proj.bias") return Src{};
        if (n == "map.probe") return one(R + "attn_pool.latent");
        if (n == "map.attn.in_proj_weight") return Src{{R + "attn_pool.q.weight", R + "attn_pool.kv.weight"}, false, "", {1, 2}};
        if (n == "map.attn.in_proj_bias") return Src{{R + "attn_pool.q.bias", R + "attn_pool.kv.bias"}, false, "", {1, 2}};
        if (starts(n, "map.attn.out_proj.")) return one(R + "attn_pool.proj." + n.substr(18));
        if (starts(n, "map.norm.")) return one(R + "attn_pool.norm." + n.substr(9));
        if (starts(n, "map.mlp.")) return one(R + "attn_pool.mlp." + n.substr(8));
        return one(R + n);  // cls_token, pos_embed, patch_embed.proj.weight, norm_pre, blocks.*, norm
    };
    return p;
}

}  // namespace layouts_detail
}  // namespace vit
