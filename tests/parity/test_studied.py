#!/usr/bin/python3
"""What the families are studied for, as `vitscope-cli analyze` writes it (core/teach/studied.cpp),
against numpy computed from the stages `vitscope-cli trace` records for the same model and input:

- token_norms (L, T): np.linalg.norm of every blocks.l.resid_post row; high_norm_tokens: the tokens
  above factor x the median patch norm at the last layer.
- features_pca / features_rgb / features_var / features_fg: np.linalg.eigh of the covariance of the
  final patch features (ln_final.out's patch rows when the final norm is over every token, else the
  last block's resid_post), the components signed so that their largest entry is positive.
- pos_similarity_run: the cosine similarity of the patch rows of the pos_embed the run added (after
  resizing to its grid).
- self_attn / self_attn_mask / self_attn_kept: DINO's visualize_attention.py threshold rule on the cls
  row of the last attention pattern (SigLIP: the pooling probe's row, head.attn.pattern).

The prefix (cls, registers, dist) is written here from each family's published token order, not
read from ViTScope: DINOv2 with registers has cls + 4 registers, DeiT distilled cls + dist, SigLIP
none. Every family's preset runs, at non-square sizes where the patch allows it.
"""
import os
import subprocess
import sys

import numpy as np

import test_parity  # script_args

FAIL = []

# preset, --image-size (H,W or ""), prefix tokens by the family's published order, final norm over every token
CASES = [
    ("default", "", 1, True),                 # timm-style cls pooling: norm over every token
    ("deit-ti16-distilled", "64,96", 2, True),   # cls, dist
    ("dino-s16", "80,48", 1, True),
    ("dinov2-s14", "56,84", 1, True),
    ("dinov2-s14-reg", "112,168", 5, True),   # cls, reg0..reg3
    ("clip-b32", "", 1, False),               # ln_post on the cls row only: the last resid_post is read
    ("siglip-b16", "64,96", 0, True),         # no cls: the pooling probe
    ("mae-b16", "64,64", 1, True),
]


def report(ok, label, detail=""):
    print(f"{'ok' if ok else 'FAIL':4} {label}{': ' + detail if detail else ''}")
    if not ok:
        FAIL.append(label)


def rel_err(a, r):
    a, r = np.asarray(a, np.float64), np.asarray(r, np.float64)
    if a.shape != r.shape:
        return float("inf")
    return float(np.abs(a - r).max() / max(np.abs(r).max(), 1e-12))


def run(cli, *args):
    r = subprocess.run([cli, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return r.stdout


def pca_ref(feats):
    X = feats.astype(np.float64)
    X = X - X.mean(0)
    N = X.shape[0]
    cov = X.T @ X / (N - 1)
    lam_all, V = np.linalg.eigh(cov)
    V = V[:, ::-1][:, :3].copy()
    lam = lam_all[::-1][:4]
    for j in range(3):
        big = np.argmax(np.abs(V[:, j]))
        if V[big, j] < 0:
            V[:, j] = -V[:, j]
    proj = X @ V
    lo, hi = proj.min(0), proj.max(0)
    rgb = np.where(hi > lo, (proj - lo) / np.where(hi > lo, hi - lo, 1), 0.5)
    return proj, rgb, lam[:3] / np.trace(cov), (proj[:, 0] > 0).astype(np.float64), lam


def masks_ref(a, keep):
    idx = np.argsort(a, axis=1, kind="stable")
    v = np.take_along_axis(a.astype(np.float64), idx, 1)
    v = v / v.sum(1, keepdims=True)
    cum = np.cumsum(v, 1)
    th = cum > 1 - keep
    mask = np.zeros_like(a, dtype=np.float64)
    margin = np.full(a.shape, np.inf)
    kept = np.zeros(a.shape[0])
    for h in range(a.shape[0]):
        mask[h, idx[h]] = th[h]
        margin[h, idx[h]] = np.abs(cum[h] - (1 - keep))
        kept[h] = v[h][th[h]].sum()
    return mask, margin, kept


def check(cli, workdir, image, model, size, prefix, norm_all, keep=0.6, factor=2.0):
    tag = f"{model}" + (f" at {size}" if size else "")
    flags = ["--model", model, "--image", image] + (["--image-size", size] if size else [])
    an_path = os.path.join(workdir, f"analyze_{model}.npz")
    tr_path = os.path.join(workdir, f"trace_{model}.npz")
    run(cli, "analyze", *flags, "--keep", str(keep), "--norm-factor", str(factor), "--out", an_path)
    run(cli, "trace", *flags, "--out", tr_path)
    an, tr = np.load(an_path), np.load(tr_path)
    L = sum(1 for k in tr.files if k.startswith("blocks.") and k.endswith(".resid_post"))
    resid = np.stack([tr[f"blocks.{l}.resid_post"] for l in range(L)]).astype(np.float64)
    T = resid.shape[1]
    N = tr["patch_embed"].shape[0]
    report(T == prefix + N, f"{tag}: {T} tokens = {prefix} before the patches + {N} patches (the family's order)")

    # token norms and the high-norm tokens
    norms = np.linalg.norm(resid, axis=-1)
    report(an["token_norms"].shape == norms.shape and rel_err(an["token_norms"], norms) < 1e-5,
           f"{tag}: token_norms = np.linalg.norm(resid_post, axis=-1)", f"err {rel_err(an['token_norms'], norms):.2e}")
    last = norms[-1]
    high = np.flatnonzero(last > factor * np.median(last[prefix:]))
    report(list(an["high_norm_tokens"].astype(int)) == list(high), f"{tag}: high_norm_tokens",
           f"{list(an['high_norm_tokens'].astype(int))} vs {list(high)}")

    # patch features as colour
    src = tr["ln_final.out"] if norm_all else tr[f"blocks.{L - 1}.resid_post"]
    report(src.shape[0] == T, f"{tag}: the features are {'ln_final.out' if norm_all else 'the last resid_post'} ({src.shape})")
    proj, rgb, var, fg, lam = pca_ref(src[prefix:])
    gap = min(lam[0] - lam[1], lam[1] - lam[2], lam[2] - lam[3]) / max(lam[0], 1e-12)
    report(gap > 1e-6, f"{tag}: the top eigenvalues are distinct (components well defined)", f"relative gap {gap:.2e}")
    for name, ours, ref, tol in [("features_pca", an["features_pca"], proj, 2e-4), ("features_rgb", an["features_rgb"], rgb, 2e-4),
                                 ("features_var", an["features_var"], var, 1e-5)]:
        e = rel_err(ours, ref)
        report(e < tol, f"{tag}: {name} (numpy eigh, signed: largest entry positive)", f"err {e:.2e}")
    near0 = np.abs(proj[:, 0]) < 1e-4 * np.abs(proj[:, 0]).max()
    report(np.array_equal(an["features_fg"][~near0], fg[~near0]), f"{tag}: features_fg = first component > 0",
           f"{int(an['features_fg'].sum())} vs {int(fg.sum())} foreground patches")

    # the similarity of the position embeddings the run added (resized to its grid): the patch rows of
    # pos_embed (registers get no position: only cls and dist rows come before the patches)
    pos_pre = prefix - (4 if model.endswith("-reg") else 0)
    pe = tr["pos_embed"][pos_pre:].astype(np.float64)
    report(pe.shape[0] == N, f"{tag}: pos_embed has {pos_pre} rows before its {N} patch rows")
    nr = np.linalg.norm(pe, axis=1)
    sim = pe @ pe.T / np.maximum(nr[:, None] * nr[None, :], 1e-8)
    report(rel_err(an["pos_similarity_run"], sim) < 1e-5, f"{tag}: pos_similarity_run = cosine similarity of pos_embed's patch rows",
           f"err {rel_err(an['pos_similarity_run'], sim):.2e}")

    # the self-attention maps and their masks
    if prefix > 0:
        pat = tr[f"blocks.{L - 1}.attn.pattern"]
        a = pat[:, 0, prefix:]
        src_name = "the cls row of the last attn.pattern"
    else:
        pat = tr["head.attn.pattern"]
        a = pat[:, 0, :]
        src_name = "the probe's row of head.attn.pattern"
    report(an["self_attn"].shape == a.shape and rel_err(an["self_attn"], a) == 0, f"{tag}: self_attn is {src_name}")
    mask, margin, kept = masks_ref(a, keep)
    sure = margin > 1e-9
    report(an["self_attn_mask"].shape == mask.shape and np.array_equal(an["self_attn_mask"][sure], mask[sure]),
           f"{tag}: self_attn_mask keeps {keep:.0%} of each head's mass (DINO's rule)",
           f"{int(an['self_attn_mask'].sum())} vs {int(mask.sum())} patches kept")
    report(rel_err(an["self_attn_kept"], kept) < 1e-5 and bool(np.all(kept >= keep - 1e-9)),
           f"{tag}: self_attn_kept >= {keep}", f"{np.round(an['self_attn_kept'], 4)}")
    return an, tr


def check_dropped(cli, workdir, image, keep=0.6):
    """With patches dropped (an intervention) the features and the self-attention maps are over the
    kept patches, on the grid: a dropped patch has NaN and is outside every mask."""
    dropped = [0, 5, 6, 17]
    flags = ["--model", "dinov2-s14-reg", "--image", image, "--image-size", "56,84",
             "--drop-patches", ",".join(map(str, dropped))]
    an_path, tr_path = os.path.join(workdir, "analyze_dropped.npz"), os.path.join(workdir, "trace_dropped.npz")
    run(cli, "analyze", *flags, "--keep", str(keep), "--out", an_path)
    run(cli, "trace", *flags, "--out", tr_path)
    an, tr = np.load(an_path), np.load(tr_path)
    N, prefix = 24, 5
    kept = [n for n in range(N) if n not in dropped]
    src = tr["ln_final.out"]
    report(src.shape[0] == prefix + len(kept), f"dropped patches: ln_final.out has {prefix} + {len(kept)} kept rows ({src.shape})")
    proj, rgb, var, fg, _ = pca_ref(src[prefix:])
    ours = an["features_pca"]
    report(ours.shape == (N, 3) and bool(np.isnan(ours[dropped]).all()), "dropped patches: features_pca is on the grid, NaN at the dropped ones")
    e = rel_err(ours[kept], proj)
    report(e < 2e-4, "dropped patches: features_pca of the kept patches = numpy's PCA over the kept rows", f"err {e:.2e}")
    report(bool((an["features_fg"][dropped] == 0).all()), "dropped patches: no dropped patch is foreground")
    a = tr["blocks.11.attn.pattern"][:, 0, prefix:]
    sa = an["self_attn"]
    report(sa.shape == (a.shape[0], N) and bool(np.isnan(sa[:, dropped]).all()) and rel_err(sa[:, kept], a) == 0,
           "dropped patches: self_attn is the cls row over the kept patches, NaN at the dropped ones")
    mask, margin, kept_mass = masks_ref(a, keep)
    sure = margin > 1e-9
    m = an["self_attn_mask"]
    report(bool((m[:, dropped] == 0).all()) and np.array_equal(m[:, kept][sure], mask[sure]),
           "dropped patches: self_attn_mask by DINO's rule over the kept patches, dropped ones outside")


def main():
    a = test_parity.script_args("cli", "workdir", "image")
    for model, size, prefix, norm_all in CASES:
        check(a.cli, a.workdir, a.image, model, size, prefix, norm_all)
    # another keep and factor change the masks and the list as numpy says
    check(a.cli, a.workdir, a.image, "dinov2-s14-reg", "112,168", 5, True, keep=0.9, factor=1.2)
    check_dropped(a.cli, a.workdir, a.image)
    # a keep outside (0, 1] is refused
    r = subprocess.run([a.cli, "analyze", "--model", "default", "--image", a.image, "--keep", "0", "--out",
                        os.path.join(a.workdir, "bad.npz")], capture_output=True, text=True)
    report(r.returncode == 2 and "--keep" in r.stderr, "analyze --keep 0 is refused (exit 2, names the flag)", r.stderr.strip()[:120])
    if FAIL:
        print(f"{len(FAIL)} FAILED: " + "; ".join(FAIL))
        sys.exit(1)
    print("all passed")


if __name__ == "__main__":
    main()
