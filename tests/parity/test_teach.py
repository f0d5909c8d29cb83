#!/usr/bin/python3
"""The teaching numbers of `vitscope-cli analyze` and the two pitfall switches of
`vitscope-cli trace`, against numpy and PyTorch on random models.

- embed_filters / embed_filters_var: numpy's SVD of the centred patch-embedding
  weight (components compared up to sign, and our sign convention checked).
- pos_similarity: torch.nn.functional.cosine_similarity.
- attn_distance: a direct numpy loop over the definition, on torchvision's own
  attention weights (nn.MultiheadAttention, need_weights=True).
- logit_lens: torchvision's encoder.ln + heads on the hooked residual stream after
  each encoder layer; its last row equals the trace's probs. With the LayerNorm
  options and with mean pooling: F.layer_norm / torch.var(unbiased=True) by hand.
- --bug-scale-after-softmax / --bug-reshape-patches: a tiny ViT written as an
  nn.Module that has the bugs, compared stage by stage with `trace`; the trace's
  __options__ entry records them.
"""
import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.dirname(__file__))
import vitref  # noqa: E402

torch.set_num_threads(1)
FAIL = []


def report(ok, label, detail=""):
    print(f"{'ok' if ok else 'FAIL':4} {label}{': ' + detail if detail else ''}")
    if not ok:
        FAIL.append(label)


def write_gray_png(path, img):
    """An 8-bit grayscale PNG of a (H, W) uint8 array (zlib only: no imaging library needed)."""
    import struct
    import zlib
    h, w = img.shape

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + bytes(img[y].astype(np.uint8)) for y in range(h))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def rel_err(a, r):
    a, r = np.asarray(a, np.float64), np.asarray(r, np.float64)
    if a.shape != r.shape:
        return float("inf")
    return float(np.abs(a - r).max() / max(np.abs(r).max(), 1e-12))


class Cli:
    def __init__(self, exe, workdir):
        self.exe, self.dir = exe, workdir
        os.makedirs(workdir, exist_ok=True)

    def path(self, n):
        return os.path.join(self.dir, n)

    def run(self, cmd, model, x=None, *flags, expect_ok=True):
        out = self.path(f"{cmd}.npz")
        args = [self.exe, cmd, "--model", model, "--out", out, *flags]
        if x is not None:
            np.save(self.path("input.npy"), np.asarray(x, np.float32))
            args += ["--input", self.path("input.npy")]
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode != 0:
            if not expect_ok:
                return r
            raise SystemExit(f"vitscope-cli {' '.join(args[1:])} failed ({r.returncode}): {r.stderr}")
        with np.load(out) as z:
            return {k: z[k] for k in z.files}


def tv_hooked(model, x):
    """torchvision forward with hooks: each layer's output (the residual stream after
    the block) and each layer's attention weights (H, T, T) from PyTorch itself."""
    resid, pattern, hooks, busy, ln1 = [], [], [], [False], [None]
    for layer in model.encoder.layers:
        hooks.append(layer.register_forward_hook(lambda m, i, o: resid.append(o[0].clone())))
        # torchvision calls self_attention with keywords: its input is ln_1's output
        hooks.append(layer.ln_1.register_forward_hook(lambda m, i, o: ln1.__setitem__(0, o)))

        def attn_hook(m, inp, out):
            if busy[0]:
                return
            busy[0] = True
            a = ln1[0]
            pattern.append(m(a, a, a, need_weights=True, average_attn_weights=False)[1][0].clone())
            busy[0] = False
        hooks.append(layer.self_attention.register_forward_hook(attn_hook))
    with torch.no_grad():
        logits = model(x)
    for h in hooks:
        h.remove()
    return resid, pattern, logits[0]


def attn_distance_ref(patterns, G, P):
    """The definition, written out: for each layer and head, the mean over patch queries
    of sum over patch keys of pattern[h, 1+q, 1+k] * |centre(q) - centre(k)| (pixels)."""
    N = G * G
    centre = [((n % G + 0.5) * P, (n // G + 0.5) * P) for n in range(N)]
    out = np.zeros((len(patterns), patterns[0].shape[0]))
    for l, pat in enumerate(patterns):
        pat = np.asarray(pat, np.float64)
        for h in range(pat.shape[0]):
            total = 0.0
            for q in range(N):
                for k in range(N):
                    dx, dy = centre[q][0] - centre[k][0], centre[q][1] - centre[k][1]
                    total += pat[h, 1 + q, 1 + k] * math.hypot(dx, dy)
            out[l, h] = total / N
    return out


def ln(x, w, b, eps, affine, unbiased):
    if unbiased:
        y = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=True, keepdim=True) + eps)
    else:
        y = F.layer_norm(x, (x.shape[-1],), eps=eps)
    return y * w + b if affine else y


class TinyViT(nn.Module):
    """A small ViT in plain PyTorch modules, with the two classic bugs as switches:
    scale_after_softmax: attn = (q @ k.T).softmax(-1) / sqrt(d)  (instead of scaling the scores)
    reshape_patches:     patches = x.reshape(N, C*P*P)           (instead of unfold / conv)
    forward() returns every stage under vitscope's names."""

    def __init__(self, canon, heads, eps):
        super().__init__()
        W = canon["patch_embed.proj.weight"]
        D, C, P, _ = W.shape
        self.C, self.P, self.D, self.heads = C, P, D, heads
        self.proj = nn.Conv2d(C, D, P, stride=P)
        self.cls = nn.Parameter(canon["cls_token"].reshape(D).clone())
        self.pos = nn.Parameter(canon["pos_embed"].reshape(-1, D).clone())
        depth = len({k.split(".")[1] for k in canon if k.startswith("blocks.")})
        self.blocks = nn.ModuleList()
        for _ in range(depth):
            M = canon["blocks.0.mlp.fc1.weight"].shape[0]
            self.blocks.append(nn.ModuleDict({
                "norm1": nn.LayerNorm(D, eps=eps), "qkv": nn.Linear(D, 3 * D), "proj": nn.Linear(D, D),
                "norm2": nn.LayerNorm(D, eps=eps), "fc1": nn.Linear(D, M), "fc2": nn.Linear(M, D)}))
        self.norm = nn.LayerNorm(D, eps=eps)
        self.head = nn.Linear(D, canon["head.weight"].shape[0])
        with torch.no_grad():
            self.proj.weight.copy_(W)
            self.proj.bias.copy_(canon["patch_embed.proj.bias"])
            for i, b in enumerate(self.blocks):
                p = f"blocks.{i}."
                for mod, key in [("norm1", "norm1"), ("qkv", "attn.qkv"), ("proj", "attn.proj"), ("norm2", "norm2"),
                                 ("fc1", "mlp.fc1"), ("fc2", "mlp.fc2")]:
                    b[mod].weight.copy_(canon[p + key + ".weight"])
                    b[mod].bias.copy_(canon[p + key + ".bias"])
            self.norm.weight.copy_(canon["norm.weight"])
            self.norm.bias.copy_(canon["norm.bias"])
            self.head.weight.copy_(canon["head.weight"])
            self.head.bias.copy_(canon["head.bias"])

    def forward(self, x, scale_after_softmax=False, reshape_patches=False):
        C, P, D, Hh = self.C, self.P, self.D, self.heads
        S = x.shape[-1]
        G, N = S // P, (S // P) ** 2
        rec = {"input": x}
        if reshape_patches:
            patches = x.reshape(N, C * P * P)  # BUG: rows of the image, not patches
            pe = F.linear(patches, self.proj.weight.reshape(D, -1), self.proj.bias)
        else:
            patches = x.unfold(1, P, P).unfold(2, P, P).permute(1, 2, 0, 3, 4).reshape(N, C * P * P)
            pe = self.proj(x[None])[0].flatten(1).T
        rec["patches"], rec["patch_embed"] = patches, pe
        h = torch.cat([self.cls[None], pe], 0)
        rec["tokens"] = h
        h = h + self.pos
        rec["embed"] = h
        T, d = h.shape[0], D // Hh
        for i, b in enumerate(self.blocks):
            p = f"blocks.{i}."
            a = b["norm1"](h)
            rec[p + "ln1.out"] = a
            q, k, v = [t.reshape(T, Hh, d).transpose(0, 1) for t in b["qkv"](a).chunk(3, -1)]
            rec[p + "attn.q"], rec[p + "attn.k"], rec[p + "attn.v"] = q, k, v
            if scale_after_softmax:
                s = q @ k.transpose(-1, -2)
                attn = s.softmax(-1) / math.sqrt(d)  # BUG: the scale after the softmax
            else:
                s = q @ k.transpose(-1, -2) / math.sqrt(d)
                attn = s.softmax(-1)
            rec[p + "attn.scores"], rec[p + "attn.pattern"] = s, attn
            z = attn @ v
            rec[p + "attn.z"] = z
            ao = b["proj"](z.transpose(0, 1).reshape(T, D))
            rec[p + "attn.out"] = ao
            h = h + ao
            rec[p + "resid_mid"] = h
            a = b["norm2"](h)
            rec[p + "ln2.out"] = a
            pre = b["fc1"](a)
            post = F.gelu(pre)
            mo = b["fc2"](post)
            rec[p + "mlp.pre"], rec[p + "mlp.post"], rec[p + "mlp.out"] = pre, post, mo
            h = h + mo
            rec[p + "resid_post"] = h
        f = self.norm(h)
        rec["ln_final.out"] = f
        rec["pooled"] = f[0]
        rec["logits"] = self.head(f[0])
        rec["probs"] = rec["logits"].softmax(-1)
        return rec


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    cli = Cli(a.cli, a.workdir)

    # ---------------------------------------------------------------- a random torchvision ViT
    S, P, L, Hh, D, M, K = 32, 8, 3, 4, 64, 128, 10
    G, CPP = S // P, 3 * P * P
    torch.manual_seed(0)
    tv = torchvision.models.VisionTransformer(image_size=S, patch_size=P, num_layers=L, num_heads=Hh, hidden_dim=D,
                                              mlp_dim=M, num_classes=K).eval()
    vitref.randomize(tv, 5)
    model = cli.path("tv.safetensors")
    vitref.write_safetensors(model, tv.state_dict(), {"num_heads": Hh})
    x = torch.randn(1, 3, S, S)
    ours = cli.run("analyze", model, x[0].numpy())
    trace = cli.run("trace", model, x[0].numpy())

    # PCA of the embedding filters: numpy's SVD of the centred (D, CPP) weight.
    Wt = tv.conv_proj.weight.double().reshape(D, CPP).numpy()
    Wc = Wt - Wt.mean(0)
    _, sv, Vt = np.linalg.svd(Wc, full_matrices=False)
    k = min(28, CPP)
    ratio = sv ** 2 / (sv ** 2).sum()
    f = ours["embed_filters"]
    report(f.shape == (k, 3, P, P) and ours["embed_filters_var"].shape == (k,),
           "embed_filters shapes", f"{f.shape}, {ours['embed_filters_var'].shape}")
    fr = f.reshape(k, CPP).astype(np.float64)
    cos = np.abs((fr * Vt[:k]).sum(1))  # up to sign: |<ours, numpy's>| = 1
    report(float(1 - cos.min()) < 1e-5, "embed_filters == numpy SVD components up to sign",
           f"min |cos| {cos.min():.8f} over {k} components")
    err = rel_err(ours["embed_filters_var"], ratio[:k])
    report(err < 1e-5, "embed_filters_var == numpy S^2 / sum S^2", f"relative error {err:.2e}")
    biggest = fr[np.arange(k), np.abs(fr).argmax(1)]
    report(bool((biggest > 0).all()), "sign convention: each component's largest-magnitude entry is positive")
    # numpy's eigh of the covariance gives the same subspace too (a second reference)
    lam, V = np.linalg.eigh(Wc.T @ Wc / (D - 1))
    cos2 = np.abs((fr * V[:, ::-1][:, :k].T).sum(1))
    report(float(1 - cos2.min()) < 1e-5, "embed_filters == numpy eigh of the covariance up to sign",
           f"min |cos| {cos2.min():.8f}")

    # Position-embedding similarity: torch's cosine_similarity, cls excluded.
    pos = tv.encoder.pos_embedding[0, 1:]
    ref = F.cosine_similarity(pos[:, None, :], pos[None, :, :], dim=-1).numpy()
    err = rel_err(ours["pos_similarity"], ref)
    report(ours["pos_similarity"].shape == (G * G, G * G) and err < 1e-5,
           "pos_similarity == F.cosine_similarity", f"shape {ours['pos_similarity'].shape}, relative error {err:.2e}")

    # Mean attention distance: the definition in numpy on PyTorch's own attention weights.
    resid, patterns, logits = tv_hooked(tv, x)
    ref = attn_distance_ref([p.numpy() for p in patterns], G, P)
    err = rel_err(ours["attn_distance"], ref)
    report(ours["attn_distance"].shape == (L, Hh) and err < 1e-5,
           "attn_distance == numpy loop over the definition (torchvision's attention weights)",
           f"relative error {err:.2e}, values {np.round(ref[:, 0], 2).tolist()}... px")

    # Logit lens: torchvision's encoder.ln + heads on each hooked residual, cls token.
    ref = np.stack([tv.heads(tv.encoder.ln(r[None])[:, 0]).softmax(-1)[0].numpy() for r in resid])
    err = rel_err(ours["logit_lens"], ref)
    report(ours["logit_lens"].shape == (L, K) and err < 1e-5,
           "logit_lens == torchvision encoder.ln + heads on hooked residuals", f"relative error {err:.2e}")
    report(np.array_equal(ours["logit_lens"][-1], trace["probs"]), "logit_lens last row == trace probs exactly")
    report(rel_err(trace["probs"], logits.softmax(-1).numpy()) < 1e-5, "  (the trace's probs == torchvision's)")

    # The options file entry.
    opts = json.loads(str(ours["__options__"]))
    report(opts == {"elementwise_affine": True, "unbiased": False, "pooling": "cls",
                    "bug_scale_after_softmax": False, "bug_reshape_patches": False,
                    "interventions": {"heads": [], "sublayers": [], "dropped": [], "patch": None}},
           "analyze records __options__", json.dumps(opts))

    # LayerNorm options: the lens by hand with F.layer_norm / var(unbiased=True).
    canon = vitref.tv_to_canonical(tv.state_dict(), L)
    for aff, unb, fl in [(False, False, ["--no-affine"]), (True, True, ["--unbiased"]),
                         (False, True, ["--no-affine", "--unbiased"])]:
        o = cli.run("analyze", model, x[0].numpy(), *fl)
        man = vitref.manual_forward(canon, x[0], Hh, 1e-6, affine=aff, unbiased=unb)
        rows = []
        for l in range(L):
            h = man[f"blocks.{l}.resid_post"][0]
            rows.append(F.linear(ln(h, canon["norm.weight"], canon["norm.bias"], 1e-6, aff, unb), canon["head.weight"],
                                 canon["head.bias"]).softmax(-1).numpy())
        err = rel_err(o["logit_lens"], np.stack(rows))
        ok_opts = json.loads(str(o["__options__"]))["elementwise_affine"] == aff and \
            json.loads(str(o["__options__"]))["unbiased"] == unb
        report(err < 1e-5 and ok_opts, f"logit_lens with {' '.join(fl)} == manual LayerNorm + head",
               f"relative error {err:.2e}")
        ref_d = attn_distance_ref([man[f"blocks.{l}.attn.pattern"].numpy() for l in range(L)], G, P)
        err = rel_err(o["attn_distance"], ref_d)
        report(err < 1e-5, f"attn_distance with {' '.join(fl)}", f"relative error {err:.2e}")

    # ---------------------------------------------------------------- grayscale, mean pooling
    torch.manual_seed(7)
    D2, H2, L2, K2, P2, S2 = 32, 2, 2, 4, 4, 12
    g = {"cls_token": torch.randn(1, 1, D2), "pos_embed": torch.randn(1, (S2 // P2) ** 2 + 1, D2) * 0.5,
         "patch_embed.proj.weight": torch.randn(D2, 1, P2, P2) / P2, "patch_embed.proj.bias": torch.randn(D2) * 0.1,
         "norm.weight": 1 + 0.1 * torch.randn(D2), "norm.bias": 0.1 * torch.randn(D2),
         "head.weight": torch.randn(K2, D2) / math.sqrt(D2), "head.bias": torch.randn(K2) * 0.1}
    for i in range(L2):
        q = f"blocks.{i}."
        for n in ["norm1", "norm2"]:
            g[q + n + ".weight"] = 1 + 0.1 * torch.randn(D2)
            g[q + n + ".bias"] = 0.1 * torch.randn(D2)
        for n, o_, i_ in [("attn.qkv", 3 * D2, D2), ("attn.proj", D2, D2), ("mlp.fc1", 4 * D2, D2),
                          ("mlp.fc2", D2, 4 * D2)]:
            g[q + n + ".weight"] = torch.randn(o_, i_) / math.sqrt(i_)
            g[q + n + ".bias"] = 0.1 * torch.randn(o_)
    gray = cli.path("gray_mean.safetensors")
    vitref.write_safetensors(gray, {("fc_norm" + k[4:] if k.startswith("norm.") else k): v for k, v in g.items()},
                             {"num_heads": H2})
    xg = torch.randn(1, S2, S2)
    for fl, aff, unb in [([], True, False), (["--unbiased"], True, True)]:
        o = cli.run("analyze", gray, xg.numpy(), *fl)
        tr = cli.run("trace", gray, xg.numpy(), *fl)
        man = vitref.manual_forward(g, xg, H2, 1e-6, affine=aff, unbiased=unb, pooling="mean")
        rows = [F.linear(ln(man[f"blocks.{l}.resid_post"][1:].mean(0), g["norm.weight"], g["norm.bias"], 1e-6, aff,
                            unb), g["head.weight"], g["head.bias"]).softmax(-1).numpy() for l in range(L2)]
        err = rel_err(o["logit_lens"], np.stack(rows))
        report(err < 1e-5 and np.array_equal(o["logit_lens"][-1], tr["probs"]),
               f"logit_lens, grayscale mean pooling {' '.join(fl)}: mean of patch rows + fc_norm + head",
               f"relative error {err:.2e}, last row == probs exactly")
        report(json.loads(str(o["__options__"]))["pooling"] == "mean", "  __options__ says pooling mean")
        Wg = g["patch_embed.proj.weight"].double().reshape(D2, -1).numpy()
        _, sv, Vt = np.linalg.svd(Wg - Wg.mean(0), full_matrices=False)
        kk = min(28, P2 * P2)
        cos = np.abs((o["embed_filters"].reshape(kk, -1) * Vt[:kk]).sum(1))
        report(o["embed_filters"].shape == (kk, 1, P2, P2) and float(1 - cos.min()) < 1e-5,
               "  embed_filters, 1 channel, k = C*P*P = 16", f"min |cos| {cos.min():.8f}")

    # ---------------------------------------------------------------- the pitfall switches
    # First the bug-free TinyViT against torchvision (the reference is right), then each bug
    # against vitscope's trace, stage by stage.
    tiny = TinyViT(canon, Hh, 1e-6).eval()
    ref = tiny(x[0])
    err = max([rel_err(ref["probs"].numpy(), logits.softmax(-1).numpy())] +
              [rel_err(ref[f"blocks.{l}.resid_post"].numpy(), resid[l].numpy()) for l in range(L)] +
              [rel_err(ref[f"blocks.{l}.attn.pattern"].numpy(), patterns[l].numpy()) for l in range(L)])
    report(err < 1e-5, "  reference self-check: TinyViT without bugs == torchvision (patterns, residuals, probs)",
           f"relative error {err:.2e} (d = 16: the 1/4 scale is exact in either order)")
    clean = cli.run("trace", model, x[0].numpy())
    for sa, rp, fl in [(True, False, ["--bug-scale-after-softmax"]), (False, True, ["--bug-reshape-patches"]),
                       (True, True, ["--bug-scale-after-softmax", "--bug-reshape-patches"])]:
        ref = tiny(x[0], scale_after_softmax=sa, reshape_patches=rp)
        tr = cli.run("trace", model, x[0].numpy(), *fl)
        worst, bad = vitref.compare(tr, ref, sorted(ref), tol=1e-4)
        report(not bad, f"trace {' '.join(fl)} == TinyViT with the bug, {len(ref)} stages",
               f"worst relative error {worst:.2e}" + ("; " + "; ".join(bad) if bad else ""))
        opts = json.loads(str(tr["__options__"]))
        report(opts["bug_scale_after_softmax"] == sa and opts["bug_reshape_patches"] == rp,
               "  the trace's __options__ records the bugs", json.dumps(opts))
        moved = float(np.abs(tr["probs"] - clean["probs"]).max())
        report(moved > 1e-3, "  the bug changes the prediction downstream", f"max |probs change| {moved:.3f}")
        if sa:
            rows = tr["blocks.0.attn.pattern"].sum(-1)
            report(bool(np.allclose(rows, 1 / math.sqrt(D // Hh), atol=1e-5)),
                   f"  pattern rows sum to 1/sqrt(d) = {1 / math.sqrt(D // Hh):.4f}")
        # analyze under the bug: the lens still ends in the trace's probs
        o = cli.run("analyze", model, x[0].numpy(), *fl)
        report(np.array_equal(o["logit_lens"][-1], tr["probs"]), "  analyze under the bug: lens last row == probs")
    report(list(clean)[-1] == "__options__" and json.loads(str(clean["__options__"]))["bug_scale_after_softmax"] is False,
           "trace without bugs: __options__ is the last entry, bugs off")

    # ---------------------------------------------------------------- averaged distance, errors
    if os.path.isdir(a.data):
        o = cli.run("analyze", "default", None, "--average", "4")
        avg = o.get("attn_distance_avg")
        import gzip
        with gzip.open(os.path.join(a.data, "t10k-images-idx3-ubyte.gz")) as fh:
            imgs = np.frombuffer(fh.read(), np.uint8)[16:].reshape(-1, 28, 28)
        info = subprocess.run([a.cli, "info", "--model", "default"], capture_output=True, text=True).stdout
        pre = [ln_ for ln_ in info.splitlines() if ln_.startswith("preprocess")][0]
        mean, std = float(pre.split("mean")[1].split(",")[0]), float(pre.split("std")[1])
        each = [cli.run("analyze", "default", ((imgs[i] / 255.0 - mean) / std)[None])["attn_distance"] for i in range(4)]
        err = rel_err(avg, np.mean(each, 0)) if avg is not None else float("inf")
        spread = rel_err(each[0], np.mean(each, 0))
        report(err < 2e-3 and spread > 10 * err,
               "analyze --average 4 == mean of attn_distance over the first 4 Fashion-MNIST test images",
               f"relative error {err:.1e} (input normalised with info's 4-digit mean/std); images differ by {spread:.1e}")
    else:
        print(f"skip --average: no dataset at {a.data}")
    r = cli.run("analyze", model, np.zeros((3, S + 1, S + 1)), expect_ok=False)
    report(r.returncode == 1 and "input" in r.stderr, "analyze with a wrong-size input exits 1 naming it",
           r.stderr.strip())
    if os.path.isdir(a.data):
        # an RGB model: each gray test image through the model's own preprocessing (the plane
        # repeated, resized to its size), exactly as that image saved as a gray PNG would be
        o = cli.run("analyze", model, None, "--average", "2")
        each = []
        for i in range(2):
            png = cli.path(f"test{i}.png")
            write_gray_png(png, imgs[i])
            r = subprocess.run([a.cli, "analyze", "--model", model, "--image", png, "--out", cli.path("one.npz")],
                               capture_output=True, text=True)
            with np.load(cli.path("one.npz")) as z:
                each.append(z["attn_distance"])
        avg = o.get("attn_distance_avg")
        err = rel_err(avg, np.mean(each, 0)) if avg is not None else float("inf")
        spread = rel_err(each[0], each[1])
        report(err < 1e-6 and spread > 1e-3,
               "analyze --average 2 on an RGB model == mean of attn_distance of the 2 images as gray PNGs",
               f"relative error {err:.1e}; the two images differ by {spread:.1e}")

    print(f"{'FAILED: ' + ', '.join(FAIL) if FAIL else 'all teaching checks passed'}")
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
