#!/usr/bin/python3
"""Issue 10 item 7: the map of the model (--tab 9), and the status bar's
GEMM field. The real app under Xvfb, checked by its pixels and by the --layout it reports; the expected
architecture is written here from the ViT paper (image -> patches -> embed -> +cls -> +pos ->
[LN -> MHA -> + -> LN -> MLP -> +] x L -> LN -> pool -> head -> softmax), the expected shapes come from
`vitscope-cli trace` read with numpy."""
import os
import re
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from test_truth import App, run_checks, crop, expect, FAIL  # noqa: E402

AMBER = np.array([235, 175, 50])   # the current stage's box
RED = np.array([150, 30, 30])      # a box a BUG switch changes
SHAPE = np.array([140, 215, 255])  # shape labels on the arrows


def share(img, rect, colour, tol=14):
    c = crop(img, rect)
    if c.size == 0:
        return 0.0
    return float((np.abs(c - colour).max(-1) <= tol).mean())


def expected_boxes(pool="cls"):
    """The architecture as the paper draws it: (box id, the stage whose shape leaves it) with the block at layer {l}."""
    head = [("ln_final", "ln_final.out"), ("pooled", "pooled")] if pool == "cls" else [("pooled", "pooled"), ("ln_final", "ln_final.out")]
    return ([("input", "input"), ("patches", "patches"), ("patch_embed", "patch_embed"), ("tokens", "tokens"), ("embed", "embed"),
             ("ln1", "blocks.{l}.ln1.out"), ("attn", "blocks.{l}.attn.out"), ("resid_mid", "blocks.{l}.resid_mid"),
             ("ln2", "blocks.{l}.ln2.out"), ("mlp", "blocks.{l}.mlp.out"), ("resid_post", "blocks.{l}.resid_post")] +
            head + [("logits", "logits"), ("probs", "probs")])


def box_of_stage(name):
    """Which box of the paper's diagram a stage belongs to (written independently of the app)."""
    rest = name.split(".", 2)[2] if name.startswith("blocks.") else name
    for prefix, box in (("ln1.", "ln1"), ("ln2.", "ln2"), ("attn.", "attn"), ("mlp.", "mlp"), ("ln_final.", "ln_final")):
        if rest.startswith(prefix):
            return box
    return rest


def info(app, *args):
    """(stage names in order, {name: (title, what)}) from `vitscope-cli info --explain`."""
    out = subprocess.run([app.cli, "info", "--explain", *args], capture_output=True, text=True, check=True).stdout
    names, texts, part = [], {}, None
    for line in out.splitlines():
        if line.startswith("stages:"):
            part = "s"
        elif line.startswith("explanations"):
            part = "e"
        elif part == "s" and line.startswith("  "):
            names.append(line.split()[0])
        elif part == "e" and line.startswith("  "):
            n, title, what = line[2:].split("\t")[:3]
            texts[n] = (title, what)
    return names, texts, out


def check_map(app):
    """The map draws the paper's architecture with the trace's shapes, for two models and the pooling choices."""
    for model, extra in (("default", []), ("toy-rgb8", []), ("default", ["--pooling", "mean"])):
        pool = "mean" if "mean" in extra else "cls"
        t = app.trace("--model", model, *(["--pooling", "mean"] if pool == "mean" else []))
        L = len([k for k in t if k.endswith(".resid_post")])
        layer = L - 1
        stage = f"blocks.{layer}.attn.pattern"
        img, lay = app.shot("--model", model, *extra, "--tab", "9", "--stage", stage)
        st, r, n = lay["strings"], lay["rects"], lay["numbers"]
        tag = f"--model {model} {' '.join(extra)}".strip()
        expect(lay["tab"] == "Map" and "map" in r, f"{tag} --tab 9: the Map tab is shown")
        m = crop(img, r["map"])
        expect(m.std() > 15 and len(np.unique(m.reshape(-1, 3), axis=0)) > 30, f"...the map is not blank (pixel std {m.std():.1f})")
        boxes = [(b, s.format(l=layer)) for b, s in expected_boxes(pool)]
        expect(st.get("map.order", "").split(",") == [b for b, _ in boxes],
               f"...its boxes are the paper's, in order ({st.get('map.order')})")
        ys = [r.get("map.box." + b, [0, -1])[1] for b, _ in boxes]
        expect(all(a < b for a, b in zip(ys, ys[1:])), "...drawn top to bottom in that order")
        # the shape on each arrow is the CLI trace's tensor's shape
        bad = []
        for b, s in boxes:
            want = str(tuple(t[s].shape)) if s in t else "(missing)"
            got = st.get("map.shape." + s)
            if got != want:
                bad.append(f"{s}: {got} != {want}")
        expect(not bad, f"...the {len(boxes)} arrows carry the CLI trace's shapes ({bad[:3] if bad else 'e.g. ' + st.get('map.shape.patches', '')})")
        # something is drawn, in the shape colour, where each label is
        blank = [s for _, s in boxes if share(img, r.get("map.shape." + s, [0, 0, 0, 0]), SHAPE, 60) < 0.03]
        expect(not blank, f"...every shape label is drawn where the layout says ({blank[:3]})")
        labels = sorted(tx["text"] for tx in lay["texts"] if tx["group"] == "map.shapes")
        expect(labels == sorted(str(tuple(t[s].shape)) for _, s in boxes), "...and the drawn labels are exactly those shapes")
        expect(st.get("map.repeat") == f"x {L}" and n.get("map.depth") == L and n.get("map.layer") == layer,
               f"...the block is drawn once for layer {layer}, marked x {L} (the trace's depth)")
        expect(st.get("map.current") == "attn" and share(img, r["map.box.attn"], AMBER) > 0.4,
               f"...--stage {stage}: its MHA box is highlighted ({share(img, r['map.box.attn'], AMBER):.2f} amber)")
        if pool == "mean":
            expect(any(tx["text"] == "mean of patches" for tx in lay["texts"] if tx["group"] == "map.boxes"),
                   "...the pool box says 'mean of patches'")
            expect(t["ln_final.out"].shape[0] == 1, "...(and ln_final normalizes the pooled vector: (1, D))")


def check_highlight(app):
    """The highlighted box moves with --stage: amber pixels fill that box and no other."""
    t = app.trace()
    L = len([k for k in t if k.endswith(".resid_post")])
    shares = {}
    for stage in ("input", "patches", "blocks.0.ln1.std", f"blocks.{L - 1}.mlp.post", "blocks.2.resid_mid", "ln_final.out", "probs"):
        img, lay = app.shot("--tab", "9", "--stage", stage)
        want = box_of_stage(stage)
        r = lay["rects"]
        got = {k[len("map.box."):]: share(img, v, AMBER) for k, v in r.items() if k.startswith("map.box.")}
        others = max(v for k, v in got.items() if k != want)
        expect(lay["stage"] == stage and got.get(want, 0) > 0.4 and others < 0.02,
               f"--stage {stage}: box '{want}' is amber ({got.get(want, 0):.2f}), no other is (max {others:.3f})")
        if stage.startswith("blocks."):
            layer = int(stage.split(".")[1])
            expect(lay["numbers"].get("map.layer") == layer, f"...the block is drawn for layer {layer}")
        shares[stage] = got
    expect(len({max(g, key=g.get) for g in shares.values()}) == len(shares), "...a different box for each of those stages")
    # from the keyboard: M opens the map
    for key in ("m",):
        _, lay = app.shot("--keys", key)
        expect(lay["tab"] == "Map", f"key {key.upper()}: the Map tab")


def check_click(app):
    """Clicking a box goes to its first stage (in the layer the map shows); clicking the strip too."""
    _, lay = app.shot("--tab", "9", "--stage", "blocks.2.attn.pattern")
    for box, want in (("mlp", "blocks.2.mlp.pre"), ("patches", "patches"), ("ln_final", "ln_final.mean")):
        x, y, w, h = lay["rects"]["map.box." + box]
        _, after = app.shot("--tab", "9", "--stage", "blocks.2.attn.pattern", "--hover", f"{x + w / 2},{y + h / 2}", "--click")
        expect(after["stage"] == want and after["strings"].get("map.current") == box,
               f"click on the map's {box} box (layer 2 shown): goes to {want} ({after['stage']})")
    # the strip above the stage view: highlights the current box, a click goes there (same layer)
    img, lay = app.shot("--stage", "blocks.3.attn.pattern")
    r = lay["rects"]
    expect(share(img, r["strip.attn"], AMBER) > 0.3 and share(img, r["strip.mlp"], AMBER) < 0.02,
           f"the strip above the stage view highlights MHA for blocks.3.attn.pattern ({share(img, r['strip.attn'], AMBER):.2f})")
    x, y, w, h = r["strip.mlp"]
    _, after = app.shot("--stage", "blocks.3.attn.pattern", "--hover", f"{x + w / 2},{y + h / 2}", "--click")
    expect(after["stage"] == "blocks.3.mlp.pre", f"...a click on its MLP goes to blocks.3.mlp.pre ({after['stage']})")
    rc, err, _, _ = app.run("--click")
    expect(rc == 2 and "--hover" in err, "--click without --hover is a usage error")


def check_bugs(app):
    """The BUG switches and LayerNorm options are on the map: the box a bug changes is red."""
    img, lay = app.shot("--tab", "9", "--stage", "logits")
    r = lay["rects"]
    clean = {b: share(img, r["map.box." + b], RED) for b in ("patches", "attn")}
    expect(max(clean.values()) < 0.02, f"without BUG switches no box is red ({clean})")
    for flag, box, words in (("--bug-reshape-patches", "patches", "BUG: plain reshape"),
                             ("--bug-scale-after-softmax", "attn", "BUG: scale after softmax")):
        img, lay = app.shot(flag, "--tab", "9", "--stage", "logits")
        r = lay["rects"]
        red = {b: share(img, r["map.box." + b], RED) for b in ("patches", "attn")}
        other = "attn" if box == "patches" else "patches"
        expect(red[box] > 0.4 and red[other] < 0.02, f"{flag}: the {box} box is red ({red[box]:.2f}), the {other} box is not ({red[other]:.2f})")
        subs = [tx["text"] for tx in lay["texts"] if tx["group"] == "map.boxes"]
        expect(words in subs, f"...and says '{words}'")
    _, lay = app.shot("--no-affine", "--unbiased", "--tab", "9")
    subs = [tx["text"] for tx in lay["texts"] if tx["group"] == "map.boxes"]
    expect(subs.count("no affine, N-1") == 3, f"--no-affine --unbiased: the three LN boxes say 'no affine, N-1' ({subs.count('no affine, N-1')})")
    # with no image the map still draws, from the config, and says what is missing
    rc, err, img, lay = app.run("--tab", "9", "--image", os.path.join(app.dir, "missing.png"), image=False)
    expect(lay is not None and "map" in lay["rects"] and "no image" in lay["strings"].get("map.message", "").lower(),
           f"a missing image: the map is drawn from the config and says so (rc {rc}: {lay['strings'].get('map.message', '') if lay else err[:100]})")
    if lay:
        names, _, _ = info(app)
        sh = [l for l in subprocess.run([app.cli, "info"], capture_output=True, text=True).stdout.splitlines() if l.strip().startswith("patches ")]
        want = sh[0].split(None, 1)[1].strip() if sh else "?"
        expect(lay["strings"].get("map.shape.patches") == want, f"...with the config's shapes (patches {want})")


def check_status(app):
    """The status bar: the matrix-product engine has its own field, inside the window, with long model and image names."""
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "assets", "fmnist_vit.safetensors")
    long_model = os.path.join(app.dir, "a_fashion_mnist_vision_transformer_with_a_very_long_file_name_indeed_for_the_status_bar.safetensors")
    long_image = os.path.join(app.dir, "an_ankle_boot_from_the_fashion_mnist_test_set_with_a_long_file_name_too.png")
    shutil.copy(src, long_model)
    shutil.copy(app.sample, long_image)
    out = subprocess.run([app.cli, "info"], capture_output=True, text=True).stdout
    # "gemm: oneDNN 2.6.3, AVX-512 BF16 kernels (...)" -> the field says "GEMM: oneDNN 2.6.3 AVX-512 BF16"
    gemm = next((l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("gemm:")), "")
    kernel = (gemm.split(",")[0] + " " + gemm.split(", ", 1)[1].split(" kernels")[0]) if ", " in gemm else "?"
    own = re.search(r"the packed products on ViTScope's own (\S+) kernel", gemm)  # core/kernels/gemm_own.h
    if own:
        kernel += " + own " + own.group(1)
    img, lay = app.shot("--model", long_model, "--image", long_image, "--width", "1600", image=False)
    r, st = lay["rects"], lay["strings"]
    W = lay["window"][0]
    b = r.get("status.gemm", [0, 0, 0, 0])
    expect(st.get("status.gemm", "") == "GEMM: " + kernel, f"the GEMM field names the engine and kernels info names ({st.get('status.gemm')} / {kernel})")
    expect(b[2] > 0 and b[0] + b[2] <= W and r["status.line"][0] + r["status.line"][2] <= b[0],
           f"...inside the {W}-px window, right of the line ({b})")
    expect(lay["numbers"].get("status.cut") == 1 and gemm in st.get("status", "") and "long_file_name_too" in st.get("status", ""),
           "...the long line is cut with '...', its whole text kept (tooltip, layout)")
    field = crop(img, b)
    expect(field.std() > 8, f"...and the field is drawn (pixel std {field.std():.1f})")


def main():
    return run_checks([check_map, check_highlight, check_click, check_bugs, check_status], "all map checks passed")


if __name__ == "__main__":
    sys.exit(main())
