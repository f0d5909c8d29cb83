#!/usr/bin/python3
"""Backward pass, AdamW and gradient traces against PyTorch autograd.

For several tiny ViTs (cls and mean pooling, with and without LayerNorm
affine, biased and unbiased variance, RGB and grayscale), the same weights
and batch go through PyTorch autograd (softmax cross-entropy, mean over the
batch) and through vitscope's Batch::backward. Every parameter gradient must
match to 1e-3 relative; two AdamW steps must match torch.optim.AdamW; the
gradient of the label's logit with respect to every recorded stage must match
autograd's retain_grad() values."""
import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
import vitref  # noqa: E402

torch.set_num_threads(1)
FAIL = []


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-8))


def read_st(path):
    return vitref.read_safetensors(path)[0]


def random_canon(C, S, P, D, L, K, seed):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g)
    c = {"cls_token": r(1, 1, D), "pos_embed": r(1, (S // P) ** 2 + 1, D) * 0.3,
         "patch_embed.proj.weight": r(D, C, P, P) / math.sqrt(C * P * P), "patch_embed.proj.bias": r(D) * 0.1,
         "norm.weight": 1 + 0.2 * r(D), "norm.bias": 0.1 * r(D),
         "head.weight": r(K, D) / math.sqrt(D), "head.bias": 0.1 * r(K)}
    for i in range(L):
        q = f"blocks.{i}."
        for n in ("norm1", "norm2"):
            c[q + n + ".weight"] = 1 + 0.2 * r(D)
            c[q + n + ".bias"] = 0.1 * r(D)
        for n, o, ii in [("attn.qkv", 3 * D, D), ("attn.proj", D, D), ("mlp.fc1", 2 * D, D), ("mlp.fc2", D, 2 * D)]:
            c[q + n + ".weight"] = r(o, ii) / math.sqrt(ii)
            c[q + n + ".bias"] = 0.1 * r(o)
    return c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    cases = [  # C, S, P, D, L, heads, K, B, flags
        (3, 16, 4, 32, 2, 2, 5, 3, []),
        (1, 12, 4, 24, 2, 3, 4, 4, ["--no-affine"]),
        (3, 8, 4, 16, 1, 2, 3, 2, ["--unbiased"]),
        (1, 12, 3, 16, 2, 4, 6, 3, ["--mean"]),
        (3, 16, 4, 32, 1, 1, 5, 2, ["--no-affine", "--unbiased", "--mean"]),
    ]
    for ci, (C, S, P, D, L, H, K, B, flags) in enumerate(cases):
        label = f"C{C} {S}px p{P} D{D} L{L} H{H} B{B} {' '.join(flags) or 'defaults'}"
        canon = random_canon(C, S, P, D, L, K, ci)
        d = os.path.join(a.workdir, f"case{ci}")
        os.makedirs(d, exist_ok=True)
        vitref.write_safetensors(os.path.join(d, "m.safetensors"), canon, {"num_heads": H})
        g = torch.Generator().manual_seed(50 + ci)
        x = torch.randn(B, C, S, S, generator=g)
        y = torch.randint(0, K, (B,), generator=g)
        np.save(os.path.join(d, "x.npy"), x.numpy())
        np.save(os.path.join(d, "y.npy"), y.numpy().astype(np.float32))
        r = subprocess.run([a.tool, os.path.join(d, "m.safetensors"), os.path.join(d, "x.npy"),
                            os.path.join(d, "y.npy"), d, *flags], capture_output=True, text=True)
        if r.returncode:
            print(r.stderr)
            FAIL.append(label)
            continue
        kw = dict(affine="--no-affine" not in flags, unbiased="--unbiased" in flags,
                  pooling="mean" if "--mean" in flags else "cls")
        params = {k: v.clone().requires_grad_(True) for k, v in canon.items()}
        logits = torch.stack([vitref.manual_forward(params, x[b], H, 1e-6, **kw)["logits"] for b in range(B)])
        loss = F.cross_entropy(logits, y)
        loss.backward()
        ours_loss = float(open(os.path.join(d, "loss.txt")).read())
        ok_loss = abs(ours_loss - loss.item()) <= 1e-5 * max(1, abs(loss.item()))
        grads = read_st(os.path.join(d, "grads.safetensors"))
        worst, bad = 0.0, []
        for k, p in params.items():
            if not kw["affine"] and (".norm" in k or k.startswith("norm.")):
                continue  # gamma/beta are unused without affine: their gradient is zero on both sides
            e = rel(grads[k].reshape(p.shape), p.grad.numpy())
            worst = max(worst, e)
            if not e <= 1e-3:
                bad.append(f"{k}: {e:.2e}")
        st = "ok" if ok_loss and not bad else "FAIL"
        print(f"{st:4} parameter gradients vs autograd [{label}]: {len(params)} tensors, worst {worst:.2e}, "
              f"loss {ours_loss:.6f} vs {loss.item():.6f}")
        for b_ in bad:
            print("     " + b_)
        if st == "FAIL":
            FAIL.append(label + " grads")

        # Two AdamW steps on the same gradients (ours, so that Adam's division by
        # sqrt(v) cannot amplify 1e-12 differences), one group, decay on every tensor.
        ps = {k: v.clone().requires_grad_(True) for k, v in canon.items()}
        opt = torch.optim.AdamW(list(ps.values()), lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
        for _ in range(2):
            for k, p in ps.items():
                p.grad = torch.tensor(grads[k]).reshape(p.shape)
            opt.step()
        upd = read_st(os.path.join(d, "adamw2.safetensors"))
        worst = max(rel(upd[k].reshape(p.shape), p.detach().numpy()) for k, p in ps.items())
        st = "ok" if worst <= 1e-5 else "FAIL"
        print(f"{st:4} two AdamW steps vs torch.optim.AdamW [{label}]: worst {worst:.2e}")
        if st == "FAIL":
            FAIL.append(label + " adamw")

        # Gradient of logit[y0] with respect to every stage of image 0.
        x0 = x[0].clone().requires_grad_(True)
        with torch.enable_grad():
            # parameters as leaves that need gradients, so stages made from them alone (pos_embed) get one
            rec = vitref.manual_forward({k: v.clone().requires_grad_(True) for k, v in canon.items()}, x0, H, 1e-6, **kw)
            for k, v in rec.items():
                if v.requires_grad and not v.is_leaf:
                    v.retain_grad()
            rec["logits"][int(y[0])].backward()
        with np.load(os.path.join(d, "gradtrace.npz")) as z:
            ours = {k[:-5]: z[k] for k in z.files}
        # Every stage the stage table says has a gradient is compared, and nothing else is written.
        with open(os.path.join(d, "table.json")) as f:
            want = [row["name"] for row in json.load(f) if row["has_grad"]]
        worst, bad = 0.0, []
        bad += [f"{n}.grad written, but the stage table gives {n} no gradient" for n in sorted(set(ours) - set(want))]
        for n in want:
            t = x0 if n == "input" else rec[n]
            if n == "patches":  # kernel = stride: d patches is d input, unfolded
                P_ = P
                t = None
                ref_p = x0.grad.unfold(1, P_, P_).unfold(2, P_, P_).permute(1, 2, 0, 3, 4).reshape(ours[n].shape)
            if n not in ours:
                bad.append(f"{n}.grad missing")
                continue
            if n == "patches":
                ref = ref_p.numpy()
            elif t.grad is None:
                ref = np.zeros(ours[n].shape)  # e.g. normalized == out without affine: torch keeps one
                if n.endswith(".normalized") and not kw["affine"]:
                    ref = rec[n.replace("normalized", "out")].grad.numpy()
            else:
                ref = t.grad.numpy()
            if ours[n].shape != ref.shape:
                bad.append(f"{n}.grad shape {ours[n].shape} vs {ref.shape}")
                continue
            e = rel(ours[n], ref)
            worst = max(worst, e)
            if not e <= 1e-3:
                bad.append(f"{n}.grad: {e:.2e}")
        st = "ok" if not bad else "FAIL"
        print(f"{st:4} stage gradients of logit[{int(y[0])}] vs retain_grad [{label}]: {len(want)} stages, worst {worst:.2e}")
        for b_ in bad:
            print("     " + b_)
        if bad:
            FAIL.append(label + " stage grads")
    print(f"{'FAILED: ' + ', '.join(FAIL) if FAIL else 'all gradient checks passed'}")
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
