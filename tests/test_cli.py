#!/usr/bin/python3
"""vitscope-cli as a script sees it: exit codes (0 ok, 1 unusable file/model,
2 usage), messages naming the file, .npz files numpy.load opens with the
trace's names in order, and no partial output on failure."""
import glob
import json
import os
import struct
import re
import subprocess
import sys

import numpy as np

import harness  # tests/harness.py: the scripts' command line

FAIL = []


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAIL.append(what)


def main():
    a = harness.script_args("cli", "workdir", "assets")
    w = lambda n: os.path.join(a.workdir, n)

    def cli(*args):
        return subprocess.run([a.cli, *args], capture_output=True, text=True, timeout=120)

    sample = sorted(glob.glob(os.path.join(a.assets, "samples", "*.png")))[0]
    out = w("t.npz")
    r = cli("trace", "--image", sample, "--out", out)
    expect(r.returncode == 0, f"trace default model on {os.path.basename(sample)} exits 0 ({r.stderr.strip()})")
    with np.load(out) as z:
        names = list(z.files)
        expect(names[:6] == ["input", "patches", "patch_embed", "tokens", "pos_embed", "embed"], "npz opens, first stages in order")
        expect(names[-3:] == ["logits", "probs", "__options__"], "npz ends with logits, probs, then __options__")
        expect(json.loads(str(z["__options__"])) == {"elementwise_affine": True, "unbiased": False, "pooling": "cls",
                                                     "bug_scale_after_softmax": False, "bug_reshape_patches": False,
                                                     "interventions": {"heads": [], "sublayers": [], "dropped": [], "patch": None}},
               "__options__ is the options in force as JSON text")
        expect(z["input"].shape == (1, 28, 28) and z["input"].dtype == np.float32, "input is (1, 28, 28) float32")
        expect(abs(float(z["probs"].sum()) - 1) < 1e-5, "probs sum to 1")
        p = z["patches"]
        x = z["input"][0]
        expect(np.array_equal(p[8], x[4:8, 4:8].reshape(-1)), "patch 8 is the 4x4 block at row 1, column 1")

    r = cli("trace", "--image", sample, "--out", w("a.npz"), "--no-affine", "--unbiased")
    with np.load(out) as z0, np.load(w("a.npz")) as z1:
        expect(not np.allclose(z0["blocks.0.ln1.out"], z1["blocks.0.ln1.out"]), "--no-affine --unbiased change ln1.out")
        expect(np.array_equal(z0["embed"], z1["embed"]), "...and leave embed alone")

    r = cli("trace", "--bogus")
    expect(r.returncode == 2, f"unknown flag exits 2 (got {r.returncode})")
    r = cli("trace", "--image", sample)
    expect(r.returncode == 2 and "--out" in r.stderr, "missing --out exits 2 and says so")
    r = cli("frobnicate")
    expect(r.returncode == 2, "unknown subcommand exits 2")
    r = cli("trace", "--model", "fmnist", "--out", w("x.npz"))
    expect(r.returncode == 2 and "--image" in r.stderr, "trace without an image exits 2")

    r = cli("trace", "--model", w("nope.safetensors"), "--image", sample, "--out", w("x.npz"))
    expect(r.returncode == 1 and "nope.safetensors" in r.stderr, "missing checkpoint exits 1 naming it")
    # issue 36: the missing file is said first, before the list of presets
    first = r.stderr.find("no such file")
    expect(0 <= first < r.stderr.find("vit-b16") and r.stderr.find("nope.safetensors") < first,
           f"...and says the file is missing before it lists the presets: {r.stderr[:160]!r}")
    # issue 36 item 14: heads are written "L4 H2", never "4.2" (a decimal)
    r = cli("analyze", "--image", sample, "--head-importance", "--out", w("hi.npz"))
    line = next((l for l in r.stdout.splitlines() if l.startswith("head_importance")), "")
    expect(r.returncode == 0 and re.search(r"largest head L\d+ H\d+ ", line) is not None,
           f"analyze names the largest head as 'L<layer> H<head>': {line!r}")
    bad = w("corrupt.png")
    with open(bad, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40)
    r = cli("trace", "--image", bad, "--out", w("x.npz"))
    expect(r.returncode == 1 and "corrupt.png" in r.stderr, "corrupt image exits 1 naming it")
    hostile = w("hostile.safetensors")
    with open(hostile, "wb") as f:
        f.write(struct.pack("<Q", 10**12) + b"{}")
    r = cli("info", "--model", hostile)
    expect(r.returncode == 1 and "hostile.safetensors" in r.stderr, "hostile header length exits 1 naming the file")
    r = cli("trace", "--model", "fmnist", "--heads", "5", "--image", sample, "--out", w("x.npz"))
    expect(r.returncode == 2 and "--heads 5 does not divide the width 64" in r.stderr,
           "--heads that does not divide the width is bad usage: exit 2 naming the flag")
    r = cli("trace", "--model", "dinov3-s16", "--image-size", "64", "--grads", "--ablate-head", "0.1", "--image", sample,
            "--out", w("x.npz"))
    expect(r.returncode == 2 and "--grads: the backward pass does not run with interventions (head L0 H1 zeroed)"
           in r.stderr and "forward pass failed" not in r.stderr,
           f"--grads with an intervention: exit 2 naming the flag and the intervention ({r.stderr.strip()[:120]})")
    # every family has its backward: DINOv3's RoPE too (the rotated q and k carry a gradient)
    r = cli("trace", "--model", "dinov3-s16", "--image-size", "64", "--grads", "--image", sample, "--out", w("d3.npz"))
    with np.load(w("d3.npz")) if r.returncode == 0 else open(os.devnull) as z:
        names = z.files if r.returncode == 0 else []
    expect(r.returncode == 0 and "blocks.0.attn.q_rot.grad" in names and "blocks.0.attn.q.grad" in names,
           f"--grads on DINOv3 (RoPE): exit 0, q_rot and q with their gradients ({r.returncode}: {r.stderr.strip()[:100]})")
    np.save(w("wrong.npy"), np.zeros((3, 28, 28), np.float32))
    r = cli("trace", "--input", w("wrong.npy"), "--out", w("x.npz"))
    expect(r.returncode == 1 and "(1, 28, 28)" in r.stderr, "input of the wrong shape exits 1 with both shapes")
    expect(not os.path.exists(w("x.npz")), "no output left behind by failed runs")
    r = cli("trace", "--image", sample, "--out", "/nonexistent-dir/t.npz")
    expect(r.returncode == 1 and "/nonexistent-dir/t.npz" in r.stderr, "unwritable output exits 1 naming it")
    leftovers = glob.glob(w("*.tmp.*"))
    expect(not leftovers, "no temporary files left")

    # train: Ctrl-C saves a checkpoint and exits 130; --resume continues from it.
    import signal
    import time
    ck = w("ck.safetensors")
    for f in (ck, ck + ".optim"):
        if os.path.exists(f):
            os.remove(f)
    p = subprocess.Popen([a.cli, "train", "--limit", "1280", "--epochs", "50", "--batch", "64", "--depth", "1",
                          "--out", ck], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:  # wait for the first progress line: training has started
        line = p.stderr.readline()
        if not line or "epoch" in line:
            break
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    expect(p.returncode == 130, f"Ctrl-C during training exits 130 (got {p.returncode})")
    expect(os.path.exists(ck) and os.path.exists(ck + ".optim") and "--resume" in err,
           "...after saving the model and its optimizer state, saying how to resume")
    r = cli("train", "--resume", ck, "--epochs", "1", "--limit", "1280", "--batch", "64", "--out", ck)
    expect(r.returncode == 0 and "resuming" in r.stderr and "confusion matrix" in r.stdout,
           f"--resume continues and finishes ({r.stderr.strip()[-200:]})")
    r = cli("eval", "--model", ck, "--limit", "500")
    rows = [l for l in r.stdout.splitlines() if l[:2].strip().isdigit() and len(l.split()) >= 11]
    total = sum(sum(int(v) for v in l.split()[-10:]) for l in rows)
    expect(r.returncode == 0 and len(rows) == 10 and total == 500, f"eval prints a 10x10 confusion matrix over 500 images ({total})")
    r = cli("train", "--data", w("nowhere"), "--out", w("x.safetensors"))
    expect(r.returncode == 1 and "nowhere" in r.stderr, "train without the dataset exits 1 naming the directory")
    # IDX files of 32x32 images: each is resized to the model's 28x28 by its preprocessing, and
    # train and eval say so (they said nothing); a label of 10 is refused naming the file.
    d32 = w("idx32")
    os.makedirs(d32, exist_ok=True)
    for part in ("train", "t10k"):
        with open(os.path.join(d32, f"{part}-images-idx3-ubyte"), "wb") as f:
            f.write(struct.pack(">IIII", 0x803, 16, 32, 32) + bytes(16 * 32 * 32))
        with open(os.path.join(d32, f"{part}-labels-idx1-ubyte"), "wb") as f:
            f.write(struct.pack(">II", 0x801, 16) + bytes(range(10)) + bytes(6))
    note = "holds 32x32 images and the model takes 28x28: each is resized"
    r = cli("train", "--data", d32, "--epochs", "1", "--batch", "8", "--depth", "1", "--out", w("d32.safetensors"))
    expect(r.returncode == 0 and d32 in r.stderr and note in r.stderr, f"train on 32x32 IDX images says they are resized ({r.stderr.strip()[-300:]})")
    r = cli("eval", "--model", "fmnist", "--data", d32)
    expect(r.returncode == 0 and d32 in r.stderr and note in r.stderr, f"eval on 32x32 IDX images says so ({r.stderr.strip()[-300:]})")
    r = cli("eval", "--model", "fmnist", "--limit", "100")
    expect(r.returncode == 0 and "resized" not in r.stderr, "eval on Fashion-MNIST itself has no such note")
    # An --out train cannot write is refused before the data loads and an epoch is spent (it
    # failed after the first epoch): a directory, a directory that does not exist.
    for bad_out, words in ((d32, "is a directory"), (w("no_such_dir/x.safetensors"), "does not exist")):
        r = cli("train", "--data", d32, "--epochs", "1", "--batch", "8", "--depth", "1", "--out", bad_out)
        expect(r.returncode == 2 and "--out " + bad_out in r.stderr and words in r.stderr and "epoch" not in r.stderr
               and "training" not in r.stdout, f"train --out {os.path.basename(bad_out)}: exit 2 before training ({r.stderr.strip()[-200:]})")
    # --init-pos says how --init-from's position table fills the new grid: without --init-from it is refused before
    # the data loads, naming the flag; a value other than keep or resize is refused by the parser.
    r = cli("train", "--data", d32, "--epochs", "1", "--batch", "8", "--depth", "1", "--init-pos", "resize",
            "--out", w("init_pos.safetensors"))
    expect(r.returncode == 2 and "--init-pos resize: only with --init-from" in r.stderr and "training" not in r.stdout
           and not os.path.exists(w("init_pos.safetensors")), f"train --init-pos without --init-from: exit 2 naming the flag ({r.stderr.strip()[-200:]})")
    r = cli("train", "--data", d32, "--epochs", "1", "--batch", "8", "--depth", "1", "--init-from", w("d32.safetensors"),
            "--init-pos", "stretch", "--out", w("init_pos.safetensors"))
    expect(r.returncode == 2 and "--init-pos" in r.stderr and "stretch" in r.stderr and "training" not in r.stdout,
           f"train --init-pos stretch: exit 2 naming the flag and the value ({r.stderr.strip()[-200:]})")
    with open(os.path.join(d32, "t10k-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, 16) + bytes(range(10)) + bytes([10]) + bytes(5))
    r = cli("eval", "--model", "fmnist", "--data", d32)
    expect(r.returncode == 1 and os.path.join(d32, "t10k-labels-idx1-ubyte") + ": label 10 of image 10" in r.stderr,
           f"eval with a label of 10 exits 1 naming the file ({r.stderr.strip()[-200:]})")

    # --labels: class names from a file, one per line; a count that does not fit is an error naming the file.
    good, bad = w("labels.txt"), w("labels_bad.txt")
    open(good, "w").write("\n".join(f"thing-{i}" for i in range(10)) + "\n")
    open(bad, "w").write("only\nthree\nnames\n")
    r = cli("trace", "--image", sample, "--labels", good, "--out", w("l.npz"))
    expect(r.returncode == 0 and "thing-" in r.stdout, "--labels names the predicted class")
    r = cli("trace", "--image", sample, "--labels", bad, "--out", w("l.npz"))
    expect(r.returncode == 1 and "labels_bad.txt" in r.stderr and "3 class names" in r.stderr,
           "--labels with the wrong count exits 1 naming the file")

    r = cli("info", "--model", "fmnist", "--pooling", "mean")
    lines = [l.split()[0] for l in r.stdout.splitlines() if l.startswith("  ")]
    expect(r.returncode == 0 and lines.index("pooled") < lines.index("ln_final.mean"),
           "info --pooling mean lists pooled before ln_final, as the trace records it")

    r = cli("info", "--model", "vit-b16")
    expect(r.returncode == 0 and "parameters: 86567656" in r.stdout, "info vit-b16 prints 86,567,656 parameters")
    print(f"{'FAILED: ' + '; '.join(FAIL) if FAIL else 'all CLI checks passed'}")
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
