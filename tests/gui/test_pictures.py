#!/usr/bin/python3
"""Issue 19, the views: pictures a learner cannot misread, at the window sizes people have.

The real app under Xvfb, checked by its pixels and by the --layout it reports; the expected numbers
come from outside the window (numpy on `vitscope-cli trace` / `analyze`, PIL on the image files,
published figures). Each check failed on the app before issue 19:

- attention pictures: one scale from 0 shared by every map, uniform attention 1/T marked on the key,
  per-map contrast on request with each map's range printed, "random weights" beside them; the
  overlay on the image with its key, the thumbnails with their ranges;
- layouts: the LayerNorm quad at least 100 px per map at 1280x800 and 1366x768, the toolbar whole
  (its Export menu and help on screen, no tab name cut), a 2x content scale drawn sharp and true;
- Changes: opens on the first stage that changed (numpy), no change drawn white, the head named,
  bars on a labelled scale, the baseline said;
- one colour convention: a logit's bar has the colour of its sign on the heatmap above it;
- the logit lens of a 1000-class model: the classes that matter, named, large enough to read;
- NaN cells have a legend with their count; a photo outside the model's domain gets a note;
- token axes say cls, p0, ...; training curves have axes;
- the math of a cell sits beside its heatmap; with mean pooling the status bar says mean;
- a big model opens to a window that says what it is doing (making its weights, block k of L)."""
import os
import re
import sys

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
from test_truth import run_checks, crop, expect, overlap  # noqa: E402
from test_gui import viridis  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PHOTO = os.path.join(HERE, "..", "..", "assets", "samples", "photos", "cat_chelsea.jpg")
SAMPLE = os.path.join(HERE, "..", "..", "assets", "samples", "9_ankle_boot_test0.png")
MAGENTA = np.array([255, 0, 255])
RED, BLUE, WHITE = np.array([180, 4, 38]), np.array([59, 76, 192]), np.array([246, 246, 246])


def token_name(i):
    """A plain ViT's token i as the axes name it: 0 is cls, patch n is token n + 1."""
    return "cls" if i == 0 else f"p{i - 1}"


def fmt4(v):
    """A number as the app prints it (heatmap.cpp fmt)."""
    return f"{v:.3e}" if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e4) else f"{v:.4f}"


def check_attention_scale(app):
    """The Attention maps tab on a random model: every map on one scale from 0 to the largest value of
    them all (numpy's), 1/T marked, the pixels viridis of value / that max; per map on request."""
    t = app.trace("--model", "vit-ti16", image=PHOTO)
    L = len([k for k in t if k.endswith(".attn.pattern")])
    maps = {}
    for l in range(L):
        p = t[f"blocks.{l}.attn.pattern"]  # (H, T, T)
        H, T = p.shape[0], p.shape[-1]
        for h in range(H):
            maps[(l, h)] = p[h, 0, 1:]
        maps[(l, "mean")] = p[:, 0, 1:].mean(0)
    top = max(float(m.max()) for m in maps.values())
    # (the maps alone: with the image a quarter over them, issue 36, their pixels are not the scale's)
    img, lay = app.shot("--model", "vit-ti16", "--image", PHOTO, "--tab", "1", "--attention-image", "off", image=False)
    n = lay["numbers"]
    expect(n.get("attn.per_map") == 0 and abs(n.get("attn.key.vmin", 1)) < 1e-9 and abs(n.get("attn.key.vmax", 0) - top) < 1e-6,
           f"one scale for every map: 0 .. {top:.6f}, numpy's largest cls attention over all layers and heads "
           f"({n.get('attn.key.vmin')} .. {n.get('attn.key.vmax')})")
    key = [x["text"] for x in lay["texts"] if x["group"] == "attn.key"]
    want_mark = f"1/{T} = {fmt4(1 / T)} (uniform)"
    expect(want_mark in key and "0.0000" in key and fmt4(top) in key, f"the key has its figures and marks uniform attention: {key}")
    kx, ky, kw, kh = lay["rects"]["attn.key"]
    mx = int(round(kx + kw * (1 / T) / top))
    col = img[int(ky) + 2:int(ky + kh) - 1, mx - 1:mx + 2]
    expect(col.size > 0 and (col.max(axis=(0, 1)) >= 240).all() and (col.min(axis=(0, 1)) <= 15).all(),
           f"...and the mark is drawn across the bar at x = {mx}, black edged in white (1/{T} of the way to {top:.4f})")
    expect(lay["strings"].get("attn.random") == "random weights", "the random weights are said beside the attention maps")
    G = int(round(len(maps[(0, 0)]) ** 0.5))
    worst = 0
    # (layer L-1's mean is framed as the overlay's map: its edge cells are under the frame)
    for l, h in ((0, 0), (3, 1), (L - 2, "mean")):
        x, y, w, hh = lay["rects"][f"grid.{l}.{h}"]
        m = maps[(l, h)]
        for k in (int(m.argmax()), int(m.argmin()), len(m) // 2):
            px = img[int(y + (k // G + 0.5) * hh / G), int(x + (k % G + 0.5) * w / G)]
            worst = max(worst, float(np.abs(px - viridis(m[k] / top)).max()))
    expect(worst <= 25, f"grid pixels are viridis(value / shared max) (worst channel error {worst:.0f}/255)")
    # per map on request: each map's own range, printed, its hottest patch yellow
    img, lay = app.shot("--model", "vit-ti16", "--image", PHOTO, "--tab", "1", "--attention-scale", "per-map",
                        "--attention-image", "off", image=False)
    got = [float(v) for v in lay["strings"].get("attn.ranges", "").split(",") if v]
    want = [float(maps[(l, h)].max()) for l in range(L) for h in list(range(H)) + ["mean"]]
    expect(len(got) == len(want) and np.abs(np.array(got) - want).max() < 1e-5,
           f"--attention-scale per-map: each map's max printed, numpy's ({len(got)} maps)")
    expect(len([x for x in lay["texts"] if x["group"] == "attn.ranges"]) >= len(want) // 2, "...under the maps")
    x, y, w, hh = lay["rects"]["grid.3.1"]
    k = int(maps[(3, 1)].argmax())
    px = img[int(y + (k // G + 0.5) * hh / G), int(x + (k % G + 0.5) * w / G)]
    expect(np.abs(px - viridis(1.0)).max() <= 25, f"...each map on its own scale: layer 3 head 1's hottest patch is yellow ({px})")


def check_overlay_key(app):
    """The overlay on the image and the three thumbnails under it: from 0 to their largest value
    (numpy's cls attention of the overlay's layer, mean of heads), with a key and their ranges printed;
    on a random model, said beside them."""
    t = app.trace()
    L = len([k for k in t if k.endswith(".attn.pattern")])
    p = t[f"blocks.{L - 1}.attn.pattern"]  # the default overlay: cls attention of the last layer, mean of heads
    cls = p[:, 0, 1:].mean(0)
    T = p.shape[-1]
    img, lay = app.shot("--stage", "input", "--overlay", "cls")
    n = lay["numbers"]
    expect(abs(n.get("overlay.key.vmin", 1)) < 1e-9 and abs(n.get("overlay.key.vmax", 0) - cls.max()) < 1e-6,
           f"the overlay's key: 0 .. {cls.max():.4f}, numpy's largest cls attention ({n.get('overlay.key.vmin')} .. {n.get('overlay.key.vmax')})")
    key = [x["text"] for x in lay["texts"] if x["group"] == "overlay.key"]
    expect("0.0000" in key and fmt4(float(cls.max())) in key and f"1/{T} = {fmt4(1 / T)} (uniform)" in key,
           f"...its figures and uniform attention marked: {key}")
    kx, ky, kw, kh = lay["rects"]["overlay.key"]
    # the key's right end is viridis's top, opaque; its left end viridis's bottom at the overlay's
    # alpha for 0 (0.2, shaders/heatmap.frag) over the panel's background (as small values let the image through)
    right, left = img[int(ky + kh / 2), int(kx + kw) - 3], img[int(ky + kh / 2), int(kx) + 3]
    bg = img[int(ky + kh / 2), int(kx) - 3]
    expect(np.abs(right - viridis(1.0)).max() <= 25 and np.abs(left - (0.2 * viridis(0.0) + 0.8 * bg)).max() <= 12,
           f"...drawn in the overlay's colours and transparency ({left} .. {right}, background {bg})")
    # pixels: at opacity 1 a patch is viridis(v / max) at alpha 0.2 + 0.8 v / max over the image (the
    # shader's blend; within 25/255, as the other viridis checks: the reference table is coarse), the
    # image's pixel taken from a shot without the overlay
    # (the image is larger without the overlay's key: each shot's own rect, the same point of the patch);
    # on the random vit-ti16, whose cls attention is nearly even (min/max about 0.8): drawn from its
    # min it would look like a strong pattern
    pt = app.trace("--model", "vit-ti16", image=PHOTO)
    p = pt[f"blocks.{len([k for k in pt if k.endswith('.attn.pattern')]) - 1}.attn.pattern"]
    cls = p[:, 0, 1:].mean(0)
    ti = ("--model", "vit-ti16", "--image", PHOTO, "--stage", "input")
    plain, lay0 = app.shot(*ti, "--overlay", "none", image=False)
    over, lay1 = app.shot(*ti, "--overlay", "cls", "--opacity", "1", image=False)
    G = int(round(len(cls) ** 0.5))

    def at(im, rect, k):
        x, y, w, h = rect
        return im[int(y + (k // G + 0.75) * h / G), int(x + (k % G + 0.75) * w / G)]  # clear of the patch number
    worst = 0
    op = lay1["numbers"].get("overlay.opacity", 1)  # a flat overlay (issue 36 item 9) is drawn faint: at this opacity
    for k in (int(cls.argmax()), int(cls.argmin()), len(cls) // 2, 3):
        tt = cls[k] / cls.max()
        a = op * (0.2 + 0.8 * tt)
        want = a * viridis(tt) + (1 - a) * at(plain, lay0["rects"]["image"], k)
        worst = max(worst, float(np.abs(at(over, lay1["rects"]["image"], k) - want).max()))
    expect(worst <= 25, f"...the overlay's pixels are viridis(value / max) from 0, blended over the image (worst {worst:.0f}/255)")
    top = float(n.get("overlay.key.vmax", 0))
    expect(abs(n.get("thumbs.0.vmax", 0) - top) < 1e-9, f"the cls attention thumbnail is on the overlay's scale, 0 .. {top:.4f}")
    ranges = [x["text"] for x in lay["texts"] if x["group"] == "thumbs.range"]
    expect(len(ranges) == 3 and ranges[0] == "0 .. " + fmt4(top), f"...each thumbnail's range printed under it: {ranges}")
    _, lay = app.shot("--model", "vit-ti16", "--image", PHOTO, "--stage", "input", image=False)
    expect(lay["strings"].get("overlay.random") == "random weights", "a random model: said beside the overlay and thumbnails")
    _, lay = app.shot("--stage", "input")
    expect("overlay.random" not in lay["strings"], "...and not on the trained default model")


def check_layouts(app):
    """1280x800 and 1366x768: the LayerNorm quad at least 100 px per map, the toolbar whole, no tab
    name cut, no fixed window's content past its edge; a 2x content scale drawn sharp and true."""
    for W, H in ((1280, 800), (1366, 768)):
        img, lay = app.shot("--width", str(W), "--height", str(H), "--stage", "blocks.0.ln1.out")
        R = lay["rects"]
        hs = {k: R[k][3] for k in ("ln.mean", "ln.std", "ln.normalized", "ln.out")}
        expect(min(hs.values()) >= 100, f"{W}x{H}: the LayerNorm quad's maps are at least 100 px tall ({hs})")
        # pixels: the normalized map is coloured over its whole height (not a strip of 3 px)
        x, y, w, h = R["ln.normalized"]
        region = img[int(y) + 1:int(y + h) - 1, int(x) + 1:int(x + w) - 1]
        rows_coloured = int((region.std(axis=2).max(axis=1) > 25).sum())
        expect(rows_coloured >= 95, f"...on screen: {rows_coloured} coloured pixel rows in normalized")
        keys = [t for t in lay["texts"] if t["group"].startswith(("ln.normalized.", "stage."))]
        expect(len(keys) >= 2, f"...each with its key ({len(keys)} figures)")
        for name in ("toolbar.export", "toolbar.help"):
            r = R.get(name)
            expect(r is not None and r[0] >= 0 and r[0] + r[2] <= W and r[1] + r[3] <= R["toolbar"][3],
                   f"...the toolbar's {name.split('.')[1]} is on screen ({r})")
        cut = [k for k, v in lay["numbers"].items() if k.startswith("tabs.") and k.endswith(".cut") and v]
        expect(not cut, f"...no tab name is cut ({cut})")
        wins = [w for w in lay["windows"] if w["name"] in ("toolbar", "navigator", "center", "status")]
        over = [(w["name"], round(w["content_right"] - w["right"])) for w in wins if w["content_right"] > w["right"] + 1.5]
        expect(len(wins) == 4 and not over, f"...no panel's content runs past its right edge ({over})")
        # the toolbar's help is drawn: its text differs from the background
        hx, hy, hw, hh = R["toolbar.help"]
        expect(crop(img, R["toolbar.help"]).std() > 20, "...and the help mark is visible")
    # 2x: the framebuffer is twice the layout, and a heatmap's cells are viridis of the trace's values
    name, head = "blocks.1.attn.pattern", 2
    img, lay = app.shot("--width", "2560", "--height", "1600", "--ui-scale", "2", "--stage", name, "--head", str(head))
    expect(img.shape[:2] == (1600, 2560) and lay["ui_scale"] == 2, f"--ui-scale 2: a 2560x1600 framebuffer ({img.shape[:2]})")
    t = app.trace()[name]
    n = lay["numbers"]
    x, y, w, h = [2 * v for v in lay["rects"]["stage"]]
    rows, cols = int(n["stage.rows"]), int(n["stage.cols"])
    vmax = float(t.max())
    worst = 0
    rng = np.random.default_rng(1)
    for r, c in [np.unravel_index(t[head].argmax(), t[head].shape)] + [tuple(rng.integers(0, s) for s in t[head].shape) for _ in range(8)]:
        px = img[int(y + (r + 0.5) * h / rows), int(x + (c + 0.5) * w / cols)]
        worst = max(worst, float(np.abs(px - viridis(t[head, r, c] / vmax)).max()))
    expect(worst <= 25, f"...its heatmap cells, at twice the size, are viridis of the trace's values (worst {worst:.0f}/255)")
    lx, ly, lw, lh = [2 * v for v in lay["rects"]["toolbar.help"]]
    expect(lh >= 30, f"...and the text is drawn at twice the size (help mark {lh:.0f} px tall)")


def check_changes(app):
    """--no-affine, Changes tab: opens on numpy's first changed stage; bars on a labelled scale; no change
    is white; a 3-D stage names its head; the baseline is said."""
    base, now = app.trace(), app.trace("--no-affine")
    rel = {}
    first = None
    for k in base:
        if k.startswith("__") or k.endswith(".grad") or k not in now or base[k].shape != now[k].shape:
            continue
        d = float(np.linalg.norm((now[k] - base[k]).astype(np.float64)))
        b = float(np.linalg.norm(base[k].astype(np.float64)))
        rel[k] = d / b if b > 0 else (1.0 if d > 0 else 0.0)
        if d > 0 and first is None:
            first = k
    img, lay = app.shot("--no-affine", "--tab", "2")
    st, n, R = lay["strings"], lay["numbers"], lay["rects"]
    expect(lay["stage"] == first and st.get("changes.first") == first, f"the tab opens on the first stage that changed, numpy's {first} ({lay['stage']})")
    top = max(rel.values())
    expect(abs(n.get("changes.scale_max", 0) - top) <= 1e-4 * top, f"the bars' scale ends at the largest change, {top:.4f}")
    axis = [x["text"] for x in lay["texts"] if x["group"] == "changes.axis"]
    expect("0" in axis and fmt4(top) in axis, f"...labelled 0 .. {fmt4(top)} ({axis})")
    aw = R["changes.axis"][2]
    worst = max(abs(R[f"changes.bar.{k}"][2] - rel[k] / top * aw) for k in (first, "logits", "blocks.0.attn.pattern") if f"changes.bar.{k}" in R)
    expect(worst <= 1.5, f"...bar lengths are relative change / {top:.3f} of the axis (worst {worst:.2f} px)")
    expect("the default options at the same input size, no interventions" in st.get("changes.baseline", ""),
           "the baseline is said: the default options at the same input size, no interventions")
    # the block stages' names in one form down the list: all "blocks.0.ln1.mean" or all "L0 ln1.mean" (at
    # 1280x800 some full names do not fit, and the list mixed both forms)
    for w, h in [(1280, 800), (1920, 1080)]:
        _, small = app.shot("--no-affine", "--tab", "2", "--width", str(w), "--height", str(h))
        names = [x["text"].split("  ", 1)[-1] for x in small["texts"] if x["group"] == "changes.list"]
        block = [x for x in names if x.startswith("blocks.") or re.match(r"L\d+ ", x)]
        forms = {x.startswith("blocks.") for x in block}
        expect(len(block) > 5 and len(forms) == 1, f"...at {w}x{h} the block stages named in one form ({block[:2]} ... "
                                                   f"{block[-2:]}, {len(block)} rows)")
    # a stage that did not change, clicked in the list: white, and said
    bx, by, bw, bh = R["changes.bar.input"]
    img, lay = app.shot("--no-affine", "--tab", "2", "--hover", f"{bx + 5},{by + bh / 2}", "--click")
    expect(lay["stage"] == "input" and "did not change" in lay["strings"].get("changes.same", ""),
           f"a click on 'input' (no change) shows it and says it did not change ({lay['stage']})")
    d = crop(img, lay["rects"]["diff"]).reshape(-1, 3)
    expect(d.size and np.abs(d - WHITE).max() <= 12, f"...its difference map is white, 0 on the diverging map (worst {np.abs(d - WHITE).max() if d.size else '-'})")
    # a 3-D stage: which head is shown
    _, lay = app.shot("--no-affine", "--tab", "2", "--stage", "blocks.0.attn.pattern", "--head", "2")
    expect(lay["stage"] == "blocks.0.attn.pattern" and lay["strings"].get("changes.slice") == "head 2 of 4",
           f"blocks.0.attn.pattern: the head shown is named ({lay['strings'].get('changes.slice')})")


def check_colours(app):
    """logits: a bar has the colour of its sign on the heatmap above it (red above 0, blue below)."""
    img, lay = app.shot("--stage", "logits")
    logits = app.trace()["logits"]
    R, n = lay["rects"], lay["numbers"]
    x, y, w, h = R["stage"]
    cols = int(n["stage.cols"])
    for k in (int(logits.argmax()), int(logits.argmin())):
        bar = crop(img, R[f"bar.{k}"]).reshape(-1, 3).mean(0)
        cell = img[int(y + h / 2), int(x + (k + 0.5) * w / cols)]
        want = RED if logits[k] > 0 else BLUE
        expect(np.abs(bar - want).max() < 20, f"logit {k} ({logits[k]:+.2f}): its bar is {'red' if logits[k] > 0 else 'blue'} ({bar.round()})")
        redder = cell[0] > cell[2]
        expect(redder == (logits[k] > 0), f"...as its heatmap cell is ({cell})")


def check_lens_legend(app):
    """The logit lens of the default model names its 10 classes (Fashion-MNIST's labels, as Zalando
    publishes them) down its side, a row each, at 1280x800 and 1920x1200, with no legend (issue 36:
    the orientation of the 1000-class lens; before, numbered columns and a legend at 1280x800)."""
    names = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
    for W, H in ((1280, 800), (1920, 1200)):
        _, lay = app.shot("--tab", "4", "--width", str(W), "--height", str(H), image=False)
        rows = [t["text"] for t in lay["texts"] if t["group"] == "lens.rows"]
        expect(rows == names and "lens.legend" not in lay["strings"],
               f"{W}x{H}: the rows are named {rows[:3]}..., no legend ('{lay['strings'].get('lens.legend')}')")
        expect("lens.colorbar" in {t["group"] for t in lay["texts"]}, "...the colour bar keys the probabilities")


def check_lens_1000(app):
    """The logit lens of a 1000-class model: the final top 10 and each layer's top class, named, at
    least 150 px tall (it was a 10 px strip)."""
    out = os.path.join(app.dir, "lens.npz")
    import subprocess
    subprocess.run([app.cli, "analyze", "--model", "vit-ti16", "--image", PHOTO, "--out", out], check=True, capture_output=True)
    lens = np.load(out)["logit_lens"]
    L, K = lens.shape
    order = lambda row: sorted(range(K), key=lambda k: (-row[k], k))
    pick = []
    for k in order(lens[-1])[:10] + [order(lens[l])[0] for l in range(L)]:
        if k not in pick:
            pick.append(k)
    img, lay = app.shot("--model", "vit-ti16", "--image", PHOTO, "--tab", "4", "--width", "1280", "--height", "800", image=False)
    got = [int(v) for v in lay["strings"].get("lens.classes", "").split(",") if v]
    expect(got == pick[:24], f"the lens shows the final top 10 and each layer's top class, numpy's ({got[:5]}... vs {pick[:5]}...)")
    x, y, w, h = lay["rects"]["lens"]
    expect(h >= 150 and lay["numbers"]["lens.rows"] == len(got) and lay["numbers"]["lens.cols"] == L,
           f"...as {len(got)} named rows x {L} layers, {h:.0f} px tall")
    classes = open(os.path.join(HERE, "..", "..", "assets", "classes", "imagenet1k.txt")).read().splitlines()

    def rows_named(lay, got, what):
        """Every row the labels' height leaves room for is named, in order: the class's name (up to its
        first comma), or its start cut with '...'; none is left out for being long."""
        labels = sorted((t["box"][1], t["text"]) for t in lay["texts"] if t["group"] == "lens.rows")
        x, y, w, h = lay["rects"]["lens"]
        ch = h / len(got)
        th = max((t["box"][3] for t in lay["texts"] if t["group"] == "lens.rows"), default=16)
        step = max(1, int(np.ceil((th + 1) / ch)))
        want = [classes[k].split(",")[0] for k in got[::step]]
        ok = len(labels) == len(want) and all(
            t == nm or (t.endswith("...") and nm.startswith(t[:-3]) and len(t) > 3) for (_, t), nm in zip(labels, want))
        expect(ok, f"{what}: every row named in order ({len(labels)} labels for {len(want)} rows: "
                   f"{[t for _, t in labels][:16]} against {want[:16]})")

    rows_named(lay, got, "1280x800, a photo")
    # the ankle boot's lens lists 'bicycle-built-for-two' among short names: it was left unlabelled
    img, lay = app.shot("--model", "vit-ti16", "--image", SAMPLE, "--tab", "4", "--width", "1920", "--height", "1200",
                        image=False)
    got = [int(v) for v in lay["strings"].get("lens.classes", "").split(",") if v]
    rows_named(lay, got, "1920x1200, the ankle boot")


def check_strip_keys(app):
    """A heatmap too short for the colour bar beside it (1000 logits in one row; 12 layers of token
    norms squeezed to ~29 px) carries its key under it, as wide as its cells, with the values of its
    scale (they had no key: the bar was skipped for want of height)."""
    t = app.trace("--model", "vit-ti16", image=PHOTO)
    logits = t["logits"].ravel()
    img, lay = app.shot("--model", "vit-ti16", "--image", PHOTO, "--stage", "logits", "--width", "1280", "--height", "800",
                        image=False)
    m, k, n = lay["rects"].get("stage"), lay["rects"].get("stage.key"), lay["numbers"]
    big = float(np.abs(logits).max())
    expect(m is not None and k is not None and k[1] >= m[1] + m[3] - 1 and abs(k[0] - m[0]) <= 1 and abs(k[2] - m[2]) <= 2
           and abs(n.get("stage.key.vmin", 0) + big) <= 1e-4 * big and abs(n.get("stage.key.vmax", 0) - big) <= 1e-4 * big,
           f"logits, one row: its key under it, -{big:.4f} .. {big:.4f} (key {k}, strip {m}, "
           f"{n.get('stage.key.vmin')} .. {n.get('stage.key.vmax')})")
    img, lay = app.shot("--model", "dinov2-s14-reg", "--image", PHOTO, "--tab", "10", "--width", "1280", "--height", "800",
                        image=False)
    m, k, n = lay["rects"].get("norms"), lay["rects"].get("norms.key"), lay["numbers"]
    expect(m is not None and k is not None and m[3] < 60 and k[1] >= m[1] + m[3] - 1 and abs(k[2] - m[2]) <= 2
           and n.get("norms.key.vmax") == n.get("norms.vmax") and n.get("norms.key.vmin") == n.get("norms.vmin"),
           f"token norms at {m[3] if m else '?'} px tall: its key under it with the strip's range (key {k}, strip {m})")


def check_ln_few_tokens(app):
    """CLIP-B/32's LayerNorm, 50 tokens x 768 dims: in square cells its rows were 0.6 px, and the mean
    and std strips that share them a 30 px smear with no key. The rows are now readable (100 px for the
    50, or what the room allows) in all four panels, each strip has its colour bar with the trace's
    range, and the panel says its cells are not square and why."""
    t = app.trace("--model", "clip-b32")
    mean, std = t["blocks.0.ln2.mean"].ravel(), t["blocks.0.ln2.std"].ravel()
    for W, H in ((1280, 800), (1366, 768)):
        _, lay = app.shot("--model", "clip-b32", "--stage", "blocks.0.ln2.std", "--width", str(W), "--height", str(H),
                          image=False)
        R = lay["rects"]
        hs = [R[k][3] if k in R else 0 for k in ("ln.mean", "ln.std", "ln.normalized", "ln.out")]
        bound = lay["numbers"].get("ln.rows_room_bound", 0) == 1  # as tall as the room allows, short of 100 px
        expect((min(hs) >= 99.5 or (bound and min(hs) >= 80)) and max(hs) - min(hs) < 0.5,
               f"{W}x{H}: the four panels' 50 rows readable and shared (heights {hs}{', room-bound' if bound else ''})")
        unkeyed = [h["name"] for h in lay["heatmaps"] if not h["key"]]
        expect(not unkeyed, f"...every heatmap has its key (none: {unkeyed})")
        bar = lambda g: [x["text"] for x in lay["texts"] if x["group"] == g]
        m = float(np.abs(mean).max())
        expect(fmt4(m) in bar("ln.mean.colorbar") and fmt4(-m) in bar("ln.mean.colorbar"),
               f"...mean's bar spans numpy's +-{fmt4(m)} ({bar('ln.mean.colorbar')})")
        expect(fmt4(float(std.max())) in bar("stage.colorbar"), f"...std's bar reaches numpy's max {fmt4(float(std.max()))} "
                                                                 f"({bar('stage.colorbar')})")
        note = lay["strings"].get("ln.cells", "")
        expect("50 tokens x 768 dims do not fit square cells" in note, f"...and it says its cells are not square ({note})")


def check_navigator_layer(app):
    """The stage list's layer slider names the shown stage's layer, and outside the blocks says there
    is none (it read "layer 0" on the logits)."""
    for stage, want in (("blocks.2.attn.pattern", "layer 2"), ("logits", "no layer (drag: block 0)"),
                        ("patch_embed", "no layer (drag: block 0)")):
        _, lay = app.shot("--stage", stage, image=False)
        got = lay["strings"].get("navigator.layer", "")
        expect(got == want, f"{stage}: the slider reads {got!r} ({want!r})")


def check_nan_legend(app):
    """NaN in a weight: the NaN cells of q are magenta, and the legend says how many there are."""
    import vitref
    from test_grads import random_canon
    ck = os.path.join(app.dir, "nan.safetensors")
    c = random_canon(1, 28, 4, 32, 2, 10, 5)
    c["blocks.0.attn.qkv.weight"][0, 0] = float("nan")
    vitref.write_safetensors(ck, c, {"num_heads": 2})
    t = app.trace("--model", ck)
    q = t["blocks.0.attn.q"][0]  # head 0
    nan = int(np.isnan(q).sum())
    img, lay = app.shot("--model", ck, "--stage", "blocks.0.attn.q", "--head", "0")
    leg = [x["text"] for x in lay["texts"] if x["group"] == "stage.nonfinite"]
    expect(nan > 0 and lay["numbers"].get("stage.nonfinite.count") == nan and f"NaN: {nan} cells" in leg,
           f"the legend counts numpy's {nan} NaN cells of head 0 ({leg})")
    x, y, w, h = lay["rects"]["stage"]
    rows, cols = q.shape
    r, cc = [int(v) for v in np.argwhere(np.isnan(q))[rows // 2]]
    px = img[int(y + (r + 0.5) * h / rows), int(x + (cc + 0.5) * w / cols)]
    expect(np.abs(px - MAGENTA).max() <= 10, f"...and a NaN cell ({r}, {cc}) is magenta ({px})")
    expect("probs holds" in lay["strings"].get("predictions.nonfinite", ""), "the predictions say there is none (probs is NaN)")


def check_domain(app):
    """A colour photo on the 28x28 gray clothing model gets a note; the bundled clothing sample does not."""
    W, H = Image.open(PHOTO).size
    _, lay = app.shot("--image", PHOTO, image=False)
    note = lay["strings"].get("predictions.domain", "")
    expect("Fashion-MNIST" in note and "colour photo was turned gray" in note and f"shrunk {max(W, H) // 28}x" in note,
           f"a {W}x{H} colour photo: {note[:100]}")
    _, lay = app.shot()
    expect("predictions.domain" not in lay["strings"], "the bundled Fashion-MNIST sample: no note")


def check_axes(app):
    """Token axes say cls, p0, ...; training curves have axes."""
    # token axes
    img, lay = app.shot("--stage", "blocks.0.attn.pattern")
    x, y, w, h = lay["rects"]["stage"]
    ch = h / lay["numbers"]["stage.rows"]
    labels = [(tt["text"], tt["box"]) for tt in lay["texts"] if tt["group"] == "stage.rows"]
    wrong = [txt for txt, b in labels if txt != token_name(int((b[1] + b[3] / 2 - y) // ch))]
    expect(labels and labels[0][0] == "cls" and not wrong, f"token axes say cls, p0, ... ({[l[0] for l in labels[:4]]}, wrong: {wrong[:3]})")
    # training curves
    _, lay = app.shot("--tab", "3", "--train-epochs", "1", "--train-limit", "256")
    axes = [tt["text"] for tt in lay["texts"] if tt["group"] == "train.loss.axes"]
    expect(any("training step" in a for a in axes) and any("training loss" in a for a in axes) and "0" in axes,
           f"the loss curve has its axes: {axes}")


def check_math_panel(app):
    """The math of one cell sits beside its heatmap, at 1280x800 and 1600x1000."""
    for W, H in ((1280, 800), (1600, 1000)):
        _, lay = app.shot("--width", str(W), "--height", str(H), "--stage", "blocks.1.attn.scores", "--head", "1", "--cell", "5,7")
        R = lay["rects"]
        expect("cellmath" in R and not overlap(R["cellmath"], R["stage"]) and "cellmath.ok" in lay["numbers"],
               f"{W}x{H}: the math panel does not cover the heatmap ({R.get('cellmath')} vs {R['stage']})")


def check_pooling_status(app):
    """--pooling mean: the status bar says the pooling the trace was computed with."""
    _, lay = app.shot("--pooling", "mean")
    st = lay["strings"]["status"]
    expect("pooling mean" in st and "pooling cls" not in st, f"the status bar says pooling mean ({st[:160]})")


def check_big_model(app):
    """vit-l16 (304M parameters): the window is up while the weights are made and says so, then while
    the first pass runs says which block (of 24) it is at."""
    rc, err, img, lay = app.run("--model", "vit-l16", "--while-loading", "load")
    w = lay["strings"].get("working", "") if lay else ""
    expect(rc == 0 and lay["stage"] == "" and "loading vit-l16: making random weights (304M parameters)" in w,
           f"while it loads: '{w.strip()}' in the centre, no trace yet (rc {rc} {err[-200:]})")
    expect(img is not None and "toolbar" in lay["rects"] and img.std() > 10, "...in a window already drawn")
    rc, err, img, lay = app.run("--model", "vit-l16", "--while-loading", "pass")
    w = lay["strings"].get("working", "") if lay else ""
    m = re.search(r"running block (\d+) of 24", w)
    expect(rc == 0 and m is not None and 1 <= int(m.group(1)) <= 24, f"while the first pass runs: '{w.strip()}'")


def check_thumbs_fold(app):
    """Issue 36 item 1: the image panel is the image's (the predictions sit under the stage list): with
    ViT-B at 1280x800 the model input is at least 128 px and the attention thumbnails' row (each at
    least 56 px) is in the panel's shown part, with no "scroll down" line; at 1920x1200 the image is
    larger still. (Before: a 64-px image and the row below the fold, a line saying so.)"""
    icon = os.path.join(HERE, "..", "..", "assets", "icon.png")
    sides = {}
    for W, H in ((1280, 800), (1920, 1200)):
        img, lay = app.shot("--model", "vit-b16", "--image", icon, "--width", str(W), "--height", str(H), image=False)
        R = lay["rects"]
        px, py, pw, ph = R["image.panel"]
        tx, ty, tw, th = R["thumbs"]
        ix, iy, iw, ih = R["image"]
        sides[W] = max(iw, ih)
        expect(max(iw, ih) >= 128 and lay["numbers"].get("thumbs.size", 0) >= 56,
               f"{W}x{H}, ViT-B: the model input is {iw:.0f}x{ih:.0f} px (>= 128), the thumbnails "
               f"{lay['numbers'].get('thumbs.size', 0):.0f} px (>= 56)")
        expect(ty >= py and ty + th <= py + ph + 0.5 and "image.more_below" not in lay["strings"],
               f"...the thumbnails' row (y {ty:.0f}..{ty + th:.0f}) is in the panel's shown part (to y {py + ph:.0f}), "
               f"no line ({lay['strings'].get('image.more_below')!r})")
        nav = R.get("navigator.predictions")
        expect(nav is not None and "prediction" in lay["strings"], f"...the predictions are drawn under the stage list ({nav})")
    expect(sides[1920] > sides[1280], f"...and larger with more room ({sides[1280]:.0f} -> {sides[1920]:.0f} px)")

if __name__ == "__main__":
    sys.exit(run_checks([check_attention_scale, check_overlay_key, check_layouts, check_changes, check_colours, check_lens_legend, check_lens_1000, check_strip_keys, check_ln_few_tokens, check_navigator_layer, check_nan_legend,
                         check_domain, check_axes, check_math_panel, check_pooling_status, check_big_model, check_thumbs_fold],
                        "all issue-19 picture checks passed"))
