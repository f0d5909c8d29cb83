#!/usr/bin/python3
"""Meta's Perception Encoder PE-Core in timm's layout (timm's Eva as vit_pe_core_tiny_patch16_384 /
vit_pe_core_small_patch16_384 / vit_pe_core_base_patch16_224 / vit_pe_core_large_patch14_336 build it) for families.py.

Written from timm (read, not copied):
  timm/models/eva.py         Eva with use_pre_transformer_norm=True (PatchEmbed without a bias, norm_pre), class_token,
                             pos_embed with the cls row (no_embed_class False), use_rot_pos_emb with rope_type 'cat'
                             (in_pixels False, ref_feat_shape the native grid: 24 for 384 / 16, 14 for 224 / 16, 24
                             for Large's 336 / 14; rope_grid_offset 1., rope_grid_indexing 'xy', temperature 10000),
                             attn_type 'rope' (AttentionRope), global_pool 'map' (fc_norm off, so the post-transformer
                             norm on: norm on every token; attn_pool = AttentionPoolLatent(num_heads=attn_pool_num_heads
                             8, mlp_ratio 4, norm_layer, GELU)), norm_layer LayerNorm eps 1e-5, no layer scale;
                             EvaBlock (norm1, attn, norm2, Mlp GELU fc1 / fc2 with mlp_ratio 4); _pe_cfg (mean / std 0.5,
                             crop_pct 1.0, bicubic, fixed_input_size, license apache-2.0); checkpoint_filter_fn (pos_embed
                             resample_abs_pos_embed, bicubic, antialias) and _convert_pe (PE's attn_pool in_proj split:
                             the first D rows are q, the other 2D kv; PE's proj (D, E) becomes head.weight = proj.T
                             and head.bias = zeros(E), Eva's head a Linear with num_classes E after the pool)
  timm/layers/attention.py   AttentionRope (qkv_fused: one qkv Linear WITH a bias; RoPE on the tokens after
                             num_prefix_tokens, apply_rot_embed_cat with half=False: interleaved pairs; scale
                             head_dim ** -0.5)
  timm/layers/pos_embed_sincos.py  freq_bands (step 1), build_fourier_pos_embed (in_pixels False: with grid_indexing
                             'xy' feat_shape and ref_feat_shape are swapped to (W, H), t = arange(n) + grid_offset, then
                             t / feat * ref per axis, meshgrid(indexing='xy')), build_rotary_pos_embed (reshape (N, d/2),
                             repeat_interleave(2)), RotaryEmbeddingCat (a cached non-persistent table for feat_shape;
                             bands and get_embed(shape) with dynamic_img_size), rot, apply_rot_embed_cat
  timm/layers/attention_pool.py  AttentionPoolLatent (latent (1, 1, D), q Linear(D, D) on the latent, kv Linear(D, 2D)
                             on every token (the cls token too), heads, softmax, proj, x + mlp(norm(x)), pool 'token')
  timm/layers/mlp.py         Mlp (fc1, act, fc2)

What the rule is, checked here against timm's code: the angles of patch (r, c) on a gh x gw grid are, for band
j = 0 .. d/4 - 1 (band_j = 10000 ** (-j / (d / 4))), first the column's ((c + 1) / gw * ref) * band_j, then the row's
((r + 1) / gh * ref) * band_j ('xy' puts x, the column, first; EVA-02's 'ij' the row), each used for one interleaved
pair (x[2m], x[2m + 1]). The offset is added before the rescale: at the native grid (gh = gw = ref) t = index + 1.

Two things here: the float64 reference's RoPE ('pe' kind; families.reference uses it) written from that rule, index
by index, and a module replica with timm's parameter names and timm's float32 RoPE tables, the independent path the
reference is checked against. Besides timm's layout, the same weights in Meta's own release (perception_models
core/vision_encoder/pe.py: CLIP's state dict, visual.* beside a text tower; read here as timm reads it, through a
transcription of eva.py _convert_pe) and in open_clip's (timm_model.py TimmModel with timm_proj null: timm's model as
visual.trunk.*, its head the projection; open_clip's custom text tower as text.*). This module imports nothing of families.py (families.py imports it); the checks take
families' Checks object.
"""
import collections

import torch
import torch.nn as nn

import families_eva

PE_TEMPERATURE = 10000.0   # timm Eva rope_temperature default (every vit_pe_core_*)
PE_GRID_OFFSET = 1.0       # rope_grid_offset of vit_pe_core_tiny / small / base / large (gigantic: 0)
PE_GRID_INDEXING = "xy"    # rope_grid_indexing of every vit_pe_*
PE_MAP_HEADS = 8           # attn_pool_num_heads of every vit_pe_*
LAYOUTS = ("pe_core_timm", "pe_core_timm_proj")  # families.py's specs of this file's layout (headless; with PE's proj)
META_LAYOUT = "pe_core_meta"            # Meta's release (PE-Core-*.pt: the CLIP model's state dict, visual.*)
OPEN_CLIP_LAYOUT = "pe_core_open_clip"  # open_clip's PE-Core-* (timm's model as visual.trunk.*, its head the proj)
OPEN_CLIP_TRUNK = "visual.trunk."


def arch_tag(s):
    """(timm model name, pretrained tag, crop_pct) the layout's config.json names: _pe_cfg's crop_pct 1.0."""
    return "vit_pe_core_tiny_patch16_384", "fb", 1.0


# =============================================================================== the reference's RoPE
def pe_rope_angles(d, gh, gw, ref, temperature=PE_TEMPERATURE, offset=PE_GRID_OFFSET):
    """The angles of each patch (row-major, (gh * gw, d / 2)), float64: EVA-02's rule (families_eva.eva_rope_angles)
    with timm's grid_offset 1 and 'xy' indexing: the first d/4 angles are the patch column's, the last d/4 its row's,
    t_col = (c + offset) / gw * ref, t_row = (r + offset) / gh * ref."""
    return families_eva.eva_rope_angles(d, gh, gw, ref, temperature, offset=offset, column_first=True)


pe_rope_apply = families_eva.eva_rope_apply  # the same interleaved pairs: timm rot, apply_rot_embed_cat(half=False)


# =============================================================================== timm's layout
def pe_state_dict(s, c):
    """timm Eva's state_dict() of a vit_pe_core_* with num_classes 0, in its order: the model's own parameters
    (cls_token, pos_embed), then its children: patch_embed (proj.weight only: bias=not use_pre_transformer_norm),
    norm_pre, blocks (norm1, attn.qkv (weight, bias), attn.proj, norm2, mlp.fc1, mlp.fc2), norm, attn_pool (its own
    latent, then q, kv, proj, norm, mlp.fc1, mlp.fc2). The canonical attention-pool in_proj (SigLIP's form: rows Q, K,
    V) is split as _convert_pe splits PE's: q the first D rows, kv the other 2D (K then V)."""
    D = s.D
    assert c["patch_b"] is None, "PE's patch embedding has no bias"
    sd = collections.OrderedDict()
    sd["cls_token"] = c["cls"].reshape(1, 1, D)
    sd["pos_embed"] = c["pos"][None]
    sd["patch_embed.proj.weight"] = c["patch_w"]
    sd["norm_pre.weight"], sd["norm_pre.bias"] = c["ln_pre"]
    for i, b in enumerate(c["blocks"]):
        p = f"blocks.{i}."
        sd[p + "norm1.weight"], sd[p + "norm1.bias"] = b["ln1"]
        sd[p + "attn.qkv.weight"], sd[p + "attn.qkv.bias"] = b["qkv_w"], b["qkv_b"]
        sd[p + "attn.proj.weight"], sd[p + "attn.proj.bias"] = b["proj_w"], b["proj_b"]
        sd[p + "norm2.weight"], sd[p + "norm2.bias"] = b["ln2"]
        sd[p + "mlp.fc1.weight"], sd[p + "mlp.fc1.bias"] = b["fc1_w"], b["fc1_b"]
        sd[p + "mlp.fc2.weight"], sd[p + "mlp.fc2.bias"] = b["fc2_w"], b["fc2_b"]
    sd["norm.weight"], sd["norm.bias"] = c["norm"]
    a = "attn_pool."
    sd[a + "latent"] = c["probe"].reshape(1, 1, D)
    sd[a + "q.weight"], sd[a + "q.bias"] = c["map_in_w"][:D], c["map_in_b"][:D]
    sd[a + "kv.weight"], sd[a + "kv.bias"] = c["map_in_w"][D:], c["map_in_b"][D:]
    sd[a + "proj.weight"], sd[a + "proj.bias"] = c["map_out_w"], c["map_out_b"]
    sd[a + "norm.weight"], sd[a + "norm.bias"] = c["map_ln"]
    sd[a + "mlp.fc1.weight"], sd[a + "mlp.fc1.bias"] = c["map_fc1"]
    sd[a + "mlp.fc2.weight"], sd[a + "mlp.fc2.bias"] = c["map_fc2"]
    if s.proj:
        # _convert_pe: PE's proj (D, E), applied as x @ proj, becomes head.weight = proj.T (E, D) and head.bias =
        # zeros(E) (timm's head is a Linear: num_classes E); Eva's head is its last child
        sd["head.weight"] = c["proj"].T.contiguous()
        sd["head.bias"] = torch.zeros(s.proj)
    return sd


def expected_keys(s):
    """The keys a timm vit_pe_core_* state dict (num_classes 0; with s.proj num_classes E: head.weight, head.bias)
    holds, written out by hand from eva.py, attention.py, attention_pool.py and mlp.py (not from the code above): what
    the replica's state_dict() and the written files must hold, nothing more."""
    keys = ["cls_token", "pos_embed", "patch_embed.proj.weight", "norm_pre.weight", "norm_pre.bias"]
    block = ("norm1.weight", "norm1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias",
             "norm2.weight", "norm2.bias", "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias")
    for i in range(s.depth):
        keys += [f"blocks.{i}.{n}" for n in block]
    keys += ["norm.weight", "norm.bias"]
    keys += ["attn_pool." + n for n in ("latent", "q.weight", "q.bias", "kv.weight", "kv.bias", "proj.weight",
                                        "proj.bias", "norm.weight", "norm.bias", "mlp.fc1.weight", "mlp.fc1.bias",
                                        "mlp.fc2.weight", "mlp.fc2.bias")]
    if s.proj:  # Eva.head = nn.Linear(embed_dim, num_classes), registered after attn_pool, fc_norm and head_drop
        keys += ["head.weight", "head.bias"]
    return keys


def pe_filter(sd, grid):
    """What timm's checkpoint_filter_fn does to a timm vit_pe_core_* state dict for a model of another grid: pos_embed
    resampled (resample_abs_pos_embed, bicubic, antialias, num_prefix_tokens 1), the rest as it is."""
    out = collections.OrderedDict(sd)
    out["pos_embed"] = families_eva.timm_resample(sd["pos_embed"].double(), grid, 1)
    return out


# =============================================================================== Meta's and open_clip's layouts
def pe_meta_state_dict(s, c):
    """The image tower of Meta's release (facebookresearch/perception_models core/vision_encoder/pe.py: CLIP's
    state_dict(), PE-Core-*.pt) under visual.*, in VisionTransformer's state_dict() order: its own parameters first
    (class_embedding, positional_embedding and proj, made in init_tensors), then its children: conv1 (bias=False),
    ln_pre, ln_post, transformer.resblocks.N (SelfAttention's in_proj_weight, in_proj_bias and out_proj, then ln_1,
    ln_2, mlp c_fc / c_proj: ResidualAttentionBlock registers attn first), attn_pool (AttentionPooling: probe (1, 1, D),
    nn.MultiheadAttention's in_proj_weight / in_proj_bias (rows Q, K, V) and out_proj, layernorm, mlp c_fc / c_proj).
    proj is (D, E), applied as x @ proj: timm's _convert_pe transposes it into head.weight. No RoPE tensor
    (_convert_pe maps none). The text tower beside it (CLIP's own keys, before visual.*) is families.py's."""
    D = s.D
    assert c["patch_b"] is None, "PE's conv1 has no bias"
    v = "visual."
    sd = collections.OrderedDict()
    sd[v + "class_embedding"] = c["cls"]
    sd[v + "positional_embedding"] = c["pos"]
    if s.proj:
        sd[v + "proj"] = c["proj"]
    sd[v + "conv1.weight"] = c["patch_w"]
    sd[v + "ln_pre.weight"], sd[v + "ln_pre.bias"] = c["ln_pre"]
    sd[v + "ln_post.weight"], sd[v + "ln_post.bias"] = c["norm"]
    for i, b in enumerate(c["blocks"]):
        p = f"{v}transformer.resblocks.{i}."
        sd[p + "attn.in_proj_weight"], sd[p + "attn.in_proj_bias"] = b["qkv_w"], b["qkv_b"]
        sd[p + "attn.out_proj.weight"], sd[p + "attn.out_proj.bias"] = b["proj_w"], b["proj_b"]
        sd[p + "ln_1.weight"], sd[p + "ln_1.bias"] = b["ln1"]
        sd[p + "ln_2.weight"], sd[p + "ln_2.bias"] = b["ln2"]
        sd[p + "mlp.c_fc.weight"], sd[p + "mlp.c_fc.bias"] = b["fc1_w"], b["fc1_b"]
        sd[p + "mlp.c_proj.weight"], sd[p + "mlp.c_proj.bias"] = b["fc2_w"], b["fc2_b"]
    a = v + "attn_pool."
    sd[a + "probe"] = c["probe"].reshape(1, 1, D)
    sd[a + "attn.in_proj_weight"], sd[a + "attn.in_proj_bias"] = c["map_in_w"], c["map_in_b"]
    sd[a + "attn.out_proj.weight"], sd[a + "attn.out_proj.bias"] = c["map_out_w"], c["map_out_b"]
    sd[a + "layernorm.weight"], sd[a + "layernorm.bias"] = c["map_ln"]
    sd[a + "mlp.c_fc.weight"], sd[a + "mlp.c_fc.bias"] = c["map_fc1"]
    sd[a + "mlp.c_proj.weight"], sd[a + "mlp.c_proj.bias"] = c["map_fc2"]
    return sd


def expected_meta_keys(s):
    """The visual.* keys of Meta's PE-Core CLIP state dict, written out by hand from pe.py (VisionTransformer,
    Transformer, ResidualAttentionBlock with SelfAttention, AttentionPooling), not from the code above."""
    keys = ["class_embedding", "positional_embedding"] + (["proj"] if s.proj else []) + [
        "conv1.weight", "ln_pre.weight", "ln_pre.bias", "ln_post.weight", "ln_post.bias"]
    block = ("attn.in_proj_weight", "attn.in_proj_bias", "attn.out_proj.weight", "attn.out_proj.bias", "ln_1.weight",
             "ln_1.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
             "mlp.c_proj.bias")
    for i in range(s.depth):
        keys += [f"transformer.resblocks.{i}.{n}" for n in block]
    keys += ["attn_pool." + n for n in ("probe", "attn.in_proj_weight", "attn.in_proj_bias", "attn.out_proj.weight",
                                        "attn.out_proj.bias", "layernorm.weight", "layernorm.bias", "mlp.c_fc.weight",
                                        "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias")]
    return ["visual." + k for k in keys]


def convert_pe(state_dict, prefix="visual."):
    """timm eva.py _convert_pe, transcribed (what timm's checkpoint_filter_fn does to Meta's file): keys outside the
    prefix dropped (the text tower), the prefix stripped, the names swapped in its order (conv1, positional_embedding,
    transformer.resblocks., ln_pre, ln_post, ln_, ls_N.gamma, in_proj_, out_proj, mlp.c_fc, mlp.c_proj); in attn_pool
    'attn' dropped, layernorm -> norm, probe -> latent, and its qkv split: the first third of the rows q, the rest kv;
    proj -> head.weight = proj.T with head.bias zeros; class_embedding -> cls_token (1, 1, D); pos_embed unsqueezed."""
    state_dict = state_dict.get("model", state_dict)
    state_dict = {k.replace("module.", ""): v for k, v in state_dict.items()}
    swaps = [("conv1", "patch_embed.proj"), ("positional_embedding", "pos_embed"),
             ("transformer.resblocks.", "blocks."), ("ln_pre", "norm_pre"), ("ln_post", "norm"), ("ln_", "norm"),
             ("ls_1.gamma", "gamma_1"), ("ls_2.gamma", "gamma_2"), ("in_proj_", "qkv."), ("out_proj", "proj"),
             ("mlp.c_fc", "mlp.fc1"), ("mlp.c_proj", "mlp.fc2")]
    out = collections.OrderedDict()
    for k, v in state_dict.items():
        if prefix:
            if not k.startswith(prefix):
                continue
            k = k[len(prefix):]
        for a, b in swaps:
            k = k.replace(a, b)
        if k.startswith("attn_pool"):
            k = k.replace("attn_pool.attn", "attn_pool").replace("attn_pool.layernorm", "attn_pool.norm")
            k = k.replace("attn_pool.probe", "attn_pool.latent")
            if k.startswith("attn_pool.qkv"):
                dim = v.shape[0] // 3
                part = "weight" if k.endswith("weight") else "bias"
                out[f"attn_pool.q.{part}"], out[f"attn_pool.kv.{part}"] = v[:dim], v[dim:]
                continue
        elif k == "proj":
            k, v = "head.weight", v.transpose(0, 1)
            out["head.bias"] = torch.zeros(v.shape[0])
        elif k == "class_embedding":
            k, v = "cls_token", v.unsqueeze(0).unsqueeze(1)
        elif k == "pos_embed":
            v = v.unsqueeze(0)
        out[k] = v
    return out


def pe_open_clip_trunk(s, c):
    """open_clip's PE-Core-* image tower: TimmModel(timm_model_name vit_pe_core_*, timm_pool 'map', timm_proj None)
    builds timm's model with num_classes = embed_dim, so its head IS PE's projection (timm's form: head.weight (E, D),
    head.bias zeros), and an empty nn.Sequential head after it: timm's state dict under visual.trunk.*"""
    assert s.proj, "open_clip's PE-Core has num_classes = embed_dim: the projection"
    return collections.OrderedDict((OPEN_CLIP_TRUNK + k, v) for k, v in pe_state_dict(s, c).items())


def timm_form(s, sd):
    """The layout's state dict as timm's model holds it: Meta's through _convert_pe (put in timm's state_dict() order
    when it has timm's keys: load_state_dict goes by name), open_clip's with visual.trunk. stripped (and its text tower
    dropped), timm's as it is."""
    if s.layout == META_LAYOUT:
        conv = convert_pe(sd)
        order = expected_keys(s)
        if set(conv) == set(order):
            conv = collections.OrderedDict((k, conv[k]) for k in order)
        return conv
    if s.layout == OPEN_CLIP_LAYOUT:
        n = len(OPEN_CLIP_TRUNK)
        return collections.OrderedDict((k[n:], v) for k, v in sd.items() if k.startswith(OPEN_CLIP_TRUNK))
    return sd


def check_pe_layout(s, sd, c, chk):
    """Meta's and open_clip's files: their image tower's keys are exactly the released model's (written out by hand),
    in its order; what timm makes of them (_convert_pe; visual.trunk. stripped) is pe_core_timm_proj's state dict,
    tensor for tensor (the same numbers: head.weight = visual.proj.T, head.bias zeros, q / kv the rows of
    in_proj); Meta's visual.proj is (D, E), as pe.py applies it (x @ proj), not timm's transposed head.weight."""
    want = pe_state_dict(s, c)
    if s.layout == META_LAYOUT:
        vis = [k for k in sd if k.startswith("visual.")]
        exp = expected_meta_keys(s)
        chk.true(f"{s.layout}: the visual.* keys are exactly PE's VisionTransformer's, in state_dict() order",
                 vis == exp, f"extra {sorted(set(vis) - set(exp))[:6]}, missing {sorted(set(exp) - set(vis))[:6]}")
        chk.true(f"{s.layout}: visual.proj is ({s.D}, {s.proj}) (x @ proj: not transposed), visual.attn_pool.probe "
                 f"(1, 1, {s.D}), class_embedding ({s.D},)",
                 tuple(sd["visual.proj"].shape) == (s.D, s.proj) and
                 tuple(sd["visual.attn_pool.probe"].shape) == (1, 1, s.D) and
                 tuple(sd["visual.class_embedding"].shape) == (s.D,), f"{tuple(sd['visual.proj'].shape)}")
    else:
        trunk = [k for k in sd if k.startswith(OPEN_CLIP_TRUNK)]
        exp = [OPEN_CLIP_TRUNK + k for k in expected_keys(s)]
        chk.true(f"{s.layout}: the visual.trunk.* keys are exactly timm's vit_pe_core_* with num_classes E, in order",
                 trunk == exp,
                 f"extra {sorted(set(trunk) - set(exp))[:6]}, missing {sorted(set(exp) - set(trunk))[:6]}")
        other = [k for k in sd if k.startswith("visual.") and not k.startswith(OPEN_CLIP_TRUNK)]
        chk.true(f"{s.layout}: nothing else under visual.* (timm_proj null: TimmModel's head an empty Sequential)",
                 not other, str(other[:6]))
    got = convert_pe(sd) if s.layout == META_LAYOUT else timm_form(s, sd)
    if s.layout == META_LAYOUT:  # _convert_pe's own order (head.bias before head.weight ...): by name
        chk.true(f"{s.layout}: what timm's _convert_pe makes of it has exactly timm's keys (pe_core_timm_proj's)",
                 set(got) == set(want), f"extra {sorted(set(got) - set(want))[:6]}, missing "
                                        f"{sorted(set(want) - set(got))[:6]}")
    else:
        chk.true(f"{s.layout}: the trunk is timm's state dict (pe_core_timm_proj's keys, in its order)",
                 list(got) == list(want), f"{list(got)[:6]} vs {list(want)[:6]}")
    if set(got) == set(want):
        bad = [f"{k} {tuple(got[k].shape)} vs {tuple(want[k].shape)}" for k in want if got[k].shape != want[k].shape]
        worst = 0.0 if bad else max(float((got[k].double() - want[k].double()).abs().max()) for k in want)
        chk.true(f"{s.layout}: ... tensor for tensor the same shapes and numbers (max |diff| {worst:.1e})",
                 not bad and worst == 0.0, "; ".join(bad[:4]))


# =============================================================================== the replica
def _timm_pe_rope_table(feat_shape, bands, ref, offset, indexing, dtype):
    """build_rotary_pos_embed(in_pixels=False, ref_feat_shape, grid_offset, grid_indexing) as cat(sin, cos),
    (H * W, 2 d): with 'xy' the shapes swapped to (W, H) first; t = the integer indices in `dtype` plus the offset,
    scaled by ref / feat per axis; meshgrid with the indexing (its output (H, W) either way), times the bands; sin and
    cos reshaped to (N, d / 2) and each angle repeated for its pair."""
    feat, ref = list(feat_shape), (list(ref) if ref is not None else None)
    if indexing == "xy":
        feat = [feat[1], feat[0]]
        ref = [ref[1], ref[0]] if ref is not None else None
    t = [torch.arange(n, dtype=torch.int64).to(dtype) + offset for n in feat]
    if ref is not None:
        t = [x / f * r for x, f, r in zip(t, feat, ref)]
    grid = torch.stack(torch.meshgrid(t, indexing=indexing), dim=-1)[..., None]  # H, W, 2, 1
    pos = grid * bands.to(dtype)                                                  # H, W, 2, d / 4
    n = feat_shape[0] * feat_shape[1]
    sin = pos.sin().reshape(n, -1).repeat_interleave(2, -1)
    cos = pos.cos().reshape(n, -1).repeat_interleave(2, -1)
    return torch.cat([sin, cos], -1)


class _TimmRotaryEmbeddingCat(nn.Module):
    """timm RotaryEmbeddingCat(dim=d, in_pixels=False, temperature, feat_shape, ref_feat_shape, grid_offset,
    grid_indexing): with feat_shape (the model built at its image size) a cached non-persistent table; without
    (dynamic_img_size) the bands (a non-persistent buffer) and get_embed(shape). timm computes in float32; dtype
    float64 shows the rest agrees to rounding."""

    def __init__(self, d, feat_shape, ref_feat_shape, offset, indexing, temperature=PE_TEMPERATURE,
                 dtype=torch.float32):
        super().__init__()
        self.ref, self.offset, self.indexing, self.dtype = ref_feat_shape, offset, indexing, dtype
        num_bands = d // 4  # freq_bands(num_bands, temperature, step=1)
        bands = 1.0 / temperature ** (torch.arange(0, num_bands, 1, dtype=torch.int64).to(dtype) / num_bands)
        if feat_shape is None:
            self.register_buffer("bands", bands, persistent=False)
            self.pos_embed = None
        else:
            self.bands = None
            self.register_buffer("pos_embed", _timm_pe_rope_table(feat_shape, bands, ref_feat_shape, offset, indexing,
                                                                  dtype), persistent=False)

    def get_embed(self, shape=None):
        if shape is not None and self.bands is not None:
            return _timm_pe_rope_table(shape, self.bands, self.ref, self.offset, self.indexing, self.dtype)
        return self.pos_embed


class _AttentionRope(nn.Module):
    """timm AttentionRope (qkv_fused, qkv_bias, no qk_norm / scale_norm / gate, rotate_half False, eager path)."""

    def __init__(self, D, H, num_prefix_tokens=1):
        super().__init__()
        self.H, self.npt = H, num_prefix_tokens
        self.qkv = nn.Linear(D, 3 * D, bias=True)
        self.proj = nn.Linear(D, D)

    def forward(self, x, rope):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.H, C // self.H).permute(2, 0, 3, 1, 4).unbind(0)
        sin, cos = rope.chunk(2, -1)  # apply_rot_embed_cat(half=False)
        n = self.npt
        q = torch.cat([q[:, :, :n], q[:, :, n:] * cos + families_eva._timm_rot(q[:, :, n:]) * sin], 2).type_as(v)
        k = torch.cat([k[:, :, :n], k[:, :, n:] * cos + families_eva._timm_rot(k[:, :, n:]) * sin], 2).type_as(v)
        attn = ((q * (C // self.H) ** -0.5) @ k.transpose(-2, -1)).softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(B, N, C))


class _Mlp(nn.Module):
    """timm Mlp(act_layer=nn.GELU): fc1, GELU (erf), fc2."""

    def __init__(self, D, M):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(D, M), nn.GELU(), nn.Linear(M, D)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class _PeBlock(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.norm1 = nn.LayerNorm(s.D, eps=s.eps)
        self.attn = _AttentionRope(s.D, s.heads, 1)
        self.norm2 = nn.LayerNorm(s.D, eps=s.eps)
        self.mlp = _Mlp(s.D, s.mlp)

    def forward(self, x, rope):
        x = x + self.attn(self.norm1(x), rope=rope)
        return x + self.mlp(self.norm2(x))


class _AttentionPoolLatent(nn.Module):
    """timm AttentionPoolLatent(D, num_heads, mlp_ratio 4, norm_layer LayerNorm, act GELU; latent_len 1, q_proj,
    qkv_bias, pool 'token'): q from the latent, k and v from every token given, softmax, proj, x + mlp(norm(x)),
    token 0. `patches_only` (a deliberate error for the sensitivity check) feeds it the tokens after the cls token."""

    def __init__(self, D, heads, M, eps, patches_only=False):
        super().__init__()
        self.H, self.patches_only = heads, patches_only
        self.latent = nn.Parameter(torch.zeros(1, 1, D))
        self.q, self.kv = nn.Linear(D, D), nn.Linear(D, 2 * D)
        self.proj, self.norm, self.mlp = nn.Linear(D, D), nn.LayerNorm(D, eps=eps), _Mlp(D, M)

    def forward(self, x):
        if self.patches_only:
            x = x[:, 1:]
        B, N, C = x.shape
        h = C // self.H
        q = self.q(self.latent.expand(B, -1, -1)).reshape(B, 1, self.H, h).transpose(1, 2)
        k, v = self.kv(x).reshape(B, N, 2, self.H, h).permute(2, 0, 3, 1, 4).unbind(0)
        attn = ((q * h ** -0.5) @ k.transpose(-2, -1)).softmax(dim=-1)
        x = self.proj((attn @ v).transpose(1, 2).reshape(B, 1, C))
        x = x + self.mlp(self.norm(x))
        return x[:, 0]


class TimmPeCore(nn.Module):
    """timm Eva as vit_pe_core_tiny_patch16_384 builds it (the fixture's shapes, num_classes 0), built at image size
    hw (its grid in pos_embed and in RoPE's cached table: load a state dict through pe_filter for another grid), or
    with dynamic=True (dynamic_img_size: the learned table resampled in _pos_embed, RoPE's table from the bands per
    call). forward: patch_embed (no bias), cat(cls, patches) + pos_embed, norm_pre, blocks, norm, forward_head:
    attn_pool, fc_norm (Identity), head (with s.proj, num_classes E: nn.Linear(D, E), PE's projection as timm holds it;
    else Identity; pre_logits=True: skipped, as forward_head(pre_logits=True)). Returns (embedding row, [block
    outputs]); self.tokens holds norm's output. The keyword arguments other than dynamic / rope_dtype / pre_logits are
    deliberate departures for the sensitivity checks (grid_offset, grid_indexing, pool_heads, pool_patches_only)."""

    def __init__(self, s, hw, dynamic=False, rope_dtype=torch.float32, grid_offset=PE_GRID_OFFSET,
                 grid_indexing=PE_GRID_INDEXING, pool_heads=None, pool_patches_only=False, pre_logits=False):
        super().__init__()
        D = s.D
        assert s.mlp == int(D * 4.0), "PE's MLP and its attention pool's are mlp_ratio 4"
        self.s, self.dynamic = s, dynamic
        self.grid = (s.grid, s.grid) if dynamic else (hw[0] // s.patch, hw[1] // s.patch)
        self.num_prefix_tokens = 1
        self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + self.grid[0] * self.grid[1], D))
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv2d(s.C, D, s.patch, s.patch, bias=False)
        self.rope = _TimmRotaryEmbeddingCat(D // s.heads, None if dynamic else list(self.grid),
                                            (s.rope_ref, s.rope_ref), grid_offset, grid_indexing, dtype=rope_dtype)
        self.norm_pre = nn.LayerNorm(D, eps=s.eps)
        self.blocks = nn.ModuleList([_PeBlock(s) for _ in range(s.depth)])
        self.norm = nn.LayerNorm(D, eps=s.eps)
        self.attn_pool = _AttentionPoolLatent(D, pool_heads or s.map_heads or s.heads, s.mlp, s.eps,
                                              pool_patches_only)
        self.head = nn.Linear(D, s.proj) if s.proj else nn.Identity()
        self.pre_logits = pre_logits
        self.tokens = None

    def forward(self, img):
        x = self.patch_embed.proj(img).permute(0, 2, 3, 1)  # NHWC
        B, H, W, C = x.shape
        x = x.reshape(B, H * W, C)
        if self.dynamic:
            pos = families_eva.timm_resample(self.pos_embed, (H, W), self.num_prefix_tokens)
            rope = self.rope.get_embed(shape=[H, W])
        else:
            assert (H, W) == self.grid, f"built for a {self.grid} grid, given {(H, W)}"
            pos, rope = self.pos_embed, self.rope.get_embed()
        x = torch.cat([self.cls_token.expand(B, -1, -1), x], 1) + pos
        x = self.norm_pre(x)
        outs = []
        for blk in self.blocks:
            x = blk(x, rope=rope)
            outs.append(x[0])
        x = self.norm(x)
        self.tokens = x
        x = self.attn_pool(x)
        return (x if self.pre_logits else self.head(x))[0], outs


# =============================================================================== self-checks
def check_pe(s, sd, refs, x, chk, replica_outputs, run_replica):
    """Beyond families.check_layout (the model built at each size, RoPE in timm's float32): the state dict and the
    replica's are timm's keys, in timm's order, nothing more; timm's RoPE table (float64) is the reference's angles,
    sin and cos, at both grids; loaded strictly, with float64 RoPE tables the replica is the reference to 1e-9 at both
    sizes (what separates the float32 one is only the tables' rounding), and so is timm's dynamic_img_size path (table
    resampled in the forward, RoPE from the bands); timm's submodules read by forward hooks (norm_pre, each block's
    qkv, norm, the attention pool's q, kv, proj, norm, mlp.fc1 / fc2) are the reference's stages (ln_pre.out,
    attn.q / k / v, ln_final.out, head.attn.q / k / v / out, head.ln.out, head.mlp.pre / out); and the reference is
    sensitive to what PE is: with 'ij' indexing (EVA-02's row first), without the grid offset, with the model's heads
    in the pool, or with the pool reading the patch tokens only, the output moves. With PE's projection (s.proj:
    timm's head Linear) the module's output is the reference's embedding (head.resid_post[0] @ proj), head's input
    (a hook) its head.resid_post, and its output before the head (pre_logits) is kept for families.check_groups;
    the head's bias is zeros, and the output moves with head.weight read as PE's proj reshaped, not transposed."""
    want = expected_keys(s)
    chk.true(f"{s.layout}: the state dict holds exactly timm's keys, in state_dict() order", list(sd) == want,
             f"extra {sorted(set(sd) - set(want))[:6]}, missing {sorted(set(want) - set(sd))[:6]}")
    m = TimmPeCore(s, (s.grid * s.patch,) * 2)
    chk.true(f"{s.layout}: the replica's state_dict() has the same keys in the same order",
             list(m.state_dict()) == want, f"{list(m.state_dict())[:8]}")
    d = s.D // s.heads
    for size, img in x.items():
        rec = refs[size]
        hw = tuple(img.shape[1:])
        grid = (hw[0] // s.patch, hw[1] // s.patch)
        # the table itself: timm's construction in float64 vs the reference's angles
        bands = 1.0 / PE_TEMPERATURE ** (torch.arange(d // 4, dtype=torch.float64) / (d // 4))
        table = _timm_pe_rope_table(grid, bands, (s.rope_ref, s.rope_ref), PE_GRID_OFFSET, PE_GRID_INDEXING,
                                    torch.float64)
        ang = pe_rope_angles(d, *grid, s.rope_ref).repeat_interleave(2, -1)
        chk.close(f"{s.layout} {size}: timm's RoPE table (float64, {grid[0]}x{grid[1]}) vs the reference's angles "
                  f"(sin, cos)", table, torch.cat([ang.sin(), ang.cos()], -1), 1e-12)
        for label, model, msd in [
                ("float64 RoPE tables", TimmPeCore(s, hw, rope_dtype=torch.float64), pe_filter(sd, grid)),
                ("dynamic_img_size, float64 RoPE", TimmPeCore(s, hw, dynamic=True, rope_dtype=torch.float64), sd),
                ("dynamic_img_size, timm's float32 RoPE", TimmPeCore(s, hw, dynamic=True), sd)]:
            model = model.double()
            model.load_state_dict(msd, strict=True)
            out, blocks = run_replica(s, model, img)
            tol = 1e-9 if "float64" in label else 1e-6
            chk.close(f"{s.layout} {size}: the module ({label}, strict load) vs embedding", out, rec["embedding"], tol)
            chk.close(f"{s.layout} {size}: the module ({label}), block {s.depth - 1} vs resid_post", blocks[-1],
                      rec[f"blocks.{s.depth - 1}.resid_post"], tol)
            chk.close(f"{s.layout} {size}: the module ({label}), its tokens vs ln_final.out", model.tokens[0],
                      rec["ln_final.out"], tol)
        _check_hooks(s, sd, rec, img, grid, size, chk, run_replica)
        if s.proj:
            E = s.proj
            chk.true(f"{s.layout}: head.weight is ({E}, {s.D}) (proj.T) and head.bias {E} zeros (timm's _convert_pe)",
                     tuple(sd["head.weight"].shape) == (E, s.D) and tuple(sd["head.bias"].shape) == (E,)
                     and not sd["head.bias"].any(), f"{tuple(sd['head.weight'].shape)}")
            model = TimmPeCore(s, hw, pre_logits=True).double()
            model.load_state_dict(pe_filter(sd, grid), strict=True)
            out, _ = run_replica(s, model, img)
            chk.close(f"{s.layout} {size}: the module's pre_logits (the pool's output, timm's float32 RoPE) vs "
                      f"head.resid_post", out, rec["head.resid_post"][0], 1e-6)
            replica_outputs[(s.layout + " pre_logits", size)] = out
            wrong = pe_filter(sd, grid)
            wrong["head.weight"] = sd["head.weight"].T.reshape(E, s.D)  # proj's numbers in (E, D) without the transpose
            model = TimmPeCore(s, hw, rope_dtype=torch.float64).double()
            model.load_state_dict(wrong, strict=True)
            out, _ = run_replica(s, model, img)
            dd = float((out - rec["embedding"]).abs().max() / rec["embedding"].abs().max())
            chk.true(f"{s.layout} {size}: with head.weight as proj reshaped, not transposed, the output moves "
                     f"({dd:.1e} of its scale)", dd > 1e-4)
        for label, kw in [("'ij' indexing (the row's angles first, EVA-02's)", {"grid_indexing": "ij"}),
                          ("grid offset 0 (t the patch index)", {"grid_offset": 0.0}),
                          (f"the model's {s.heads} heads in the attention pool", {"pool_heads": s.heads}),
                          ("the attention pool reading the patch tokens only", {"pool_patches_only": True})]:
            model = TimmPeCore(s, hw, rope_dtype=torch.float64, **kw).double()
            model.load_state_dict(pe_filter(sd, grid), strict=True)
            out, _ = run_replica(s, model, img)
            dd = float((out - rec["embedding"]).abs().max() / rec["embedding"].abs().max())
            chk.true(f"{s.layout} {size}: with {label} the output moves ({dd:.1e} of its scale)", dd > 1e-4)


def _check_hooks(s, sd, rec, img, grid, size, chk, run_replica):
    """timm's submodules, read by forward hooks, against the reference's stages (float64 RoPE tables)."""
    hw = tuple(img.shape[1:])
    model = TimmPeCore(s, hw, rope_dtype=torch.float64).double()
    model.load_state_dict(pe_filter(sd, grid), strict=True)
    taps = {}

    def tap(name):
        def hook(mod, inp, out):
            taps[name] = out[0].detach()
        return hook
    mods = [("norm_pre", model.norm_pre)] + [(f"blocks.{i}.qkv", b.attn.qkv) for i, b in enumerate(model.blocks)]
    ap = model.attn_pool
    mods += [("pool.q", ap.q), ("pool.kv", ap.kv), ("pool.proj", ap.proj), ("pool.norm", ap.norm),
             ("pool.fc1", ap.mlp.fc1), ("pool.fc2", ap.mlp.fc2)]
    handles = [mod.register_forward_hook(tap(n)) for n, mod in mods]
    if s.proj:  # timm's head Linear: its input is the pool's output row (head.resid_post), its output the embedding
        handles.append(model.head.register_forward_hook(
            lambda mod, inp, out: taps.update({"head.in": inp[0][0].detach(), "head.out": out[0].detach()})))
    run_replica(s, model, img)
    for h in handles:
        h.remove()
    D, H, Hm = s.D, s.heads, s.map_heads or s.heads
    pairs = [("norm_pre", taps["norm_pre"], "ln_pre.out")]
    for i in range(s.depth):
        qkv = taps[f"blocks.{i}.qkv"]
        T = qkv.shape[0]
        for j, n in enumerate("qkv"):
            pairs.append((f"blocks.{i}.attn.qkv ({n} third)",
                          qkv[:, j * D:(j + 1) * D].reshape(T, H, -1).transpose(0, 1), f"blocks.{i}.attn.{n}"))
    kv = taps["pool.kv"]
    T = kv.shape[0]
    pairs += [("attn_pool.q", taps["pool.q"].reshape(1, Hm, -1).transpose(0, 1), "head.attn.q"),
              ("attn_pool.kv (k half)", kv[:, :D].reshape(T, Hm, -1).transpose(0, 1), "head.attn.k"),
              ("attn_pool.kv (v half)", kv[:, D:].reshape(T, Hm, -1).transpose(0, 1), "head.attn.v"),
              ("attn_pool.proj", taps["pool.proj"], "head.attn.out"),
              ("attn_pool.norm", taps["pool.norm"], "head.ln.out"),
              ("attn_pool.mlp.fc1", taps["pool.fc1"], "head.mlp.pre"),
              ("attn_pool.mlp.fc2", taps["pool.fc2"], "head.mlp.out")]
    if s.proj:
        pairs += [("head (its input)", taps["head.in"][None], "head.resid_post"),
                  ("head (its output)", taps["head.out"], "embedding")]
    for what, got, stage in pairs:
        chk.close(f"{s.layout} {size}: timm's {what} (hook) vs {stage}", got, rec[stage], 1e-9)
