#!/usr/bin/python3
"""Issue 10, items 4 and 1 in the app, and the teaching views' exports: the Distance tab (mean
attention distance, one dot per head, and its average over N test images) and the Patches tab
(the patches stage as pictures). The real app under Xvfb, checked by its pixels, by the --layout
it reports and by the files it exports; the expected numbers come from `vitscope-cli analyze` and
`vitscope-cli trace`, read with numpy."""
import math
import os
import subprocess
import sys

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(__file__))
from test_truth import App, run_checks, crop, expect, labels_ok, FAIL  # noqa: E402

DOT = np.array([80, 170, 255])   # this image's dots
AVG = np.array([255, 150, 40])   # the average's rings


def analyze(app, *args):
    out = os.path.join(app.dir, "an.npz")
    r = subprocess.run([app.cli, "analyze", "--out", out, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"vitscope-cli analyze {' '.join(args)} failed: {r.stderr}")
    with np.load(out) as z:
        return {k: z[k] for k in z.files}


def values(lay, key):
    s = lay["strings"].get(key, "")
    return np.array([float(v) for v in s.split(",") if v])


def center(rect):
    x, y, w, h = rect
    return x + w / 2, y + h / 2


def check_distance(app):
    """--tab 7: attn_distance of this image as dots on a 0 .. diagonal pixel axis, the average over N
    test images as orange rings (--distance-images N runs it before the screenshot)."""
    exp = os.path.join(app.dir, "dist")
    os.makedirs(exp, exist_ok=True)
    for f in os.listdir(exp):
        os.remove(os.path.join(exp, f))
    a = analyze(app, "--image", app.sample, "--average", "5")
    d, davg = a["attn_distance"], a["attn_distance_avg"]
    L, H = d.shape
    S = app.trace()["input"].shape[-1]
    diag = S * math.sqrt(2)
    img, lay = app.shot("--tab", "7", "--distance-images", "5", "--export-npy", "--export-view", "--export-dir", exp)
    n, st, r = lay["numbers"], lay["strings"], lay["rects"]
    got = values(lay, "dist.values").reshape(-1, H) if st.get("dist.values") else None
    expect(lay["tab"] == "Distance" and got is not None and got.shape == d.shape and np.abs(got - d).max() <= 1e-4,
           f"--tab 7: the Distance tab shows the CLI's analyze attn_distance, {L} layers x {H} heads "
           f"(max err {np.abs(got - d).max() if got is not None and got.shape == d.shape else '-'})")
    # each dot's centre on the axis 0 (bottom) .. the image diagonal (top), from the CLI's value
    ax = r["dist.plot"]
    worst = 0.0
    for l in range(L):
        for h in range(H):
            cy = center(r[f"dist.dot.{l}.{h}"])[1]
            worst = max(worst, abs(cy - (ax[1] + ax[3] * (1 - d[l, h] / diag))))
    expect(worst <= 1.0, f"...every dot at y = axis(value), 0 .. {diag:.1f} px (worst {worst:.2f} px)")
    # pixels: the highest and the lowest dot are drawn in the dots' colour where the numbers put them
    for name, (l, h) in (("highest", np.unravel_index(d.argmax(), d.shape)), ("lowest", np.unravel_index(d.argmin(), d.shape))):
        cx = ax[0] + (l + 0.5) * ax[2] / L + (h - (H - 1) / 2) * min(7, 0.7 * ax[2] / L / H)
        cy = ax[1] + ax[3] * (1 - d[l, h] / diag)
        px = img[int(round(cy)), int(round(cx))]
        expect(np.abs(px - DOT).max() <= 40, f"...the {name} dot (layer {l}, head {h}, {d[l, h]:.2f} px) is drawn at "
               f"({cx:.0f}, {cy:.0f}): {px}")
    ys = [t["text"] for t in lay["texts"] if t["group"] == "dist.y"]
    xs = [t["text"] for t in lay["texts"] if t["group"] == "dist.x"]
    expect("0" in ys and f"{diag:.1f}" in ys and len(ys) >= 4, f"...y ticks from 0 to the diagonal {diag:.1f} ({ys})")
    expect(xs == [str(i) for i in range(L)], f"...x ticks are the layers 0..{L - 1} ({xs})")
    titles = [t["text"] for t in lay["texts"] if t["group"] in ("dist.title", "dist.xlabel")]
    expect(any("pixels" in t for t in titles) and any("layer" in t for t in titles), f"...axes named with units ({titles})")
    Np = app.trace()["patches"].shape[0]
    Gp = int(round(Np ** 0.5))
    Pp = S // Gp
    r_, c_ = np.divmod(np.arange(Np), Gp)
    uni = float((Pp * np.hypot(r_[:, None] - r_, c_[:, None] - c_)).mean())
    expect(abs(n.get("dist.uniform", -1) - uni) <= 1e-4 * uni and f"{uni:.1f} px" in st.get("dist.uniform.label", ""),
           f"...the dashed reference: evenly spread attention = numpy's mean patch-centre distance {uni:.2f} px")
    cnt, prob = labels_ok(lay["texts"], "dist")
    expect(prob is None, f"...its {cnt} labels inside the plot, none overlapping ({prob})")
    # the average: done, over 5 images, the CLI's numbers, drawn as rings
    expect(st.get("dist.avg.state") == "done" and n.get("dist.avg.images") == 5,
           f"--distance-images 5: the average ran before the screenshot ({st.get('dist.avg.state')}, {n.get('dist.avg.images')})")
    ga = values(lay, "dist.avg.values").reshape(-1, H) if st.get("dist.avg.values") else None
    expect(ga is not None and ga.shape == davg.shape and np.abs(ga - davg).max() <= 1e-4,
           f"...equal to analyze --average 5's attn_distance_avg (max err "
           f"{np.abs(ga - davg).max() if ga is not None and ga.shape == davg.shape else '-'})")
    lbl = st.get("dist.avg.label", "")
    expect("mean over 5" in lbl and "elementwise_affine=True" in lbl, f"...labelled with its image count and options ({lbl})")
    l, h = np.unravel_index(davg.argmax(), davg.shape)
    ring = crop(img, r[f"dist.avgdot.{l}.{h}"])
    close = (np.abs(ring - AVG).max(-1) <= 40).sum()
    expect(close >= 8, f"...its highest value (layer {l}, head {h}) drawn as an orange ring ({close} px)")
    cy = center(r[f"dist.avgdot.{l}.{h}"])[1]
    expect(abs(cy - (ax[1] + ax[3] * (1 - davg[l, h] / diag))) <= 1, "...at y = axis(value)")
    # the exports: numbers as .npy and .csv, the view as PNG
    for name, want in (("attn_distance", d), ("attn_distance_avg", davg)):
        p = os.path.join(exp, name)
        ok = os.path.exists(p + ".npy") and os.path.exists(p + ".csv")
        expect(ok and np.abs(np.load(p + ".npy") - want).max() <= 1e-4 and
               np.abs(np.loadtxt(p + ".csv", delimiter=",", ndmin=2) - want).max() <= 1e-4,
               f"...'Numbers .npy+.csv' writes {name}.npy and .csv equal to analyze's {name}")
    png = os.path.join(exp, "vitscope-distance.png")
    ok = os.path.exists(png)
    expect(ok and np.asarray(Image.open(png)).std() > 10 and Image.open(png).size == (int(lay["rects"]["center"][2]), int(lay["rects"]["center"][3])),
           "...'Export view PNG' writes vitscope-distance.png, the centre view")

    # hover a dot: its layer and head
    l, h = np.unravel_index(d.argmax(), d.shape)
    cx, cy = center(r[f"dist.dot.{l}.{h}"])
    _, lay2 = app.shot("--tab", "7", "--hover", f"{cx:.0f},{cy:.0f}")
    expect(lay2["strings"].get("dist.hover") == f"layer {l}, head {h}", f"--hover on a dot names it ({lay2['strings'].get('dist.hover')})")
    # no --distance-images: no average; an option changed after the average: said stale, not drawn
    _, lay3 = app.shot("--tab", "7")
    expect(lay3["strings"].get("dist.avg.state") == "none" and "dist.avgdot.0.0" not in lay3["rects"],
           "without --distance-images no average is drawn")
    _, lay4 = app.shot("--tab", "7", "--distance-images", "3", "--keys", "a")
    st4 = lay4["strings"]
    expect(lay4["options"]["affine"] is False and st4.get("dist.avg.state") == "stale" and "dist.avgdot.0.0" not in lay4["rects"]
           and "not the model and options on screen" in st4.get("dist.avg.message", ""),
           f"an option changed after the average (key A): the average is said stale and not drawn ({st4.get('dist.avg.state')})")
    a2 = analyze(app, "--image", app.sample, "--no-affine")
    expect(np.abs(values(lay4, "dist.values").reshape(-1, H) - a2["attn_distance"]).max() <= 1e-4,
           "...while the dots follow the new options (analyze --no-affine)")
    # keys 8 and 9 select the new tabs
    _, lk = app.shot("--keys", "8")
    expect(lk["tab"] == "Distance", f"key 8: the Distance tab ({lk['tab']})")
    # an RGB 8x8 preset: the gray test images through its preprocessing (repeated to RGB, resized)
    a3 = analyze(app, "--model", "toy-rgb8", "--image", app.sample, "--average", "3")
    _, l5 = app.shot("--tab", "7", "--model", "toy-rgb8", "--distance-images", "3")
    g5 = values(l5, "dist.avg.values")
    expect(l5["strings"].get("dist.avg.state") == "done" and g5.size == a3["attn_distance_avg"].size and
           np.abs(g5 - a3["attn_distance_avg"].ravel()).max() <= 1e-4,
           "toy-rgb8 (RGB): --distance-images 3 equals analyze --average 3 (gray repeated to RGB, resized)")
    # a 224 RGB model: the 28x28 test images resized to 224 as its preprocessing says
    a4 = analyze(app, "--model", "vit-ti16", "--image", app.sample, "--average", "2")
    _, l6 = app.shot("--tab", "7", "--model", "vit-ti16", "--distance-images", "2")
    g6 = values(l6, "dist.avg.values")
    expect(l6["strings"].get("dist.avg.state") == "done" and g6.size == a4["attn_distance_avg"].size and
           np.abs(g6 - a4["attn_distance_avg"].ravel()).max() <= 1e-3 and l6["numbers"].get("dist.ymax", 0) > 316,
           "vit-ti16 (224 RGB): --distance-images 2 equals analyze --average 2, on a 0 .. 316.8 px axis")


def check_patches(app):
    """--tab 8: the model input cut into P x P tiles (with gaps, numbered), then each row of the
    patches matrix beside the tile read back from it; the numbers are the CLI trace's."""
    exp = os.path.join(app.dir, "patches")
    os.makedirs(exp, exist_ok=True)
    t = app.trace()
    x, pt = t["input"], t["patches"]
    C, S = x.shape[0], x.shape[-1]
    N, CPP = pt.shape
    G = int(round(N ** 0.5))
    P = S // G
    unfold = x.reshape(C, G, P, G, P).transpose(1, 3, 0, 2, 4).reshape(N, CPP)
    expect(np.array_equal(unfold, pt), "the CLI trace's patches are the input unfolded (channel-major inside a patch)")
    img, lay = app.shot("--tab", "8", "--patch", "10", "--export-npy", "--export-view", "--export-dir", exp)
    n, r = lay["numbers"], lay["rects"]
    expect(lay["tab"] == "Patches" and n.get("patches.rows_equal_tiles") == N,
           f"--tab 8: all {N} rows are their tiles ({n.get('patches.rows_equal_tiles')})")
    for name, want in (("patches", pt), ("input", x)):
        p = os.path.join(exp, name)
        got = np.load(p + ".npy") if os.path.exists(p + ".npy") else None
        csv = np.loadtxt(p + ".csv", delimiter=",", ndmin=2) if os.path.exists(p + ".csv") else None
        expect(got is not None and got.shape == want.shape and np.abs(got - want).max() <= 1e-6 and
               csv is not None and np.abs(csv - want.reshape(want.shape[0], -1)).max() <= 1e-6,
               f"...exports {name}.npy and .csv equal to the CLI trace's {name}")
    shown = np.load(os.path.join(exp, "input_image.npy"))
    info = subprocess.run([app.cli, "info", "--model", "default"], capture_output=True, text=True).stdout
    pre = [ln for ln in info.splitlines() if ln.startswith("preprocess")][0]
    mean, std = float(pre.split("mean")[1].split(",")[0]), float(pre.split("std")[1])
    expect(np.abs(shown - np.clip(x * std + mean, 0, 1)).max() <= 2e-3,
           "...the picture is the input denormalized (x * std + mean, info's mean/std)")
    # the grid: tile k's texel (y, x) on screen is that pixel of the picture
    gx, gy, gw, gh = r["patches.grid"]
    tile, gap = n["patches.tile"], n["patches.gap"]
    worst = 0.0
    tiles = shown[0].reshape(G, P, G, P).transpose(0, 2, 1, 3)  # (G, G, P, P)
    # the brightest tiles and the ones least like their mirror across the diagonal (a swapped row/column shows)
    asym = np.abs(tiles - tiles.transpose(1, 0, 2, 3)).reshape(N, -1).max(1)
    picks = [0, int(tiles.reshape(N, -1).mean(1).argmax())] + [int(k) for k in np.argsort(-asym)[:3]]
    for k in picks:
        for (yy, xx) in ((P - 1, P - 1), (P // 2, P - 1), (P - 1, 1)):  # the top-left corner holds the number
            sx = gx + (k % G) * (tile + gap) + (xx + 0.5) * tile / P
            sy = gy + (k // G) * (tile + gap) + (yy + 0.5) * tile / P
            want = np.round(255 * shown[0, (k // G) * P + yy, (k % G) * P + xx])
            worst = max(worst, float(np.abs(img[int(sy), int(sx)] - want).max()))
    expect(worst <= 2, f"...the tiles' pixels are the preprocessed image's (worst channel error {worst:.0f}/255)")
    gap_px = img[int(gy + tile + gap / 2), int(gx + 3 * (tile + gap) + tile / 2)]
    expect(np.abs(gap_px - [15, 15, 15]).max() < 40 or gap_px.max() < 60, f"...with gaps between the tiles ({gap_px})")
    nums = [tt["text"] for tt in lay["texts"] if tt["group"] == "patches.grid"]
    expect(nums == [str(i) for i in range(N)], f"...numbered 0..{N - 1} in row-major order ({nums[:5]}...)")
    # the sequence: row k's strip, entry e drawn as its pixel value; its tile read back from the row
    first = int(n.get("patches.first_shown", -1))
    expect(0 <= first <= 10 and "patches.seq.tile.10" in r, f"...the sequence is scrolled to the selected patch 10 (first row {first})")
    worst = 0.0
    for k in (10, 11):
        sx, sy, sw, sh = r[f"patches.seq.strip.{k}"]
        for e in (0, CPP // 2, CPP - 1):
            want = np.round(255 * np.clip(pt[k, e] * std + mean, 0, 1))
            worst = max(worst, float(np.abs(img[int(sy + sh / 2), int(sx + (e + 0.5) * sw / CPP)] - want).max()))
        tx, ty, tw, th = r[f"patches.seq.tile.{k}"]
        for (yy, xx) in ((1, 1), (P - 1, 0)):
            want = np.round(255 * np.clip(pt[k, yy * P + xx] * std + mean, 0, 1))
            worst = max(worst, float(np.abs(img[int(ty + (yy + 0.5) * th / P), int(tx + (xx + 0.5) * tw / P)] - want).max()))
    expect(worst <= 3, f"...each row's strip and the tile read back from it show the row's values (worst {worst:.0f}/255)")
    png = os.path.join(exp, "vitscope-patches.png")
    expect(os.path.exists(png) and np.asarray(Image.open(png)).std() > 10, "...'Export view PNG' writes vitscope-patches.png")

    # the reshape bug: the rows are not the tiles, and the view shows what the buggy code did
    tb = app.trace("--bug-reshape-patches")
    pb = tb["patches"]
    expect(np.array_equal(pb, x.reshape(N, CPP)), "the CLI's --bug-reshape-patches patches are the plain reshape")
    kb = int(np.abs(pb - unfold).max(1).argmax())  # the row furthest from its tile
    img, lay = app.shot("--tab", "8", "--bug-reshape-patches", "--patch", str(kb), "--export-npy", "--export-dir", exp)
    n, r = lay["numbers"], lay["rects"]
    eq = int(sum(np.array_equal(pb[k], unfold[k]) for k in range(N)))
    expect(n.get("patches.rows_equal_tiles") == eq and eq < N and "BUG" in lay["strings"].get("patches.mismatch", ""),
           f"--bug-reshape-patches: {eq} of {N} rows are their tile, said in red with BUG ({n.get('patches.rows_equal_tiles')})")
    expect(np.abs(np.load(os.path.join(exp, "patches.npy")) - pb).max() <= 1e-6, "...the exported patches are the buggy ones")
    tx, ty, tw, th = r.get(f"patches.seq.tile.{kb}", [0, 0, 1, 1])
    worst, differs = 0.0, 0
    for yy in range(P):
        for xx in range(P):
            px = img[int(ty + (yy + 0.5) * th / P), int(tx + (xx + 0.5) * tw / P)]
            want = np.round(255 * np.clip(pb[kb, yy * P + xx] * std + mean, 0, 1))
            tile_px = np.round(255 * shown[0, (kb // G) * P + yy, (kb % G) * P + xx])
            worst = max(worst, float(np.abs(px - want).max()))
            differs += abs(float(want[()] if np.ndim(want) else want) - float(tile_px)) > 8
    expect(worst <= 3 and differs > 0, f"...tile {kb} read back from its row shows the reshaped pixels, not the image's tile "
           f"(worst {worst:.0f}/255, {differs} texels differ from the image)")

    # RGB 224, P = 16: 196 tiles, channel-major rows (R block, G block, B block)
    img, lay = app.shot("--tab", "8", "--model", "vit-ti16", "--patch", "100")
    n, r = lay["numbers"], lay["rects"]
    tr = app.trace("--model", "vit-ti16")
    xr, pr = tr["input"], tr["patches"]
    expect(n.get("patches.rows_equal_tiles") == 196 and pr.shape == (196, 768), "vit-ti16: 196 rows of 768, all their tiles")
    chans = [tt["text"] for tt in lay["texts"] if tt["group"] == "patches.channels"]
    expect(len(chans) == 3 and chans[0].startswith("R") and chans[2].startswith("B"), f"...the row's channel blocks labelled ({chans})")
    sx, sy, sw, sh = r.get("patches.seq.strip.100", [0, 0, 1, 1])
    e = 256 + 7 * 16 + 8  # G channel, tile pixel (7, 8)
    px = img[int(sy + sh / 2), int(sx + (e + 0.5) * sw / 768)]
    want = np.round(255 * np.clip(pr[100, e] * 0.5 + 0.5, 0, 1))
    expect(px[0] < 10 and px[2] < 10 and abs(px[1] - want) <= 3,
           f"...entry {e} of row 100 (channel G) drawn in green at its value ({px}, want G {want:.0f})")


def check_teaching_exports(app):
    """Numbers .npy+.csv and the view PNG on the logit lens, positions and filters tabs equal the
    CLI's analyze entries."""
    exp = os.path.join(app.dir, "teach_exports")
    os.makedirs(exp, exist_ok=True)
    a = analyze(app, "--image", app.sample)
    for tab, fname, names in (("4", "logit_lens", ["logit_lens"]), ("5", "positions", ["pos_similarity"]),
                              ("6", "filters", ["embed_filters", "embed_filters_var"])):
        _, lay = app.shot("--tab", tab, "--export-npy", "--export-view", "--export-dir", exp)
        for name in names:
            p = os.path.join(exp, name)
            want = a[name]
            got = np.load(p + ".npy") if os.path.exists(p + ".npy") else None
            csv = np.loadtxt(p + ".csv", delimiter=",", ndmin=2) if os.path.exists(p + ".csv") else None
            flat = want.reshape(1, -1) if want.ndim == 1 else want.reshape(want.shape[0], -1)
            expect(got is not None and got.shape == want.shape and np.abs(got - want).max() <= 1e-5 and
                   csv is not None and csv.shape == flat.shape and np.abs(csv - flat).max() <= 1e-5,
                   f"--tab {tab}: {name}.npy and .csv equal analyze's {name} {want.shape}")
        png = os.path.join(exp, f"vitscope-{fname}.png")
        expect(os.path.exists(png) and np.asarray(Image.open(png)).std() > 10, f"...and the view as vitscope-{fname}.png")


def main():
    return run_checks([check_distance, check_patches, check_teaching_exports], "all distance/patches/export checks passed")


if __name__ == "__main__":
    sys.exit(main())
