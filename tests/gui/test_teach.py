#!/usr/bin/python3
"""Issue 10, the app half: the teaching views draw the core's numbers (core/teach/teach.h).
The real app under Xvfb, checked by its pixels and by the --layout it reports; the expected
numbers come from `vitscope-cli trace` read with numpy."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from test_truth import App, run_checks, crop, expect, FAIL  # noqa: E402
from test_gui import viridis  # noqa: E402


def check_query(app):
    """Attention from any token (overlay 'query', --query N, Q key): the row pattern[layer][head, q, 1:]."""
    t = app.trace()
    layer, head = 3, 1
    p = t[f"blocks.{layer}.attn.pattern"]  # (H, T, T)
    N = p.shape[-1] - 1
    G = int(round(N ** 0.5))
    q = N // 2 + G // 2 + 1  # a patch token near the centre of the image
    img, lay = app.shot("--stage", "input", "--query", str(q), "--layer", str(layer), "--head", str(head), "--opacity", "1")
    want = p[head, q, 1:]
    expect(lay["overlay"] == "query" and lay["query"] == q, f"--query {q} shows the query overlay ({lay['overlay']}, {lay['query']})")
    got = np.array([float(v) for v in lay["strings"].get("overlay.values", "").split(",") if v])
    expect(got.shape == want.shape and np.abs(got - want).max() <= 1e-6,
           f"...its values are pattern[{layer}][{head}, {q}, 1:] from the CLI trace (max err "
           f"{np.abs(got - want).max() if got.shape == want.shape else 'shape ' + str(got.shape)})")
    top, low = int(want.argmax()), int(want.argmin())
    expect(int(lay["numbers"]["overlay.argmax"]) == top, f"...hottest patch is numpy's argmax ({top})")
    x, y, w, h = lay["rects"]["image"]

    def patch_px(im, k):
        return im[int(y + (k // G + 0.5) * h / G), int(x + (k % G + 0.5) * w / G)]
    # issue 19: the overlay is in viridis, the colours of every attention picture; its hottest patch yellow
    expect(np.abs(patch_px(img, top) - viridis(1.0)).max() <= 12, f"...patch {top} is drawn viridis's top colour: {patch_px(img, top)}")
    expect(np.abs(patch_px(img, low) - viridis(1.0)).max() > 40, f"...patch {low} (smallest) is not: {patch_px(img, low)}")
    # the query patch is framed in cyan
    qx, qy, qw, qh = lay["rects"]["image.query"]
    expect(abs(qx - (x + ((q - 1) % G) * w / G)) < 1 and abs(qy - (y + ((q - 1) // G) * h / G)) < 1,
           f"...the query patch {q - 1} is framed where it is on the image")
    edge = img[int(qy + 1), int(qx + qw / 2)]
    expect(edge[0] < 80 and edge[1] > 180 and edge[2] > 200, f"...in cyan ({edge})")

    # the selection matters: the cls row of the same layer and head is another picture
    img0, lay0 = app.shot("--stage", "input", "--query", "0", "--layer", str(layer), "--head", str(head), "--opacity", "1")
    got0 = np.array([float(v) for v in lay0["strings"].get("overlay.values", "").split(",") if v])
    expect(got0.shape == want.shape and np.abs(got0 - p[head, 0, 1:]).max() <= 1e-6, "--query 0 shows the cls row")
    expect("image.query" not in lay0["rects"], "...with no patch framed")
    diff = np.abs(crop(img, lay["rects"]["image"]) - crop(img0, lay["rects"]["image"])).mean()
    expect(diff > 5, f"...and the image panel changes with the query token (mean |diff| {diff:.1f})")

    # mean over heads (no --head)
    _, lay = app.shot("--stage", "input", "--query", str(q), "--layer", str(layer))
    got = np.array([float(v) for v in lay["strings"].get("overlay.values", "").split(",") if v])
    wm = p[:, q, 1:].mean(0)
    expect(got.shape == wm.shape and np.abs(got - wm).max() <= 1e-6, "without --head: the mean over heads of that row")

    # from the keyboard: Q shows the overlay, Q again steps the query token, Shift is not needed here
    _, lay = app.shot("--stage", "input", "--keys", "q,q,q")
    expect(lay["overlay"] == "query" and lay["query"] == 2, f"keys Q,Q,Q: query overlay on token 2 ({lay['overlay']}, {lay['query']})")

    # out of range: bad usage, refused with a message naming the flag (issue 19; tests/gui/test_honest.py)
    rc, err, img, lay = app.run("--stage", "input", "--query", "100000")
    expect(rc == 2 and "--query 100000" in err and "out of range" in err,
           f"--query 100000 is refused as out of range ({rc}, {err.strip()[:120]})")

    # the --overlay choice still wins over --query's implied overlay
    _, lay = app.shot("--stage", "input", "--query", "3", "--overlay", "cls")
    expect(lay["overlay"] == "cls", "--overlay cls --query 3 keeps the cls overlay")


def check_cell_math(app):
    """The math of one cell (--cell I,J, or a click): the panel's result is the trace's value."""
    t = app.trace()
    H = t["blocks.0.attn.pattern"].shape[0]
    T = t["blocks.0.attn.pattern"].shape[1]
    L = len([k for k in t if k.startswith("blocks.") and k.endswith(".attn.pattern")])
    h = min(2, H - 1)
    cases = [("blocks.1.attn.scores", (h, 5, 7)), ("blocks.1.attn.pattern", (h, 0, 3)), ("blocks.0.attn.z", (h, T - 1, 2)),
             ("blocks.0.ln1.out", (4, 9)), ("blocks.0.ln2.normalized", (T - 1, 0)), (f"blocks.{L - 1}.mlp.post", (1, 3)),
             ("ln_final.out", (0, 5)), ("logits", (3,))]
    shots = {}
    for stage, idx in cases:
        r, c = (idx[-2], idx[-1]) if len(idx) >= 2 else (0, idx[0])
        args = ["--stage", stage, "--cell", f"{r},{c}"] + (["--head", str(idx[0])] if len(idx) == 3 else [])
        img, lay = app.shot(*args)
        n, st = lay["numbers"], lay["strings"]
        want = float(t[stage][idx])
        ok = "cellmath.value" in n
        expect(ok and st.get("cellmath.index") == ",".join(map(str, idx)) and st.get("cellmath.stage") == stage,
               f"--stage {stage} --cell {r},{c}: the panel explains {stage}[{','.join(map(str, idx))}] "
               f"({st.get('cellmath.stage')}[{st.get('cellmath.index')}] {st.get('cellmath.message', '')})")
        if not ok:
            continue
        rec = n["cellmath.recorded"]
        tol = 1e-6 * max(abs(rec), n["cellmath.scale"])
        expect(abs(n["cellmath.value"] - rec) <= tol,
               f"...its result {n['cellmath.value']:.9g} is the app's trace value {rec:.9g} (tol {tol:.2g}: float rounding)")
        # the app's run and the CLI's may sum in another order (threads): equal to float precision
        expect(abs(rec - want) <= 1e-5 * max(1, abs(want)), f"...which is the CLI trace's {want:.9g}")
        expect(len(st.get("cellmath.lines", "").strip().splitlines()) >= 2, "...written out over several lines")
        pan = crop(img, lay["rects"]["cellmath"])
        expect(pan.std() > 10, f"...in a panel with something drawn in it (pixel std {pan.std():.1f})")
        shots[stage] = (img, lay)
    # the score written out: numpy's q . k / sqrt(d) over the trace's q and k
    qk = [k for k in ("blocks.1.attn.q", "blocks.1.attn.k") if k in t]
    if len(qk) == 2 and "blocks.1.attn.scores" in shots:
        q, k = t["blocks.1.attn.q"], t["blocks.1.attn.k"]
        s = float(np.dot(q[h, 5].astype(np.float64), k[h, 7].astype(np.float64)) / np.sqrt(q.shape[-1]))
        v = shots["blocks.1.attn.scores"][1]["numbers"]["cellmath.value"]
        expect(abs(v - s) <= 1e-6 * max(1, abs(s)), f"...the score's result is numpy's q.k/sqrt(d) = {s:.9g} ({v:.9g})")
    # the selected cell is framed in cyan on the heatmap
    if "blocks.1.attn.scores" in shots:
        img, lay = shots["blocks.1.attn.scores"]
        x, y, w, hh = lay["rects"].get("stage.cell", [0, 0, 0, 0])
        expect(w > 0 and abs(x - (lay["rects"]["stage"][0] + 7 * w)) < 1 and abs(y - (lay["rects"]["stage"][1] + 5 * hh)) < 1,
               "...the cell is framed where it is on the heatmap")
        px = img[int(y - 1), int(x + w / 2)] if w > 0 else np.zeros(3)
        expect(px[0] < 80 and px[1] > 180 and px[2] > 200, f"...in cyan ({px})")
        # another cell: another result
        _, lay2 = app.shot("--stage", "blocks.1.attn.scores", "--head", str(h), "--cell", "6,2")
        want = float(t["blocks.1.attn.scores"][h, 6, 2])
        expect(abs(lay2["numbers"].get("cellmath.value", 1e9) - want) <= 1e-5 * max(1, abs(want)),
               f"...and --cell 6,2 explains that cell ({want:.6g})")
    # a stage it does not explain, a cell out of range, bad usage: said, not crashed
    rc, err, img, lay = app.run("--stage", "patches", "--cell", "0,0")
    expect(rc == 0 and "not one the math panel explains" in lay["strings"].get("cellmath.message", ""),
           "--stage patches --cell 0,0 says the panel does not explain it")
    rc, err, img, lay = app.run("--stage", "blocks.0.attn.scores", "--cell", "100000,0")
    expect(rc == 2 and "--cell 100000,0" in err and "out of range" in err,
           f"--cell 100000,0 is refused as out of range ({rc}, {err.strip()[:120]})")
    rc, err, _, _ = app.run("--cell", "1;2")
    expect(rc == 2 and "--cell" in err, f"--cell 1;2 is a usage error naming --cell (rc {rc})")


def red_pixels(img, rect):
    c = crop(img, rect)
    return int(((c[..., 0] > 200) & (c[..., 1] < 130) & (c[..., 2] < 130)).sum())


def check_bugs(app):
    """The pitfall switches: red in the toolbar and BUG in the status bar when on; the Changes tab
    shows their effect against the default-options run, as the CLI's two traces differ."""
    t0 = app.trace()
    cases = [("--bug-scale-after-softmax", "BUG: scale after softmax (B)", "blocks.1.attn.pattern", "scale after softmax"),
             ("--bug-reshape-patches", "BUG: reshape patches (R)", "patches", "reshape patches")]
    for flag, box, stage, words in cases:
        t1 = app.trace(flag)
        img, lay = app.shot(flag, "--stage", stage, "--head", "1", "--tab", "2")
        key = "bug_scale_after_softmax" if "softmax" in flag else "bug_reshape_patches"
        expect(lay["options"].get(key) is True, f"{flag}: the option is on ({lay['options']})")
        st = lay["strings"]
        expect(("BUG on: " + words) in st.get("status", ""), f"...the status bar says 'BUG on: {words}'")
        r = lay["rects"].get("toolbar." + box)
        expect(r is not None and red_pixels(img, r) > 20, f"...its toolbar switch is drawn red ({red_pixels(img, r) if r else 'no rect'} red px)")
        m = float(np.abs(t1[stage] - t0[stage]).max())  # the symmetric scale spans the whole tensor's difference
        n = lay["numbers"]
        expect(m > 0 and abs(n.get("diff.vmax", -1) - m) <= 1e-5 * max(1, m),
               f"...the Changes tab's difference map spans +-max|bug - default| of {stage} = {m:.6g} ({n.get('diff.vmax')})")
        dm = crop(img, lay["rects"]["diff"])
        expect(dm.std() > 5, f"...and is not one flat colour (pixel std {dm.std():.1f})")
    img, lay = app.shot("--stage", "patches", "--tab", "2")
    r = lay["rects"].get("toolbar.BUG: scale after softmax (B)")
    expect(r is not None and red_pixels(img, r) == 0, "without the flags: the switches are not red")
    expect("BUG" not in lay["strings"].get("status", ""), "...and the status bar says no BUG")
    _, lay = app.shot("--stage", "patches", "--keys", "b,r")
    expect(lay["options"].get("bug_scale_after_softmax") is True and lay["options"].get("bug_reshape_patches") is True,
           "keys B, R turn both switches on")


def check_logit_lens(app):
    """The logit lens tab (--tab 4): vit::logit_lens's (L, K) as `vitscope-cli analyze` writes it."""
    out = os.path.join(app.dir, "a.npz")
    import subprocess
    subprocess.run([app.cli, "analyze", "--image", app.sample, "--out", out], check=True, capture_output=True)
    with np.load(out) as z:
        lens = z["logit_lens"]
    t = app.trace()
    img, lay = app.shot("--tab", "4", "--export-npy", "--export-dir", app.dir)
    L, K = lens.shape
    n, st = lay["numbers"], lay["strings"]
    expect(lay["tab"] == "Logit lens" and (n.get("lens.rows"), n.get("lens.cols")) == (K, L),
           f"--tab 4 shows the logit lens, {K} classes (rows) x {L} layers ({n.get('lens.rows')}, {n.get('lens.cols')})")
    got = np.array([float(v) for v in st.get("lens.values", "").split(",") if v]).reshape(-1, K) if st.get("lens.values") else None
    expect(got is not None and got.shape == lens.shape and np.abs(got - lens).max() <= 1e-5,
           f"...its numbers are the CLI's analyze logit_lens (max err {np.abs(got - lens).max() if got is not None and got.shape == lens.shape else '-'})")
    expect(np.abs(lens[-1] - t["probs"]).max() <= 1e-5, "...whose last row is the trace's probs")
    exp = os.path.join(app.dir, "logit_lens.npy")
    expect(os.path.exists(exp) and np.abs(np.load(exp) - lens).max() <= 1e-5, "...and Tensor .npy on this tab exports it")
    # pixels: viridis(p) on a fixed 0..1 scale, at the largest and smallest cell
    x, y, w, h = lay["rects"]["lens"]
    worst = 0.0
    for (r, c) in [np.unravel_index(lens.argmax(), lens.shape), np.unravel_index(lens.argmin(), lens.shape), (L // 2, K // 2)]:
        px = img[int(y + (c + 0.5) * h / K), int(x + (r + 0.5) * w / L)]  # layer r is a column, class c a row
        worst = max(worst, float(np.abs(px - viridis(lens[r, c])).max()))
    expect(worst <= 25, f"...cells drawn as viridis(probability) on 0..1 (worst channel error {worst:.0f}/255)")
    names = [tt["text"] for tt in lay["texts"] if tt["group"] == "lens.rows"]
    expect("Ankle boot" in names or len(names) > 0 and not names[0].isdigit(), f"...class names on the axis ({names[:3]})")
    expect(st.get("lens.reads") == "cls token", "...reading the cls token (cls pooling)")
    # another image: another chart (responds to the input)
    img2, lay2 = app.shot("--tab", "4", "--image", os.path.join(os.path.dirname(app.sample), "1_trouser_test2.png"), image=False)
    d = np.abs(crop(img, lay["rects"]["lens"]) - crop(img2, lay2["rects"]["lens"])).mean()
    expect(d > 2, f"...and another image draws another chart (mean |diff| {d:.1f})")
    # a preset (random weights): said where predictions appear
    _, lay = app.shot("--tab", "4", "--model", "toy-rgb8")
    expect("lens.rows" in lay["numbers"] and "random weights" in lay["strings"].get("lens.note", "") and
           "random weights" in lay["strings"].get("predictions.note", ""),
           "a preset's lens and predictions say 'random weights'")


def check_positions(app):
    """Position-embedding similarity (--tab 5): one map per patch in the patch layout, the selected
    one large; the numbers are `vitscope-cli analyze`'s pos_similarity."""
    import subprocess
    out = os.path.join(app.dir, "a.npz")
    subprocess.run([app.cli, "analyze", "--image", app.sample, "--out", out], check=True, capture_output=True)
    with np.load(out) as z:
        sim = z["pos_similarity"]
    N = sim.shape[0]
    G = int(round(N ** 0.5))
    shots = {}
    for p in (10, N - 3):
        img, lay = app.shot("--tab", "5", "--patch", str(p))
        st, n = lay["strings"], lay["numbers"]
        got = np.array([float(v) for v in st.get("pos.values", "").split(",") if v])
        expect(lay["tab"] == "Positions" and n.get("pos.patch") == p and got.shape == (N,) and np.abs(got - sim[p]).max() <= 1e-6,
               f"--tab 5 --patch {p}: the large map is pos_similarity[{p}] from the CLI's analyze")
        # the patch against itself is 1: drawn at the top of the diverging scale (dark red)
        x, y, w, h = lay["rects"]["pos.large"]
        px = img[int(y + (p // G + 0.5) * h / G), int(x + (p % G + 0.5) * w / G)]
        expect(np.abs(px - [180, 4, 38]).max() < 40, f"...its own cell (similarity 1) is drawn dark red ({px})")
        gx, gy, gw, gh = lay["rects"]["pos.grid"]
        m = gw / G
        # in the grid: map p, cell p (its own position) is that colour too
        cx = gx + (p % G) * m + ((p % G) + 0.5) * m / G
        cy = gy + (p // G) * m + ((p // G) + 0.5) * m / G
        px2 = img[int(cy), int(cx)]
        expect(np.abs(px2 - [180, 4, 38]).max() < 40, f"...and in the grid, map {p} at its own patch ({px2})")
        sx, sy, _, _ = lay["rects"]["pos.selected"]
        expect(abs(sx - (gx + (p % G) * m)) < 1 and abs(sy - (gy + (p // G) * m)) < 1, "...the selected map is framed where it is")
        expect("pos.embed" in lay["rects"] and crop(img, lay["rects"]["pos.embed"]).std() > 5, "...pos_embed drawn as a heatmap")
        shots[p] = (img, lay)
    (a, la), (b, lb) = shots[10], shots[N - 3]
    d = np.abs(crop(a, la["rects"]["pos.large"]) - crop(b, lb["rects"]["pos.large"])).mean()
    expect(d > 5, f"...another patch draws another large map (mean |diff| {d:.1f})")


def check_filters(app):
    """Embedding filters (--tab 6): the principal components of patch_embed as P x P pictures with their
    explained variance, as `vitscope-cli analyze` writes them (embed_filters, embed_filters_var)."""
    import subprocess
    for model, rgb in (("default", False), ("toy-rgb8", True)):
        out = os.path.join(app.dir, f"f-{model}.npz")
        subprocess.run([app.cli, "analyze", "--model", model, "--image", app.sample, "--out", out], check=True, capture_output=True)
        with np.load(out) as z:
            filt, var = z["embed_filters"], z["embed_filters_var"]
        img, lay = app.shot("--tab", "6", "--model", model)
        st, n = lay["strings"], lay["numbers"]
        got = np.array([float(v) for v in st.get("filters.variance", "").split(",") if v])
        expect(lay["tab"] == "Filters" and got.shape == var.shape and np.abs(got - var).max() <= 1e-6,
               f"--tab 6 --model {model}: {len(var)} filters with the CLI's explained variance")
        # tile 0: each texel is 0.5 + 0.5 v / max|v| of that filter, gray or RGB
        f0 = filt[0]
        C, P = f0.shape[0], f0.shape[1]
        want = np.clip(np.round(255 * (0.5 + 0.5 * f0 / np.abs(f0).max())), 0, 255)
        x, y, w, h = lay["rects"]["filters.0"]
        worst = 0
        for (py, px) in [(0, 0), (P // 2, P // 3), (P - 1, P - 1), np.unravel_index(np.abs(f0).max(0).argmax(), (P, P))]:
            pix = img[int(y + (py + 0.5) * h / P), int(x + (px + 0.5) * w / P)]
            ref = want[:, py, px] if C == 3 else np.repeat(want[0, py, px], 3)
            worst = max(worst, float(np.abs(pix - ref).max()))
        expect(worst <= 2, f"...tile 0 shows the first component's texels (worst channel error {worst:.0f}/255)")
        t0 = crop(img, lay["rects"]["filters.0"])
        chroma = float(np.abs(t0[..., 0] - t0[..., 1]).max())
        expect((chroma > 10) == rgb, f"...{'in colour' if rgb else 'in gray'} (max |R-G| {chroma:.0f})")
        expect(rgb == ("random weights" in lay["strings"].get("predictions.note", "")), "...'random weights' said for the preset only")


def main():
    return run_checks([check_query, check_cell_math, check_bugs, check_logit_lens, check_positions, check_filters], "all teaching-view checks passed")


if __name__ == "__main__":
    sys.exit(main())
