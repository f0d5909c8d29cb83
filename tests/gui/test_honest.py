#!/usr/bin/python3
"""Issue 19, no guessed numbers: the real app under Xvfb, checked by the --layout it reports and
its pixels; expected values come from outside the app (PyTorch, numpy, the class list file read
here, the stage list `vitscope-cli info` prints).

- heads: a torchvision checkpoint that does not say its head count opens a question in the window
  (not a run with a guessed count); answering 4 by a click gives PyTorch's numbers; Cancel keeps the
  model that was loaded; the toolbar shows the heads in force.
- class names: a 1000-class head is named with ImageNet-1k's names by default.
- top-k: with tied probabilities the window lists the classes in the CLI's order (largest first,
  ties by class index), both as numpy orders them.
- out-of-range flags: --layer, --head, --patch, --query, --tour (the lessons) and --cell outside the loaded model
  exit 2 with a message naming the flag; the last value in range is accepted.
- the bundled photographs open on an RGB model."""
import math
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "parity"))
from test_truth import App, run_checks, crop, expect, FAIL  # noqa: E402,F401

ASSETS = os.path.join(os.path.dirname(__file__), "..", "..", "assets")


def imagenet_names():
    with open(os.path.join(ASSETS, "classes", "imagenet1k.txt"), encoding="utf-8") as f:
        return [line.rstrip("\r\n ") for line in f if line.strip()]


def centre(rect):
    x, y, w, h = rect
    return f"{x + w / 2:.0f},{y + h / 2:.0f}"


def small_tv_checkpoint(app):
    """torchvision names, width 64, 4 heads, nothing saying so; PyTorch's trace of the sample."""
    import torch
    import test_pth
    path = os.path.join(app.dir, "small_tv.pt")
    m = test_pth.small_tv(1, S=28, P=4, K=10)
    torch.save(m.state_dict(), path)
    return path, m


def check_heads_prompt(app):
    import torch
    import test_parity
    path, m = small_tv_checkpoint(app)
    rc, err, img, lay = app.run("--model", path)
    expect(rc == 1 and "small_tv.pt" in err and "--heads N" in err and "(1, 2, 4, 8, 16, 32 or 64)" in err,
           f"headless: exit 1, stderr names the file, --heads N and the possible counts ({rc}, {err.strip()[:100]})")
    rq = lay["heads_request"] if lay else None
    expect(rq is not None and rq["choices"] == [1, 2, 4, 8, 16, 32, 64] and rq["width"] == 64,
           f"the window asks: heads 1, 2, 4, 8, 16, 32 or 64 for width 64 ({rq})")
    expect(lay is not None and lay["model"] == "default" and lay["heads"] == 4 and lay["heads_from"] != "",
           "...while the model already loaded stays, with its own heads (no run with a guessed count)")
    R = lay["rects"] if lay else {}
    ok = "heads.prompt" in R and all(f"heads.choice.{n}" in R for n in rq["choices"]) if rq else False
    expect(ok and "small_tv.pt" in lay["strings"].get("heads.prompt", ""), "the question is drawn, with a button per count")
    if ok:
        # the modal is opaque: its background colour fills the area under its text
        x, y, w, h = R["heads.prompt"]
        band = crop(img, (x + w - 60, y + h - 12, 50, 6))
        expect(band.size and np.abs(band - [36, 38, 46]).max() < 3, "...on an opaque panel")
        # answer 4 with a click: the file is loaded with 4 heads and the window computes PyTorch's numbers
        exp = os.path.join(app.dir, "heads_exp")
        os.makedirs(exp, exist_ok=True)
        rc, err, _, lay2 = app.run("--model", path, "--hover", centre(R["heads.choice.4"]), "--click",
                                   "--export-npz", "--export-dir", exp)
        expect(lay2 is not None and lay2["heads_request"] is None and lay2["model"] == path and lay2["heads"] == 4
               and lay2["heads_from"] == "--heads" and lay2["strings"].get("toolbar.heads") == "4",
               f"clicking 4: loaded with 4 heads, the toolbar says 4 ({lay2 and (lay2['model'], lay2['heads'])})")
        npz = os.path.join(exp, "vitscope-trace.npz")
        expect(os.path.exists(npz), "...and its trace exported")
        if os.path.exists(npz):
            with np.load(npz) as z:
                x, ours, probs = z["input"], z["ln_final.out"], z["probs"]
            with torch.no_grad():  # PyTorch on the input the window fed its model
                ref = test_parity.tv_trace(m, torch.from_numpy(x)[None], 4)
            d = float(np.abs(ours - ref["ln_final.out"].numpy()).max())
            dp = float(np.abs(probs - ref["probs"].numpy()).max())
            expect(d < 1e-4 and dp < 1e-5, f"...equal to PyTorch's (ln_final.out within {d:.1e}, probs {dp:.1e})")
        rc, err, _, lay3 = app.run("--model", path, "--hover", centre(R["heads.cancel"]), "--click")
        expect(lay3 is not None and lay3["heads_request"] is None and lay3["model"] == "default",
               "Cancel closes the question and keeps the model already loaded")
    _, lay4 = app.shot("--model", path, "--heads", "4")
    expect(lay4["heads_request"] is None and lay4["heads"] == 4 and lay4["heads_from"] == "--heads",
           "--heads 4: no question, 4 heads")
    _, lay5 = app.shot("--model", "vit-ti16", "--no-grads")
    expect(lay5["strings"].get("toolbar.heads") == "3", "the toolbar shows a preset's heads (vit-ti16: 3)")


def tie_model(app):
    """A 1000-class ViT whose head weights are zero: logits = bias, six classes tie on top."""
    import torch
    import vitref
    from test_grads import random_canon
    c = random_canon(1, 28, 4, 32, 1, 1000, 7)
    c["head.weight"] = torch.zeros(1000, 32)
    b = torch.zeros(1000)
    top = [999, 640, 500, 20, 7, 3]
    b[top] = 2.0
    b[[11, 12]] = 1.0
    c["head.bias"] = b
    path = os.path.join(app.dir, "ties1000.safetensors")
    vitref.write_safetensors(path, c, {"num_heads": 2})
    return path, b.numpy()


def check_topk_ties(app):
    path, bias = tie_model(app)
    names = imagenet_names()
    expect(len(names) == 1000, "assets/classes/imagenet1k.txt holds 1000 names")
    p = np.exp(bias - bias.max())
    p /= p.sum()
    order = list(np.lexsort((np.arange(1000), -p))[:5])  # numpy: largest first, ties by index
    expect(order == [3, 7, 20, 500, 640], f"numpy's order of the ties: {order}")
    out = os.path.join(app.dir, "ties.npz")
    r = subprocess.run([app.cli, "trace", "--model", path, "--image", app.sample, "--out", out],
                       capture_output=True, text=True)
    cli_rows = re.findall(r"^\s+\d+\. class (\d+) (.*) \(p=", r.stdout, re.M)
    cli_order = [int(i) for i, _ in cli_rows]
    expect(r.returncode == 0 and cli_order == order, f"vitscope-cli trace lists the top 5 in that order ({cli_order})")
    expect([n for _, n in cli_rows] == [names[i] for i in order], "...with ImageNet-1k's names by default")
    m = re.search(r"^prediction: class (\d+)", r.stdout, re.M)
    expect(m is not None and int(m.group(1)) == order[0], "...and its prediction line is the first of them")
    _, lay = app.shot("--model", path)
    got = [lay["strings"].get(f"prediction.{k}", "") for k in range(5)]
    want = [f"{i} {names[i]}" for i in order]
    expect(got == want, f"the window's top 5 are the same classes in the same order ({got})")
    expect(lay["labels_from"].startswith("ImageNet-1k"), f"...named from ImageNet-1k ({lay['labels_from']})")


def check_class_names(app):
    names = imagenet_names()
    _, lay = app.shot("--model", "vit-ti16", "--no-grads")
    top = lay["strings"].get("prediction", "")
    expect(top in names, f"a 1000-class preset's top prediction has an ImageNet-1k name ('{top}'), not 'class N'")
    r = subprocess.run([app.cli, "info", "--model", "vit-ti16"], capture_output=True, text=True)
    expect(f"class names: {names[0]}, ... (from ImageNet-1k" in r.stdout, "vitscope-cli info says where the names come from")
    r = subprocess.run([app.cli, "info"], capture_output=True, text=True)
    expect("class names: T-shirt/top, ..." in r.stdout, "the default model keeps its own names (from its file)")


def tour_steps(app):
    """The tour's number of lessons, as the window reports it (issue 38: the lessons of the bundled file)."""
    _, lay = app.shot("--tour", "0")
    return int(lay["numbers"]["tour.steps"])


def check_out_of_range(app):
    # the default model: 6 blocks, 4 heads, 7 x 7 = 49 patches, 50 tokens (the README's figures)
    steps = tour_steps(app)
    with open(os.path.join(ASSETS, "lessons", "scenes.txt")) as f:
        in_file = sum(1 for line in f if line.strip() == "[lesson]")
    expect(steps == in_file, f"the tour has {steps} lessons on the default model (every one of the {in_file} in assets/lessons/scenes.txt)")
    cases = [(["--layer", "6"], "--layer 6", ["--layer", "5"]),
             (["--head", "4"], "--head 4", ["--head", "3"]),
             (["--head", "7"], "--head 7", None),
             (["--patch", "49"], "--patch 49", ["--patch", "48"]),
             (["--query", "50"], "--query 50", ["--query", "49"]),
             (["--query", "999"], "--query 999", None),
             (["--tour", str(steps)], f"--tour {steps}", ["--tour", str(steps - 1)]),
             (["--tour", "99"], "--tour 99", None),
             (["--stage", "blocks.0.attn.scores", "--cell", "50,0"], "--cell 50,0",
              ["--stage", "blocks.0.attn.scores", "--cell", "49,49"]),
             (["--stage", "blocks.0.attn.scores", "--cell", "0,50"], "--cell 0,50", None),
             (["--stage", "logits", "--cell", "0,10"], "--cell 0,10", ["--stage", "logits", "--cell", "0,9"]),
             (["--cell", "28,0"], "--cell 28,0", ["--cell", "27,27"])]
    for bad, flag, good in cases:
        rc, err, _, _ = app.run(*bad)
        expect(rc == 2 and flag in err and "out of range" in err, f"{' '.join(bad)}: exit 2 naming {flag} ({rc}, {err.strip()[:110]})")
        if good:
            rc, err, _, _ = app.run(*good)
            expect(rc == 0, f"{' '.join(good)}: accepted (exit {rc})")
    # flags out of their domain: refused before a window opens, naming the flag (a negative --width aborted
    # inside GLFW, NaN passed the range checks, a negative --train-limit trained on everything for minutes)
    for bad in (["--width", "-5"], ["--width", "0"], ["--height", "10"], ["--opacity", "nan"], ["--ui-scale", "nan"],
                ["--hover", "1,2,3"], ["--hover", "nan,nan"], ["--heads", "0"], ["--train-epochs", "-1"],
                ["--train-epochs", "1", "--train-limit", "-5"], ["--bench-frames", "-1"], ["--query", "-1"]):
        rc, err, _, _ = app.run(*bad)
        flag = bad[-2]
        expect(rc == 2 and flag in err and len(err) < 400, f"{' '.join(bad)}: exit 2 naming {flag} ({rc}, {err.strip()[:110]})")
    # --heads is for files that do not say: against the embedded model's own 4 heads it is refused, naming
    # the flag and where the model states its count (it used to be ignored in the window, taken by the CLI)
    rc, err, _, _ = app.run("--heads", "2")
    expect(rc != 0 and "--heads 2 contradicts" in err and "states 4 heads" in err,
           f"--heads 2 on the default model (4 heads): refused ({rc}, {err.strip()[:120]})")
    rc, err, _, _ = app.run("--heads", "4")
    expect(rc == 0, f"--heads 4 on the default model: accepted (exit {rc})")
    r = subprocess.run([app.cli, "info", "--heads", "2"], capture_output=True, text=True, timeout=60)
    expect(r.returncode == 2 and "--heads 2 contradicts" in r.stderr, f"vitscope-cli info --heads 2: exit 2 ({r.stderr.strip()[:100]})")
    # an empty gradient-weighted thumbnail says why (the reason the command line gives), or offers to compute
    r = subprocess.run([app.cli, "trace", "--grads", "--ablate-head", "0.1", "--image", app.sample, "--out",
                        os.path.join(app.dir, "ablated.npz")], capture_output=True, text=True, timeout=120)
    reason = r.stderr.strip().split("--grads: ")[-1]
    _, lay = app.shot("--ablate-head", "0.1")
    why = lay["strings"].get("thumbs.2.why", "")
    expect(r.returncode == 2 and "interventions" in reason and why == "no gradients: " + reason,
           f"a head knocked out: the grad-weighted thumbnail's reason is the backward's own ('{why[:90]}')")
    _, lay = app.shot("--model", "vit-ti16", "--no-grads")
    why = lay["strings"].get("thumbs.2.why", "")
    expect("--no-grads" in why, f"vit-ti16 --no-grads: the thumbnail says the gradients are off ('{why[:90]}')")
    # against the model loaded, not the default one: vit-ti16 has 3 heads and 196 patches
    rc, err, _, _ = app.run("--model", "vit-ti16", "--no-grads", "--head", "3")
    expect(rc == 2 and "--head 3" in err and "3 heads" in err, f"--head 3 on vit-ti16 (3 heads): exit 2 ({err.strip()[:90]})")
    rc, err, _, _ = app.run("--model", "vit-ti16", "--no-grads", "--patch", "195", "--head", "2")
    expect(rc == 0, f"--patch 195 --head 2 on vit-ti16: accepted (exit {rc})")


def check_photos(app):
    """The bundled photographs: real colour pictures, each with its source and licence recorded."""
    d = os.path.join(ASSETS, "samples", "photos")
    photos = sorted(f for f in os.listdir(d) if f.endswith((".png", ".jpg"))) if os.path.isdir(d) else []
    expect(len(photos) >= 3, f"at least 3 photographs bundled ({photos})")
    sources = open(os.path.join(d, "SOURCES.txt"), encoding="utf-8").read() if os.path.isdir(d) else ""
    _, lay = app.shot()
    menu = lay["strings"].get("toolbar.samples", "").split()
    expect(all(f in menu for f in photos) and "9_ankle_boot_test0.png" in menu,
           f"the toolbar's image menu lists them beside the Fashion-MNIST samples ({len(menu)} entries)")
    from PIL import Image
    for f in photos:
        im = np.asarray(Image.open(os.path.join(d, f)).convert("RGB")).astype(float)
        colour = float(np.abs(im[..., 0] - im[..., 1]).mean() + np.abs(im[..., 1] - im[..., 2]).mean())
        expect(max(im.shape[:2]) <= 640 and colour > 5, f"{f}: {im.shape[1]}x{im.shape[0]}, in colour ({colour:.1f})")
        block = next((b for b in sources.split("\n\n") if b.startswith(f + "\n")), "")  # the paragraph headed by its name
        expect(re.search(r"(?i)licen[cs]e: (public domain|CC0)", block) is not None,
               f"{f}: SOURCES.txt records its source and a public-domain or CC0 licence")
        _, lay = app.shot("--model", "vit-ti16", "--no-grads", "--image", os.path.join(d, f), image=False)
        expect(lay["image"].endswith(f) and not lay["errors"], f"{f} opens on vit-ti16")


if __name__ == "__main__":
    sys.exit(run_checks([check_heads_prompt, check_topk_ties, check_class_names, check_out_of_range, check_photos],
                        "all issue-19 honesty checks passed"))
