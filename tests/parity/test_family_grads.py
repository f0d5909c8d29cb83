#!/usr/bin/python3
"""The families' gradients against PyTorch autograd (issue 39: "gradients of every family match PyTorch").

For each family spec whose model ends in a classifier (DeiT distilled in timm's and Hugging Face's eps, timm's
cls-less ViTs with registers, layer scale and either pooling), the float64 reference of families.py runs with
autograd: every recorded stage keeps its gradient, and the predicted class's logit goes back through it. The same
weights in ViTScope's file format go through `vitscope-cli trace --grads`; every stage of the model's stage table
that has a gradient (info --stage-table: has_grad) must be in the trace as `<stage>.grad` and equal autograd's
to 1e-3 of the tensor's largest value, at the native size and a non-square one (the resized position table).
`patches` is the one stage the reference computes beside the graph (its conv reads the image), so its gradient is
checked through `input`'s, which the same conv carries.

Every family has its backward since RMSNorm (AIMv2, its patch norm too) and RoPE (DINOv3, its storage tokens and
no position table) have theirs: DINOv3 and AIMv2 are checked like the rest, AIMv2 also under a classifier. EVA-02
(RoPE with interleaved pairs beside a learned table, packed SwiGLU, fc_norm on the mean) as a classifier and headless:
its q_rot / k_rot are stages with gradients like DINOv3's; EVA-02 Base (q_proj / k_proj / v_proj, the SwiGLU's norm:
mlp.norm.normalized and mlp.norm.out have gradients, its mean and std none) as a classifier. PE-Core (PE's RoPE,
norm_pre, an 8-head attention pool on every token, the cls token too) headless: the target is its embedding's largest
number, and the pool's latent has a gradient (head.attn.q is made from it alone, as SigLIP's probe); and with its
projection (timm's head.weight): the target is then the projected embedding's largest number (pe_core_meta and
pe_core_open_clip are the same weights and model: their files' layouts differ, the file written here does not). What is
still refused is a pass with an intervention, whose gradients would not be the intervened pass's: --grads with
--ablate-head must say so, never run.

    test_family_grads.py --cli build/vitscope-cli --workdir DIR [--only LAYOUT,...]
"""
import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families  # noqa: E402
import test_families_forward as fwd  # noqa: E402
import test_parity  # noqa: E402
import vitref  # noqa: E402

torch.set_num_threads(1)
# (an embedding model's target is its output's largest number, embedding[k]: DINO, DINOv2, MAE, timm's DINOv3 without RoPE
# is not among them)
WITH_GRADS = ["deit_timm", "deit_hf", "vit_reg4_gap_timm", "vit_gap_timm", "dino", "dinov2", "dinov2_reg", "mae",
              "dinov2_swiglu", "clip_openai", "open_clip_quickgelu", "open_clip_gelu", "clip_hf_vision",
              "clip_hf_vision_proj", "siglip_hf_vision", "dinov3", "dinov3_timm", "aimv2_timm", "aimv2_with_head",
              "eva02_timm", "eva02_timm_mim", "eva02_base_timm", "pe_core_timm", "pe_core_timm_proj",
              "pe_core_meta", "pe_core_open_clip"]
# (layout, the intervention's flags, what the refusal must name)
REFUSED = [("dinov3", ["--ablate-head", "0.1"], "interventions")]
FAIL = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAIL.append(what)


def reference_grads(s, c, x):
    """Every stage of the reference and autograd's gradient of the predicted logit at it."""
    x = x.double().clone().requires_grad_(True)
    if c.get("pos") is not None:  # pos_embed on the graph: its table a leaf (DINOv3 has none)
        c = dict(c, pos=c["pos"].detach().clone().requires_grad_(True))
    if c.get("probe") is not None:  # SigLIP's probe too: head.attn.q (made from it alone) then has a gradient
        c["probe"] = c["probe"].detach().clone().requires_grad_(True)
    rec = families.reference(s, c, x)
    for v in rec.values():
        if v.requires_grad:
            v.retain_grad()
    # a classifier's predicted logit; an embedding model's largest output number (vitscope-cli's default target)
    logits = rec["logits"] if "logits" in rec else rec["embedding"]
    k = int(logits.argmax())
    logits[k].backward()
    grads = {n: v.grad.numpy() for n, v in rec.items() if v.grad is not None}
    # The distilled head reads rows of ln_final's output directly (pooled = f[0], pooled_dist = f[1]): the
    # reference's `pooled` entries are separate views beside the graph, their gradient those rows'.
    if s.head == "distilled":
        f = grads["ln_final.out"]
        grads["pooled"], grads["pooled_dist"] = f[0], f[1 + s.regs]
    # CLIP's pooled rows are views beside the graph too: OpenAI's and HF's ln_post reads the last stream's row 0
    # (pooled = x[:, 0]), open_clip's projection ln_final's row 0
    if s.final == "clip_row":
        grads["pooled"] = grads[f"blocks.{s.depth - 1}.resid_post"][0]
    if s.final == "open_clip":
        grads["pooled"] = grads["ln_final.out"][0]
    return k, grads


def spec_of(layout):
    """A spec of families.py, or AIMv2's parts under a classifier (mean pooling, 5 classes: a file that says so)."""
    if layout == "aimv2_with_head":
        return dataclasses.replace(families.SPEC["aimv2_timm"], layout=layout, head="mean", classes=5)
    return families.SPEC[layout]


def main():
    only = families.pop_only(known=list(dict.fromkeys(WITH_GRADS + [layout for layout, _, _ in REFUSED])))
    a = test_parity.script_args("cli", "workdir")
    os.makedirs(a.workdir, exist_ok=True)
    xs = families.inputs()
    for layout in WITH_GRADS:
        if only and layout not in only:
            continue
        s = spec_of(layout)
        c = families.stored_weights(s)
        path = os.path.join(a.workdir, s.layout + ".safetensors")
        vitref.write_safetensors(path, fwd.own_tensors(s, c), {"vitscope.config": json.dumps(fwd.own_config(s))})
        for size, x in xs.items():
            label = f"{s.layout} {x.shape[1]}x{x.shape[2]}"
            inp = os.path.join(a.workdir, f"{s.layout}_{size}.npy")
            np.save(inp, x.numpy().astype(np.float32))
            out = os.path.join(a.workdir, f"{s.layout}_{size}_grads.npz")
            r = rt = subprocess.run([a.cli, "trace", "--model", path, "--input", inp, "--grads", "--out", out],
                                    capture_output=True, text=True)
            if r.returncode != 0:
                check(False, f"{label}: vitscope-cli trace --grads exited {r.returncode}: {r.stderr.strip()}")
                continue
            hw = f"{x.shape[1]},{x.shape[2]}"
            r = subprocess.run([a.cli, "info", "--model", path, "--stage-table", "--image-size", hw],
                               capture_output=True, text=True)
            table = json.loads(r.stdout)
            rows = table["stages"] if isinstance(table, dict) else table
            with np.load(out) as z:
                ours = {k: z[k] for k in z.files}
            k, ref = reference_grads(s, c, x)
            target = ("logit" if "embedding" not in ref else "embedding") + f"[{k}]"
            check(f"gradients: d {target} / d stage" in rt.stdout,
                  f"{label}: vitscope-cli says it differentiates {target}, autograd's target ({rt.stdout.strip()[-120:]})")
            graded = [row["name"] for row in rows if row.get("has_grad")]
            check(len(graded) > 10, f"{label}: the stage table gives {len(graded)} stages a gradient")
            worst, worst_name, compared = 0.0, "", 0
            for name in graded:
                g = ours.get(name + ".grad")
                if g is None:
                    check(False, f"{label}: {name} has a gradient in the table but none in the trace")
                    continue
                if name == "patches":
                    continue
                if name not in ref:
                    check(False, f"{label}: the reference has no gradient at {name}")
                    continue
                want = ref[name].reshape(g.shape) if ref[name].size == g.size else None
                if want is None:
                    check(False, f"{label}: {name}.grad has shape {g.shape}, autograd's {ref[name].shape}")
                    continue
                scale = max(float(np.abs(want).max()), 1e-12)
                err = float(np.abs(g - want).max()) / scale
                compared += 1
                if err > worst:
                    worst, worst_name = err, name
                if err > 1e-3:
                    check(False, f"{label}: {name}.grad differs from autograd's by {err:.2e} of its scale")
            check(compared == len(graded) - 1 and worst <= 1e-3,
                  f"{label}: d {target} at {compared} stages equals autograd's (worst {worst:.1e} of the scale, "
                  f"at {worst_name})")
    for layout, flags, why in REFUSED:
        if only and layout not in only:
            continue
        s = spec_of(layout)
        c = families.stored_weights(s)
        path = os.path.join(a.workdir, s.layout + ".safetensors")
        vitref.write_safetensors(path, fwd.own_tensors(s, c), {"vitscope.config": json.dumps(fwd.own_config(s))})
        x = xs[next(iter(xs))]
        inp = os.path.join(a.workdir, f"{s.layout}_refused.npy")
        np.save(inp, x.numpy().astype(np.float32))
        r = subprocess.run([a.cli, "trace", "--model", path, "--input", inp, "--grads", *flags, "--out",
                            os.path.join(a.workdir, "refused.npz")], capture_output=True, text=True)
        check(r.returncode != 0 and "--grads: " in r.stderr and why in r.stderr,
              f"{layout} {' '.join(flags)}: --grads refused naming '{why}' (exit {r.returncode}: {r.stderr.strip()[:160]})")
    print("FAILED: " + "; ".join(FAIL) if FAIL else "every family gradient check passed")
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
