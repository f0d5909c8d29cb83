#!/usr/bin/python3
"""The families' forward pass against their PyTorch references, stage by stage (issue 20).

For every family spec of families.py (DeiT distilled, DINO, DINOv2 with and without
registers, SwiGLU, CLIP from OpenAI / open_clip / Hugging Face, SigLIP, MAE, DINOv3 with RoPE, AIMv2 with RMSNorm,
EVA-02 with RoPE beside its position table, as a classifier and headless, and EVA-02 Base's
SwiGLU with a LayerNorm over its hidden width, PE-Core with PE's RoPE ('xy', grid offset 1), norm_pre and an
8-head attention pool, headless and with its projection) the
reference's own weights are written in ViTScope's file format (the config in
__metadata__["vitscope.config"], the tensors under ViTScope's names), and
vitscope-cli traces the reference's inputs: the native size and a non-square other
size, where each family resizes its position embeddings its own way. Every stage of
the model's stage table (vitscope-cli info --stage-table) must equal the reference's
float64 value to 1e-4 of the tensor's scale; a stage the reference lacks fails.
This checks the forward pass and the stage table independently of the checkpoint
layouts' key names (the loaders have their own test).

    test_families_forward.py --cli build/vitscope-cli --workdir DIR [--only LAYOUT,...]"""
import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families  # noqa: E402
import test_parity  # noqa: E402
import vitref  # noqa: E402



def own_config(s):
    """ViTScope's config of a spec (the fields of vitscope.config)."""
    return dict(families.config_fields(s), name=s.layout, resize=0, squash=False, interp="bicubic",
                mean=[0.5] * 3, std=[0.5] * 3, class_names=[])


def own_tensors(s, c):
    """The canonical weights under the names ViTScope's Weights::for_each_param gives them."""
    t = {"patch_embed.proj.weight": c["patch_w"],
         "patch_embed.proj.bias": c["patch_b"] if c["patch_b"] is not None else torch.zeros(s.D),
         "norm.weight": c["norm"][0], "norm.bias": c["norm"][1]}
    if s.rope and s.rope_kind == "dinov3":  # DINOv3: no table; RoPE's periods
        t["rope_embed.periods"] = c["periods"]
    else:  # (EVA-02: the table, and no RoPE tensor: its frequencies are made, not stored)
        t["pos_embed"] = c["pos"][1:] if s.no_embed_class and s.cls else c["pos"]
    if s.cls:
        t["cls_token"] = c["cls"]
    if s.dist:
        t["dist_token"] = c["dist"]
    if s.regs:
        t["reg_token"] = c["reg"]
    if s.ln_pre:
        t["norm_pre.weight"], t["norm_pre.bias"] = c["ln_pre"]
    if s.patch_norm:  # AIMv2: the norm on the patch embeddings (an RMSNorm's bias written as zeros)
        t["patch_embed.norm.weight"], t["patch_embed.norm.bias"] = c["patch_norm"]
    for i, b in enumerate(c["blocks"]):
        p = f"blocks.{i}."
        t[p + "norm1.weight"], t[p + "norm1.bias"] = b["ln1"]
        t[p + "norm2.weight"], t[p + "norm2.bias"] = b["ln2"]
        # an absent bias (qkv_bias / proj_bias False) is written as zeros; SwiGLU's fc1 is [gate; value]
        for ours, theirs in [("attn.qkv", "qkv"), ("attn.proj", "proj"), ("mlp.fc1", "fc1"), ("mlp.fc2", "fc2")]:
            t[p + ours + ".weight"], t[p + ours + ".bias"] = b[theirs + "_w"], b[theirs + "_b"]
        if s.k_mask:  # ViTScope's file holds the bias as the model uses it: masked
            t[p + "attn.qkv.bias"] = b["qkv_b"] * b["qkv_b_mask"]
        if s.layer_scale:
            t[p + "ls1.gamma"], t[p + "ls2.gamma"] = b["ls1"], b["ls2"]
        if s.scale_mlp:  # EVA-02 Base / Large: the SwiGLU's LayerNorm over the hidden width (config "mlp_norm")
            t[p + "mlp.norm.weight"], t[p + "mlp.norm.bias"] = b["mlp_norm"]
    if "head" in c:
        t["head.weight"], t["head.bias"] = c["head"]
    if "head_dist" in c:
        t["head_dist.weight"], t["head_dist.bias"] = c["head_dist"]
    if s.proj:
        t["proj"] = c["proj"]
    if s.head == "siglip_map":
        t["map.probe"] = c["probe"]
        t["map.attn.in_proj_weight"], t["map.attn.in_proj_bias"] = c["map_in_w"], c["map_in_b"]
        t["map.attn.out_proj.weight"], t["map.attn.out_proj.bias"] = c["map_out_w"], c["map_out_b"]
        t["map.norm.weight"], t["map.norm.bias"] = c["map_ln"]
        t["map.mlp.fc1.weight"], t["map.mlp.fc1.bias"] = c["map_fc1"]
        t["map.mlp.fc2.weight"], t["map.mlp.fc2.bias"] = c["map_fc2"]
    return {k: v.float().contiguous() for k, v in t.items()}


def main():
    only = families.pop_only()
    a = test_parity.script_args("cli", "workdir")
    test_parity.self_test()
    xs = families.inputs()
    seen = set()
    for s in families.SPECS:
        if only and s.layout not in only:
            continue
        # one spec per set of weights and forward: layouts of one group differ in key names only,
        # except in their interpolation rule, timm's folded cls position, and a head (EVA-02's MIM layout: none)
        key = (s.group, s.pos_rule, s.no_embed_class, s.final, s.proj, s.head)
        if key in seen:
            continue
        seen.add(key)
        c = families.stored_weights(s)
        path = os.path.join(a.workdir, s.layout + ".safetensors")
        vitref.write_safetensors(path, own_tensors(s, c), {"vitscope.config": json.dumps(own_config(s))})
        for size, x in xs.items():
            inp = os.path.join(a.workdir, f"{s.layout}_{size}.npy")
            np.save(inp, x.numpy().astype(np.float32))
            out = os.path.join(a.workdir, f"{s.layout}_{size}.npz")
            r = subprocess.run([a.cli, "trace", "--model", path, "--input", inp, "--out", out], capture_output=True,
                               text=True)
            if r.returncode != 0:
                print(f"FAIL {s.layout} {size}: vitscope-cli trace exited {r.returncode}: {r.stderr.strip()}")
                test_parity.FAIL.append(f"{s.layout} {size}")
                continue
            hw = f"{x.shape[1]},{x.shape[2]}"
            r = subprocess.run([a.cli, "info", "--model", path, "--stage-table", "--image-size", hw],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(f"vitscope-cli info failed: {r.stderr}")
            with np.load(out) as z:
                ours = {k: z[k] for k in z.files}
            ref = families.reference(s, c, x)
            label = f"{s.family} ({s.layout}) {size} {x.shape[1]}x{x.shape[2]}"
            test_parity.check(label, ours, ref, json.loads(r.stdout))
    print(f"{'FAILED: ' + ', '.join(test_parity.FAIL) if test_parity.FAIL else 'all family checks passed'}")
    return 1 if test_parity.FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
