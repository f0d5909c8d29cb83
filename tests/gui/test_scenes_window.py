#!/usr/bin/python3
"""Issue 35 in the window, checked by its pixels and its --layout dump under Xvfb:

- launched with no --model (and $VITSCOPE_MODEL unset) the window opens on the embedded scenes model and a
  bundled test scene; with VITSCOPE_MODEL=default on the Fashion-MNIST model;
- the object's box from labels.json is drawn green over the model input, where labels.json puts it (the
  pixels along its edges are green in the screenshot), and X hides it;
- the line under the image says whether the overlay's peak patch lies on the object, and says it right:
  the peak and the box computed here from the overlay values the app reports and labels.json;
- the What-it-uses tab's buttons drop the object's patches (the prediction moves) and the distractors'.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(__file__))
from layout import load_layout  # noqa: E402

FAIL = []


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAIL.append(what)


def shot(app, workdir, name, *args, env=None):
    png, lay = os.path.join(workdir, name + ".png"), os.path.join(workdir, name + ".json")
    e = dict(os.environ)
    e.pop("VITSCOPE_MODEL", None)
    e.update(env or {})
    r = subprocess.run([app, "--no-settings", *args, "--screenshot", png, "--layout", lay], capture_output=True,
                       text=True, timeout=300, env=e)
    if r.returncode != 0:
        raise SystemExit(f"vitscope {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return np.asarray(Image.open(png).convert("RGB")).astype(int), load_layout(lay)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--scenes", required=True, help="assets/samples/scenes")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    labels = {e["file"]: e for e in json.load(open(os.path.join(a.scenes, "labels.json")))}

    img, lay = shot(a.app, a.workdir, "bare", "--width", "1280", "--height", "800")
    expect(lay["model"] == "scenes", f"a bare launch opens the scenes model (model: {lay['model']})")
    shown = lay["strings"].get("toolbar.image", "")
    expect(shown in labels, f"... on a bundled scene ({shown})")
    _, lay_d = shot(a.app, a.workdir, "env", env={"VITSCOPE_MODEL": "default"})
    expect(lay_d["model"] == "default", "VITSCOPE_MODEL=default opens the Fashion-MNIST model")

    # the box: where labels.json says, mapped onto the model input as drawn (64 px scenes, input 64 x 64)
    truth = labels[shown]
    x, y, w, h = lay["rects"]["image"]
    bx, by, bw, bh = lay["rects"]["truth.box"]
    k = w / 64
    want = (x + truth["box"][0] * k, y + truth["box"][1] * k, (truth["box"][2] - truth["box"][0]) * k, (truth["box"][3] - truth["box"][1]) * k)
    expect(max(abs(p - q) for p, q in zip((bx, by, bw, bh), want)) < 1.01,
           f"the box is drawn at labels.json's {truth['box']} scaled to the input ({[round(v) for v in want]} vs {[round(v) for v in (bx, by, bw, bh)]})")
    # its top edge in the pixels: bright green (90, 255, 90)
    row = img[int(round(by)), int(bx) + 2:int(bx + bw) - 2]
    green = np.mean((row[:, 1] > 200) & (row[:, 0] < 150) & (row[:, 2] < 150))
    expect(green > 0.9, f"the box's top edge is green in the screenshot ({green:.2f} of its pixels)")
    img_x, lay_x = shot(a.app, a.workdir, "nobox", "--width", "1280", "--height", "800", "--keys", "x")
    expect("truth.box" not in lay_x["rects"], "X hides the box")
    row_x = img_x[int(round(by)), int(bx) + 2:int(bx + bw) - 2]
    expect(np.mean((row_x[:, 1] > 200) & (row_x[:, 0] < 150) & (row_x[:, 2] < 150)) < 0.5, "... and its green edge is gone")

    # the peak line: recomputed from the overlay values the app drew and labels.json
    vals = [float(v) for v in lay["strings"]["overlay.values"].split(",")]
    peak = int(np.argmax(vals))
    cx, cy = (peak % 8 + 0.5) * 8, (peak // 8 + 0.5) * 8
    on = truth["box"][0] <= cx < truth["box"][2] and truth["box"][1] <= cy < truth["box"][3]
    line = lay["strings"]["truth.peak"]
    expect(f"patch {peak}," in line and (("on the object" in line and "off" not in line) if on else "off the object" in line),
           f"the peak line is right: patch {peak} {'on' if on else 'off'} the object ('{line}')")
    # every bundled scene: the peak line agrees with the values, whatever the overlay
    for name in sorted(labels)[:4]:
        for ov in ("cls", "rollout"):
            _, l2 = shot(a.app, a.workdir, f"{name}_{ov}", "--image", os.path.join(a.scenes, name), "--overlay", ov)
            v = [float(t) for t in l2["strings"]["overlay.values"].split(",")]
            p = int(np.argmax(v))
            b = labels[name]["box"]
            o = b[0] <= (p % 8 + 0.5) * 8 < b[2] and b[1] <= (p // 8 + 0.5) * 8 < b[3]
            expect(l2["numbers"]["truth.peak_on_object"] == (1 if o else 0) and l2["numbers"]["truth.peak_patch"] == p,
                   f"{name}, {ov}: peak patch {p} {'on' if o else 'off'} the object, as the app says")

    # What it uses: the object's patches and the distractors' (counted from labels.json here)
    _, lu = shot(a.app, a.workdir, "uses", "--tab", "13")
    b = truth["box"]
    obj = [n for n in range(64) if (n % 8) * 8 < b[2] and (n % 8) * 8 + 8 > b[0] and (n // 8) * 8 < b[3] and (n // 8) * 8 + 8 > b[1]]
    expect(lu["numbers"]["truth.object_patches"] == len(obj), f"the object's box touches {len(obj)} patches, as the tab says")
    _, ld = shot(a.app, a.workdir, "dropped", "--drop-patches", ",".join(map(str, obj)))
    # (the bundled scene the window opens on is one the model gets right; without the object it cannot)
    expect(ld["strings"]["prediction"] != lay["strings"]["prediction"],
           f"dropping the object's patches changes the prediction: {lay['strings']['prediction']} -> {ld['strings']['prediction']}")
    print("all scenes-window checks passed" if not FAIL else f"FAILED: {len(FAIL)}")
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
