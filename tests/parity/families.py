#!/usr/bin/python3
"""PyTorch references of the ViT families beyond the vanilla ViT (issue 20).

Written from the published architectures (read, not copied; the upstream file of
each part is named where it is used):
  timm          timm/models/vision_transformer.py (_pos_embed, no_embed_class, reg_token,
                dynamic_img_size), timm/models/deit.py (VisionTransformerDistilled),
                timm/layers/pos_embed.py (resample_abs_pos_embed), timm/layers/mlp.py (SwiGLUPacked)
  DINO          facebookresearch/dino vision_transformer.py
  DINOv2        facebookresearch/dinov2 dinov2/models/vision_transformer.py, dinov2/layers/
                (LayerScale, SwiGLUFFNFused), dinov2/hub/backbones.py (interpolate_offset,
                interpolate_antialias per model)
  CLIP          openai/CLIP clip/model.py (VisionTransformer, QuickGELU, convert_weights),
                clip/clip.py (_transform); mlfoundations/open_clip src/open_clip/transformer.py,
                model.py (resize_pos_embed), push_to_hf_hub.py (open_clip_config.json)
  Hugging Face  transformers models/{deit,dinov2,dinov2_with_registers,clip,siglip}/modeling_*.py
                (interpolate_pos_encoding of each)
  MAE           facebookresearch/mae models_vit.py, models_mae.py, util/pos_embed.py
  AIMv2         timm/models/vision_transformer.py (aimv2_large_patch14_224: class_token=False,
                fc_norm=False, global_pool='avg', qkv_bias=False, proj_bias=False, RmsNorm eps 1e-5 also
                on the patch embedding, SwiGLU; _convert_aimv2), timm/layers/norm.py + fast_norm.py (RmsNorm,
                rms_norm), timm/layers/mlp.py (SwiGLU: fc1_g, fc1_x, fc2), timm/layers/patch_embed.py
                (proj, flatten, norm); apple/ml-aim aim-v2/aim/v2/torch/models.py (AIMv2VisionEncoder,
                aimv2_large), aim-v2/aim/v2/torch/layers.py (SwiGLUFFN: silu(fc1) * fc3, fc2; RMSNorm =
                nn.RMSNorm), aim-v1/aim/v1/torch/layers.py (PatchEmbed, ViTPreprocessor, Attention, Block:
                norm_1, norm_2) and models.py (Transformer: use_bias=False, post_trunk_norm),
                aim-v2/aim/v2/utils.py (load_pretrained: model.safetensors, strict)
  DINOv3        facebookresearch/dinov3 dinov3/models/vision_transformer.py (prepare_tokens_with_masks:
                cls, storage tokens, no position table), dinov3/layers/rope_position_encoding.py
                (RopePositionEmbedding: normalize_coords="separate", periods from base 100),
                dinov3/layers/attention.py (rope_apply, rotate_half, LinearKMaskedBias),
                dinov3/hub/backbones.py (dinov3_vits16: layernormbf16 eps 1e-5, 4 storage tokens,
                layer scale, mask_k_bias); timm/models/eva.py (Eva, EvaAttention: fused qkv without a
                bias, q_bias / v_bias and a zero k_bias buffer; EvaBlock: gamma_1 / gamma_2;
                checkpoint_filter_fn's DINOv3 renames; vit_small_patch16_dinov3_qkvb, _dinov3_cfg;
                forward_head: global_pool 'avg'), timm/layers/pos_embed_sincos.py
                (RotaryEmbeddingDinoV3: periods computed in float32, not saved; make_coords_dinov3;
                apply_rot_embed_cat with half=True), timm/layers/pool1d.py (global_pool_nlc)
  EVA-02        timm/models/eva.py (eva02_tiny_patch14_224 / eva02_small_patch14_336: pos_embed with the cls row,
                RoPE 'cat' with ref_feat_shape (16, 16), interleaved pairs, q_bias / zero k_bias / v_bias, GluMlp
                SwiGLU, global_pool 'avg' with fc_norm), timm/layers/pos_embed_sincos.py (freq_bands,
                build_fourier_pos_embed, build_rotary_pos_embed, RotaryEmbeddingCat, rot); eva02_base_patch14_448
                (qkv_fused=False: q_proj / k_proj / v_proj; scale_mlp: timm/layers/mlp.py SwiGLU with its norm):
                families_eva.py
  PE-Core       timm/models/eva.py (vit_pe_core_tiny_patch16_384 / _small_patch16_384 / _base_patch16_224 /
                _large_patch14_336: no patch bias, norm_pre, pos_embed with the cls row, AttentionRope (fused qkv with a
                bias), RoPE 'cat' at ref_feat_shape the native grid with grid_offset 1 and 'xy' indexing (the column's
                angles first), interleaved pairs, GELU Mlp, norm on every token, AttentionPoolLatent with 8 heads),
                timm/layers/attention_pool.py, attention.py, pos_embed_sincos.py; Meta's own release
                (facebookresearch/perception_models core/vision_encoder/pe.py CLIP, read through timm's _convert_pe)
                and open_clip's PE-Core-* (timm_model.py TimmModel with timm_proj null, model_configs/PE-Core-*.json):
                families_pe.py

For every family and checkpoint layout this module
  (a) builds random non-trivial weights (registers, layer-scale gammas, biases, LayerNorms)
      under the layout's exact key names and shapes,
  (b) writes them as the files the real checkpoints come as (.safetensors, torch.save .pth/.bin,
      OpenAI's TorchScript .pt with fp16 weights) with the config.json /
      preprocessor_config.json / open_clip_config.json the real repositories ship,
  (c) runs the family's forward in float64, recording every stage under the trace names of
      the stage table (helpers/STAGES.md), at the native size and at a non-square other size
      with the family's own position-embedding interpolation,
and checks each reference against an independent PyTorch path: a module replica built
with the layout's own parameter names (loaded with load_state_dict(strict=True)) that
does its own interpolation the way the upstream code does, torch.nn.MultiheadAttention
(CLIP's blocks, SigLIP's pooling head), torchvision's VisionTransformer (the
vanilla-equivalent DINO and MAE encoders) and the other layouts of the same weights.

    python3 tests/parity/families.py --write DIR [--only LAYOUT,...] [--no-check]

writes DIR/<layout>/ (weights, configs, input_native.npy, input_other.npy,
ref_native.npz, ref_other.npz) and DIR/manifest.json, and exits 1 if a self-check fails.
"""
import argparse
import argparse as _argparse_for_pickle  # DINO's full checkpoints pickle an argparse.Namespace
import collections
import json
import math
import os
import sys
from dataclasses import dataclass, field, asdict
from typing import Dict, List, Optional

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vitref  # noqa: E402
import families_eva  # noqa: E402
import families_pe  # noqa: E402

torch.set_num_threads(1)

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
OPENAI_MEAN = [0.48145466, 0.4578275, 0.40821073]
OPENAI_STD = [0.26862954, 0.26130258, 0.27577711]
LABELS = ["tench", "goldfish", "great white shark", "tiger shark", "hammerhead"]

# The two sizes every layout runs at: its native image and a non-square other one
# (fewer patch rows, more patch columns than the native grid: both directions at once).
NATIVE = 20        # image side; patch 4 -> a 5 x 5 grid
OTHER = (12, 28)   # (H, W); patch 4 -> 3 x 7


# =============================================================================== position embeddings
# Each function resizes a learned table as the named upstream code does and returns it
# in the same form (2-D: rows x D). `prefix` rows (cls, dist) are kept; the rest is the
# square learned grid. The grid is only resized when the run's grid differs (every
# upstream function returns the learned table when the count matches and the image is
# square, which for a square learned grid means the same grid).

def _grid(table, prefix):
    n = table.shape[0] - prefix
    side = int(math.isqrt(n))
    assert side * side == n, f"{n} patch positions are not a square grid"
    return table[:prefix], table[prefix:].reshape(1, side, side, -1).permute(0, 3, 1, 2), side


def _resize(table, prefix, new, **interp):
    """The patch positions' grid resized to `new` with F.interpolate(..., **interp), the prefix kept."""
    head, g, side = _grid(table, prefix)
    if tuple(new) == (side, side):
        return table
    g = F.interpolate(g, size=tuple(new), **interp)
    return torch.cat([head, g.permute(0, 2, 3, 1).reshape(-1, table.shape[1])], 0)


def pos_timm(table, prefix, new):
    """timm layers/pos_embed.py resample_abs_pos_embed(posemb, new_size, old_size,
    num_prefix_tokens, interpolation='bicubic', antialias=True): F.interpolate by size."""
    return _resize(table, prefix, new, mode="bicubic", antialias=True)


def pos_dino(table, prefix, new):
    """facebookresearch/dino VisionTransformer.interpolate_pos_encoding (and DINOv2's with its
    hub default interpolate_offset=0.1, interpolate_antialias=False): bicubic with
    scale_factor ((h0 + 0.1) / sqrt(N), (w0 + 0.1) / sqrt(N)); torch then maps pixels with
    that factor, not with in/out."""
    head, g, side = _grid(table, prefix)
    if tuple(new) == (side, side):
        return table
    h0, w0 = new[0] + 0.1, new[1] + 0.1
    g = F.interpolate(g, scale_factor=(h0 / math.sqrt(side * side), w0 / math.sqrt(side * side)), mode="bicubic")
    assert (int(h0), int(w0)) == tuple(g.shape[-2:])
    return torch.cat([head, g.permute(0, 2, 3, 1).reshape(-1, table.shape[1])], 0)


def pos_dinov2_reg(table, prefix, new):
    """DINOv2 with registers (hub: interpolate_offset=0.0, interpolate_antialias=True): by size."""
    return _resize(table, prefix, new, mode="bicubic", antialias=True)


def pos_hf(table, prefix, new):
    """Hugging Face interpolate_pos_encoding of DeiT, Dinov2, CLIP, SigLIP (current
    transformers): bicubic, align_corners=False, size=(h // patch, w // patch)."""
    return _resize(table, prefix, new, mode="bicubic", align_corners=False)


def pos_hf_aa(table, prefix, new):
    """Hugging Face Dinov2WithRegistersEmbeddings.interpolate_pos_encoding: as pos_hf, antialias=True."""
    return _resize(table, prefix, new, mode="bicubic", align_corners=False, antialias=True)


def pos_open_clip(table, prefix, new):
    """open_clip model.py resize_pos_embed(state_dict, model, 'bicubic', antialias=True); used for
    OpenAI's files too (OpenAI's clip code runs only at the native size)."""
    head, g, side = _grid(table, prefix)
    if tuple(new) == (side, side):
        return table
    g = F.interpolate(g, size=tuple(new), mode="bicubic", antialias=True, align_corners=False)
    return torch.cat([head, g.permute(0, 2, 3, 1).reshape(-1, table.shape[1])], 0)


def pos_mae(table, prefix, new):
    """facebookresearch/mae util/pos_embed.py interpolate_pos_embed: bicubic by size,
    align_corners=False, extra tokens kept (upstream resizes square grids; (h, w) here)."""
    return _resize(table, prefix, new, mode="bicubic", align_corners=False)


# name -> (function, the rule's name in core/model/pos_embed.h)
POS_RULES = {
    "timm": (pos_timm, "pos_rule_timm"),
    "dino": (pos_dino, "pos_rule_dino"),
    "dinov2": (pos_dino, "pos_rule_dinov2(false)"),
    "dinov2_reg": (pos_dinov2_reg, "pos_rule_dinov2(true)"),
    "hf": (pos_hf, "pos_rule_hf(false)"),
    "hf_aa": (pos_hf_aa, "pos_rule_hf(true)"),
    "open_clip": (pos_open_clip, "pos_rule_open_clip"),
    "mae": (pos_mae, "pos_rule_mae"),
}

# A reference rule's name in ViTScope's config JSON ("pos_rule").
POS_RULE_JSON = {"timm": "timm", "dino": "dino", "dinov2": "dinov2", "dinov2_reg": "dinov2_reg", "hf": "hf",
                 "hf_aa": "hf_antialias", "open_clip": "open_clip", "mae": "mae"}


def config_fields(s):
    """The fields of ViTScope's config JSON (config_to_json's names) that a spec's architecture fixes,
    written from the published layouts: what the loader must find, and what a config file says."""
    pooling = {"norm_all": "cls", "clip_row": "cls_then_norm", "open_clip": "cls", "mean_fc_norm": "mean",
               "norm_mean": "norm_mean"}[s.final]
    if s.head == "siglip_map":
        pooling = "map"
    head = {"cls": "classifier", "mean": "classifier", "distilled": "distilled", "none": "identity",
            "siglip_map": "identity"}[s.head]
    if s.proj:
        head = "projection"
    return {"family": s.family, "image_size": NATIVE, "channels": s.C, "patch": s.patch, "width": s.D,
            "depth": s.depth, "heads": s.heads, "mlp": s.mlp, "classes": max(s.classes, 1), "eps": s.eps,
            "pooling": pooling, "cls_token": s.cls, "dist_token": s.dist, "registers": s.regs,
            "layer_scale": s.layer_scale, "ln_pre": s.ln_pre, "patch_bias": s.patch_bias,
            "pos_no_cls": s.no_embed_class or not s.cls, "act": s.act, "head": head, "embed_dim": s.proj,
            "pos_rule": POS_RULE_JSON[s.pos_rule], "pos_grid": 0,
            **({"pos_table": False, "rope": True, "rope_base": 100.0} if s.rope and s.rope_kind == "dinov3" else {}),
            # EVA-02: RoPE beside the learned table (no base: its temperature is fixed), at timm's ref_feat_shape
            **({"rope": True, "rope_kind": "eva", "rope_ref_grid": s.rope_ref} if s.rope and s.rope_kind == "eva"
               else {}),
            # PE: the same beside its table, with PE's coordinates (offset 1, the column first)
            **({"rope": True, "rope_kind": "pe", "rope_ref_grid": s.rope_ref} if s.rope and s.rope_kind == "pe"
               else {}),
            # the attention pool's heads where they are not the model's (PE: 8); SigLIP's files stay as they were
            **({"map_heads": s.map_heads} if s.map_heads else {}),
            # written only when not the default (LayerNorm, biases on q/k/v, on attn.proj and the MLP, no
            # norm on the patch embeddings): the files written before AIMv2 stay as they were
            **({"norm": "rms_norm"} if s.norm == "rms" else {}),
            **({"qkv_bias": False} if not s.qkv_bias else {}),
            **({"proj_bias": False} if not s.proj_bias else {}),
            **({"patch_norm": True} if s.patch_norm else {}),
            **({"mlp_norm": True} if s.scale_mlp else {})}


# =============================================================================== model specs
@dataclass
class Spec:
    layout: str
    family: str            # deit | dino | dinov2 | clip | siglip | mae | vit | dinov3 | aimv2 | eva02 | pe
    group: str             # layouts of one group share their weights (same seed and shapes)
    D: int = 32
    depth: int = 2
    heads: int = 4
    mlp: int = 128         # hidden width of the MLP (SwiGLU: H' of silu(x1) * x2)
    patch: int = 4
    grid: int = NATIVE // 4
    C: int = 3
    eps: float = 1e-6
    act: str = "gelu"      # gelu | quick_gelu | gelu_tanh | swiglu
    cls: bool = True
    dist: bool = False
    regs: int = 0
    layer_scale: bool = False
    qkv_bias: bool = True          # timm qkv_bias=False: nn.Linear(D, 3D, bias=False), no key in the file
    norm: str = "layer"            # layer (LayerNorm) | rms (RMSNorm: x / sqrt(mean(x^2) + eps) * weight, no bias)
    proj_bias: bool = True         # timm proj_bias=False: no bias on attn.proj nor on the MLP's fc1 / fc2
    patch_norm: bool = False       # a norm (of the spec's kind) on the patch embeddings, before the positions
    rope: bool = False             # RoPE on the patch tokens' q and k (DINOv3: instead of a position table)
    rope_kind: str = "dinov3"      # dinov3 (periods, coordinates in [-1, 1], halves paired) | eva (EVA-02: timm
    #                                RotaryEmbeddingCat, t = index / grid * rope_ref, interleaved pairs; the table kept)
    #                                | pe (PE-Core: the same with t = (index + 1) / grid * rope_ref, 'xy': the
    #                                column's angles first)
    rope_ref: int = 0              # EVA-02: timm's ref_feat_shape (16 for every eva02_*); PE: the native grid
    qkv_fused: bool = True         # timm EvaAttention qkv_fused=False (EVA-02 Base / Large): q_proj, k_proj (no bias),
    #                                v_proj in the file; the canonical qkv is their concatenation
    scale_mlp: bool = False        # timm EvaBlock scale_mlp (EVA-02 Base / Large): SwiGLU with a LayerNorm over the
    #                                hidden width between silu(gate) * value and fc2 (mlp.norm)
    k_mask: bool = False           # DINOv3 LinearKMaskedBias: the qkv bias times a mask zero on the K third
    ln_pre: bool = False
    patch_bias: bool = True
    no_embed_class: bool = False   # timm: pos rows for the patches only, cls position folded into cls_token
    final: str = "norm_all"        # norm_all | clip_row | open_clip | mean_fc_norm (timm avg pool, then fc_norm)
    #                                | norm_mean (timm fc_norm=False: norm on every token, then the avg pool;
    #                                  with head "none" the pooled mean is the embedding: AIMv2)
    head: str = "none"             # none | cls | mean (a Linear on the pooled mean) | distilled | siglip_map
    map_heads: int = 0             # siglip_map's heads (0: the model's; PE's AttentionPoolLatent: 8)
    classes: int = 0
    proj: int = 0                  # CLIP projection width E (0: none)
    pos_rule: str = "timm"
    seed: int = 0
    files: List[str] = field(default_factory=list)
    notes: str = ""

    @property
    def prefix(self):
        """Rows of the stored position table before the patch grid."""
        if self.no_embed_class or not self.cls:
            return 0
        return 1 + int(self.dist)

    @property
    def mlp_in(self):
        return 2 * self.mlp if self.act == "swiglu" else self.mlp


def swiglu_hidden(D, mlp_ratio=4):
    """dinov2/layers/swiglu_ffn.py SwiGLUFFNFused (and HF Dinov2SwiGLUFFN): H' = (int(4D * 2/3) + 7) // 8 * 8."""
    h = int(D * mlp_ratio)
    return (int(h * 2 / 3) + 7) // 8 * 8


CLIP_DIMS = dict(D=128, heads=2, mlp=512, proj=64)  # OpenAI/open_clip: heads = width // 64

SPECS = [
    # DeiT distilled: timm (eps 1e-6) and Hugging Face (layer_norm_eps 1e-12 in its config)
    Spec("deit_timm", "deit", "deit", dist=True, head="distilled", classes=5, pos_rule="timm", seed=11),
    Spec("deit_hf", "deit", "deit_hf", dist=True, head="distilled", classes=5, eps=1e-12, pos_rule="hf", seed=12),
    # DINO v1: one backbone in the layouts its checkpoints come in
    Spec("dino", "dino", "dino", pos_rule="dino", seed=21),
    # DINOv2 original / torch.hub, timm, Hugging Face; the same weights in each group
    Spec("dinov2", "dinov2", "dinov2", layer_scale=True, pos_rule="dinov2", seed=31),
    Spec("dinov2_timm", "dinov2", "dinov2", layer_scale=True, pos_rule="timm", seed=31),
    Spec("dinov2_hf", "dinov2", "dinov2", layer_scale=True, pos_rule="hf", seed=31),
    Spec("dinov2_reg", "dinov2", "dinov2_reg", layer_scale=True, regs=4, pos_rule="dinov2_reg", seed=32),
    Spec("dinov2_timm_reg", "dinov2", "dinov2_reg", layer_scale=True, regs=4, no_embed_class=True,
         pos_rule="timm", seed=32),
    Spec("dinov2_reg_hf", "dinov2", "dinov2_reg", layer_scale=True, regs=4, pos_rule="hf_aa", seed=32),
    Spec("dinov2_swiglu", "dinov2", "dinov2_swiglu", layer_scale=True, act="swiglu", mlp=swiglu_hidden(32),
         pos_rule="dinov2", seed=33),
    Spec("dinov2_swiglu_hf", "dinov2", "dinov2_swiglu", layer_scale=True, act="swiglu", mlp=swiglu_hidden(32),
         pos_rule="hf", seed=33),
    # CLIP: OpenAI (TorchScript fp16 and state dict), open_clip (QuickGELU and GELU), Hugging Face
    Spec("clip_openai", "clip", "clip", **CLIP_DIMS, eps=1e-5, act="quick_gelu", ln_pre=True, patch_bias=False,
         final="clip_row", pos_rule="open_clip", seed=41),
    Spec("open_clip_quickgelu", "clip", "clip", **CLIP_DIMS, eps=1e-5, act="quick_gelu", ln_pre=True,
         patch_bias=False, final="open_clip", pos_rule="open_clip", seed=41),
    Spec("open_clip_gelu", "clip", "clip_gelu", **CLIP_DIMS, eps=1e-5, act="gelu", ln_pre=True, patch_bias=False,
         final="open_clip", pos_rule="open_clip", seed=42),
    Spec("clip_hf_vision", "clip", "clip", **{**CLIP_DIMS, "proj": 0}, eps=1e-5, act="quick_gelu", ln_pre=True,
         patch_bias=False, final="clip_row", pos_rule="hf", seed=41),
    Spec("clip_hf_vision_proj", "clip", "clip", **CLIP_DIMS, eps=1e-5, act="quick_gelu", ln_pre=True,
         patch_bias=False, final="clip_row", pos_rule="hf", seed=41),
    Spec("clip_hf_model", "clip", "clip", **CLIP_DIMS, eps=1e-5, act="quick_gelu", ln_pre=True, patch_bias=False,
         final="clip_row", pos_rule="hf", seed=41),
    # SigLIP (Hugging Face): no cls token, tanh-GELU, attention-pooling head
    Spec("siglip_hf_vision", "siglip", "siglip", cls=False, act="gelu_tanh", head="siglip_map", pos_rule="hf", seed=51),
    Spec("siglip_hf_model", "siglip", "siglip", cls=False, act="gelu_tanh", head="siglip_map", pos_rule="hf", seed=51),
    # timm's ViTs without a cls token (vit_*_reg4_gap_*: class_token=False, reg_tokens=4,
    # no_embed_class=True, global_pool='avg', fc_norm, init_values): the mean of the patches, then fc_norm
    Spec("vit_reg4_gap_timm", "vit", "vit_reg4_gap", cls=False, regs=4, no_embed_class=True, layer_scale=True,
         final="mean_fc_norm", head="mean", classes=5, pos_rule="timm", seed=71),
    # vit_medium_patch16_gap_256 (class_token=False, global_pool='avg', fc_norm=False, qkv_bias=False,
    # init_values=1e-6): norm, then the mean; attention without a q/k/v bias
    Spec("vit_gap_timm", "vit", "vit_gap", cls=False, final="norm_mean", head="mean", classes=5, pos_rule="timm",
         layer_scale=True, qkv_bias=False, seed=72),
    # DINOv3 (torch.hub layout): 4 storage tokens, layer scale, LayerNorm eps 1e-5, RoPE (base 100), no
    # position table, the K bias masked; head width 8 (2 RoPE periods per axis)
    Spec("dinov3", "dinov3", "dinov3", regs=4, layer_scale=True, eps=1e-5, rope=True, k_mask=True, seed=81),
    # the same weights as transformers' DINOv3ViTModel saves them (q/k/v/o_proj, no k_proj bias, no periods)
    Spec("dinov3_hf", "dinov3", "dinov3", regs=4, layer_scale=True, eps=1e-5, rope=True, k_mask=True, seed=81),
    # the same weights as timm's Eva holds them (vit_*_patch16_dinov3_qkvb after checkpoint_filter_fn: storage_tokens ->
    # reg_token, ls1/ls2.gamma -> gamma_1/gamma_2, qkv.bias -> q_bias and v_bias, the K third a zero buffer; no periods,
    # no mask token) with timm's default pooling (global_pool 'avg', use_fc_norm=False): the final norm on every token,
    # then the mean of the patch tokens (cls and the 4 registers left out); num_classes 0: that mean is the embedding
    Spec("dinov3_timm", "dinov3", "dinov3", regs=4, layer_scale=True, eps=1e-5, rope=True, k_mask=True,
         final="norm_mean", head="none", seed=81),
    # MAE encoder (pre-training checkpoint: decoder and mask_token present, no head)
    Spec("mae", "mae", "mae", pos_rule="mae", seed=61),
    # AIMv2 (timm aimv2_large_patch14_224: no cls token, RMSNorm eps 1e-5 everywhere and on the patch
    # embeddings, no bias but the patch conv's, SwiGLU of int(D * 2.75) = 88, norm then the mean of the
    # tokens, no head). The same weights as timm saves them and as Apple's ml-aim releases them.
    Spec("aimv2_timm", "aimv2", "aimv2", cls=False, act="swiglu", mlp=88, norm="rms", qkv_bias=False,
         proj_bias=False, patch_norm=True, eps=1e-5, final="norm_mean", head="none", pos_rule="timm", seed=91),
    Spec("aimv2_apple", "aimv2", "aimv2", cls=False, act="swiglu", mlp=88, norm="rms", qkv_bias=False,
         proj_bias=False, patch_norm=True, eps=1e-5, final="norm_mean", head="none", pos_rule="timm", seed=91),
    # EVA-02 (timm eva02_tiny_patch14_224 / eva02_small_patch14_336 form: Eva with pos_embed (cls row included), RoPE
    # 'cat' at ref_feat_shape 16 on the patch tokens, fused qkv with q_bias / v_bias (no K bias), packed SwiGLU of
    # int(D * 4 * 2/3) = 85, no layer scale, eps 1e-6, global_pool 'avg' then fc_norm; norm Identity). The fine-tuned
    # classifier (eva02_*.mim_in22k_ft_in1k) and the same weights without a head (the MIM checkpoints, num_classes 0:
    # the embedding is fc_norm of the mean). Head width 16: 4 bands per axis.
    Spec("eva02_timm", "eva02", "eva02", heads=2, act="swiglu", mlp=int(32 * (4 * 2 / 3)), rope=True, rope_kind="eva",
         rope_ref=families_eva.EVA_REF_GRID, final="mean_fc_norm", head="mean", classes=5, pos_rule="timm", seed=101),
    Spec("eva02_timm_mim", "eva02", "eva02", heads=2, act="swiglu", mlp=int(32 * (4 * 2 / 3)), rope=True,
         rope_kind="eva", rope_ref=families_eva.EVA_REF_GRID, final="mean_fc_norm", head="none", pos_rule="timm",
         seed=101),
    # EVA-02 Base / Large (timm eva02_base_patch14_448 / eva02_large_patch14_448, eva02_base_patch14_224.mim_in22k):
    # as Tiny / Small but qkv_fused=False (q_proj, k_proj without a bias, v_proj) and scale_mlp (timm SwiGLU: fc1_g,
    # fc1_x, a LayerNorm over its int(D * 4 * 2/3) = 85 hidden numbers, fc2). The fine-tuned classifier.
    Spec("eva02_base_timm", "eva02", "eva02_base", heads=2, act="swiglu", mlp=int(32 * (4 * 2 / 3)), rope=True,
         rope_kind="eva", rope_ref=families_eva.EVA_REF_GRID, qkv_fused=False, scale_mlp=True, final="mean_fc_norm",
         head="mean", classes=5, pos_rule="timm", seed=102),
    # PE-Core (timm vit_pe_core_tiny_patch16_384 / small_patch16_384 / base_patch16_224 / large_patch14_336, num_classes
    # 0): no patch bias, norm_pre (ln_pre), pos_embed with the cls row, fused qkv with a bias, RoPE beside the table at
    # ref_feat_shape = the native grid with grid offset 1 and 'xy' indexing, GELU MLP, LayerNorm eps 1e-5, norm on every
    # token, then timm's AttentionPoolLatent (SigLIP's attention-pool math: latent, q; kv on every token, the cls token
    # too; proj; x + mlp(norm(x))) with 8 heads of width 4. Head width 16: 4 bands per axis.
    Spec("pe_core_timm", "pe", "pe_core", heads=2, eps=1e-5, ln_pre=True, patch_bias=False, rope=True, rope_kind="pe",
         rope_ref=NATIVE // 4, map_heads=families_pe.PE_MAP_HEADS, final="norm_all", head="siglip_map",
         pos_rule="timm", seed=111),
    # PE-Core as the released timm/vit_pe_core_*.fb hold it (num_classes 512 / 1024, "output proj dim"): the same
    # weights (same group and seed: the projection is drawn after every other tensor) and PE's proj, which timm's
    # _convert_pe stores as head.weight = proj.T (E, D) with head.bias zeros (E); timm's forward applies head (a Linear)
    # to the attention pool's output. ViTScope reads it as CLIP's projection: embedding = head.resid_post[0] @ proj.
    # E = 24, not the width (32): a transposed head.weight cannot pass for the right one.
    Spec("pe_core_timm_proj", "pe", "pe_core", heads=2, eps=1e-5, ln_pre=True, patch_bias=False, rope=True,
         rope_kind="pe", rope_ref=NATIVE // 4, map_heads=families_pe.PE_MAP_HEADS, final="norm_all",
         head="siglip_map", proj=24, pos_rule="timm", seed=111),
    # The same weights (group and seed) in Meta's own release (facebookresearch/perception_models PE-Core-*.pt: the
    # CLIP model's state dict, the names timm's _convert_pe renames: visual.conv1, class_embedding,
    # positional_embedding, ln_pre, transformer.resblocks.N (in_proj, out_proj, ln_1, ln_2, mlp.c_fc / c_proj), ln_post,
    # attn_pool (probe, attn.in_proj (Q, K, V rows), attn.out_proj, layernorm, mlp), proj (D, E) not transposed) with a
    # small text tower beside it and no config; and in open_clip's (PE-Core-*: timm's vit_pe_core_* with num_classes =
    # embed_dim as visual.trunk.*, its head.weight / zero head.bias the projection, open_clip's custom text tower as
    # text.*, logit_scale; open_clip_config.json naming the timm model). At another size ViTScope resizes the table by
    # timm's rule for both (PE's own _sample_abs_posemb is bilinear without antialias): the reference's pos_rule timm.
    Spec("pe_core_meta", "pe", "pe_core", heads=2, eps=1e-5, ln_pre=True, patch_bias=False, rope=True,
         rope_kind="pe", rope_ref=NATIVE // 4, map_heads=families_pe.PE_MAP_HEADS, final="norm_all",
         head="siglip_map", proj=24, pos_rule="timm", seed=111),
    Spec("pe_core_open_clip", "pe", "pe_core", heads=2, eps=1e-5, ln_pre=True, patch_bias=False, rope=True,
         rope_kind="pe", rope_ref=NATIVE // 4, map_heads=families_pe.PE_MAP_HEADS, final="norm_all",
         head="siglip_map", proj=24, pos_rule="timm", seed=111),
]
SPEC = {s.layout: s for s in SPECS}


# =============================================================================== canonical weights
def make_weights(s: Spec):
    """Random non-trivial weights in one canonical form (float32), shared by every layout of
    a group: matrices ~ 1/sqrt(fan_in), LayerNorm gammas 1 +- 0.2, biases +- 0.1, tokens and
    positions +- 0.5, registers ~ 1, layer-scale gammas 0.6 +- 0.25. An RMSNorm's bias and an absent
    bias (qkv_bias / proj_bias False) are zeros, drawn from nothing: a LayerNorm spec's draws are as before."""
    g = torch.Generator().manual_seed(s.seed)
    rn = lambda *shape: torch.randn(*shape, generator=g)
    mat = lambda o, i: rn(o, i) / math.sqrt(i)
    D, M, P, C = s.D, s.mlp, s.patch, s.C
    assert s.norm in ("layer", "rms"), s.norm
    norm = lambda: (1 + 0.2 * rn(D), 0.1 * rn(D) if s.norm == "layer" else torch.zeros(D))
    bias = lambda n: 0.1 * rn(n) if s.proj_bias else torch.zeros(n)
    c = {"patch_w": rn(D, C, P, P) / math.sqrt(C * P * P)}
    c["patch_b"] = 0.1 * rn(D) if s.patch_bias else None
    c["cls"] = 0.5 * rn(D) if s.cls else None
    c["dist"] = 0.5 * rn(D) if s.dist else None
    c["reg"] = rn(s.regs, D) if s.regs else None
    N = s.grid * s.grid
    # the position table as the original code stores it: cls (and dist) rows first
    c["pos"] = 0.5 * rn((1 + int(s.dist) if s.cls else 0) + N, D)
    if s.rope and s.rope_kind == "dinov3":
        c["pos"] = None
        # dinov3 RopePositionEmbedding._init_weights (base 100): base ** (2 * arange(d // 4) / (d // 2)), float32
        d = D // s.heads
        c["periods"] = 100.0 ** (2 * torch.arange(d // 4, dtype=torch.float32) / (d // 2))
    if s.patch_norm:
        c["patch_norm"] = norm()
    if s.ln_pre:
        c["ln_pre"] = norm()
    blocks = []
    for _ in range(s.depth):
        # SwiGLU: fc1 holds [gate; value] (2M rows, the gate first): dinov2's w12, timm's cat(fc1_g, fc1_x),
        # Apple's cat(fc1, fc3)
        b = {"ln1": norm(), "qkv_w": mat(3 * D, D),
             "qkv_b": 0.1 * rn(3 * D) if s.qkv_bias else torch.zeros(3 * D),
             "proj_w": mat(D, D), "proj_b": bias(D), "ln2": norm(),
             "fc1_w": mat(s.mlp_in, D), "fc1_b": bias(s.mlp_in), "fc2_w": mat(D, M), "fc2_b": bias(D)}
        if s.layer_scale:
            b["ls1"], b["ls2"] = 0.6 + 0.25 * rn(D), 0.6 + 0.25 * rn(D)
        if s.rope_kind == "eva" and s.rope:
            b["qkv_b"][D:2 * D] = 0  # EVA-02: cat(q_bias, k_bias, v_bias) with k_bias a zero buffer
        if s.scale_mlp:  # drawn last: the other specs' draws stay as they were
            b["mlp_norm"] = (1 + 0.2 * rn(M), 0.1 * rn(M))
        if s.k_mask:
            # dinov3 init_weights_vit: bias_mask 1, its middle third (K) 0; the file keeps the unmasked bias
            b["qkv_b_mask"] = torch.ones(3 * D)
            b["qkv_b_mask"][D:2 * D] = 0
        blocks.append(b)
    c["blocks"] = blocks
    c["norm"] = norm()
    if s.head in ("cls", "mean", "distilled"):
        c["head"] = (mat(s.classes, D), 0.1 * rn(s.classes))
    if s.head == "distilled":
        c["head_dist"] = (mat(s.classes, D), 0.1 * rn(s.classes))
    if s.head == "siglip_map":
        c["probe"] = rn(D)
        c["map_in_w"], c["map_in_b"] = mat(3 * D, D), 0.1 * rn(3 * D)
        c["map_out_w"], c["map_out_b"] = mat(D, D), 0.1 * rn(D)
        c["map_ln"] = (1 + 0.2 * rn(D), 0.1 * rn(D))
        c["map_fc1"] = (mat(M, D), 0.1 * rn(M))
        c["map_fc2"] = (mat(D, M), 0.1 * rn(D))
    # drawn after the attention pool (CLIP's specs have none: their draws are as before), so that PE's layout with
    # its projection (pe_core_timm_proj) has pe_core_timm's weights and the projection besides
    if s.proj:
        c["proj"] = rn(D, s.proj) / math.sqrt(D)  # x @ proj (OpenAI layout), HF stores proj.T, timm's PE head.weight
    return c


def map_tensors(c, fn):
    if c is None:
        return None
    if isinstance(c, torch.Tensor):
        return fn(c)
    if isinstance(c, tuple):
        return tuple(map_tensors(x, fn) for x in c)
    if isinstance(c, list):
        return [map_tensors(x, fn) for x in c]
    return {k: map_tensors(v, fn) for k, v in c.items()}


# =============================================================================== the reference forward
def _ln(x, wb, eps, rec, name):
    return vitref.layer_norm(x, wb[0], wb[1], eps, True, False, rec, name)


def _rms(x, w, eps, rec, name):
    """RMSNorm (timm rms_norm, torch nn.RMSNorm): x * rsqrt(mean(x^2) + eps) * w, recording `.rms`
    (sqrt(mean(x^2)) per row, without eps, as the LayerNorm's `.std` is shown), `.normalized`, `.out`."""
    ms = x.pow(2).mean(-1)
    normed = x * torch.rsqrt(ms + eps)[..., None]
    out = normed * w
    rec[name + ".rms"], rec[name + ".normalized"], rec[name + ".out"] = ms.sqrt(), normed, out
    return out


def _norm(s, x, wb, rec, name):
    """The spec's norm at one site: LayerNorm (`.mean`, `.std`, ...) or RMSNorm (`.rms`, ...; its bias is zeros)."""
    if s.norm == "rms":
        assert not wb[1].any(), f"{name}: an RMSNorm has no bias"
        return _rms(x, wb[0], s.eps, rec, name)
    return _ln(x, wb, s.eps, rec, name)


def _act(pre, act):
    if act == "gelu":
        return F.gelu(pre)
    if act == "quick_gelu":
        return pre * torch.sigmoid(1.702 * pre)   # openai/CLIP QuickGELU
    if act == "gelu_tanh":
        return F.gelu(pre, approximate="tanh")     # HF "gelu_pytorch_tanh"
    if act == "swiglu":
        x1, x2 = pre.chunk(2, dim=-1)              # dinov2 SwiGLUFFN: silu(x1) * x2
        return F.silu(x1) * x2
    raise ValueError(act)


def grid_of(s: Spec, hw):
    return hw[0] // s.patch, hw[1] // s.patch


def reference(s: Spec, c, x):
    """Every stage of the family's forward (float64 math on the stored weights).
    c: canonical weights (as stored by the layout, i.e. after any fp16 rounding), x: (C, H, W)."""
    c = map_tensors(c, lambda t: t.double())
    x = x.double()
    rec = {"input": x}
    D, P = s.D, s.patch
    gh, gw = grid_of(s, x.shape[1:])
    rec["patches"] = x.unfold(1, P, P).unfold(2, P, P).permute(1, 2, 0, 3, 4).reshape(gh * gw, s.C * P * P)
    pe = F.conv2d(x[None], c["patch_w"], c["patch_b"], stride=P)[0].flatten(1).T
    rec["patch_embed"] = pe
    if s.patch_norm:  # timm PatchEmbed(norm_layer) / Apple's patchifier.norm: proj, flatten, norm
        pe = _norm(s, pe, c["patch_norm"], rec, "patch_embed.norm")
    special = [c["cls"][None]] if s.cls else []
    if s.dist:
        special.append(c["dist"][None])
    tokens = torch.cat(special + [pe], 0)
    # the stored table in the layout's own form: timm's no_embed_class folds cls's position
    # into cls_token and keeps only the patch rows
    stored = c["pos"]
    if s.no_embed_class and s.cls:  # c["cls"] is the folded cls_token as the file stores it (stored_weights)
        stored = stored[1:]
    rec["tokens"] = tokens
    if s.rope and s.rope_kind == "dinov3":
        # dinov3 prepare_tokens_with_masks: no position table; the positions are RoPE in every block
        rec["embed"] = h = tokens
        return _reference_blocks(s, c, h, rec, (gh, gw))
    fn = POS_RULES[s.pos_rule][0]
    pos = fn(stored, s.prefix, (gh, gw))
    if (gh, gw) != (s.grid, s.grid):
        rec["pos_embed.learned"] = stored
    if s.no_embed_class:
        pos = torch.cat([torch.zeros(tokens.shape[0] - gh * gw, D, dtype=pos.dtype), pos], 0)
    rec["pos_embed"] = pos
    h = tokens + pos
    rec["embed"] = h
    if s.regs:  # after the cls token; without one (timm's reg4_gap), before the patches
        pc = 1 if s.cls else 0
        h = torch.cat([h[:pc], c["reg"], h[pc:]], 0)
        rec["with_registers"] = h
    return _reference_blocks(s, c, h, rec, (gh, gw))


def rope_sin_cos(periods, gh, gw):
    """dinov3 RopePositionEmbedding.forward (normalize_coords="separate", eval: no shift, jitter or rescale):
    the patch centres' coordinates in [-1, 1], angles 2 pi * coord / period for the rows' d/4 periods then
    the columns', tiled twice; (sin, cos), each (gh * gw, d)."""
    periods = periods.double()
    ch = torch.arange(0.5, gh, dtype=torch.float64) / gh
    cw = torch.arange(0.5, gw, dtype=torch.float64) / gw
    coords = torch.stack(torch.meshgrid(ch, cw, indexing="ij"), -1).flatten(0, 1) * 2.0 - 1.0  # (HW, 2)
    ang = (2 * math.pi * coords[:, :, None] / periods[None, None, :]).flatten(1, 2).tile(2)     # (HW, d)
    return torch.sin(ang), torch.cos(ang)


def rope_apply(x, sin, cos):
    """dinov3 layers/attention.py: x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x2, x1)."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], -1) * sin


def _reference_blocks(s, c, h, rec, grid):
    D = s.D
    if s.rope and s.regs:  # dinov3: torch.cat([cls_token, storage_tokens, patches])
        h = torch.cat([h[:1], c["reg"], h[1:]], 0)
        rec["with_registers"] = h
    if s.ln_pre:
        h = _norm(s, h, c["ln_pre"], rec, "ln_pre")
    T, H = h.shape[0], s.heads
    d = D // H
    if s.rope and s.rope_kind == "eva":  # EVA-02: timm RotaryEmbeddingCat at ref_feat_shape, float64
        ang = families_eva.eva_rope_angles(D // H, *grid, s.rope_ref)
        n_pre = T - ang.shape[0]
    elif s.rope and s.rope_kind == "pe":  # PE: the same with grid offset 1 and the column's angles first ('xy')
        ang = families_pe.pe_rope_angles(D // H, *grid, s.rope_ref)
        n_pre = T - ang.shape[0]
    elif s.rope:
        sin, cos = rope_sin_cos(c["periods"], *grid)
        n_pre = T - sin.shape[0]
    for i, b in enumerate(c["blocks"]):
        p = f"blocks.{i}."
        a = _norm(s, h, b["ln1"], rec, p + "ln1")
        bias = b["qkv_b"] * b["qkv_b_mask"] if s.k_mask else b["qkv_b"]
        qkv = F.linear(a, b["qkv_w"], bias)
        q, k, v = [t.reshape(T, H, d).transpose(0, 1) for t in qkv.chunk(3, -1)]
        rec[p + "attn.q"], rec[p + "attn.k"], rec[p + "attn.v"] = q, k, v
        if s.rope:  # the prefix tokens (cls, storage) are not rotated
            turn = ((lambda t: families_eva.eva_rope_apply(t, ang)) if s.rope_kind in ("eva", "pe")
                    else (lambda t: rope_apply(t, sin, cos)))
            q = torch.cat([q[:, :n_pre], turn(q[:, n_pre:])], 1)
            k = torch.cat([k[:, :n_pre], turn(k[:, n_pre:])], 1)
            rec[p + "attn.q_rot"], rec[p + "attn.k_rot"] = q, k
        sc = q @ k.transpose(-1, -2) / math.sqrt(d)
        rec[p + "attn.scores"] = sc
        pat = sc.softmax(-1)
        rec[p + "attn.pattern"] = pat
        z = pat @ v
        rec[p + "attn.z"] = z
        ao = F.linear(z.transpose(0, 1).reshape(T, D), b["proj_w"], b["proj_b"])
        rec[p + "attn.out"] = ao
        if s.layer_scale:
            ao = ao * b["ls1"]
            rec[p + "ls1"] = ao
        h = h + ao
        rec[p + "resid_mid"] = h
        a = _norm(s, h, b["ln2"], rec, p + "ln2")
        pre = F.linear(a, b["fc1_w"], b["fc1_b"])
        post = _act(pre, s.act)
        rec[p + "mlp.pre"], rec[p + "mlp.post"] = pre, post
        if s.scale_mlp:  # timm SwiGLU's norm over the hidden width (EVA-02 Base / Large): .mean, .std, ..., .out
            post = _norm(s, post, b["mlp_norm"], rec, p + "mlp.norm")
        mo = F.linear(post, b["fc2_w"], b["fc2_b"])
        rec[p + "mlp.out"] = mo
        if s.layer_scale:
            mo = mo * b["ls2"]
            rec[p + "ls2"] = mo
        h = h + mo
        rec[p + "resid_post"] = h
    if s.final == "clip_row":
        # openai/CLIP and HF CLIPVisionTransformer: ln_post on the cls row only
        rec["pooled"] = h[0]
        f = _norm(s, h[:1], c["norm"], rec, "ln_final")
        rec["embedding"] = f[0] @ c["proj"] if s.proj else f[0]
        return rec
    if s.final == "mean_fc_norm":
        # timm global_pool='avg': x[:, num_prefix_tokens:].mean(1) (the registers left out), then fc_norm
        pre = (1 if s.cls else 0) + s.regs
        rec["pooled"] = h[pre:].mean(0)
        f = _norm(s, rec["pooled"][None], c["norm"], rec, "ln_final")
        if s.head == "none":  # num_classes 0 (EVA-02's MIM checkpoints): fc_norm's output is the embedding
            rec["embedding"] = f[0]
            return rec
        rec["logits"] = F.linear(f[0], *c["head"])
        rec["probs"] = rec["logits"].softmax(-1)
        return rec
    f = _norm(s, h, c["norm"], rec, "ln_final")
    if s.final == "norm_mean":
        # timm fc_norm=False: x = norm(x); x[:, num_prefix_tokens:].mean(1); head (AIMv2: none, an embedding)
        rec["pooled"] = f[(1 if s.cls else 0) + s.regs:].mean(0)
        if s.head == "none":
            rec["embedding"] = rec["pooled"]
            return rec
        rec["logits"] = F.linear(rec["pooled"], *c["head"])
        rec["probs"] = rec["logits"].softmax(-1)
        return rec
    if s.final == "open_clip":
        # open_clip VisionTransformer._pool (final_ln_after_pool=False): ln_post on every token, then x[:, 0]
        rec["pooled"] = f[0]
        rec["embedding"] = f[0] @ c["proj"]
        return rec
    if s.head == "distilled":
        rec["pooled"], rec["pooled_dist"] = f[0], f[1]
        rec["logits_cls"] = F.linear(f[0], *c["head"])
        rec["logits_dist"] = F.linear(f[1], *c["head_dist"])
        rec["logits"] = (rec["logits_cls"] + rec["logits_dist"]) / 2
        rec["probs"] = rec["logits"].softmax(-1)
    elif s.head == "cls":
        rec["pooled"] = f[0]
        rec["logits"] = F.linear(f[0], *c["head"])
        rec["probs"] = rec["logits"].softmax(-1)
    elif s.head == "siglip_map":
        # HF SiglipMultiheadAttentionPoolingHead: h = MHA(probe, x, x); h = h + mlp(layernorm(h)); h[:, 0]
        # (timm AttentionPoolLatent, PE's: the same with q = Linear(latent), kv = Linear(every token), map_heads heads)
        H = s.map_heads or s.heads
        d = D // H
        rec["head.probe"] = c["probe"][None]
        Wq, Wk, Wv = c["map_in_w"].chunk(3, 0)
        bq, bk, bv = c["map_in_b"].chunk(3, 0)
        N = f.shape[0]
        q = F.linear(c["probe"][None], Wq, bq).reshape(1, H, d).transpose(0, 1)
        k = F.linear(f, Wk, bk).reshape(N, H, d).transpose(0, 1)
        v = F.linear(f, Wv, bv).reshape(N, H, d).transpose(0, 1)
        rec["head.attn.q"], rec["head.attn.k"], rec["head.attn.v"] = q, k, v
        sc = q @ k.transpose(-1, -2) / math.sqrt(d)
        rec["head.attn.scores"] = sc
        pat = sc.softmax(-1)
        rec["head.attn.pattern"] = pat
        z = pat @ v
        rec["head.attn.z"] = z
        ao = F.linear(z.transpose(0, 1).reshape(1, D), c["map_out_w"], c["map_out_b"])
        rec["head.attn.out"] = ao
        a = _ln(ao, c["map_ln"], s.eps, rec, "head.ln")
        pre = F.linear(a, *c["map_fc1"])
        post = _act(pre, s.act)
        mo = F.linear(post, *c["map_fc2"])
        rec["head.mlp.pre"], rec["head.mlp.post"], rec["head.mlp.out"] = pre, post, mo
        rec["head.resid_post"] = ao + mo
        # PE with its projection (timm's head Linear: head.weight = proj.T, head.bias zeros): the pool's row @ proj
        rec["embedding"] = rec["head.resid_post"][0] @ c["proj"] if s.proj else rec["head.resid_post"][0]
    else:
        rec["embedding"] = f[0]
    return rec


# =============================================================================== layouts (key names)
def _t(x):
    return x.detach().clone().float().contiguous()


def _timm_blocks(s, c, sd, pre="blocks.", mlp_names=("fc1", "fc2")):
    """timm / DINO / DINOv2 block keys: norm1, attn.qkv, attn.proj, ls1.gamma, norm2, mlp.*, ls2.gamma."""
    for i, b in enumerate(c["blocks"]):
        p = f"{pre}{i}."
        sd[p + "norm1.weight"], sd[p + "norm1.bias"] = b["ln1"]
        sd[p + "attn.qkv.weight"] = b["qkv_w"]
        if s.qkv_bias:
            sd[p + "attn.qkv.bias"] = b["qkv_b"]
        sd[p + "attn.proj.weight"], sd[p + "attn.proj.bias"] = b["proj_w"], b["proj_b"]
        if s.layer_scale:
            sd[p + "ls1.gamma"], sd[p + "ls2.gamma"] = b["ls1"], b["ls2"]
        sd[p + "norm2.weight"], sd[p + "norm2.bias"] = b["ln2"]
        sd[p + f"mlp.{mlp_names[0]}.weight"], sd[p + f"mlp.{mlp_names[0]}.bias"] = b["fc1_w"], b["fc1_b"]
        sd[p + f"mlp.{mlp_names[1]}.weight"], sd[p + f"mlp.{mlp_names[1]}.bias"] = b["fc2_w"], b["fc2_b"]


# AIMv2's block keys (only weights: no q/k/v, attn.proj or MLP bias, RMSNorms without bias), as timm names them
# (_convert_aimv2: norm_1 -> norm1, mlp.fc1 -> mlp.fc1_g, mlp.fc3 -> mlp.fc1_x, trunk. dropped) and as Apple's
# ml-aim modules do (trunk.blocks.N.{norm_1, attn.qkv, attn.proj, norm_2, mlp.fc1, mlp.fc2, mlp.fc3}).
AIMV2_NAMES = {
    "timm": {"norm1": "norm1", "norm2": "norm2", "gate": "mlp.fc1_g", "value": "mlp.fc1_x", "fc2": "mlp.fc2"},
    "apple": {"norm1": "norm_1", "norm2": "norm_2", "gate": "mlp.fc1", "value": "mlp.fc3", "fc2": "mlp.fc2"},
}


def _aimv2_blocks(s, c, sd, pre, names):
    M = s.mlp
    for i, b in enumerate(c["blocks"]):
        p = f"{pre}{i}."
        sd[p + names["norm1"] + ".weight"] = b["ln1"][0]
        sd[p + "attn.qkv.weight"] = b["qkv_w"]
        sd[p + "attn.proj.weight"] = b["proj_w"]
        sd[p + names["norm2"] + ".weight"] = b["ln2"][0]
        sd[p + names["gate"] + ".weight"] = b["fc1_w"][:M]   # silu(gate(x)) * value(x)
        sd[p + names["value"] + ".weight"] = b["fc1_w"][M:]
        sd[p + names["fc2"] + ".weight"] = b["fc2_w"]


def _hf_qkv(sd, p, b, D):
    for j, n in enumerate(["query", "key", "value"]):
        sd[p + f"attention.attention.{n}.weight"] = b["qkv_w"][j * D:(j + 1) * D]
        sd[p + f"attention.attention.{n}.bias"] = b["qkv_b"][j * D:(j + 1) * D]
    sd[p + "attention.output.dense.weight"], sd[p + "attention.output.dense.bias"] = b["proj_w"], b["proj_b"]


def _hf_clip_layers(s, c, sd, pre):
    """HF CLIPEncoderLayer / SiglipEncoderLayer keys."""
    D = s.D
    for i, b in enumerate(c["blocks"]):
        p = f"{pre}{i}."
        for j, n in enumerate(["q", "k", "v"]):
            sd[p + f"self_attn.{n}_proj.weight"] = b["qkv_w"][j * D:(j + 1) * D]
            sd[p + f"self_attn.{n}_proj.bias"] = b["qkv_b"][j * D:(j + 1) * D]
        sd[p + "self_attn.out_proj.weight"], sd[p + "self_attn.out_proj.bias"] = b["proj_w"], b["proj_b"]
        sd[p + "layer_norm1.weight"], sd[p + "layer_norm1.bias"] = b["ln1"]
        sd[p + "mlp.fc1.weight"], sd[p + "mlp.fc1.bias"] = b["fc1_w"], b["fc1_b"]
        sd[p + "mlp.fc2.weight"], sd[p + "mlp.fc2.bias"] = b["fc2_w"], b["fc2_b"]
        sd[p + "layer_norm2.weight"], sd[p + "layer_norm2.bias"] = b["ln2"]


def _openai_resblocks(sd, pre, blocks):
    """openai/CLIP ResidualAttentionBlock keys (nn.MultiheadAttention's in_proj/out_proj)."""
    for i, b in enumerate(blocks):
        p = f"{pre}{i}."
        sd[p + "ln_1.weight"], sd[p + "ln_1.bias"] = b["ln1"]
        sd[p + "attn.in_proj_weight"], sd[p + "attn.in_proj_bias"] = b["qkv_w"], b["qkv_b"]
        sd[p + "attn.out_proj.weight"], sd[p + "attn.out_proj.bias"] = b["proj_w"], b["proj_b"]
        sd[p + "ln_2.weight"], sd[p + "ln_2.bias"] = b["ln2"]
        sd[p + "mlp.c_fc.weight"], sd[p + "mlp.c_fc.bias"] = b["fc1_w"], b["fc1_b"]
        sd[p + "mlp.c_proj.weight"], sd[p + "mlp.c_proj.bias"] = b["fc2_w"], b["fc2_b"]


def _side_weights(seed, D, depth=1, mlp=None, with_ls=False):
    """Random weights of a part that the vision model does not use (text towers, MAE's decoder)."""
    s = Spec("side", "side", "side", D=D, depth=depth, heads=1, mlp=mlp or 4 * D, layer_scale=with_ls, seed=seed)
    return make_weights(s)


TEXT_CTX, TEXT_VOCAB = 7, 50
OPEN_CLIP_TEXT = "text."  # open_clip CustomTextCLIP's text tower (custom_text: PE-Core-*)


def openai_text_tower(seed, E, Dt=64):
    """openai/CLIP text keys (not part of the image model: the loader skips them)."""
    t = _side_weights(seed, Dt)
    g = torch.Generator().manual_seed(seed + 1)
    sd = collections.OrderedDict()
    sd["positional_embedding"] = 0.1 * torch.randn(TEXT_CTX, Dt, generator=g)
    sd["text_projection"] = torch.randn(Dt, E, generator=g) / math.sqrt(Dt)
    sd["logit_scale"] = torch.tensor(math.log(1 / 0.07))
    sd["token_embedding.weight"] = 0.1 * torch.randn(TEXT_VOCAB, Dt, generator=g)
    _openai_resblocks(sd, "transformer.resblocks.", t["blocks"])
    sd["ln_final.weight"], sd["ln_final.bias"] = t["norm"]
    return sd


def hf_text_tower(seed, Dt, pre="text_model.", siglip=False):
    t = _side_weights(seed, Dt)
    g = torch.Generator().manual_seed(seed + 1)
    sd = collections.OrderedDict()
    sd[pre + "embeddings.token_embedding.weight"] = 0.1 * torch.randn(TEXT_VOCAB, Dt, generator=g)
    sd[pre + "embeddings.position_embedding.weight"] = 0.1 * torch.randn(TEXT_CTX, Dt, generator=g)
    s = Spec("side", "side", "side", D=Dt, heads=1)
    _hf_clip_layers(s, t, sd, pre + "encoder.layers.")
    sd[pre + "final_layer_norm.weight"], sd[pre + "final_layer_norm.bias"] = t["norm"]
    if siglip:
        sd[pre + "head.weight"] = torch.randn(Dt, Dt, generator=g) / math.sqrt(Dt)
        sd[pre + "head.bias"] = 0.1 * torch.randn(Dt, generator=g)
    return sd


def state_dict_of(s: Spec, c):
    """The layout's own state dict (float32 tensors; int64 for buffers some files carry).
    Returns (state dict, key prefixes the image model does not use)."""
    D, N = s.D, s.grid * s.grid
    sd = collections.OrderedDict()
    ignored = []
    L = s.layout
    if L == "deit_timm":  # timm/models/deit.py VisionTransformerDistilled
        sd["cls_token"], sd["dist_token"] = c["cls"].reshape(1, 1, D), c["dist"].reshape(1, 1, D)
        sd["pos_embed"] = c["pos"][None]
        sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"] = c["patch_w"], c["patch_b"]
        _timm_blocks(s, c, sd)
        sd["norm.weight"], sd["norm.bias"] = c["norm"]
        sd["head.weight"], sd["head.bias"] = c["head"]
        sd["head_dist.weight"], sd["head_dist.bias"] = c["head_dist"]
    elif L == "deit_hf":  # transformers DeiTForImageClassificationWithTeacher
        e = "deit.embeddings."
        sd[e + "cls_token"], sd[e + "distillation_token"] = c["cls"].reshape(1, 1, D), c["dist"].reshape(1, 1, D)
        sd[e + "position_embeddings"] = c["pos"][None]
        sd[e + "patch_embeddings.projection.weight"] = c["patch_w"]
        sd[e + "patch_embeddings.projection.bias"] = c["patch_b"]
        for i, b in enumerate(c["blocks"]):
            p = f"deit.encoder.layer.{i}."
            _hf_qkv(sd, p, b, D)
            sd[p + "intermediate.dense.weight"], sd[p + "intermediate.dense.bias"] = b["fc1_w"], b["fc1_b"]
            sd[p + "output.dense.weight"], sd[p + "output.dense.bias"] = b["fc2_w"], b["fc2_b"]
            sd[p + "layernorm_before.weight"], sd[p + "layernorm_before.bias"] = b["ln1"]
            sd[p + "layernorm_after.weight"], sd[p + "layernorm_after.bias"] = b["ln2"]
        sd["deit.layernorm.weight"], sd["deit.layernorm.bias"] = c["norm"]
        sd["cls_classifier.weight"], sd["cls_classifier.bias"] = c["head"]
        sd["distillation_classifier.weight"], sd["distillation_classifier.bias"] = c["head_dist"]
    elif L == "dino":  # facebookresearch/dino VisionTransformer (head = Identity)
        sd["cls_token"], sd["pos_embed"] = c["cls"].reshape(1, 1, D), c["pos"][None]
        sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"] = c["patch_w"], c["patch_b"]
        _timm_blocks(s, c, sd)
        sd["norm.weight"], sd["norm.bias"] = c["norm"]
    elif L in ("dinov2", "dinov2_reg", "dinov2_swiglu"):  # dinov2 DinoVisionTransformer (torch.hub)
        sd["cls_token"], sd["pos_embed"] = c["cls"].reshape(1, 1, D), c["pos"][None]
        if s.regs:
            sd["register_tokens"] = c["reg"][None]
        sd["mask_token"] = 0.1 * torch.ones(1, D)
        ignored.append("mask_token")
        sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"] = c["patch_w"], c["patch_b"]
        _timm_blocks(s, c, sd, mlp_names=("w12", "w3") if s.act == "swiglu" else ("fc1", "fc2"))
        sd["norm.weight"], sd["norm.bias"] = c["norm"]
    elif L == "vit_gap_timm":  # timm VisionTransformer(class_token=False, global_pool='avg', fc_norm=False)
        sd["pos_embed"] = c["pos"][None]
        sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"] = c["patch_w"], c["patch_b"]
        _timm_blocks(s, c, sd)
        sd["norm.weight"], sd["norm.bias"] = c["norm"]  # fc_norm is Identity
        sd["head.weight"], sd["head.bias"] = c["head"]
    elif L == "vit_reg4_gap_timm":  # timm VisionTransformer(class_token=False, reg_tokens=4, global_pool='avg')
        sd["reg_token"] = c["reg"][None]
        sd["pos_embed"] = c["pos"][None]  # the patches' rows only: no cls token, no_embed_class
        sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"] = c["patch_w"], c["patch_b"]
        _timm_blocks(s, c, sd)
        sd["fc_norm.weight"], sd["fc_norm.bias"] = c["norm"]  # norm is Identity (use_fc_norm)
        sd["head.weight"], sd["head.bias"] = c["head"]
    elif L in ("dinov2_timm", "dinov2_timm_reg"):  # timm vit_*_patch14[_reg4]_dinov2 (_convert_dinov2)
        if s.no_embed_class:
            sd["cls_token"] = c["cls"].reshape(1, 1, D)  # already cls + pos[0] (stored_weights)
            sd["reg_token"] = c["reg"][None]
            sd["pos_embed"] = c["pos"][1:][None]
        else:
            sd["cls_token"], sd["pos_embed"] = c["cls"].reshape(1, 1, D), c["pos"][None]
        sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"] = c["patch_w"], c["patch_b"]
        _timm_blocks(s, c, sd)
        sd["norm.weight"], sd["norm.bias"] = c["norm"]
    elif L in ("dinov2_hf", "dinov2_reg_hf", "dinov2_swiglu_hf"):  # transformers Dinov2Model / Dinov2WithRegistersModel
        e = "embeddings."
        sd[e + "cls_token"] = c["cls"].reshape(1, 1, D)
        sd[e + "mask_token"] = 0.1 * torch.ones(1, D)
        ignored.append(e + "mask_token")
        if s.regs:
            sd[e + "register_tokens"] = c["reg"][None]
        sd[e + "position_embeddings"] = c["pos"][None]
        sd[e + "patch_embeddings.projection.weight"] = c["patch_w"]
        sd[e + "patch_embeddings.projection.bias"] = c["patch_b"]
        n1, n2 = ("weights_in", "weights_out") if s.act == "swiglu" else ("fc1", "fc2")
        for i, b in enumerate(c["blocks"]):
            p = f"encoder.layer.{i}."
            sd[p + "norm1.weight"], sd[p + "norm1.bias"] = b["ln1"]
            _hf_qkv(sd, p, b, D)
            sd[p + "layer_scale1.lambda1"] = b["ls1"]
            sd[p + "norm2.weight"], sd[p + "norm2.bias"] = b["ln2"]
            sd[p + f"mlp.{n1}.weight"], sd[p + f"mlp.{n1}.bias"] = b["fc1_w"], b["fc1_b"]
            sd[p + f"mlp.{n2}.weight"], sd[p + f"mlp.{n2}.bias"] = b["fc2_w"], b["fc2_b"]
            sd[p + "layer_scale2.lambda1"] = b["ls2"]
        sd["layernorm.weight"], sd["layernorm.bias"] = c["norm"]
    elif L in ("clip_openai", "open_clip_quickgelu", "open_clip_gelu"):  # openai/CLIP, open_clip visual.*
        v = "visual."
        sd[v + "class_embedding"] = c["cls"]
        sd[v + "positional_embedding"] = c["pos"]
        sd[v + "proj"] = c["proj"]
        sd[v + "conv1.weight"] = c["patch_w"]
        sd[v + "ln_pre.weight"], sd[v + "ln_pre.bias"] = c["ln_pre"]
        _openai_resblocks(sd, v + "transformer.resblocks.", c["blocks"])
        sd[v + "ln_post.weight"], sd[v + "ln_post.bias"] = c["norm"]
        text = openai_text_tower(s.seed + 1000, s.proj)
        sd.update(text)
        ignored += sorted({k.split(".")[0] for k in text})
        if L == "clip_openai":  # the TorchScript archive's state_dict carries these three too
            sd["input_resolution"] = torch.tensor(s.grid * s.patch)
            sd["context_length"] = torch.tensor(TEXT_CTX)
            sd["vocab_size"] = torch.tensor(TEXT_VOCAB)
            ignored += ["input_resolution", "context_length", "vocab_size"]
    elif L.startswith("clip_hf"):  # transformers CLIPVisionModel / ...WithProjection / CLIPModel
        e = "vision_model.embeddings."
        sd[e + "class_embedding"] = c["cls"]
        sd[e + "patch_embedding.weight"] = c["patch_w"]
        sd[e + "position_embedding.weight"] = c["pos"]
        sd["vision_model.pre_layrnorm.weight"], sd["vision_model.pre_layrnorm.bias"] = c["ln_pre"]
        _hf_clip_layers(s, c, sd, "vision_model.encoder.layers.")
        sd["vision_model.post_layernorm.weight"], sd["vision_model.post_layernorm.bias"] = c["norm"]
        if s.proj:
            sd["visual_projection.weight"] = c["proj"].T.contiguous()
        if L == "clip_hf_model":
            # older CLIPModel checkpoints also carry the position_ids buffers (int64)
            sd[e + "position_ids"] = torch.arange(N + 1)[None]
            text = hf_text_tower(s.seed + 1000, 64)
            text["text_model.embeddings.position_ids"] = torch.arange(TEXT_CTX)[None]
            sd.update(text)
            g = torch.Generator().manual_seed(s.seed + 2000)
            sd["text_projection.weight"] = torch.randn(s.proj, 64, generator=g) / 8
            sd["logit_scale"] = torch.tensor(math.log(1 / 0.07))
            ignored += ["text_model.", "text_projection.", "logit_scale", e + "position_ids"]
    elif L.startswith("siglip_hf"):  # transformers SiglipVisionModel / SiglipModel
        e = "vision_model.embeddings."
        sd[e + "patch_embedding.weight"], sd[e + "patch_embedding.bias"] = c["patch_w"], c["patch_b"]
        sd[e + "position_embedding.weight"] = c["pos"]
        _hf_clip_layers(s, c, sd, "vision_model.encoder.layers.")
        sd["vision_model.post_layernorm.weight"], sd["vision_model.post_layernorm.bias"] = c["norm"]
        h = "vision_model.head."
        sd[h + "probe"] = c["probe"].reshape(1, 1, D)
        sd[h + "attention.in_proj_weight"], sd[h + "attention.in_proj_bias"] = c["map_in_w"], c["map_in_b"]
        sd[h + "attention.out_proj.weight"], sd[h + "attention.out_proj.bias"] = c["map_out_w"], c["map_out_b"]
        sd[h + "layernorm.weight"], sd[h + "layernorm.bias"] = c["map_ln"]
        sd[h + "mlp.fc1.weight"], sd[h + "mlp.fc1.bias"] = c["map_fc1"]
        sd[h + "mlp.fc2.weight"], sd[h + "mlp.fc2.bias"] = c["map_fc2"]
        if L == "siglip_hf_model":
            sd.update(hf_text_tower(s.seed + 1000, D, siglip=True))
            sd["logit_scale"] = torch.tensor([math.log(10.0)])
            sd["logit_bias"] = torch.tensor([-10.0])
            ignored += ["text_model.", "logit_scale", "logit_bias"]
    elif L == "dinov3":  # dinov3 DinoVisionTransformer (torch.hub dinov3_vits16: storage tokens, RoPE, K bias masked)
        sd["cls_token"] = c["cls"].reshape(1, 1, D)
        sd["storage_tokens"] = c["reg"][None]
        sd["mask_token"] = 0.1 * torch.ones(1, D)
        ignored.append("mask_token")
        sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"] = c["patch_w"], c["patch_b"]
        sd["rope_embed.periods"] = c["periods"].float()
        _timm_blocks(s, c, sd)
        for i, b in enumerate(c["blocks"]):
            sd[f"blocks.{i}.attn.qkv.bias_mask"] = b["qkv_b_mask"]
        sd["norm.weight"], sd["norm.bias"] = c["norm"]
    elif L == "dinov3_hf":  # transformers DINOv3ViTModel (modeling_dinov3_vit.py)
        e = "embeddings."
        sd[e + "cls_token"], sd[e + "register_tokens"] = c["cls"].reshape(1, 1, D), c["reg"][None]
        sd[e + "mask_token"] = 0.1 * torch.ones(1, 1, D)
        ignored.append(e + "mask_token")
        sd[e + "patch_embeddings.weight"], sd[e + "patch_embeddings.bias"] = c["patch_w"], c["patch_b"]
        for i, b in enumerate(c["blocks"]):
            p = f"layer.{i}."
            sd[p + "norm1.weight"], sd[p + "norm1.bias"] = b["ln1"]
            wq, wk, wv = b["qkv_w"].chunk(3, 0)
            bq, _, bv = b["qkv_b"].chunk(3, 0)  # key_bias=False: the masked K bias is not saved
            sd[p + "attention.q_proj.weight"], sd[p + "attention.q_proj.bias"] = wq, bq
            sd[p + "attention.k_proj.weight"] = wk
            sd[p + "attention.v_proj.weight"], sd[p + "attention.v_proj.bias"] = wv, bv
            sd[p + "attention.o_proj.weight"], sd[p + "attention.o_proj.bias"] = b["proj_w"], b["proj_b"]
            sd[p + "layer_scale1.lambda1"], sd[p + "layer_scale2.lambda1"] = b["ls1"], b["ls2"]
            sd[p + "norm2.weight"], sd[p + "norm2.bias"] = b["ln2"]
            sd[p + "mlp.up_proj.weight"], sd[p + "mlp.up_proj.bias"] = b["fc1_w"], b["fc1_b"]
            sd[p + "mlp.down_proj.weight"], sd[p + "mlp.down_proj.bias"] = b["fc2_w"], b["fc2_b"]
        sd["norm.weight"], sd["norm.bias"] = c["norm"]
    elif L == "dinov3_timm":  # timm Eva (vit_*_patch16_dinov3_qkvb), state_dict() order: own tensors, then children
        sd["cls_token"], sd["reg_token"] = c["cls"].reshape(1, 1, D), c["reg"][None]
        sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"] = c["patch_w"], c["patch_b"]
        for i, b in enumerate(c["blocks"]):
            p = f"blocks.{i}."
            sd[p + "gamma_1"], sd[p + "gamma_2"] = b["ls1"], b["ls2"]
            sd[p + "norm1.weight"], sd[p + "norm1.bias"] = b["ln1"]
            bq, _, bv = b["qkv_b"].chunk(3, 0)  # checkpoint_filter_fn: the K third dropped (k_bias, a zero buffer)
            sd[p + "attn.q_bias"], sd[p + "attn.v_bias"] = bq, bv
            sd[p + "attn.qkv.weight"] = b["qkv_w"]  # nn.Linear(D, 3D, bias=False)
            sd[p + "attn.proj.weight"], sd[p + "attn.proj.bias"] = b["proj_w"], b["proj_b"]
            sd[p + "norm2.weight"], sd[p + "norm2.bias"] = b["ln2"]
            sd[p + "mlp.fc1.weight"], sd[p + "mlp.fc1.bias"] = b["fc1_w"], b["fc1_b"]
            sd[p + "mlp.fc2.weight"], sd[p + "mlp.fc2.bias"] = b["fc2_w"], b["fc2_b"]
        sd["norm.weight"], sd["norm.bias"] = c["norm"]  # use_fc_norm=False: fc_norm is Identity; num_classes 0: no head
    elif L in families_eva.LAYOUTS:  # timm Eva (eva02_tiny / base_patch14_*): families_eva.py
        sd.update(families_eva.eva02_state_dict(s, c))
    elif L in families_pe.LAYOUTS:  # timm Eva (vit_pe_core_*): families_pe.py
        sd.update(families_pe.pe_state_dict(s, c))
    elif L == families_pe.META_LAYOUT:  # perception_models pe.py CLIP.state_dict(): the text tower, then visual.*
        text = openai_text_tower(s.seed + 1000, s.proj)
        sd.update(text)
        sd.update(families_pe.pe_meta_state_dict(s, c))
        ignored += sorted({k.split(".")[0] for k in text})
    elif L == families_pe.OPEN_CLIP_LAYOUT:  # open_clip CustomTextCLIP: logit_scale, visual.trunk.*, text.*
        text = openai_text_tower(s.seed + 1000, s.proj)
        sd["logit_scale"] = text.pop("logit_scale")
        sd.update(families_pe.pe_open_clip_trunk(s, c))
        sd.update((OPEN_CLIP_TEXT + k, v) for k, v in text.items())
        ignored += [OPEN_CLIP_TEXT, "logit_scale"]
    elif L == "mae":  # facebookresearch/mae MaskedAutoencoderViT (encoder keys as timm's)
        sd["cls_token"], sd["pos_embed"] = c["cls"].reshape(1, 1, D), c["pos"][None]
        sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"] = c["patch_w"], c["patch_b"]
        _timm_blocks(s, c, sd)
        sd["norm.weight"], sd["norm.bias"] = c["norm"]
        Dd = 16
        dec = _side_weights(s.seed + 1000, Dd)
        g = torch.Generator().manual_seed(s.seed + 2000)
        sd["mask_token"] = 0.02 * torch.randn(1, 1, Dd, generator=g)
        sd["decoder_embed.weight"] = torch.randn(Dd, D, generator=g) / math.sqrt(D)
        sd["decoder_embed.bias"] = 0.1 * torch.randn(Dd, generator=g)
        sd["decoder_pos_embed"] = 0.5 * torch.randn(1, N + 1, Dd, generator=g)
        _timm_blocks(Spec("side", "side", "side"), dec, sd, pre="decoder_blocks.")
        sd["decoder_norm.weight"], sd["decoder_norm.bias"] = dec["norm"]
        sd["decoder_pred.weight"] = torch.randn(s.patch * s.patch * s.C, Dd, generator=g) / 4
        sd["decoder_pred.bias"] = 0.1 * torch.randn(s.patch * s.patch * s.C, generator=g)
        ignored += ["mask_token", "decoder_"]
    elif L == "aimv2_timm":  # timm VisionTransformer (aimv2_*: embed_norm_layer=RmsNorm, SwiGLU, no biases)
        sd["pos_embed"] = c["pos"][None]
        sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"] = c["patch_w"], c["patch_b"]
        sd["patch_embed.norm.weight"] = c["patch_norm"][0]
        _aimv2_blocks(s, c, sd, "blocks.", AIMV2_NAMES["timm"])
        sd["norm.weight"] = c["norm"][0]  # fc_norm=False: norm, then the mean; num_classes=0: no head
    elif L == "aimv2_apple":  # apple/ml-aim AIMv2VisionEncoder (head_type=None: no head)
        sd["preprocessor.pos_embed"] = c["pos"][None]
        sd["preprocessor.patchifier.proj.weight"] = c["patch_w"]
        sd["preprocessor.patchifier.proj.bias"] = c["patch_b"]
        sd["preprocessor.patchifier.norm.weight"] = c["patch_norm"][0]
        _aimv2_blocks(s, c, sd, "trunk.blocks.", AIMV2_NAMES["apple"])
        sd["trunk.post_trunk_norm.weight"] = c["norm"][0]
    else:
        raise ValueError(L)
    return collections.OrderedDict((k, v.detach().clone().contiguous()) for k, v in sd.items()), ignored


# =============================================================================== configs the repositories ship
def _id2label(k):
    return {str(i): LABELS[i] for i in range(k)}


def _hf_common(extra):
    d = {"torch_dtype": "float32", "transformers_version": "4.46.3"}
    d.update(extra)
    return dict(sorted(d.items()))


def timm_config(s: Spec, architecture, tag, crop_pct, classifier="head", mean_std=(IMAGENET_MEAN, IMAGENET_STD),
                licence=None):
    """timm/models/_hub.py save_config_for_hf: architecture, num_classes, num_features,
    global_pool, model_args (the fixture's small shapes), pretrained_cfg."""
    cfg = {"architecture": architecture, "num_classes": s.classes, "num_features": s.D, "global_pool": "token",
           "model_args": {"img_size": s.grid * s.patch, "patch_size": s.patch, "embed_dim": s.D, "depth": s.depth,
                          "num_heads": s.heads}}
    if s.layer_scale:
        cfg["model_args"]["init_values"] = 1e-5
    if s.regs:
        cfg["model_args"].update({"reg_tokens": s.regs, "no_embed_class": True})
    if not s.cls:
        cfg["model_args"]["class_token"] = False
        cfg["global_pool"] = cfg["model_args"]["global_pool"] = "avg"
    if s.final == "norm_mean":
        cfg["model_args"]["fc_norm"] = False
    if not s.qkv_bias:
        cfg["model_args"]["qkv_bias"] = False
    if not s.proj_bias:
        cfg["model_args"]["proj_bias"] = False
    if s.classes:
        cfg["label_names"] = LABELS[:s.classes]
    cfg["pretrained_cfg"] = {"tag": tag, "custom_load": False, "input_size": [3, s.grid * s.patch, s.grid * s.patch],
                             "fixed_input_size": False, "interpolation": "bicubic", "crop_pct": crop_pct,
                             "crop_mode": "center", "mean": mean_std[0], "std": mean_std[1],
                             "num_classes": s.classes, "pool_size": None, "first_conv": "patch_embed.proj",
                             "classifier": classifier}
    if licence:
        cfg["pretrained_cfg"]["license"] = licence
    return cfg


def timm_dinov3_config(s: Spec):
    """save_config_for_hf of timm's Eva vit_small_patch16_dinov3_qkvb.lvd1689m: _dinov3_cfg (num_classes 0, crop_pct
    1.0, bicubic, ImageNet mean / std, fixed_input_size True, license dinov3-license) and Eva's default global_pool
    'avg'. model_args are Eva's keyword arguments where the fixture differs from the registered model (its small
    shapes); num_reg_tokens 4, init_values, the RoPE settings, LayerNorm eps 1e-5 and use_fc_norm=False are the
    registered model's and not saved (vision_transformer's reg_tokens, no_embed_class, fc_norm are no Eva arguments:
    Eva(**model_args) would refuse them)."""
    cfg = timm_config(s, "vit_small_patch16_dinov3_qkvb", "lvd1689m", 1.0, licence="dinov3-license")
    cfg["global_pool"] = "avg"
    cfg["model_args"] = {k: cfg["model_args"][k] for k in ("img_size", "patch_size", "embed_dim", "depth", "num_heads")}
    cfg["pretrained_cfg"]["fixed_input_size"] = True
    return cfg


def timm_eva02_config(s: Spec):
    """save_config_for_hf of timm's Eva eva02_tiny_patch14_336.mim_in22k_ft_in1k (the classifier: crop_pct 1.0) or
    eva02_tiny_patch14_224.mim_in22k (num_classes 0: eva.py _cfg's crop_pct 0.9), or of
    eva02_base_patch14_448.mim_in22k_ft_in1k (crop_pct 1.0): OpenAI CLIP mean / std, bicubic, fixed_input_size True,
    license mit, Eva's default global_pool 'avg'. model_args are Eva's keyword arguments where the fixture differs from
    the registered model (its small shapes); mlp_ratio 4 * 2/3 (the fixture's 85 = int(32 * 8/3)), swiglu_mlp,
    use_rot_pos_emb, ref_feat_shape (16, 16) and Base's qkv_fused False and scale_mlp are the registered model's, not
    saved."""
    arch, tag, crop = families_eva.arch_tag(s)
    cfg = timm_config(s, arch, tag, crop, mean_std=(OPENAI_MEAN, OPENAI_STD), licence="mit")
    cfg["global_pool"] = "avg"
    cfg["model_args"] = {k: cfg["model_args"][k] for k in ("img_size", "patch_size", "embed_dim", "depth", "num_heads")}
    cfg["pretrained_cfg"]["fixed_input_size"] = True
    return cfg


def timm_pe_config(s: Spec):
    """save_config_for_hf of timm's Eva vit_pe_core_tiny_patch16_384.fb with num_classes 0: _pe_cfg (crop_pct 1.0,
    bicubic, mean / std 0.5, fixed_input_size True, license apache-2.0) and the registered global_pool 'map'.
    model_args are Eva's keyword arguments where the fixture differs from the registered model (its small shapes);
    use_pre_transformer_norm, the RoPE settings (ref_feat_shape, rope_grid_offset, rope_grid_indexing), attn_type 'rope',
    attn_pool_num_heads 8, attn_pool_mlp_ratio 4 and LayerNorm eps 1e-5 are the registered model's, not saved. The
    released timm/vit_pe_core_*.fb hold PE's projection as head.weight / head.bias, num_classes (top level and in
    pretrained_cfg) its width, 512 or 1024 ("output proj dim"): pe_core_timm_proj's config says its 24, no label_names;
    pe_core_timm is the headless form (num_classes 0)."""
    arch, tag, crop = families_pe.arch_tag(s)
    cfg = timm_config(s, arch, tag, crop, mean_std=([0.5] * 3, [0.5] * 3), licence="apache-2.0")
    cfg["global_pool"] = "map"
    if s.proj:
        cfg["num_classes"] = cfg["pretrained_cfg"]["num_classes"] = s.proj
    cfg["model_args"] = {k: cfg["model_args"][k] for k in ("img_size", "patch_size", "embed_dim", "depth", "num_heads")}
    cfg["pretrained_cfg"]["fixed_input_size"] = True
    return cfg


def hf_vit_config(s: Spec, model_type, architectures, **extra):
    d = {"architectures": architectures, "model_type": model_type, "hidden_size": s.D,
         "num_hidden_layers": s.depth, "num_attention_heads": s.heads, "image_size": s.grid * s.patch,
         "patch_size": s.patch, "num_channels": s.C, "layer_norm_eps": s.eps, "qkv_bias": True,
         "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "initializer_range": 0.02}
    d.update(extra)
    return _hf_common(d)


def hf_clip_vision_config(s: Spec, model_type="clip_vision_model"):
    d = {"model_type": model_type, "hidden_size": s.D, "intermediate_size": s.mlp, "num_hidden_layers": s.depth,
         "num_attention_heads": s.heads, "image_size": s.grid * s.patch, "patch_size": s.patch,
         "num_channels": s.C, "layer_norm_eps": s.eps, "attention_dropout": 0.0, "dropout": 0.0,
         "initializer_factor": 1.0, "initializer_range": 0.02}
    if model_type.startswith("clip"):
        d.update({"hidden_act": "quick_gelu", "projection_dim": s.proj or 64})
    else:
        d.update({"hidden_act": "gelu_pytorch_tanh"})
    return dict(sorted(d.items()))


def hf_text_config(model_type, Dt, E=None):
    d = {"model_type": model_type, "hidden_size": Dt, "intermediate_size": 4 * Dt, "num_hidden_layers": 1,
         "num_attention_heads": 1, "max_position_embeddings": TEXT_CTX, "vocab_size": TEXT_VOCAB,
         "layer_norm_eps": 1e-5 if model_type.startswith("clip") else 1e-6,
         "hidden_act": "quick_gelu" if model_type.startswith("clip") else "gelu_pytorch_tanh"}
    if E:
        d["projection_dim"] = E
    return dict(sorted(d.items()))


def preprocessor(kind, side):
    """preprocessor_config.json as the processors write it (the fixture's native size)."""
    if kind == "deit":  # DeiTImageProcessor: squash to 256 (here side / 0.875), centre crop 224
        big = int(round(side / 0.875))
        return {"crop_size": {"height": side, "width": side}, "do_center_crop": True, "do_normalize": True,
                "do_rescale": True, "do_resize": True, "image_mean": IMAGENET_MEAN,
                "image_processor_type": "DeiTImageProcessor", "image_std": IMAGENET_STD, "resample": 3,
                "rescale_factor": 1 / 255, "size": {"height": big, "width": big}}
    if kind == "bit":  # Dinov2's BitImageProcessor: shortest edge 256, centre crop 224
        return {"crop_size": {"height": side, "width": side}, "do_center_crop": True, "do_convert_rgb": True,
                "do_normalize": True, "do_rescale": True, "do_resize": True, "image_mean": IMAGENET_MEAN,
                "image_processor_type": "BitImageProcessor", "image_std": IMAGENET_STD, "resample": 3,
                "rescale_factor": 1 / 255, "size": {"shortest_edge": int(round(side * 256 / 224))}}
    if kind == "clip":  # CLIPImageProcessor: shortest edge 224, centre crop 224, OpenAI mean/std
        return {"crop_size": {"height": side, "width": side}, "do_center_crop": True, "do_convert_rgb": True,
                "do_normalize": True, "do_rescale": True, "do_resize": True, "image_mean": OPENAI_MEAN,
                "image_processor_type": "CLIPImageProcessor", "image_std": OPENAI_STD, "resample": 3,
                "rescale_factor": 1 / 255, "size": {"shortest_edge": side}}
    if kind == "siglip":  # SiglipImageProcessor: squash to height x width, mean = std = 0.5
        return {"do_normalize": True, "do_rescale": True, "do_resize": True, "image_mean": [0.5, 0.5, 0.5],
                "image_processor_type": "SiglipImageProcessor", "image_std": [0.5, 0.5, 0.5],
                "processor_class": "SiglipProcessor", "resample": 3, "rescale_factor": 1 / 255,
                "size": {"height": side, "width": side}}
    raise ValueError(kind)


def open_clip_config(s: Spec, quick_gelu):
    """open_clip push_to_hf_hub.py save_config_for_hf: {"model_cfg": ..., "preprocess_cfg": ...}."""
    model_cfg = {"embed_dim": s.proj,
                 "vision_cfg": {"image_size": s.grid * s.patch, "layers": s.depth, "width": s.D,
                                "patch_size": s.patch},
                 "text_cfg": {"context_length": TEXT_CTX, "vocab_size": TEXT_VOCAB, "width": 64, "heads": 1,
                              "layers": 1}}
    if quick_gelu:
        model_cfg["quick_gelu"] = True
    return {"model_cfg": model_cfg,
            "preprocess_cfg": {"mean": OPENAI_MEAN, "std": OPENAI_STD, "interpolation": "bicubic",
                               "resize_mode": "shortest"}}


def open_clip_pe_config(s: Spec):
    """open_clip's hub open_clip_config.json of PE-Core-* (model_configs/PE-Core-T-16-384.json as save_config_for_hf
    writes it): a timm image tower (timm_model_name, timm_pool 'map', timm_proj null: the timm model's head is the
    projection, num_classes = embed_dim), custom_text, and PE's preprocessing (mean / std 0.5, bicubic, shortest). The
    width, depth, heads and patch are the timm model's (its registration), not in the file."""
    model_cfg = {"embed_dim": s.proj,
                 "vision_cfg": {"image_size": s.grid * s.patch, "timm_model_name": families_pe.arch_tag(s)[0],
                                "timm_model_pretrained": False, "timm_pool": "map", "timm_proj": None},
                 "text_cfg": {"context_length": TEXT_CTX, "vocab_size": TEXT_VOCAB, "width": 64, "heads": 1,
                              "layers": 1},
                 "custom_text": True}
    return {"model_cfg": model_cfg,
            "preprocess_cfg": {"mean": [0.5] * 3, "std": [0.5] * 3, "interpolation": "bicubic",
                               "resize_mode": "shortest"}}


def configs_of(s: Spec):
    """{file name: JSON object} shipped beside the weights of this layout."""
    side = s.grid * s.patch
    L = s.layout
    if L == "deit_timm":
        return {"config.json": timm_config(s, "deit_tiny_distilled_patch16_224", "fb_in1k", 0.875,
                                           classifier=["head", "head_dist"])}
    if L == "deit_hf":
        return {"config.json": hf_vit_config(s, "deit", ["DeiTForImageClassificationWithTeacher"],
                                             hidden_act="gelu", intermediate_size=s.mlp, encoder_stride=s.patch,
                                             id2label=_id2label(s.classes),
                                             label2id={v: int(k) for k, v in _id2label(s.classes).items()}),
                "preprocessor_config.json": preprocessor("deit", side)}
    if L == "vit_reg4_gap_timm":
        return {"config.json": timm_config(s, "vit_betwixt_patch16_reg4_gap_256", "sbb_in1k", 0.95)}
    if L == "vit_gap_timm":
        return {"config.json": timm_config(s, "vit_medium_patch16_gap_256", "sw_in12k_ft_in1k", 0.95)}
    if L == "aimv2_timm":  # timm aimv2_large_patch14_224.apple_pt: OPENAI_CLIP_MEAN / STD, crop_pct 1.0, no classes
        return {"config.json": timm_config(s, "aimv2_large_patch14_224", "apple_pt", 1.0,
                                           mean_std=(OPENAI_MEAN, OPENAI_STD), licence="apple-ascl")}
    if L == "dinov3_timm":
        return {"config.json": timm_dinov3_config(s)}
    if L in families_eva.LAYOUTS:
        return {"config.json": timm_eva02_config(s)}
    if L in families_pe.LAYOUTS:
        return {"config.json": timm_pe_config(s)}
    if L == families_pe.OPEN_CLIP_LAYOUT:
        return {"open_clip_config.json": open_clip_pe_config(s)}
    if L in ("dinov2_timm", "dinov2_timm_reg"):
        arch = "vit_small_patch14_reg4_dinov2" if s.regs else "vit_small_patch14_dinov2"
        return {"config.json": timm_config(s, arch, "lvd142m", 1.0)}
    if L in ("dinov2_hf", "dinov2_swiglu_hf"):
        return {"config.json": hf_vit_config(s, "dinov2", ["Dinov2Model"], hidden_act="gelu", mlp_ratio=4,
                                             layerscale_value=1.0, use_swiglu_ffn=s.act == "swiglu",
                                             drop_path_rate=0.0),
                "preprocessor_config.json": preprocessor("bit", side)}
    if L == "dinov2_reg_hf":
        return {"config.json": hf_vit_config(s, "dinov2_with_registers", ["Dinov2WithRegistersModel"],
                                             hidden_act="gelu", mlp_ratio=4, layerscale_value=1.0,
                                             use_swiglu_ffn=False, drop_path_rate=0.0,
                                             num_register_tokens=s.regs,
                                             out_features=[f"stage{s.depth}"], out_indices=[s.depth],
                                             stage_names=["stem"] + [f"stage{i + 1}" for i in range(s.depth)]),
                "preprocessor_config.json": preprocessor("bit", side)}
    if L == "open_clip_quickgelu":
        return {"open_clip_config.json": open_clip_config(s, True)}
    if L == "open_clip_gelu":
        return {"open_clip_config.json": open_clip_config(s, False)}
    if L == "clip_hf_vision":
        d = hf_clip_vision_config(s)
        d.update({"architectures": ["CLIPVisionModel"]})
        return {"config.json": _hf_common(d), "preprocessor_config.json": preprocessor("clip", side)}
    if L == "clip_hf_vision_proj":
        d = hf_clip_vision_config(s)
        d.update({"architectures": ["CLIPVisionModelWithProjection"]})
        return {"config.json": _hf_common(d), "preprocessor_config.json": preprocessor("clip", side)}
    if L == "clip_hf_model":
        d = {"architectures": ["CLIPModel"], "model_type": "clip", "projection_dim": s.proj,
             "logit_scale_init_value": 2.6592, "initializer_factor": 1.0,
             "text_config": hf_text_config("clip_text_model", 64, s.proj),
             "vision_config": hf_clip_vision_config(s)}
        return {"config.json": _hf_common(d), "preprocessor_config.json": preprocessor("clip", side)}
    if L == "siglip_hf_vision":
        d = hf_clip_vision_config(s, "siglip_vision_model")
        d.update({"architectures": ["SiglipVisionModel"]})
        return {"config.json": _hf_common(d), "preprocessor_config.json": preprocessor("siglip", side)}
    if L == "siglip_hf_model":
        d = {"architectures": ["SiglipModel"], "model_type": "siglip", "initializer_factor": 1.0,
             "text_config": hf_text_config("siglip_text_model", s.D),
             "vision_config": hf_clip_vision_config(s, "siglip_vision_model")}
        return {"config.json": _hf_common(d), "preprocessor_config.json": preprocessor("siglip", side)}
    if L == "dinov3_hf":  # DINOv3ViTConfig.to_json_string, DINOv3ViTImageProcessorFast (straight resize, bilinear)
        d = {"architectures": ["DINOv3ViTModel"], "model_type": "dinov3_vit", "hidden_size": s.D,
             "intermediate_size": s.mlp, "num_hidden_layers": s.depth, "num_attention_heads": s.heads,
             "image_size": side, "patch_size": s.patch, "num_channels": s.C, "layer_norm_eps": s.eps,
             "hidden_act": "gelu", "rope_theta": 100.0, "num_register_tokens": s.regs, "layerscale_value": 1.0,
             "query_bias": True, "key_bias": False, "value_bias": True, "proj_bias": True, "mlp_bias": True,
             "use_gated_mlp": False, "pos_embed_rescale": 2.0, "drop_path_rate": 0.0, "initializer_range": 0.02}
        pre = {"do_normalize": True, "do_rescale": True, "do_resize": True, "image_mean": IMAGENET_MEAN,
               "image_processor_type": "DINOv3ViTImageProcessorFast", "image_std": IMAGENET_STD, "resample": 2,
               "rescale_factor": 1 / 255, "size": {"height": side, "width": side}}
        return {"config.json": _hf_common(d), "preprocessor_config.json": pre}
    return {}


# =============================================================================== replicas (independent paths)
# Modules with the layouts' own parameter names, each doing its forward (and its
# position-embedding interpolation) the way the named upstream module does. They are
# loaded from the layout's state dict and their outputs compared with reference().

class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


def act_module(act):
    return {"gelu": nn.GELU(), "quick_gelu": QuickGELU(), "gelu_tanh": nn.GELU(approximate="tanh")}[act]


class _Gamma(nn.Module):  # dinov2 LayerScale / timm LayerScale: x * gamma
    def __init__(self, D):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(D))

    def forward(self, x):
        return x * self.gamma


class _TimmAttention(nn.Module):
    def __init__(self, D, H, qkv_bias=True, proj_bias=True):
        super().__init__()
        self.H = H
        self.qkv, self.proj = nn.Linear(D, 3 * D, bias=qkv_bias), nn.Linear(D, D, bias=proj_bias)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.H, C // self.H).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q @ k.transpose(-2, -1)) * (C // self.H) ** -0.5
        return self.proj((attn.softmax(-1) @ v).transpose(1, 2).reshape(B, N, C))


class _Mlp(nn.Module):
    def __init__(self, D, M, act, names=("fc1", "fc2")):
        super().__init__()
        self.names = names
        self.swiglu = act == "swiglu"
        setattr(self, names[0], nn.Linear(D, 2 * M if self.swiglu else M))
        setattr(self, names[1], nn.Linear(M, D))
        self.act = None if self.swiglu else act_module(act)

    def forward(self, x):
        x = getattr(self, self.names[0])(x)
        if self.swiglu:  # dinov2 SwiGLUFFN / timm SwiGLUPacked (gate_last=False)
            x1, x2 = x.chunk(2, dim=-1)
            x = F.silu(x1) * x2
        else:
            x = self.act(x)
        return getattr(self, self.names[1])(x)


class _TimmRmsNorm(nn.Module):
    """timm layers/norm.py RmsNorm (fast_norm.py rms_norm): x * rsqrt(mean(x^2, -1) + eps) * weight."""

    def __init__(self, D, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(D))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _timm_norm(s):
    """timm's norm_layer of the spec: LayerNorm, or RmsNorm (aimv2_*)."""
    return _TimmRmsNorm(s.D, s.eps) if s.norm == "rms" else nn.LayerNorm(s.D, eps=s.eps)


class _TimmSwiGLU(nn.Module):
    """timm layers/mlp.py SwiGLU (aimv2_*: mlp_layer=SwiGLU, bias=proj_bias): fc2(act(fc1_g(x)) * fc1_x(x))."""

    def __init__(self, D, M, bias):
        super().__init__()
        self.fc1_g, self.fc1_x = nn.Linear(D, M, bias=bias), nn.Linear(D, M, bias=bias)
        self.act = nn.SiLU()
        self.fc2 = nn.Linear(M, D, bias=bias)

    def forward(self, x):
        return self.fc2(self.act(self.fc1_g(x)) * self.fc1_x(x))


class _TimmBlock(nn.Module):
    def __init__(self, s, mlp_names=("fc1", "fc2")):
        super().__init__()
        self.norm1 = _timm_norm(s)
        self.attn = _TimmAttention(s.D, s.heads, s.qkv_bias, s.proj_bias)
        self.ls1 = _Gamma(s.D) if s.layer_scale else nn.Identity()
        self.norm2 = _timm_norm(s)
        if s.family == "aimv2":  # timm's SwiGLU with split fc1_g / fc1_x (not SwiGLUPacked)
            self.mlp = _TimmSwiGLU(s.D, s.mlp, s.proj_bias)
        else:
            assert s.proj_bias
            self.mlp = _Mlp(s.D, s.mlp, s.act, mlp_names)
        self.ls2 = _Gamma(s.D) if s.layer_scale else nn.Identity()

    def forward(self, x):
        x = x + self.ls1(self.attn(self.norm1(x)))
        return x + self.ls2(self.mlp(self.norm2(x)))


class _PatchEmbed(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.proj = nn.Conv2d(s.C, s.D, s.patch, s.patch)
        if s.patch_norm:  # timm PatchEmbed(norm_layer=embed_norm_layer): proj, flatten, norm
            self.norm = _timm_norm(s)


class TimmViT(nn.Module):
    """timm VisionTransformer (dynamic_img_size=True) / VisionTransformerDistilled / MAE's
    models_vit: _pos_embed (cls [dist|reg], no_embed_class), blocks, norm, forward_head."""

    def __init__(self, s):
        super().__init__()
        self.s = s
        D, N = s.D, s.grid * s.grid
        if s.cls:
            self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
        if s.dist:
            self.dist_token = nn.Parameter(torch.zeros(1, 1, D))
        if s.regs:
            self.reg_token = nn.Parameter(torch.zeros(1, s.regs, D))
        self.num_prefix_tokens = int(s.cls) + int(s.dist) + s.regs
        # timm: embed_len = num_patches if no_embed_class else num_patches + num_prefix_tokens
        self.pos_embed = nn.Parameter(torch.zeros(1, N if s.no_embed_class else N + self.num_prefix_tokens, D))
        self.patch_embed = _PatchEmbed(s)
        self.blocks = nn.ModuleList([_TimmBlock(s) for _ in range(s.depth)])
        # use_fc_norm (global_pool='avg'): norm is Identity and fc_norm follows the pooling
        if s.final == "mean_fc_norm":
            self.fc_norm = _timm_norm(s)
        else:
            self.norm = _timm_norm(s)
        if s.head in ("cls", "mean", "distilled"):
            self.head = nn.Linear(D, s.classes)
        if s.dist:
            self.head_dist = nn.Linear(D, s.classes)

    def forward(self, img):
        s = self.s
        x = self.patch_embed.proj(img)                 # B, D, gh, gw
        B, C, H, W = x.shape
        x = x.flatten(2).transpose(1, 2)
        if s.patch_norm:
            x = self.patch_embed.norm(x)
        # resample_abs_pos_embed(pos_embed, (H, W), old_size=grid, num_prefix_tokens=0 if no_embed_class else n)
        npt = 0 if s.no_embed_class else self.num_prefix_tokens
        pos = self.pos_embed
        if not (H * W + npt == pos.shape[1] and H == W):
            prefix, grid = pos[:, :npt], pos[:, npt:]
            grid = grid.reshape(1, s.grid, s.grid, -1).permute(0, 3, 1, 2)
            grid = F.interpolate(grid, size=(H, W), mode="bicubic", antialias=True)
            pos = torch.cat([prefix, grid.permute(0, 2, 3, 1).reshape(1, -1, C)], 1)
        to_cat = [self.cls_token.expand(B, -1, -1)] if s.cls else []
        if s.dist:
            to_cat.append(self.dist_token.expand(B, -1, -1))
        if s.regs:
            to_cat.append(self.reg_token.expand(B, -1, -1))
        if s.no_embed_class:
            x = torch.cat(to_cat + [x + pos], 1)
        else:
            x = torch.cat(to_cat + [x], 1) + pos
        outs = []
        for blk in self.blocks:
            x = blk(x)
            outs.append(x[0])
        if s.final == "mean_fc_norm":  # forward_head: pool (avg of x[:, num_prefix_tokens:]), fc_norm, head
            out = self.head(self.fc_norm(x[:, self.num_prefix_tokens:].mean(1)))
            return out[0], outs
        x = self.norm(x)
        if s.final == "norm_mean":  # norm, then forward_head: pool (avg), fc_norm = Identity, head
            pooled = x[:, self.num_prefix_tokens:].mean(1)
            return (self.head(pooled) if s.head != "none" else pooled)[0], outs
        if s.head == "distilled":
            out = (self.head(x[:, 0]) + self.head_dist(x[:, 1])) / 2
        elif s.head == "cls":
            out = self.head(x[:, 0])
        else:
            out = x[:, 0]
        return out[0], outs


class MaeEncoder(nn.Module):
    """facebookresearch/mae models_vit.VisionTransformer.forward_features (global_pool=False)
    with util/pos_embed.py interpolate_pos_embed applied to the table for another grid."""

    def __init__(self, s):
        super().__init__()
        self.s = s
        self.cls_token = nn.Parameter(torch.zeros(1, 1, s.D))
        self.pos_embed = nn.Parameter(torch.zeros(1, s.grid * s.grid + 1, s.D))
        self.patch_embed = _PatchEmbed(s)
        self.blocks = nn.ModuleList([_TimmBlock(s) for _ in range(s.depth)])
        self.norm = nn.LayerNorm(s.D, eps=s.eps)

    def forward(self, img):
        s = self.s
        x = self.patch_embed.proj(img)
        B, C, gh, gw = x.shape
        x = x.flatten(2).transpose(1, 2)
        pos = self.pos_embed
        if (gh, gw) != (s.grid, s.grid):
            extra, tok = pos[:, :1], pos[:, 1:]
            tok = tok.reshape(-1, s.grid, s.grid, C).permute(0, 3, 1, 2)
            tok = F.interpolate(tok, size=(gh, gw), mode="bicubic", align_corners=False)
            pos = torch.cat((extra, tok.permute(0, 2, 3, 1).flatten(1, 2)), dim=1)
        x = torch.cat((self.cls_token.expand(B, -1, -1), x), dim=1) + pos
        outs = []
        for blk in self.blocks:
            x = blk(x)
            outs.append(x[0])
        return self.norm(x)[:, 0][0], outs


class _AppleRMSNorm(nn.Module):
    """torch.nn.RMSNorm (ml-aim aim/v2/torch/layers.py: RMSNorm = nn.RMSNorm, eps=1e-5), written out for torch
    versions without it: x / sqrt(mean(x^2) + eps) * weight."""

    def __init__(self, D, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(D))

    def forward(self, x):
        return x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps) * self.weight


class _AppleAttention(nn.Module):
    """ml-aim aim/v1/torch/layers.py Attention(qkv_bias=False, use_bias=False): qkv, scaled dot product, proj."""

    def __init__(self, D, H):
        super().__init__()
        self.num_heads = H
        self.qkv = nn.Linear(D, 3 * D, bias=False)
        self.proj = nn.Linear(D, D, bias=False)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4).unbind(0)
        # F.scaled_dot_product_attention upstream (torch >= 2.0); its math: softmax(q k^T / sqrt(d)) v
        w = torch.softmax(torch.einsum("bhnd,bhmd->bhnm", q, k) / math.sqrt(C // self.num_heads), dim=-1)
        return self.proj(torch.einsum("bhnm,bhmd->bhnd", w, v).transpose(1, 2).reshape(B, N, C))


class _AppleSwiGLUFFN(nn.Module):
    """ml-aim aim/v2/torch/layers.py SwiGLUFFN(use_bias=False): fc2(silu(fc1(x)) * fc3(x))."""

    def __init__(self, D, M):
        super().__init__()
        self.fc1 = nn.Linear(D, M, bias=False)
        self.fc2 = nn.Linear(M, D, bias=False)
        self.fc3 = nn.Linear(D, M, bias=False)

    def forward(self, x):
        return self.fc2(F.silu(self.fc1(x)) * self.fc3(x))


class _AppleBlock(nn.Module):
    """ml-aim aim/v1/torch/layers.py Block: x + attn(norm_1(x)), then x + mlp(norm_2(x))."""

    def __init__(self, s):
        super().__init__()
        self.attn = _AppleAttention(s.D, s.heads)
        self.norm_1 = _AppleRMSNorm(s.D, s.eps)
        self.mlp = _AppleSwiGLUFFN(s.D, s.mlp)
        self.norm_2 = _AppleRMSNorm(s.D, s.eps)

    def forward(self, x):
        x = x + self.attn(self.norm_1(x))
        return x + self.mlp(self.norm_2(x))


class AppleAimv2(nn.Module):
    """apple/ml-aim AIMv2VisionEncoder (aimv2_large: pos_embed_type="absolute", head_type=None): preprocessor
    (patchifier: proj, flatten, norm; tokens + pos_embed[:, :N], no cls token), trunk (blocks, post_trunk_norm),
    head = Identity, so the encoder returns every token. Apple's code never resizes the table (it slices the
    first N rows): the module is built for the run's grid with a table resized beforehand (replica_for, timm's
    rule). Returns (mean of the tokens, [block outputs]) and keeps the tokens as `self.tokens`."""

    def __init__(self, s, n_patches):
        super().__init__()
        D = s.D
        self.preprocessor = nn.Module()
        self.preprocessor.patchifier = nn.Module()
        self.preprocessor.patchifier.proj = nn.Conv2d(s.C, D, kernel_size=s.patch, stride=s.patch)
        self.preprocessor.patchifier.norm = _AppleRMSNorm(D, s.eps)
        self.preprocessor.pos_embed = nn.Parameter(torch.zeros(1, n_patches, D))
        self.trunk = nn.Module()
        self.trunk.blocks = nn.ModuleList([_AppleBlock(s) for _ in range(s.depth)])
        self.trunk.post_trunk_norm = _AppleRMSNorm(D, s.eps)
        self.tokens = None

    def forward(self, img):
        pf = self.preprocessor.patchifier
        tokens = pf.norm(pf.proj(img).flatten(2).transpose(1, 2))
        N = tokens.shape[1]
        x = tokens + self.preprocessor.pos_embed[:, :N]
        outs = []
        for blk in self.trunk.blocks:
            x = blk(x)
            outs.append(x[0])
        self.tokens = self.trunk.post_trunk_norm(x)
        return self.tokens.mean(1)[0], outs


class DinoViT(nn.Module):
    """facebookresearch/dino and dinov2 vision_transformer.py: prepare_tokens(_with_masks)
    with interpolate_pos_encoding(x, w, h), registers after the position embedding."""

    def __init__(self, s, v2):
        super().__init__()
        self.s, self.v2 = s, v2
        D = s.D
        self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
        self.pos_embed = nn.Parameter(torch.zeros(1, s.grid * s.grid + 1, D))
        if s.regs:
            self.register_tokens = nn.Parameter(torch.zeros(1, s.regs, D))
        if v2:
            self.mask_token = nn.Parameter(torch.zeros(1, D))
        # dinov2/hub/backbones.py: reg models interpolate_offset=0.0, interpolate_antialias=True
        self.interpolate_offset = 0.0 if s.regs else 0.1
        self.interpolate_antialias = bool(s.regs)
        self.patch_embed = _PatchEmbed(s)
        names = ("w12", "w3") if s.act == "swiglu" else ("fc1", "fc2")
        self.blocks = nn.ModuleList([_TimmBlock(s, names) for _ in range(s.depth)])
        self.norm = nn.LayerNorm(D, eps=s.eps)

    def interpolate_pos_encoding(self, x, w, h):
        npatch = x.shape[1] - 1
        N = self.pos_embed.shape[1] - 1
        if npatch == N and w == h:
            return self.pos_embed
        class_pos_embed, patch_pos_embed = self.pos_embed[:, 0], self.pos_embed[:, 1:]
        dim = x.shape[-1]
        w0, h0 = w // self.s.patch, h // self.s.patch
        M = int(math.sqrt(N))
        if self.interpolate_offset:
            kw = {"scale_factor": (float(w0 + self.interpolate_offset) / M, float(h0 + self.interpolate_offset) / M)}
        else:
            kw = {"size": (w0, h0)}
        patch_pos_embed = F.interpolate(patch_pos_embed.reshape(1, M, M, dim).permute(0, 3, 1, 2), mode="bicubic",
                                        antialias=self.interpolate_antialias, **kw)
        assert (w0, h0) == tuple(patch_pos_embed.shape[-2:])
        patch_pos_embed = patch_pos_embed.permute(0, 2, 3, 1).reshape(1, -1, dim)
        return torch.cat((class_pos_embed.unsqueeze(0), patch_pos_embed), dim=1)

    def forward(self, img):
        B, nc, w, h = img.shape
        x = self.patch_embed.proj(img).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls_token.expand(B, -1, -1), x), dim=1)
        x = x + self.interpolate_pos_encoding(x, w, h)
        if self.s.regs:
            x = torch.cat((x[:, :1], self.register_tokens.expand(B, -1, -1), x[:, 1:]), dim=1)
        outs = []
        for blk in self.blocks:
            x = blk(x)
            outs.append(x[0])
        return self.norm(x)[:, 0][0], outs


class _Dinov3KMaskedLinear(nn.Linear):
    """dinov3 layers/attention.py LinearKMaskedBias: the bias times its bias_mask buffer."""

    def __init__(self, i, o):
        super().__init__(i, o)
        self.register_buffer("bias_mask", torch.full_like(self.bias, math.nan))

    def forward(self, x):
        return F.linear(x, self.weight, self.bias * self.bias_mask)


class _Dinov3Attention(nn.Module):
    """dinov3 SelfAttention with mask_k_bias: qkv, then RoPE on the patch rows of q and k."""

    def __init__(self, D, H):
        super().__init__()
        self.H = H
        self.qkv = _Dinov3KMaskedLinear(D, 3 * D)
        self.proj = nn.Linear(D, D)

    def forward(self, x, rope):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.H, C // self.H).unbind(2)
        q, k, v = [t.transpose(1, 2) for t in (q, k, v)]
        sin, cos = rope
        pre = N - sin.shape[-2]

        def rot(t):  # x * cos + rotate_half(x) * sin on the rows after the prefix
            u = t[:, :, pre:]
            half = u.shape[-1] // 2
            return torch.cat([t[:, :, :pre], u * cos + torch.cat([-u[..., half:], u[..., :half]], -1) * sin], 2)

        q, k = rot(q), rot(k)
        a = (q @ k.transpose(-1, -2) * (C // self.H) ** -0.5).softmax(-1)
        return self.proj((a @ v).transpose(1, 2).reshape(B, N, C))


class _Dinov3Block(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(s.D, eps=s.eps), nn.LayerNorm(s.D, eps=s.eps)
        self.attn = _Dinov3Attention(s.D, s.heads)
        self.ls1, self.ls2 = _Gamma(s.D), _Gamma(s.D)
        self.mlp = _Mlp(s.D, s.mlp, s.act)

    def forward(self, x, rope):
        x = x + self.ls1(self.attn(self.norm1(x), rope))
        return x + self.ls2(self.mlp(self.norm2(x)))


class Dinov3ViT(nn.Module):
    """facebookresearch/dinov3 DinoVisionTransformer (eval): prepare_tokens_with_masks (cls, storage
    tokens, patches; no position table), RopePositionEmbedding(H, W) with its periods buffer, blocks,
    norm; returns x_norm_clstoken."""

    def __init__(self, s):
        super().__init__()
        self.s = s
        D = s.D
        self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
        self.storage_tokens = nn.Parameter(torch.zeros(1, s.regs, D))
        self.mask_token = nn.Parameter(torch.zeros(1, D))
        self.patch_embed = _PatchEmbed(s)
        self.rope_embed = nn.Module()
        self.rope_embed.register_buffer("periods", torch.empty(D // s.heads // 4))
        self.blocks = nn.ModuleList([_Dinov3Block(s) for _ in range(s.depth)])
        self.norm = nn.LayerNorm(D, eps=s.eps)

    def rope(self, H, W):
        dd = {"dtype": self.rope_embed.periods.dtype}
        ch, cw = torch.arange(0.5, H, **dd) / H, torch.arange(0.5, W, **dd) / W
        coords = 2.0 * torch.stack(torch.meshgrid(ch, cw, indexing="ij"), dim=-1).flatten(0, 1) - 1.0
        angles = (2 * math.pi * coords[:, :, None] / self.rope_embed.periods[None, None, :]).flatten(1, 2).tile(2)
        return torch.sin(angles), torch.cos(angles)

    def forward(self, img):
        B = img.shape[0]
        x = self.patch_embed.proj(img)
        H, W = x.shape[2:]
        x = x.flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(B, -1, -1), self.storage_tokens.expand(B, -1, -1), x], 1)
        outs = []
        for blk in self.blocks:
            x = blk(x, self.rope(H, W))
            outs.append(x[0])
        return self.norm(x)[:, 0][0], outs


class _HFDinov3Layer(nn.Module):
    """transformers DINOv3ViTLayer: norm1, attention (q/k/v/o_proj, RoPE on the patch rows), layer_scale1,
    norm2, mlp (up_proj, down_proj), layer_scale2."""

    def __init__(self, s):
        super().__init__()
        D = s.D
        self.H = s.heads
        self.norm1, self.norm2 = nn.LayerNorm(D, eps=s.eps), nn.LayerNorm(D, eps=s.eps)
        self.attention = nn.Module()
        self.attention.q_proj, self.attention.v_proj = nn.Linear(D, D), nn.Linear(D, D)
        self.attention.k_proj = nn.Linear(D, D, bias=False)
        self.attention.o_proj = nn.Linear(D, D)
        self.layer_scale1, self.layer_scale2 = nn.Module(), nn.Module()
        self.layer_scale1.lambda1, self.layer_scale2.lambda1 = nn.Parameter(torch.ones(D)), nn.Parameter(torch.ones(D))
        self.mlp = nn.Module()
        self.mlp.up_proj, self.mlp.down_proj = nn.Linear(D, s.mlp), nn.Linear(s.mlp, D)

    def forward(self, x, cos, sin):
        B, T, D = x.shape
        a = self.attention
        h = self.norm1(x)
        sh = lambda t: t.view(B, T, self.H, D // self.H).transpose(1, 2)
        q, k, v = sh(a.q_proj(h)), sh(a.k_proj(h)), sh(a.v_proj(h))
        n = sin.shape[-2]

        def rot(t):  # apply_rotary_pos_emb: the patches only, rotate_half = cat(-x2, x1)
            pre, pat = t.split((T - n, n), dim=-2)
            x1, x2 = pat[..., : pat.shape[-1] // 2], pat[..., pat.shape[-1] // 2:]
            return torch.cat((pre, pat * cos + torch.cat((-x2, x1), -1) * sin), dim=-2)

        w = (rot(q) @ rot(k).transpose(-1, -2) * (D // self.H) ** -0.5).softmax(-1)
        x = x + a.o_proj((w @ v).transpose(1, 2).reshape(B, T, D)) * self.layer_scale1.lambda1
        return x + self.mlp.down_proj(F.gelu(self.mlp.up_proj(self.norm2(x)))) * self.layer_scale2.lambda1


class HFDinov3(nn.Module):
    """transformers DINOv3ViTModel: embeddings (cls, register tokens, patches), DINOv3ViTRopePositionEmbedding
    (inv_freq = 1 / rope_theta ** arange(0, 1, 4 / head_dim), not saved), layers, norm; pooler_output."""

    def __init__(self, s):
        super().__init__()
        self.s = s
        D = s.D
        self.embeddings = nn.Module()
        self.embeddings.cls_token = nn.Parameter(torch.zeros(1, 1, D))
        self.embeddings.mask_token = nn.Parameter(torch.zeros(1, 1, D))
        self.embeddings.register_tokens = nn.Parameter(torch.zeros(1, s.regs, D))
        self.embeddings.patch_embeddings = nn.Conv2d(s.C, D, s.patch, s.patch)
        self.layer = nn.ModuleList([_HFDinov3Layer(s) for _ in range(s.depth)])
        self.norm = nn.LayerNorm(D, eps=s.eps)
        self.register_buffer("inv_freq", 1 / 100.0 ** torch.arange(0, 1, 4 / (D // s.heads)), persistent=False)

    def forward(self, img):
        B = img.shape[0]
        x = self.embeddings.patch_embeddings(img)
        h, w = x.shape[2:]
        x = torch.cat([self.embeddings.cls_token.expand(B, -1, -1), self.embeddings.register_tokens.expand(B, -1, -1),
                       x.flatten(2).transpose(1, 2)], 1)
        ch = torch.arange(0.5, h, dtype=x.dtype) / h
        cw = torch.arange(0.5, w, dtype=x.dtype) / w
        coords = 2.0 * torch.stack(torch.meshgrid(ch, cw, indexing="ij"), dim=-1).flatten(0, 1) - 1.0
        ang = (2 * math.pi * coords[:, :, None] * self.inv_freq.to(x.dtype)[None, None, :]).flatten(1, 2).tile(2)
        cos, sin = torch.cos(ang), torch.sin(ang)
        outs = []
        for blk in self.layer:
            x = blk(x, cos, sin)
            outs.append(x[0])
        return self.norm(x)[:, 0][0], outs


# ---- timm's Eva (DINOv3)
def _timm_dinov3_periods(d, temperature=100.0):
    """timm RotaryEmbeddingDinoV3._compute_periods: temperature ** (2 * arange(d / 4) / (d / 2)), float32."""
    exponents = 2.0 * torch.arange(d // 4, dtype=torch.float32) / (d // 2)
    return temperature ** exponents


class _TimmRopeDinoV3(nn.Module):
    """timm RotaryEmbeddingDinoV3 (rotate_half, normalize_coords 'separate', eval: no coordinate augmentation):
    the periods a non-persistent buffer; make_coords_dinov3 in float32, then the angles in the periods' dtype;
    get_embed(shape) = cat(sin, cos), each (HW, d) with the d / 2 angles tiled twice."""

    def __init__(self, d, coords_dtype=torch.float32):
        super().__init__()
        self.coords_dtype = coords_dtype  # timm's float32; float64 only to show that the rest agrees to rounding
        self.register_buffer("periods", _timm_dinov3_periods(d), persistent=False)

    def get_embed(self, shape):
        H, W = shape
        ch = torch.arange(0.5, H, dtype=self.coords_dtype) / float(H)  # make_coords_dinov3: float32 coordinates
        cw = torch.arange(0.5, W, dtype=self.coords_dtype) / float(W)
        coords = 2.0 * torch.stack(torch.meshgrid(ch, cw, indexing="ij"), dim=-1).flatten(0, 1) - 1.0
        coords = coords[:, :, None].to(self.periods.dtype)
        angles = (2 * math.pi * coords / self.periods[None, None, :]).flatten(1).tile(2)
        return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)


class _EvaAttention(nn.Module):
    """timm EvaAttention (qkv_fused, qkv_bias=True, rotate_half, eager path): F.linear with the bias
    cat(q_bias, k_bias, v_bias), k_bias a zero non-persistent buffer; RoPE (apply_rot_embed_cat, half) on the
    tokens after num_prefix_tokens; scale_norm off (norm = Identity)."""

    def __init__(self, D, H, num_prefix_tokens):
        super().__init__()
        self.H, self.npt = H, num_prefix_tokens
        self.qkv = nn.Linear(D, 3 * D, bias=False)
        self.q_bias = nn.Parameter(torch.zeros(D))
        self.register_buffer("k_bias", torch.zeros(D), persistent=False)
        self.v_bias = nn.Parameter(torch.zeros(D))
        self.proj = nn.Linear(D, D)

    def forward(self, x, rope):
        B, N, C = x.shape
        qkv = F.linear(x, weight=self.qkv.weight, bias=torch.cat((self.q_bias, self.k_bias, self.v_bias)))
        q, k, v = qkv.reshape(B, N, 3, self.H, -1).permute(2, 0, 3, 1, 4).unbind(0)
        sin, cos = rope.chunk(2, -1)

        def rot(t):  # apply_rot_embed_cat(half=True): t * cos + rope_rotate_half(t) * sin, rotate_half = cat(-t2, t1)
            t1, t2 = t.chunk(2, dim=-1)
            return t * cos + torch.cat([-t2, t1], dim=-1) * sin

        q = torch.cat([q[:, :, :self.npt, :], rot(q[:, :, self.npt:, :])], dim=2).type_as(v)
        k = torch.cat([k[:, :, :self.npt, :], rot(k[:, :, self.npt:, :])], dim=2).type_as(v)
        attn = ((q * (C // self.H) ** -0.5) @ k.transpose(-2, -1)).softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(B, N, C))


class _EvaBlock(nn.Module):
    """timm EvaBlock (init_values set: gamma_1, gamma_2; Mlp fc1 / GELU / fc2, no SwiGLU)."""

    def __init__(self, s, num_prefix_tokens):
        super().__init__()
        D = s.D
        self.gamma_1, self.gamma_2 = nn.Parameter(torch.ones(D)), nn.Parameter(torch.ones(D))
        self.norm1, self.norm2 = nn.LayerNorm(D, eps=s.eps), nn.LayerNorm(D, eps=s.eps)
        self.attn = _EvaAttention(D, s.heads, num_prefix_tokens)
        self.mlp = _Mlp(D, s.mlp, s.act)

    def forward(self, x, rope):
        x = x + self.gamma_1 * self.attn(self.norm1(x), rope=rope)
        return x + self.gamma_2 * self.mlp(self.norm2(x))


class TimmEva(nn.Module):
    """timm Eva as vit_small_patch16_dinov3_qkvb builds it (dynamic_img_size, class_token, num_reg_tokens,
    use_abs_pos_emb=False, rope_type 'dinov3' with temperature 100, use_fc_norm=False, num_classes 0):
    _pos_embed (cls, reg, patches; the RoPE of the run's grid), blocks, norm, then forward_head: global_pool_nlc
    ('avg': x[:, num_prefix_tokens:].mean(1); 'token': x[:, 0]), fc_norm and head Identity."""

    def __init__(self, s, global_pool="avg", coords_dtype=torch.float32):
        super().__init__()
        D = s.D
        self.global_pool = global_pool
        self.num_prefix_tokens = 1 + s.regs
        self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
        self.reg_token = nn.Parameter(torch.zeros(1, s.regs, D))
        self.patch_embed = _PatchEmbed(s)
        self.rope = _TimmRopeDinoV3(D // s.heads, coords_dtype)
        self.blocks = nn.ModuleList([_EvaBlock(s, self.num_prefix_tokens) for _ in range(s.depth)])
        self.norm = nn.LayerNorm(D, eps=s.eps)

    def forward(self, img):
        x = self.patch_embed.proj(img).permute(0, 2, 3, 1)  # PatchEmbed(output_fmt='NHWC')
        B, H, W, C = x.shape
        x = x.view(B, -1, C)
        rope = self.rope.get_embed(shape=(H, W))
        x = torch.cat([self.cls_token.expand(B, -1, -1), self.reg_token.expand(B, -1, -1), x], dim=1)
        outs = []
        for blk in self.blocks:
            x = blk(x, rope=rope)
            outs.append(x[0])
        x = self.norm(x)
        self.tokens = x
        pooled = x[:, 0] if self.global_pool == "token" else x[:, self.num_prefix_tokens:].mean(dim=1)
        return pooled[0], outs


# ---- Hugging Face
class _HFSelfAttention(nn.Module):
    def __init__(self, D, H):
        super().__init__()
        self.H = H
        self.query, self.key, self.value = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)

    def forward(self, x):
        B, T, D = x.shape
        sh = lambda t: t.view(B, T, self.H, D // self.H).transpose(1, 2)
        q, k, v = sh(self.query(x)), sh(self.key(x)), sh(self.value(x))
        w = torch.matmul(q, k.transpose(-1, -2)) * (D // self.H) ** -0.5
        return torch.matmul(w.softmax(-1), v).transpose(1, 2).reshape(B, T, D)


class _HFAttention(nn.Module):
    def __init__(self, D, H):
        super().__init__()
        self.attention = _HFSelfAttention(D, H)
        self.output = nn.Module()
        self.output.dense = nn.Linear(D, D)

    def forward(self, x):
        return self.output.dense(self.attention(x))


class _HFDeiTLayer(nn.Module):  # ViTLayer: layernorm_before, attention, layernorm_after, intermediate, output
    def __init__(self, s):
        super().__init__()
        self.attention = _HFAttention(s.D, s.heads)
        self.intermediate, self.output = nn.Module(), nn.Module()
        self.intermediate.dense, self.output.dense = nn.Linear(s.D, s.mlp), nn.Linear(s.mlp, s.D)
        self.layernorm_before = nn.LayerNorm(s.D, eps=s.eps)
        self.layernorm_after = nn.LayerNorm(s.D, eps=s.eps)

    def forward(self, x):
        x = self.attention(self.layernorm_before(x)) + x
        return self.output.dense(F.gelu(self.intermediate.dense(self.layernorm_after(x)))) + x


class _HFLambda(nn.Module):
    def __init__(self, D):
        super().__init__()
        self.lambda1 = nn.Parameter(torch.ones(D))

    def forward(self, x):
        return x * self.lambda1


class _HFDinov2Layer(nn.Module):  # Dinov2Layer
    def __init__(self, s):
        super().__init__()
        self.norm1 = nn.LayerNorm(s.D, eps=s.eps)
        self.attention = _HFAttention(s.D, s.heads)
        self.layer_scale1 = _HFLambda(s.D)
        self.norm2 = nn.LayerNorm(s.D, eps=s.eps)
        names = ("weights_in", "weights_out") if s.act == "swiglu" else ("fc1", "fc2")
        self.mlp = _Mlp(s.D, s.mlp, s.act, names)
        self.layer_scale2 = _HFLambda(s.D)

    def forward(self, x):
        x = self.layer_scale1(self.attention(self.norm1(x))) + x
        return self.layer_scale2(self.mlp(self.norm2(x))) + x


class _HFPatch(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.projection = nn.Conv2d(s.C, s.D, s.patch, s.patch)


class HFEmbeddings(nn.Module):
    """DeiTEmbeddings / Dinov2Embeddings / Dinov2WithRegistersEmbeddings."""

    def __init__(self, s):
        super().__init__()
        self.s = s
        D, N = s.D, s.grid * s.grid
        self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
        if s.dist:
            self.distillation_token = nn.Parameter(torch.zeros(1, 1, D))
        if s.family == "dinov2":
            self.mask_token = nn.Parameter(torch.zeros(1, D))
        if s.regs:
            self.register_tokens = nn.Parameter(torch.zeros(1, s.regs, D))
        self.position_embeddings = nn.Parameter(torch.zeros(1, N + 1 + int(s.dist), D))
        self.patch_embeddings = _HFPatch(s)

    def interpolate_pos_encoding(self, embeddings, height, width):
        n_special = 2 if self.s.dist else 1
        num_patches = embeddings.shape[1] - n_special
        num_positions = self.position_embeddings.shape[1] - n_special
        if num_patches == num_positions and height == width:
            return self.position_embeddings
        special, patch_pos_embed = self.position_embeddings[:, :n_special], self.position_embeddings[:, n_special:]
        dim = embeddings.shape[-1]
        new_height, new_width = height // self.s.patch, width // self.s.patch
        sq = int(num_positions ** 0.5)
        patch_pos_embed = patch_pos_embed.reshape(1, sq, sq, dim).permute(0, 3, 1, 2)
        kw = {"antialias": True} if self.s.regs else {}
        patch_pos_embed = F.interpolate(patch_pos_embed, size=(new_height, new_width), mode="bicubic",
                                        align_corners=False, **kw)
        patch_pos_embed = patch_pos_embed.permute(0, 2, 3, 1).reshape(1, -1, dim)
        return torch.cat((special, patch_pos_embed), dim=1)

    def forward(self, pixel_values):
        B, _, height, width = pixel_values.shape
        emb = self.patch_embeddings.projection(pixel_values).flatten(2).transpose(1, 2)
        parts = [self.cls_token.expand(B, -1, -1)]
        if self.s.dist:
            parts.append(self.distillation_token.expand(B, -1, -1))
        emb = torch.cat(parts + [emb], dim=1)
        emb = emb + self.interpolate_pos_encoding(emb, height, width)
        if self.s.regs:
            emb = torch.cat((emb[:, :1], self.register_tokens.expand(B, -1, -1), emb[:, 1:]), dim=1)
        return emb


class HFViTLike(nn.Module):
    """DeiTModel (inside DeiTForImageClassificationWithTeacher) / Dinov2Model / Dinov2WithRegistersModel."""

    def __init__(self, s):
        super().__init__()
        self.s = s
        self.embeddings = HFEmbeddings(s)
        self.encoder = nn.Module()
        layer = _HFDeiTLayer if s.family == "deit" else _HFDinov2Layer
        self.encoder.layer = nn.ModuleList([layer(s) for _ in range(s.depth)])
        self.layernorm = nn.LayerNorm(s.D, eps=s.eps)

    def forward(self, img):
        x = self.embeddings(img)
        outs = []
        for lyr in self.encoder.layer:
            x = lyr(x)
            outs.append(x[0])
        return self.layernorm(x), outs


class HFDeiTWithTeacher(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.deit = HFViTLike(s)
        self.cls_classifier = nn.Linear(s.D, s.classes)
        self.distillation_classifier = nn.Linear(s.D, s.classes)

    def forward(self, img):
        x, outs = self.deit(img)
        return ((self.cls_classifier(x[:, 0]) + self.distillation_classifier(x[:, 1])) / 2)[0], outs


class HFDinov2(HFViTLike):
    def forward(self, img):
        x, outs = super().forward(img)
        return x[:, 0][0], outs


class _HFClipAttention(nn.Module):
    def __init__(self, D, H):
        super().__init__()
        self.H = H
        self.k_proj, self.v_proj, self.q_proj, self.out_proj = [nn.Linear(D, D) for _ in range(4)]

    def forward(self, x):
        B, T, D = x.shape
        sh = lambda t: t.view(B, T, -1, D // self.H).transpose(1, 2)
        q, k, v = sh(self.q_proj(x)), sh(self.k_proj(x)), sh(self.v_proj(x))
        w = torch.matmul(q, k.transpose(-1, -2)) * (D // self.H) ** -0.5
        return self.out_proj(torch.matmul(w.softmax(-1), v).transpose(1, 2).reshape(B, T, D))


class _HFClipMlp(nn.Module):
    def __init__(self, D, M, act):
        super().__init__()
        self.fc1, self.fc2, self.act = nn.Linear(D, M), nn.Linear(M, D), act_module(act)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class _HFClipLayer(nn.Module):  # CLIPEncoderLayer / SiglipEncoderLayer
    def __init__(self, s):
        super().__init__()
        self.self_attn = _HFClipAttention(s.D, s.heads)
        self.layer_norm1 = nn.LayerNorm(s.D, eps=s.eps)
        self.mlp = _HFClipMlp(s.D, s.mlp, s.act)
        self.layer_norm2 = nn.LayerNorm(s.D, eps=s.eps)

    def forward(self, x):
        x = x + self.self_attn(self.layer_norm1(x))
        return x + self.mlp(self.layer_norm2(x))


class _SiglipHead(nn.Module):
    """SiglipMultiheadAttentionPoolingHead, with torch.nn.MultiheadAttention (an attention path
    independent of the reference's)."""

    def __init__(self, s):
        super().__init__()
        self.probe = nn.Parameter(torch.zeros(1, 1, s.D))
        self.attention = nn.MultiheadAttention(s.D, s.heads, batch_first=True)
        self.layernorm = nn.LayerNorm(s.D, eps=s.eps)
        self.mlp = _HFClipMlp(s.D, s.mlp, s.act)

    def forward(self, x):
        h = self.attention(self.probe.repeat(x.shape[0], 1, 1), x, x)[0]
        h = h + self.mlp(self.layernorm(h))
        return h[:, 0]


class HFVisionEmbeddings(nn.Module):
    """CLIPVisionEmbeddings / SiglipVisionEmbeddings with interpolate_pos_encoding=True."""

    def __init__(self, s):
        super().__init__()
        self.s = s
        if s.cls:
            self.class_embedding = nn.Parameter(torch.zeros(s.D))
        self.patch_embedding = nn.Conv2d(s.C, s.D, s.patch, s.patch, bias=s.patch_bias)
        self.position_embedding = nn.Embedding(s.grid * s.grid + int(s.cls), s.D)

    def forward(self, pixel_values):
        s = self.s
        B, _, height, width = pixel_values.shape
        emb = self.patch_embedding(pixel_values).flatten(2).transpose(1, 2)
        if s.cls:
            emb = torch.cat([self.class_embedding.expand(B, 1, -1), emb], dim=1)
        pos = self.position_embedding.weight.unsqueeze(0)
        n = int(s.cls)
        if not (emb.shape[1] == pos.shape[1] and height == width):
            special, grid = pos[:, :n], pos[:, n:]
            sq = int((pos.shape[1] - n) ** 0.5)
            grid = grid.reshape(1, sq, sq, s.D).permute(0, 3, 1, 2)
            grid = F.interpolate(grid, size=(height // s.patch, width // s.patch), mode="bicubic",
                                 align_corners=False)
            pos = torch.cat((special, grid.permute(0, 2, 3, 1).reshape(1, -1, s.D)), dim=1)
        return emb + pos


class HFVisionTransformer(nn.Module):
    """CLIPVisionTransformer (pre_layrnorm, post_layernorm on the cls row) / SiglipVisionTransformer
    (post_layernorm on every token, attention-pooling head)."""

    def __init__(self, s):
        super().__init__()
        self.s = s
        self.embeddings = HFVisionEmbeddings(s)
        if s.ln_pre:
            self.pre_layrnorm = nn.LayerNorm(s.D, eps=s.eps)
        self.encoder = nn.Module()
        self.encoder.layers = nn.ModuleList([_HFClipLayer(s) for _ in range(s.depth)])
        self.post_layernorm = nn.LayerNorm(s.D, eps=s.eps)
        if s.head == "siglip_map":
            self.head = _SiglipHead(s)

    def forward(self, img):
        x = self.embeddings(img)
        if self.s.ln_pre:
            x = self.pre_layrnorm(x)
        outs = []
        for lyr in self.encoder.layers:
            x = lyr(x)
            outs.append(x[0])
        if self.s.head == "siglip_map":
            return self.head(self.post_layernorm(x)), outs
        return self.post_layernorm(x[:, 0, :]), outs


class HFVisionModel(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.vision_model = HFVisionTransformer(s)
        if s.proj:
            self.visual_projection = nn.Linear(s.D, s.proj, bias=False)

    def forward(self, img):
        x, outs = self.vision_model(img)
        if hasattr(self, "visual_projection"):
            x = self.visual_projection(x)
        return x[0], outs


# ---- OpenAI CLIP / open_clip (also scripted: the TorchScript archive)
class LayerNormFp32(nn.LayerNorm):
    """openai/CLIP model.py LayerNorm: computes in float32 for fp16 inputs (in float64 for the
    float64 self-checks)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        orig = x.dtype
        y = x.type(torch.float32) if x.dtype == torch.float16 else x
        w, b = self.weight, self.bias
        return F.layer_norm(y, self.normalized_shape, w.type(y.dtype), b.type(y.dtype), self.eps).type(orig)


class ResidualAttentionBlock(nn.Module):
    def __init__(self, d_model: int, n_head: int, act: str, eps: float):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_head)
        self.ln_1 = LayerNormFp32(d_model, eps=eps)
        self.mlp = nn.Sequential(collections.OrderedDict([
            ("c_fc", nn.Linear(d_model, d_model * 4)),
            ("gelu", QuickGELU() if act == "quick_gelu" else nn.GELU()),
            ("c_proj", nn.Linear(d_model * 4, d_model))]))
        self.ln_2 = LayerNormFp32(d_model, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class _Resblocks(nn.Module):
    def __init__(self, width: int, layers: int, heads: int, act: str, eps: float):
        super().__init__()
        self.resblocks = nn.Sequential(*[ResidualAttentionBlock(width, heads, act, eps) for _ in range(layers)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.resblocks(x)


class OpenAIVisual(nn.Module):
    """openai/CLIP model.py VisionTransformer (open_clip's with ln_post over all tokens gives the
    same cls row)."""

    def __init__(self, s, n_patches: int):
        super().__init__()
        D = s.D
        self.conv1 = nn.Conv2d(3, D, kernel_size=s.patch, stride=s.patch, bias=False)
        self.class_embedding = nn.Parameter(torch.zeros(D))
        self.positional_embedding = nn.Parameter(torch.zeros(n_patches + 1, D))
        self.ln_pre = LayerNormFp32(D, eps=s.eps)
        self.transformer = _Resblocks(D, s.depth, s.heads, s.act, s.eps)
        self.ln_post = LayerNormFp32(D, eps=s.eps)
        self.proj = nn.Parameter(torch.zeros(D, s.proj))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        x = x.reshape(x.shape[0], x.shape[1], -1).permute(0, 2, 1)
        cls = self.class_embedding.to(x.dtype) + torch.zeros(x.shape[0], 1, x.shape[-1], dtype=x.dtype)
        x = torch.cat([cls, x], dim=1) + self.positional_embedding.to(x.dtype)
        x = self.ln_pre(x)
        x = self.transformer(x.permute(1, 0, 2)).permute(1, 0, 2)
        return self.ln_post(x[:, 0, :]) @ self.proj


class OpenAICLIP(nn.Module):
    """The image half of openai/CLIP's CLIP module, plus its text parameters (unused here)
    so that the archive holds the same keys as a released one."""

    def __init__(self, s, n_patches: int, resolution: int, archive_buffers: bool = True):
        super().__init__()
        self.visual = OpenAIVisual(s, n_patches)
        Dt = 64
        self.transformer = _Resblocks(Dt, 1, 1, "quick_gelu", 1e-5)
        self.token_embedding = nn.Embedding(TEXT_VOCAB, Dt)
        self.positional_embedding = nn.Parameter(torch.zeros(TEXT_CTX, Dt))
        self.ln_final = LayerNormFp32(Dt, eps=1e-5)
        self.text_projection = nn.Parameter(torch.zeros(Dt, s.proj))
        self.logit_scale = nn.Parameter(torch.ones([]))
        if archive_buffers:  # in the released archives' state_dict (openai/CLIP build_model deletes them)
            self.register_buffer("input_resolution", torch.tensor(resolution))
            self.register_buffer("context_length", torch.tensor(TEXT_CTX))
            self.register_buffer("vocab_size", torch.tensor(TEXT_VOCAB))

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.visual(image.type(self.visual.conv1.weight.dtype))


def openai_block_outputs(model: OpenAIVisual, img):
    """Runs OpenAIVisual and returns (embedding, [cls row after each block]) via hooks."""
    outs = []
    hooks = [b.register_forward_hook(lambda m, i, o: outs.append(o[:, 0])) for b in model.transformer.resblocks]
    e = model(img)
    for h in hooks:
        h.remove()
    return e[0], outs


# =============================================================================== files
def inputs():
    """The model inputs every layout runs on (float32, as a loader would hand them over)."""
    g = torch.Generator().manual_seed(2026)
    return {"native": torch.randn(3, NATIVE, NATIVE, generator=g), "other": torch.randn(3, *OTHER, generator=g)}


def stored_weights(s: Spec):
    """The canonical weights as this layout's files hold them: OpenAI's archives are fp16."""
    c = make_weights(s)
    if s.layout == "clip_openai":
        c = map_tensors(c, lambda t: t.half().float())
    if s.layout == "dinov3_hf":
        # transformers keeps inv_freq = 1 / rope_theta ** arange(0, 1, 4 / d) in float32 (not saved), where dinov3
        # keeps the periods rope_theta ** (2 * arange(d / 4) / (d / 2)): the same numbers but for float32 rounding
        d = s.D // s.heads
        c["periods"] = 1.0 / (1 / 100.0 ** torch.arange(0, 1, 4 / d)).double()
    if s.no_embed_class and s.cls:
        # timm's _convert_dinov2: cls_token + pos_embed[:, 0], summed in float32 and stored so
        c["cls"] = (c["cls"] + c["pos"][0]).float()
    return c


def _save_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=False)
        f.write("\n")


def write_files(s: Spec, c, sd, out):
    """Writes the weights in the forms this layout's checkpoints come as; returns
    [(file, what it is)]."""
    files = []
    st = lambda name, tensors, meta=None, what="": (
        vitref.write_safetensors(os.path.join(out, name), tensors, meta), files.append((name, what)))
    pt = lambda name, obj, what="": (torch.save(obj, os.path.join(out, name)), files.append((name, what)))
    hf_meta = {"format": "pt"}
    L = s.layout
    if L in ("vit_reg4_gap_timm", "vit_gap_timm"):
        st("model.safetensors", sd, hf_meta, "timm (Hugging Face hub timm/vit_*_gap_*)")
        pt("pytorch_model.bin", sd, "timm, torch.save(state_dict)")
    elif L == "deit_timm":
        st("model.safetensors", sd, hf_meta, "timm (Hugging Face hub timm/...)")
        pt("deit_checkpoint.pth", {"model": sd}, "facebookresearch/deit release: torch.save({'model': state_dict})")
    elif L in ("deit_hf", "clip_hf_model"):
        st("model.safetensors", sd, hf_meta, "Hugging Face")
        pt("pytorch_model.bin", sd, "Hugging Face, torch.save(state_dict)")
    elif L == "dino":
        st("dino_backbone.safetensors", sd, None, "backbone state dict")
        pt("dino_backbone.pth", sd, "facebookresearch/dino release: torch.save(backbone state_dict)")
        g = torch.Generator().manual_seed(s.seed + 5)
        head = collections.OrderedDict()  # DINOHead: mlp (3 layers), weight-normed last_layer
        hid, bott, K = 48, 16, 64
        head["mlp.0.weight"], head["mlp.0.bias"] = torch.randn(hid, s.D, generator=g) / 6, torch.zeros(hid)
        head["mlp.2.weight"], head["mlp.2.bias"] = torch.randn(hid, hid, generator=g) / 7, torch.zeros(hid)
        head["mlp.4.weight"], head["mlp.4.bias"] = torch.randn(bott, hid, generator=g) / 7, torch.zeros(bott)
        head["last_layer.weight_g"] = torch.ones(K, 1)
        head["last_layer.weight_v"] = torch.randn(K, bott, generator=g)
        teacher = collections.OrderedDict([("backbone." + k, v) for k, v in sd.items()] +
                                          [("head." + k, v) for k, v in head.items()])
        student = collections.OrderedDict([("module." + k, v) for k, v in teacher.items()])
        args = _argparse_for_pickle.Namespace(arch="vit_small", patch_size=s.patch, out_dim=K, epochs=100)
        pt("dino_full_checkpoint.pth",
           {"student": student, "teacher": teacher, "optimizer": {"state": {}, "param_groups": []}, "epoch": 100,
            "args": args, "dino_loss": {"center": torch.zeros(1, K)}},
           "facebookresearch/dino full checkpoint: 'teacher' (backbone.*, head.*), 'student' (module.backbone.*), "
           "an argparse.Namespace under 'args'")
        st("dino_teacher.safetensors", teacher, None, "the teacher's flat keys: backbone.* and head.*")
        st("dino_student.safetensors", student, None, "the student's flat keys (DDP): module.backbone.*, module.head.*")
    elif L in ("dinov2", "dinov2_reg", "dinov2_swiglu"):
        pt(f"{L}_pretrain.pth", sd, "dinov2 torch.hub release: torch.save(state_dict)")
        st("model.safetensors", sd, None, "the same state dict as safetensors")
    elif L == "clip_openai":
        half = collections.OrderedDict((k, v.half() if v.is_floating_point() else v) for k, v in sd.items())
        st("clip_state_dict.safetensors", half, None, "the archive's state_dict, fp16")
        m = OpenAICLIP(s, s.grid * s.grid, s.grid * s.patch)
        m.load_state_dict(sd, strict=True)
        m = m.half().eval()
        torch.jit.save(torch.jit.script(m), os.path.join(out, "ViT-tiny.pt"))
        files.append(("ViT-tiny.pt", "openai/CLIP release form: a TorchScript archive with fp16 weights"))
    elif L.startswith("open_clip"):
        st("open_clip_model.safetensors", sd, hf_meta, "open_clip (Hugging Face hub)")
        pt("open_clip_pytorch_model.bin", sd, "open_clip (Hugging Face hub), torch.save(state_dict)")
    elif L == "dinov3_hf":
        st("model.safetensors", sd, hf_meta, "Hugging Face hub (facebook/dinov3-*: DINOv3ViTModel.save_pretrained)")
    elif L == "dinov3_timm":
        st("model.safetensors", sd, hf_meta, "timm (Hugging Face hub timm/vit_*_patch16_dinov3_qkvb.lvd1689m)")
    elif L == "dinov3":
        pt("dinov3_vits16_pretrain_lvd1689m-08c60483.pth", sd, "facebookresearch/dinov3 torch.hub release: "
                                                              "torch.save(state_dict), bias_mask buffers included")
        st("model.safetensors", sd, None, "the same state dict as safetensors")
    elif L in families_eva.LAYOUTS:
        hub = families_eva.arch_tag(s)[0].rsplit("_", 1)[0]  # eva02_tiny_patch14, eva02_base_patch14
        st("model.safetensors", sd, hf_meta, f"timm (Hugging Face hub timm/{hub}_*)")
        pt("pytorch_model.bin", sd, "timm, torch.save(state_dict)")
    elif L in families_pe.LAYOUTS:
        st("model.safetensors", sd, hf_meta, "timm (Hugging Face hub timm/vit_pe_core_*.fb" +
           (": PE's projection as head.weight, head.bias zeros)" if s.proj else ", headless)"))
        pt("pytorch_model.bin", sd, "timm, torch.save(state_dict)")
    elif L == families_pe.META_LAYOUT:
        st("model.safetensors", sd, None, "Meta's PE-Core CLIP state dict (visual.* and the text tower) as safetensors")
        pt("PE-Core-T16-384.pt", sd, "facebookresearch/perception_models release (hub facebook/PE-Core-*: "
                                     "torch.save(CLIP state_dict), what pe.py load_ckpt reads)")
    elif L == families_pe.OPEN_CLIP_LAYOUT:
        st("open_clip_model.safetensors", sd, hf_meta, "open_clip (Hugging Face hub timm/PE-Core-*)")
        pt("open_clip_pytorch_model.bin", sd, "open_clip (Hugging Face hub), torch.save(state_dict)")
    elif L == "aimv2_timm":
        st("model.safetensors", sd, hf_meta, "timm (Hugging Face hub timm/aimv2_*.apple_pt)")
        pt("pytorch_model.bin", sd, "timm, torch.save(state_dict)")
    elif L == "aimv2_apple":
        st("model.safetensors", sd, hf_meta, "Apple's release (Hugging Face hub apple/aimv2-*: the model.safetensors "
                                             "ml-aim's load_pretrained reads, strict)")
        pt("aimv2_vision_encoder.pth", sd, "torch.save(AIMv2VisionEncoder.state_dict()) (ml-aim's module saved; "
                                           "Apple releases no .pth)")
    elif L == "mae":
        pt("mae_pretrain.pth", {"model": sd}, "facebookresearch/mae release: torch.save({'model': state_dict}), "
                                              "with the decoder")
        st("model.safetensors", sd, None, "the same state dict as safetensors")
    else:
        st("model.safetensors", sd, hf_meta, "Hugging Face hub model.safetensors (F32, __metadata__ format=pt)")
    return files


# =============================================================================== self-checks
class Checks:
    def __init__(self):
        self.failed = []

    def close(self, label, a, b, tol):
        a, b = torch.as_tensor(a).double(), torch.as_tensor(b).double()
        if a.shape != b.shape:
            self.fail(f"{label}: shape {tuple(a.shape)} vs {tuple(b.shape)}")
            return
        scale = max(float(b.abs().max()), 1e-12)
        err = float((a - b).abs().max()) / scale
        ok = err <= tol
        print(f"  {'ok' if ok else 'FAIL':4} {label}: relative error {err:.1e}")
        if not ok:
            self.failed.append(label)

    def fail(self, msg):
        print(f"  FAIL {msg}")
        self.failed.append(msg)

    def true(self, label, cond, detail=""):
        print(f"  {'ok' if cond else 'FAIL':4} {label}{(': ' + detail) if detail and not cond else ''}")
        if not cond:
            self.failed.append(label)


def load_checked(chk, label, model, sd, ignored):
    """load_state_dict(strict=False), then: nothing missing, and every unexpected key one the
    loader must skip (the layout's `ignored` prefixes)."""
    r = model.load_state_dict(sd, strict=False)
    bad_unexpected = [k for k in r.unexpected_keys if not any(k.startswith(p) for p in ignored)]
    chk.true(f"{label}: keys match the module ({len(sd)} tensors)", not r.missing_keys and not bad_unexpected,
             f"missing {r.missing_keys[:6]}, unexpected {bad_unexpected[:6]}")


def replica_for(s: Spec, sd, ignored, chk, hw):
    """(model, state dict) of the independent module for this layout at image size hw."""
    L = s.layout
    if L in ("deit_timm", "dinov2_timm", "dinov2_timm_reg", "vit_reg4_gap_timm", "vit_gap_timm", "aimv2_timm"):
        return TimmViT(s), sd
    if L == "aimv2_apple":
        gh, gw = grid_of(s, hw)
        sd = dict(sd)
        if (gh, gw) != (s.grid, s.grid):
            # Apple's ViTPreprocessor would slice pos_embed[:, :N]; ViTScope (and timm, after _convert_aimv2)
            # resample the table: timm resample_abs_pos_embed (bicubic, antialias, no prefix rows)
            t = sd["preprocessor.pos_embed"][0].reshape(1, s.grid, s.grid, -1).permute(0, 3, 1, 2).double()
            t = F.interpolate(t, size=(gh, gw), mode="bicubic", antialias=True)
            sd["preprocessor.pos_embed"] = t.permute(0, 2, 3, 1).reshape(1, gh * gw, -1)
        return AppleAimv2(s, gh * gw), sd
    if L == "mae":
        return MaeEncoder(s), sd
    if L == "dino":
        return DinoViT(s, v2=False), sd
    if L in ("dinov2", "dinov2_reg", "dinov2_swiglu"):
        return DinoViT(s, v2=True), sd
    if L == "dinov3":
        return Dinov3ViT(s), sd
    if L == "dinov3_hf":
        return HFDinov3(s), sd
    if L == "dinov3_timm":
        return TimmEva(s), sd
    if L in families_eva.LAYOUTS:
        # timm's model built at the run's size (timm.create_model(..., img_size=hw)): RoPE's table for that grid, the
        # learned table resampled by checkpoint_filter_fn on the way in
        gh, gw = grid_of(s, hw)
        return families_eva.TimmEva02(s, hw), families_eva.eva02_filter(sd, (gh, gw))
    if L in families_pe.LAYOUTS:  # the same for PE-Core: RoPE's table for the run's grid, the learned one resampled
        gh, gw = grid_of(s, hw)
        return families_pe.TimmPeCore(s, hw), families_pe.pe_filter(sd, (gh, gw))
    if L in (families_pe.META_LAYOUT, families_pe.OPEN_CLIP_LAYOUT):
        # timm's model on what timm makes of the file: Meta's through _convert_pe (timm's checkpoint_filter_fn),
        # open_clip's trunk as open_clip's TimmModel holds it; then as above
        gh, gw = grid_of(s, hw)
        return families_pe.TimmPeCore(s, hw), families_pe.pe_filter(families_pe.timm_form(s, sd), (gh, gw))
    if L == "deit_hf":
        return HFDeiTWithTeacher(s), sd
    if L.startswith("dinov2") and L.endswith("hf"):
        return HFDinov2(s), sd
    if L.startswith("clip_hf") or L.startswith("siglip_hf"):
        return HFVisionModel(s), sd
    if L == "clip_openai" or L.startswith("open_clip"):
        gh, gw = grid_of(s, hw)
        sd = dict(sd)
        if (gh, gw) != (s.grid, s.grid):
            # open_clip model.py resize_pos_embed on the state dict, then a model of the new grid
            old = sd["visual.positional_embedding"]
            tok, img = old[:1], old[1:]
            img = img.reshape(1, s.grid, s.grid, -1).permute(0, 3, 1, 2)
            img = F.interpolate(img.double(), size=(gh, gw), mode="bicubic", antialias=True, align_corners=False)
            sd["visual.positional_embedding"] = torch.cat([tok, img.permute(0, 2, 3, 1).reshape(gh * gw, -1)], 0)
        return OpenAICLIP(s, gh * gw, hw[0], archive_buffers=L == "clip_openai"), sd
    raise ValueError(L)


def run_replica(s, model, img):
    model = model.double().eval()
    with torch.no_grad():
        if isinstance(model, OpenAICLIP):
            return openai_block_outputs(model.visual, img[None].double())
        return model(img[None].double())


def final_stage(rec):
    return "logits" if "logits" in rec else "embedding"


def check_layout(s, sd, ignored, refs, x, chk, replica_outputs):
    for size, img in x.items():
        rec = refs[size]
        model, msd = replica_for(s, sd, ignored, chk, tuple(img.shape[1:]))
        model = model.double()  # before loading: a resized table must not be rounded to float32
        if size == "native":
            load_checked(chk, f"{s.layout} module", model, msd, ignored)
        else:
            model.load_state_dict(msd, strict=False)
        out, blocks = run_replica(s, model, img)
        replica_outputs[(s.layout, size)] = out
        last = final_stage(rec)
        # timm's Eva makes RoPE's coordinates in float32 (make_coords_dinov3), the reference in float64: ~1e-7 apart
        # (check_timm_dinov3 shows the rest agrees to 1e-9 with float64 coordinates)
        # (EVA-02's and PE's: timm's RoPE tables are float32 too; check_eva02 / check_pe show 1e-9 with float64 ones)
        tol = 1e-6 if s.layout == "dinov3_timm" or (s.rope and s.rope_kind in ("eva", "pe")) else 1e-9
        chk.close(f"{s.layout} {size}: module's {last} vs reference", out, rec[last], tol)
        if isinstance(model, (AppleAimv2, TimmEva)):  # every token after the final norm (Apple's encoder's output)
            chk.close(f"{s.layout} {size}: the module's tokens vs ln_final.out", model.tokens[0], rec["ln_final.out"],
                      tol)
        for i, b in enumerate(blocks):
            chk.close(f"{s.layout} {size}: module's block {i} output vs blocks.{i}.resid_post", b,
                      rec[f"blocks.{i}.resid_post"], tol)


def check_torchvision(s, c, x, rec, chk):
    """The vanilla-equivalent encoders (DINO, MAE: cls, pos, pre-norm blocks, GELU, eps 1e-6)
    against torchvision's VisionTransformer at the native size."""
    import torchvision
    tv = torchvision.models.VisionTransformer(image_size=s.grid * s.patch, patch_size=s.patch, num_layers=s.depth,
                                              num_heads=s.heads, hidden_dim=s.D, mlp_dim=s.mlp, num_classes=3)
    sd = tv.state_dict()
    sd["class_token"] = c["cls"].reshape(1, 1, -1)
    sd["encoder.pos_embedding"] = c["pos"][None]
    sd["conv_proj.weight"], sd["conv_proj.bias"] = c["patch_w"], c["patch_b"]
    for i, b in enumerate(c["blocks"]):
        p = f"encoder.layers.encoder_layer_{i}."
        sd[p + "ln_1.weight"], sd[p + "ln_1.bias"] = b["ln1"]
        sd[p + "ln_2.weight"], sd[p + "ln_2.bias"] = b["ln2"]
        sd[p + "self_attention.in_proj_weight"], sd[p + "self_attention.in_proj_bias"] = b["qkv_w"], b["qkv_b"]
        sd[p + "self_attention.out_proj.weight"], sd[p + "self_attention.out_proj.bias"] = b["proj_w"], b["proj_b"]
        sd[p + "mlp.0.weight"], sd[p + "mlp.0.bias"] = b["fc1_w"], b["fc1_b"]
        sd[p + "mlp.3.weight"], sd[p + "mlp.3.bias"] = b["fc2_w"], b["fc2_b"]
    sd["encoder.ln.weight"], sd["encoder.ln.bias"] = c["norm"]
    tv.load_state_dict(sd)
    tv = tv.double().eval()
    with torch.no_grad():
        t = tv._process_input(x[None].double())
        t = torch.cat([tv.class_token.expand(1, -1, -1), t], 1)
        y = tv.encoder(t)
    chk.close(f"{s.layout} native: torchvision VisionTransformer's encoder output vs ln_final.out", y[0],
              rec["ln_final.out"], 1e-9)


def check_torchscript(s, out, x, rec, chk):
    m = torch.jit.load(os.path.join(out, "ViT-tiny.pt"))
    sd = m.state_dict()
    dtypes = {str(v.dtype) for k, v in sd.items() if v.is_floating_point()}
    chk.true("clip_openai: the TorchScript archive holds fp16 weights only", dtypes == {"torch.float16"},
             str(dtypes))
    chk.true("clip_openai: the archive's keys are the state dict's", set(sd) == set(state_dict_of(s, stored_weights(s))[0]))
    m = m.double()
    with torch.no_grad():
        e = m(x[None].double())
    chk.close("clip_openai native: TorchScript archive's encode_image vs embedding", e[0], rec["embedding"], 1e-9)


def convert_aimv2(sd):
    """timm vision_transformer.py _convert_aimv2's renames (Apple's keys -> timm's), in its order."""
    out = collections.OrderedDict()
    for k, v in sd.items():
        for a, b in [("norm_1", "norm1"), ("norm_2", "norm2"), ("preprocessor.patchifier.", "patch_embed."),
                     ("preprocessor.pos_embed", "pos_embed"), ("trunk.", ""), ("post_trunk_norm.", "norm."),
                     ("mlp.fc1", "mlp.fc1_g"), ("mlp.fc3", "mlp.fc1_x")]:
            k = k.replace(a, b)
        out[k] = v
    return out


def check_aimv2_convert(chk):
    """Apple's state dict through timm's _convert_aimv2 is timm's, key for key and value for value."""
    a = convert_aimv2(state_dict_of(SPEC["aimv2_apple"], stored_weights(SPEC["aimv2_apple"]))[0])
    t = state_dict_of(SPEC["aimv2_timm"], stored_weights(SPEC["aimv2_timm"]))[0]
    chk.true("aimv2_apple through timm's _convert_aimv2 has aimv2_timm's keys", set(a) == set(t),
             f"{sorted(set(a) ^ set(t))[:6]}")
    chk.true("aimv2_apple through timm's _convert_aimv2 has aimv2_timm's tensors",
             set(a) == set(t) and all(torch.equal(a[k], t[k]) for k in t))


def convert_dinov3_timm(sd):
    """timm eva.py checkpoint_filter_fn on a facebookresearch DINOv3 state dict (storage_tokens in it), for a model with
    qkv_bias=True (the *_qkvb ones), in its order: 'rope' keys (rope_embed.periods), *.periods, *.bias_mask and
    mask_token dropped; qkv.bias split in thirds, Q and V kept as q_bias and v_bias (K is the zero k_bias buffer);
    ls1.gamma / ls2.gamma -> gamma_1 / gamma_2; storage_tokens -> reg_token."""
    out = collections.OrderedDict()
    for k, v in sd.items():
        if "rope" in k and k != "rope.freqs":
            continue
        if any(k.endswith(f) for f in (".periods", ".bias_mask", "mask_token")) or k.startswith(("projectors.",
                                                                                                  "local_cls_norm")):
            continue
        if k.endswith("qkv.bias"):
            q, _, v_ = v.chunk(3, dim=-1)
            out[k.replace("qkv.bias", "q_bias")], out[k.replace("qkv.bias", "v_bias")] = q, v_
            continue
        k = k.replace("ls1.gamma", "gamma_1").replace("ls2.gamma", "gamma_2")
        out[k.replace("storage_tokens", "reg_token")] = v
    return out


def check_timm_dinov3(s, sd, refs, x, chk, replica_outputs):
    """timm's Eva beyond check_layout: with float64 RoPE coordinates it is the reference to 1e-9 (what separates it is
    only timm's float32 coordinates); with global_pool='token' (upstream DINOv3's pooling, timm's note) it gives the
    cls row of ln_final.out, dinov3's embedding; and dinov3's torch.hub state dict through timm's checkpoint_filter_fn
    is dinov3_timm's, key for key and tensor for tensor."""
    for size, img in x.items():
        rec = refs[size]
        m = TimmEva(s, coords_dtype=torch.float64).double()
        m.load_state_dict(sd, strict=True)
        out, _ = run_replica(s, m, img)
        chk.close(f"dinov3_timm {size}: the module with float64 RoPE coordinates vs the embedding", out,
                  rec["embedding"], 1e-9)
        chk.close(f"dinov3_timm {size}: the module with float64 RoPE coordinates, its tokens vs ln_final.out",
                  m.tokens[0], rec["ln_final.out"], 1e-9)
        m = TimmEva(s, global_pool="token").double()
        m.load_state_dict(sd, strict=True)
        out, _ = run_replica(s, m, img)
        replica_outputs[("dinov3_timm global_pool='token'", size)] = out
        chk.close(f"dinov3_timm {size}: global_pool='token' vs ln_final.out's cls row", out, rec["ln_final.out"][0],
                  1e-6)
    a = convert_dinov3_timm(state_dict_of(SPEC["dinov3"], stored_weights(SPEC["dinov3"]))[0])
    chk.true("dinov3 through timm's checkpoint_filter_fn has dinov3_timm's keys", set(a) == set(sd),
             f"{sorted(set(a) ^ set(sd))[:6]}")
    chk.true("dinov3 through timm's checkpoint_filter_fn has dinov3_timm's tensors",
             set(a) == set(sd) and all(torch.equal(a[k], sd[k]) for k in sd))


def check_same(chk, label, a, b, tol=1e-9):
    chk.close(label, a, b, tol)


def check_groups(replica_outputs, chk):
    """Layouts of the same weights must give the same output where their rules agree."""
    same = [("dinov2", "dinov2_timm", "native"), ("dinov2", "dinov2_hf", "native"),
            ("dinov2_reg", "dinov2_reg_hf", "native"), ("dinov2_reg", "dinov2_reg_hf", "other"),
            ("dinov2_swiglu", "dinov2_swiglu_hf", "native"),
            ("open_clip_quickgelu", "clip_hf_vision_proj", "native"), ("clip_hf_vision_proj", "clip_hf_model", "native"),
            ("clip_hf_vision_proj", "clip_hf_model", "other"), ("siglip_hf_vision", "siglip_hf_model", "native"),
            ("siglip_hf_vision", "siglip_hf_model", "other"), ("dinov3", "dinov3_hf", "native"),
            ("dinov3", "dinov3_hf", "other"), ("aimv2_timm", "aimv2_apple", "native"),
            ("aimv2_timm", "aimv2_apple", "other")]
    differ = [("dinov2", "dinov2_timm", "other"), ("dinov2", "dinov2_hf", "other"), ("dinov2_timm", "dinov2_hf", "other"),
              ("open_clip_quickgelu", "clip_hf_vision_proj", "other")]
    for a, b, size in same:
        if (a, size) in replica_outputs and (b, size) in replica_outputs:
            # DINOv3's two codes round RoPE's periods to float32 differently (periods, 1 / inv_freq): ~1e-9 apart
            check_same(chk, f"{a} and {b} ({size}): same weights, same output", replica_outputs[(a, size)],
                       replica_outputs[(b, size)], 1e-8 if a == "dinov3" else 1e-9)
    # timm's Eva with global_pool='token' is DINOv3's own output (RoPE's coordinates in float32 there)
    for size in ("native", "other"):
        t = ("dinov3_timm global_pool='token'", size)
        if ("dinov3", size) in replica_outputs and t in replica_outputs:
            check_same(chk, f"dinov3 and dinov3_timm with global_pool='token' ({size}): same weights, same output",
                       replica_outputs[("dinov3", size)], replica_outputs[t], 1e-6)
    # PE's layout with its projection holds the headless layout's weights: its attention pool's output (before the
    # head) is the headless embedding
    for size in ("native", "other"):
        a, b = ("pe_core_timm_proj pre_logits", size), ("pe_core_timm", size)
        if a in replica_outputs and b in replica_outputs:
            check_same(chk, f"pe_core_timm_proj's attention-pool output and pe_core_timm's embedding ({size}): same "
                            f"weights but the projection, same features", replica_outputs[a], replica_outputs[b], 1e-9)
    # Meta's and open_clip's PE-Core files hold pe_core_timm_proj's weights: the same embedding
    for other in ("pe_core_meta", "pe_core_open_clip"):
        for size in ("native", "other"):
            a, b = ("pe_core_timm_proj", size), (other, size)
            if a in replica_outputs and b in replica_outputs:
                check_same(chk, f"pe_core_timm_proj and {other} ({size}): same weights, same output",
                           replica_outputs[a], replica_outputs[b], 1e-9)
    # EVA-02's MIM layout is the classifier's weights without the head: its embedding is the classifier's pre-logits
    for size in ("native", "other"):
        a, b = ("eva02_timm pre_logits", size), ("eva02_timm_mim", size)
        if a in replica_outputs and b in replica_outputs:
            check_same(chk, f"eva02_timm's pre-logits and eva02_timm_mim ({size}): same weights but the head, same "
                            f"features", replica_outputs[a], replica_outputs[b], 1e-6)
    # timm's cls_token holds cls + pos[0] rounded to float32: equal to that rounding
    for size in ("native", "other"):
        if ("dinov2_reg", size) in replica_outputs and ("dinov2_timm_reg", size) in replica_outputs:
            check_same(chk, f"dinov2_reg and dinov2_timm_reg ({size}): same weights (cls position folded in "
                            f"float32), same output", replica_outputs[("dinov2_reg", size)],
                       replica_outputs[("dinov2_timm_reg", size)], 1e-6)
    for a, b, size in differ:
        if (a, size) in replica_outputs and (b, size) in replica_outputs:
            d = float((replica_outputs[(a, size)] - replica_outputs[(b, size)]).abs().max())
            chk.true(f"{a} and {b} ({size}): their interpolation rules differ, and so do their outputs "
                     f"(max |diff| {d:.2e})", d > 1e-6)


def pop_only(argv=None, known=None):
    """`--only LAYOUT[,LAYOUT...]` (or `--only=...`) taken out of argv (sys.argv by default), for the scripts whose
    other options test_parity.script_args parses: the layouts named ([] when not given: all); one not in `known`
    (default: the specs' layouts) exits 2."""
    argv = sys.argv if argv is None else argv
    known = SPEC if known is None else known
    only = []
    i = 1
    while i < len(argv):
        if argv[i] == "--only" and i + 1 < len(argv):
            only += [x for x in argv[i + 1].split(",") if x]
            del argv[i:i + 2]
        elif argv[i].startswith("--only="):
            only += [x for x in argv[i][len("--only="):].split(",") if x]
            del argv[i]
        else:
            i += 1
    unknown = [o for o in only if o not in known]
    if unknown:
        print(f"unknown layout(s) {', '.join(unknown)}; layouts: {', '.join(known)}", file=sys.stderr)
        sys.exit(2)
    return only


# =============================================================================== main
def write_layout(s: Spec, root, check, chk, replica_outputs):
    out = os.path.join(root, s.layout)
    os.makedirs(out, exist_ok=True)
    print(f"{s.layout}:")
    c = stored_weights(s)
    sd, ignored = state_dict_of(s, c)
    files = write_files(s, c, sd, out)
    for name, obj in configs_of(s).items():
        _save_json(os.path.join(out, name), obj)
    x = inputs()
    refs = {}
    for size, img in x.items():
        np.save(os.path.join(out, f"input_{size}.npy"), img.numpy().astype(np.float32))
        rec = reference(s, c, img)
        refs[size] = rec
        np.savez(os.path.join(out, f"ref_{size}.npz"), **{k: v.detach().numpy() for k, v in rec.items()})
    if check:
        if s.rope and s.rope_kind == "pe" and s.layout not in families_pe.LAYOUTS:
            # Meta's, open_clip's PE-Core: their keys and shapes, and timm's form of them, before any module loads them
            families_pe.check_pe_layout(s, sd, c, chk)
        check_layout(s, sd, ignored, refs, x, chk, replica_outputs)
        if s.layout in ("dino", "mae"):
            check_torchvision(s, c, x["native"], refs["native"], chk)
        if s.layout == "clip_openai":
            check_torchscript(s, out, x["native"], refs["native"], chk)
        if s.layout == "aimv2_apple":
            check_aimv2_convert(chk)
        if s.layout == "dinov3_timm":
            check_timm_dinov3(s, sd, refs, x, chk, replica_outputs)
        if s.rope_kind == "eva":
            families_eva.check_eva02(s, sd, refs, x, chk, replica_outputs, run_replica)
        if s.rope and s.rope_kind == "pe":
            families_pe.check_pe(s, families_pe.timm_form(s, sd), refs, x, chk, replica_outputs, run_replica)
        if s.layout == "dino":
            # what dino's utils.load_pretrained_weights does with a full checkpoint: 'teacher',
            # then "module." and "backbone." stripped
            full = torch.load(os.path.join(out, "dino_full_checkpoint.pth"))
            t = {k.replace("module.", "").replace("backbone.", ""): v for k, v in full["teacher"].items()}
            m = DinoViT(s, v2=False)
            load_checked(chk, "dino full checkpoint's teacher", m, t, ["head."])
            e, _ = run_replica(s, m, x["native"])
            chk.close("dino native: the full checkpoint's teacher gives the embedding", e, refs["native"]["embedding"],
                      1e-9)
    gh, gw = grid_of(s, OTHER)
    return {
        "family": s.family, "group": s.group,
        "files": [{"file": f, "what": w} for f, w in files] + [{"file": n, "what": "config"} for n in configs_of(s)],
        "shape": {k: v for k, v in asdict(s).items() if k not in ("layout", "family", "group", "files", "notes",
                                                                  "seed", "pos_rule")},
        "pos_rule": {"reference": s.pos_rule, "core": POS_RULES[s.pos_rule][1], "prefix_rows": s.prefix},
        "ignored_keys": ignored,
        "sizes": {"native": [NATIVE, NATIVE], "other": list(OTHER)},
        "grids": {"native": [s.grid, s.grid], "other": [gh, gw]},
        "refs": {"native": "ref_native.npz", "other": "ref_other.npz"},
        "inputs": {"native": "input_native.npy", "other": "input_other.npy"},
        "last_stage": final_stage(refs["native"]),
        "stages": {size: list(rec.keys()) for size, rec in refs.items()},
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", required=True, metavar="DIR", help="where the fixtures and references go")
    ap.add_argument("--only", default="", help="comma-separated layouts (default: all)")
    ap.add_argument("--no-check", action="store_true", help="skip the self-checks")
    a = ap.parse_args(argv)
    only = [x for x in a.only.split(",") if x]
    for o in only:
        if o not in SPEC:
            ap.error(f"unknown layout {o}; layouts: {', '.join(SPEC)}")
    os.makedirs(a.write, exist_ok=True)
    chk = Checks()
    replica_outputs = {}
    manifest = {"native": [NATIVE, NATIVE], "other": list(OTHER), "layouts": {}}
    for s in SPECS:
        if only and s.layout not in only:
            continue
        manifest["layouts"][s.layout] = write_layout(s, a.write, not a.no_check, chk, replica_outputs)
    if not a.no_check:
        print("across layouts:")
        check_groups(replica_outputs, chk)
    _save_json(os.path.join(a.write, "manifest.json"), manifest)
    if chk.failed:
        print(f"{len(chk.failed)} self-check(s) FAILED")
        return 1
    print(f"wrote {len(manifest['layouts'])} layouts to {a.write}" + ("" if a.no_check else "; every self-check passed"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
