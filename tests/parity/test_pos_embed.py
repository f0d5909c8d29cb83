#!/usr/bin/python3
"""core/model/pos_embed against PyTorch.

1. interpolate_grid against torch.nn.functional.interpolate itself on random grids, for
   every mode the families use and the ones around them: bicubic and bilinear, with and
   without antialias, by output size and by scale factor (torch then maps pixels with the
   given factor), up- and downsampling, non-square, the same size, one-pixel outputs.
2. resize_pos_embed with each family's rule against the upstream functions of
   tests/parity/families.py (timm resample_abs_pos_embed, DINO / DINOv2 offset 0.1,
   DINOv2-reg, Hugging Face with and without antialias, open_clip, MAE), prefix rows of
   0, 1 and 2, square learned grids resized to non-square ones.
3. Refusals with a message: a scale factor whose output size is not the one asked, a
   table whose rows do not match prefix + grid.
Usage: test_pos_embed.py --tool build/tests/vitscope_posembed_tool --workdir DIR"""
import argparse
import math
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families  # noqa: E402

torch.set_num_threads(1)
TOL = 1e-5  # max |ours - torch| / max |torch|: torch's float32 weights and sums vs the core's double ones


def grid_cases(rng):
    """(in_h, in_w, D, out_h, out_w, mode, antialias, scale_h, scale_w)"""
    cases = []
    sizes = [(5, 5, 3, 7), (5, 5, 3, 2), (7, 4, 9, 11), (16, 16, 9, 23), (37, 37, 16, 40), (4, 6, 1, 1),
             (6, 6, 6, 6), (3, 8, 12, 5), (14, 14, 37, 37), (2, 2, 5, 9)]
    for mode in ("bicubic", "bilinear"):
        for aa in (False, True):
            for (ih, iw, oh, ow) in sizes:
                cases.append((ih, iw, int(rng.integers(1, 9)), oh, ow, mode, aa, 0.0, 0.0))
            # scale factors: DINO's (new + 0.1) / old, and arbitrary ones
            for (ih, iw, oh, ow) in [(5, 5, 3, 7), (37, 37, 16, 50), (16, 16, 16, 16), (14, 14, 20, 9)]:
                sh, sw = (oh + 0.1) / ih, (ow + 0.1) / iw
                cases.append((ih, iw, 4, oh, ow, mode, aa, sh, sw))
            for (ih, iw, sh, sw) in [(7, 5, 1.37, 0.61), (9, 9, 2.5, 0.5), (6, 10, 1.0, 1.9)]:
                oh, ow = math.floor(ih * sh), math.floor(iw * sw)
                cases.append((ih, iw, 5, oh, ow, mode, aa, sh, sw))
    return cases


def torch_grid(a, oh, ow, mode, aa, sh, sw):
    t = torch.from_numpy(a).permute(2, 0, 1)[None]  # (1, D, h, w), as every family permutes
    if sh > 0:
        y = F.interpolate(t, scale_factor=(sh, sw), mode=mode, align_corners=False, antialias=aa)
    else:
        y = F.interpolate(t, size=(oh, ow), mode=mode, align_corners=False, antialias=aa)
    return y[0].permute(1, 2, 0).numpy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    rng = np.random.default_rng(7)
    lines, checks = [], []

    # 1. grids against F.interpolate
    for i, (ih, iw, D, oh, ow, mode, aa, sh, sw) in enumerate(grid_cases(rng)):
        x = rng.standard_normal((ih, iw, D)).astype(np.float32)
        src, dst = os.path.join(a.workdir, f"g{i}.npy"), os.path.join(a.workdir, f"g{i}.out.npy")
        np.save(src, x)
        lines.append(f"grid {src} {dst} {mode} {int(aa)} {oh} {ow} {sh!r} {sw!r}")
        label = f"{mode}{' antialias' if aa else ''} {ih}x{iw} -> {oh}x{ow}" + (
            f" scale_factor=({sh:.4g}, {sw:.4g})" if sh > 0 else " by size") + f", D={D}"
        checks.append((label, dst, torch_grid(x, oh, ow, mode, aa, sh, sw)))

    # 2. tables against the families' upstream functions
    table_cases = []
    for rule in families.POS_RULES:
        for prefix in (0, 1, 2):
            for (g, nh, nw) in [(5, 3, 7), (4, 6, 2), (6, 9, 9), (5, 5, 5)]:
                table_cases.append((rule, prefix, g, nh, nw))
    for j, (rule, prefix, g, nh, nw) in enumerate(table_cases):
        D = 6
        t = rng.standard_normal((prefix + g * g, D)).astype(np.float32)
        src, dst = os.path.join(a.workdir, f"t{j}.npy"), os.path.join(a.workdir, f"t{j}.out.npy")
        np.save(src, t)
        lines.append(f"table {src} {dst} {rule} {prefix} {g} {g} {nh} {nw}")
        ref = families.POS_RULES[rule][0](torch.from_numpy(t), prefix, (nh, nw)).numpy()
        checks.append((f"{rule} ({families.POS_RULES[rule][1]}), {prefix} prefix rows, {g}x{g} -> {nh}x{nw}",
                       dst, ref))

    # 3. refusals
    refusals = []
    x = rng.standard_normal((5, 5, 2)).astype(np.float32)
    src = os.path.join(a.workdir, "bad.npy")
    np.save(src, x)
    src2 = os.path.join(a.workdir, "bad_table.npy")
    np.save(src2, rng.standard_normal((5, 2)).astype(np.float32))
    for k, (line, want) in enumerate([
            ("grid {src} {dst} bicubic 0 4 4 0.6 0.6", "gives a height of 3, not 4"),
            ("grid {src} {dst} bicubic 0 0 4 0 0", "output height is 0"),
            ("grid {src} {dst} bilinear 1 3 3 -1 0", "negative scale factor"),
            ("table {src2} {dst} timm 1 5 5 3 3", "the table has 5 rows, but 1 + 5 x 5 were expected")]):
        dst = os.path.join(a.workdir, f"bad{k}.out.npy")
        lines.append(line.format(src=src, src2=src2, dst=dst))
        refusals.append((line.split()[0] + " " + want, dst, want))

    cases = os.path.join(a.workdir, "cases.txt")
    with open(cases, "w") as f:
        f.write("\n".join(lines) + "\n")
    r = subprocess.run([a.tool, cases], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        print("FAIL: the tool failed")
        return 1

    failed = 0
    worst = 0.0
    for label, dst, ref in checks:
        if not os.path.exists(dst):
            err = open(dst + ".err").read().strip() if os.path.exists(dst + ".err") else "no output"
            print(f"FAIL {label}: {err}")
            failed += 1
            continue
        ours = np.load(dst)
        if ours.shape != ref.shape:
            print(f"FAIL {label}: shape {ours.shape} vs torch {ref.shape}")
            failed += 1
            continue
        e = float(np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-12))
        worst = max(worst, e)
        ok = e <= TOL
        print(f"{'ok' if ok else 'FAIL':4} {label}: relative error {e:.1e}")
        failed += not ok
    for label, dst, want in refusals:
        msg = open(dst + ".err").read().strip() if os.path.exists(dst + ".err") else ""
        ok = want in msg and not os.path.exists(dst)
        print(f"{'ok' if ok else 'FAIL':4} refused: {label}" + ("" if ok else f" (got: {msg or 'no error'})"))
        failed += not ok
    print(f"{len(checks)} comparisons (worst relative error {worst:.1e}), {len(refusals)} refusals, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
