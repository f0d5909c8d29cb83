#!/usr/bin/python3
"""Issue 36 (part a): every picture fits and teaches, at the window sizes people have.

The real app under Xvfb, checked by the --layout it reports. Each check failed on the app before
issue 36 (the layout sweep's rules, Gui.SweepSizes*, cover the same faults over every view):

- while a model loads, no label has its first characters cut (the status bar's "m weights (304M
  parameters)") and no panel shows the previous model's data (its preprocessing, its description);
- the logit lens has one orientation (layers on rows) for 10 and for 1000 classes;
- the attention-maps grid grows with the space, offers per-head scales (said on each key) and shows
  the image faintly under each map."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_truth import run_checks, expect  # noqa: E402


def left_cut(texts):
    """The labels whose first characters are cut: their left edge left of their clip."""
    return [t["text"] for t in texts if t["box"][0] < t["clip"][0] - 0.5]


def check_loading(app):
    """vit-l16 while its weights are made, at 1280x800: the status bar's job label whole from its first
    character, and the image panel and status line say it loads instead of showing fmnist-vit's data."""
    rc, err, img, lay = app.run("--model", "vit-l16", "--while-loading", "load", "--width", "1280", "--height", "800")
    expect(rc == 0 and lay is not None, f"the window is drawn while vit-l16 loads (rc {rc} {err[-200:]})")
    if lay is None:
        return
    jobs = [t for t in lay["texts"] if t["group"] == "status.jobs"]
    expect(len(jobs) >= 1 and jobs[0]["text"].startswith("loading vit-l16"),
           f"the status bar's job is labelled from its first character: {[t['text'] for t in jobs]}")
    cut = left_cut(lay["texts"])
    expect(not cut, f"no label has its first characters cut: {cut}")
    st = lay["strings"]
    expect("preprocess" not in st and "loading vit-l16" in st.get("image.message", ""),
           f"the image panel says the model loads ({st.get('image.message')!r}), not the previous model's "
           f"preprocessing ({st.get('preprocess', '')[:60]!r})")
    expect(st.get("status", "").startswith("loading vit-l16") and "fmnist-vit" not in st.get("status", ""),
           f"the status line says vit-l16 loads, not fmnist-vit's description: {st.get('status', '')[:90]!r}")


def check_lens_orientation(app):
    """The logit lens in one orientation for 10 and for 1000 classes: a class per row, named down the
    side, the layers across (10 classes: every class; 1000: the chosen ones, listed in lens.classes)."""
    for model, L, what in (("default", 6, "10 classes"), ("vit-ti16", 12, "1000 classes")):
        _, lay = app.shot("--model", model, "--tab", "4", "--width", "1280", "--height", "800")
        n = lay["numbers"]
        classes = [int(k) for k in lay["strings"].get("lens.classes", "").split(",") if k]
        rows = [t["text"] for t in lay["texts"] if t["group"] == "lens.rows"]
        expect(n.get("lens.cols") == L and n.get("lens.rows") == len(classes) and len(classes) >= 10
               and len(rows) >= min(len(classes), 10) and not rows[0].isdigit(),
               f"{what}: classes on rows ({n.get('lens.rows')} rows, named {rows[:3]}...), {L} layers across "
               f"({n.get('lens.cols')} columns)")
        if what == "10 classes":
            expect(classes == list(range(10)), f"...every one of the 10 classes, in order ({classes})")


def check_attention_grid(app):
    """The attention-maps grid at 2560x1440 grows with the room (its maps were held to 128 px, 22% of
    the centre): maps over 128 px reaching down most of the centre; the image faintly under each map
    (the same map with --attention-image off differs where the boot is bright); each map's own scale
    printed on it when asked for."""
    import numpy as np
    img, lay = app.shot("--tab", "1", "--width", "2560", "--height", "1440")
    R = lay["rects"]
    maps = {k: r for k, r in R.items() if k.startswith("grid.")}
    cx, cy, cw, ch = R["center"]
    bottom = max(r[1] + r[3] for r in maps.values())
    top = min(r[1] for r in maps.values())
    side = R["grid.0.0"][2]
    expect(side > 128 and (bottom - top) / (cy + ch - top) >= 0.8,
           f"2560x1440: maps of {side:.0f} px (> 128) reaching {100 * (bottom - top) / (cy + ch - top):.0f}% of the "
           f"height below their top (>= 80%)")
    expect(lay["numbers"].get("grid.image_alpha", 0) > 0, "...the image under each map by default "
           f"(alpha {lay['numbers'].get('grid.image_alpha')})")
    img2, lay2 = app.shot("--tab", "1", "--width", "2560", "--height", "1440", "--attention-image", "off")
    x, y, w, h = [int(round(v)) for v in R["grid.0.0"]]
    a, b = img[y + 3:y + h - 3, x + 3:x + w - 3], img2[y + 3:y + h - 3, x + 3:x + w - 3]
    d = np.abs(a - b).mean(axis=2)
    expect(lay2["numbers"].get("grid.image_alpha", 1) == 0 and d.mean() > 5 and d.std() > 3,
           f"...drawn: the map differs from the map alone by {d.mean():.1f} on average, unevenly (std {d.std():.1f}): the boot")
    _, lay = app.shot("--tab", "1", "--width", "1280", "--height", "800", "--attention-scale", "per-map")
    caps = [t["text"] for t in lay["texts"] if t["group"] == "attn.ranges"]
    expect(len(caps) >= 30 and all(c.startswith("0..") for c in caps),
           f"1280x800, each map its own scale: said under every map ({caps[:3]}...)")


if __name__ == "__main__":
    sys.exit(run_checks([check_loading, check_lens_orientation, check_attention_grid], "all issue-36a checks passed"))
