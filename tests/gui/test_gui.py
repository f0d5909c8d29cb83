#!/usr/bin/python3
"""GUI tests: the real app in a real X server (Xvfb) with Mesa's OpenGL.

Each check runs `vitscope --screenshot` and reads the PNG's pixels. Expected
colours come from outside the app: tensor values from `vitscope-cli trace`
(read with numpy) and matplotlib's published viridis colours."""
import argparse
import os
import subprocess
import sys

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from layout import load_layout  # noqa: E402

FAIL = []
# matplotlib's viridis at t = 0, 1/4, 1/2, 3/4, 1 (its _viridis_data entries 0, 64, 128, 192, 255)
VIRIDIS_T = np.array([0.0, 64 / 255, 128 / 255, 192 / 255, 1.0])
VIRIDIS = np.array([[0.267004, 0.004874, 0.329415], [0.229739, 0.322361, 0.545706], [0.127568, 0.566949, 0.550556],
                    [0.369214, 0.788888, 0.382914], [0.993248, 0.906157, 0.143936]]) * 255


def viridis(t):
    return np.array([np.interp(t, VIRIDIS_T, VIRIDIS[:, k]) for k in range(3)])


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAIL.append(what)


class App:
    def __init__(self, app, cli, workdir, sample):
        self.app, self.cli, self.dir, self.sample = app, cli, workdir, sample
        self.n = 0

    def shot(self, *args):
        self.n += 1
        png, lay = os.path.join(self.dir, f"s{self.n}.png"), os.path.join(self.dir, f"s{self.n}.json")
        r = subprocess.run([self.app, "--image", self.sample, *args, "--screenshot", png, "--layout", lay],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise SystemExit(f"vitscope {' '.join(args)} failed ({r.returncode}): {r.stderr}")
        return np.asarray(Image.open(png).convert("RGB")).astype(float), load_layout(lay)

    def trace(self, *args):
        out = os.path.join(self.dir, "t.npz")
        subprocess.run([self.cli, "trace", "--image", self.sample, "--out", out, *args], check=True,
                       capture_output=True)
        with np.load(out) as z:
            return {k: z[k] for k in z.files}


def cell_centre(rect, rows, cols, r, c):
    x, y, w, h = rect
    return int(y + (r + 0.5) * h / rows), int(x + (c + 0.5) * w / cols)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--sample", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    app = App(a.app, a.cli, a.workdir, a.sample)

    # 1. The window is not blank.
    img, lay = app.shot()
    expect(img.std() > 20 and len(np.unique(img.reshape(-1, 3), axis=0)) > 200,
           f"default window is not blank (pixel std {img.std():.1f})")
    expect(lay["stage"] == "input" and not lay["error"] and not lay["shader_error"], "starts on 'input' with no error")
    # The status bar names what the matrix products run on, as `vitscope-cli info` does.
    info = subprocess.run([app.cli, "info"], capture_output=True, text=True).stdout
    gemm = next((l.split(":", 1)[1].strip() for l in info.splitlines() if l.startswith("gemm:")), "")
    status = lay.get("strings", {}).get("status", "")
    expect(gemm.startswith("oneDNN ") and gemm in status,
           f"the status bar says what the matrix products run on, as info does ({gemm!r})")

    # 2. Heatmap pixels are viridis of the tensor's values at known cells.
    name, head = "blocks.1.attn.pattern", 2
    img, lay = app.shot("--stage", name, "--head", str(head))
    t = app.trace()[name][head]
    n = lay["numbers"]
    rows, cols = int(n["stage.rows"]), int(n["stage.cols"])
    expect((rows, cols) == t.shape, f"heatmap shows a {rows}x{cols} slice, the tensor's is {t.shape}")
    full = app.trace()[name]
    # issue 19: probabilities are drawn from 0 (dark) to the largest value, as every attention picture
    vmin, vmax = 0.0, float(full.max())
    expect(abs(n["stage.vmin"] - vmin) < 1e-6 and abs(n["stage.vmax"] - vmax) < 1e-6 and n["stage.mode"] == 0,
           "range is 0..the tensor's max, sequential colormap for a softmax pattern")
    rect = lay["rects"]["stage"]
    rng = np.random.default_rng(0)
    cells = [np.unravel_index(t.argmax(), t.shape), np.unravel_index(t.argmin(), t.shape)]
    cells += [tuple(rng.integers(0, s) for s in t.shape) for _ in range(8)]
    worst = 0.0
    for i, (r, c) in enumerate(cells):
        y, x = cell_centre(rect, rows, cols, r, c)
        want = viridis((t[r, c] - vmin) / (vmax - vmin))
        err = float(np.abs(img[y, x] - want).max())
        worst = max(worst, err)
        tol = 8 if i < 2 and (t[r, c] in (vmin, vmax)) else 25
        if err > tol:
            print(f"     cell ({r},{c}) value {t[r, c]:.5f}: pixel {img[y, x]} vs viridis {want.round()}")
    expect(worst <= 25, f"10 heatmap cells match viridis(value) (worst channel error {worst:.0f}/255)")

    # 3. The cls-attention overlay is brightest where the attention is largest.
    layer = 3
    img, lay = app.shot("--stage", "input", "--overlay", "cls", "--layer", str(layer), "--opacity", "1")
    p = app.trace()[f"blocks.{layer}.attn.pattern"]
    cls = p[:, 0, 1:].mean(0)  # mean over heads of the cls row, patches only
    G = int(round(len(cls) ** 0.5))
    x, y, w, h = lay["rects"]["image"]
    def patch_px(k):
        return img[int(y + (k // G + 0.5) * h / G), int(x + (k % G + 0.5) * w / G)]
    top, low = int(cls.argmax()), int(cls.argmin())
    expect(int(lay["numbers"]["overlay.argmax"]) == top, f"overlay's hottest patch is numpy's argmax ({top})")
    # issue 19: the overlay is in the colours of every attention picture (viridis), its top yellow
    top_rgb = viridis(1.0)
    expect(np.abs(patch_px(top) - top_rgb).max() <= 12, f"patch {top} (largest attention) is drawn viridis's top colour: {patch_px(top)}")
    expect(np.abs(patch_px(low) - top_rgb).max() > 40, f"patch {low} (smallest attention) is not: {patch_px(low)}")
    img0, _ = app.shot("--stage", "input", "--overlay", "none")
    expect(np.abs(img - img0)[int(y):int(y + h), int(x):int(x + w)].mean() > 10, "the overlay changes the image panel")

    # 4. Toggling elementwise_affine changes the LayerNorm output view (a checkpoint
    # with random gamma and beta, so that affine matters whatever the default model is).
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "parity"))
    import vitref
    from test_grads import random_canon
    ck = os.path.join(a.workdir, "ln.safetensors")
    vitref.write_safetensors(ck, random_canon(1, 28, 4, 32, 2, 10, 5), {"num_heads": 2})
    on, lon = app.shot("--model", ck, "--stage", "blocks.0.ln1.out")
    off, loff = app.shot("--model", ck, "--stage", "blocks.0.ln1.out", "--no-affine")
    x, y, w, h = [int(v) for v in lon["rects"]["stage"]]
    diff = np.abs(on[y:y + h, x:x + w] - off[y:y + h, x:x + w]).mean()
    expect(diff > 5, f"--no-affine changes the ln1.out heatmap (mean pixel change {diff:.1f})")
    ref = app.trace("--model", ck, "--no-affine")["blocks.0.ln1.out"]
    m = max(abs(ref.min()), abs(ref.max()))
    expect(abs(loff["numbers"]["stage.vmax"] - m) < 1e-5, "...and its colour range is that of the no-affine tensor")

    # 5. Arrow keys step through the stages; PageDown moves to the next layer.
    _, l1 = app.shot("--keys", "Right,Right,Right")
    expect(l1["stage"] == "tokens", f"three Right presses go input -> tokens (got {l1['stage']})")
    _, l2 = app.shot("--stage", "blocks.0.attn.q", "--keys", "PageDown,Left")
    expect(l2["stage"] == "blocks.1.ln1.out", f"PageDown then Left: blocks.1.ln1.out (got {l2['stage']})")

    # 6. Exports through the same path as the toolbar buttons.
    exp = os.path.join(a.workdir, "exports")
    os.makedirs(exp, exist_ok=True)
    img, le = app.shot("--stage", "blocks.2.attn.scores", "--export-view", "--export-npy", "--export-npz",
                       "--export-dir", exp)
    ref = app.trace()
    with np.load(os.path.join(exp, "vitscope-trace.npz")) as z:
        fwd = [k for k in z.files if not k.endswith(".grad")]
        same = fwd == list(ref) and all(np.array_equal(z[k], ref[k]) for k in ref)
        grads = [k for k in z.files if k.endswith(".grad")]
    expect(same, "exported .npz equals vitscope-cli's trace, name for name")
    expect(len(grads) > 100 and all(k[:-5] in ref for k in grads), f"...plus the gradients as <stage>.grad ({len(grads)})")
    npy = np.load(os.path.join(exp, "blocks.2.attn.scores.npy"))
    expect(np.array_equal(npy, ref["blocks.2.attn.scores"]), "exported .npy is the current stage's tensor")
    view = np.asarray(Image.open(os.path.join(exp, "vitscope-blocks.2.attn.scores.png")).convert("RGB"))
    cx, cy, cw, ch = [int(v) for v in le["rects"]["center"]]
    expect(view.shape[:2] == (ch, cw) and np.abs(view.astype(float) - img[cy:cy + ch, cx:cx + cw]).max() <= 2,
           "exported view PNG is the centre panel as on screen")

    # 7. The Train panel trains in the background and the views follow the live model.
    img, lt = app.shot("--tab", "3", "--train-epochs", "2", "--train-limit", "1024")
    n = lt["numbers"]
    expect(n.get("train.epochs_done") == 2 and n.get("train.steps", 0) >= 16,
           f"Train panel ran 2 epochs ({n.get('train.steps')} steps)")
    expect(n.get("train.last_loss", 9) < n.get("train.first_loss", 0), "its loss curve falls")
    expect(lt["model"] == "training (live)", "the other views follow the live model")
    x, y, w, h = [int(v) for v in lt["rects"]["train.loss"]]
    expect(img[y:y + h, x:x + w].std() > 10, "the loss curve is drawn")

    # 8. A broken shader is reported in the window, not a crash.
    bad = os.path.join(a.workdir, "badshaders")
    os.makedirs(bad, exist_ok=True)
    open(os.path.join(bad, "heatmap.vert"), "w").write("#version 330 core\nvoid main() { gl_Position = vec4(0); }\n")
    open(os.path.join(bad, "heatmap.frag"), "w").write("#version 330 core\nvoid main() { this is not glsl }\n")
    _, lb = app.shot("--shader-dir", bad)
    expect("heatmap.frag" in lb["shader_error"], "a shader compile error is captured for the window")

    # 9. Bad input files fail cleanly in headless mode, naming the file.
    corrupt = os.path.join(a.workdir, "corrupt.png")
    open(corrupt, "wb").write(b"\x89PNG\r\n\x1a\n" + b"\0" * 30)
    r = subprocess.run([a.app, "--image", corrupt, "--screenshot", os.path.join(a.workdir, "x.png")],
                       capture_output=True, text=True, timeout=60)
    expect(r.returncode == 1 and "corrupt.png" in r.stderr, "a corrupt image exits 1 naming it")
    r = subprocess.run([a.app, "--stage", "blocks.99.attn.q", "--screenshot", os.path.join(a.workdir, "x.png")],
                       capture_output=True, text=True, timeout=60)
    expect(r.returncode == 1 and "blocks.99.attn.q" in r.stderr, "an unknown stage exits 1 naming it")

    print("FAILED: " + "; ".join(FAIL) if FAIL else "all GUI checks passed")
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
