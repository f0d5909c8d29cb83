#!/usr/bin/python3
"""Issue 22: `vitscope-cli trace --out F.npz` writes the trace stage by stage (each block's
stages recomputed from the kept residual stream as the writer reaches them) and must write
exactly what the whole trace recorded in memory writes (--record-all): the same entries in the
same order, the same dtypes, shapes and bits, on a toy model, a family preset with registers
and layer scale, and a run with dropped patches and an ablated head; with --grads the gradients
too (checkpointed the same way: each block's recomputed from the kept gradient of the stream leaving
it), on the default model, a ViT-Ti/16 with mean pooling at another size and a subset of a toy
model's stages. --stages writes a subset of the same arrays; a pattern that matches nothing exits 2 naming the flag and leaves no file."""
import glob
import os
import subprocess
import sys

import numpy as np

import harness  # tests/harness.py: the scripts' command line

FAIL = []


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAIL.append(what)


def same_npz(a, b):
    with np.load(a) as za, np.load(b) as zb:
        if za.files != zb.files:
            return False, f"entries differ: {za.files[:5]}... vs {zb.files[:5]}..."
        for k in za.files:
            x, y = za[k], zb[k]
            if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
                return False, f"{k} differs"
        return True, f"{len(za.files)} entries"


def main():
    a = harness.script_args("cli", "workdir", "assets")
    w = lambda n: os.path.join(a.workdir, n)
    sample = sorted(glob.glob(os.path.join(a.assets, "samples", "*.png")))[0]

    def cli(*args):
        return subprocess.run([a.cli, *args], capture_output=True, text=True, timeout=300)

    cases = [
        ("toy", ["--model", "toy-rgb8", "--seed", "3"]),
        ("default", []),
        ("dinov2 registers", ["--model", "dinov2-s14-reg", "--image-size", "112", "--seed", "5"]),
        ("dropped patches, ablated head", ["--model", "vit-ti16", "--drop-patches", "0,7,100",
                                           "--ablate-head", "3.1", "--seed", "2"]),
        # gradients, streamed: the backward pass keeps the gradient of the residual stream between
        # blocks and recomputes each block's gradients as the writer reaches them
        ("grads-default", ["--grads"]),
        ("grads-ti16 mean pooling, another size, class 7", ["--model", "vit-ti16", "--seed", "4", "--pooling", "mean",
                                                            "--image-size", "96,128", "--unbiased", "--grads",
                                                            "--class", "7"]),
        ("grads-subset", ["--model", "toy-rgb8", "--seed", "1", "--grads", "--stages", "blocks.0.attn.*,embed,logits"]),
    ]
    for name, flags in cases:
        f1, f2 = w(name.split()[0] + "-stream.npz"), w(name.split()[0] + "-all.npz")
        r1 = cli("trace", "--image", sample, "--out", f1, *flags)
        r2 = cli("trace", "--image", sample, "--out", f2, "--record-all", *flags)
        expect(r1.returncode == 0 and r2.returncode == 0, f"{name}: both exports exit 0 ({r1.stderr.strip()} {r2.stderr.strip()})")
        if r1.returncode or r2.returncode:
            continue
        expect("computed block by block" in r1.stdout, f"{name}: the default export says it streamed")
        ok, why = same_npz(f1, f2)
        expect(ok, f"{name}: the streamed .npz equals the recorded one array for array, bit for bit ({why})")
        if "--grads" in flags:
            with np.load(f1) as z:
                grads = [k for k in z.files if k.endswith(".grad")]
                stages = [k for k in z.files if not k.endswith(".grad") and k != "__options__"]
            expect(len(grads) > len(stages) // 2 and grads[0][:-5] == stages[0] and "gradients: d logit" in r1.stdout,
                   f"{name}: the gradients are written, after the stages ({len(grads)} of {len(stages)} stages)")

    # a subset: the same arrays as the full export's entries of those names
    full = w("dropped-stream.npz")
    sub = w("subset.npz")
    r = cli("trace", "--image", sample, "--out", sub, "--model", "vit-ti16", "--drop-patches", "0,7,100",
            "--ablate-head", "3.1", "--seed", "2", "--stages", "blocks.*.attn.pattern, blocks.1.mlp.*,logits")
    expect(r.returncode == 0, f"--stages exits 0 ({r.stderr.strip()})")
    if r.returncode == 0 and os.path.exists(full):
        with np.load(sub) as zs, np.load(full) as zf:
            want = [k for k in zf.files if (k.startswith("blocks.") and k.endswith(".attn.pattern"))
                    or k.startswith("blocks.1.mlp.") or k == "logits"] + ["__options__"]
            expect(zs.files == want, f"--stages writes exactly the matching stages in table order ({len(zs.files)} entries)")
            expect(all(zs[k].tobytes() == zf[k].tobytes() for k in zs.files), "...with the full export's bits")

    # a pass the backward pass cannot follow (an intervention): both ways refuse --grads, naming why, and write nothing
    for extra in ([], ["--record-all"]):
        bad = w("reg.npz")
        r = cli("trace", "--image", sample, "--out", bad, "--model", "dinov3-s16", "--image-size", "64", "--grads",
                "--drop-patches", "0,1", *extra)
        expect(r.returncode == 2 and "interventions" in r.stderr and not os.path.exists(bad),
               f"--grads {' '.join(extra)} with dropped patches exits 2 naming why ({r.returncode}: {r.stderr.strip()})")

    bad = w("bad.npz")
    r = cli("trace", "--image", sample, "--out", bad, "--stages", "blocks.*.attn.patern")
    expect(r.returncode == 2, f"a pattern matching nothing exits 2 (got {r.returncode})")
    expect("--stages" in r.stderr and "blocks.*.attn.patern" in r.stderr, f"...naming the flag and the pattern ({r.stderr.strip()})")
    expect(not os.path.exists(bad), "...and writes no file")
    left = [f for f in os.listdir(a.workdir) if ".tmp." in f]
    expect(not left, f"no temporary files left behind ({left})")

    print(f"{len(FAIL)} failure(s)")
    sys.exit(1 if FAIL else 0)


if __name__ == "__main__":
    main()
