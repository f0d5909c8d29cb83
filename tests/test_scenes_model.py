#!/usr/bin/python3
"""The scenes model (assets/scenes_vit.safetensors, embedded as `--model scenes`), checked against things
that are not ViTScope:

- the shipped file loads in plain PyTorch under timm's key names with its preprocessing in __metadata__, and
  that rebuild gives the same logits as `vitscope-cli trace --model scenes` on scenes written by
  `vitscope-cli scenes` (read back from their PNG files with PIL);
- `vitscope-cli scenes` writes labels.json with each scene's class and box (the box's pixels are the C++
  test's business: tests/test_scenes.cpp);
- the figures `vitscope-cli eval --scenes` prints (pointing game of the last block's cls attention and of
  the attention rollout, the position table's Spearman rho, the mean attention distance per block) equal
  the same figures computed here in numpy / PyTorch from the rebuild, on the same scenes;
- the README states the figures of the full evaluation (10,000 test scenes) as that command prints them.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "parity"))
import vitref  # noqa: E402


def spearman_mean(pos, G):
    """Mean over patches of Spearman's rho between cosine similarity and grid distance (ties: mean ranks)."""
    def rank(v):
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v))
        i = 0
        while i < len(v):
            j = i
            while j + 1 < len(v) and v[order[j + 1]] == v[order[i]]:
                j += 1
            r[order[i:j + 1]] = (i + j) / 2 + 1
            i = j + 1
        return r
    p = pos / np.maximum(np.linalg.norm(pos, axis=1, keepdims=True), 1e-8)
    sim = p @ p.T
    ys, xs = np.divmod(np.arange(G * G), G)
    rhos = []
    for i in range(G * G):
        m = np.arange(G * G) != i
        d = np.hypot(ys[m] - ys[i], xs[m] - xs[i])
        rhos.append(np.corrcoef(rank(sim[i, m]), rank(d))[0, 1])
    return float(np.mean(rhos))


def on_object(peak, box, G, P):
    y, x = divmod(int(peak), G)
    cx, cy = x * P + P / 2, y * P + P / 2
    return box[0] <= cx < box[2] and box[1] <= cy < box[3]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--readme")
    ap.add_argument("--count", type=int, default=40)
    a = ap.parse_args()
    ok = True

    def check(cond, text):
        nonlocal ok
        print(("ok   " if cond else "FAIL ") + text)
        ok &= bool(cond)

    size = os.path.getsize(a.model)
    check(size < 4_000_000, f"shipped model is {size / 1e6:.2f} MB (limit 4 MB)")
    arrays, meta = vitref.read_safetensors(a.model)
    sd = {k: torch.from_numpy(v) for k, v in arrays.items()}
    cfg = json.loads(meta["vitscope.config"])
    heads, eps = int(meta["num_heads"]), cfg["eps"]
    mean, std = np.array(cfg["mean"], np.float32), np.array(cfg["std"], np.float32)
    D, C, P, _ = sd["patch_embed.proj.weight"].shape
    S = cfg["image_size"]
    G = S // P
    depth = len({k.split(".")[1] for k in sd if k.startswith("blocks.")})
    check(C == 3 and S >= 48 and G >= 8, f"an RGB model of {G}x{G} patches ({S} px, patch {P})")

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "scenes")
        subprocess.run([a.cli, "scenes", "--split", "test", "--seed", "1", "--count", str(a.count), "--out", out],
                       check=True, capture_output=True)
        labels = json.load(open(os.path.join(out, "labels.json")))
        check(len(labels) == a.count and labels[0]["file"] == "00000.png", f"labels.json lists the {a.count} scenes")
        names = cfg.get("class_names") or json.loads(meta.get("class_names", "[]"))
        hits_cls = hits_roll = 0
        max_diff = 0.0
        dist_sum = np.zeros(depth)
        ys, xs = np.divmod(np.arange(G * G), G)
        cdist = np.hypot(ys[:, None] - ys[None], xs[:, None] - xs[None]) * P
        for i, lab in enumerate(labels):
            img = np.asarray(Image.open(os.path.join(out, lab["file"])).convert("RGB"), np.float32) / 255
            box = lab["box"]
            if i == 0:
                check(names and lab["class"] == names[lab["label"]], f"scene 0 is a {lab['class']} in box {box}")
                check(0 <= box[0] < box[2] <= S and 0 <= box[1] < box[3] <= S, "box inside the image")
            x = torch.from_numpy(((img - mean) / std).transpose(2, 0, 1).copy())
            with torch.no_grad():
                rec = vitref.manual_forward(sd, x, heads, eps)
            npz = os.path.join(tmp, f"t{i}.npz")
            subprocess.run([a.cli, "trace", "--model", "scenes", "--image", os.path.join(out, lab["file"]), "--out", npz,
                            "--stages", "logits"], check=True, capture_output=True)
            ours = np.load(npz)["logits"]
            max_diff = max(max_diff, float(np.abs(ours - rec["logits"].numpy()).max()))
            # pointing game, computed here: the last block's cls attention (mean over heads), and the rollout
            pat = [rec[f"blocks.{l}.attn.pattern"].numpy() for l in range(depth)]
            hits_cls += on_object(np.argmax(pat[-1].mean(0)[0, 1:]), box, G, P)
            R = np.eye(G * G + 1)
            for A in pat:
                A = (A.mean(0) + np.eye(G * G + 1)) / 2
                A = A / A.sum(-1, keepdims=True)
                R = A @ R
            hits_roll += on_object(np.argmax(R[0, 1:]), box, G, P)
            for l, A in enumerate(pat):
                dist_sum[l] += (A[:, 1:, 1:] * cdist[None]).sum(-1).mean()
        check(max_diff < 1e-4, f"PyTorch rebuild of the shipped weights vs `trace --model scenes` on {a.count} scenes: "
                               f"max |logit difference| {max_diff:.2e}")
        rho = spearman_mean(sd["pos_embed"].numpy().reshape(-1, D)[1:], G)
        r = subprocess.run([a.cli, "eval", "--model", "scenes", "--scenes", "--count", str(a.count)],
                           check=True, capture_output=True, text=True).stdout
        got_cls = float(re.search(r"last block's cls attention, mean over heads: ([0-9.]+)", r).group(1))
        got_roll = float(re.search(r"attention rollout through every block: +([0-9.]+)", r).group(1))
        got_rho = float(re.search(r"mean Spearman rho \(cosine similarity vs grid distance\): (-?[0-9.]+)", r).group(1))
        got_dist = [float(v) for v in re.search(r"per block \(pixels, mean over heads, \d+ scenes\):([0-9. ]+)", r).group(1).split()]
        check(abs(got_cls - hits_cls / a.count) < 1e-3, f"pointing, cls attention: eval {got_cls:.3f}, here {hits_cls / a.count:.3f}")
        check(abs(got_roll - hits_roll / a.count) < 1e-3, f"pointing, rollout: eval {got_roll:.3f}, here {hits_roll / a.count:.3f}")
        check(abs(got_rho - rho) < 2e-3, f"position table's Spearman rho: eval {got_rho:.3f}, here {rho:.3f}")
        here = dist_sum / a.count
        check(len(got_dist) == depth and max(abs(g - h) for g, h in zip(got_dist, here)) < 0.06,
              f"mean attention distance per block: eval {got_dist}, here {[round(h, 1) for h in here]}")

    if a.readme:
        # The README's figures are the full evaluation's, as the command prints them.
        readme = open(a.readme).read()
        full = subprocess.run([a.cli, "eval", "--model", "scenes", "--scenes"], check=True, capture_output=True, text=True).stdout
        acc = re.search(r"test accuracy: ([0-9.]+)%", full).group(1)
        stated = re.search(r"scenes model test accuracy: \*\*([0-9.]+)%\*\*", readme)
        check(stated and stated.group(1) == acc, f"README's scenes accuracy {stated.group(1) if stated else '(none)'}% = eval's {acc}%")
        for label, pat in (("cls pointing", r"last block's cls attention, mean over heads: ([0-9.]+)"),
                           ("rollout pointing", r"attention rollout through every block: +([0-9.]+)"),
                           ("Spearman rho", r"Spearman rho \(cosine similarity vs grid distance\): (-?[0-9.]+)")):
            v = re.search(pat, full).group(1)
            check(v in readme, f"README states the {label} {v}")
    print("all scenes-model checks passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
