#!/usr/bin/python3
"""Issue 37 through the released CLI: exports that never clobber, messages that name the flag or the
file, preprocessing that cannot be followed said on every command.

4, 10. `trace --out` to a symbolic link writes through it (the link stays, its target holds the .npz);
    to a link to /dev/null or to a FIFO being read: written in place, the device and the FIFO stay
    what they were; an existing 0600 output stays 0600; `--out` equal to `--input` or `--image`, and
    `convert x x`, are refused naming both flags and the input is unchanged; a link to nothing is
    refused by name.
9.  `--out ""` names the flag; a 4096 x 4096 `--input` names the file; a config.json with
    layer_norm_eps 1e-300 names config.json and the field.
6.  a model whose preprocessor_config.json asks for do_normalize false, a 2-value image_mean on a
    gray model and size 64 on a 28-pixel model: `trace` and `analyze` say "not followed" on stderr
    and the trace's __options__ records it (preprocess_not_followed).

usage: test_hostile37.py --cli vitscope-cli --workdir DIR --assets DIR"""
import argparse
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import threading

import numpy as np

FAIL = []


def expect(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        if detail:
            print("     " + detail.strip().replace("\n", "\n     "))
        FAIL.append(what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--assets", required=True)
    ap.add_argument("--app", help="the window (vitscope), run under xvfb-run for the window's model notes")
    a = ap.parse_args()
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    w = lambda *n: os.path.join(a.workdir, *n)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")

    def cli(*args, timeout=120):
        return subprocess.run([a.cli, *args], capture_output=True, text=True, timeout=timeout, env=env)

    np.save(w("x.npy"), np.random.default_rng(0).standard_normal((1, 28, 28)).astype(np.float32))
    x_bytes = open(w("x.npy"), "rb").read()
    is_npz = lambda p: open(p, "rb").read(2) == b"PK"

    # ------------------------------------------------------------ 4, 10: where --out points
    open(w("target.npz"), "wb").write(b"old")
    os.symlink("target.npz", w("link.npz"))
    r = cli("trace", "--input", w("x.npy"), "--out", w("link.npz"))
    expect(r.returncode == 0 and os.path.islink(w("link.npz")) and is_npz(w("target.npz")),
           "10. --out a symbolic link: written through it, the link stays a link", r.stderr)
    os.symlink("/dev/null", w("null.npz"))
    r = cli("trace", "--input", w("x.npy"), "--out", w("null.npz"))
    expect(r.returncode == 0 and os.path.islink(w("null.npz")) and stat.S_ISCHR(os.stat("/dev/null").st_mode),
           "4. --out a link to /dev/null: written in place, /dev/null still a character device", r.stderr)
    os.mkfifo(w("fifo.npz"))
    got = {}

    def reader():
        with open(w("fifo.npz"), "rb") as f:
            got["bytes"] = f.read()

    t = threading.Thread(target=reader)
    t.start()
    r = cli("trace", "--input", w("x.npy"), "--out", w("fifo.npz"))
    t.join(30)
    expect(r.returncode == 0 and stat.S_ISFIFO(os.lstat(w("fifo.npz")).st_mode) and got.get("bytes", b"")[:2] == b"PK",
           "4. --out a FIFO being read: the reader gets the .npz (%d bytes), the FIFO stays a FIFO" % len(got.get("bytes", b"")),
           r.stderr)
    r = cli("trace", "--input", w("x.npy"), "--out", w("fifo.npz"), timeout=30)
    expect(r.returncode != 0 and "fifo.npz" in r.stderr and "nobody reads" in r.stderr and
           stat.S_ISFIFO(os.lstat(w("fifo.npz")).st_mode),
           "4. --out a FIFO nobody reads: refused by name, not waited on, not replaced", r.stderr)
    open(w("private.npz"), "wb").write(b"old")
    os.chmod(w("private.npz"), 0o600)
    r = cli("trace", "--input", w("x.npy"), "--out", w("private.npz"))
    mode = stat.S_IMODE(os.stat(w("private.npz")).st_mode)
    expect(r.returncode == 0 and mode == 0o600 and is_npz(w("private.npz")),
           "10. an existing 0600 output stays 0600 (%o)" % mode, r.stderr)
    os.symlink(w("nowhere", "x.npz"), w("dangling.npz"))
    r = cli("trace", "--input", w("x.npy"), "--out", w("dangling.npz"))
    expect(r.returncode == 1 and "dangling.npz" in r.stderr and "does not exist" in r.stderr and
           os.path.islink(w("dangling.npz")), "10. --out a link to nothing: refused by name, the link left", r.stderr)
    r = cli("trace", "--input", w("x.npy"), "--out", w("x.npy"))
    expect(r.returncode == 2 and "--out" in r.stderr and "--input" in r.stderr and open(w("x.npy"), "rb").read() == x_bytes,
           "10. --out equal to --input: refused naming both, the input unchanged", r.stderr)
    img = os.path.join(a.assets, "samples", "0_tshirt_test19.png")
    shutil.copy(img, w("img.png"))
    img_bytes = open(w("img.png"), "rb").read()
    os.symlink("img.png", w("img-link.npz"))
    r = cli("trace", "--image", w("img.png"), "--out", w("img-link.npz"))
    expect(r.returncode == 2 and "--image" in r.stderr and open(w("img.png"), "rb").read() == img_bytes,
           "10. --out a link to the --image: refused, the image unchanged", r.stderr)
    shutil.copy(os.path.join(a.assets, "fmnist_vit.safetensors"), w("m.safetensors"))
    m_bytes = open(w("m.safetensors"), "rb").read()
    r = cli("convert", w("m.safetensors"), w("m.safetensors"))
    expect(r.returncode == 2 and "m.safetensors" in r.stderr and open(w("m.safetensors"), "rb").read() == m_bytes,
           "10. convert x x: refused, the source unchanged", r.stderr)

    # ------------------------------------------------------------ 9: messages
    r = cli("trace", "--input", w("x.npy"), "--out", "")
    expect(r.returncode == 2 and '--out ""' in r.stderr and not r.stderr.startswith("vitscope-cli: error: :"),
           '9. --out "": names the flag', r.stderr)
    np.save(w("big.npy"), np.zeros((1, 4096, 4096), np.float32))
    r = cli("trace", "--input", w("big.npy"), "--out", w("big.npz"))
    expect(r.returncode == 1 and w("big.npy") in r.stderr and "--input" in r.stderr,
           "9. a 4096 x 4096 --input that cannot run: the file named", r.stderr)
    os.makedirs(w("eps"))
    shutil.copy(os.path.join(a.assets, "fmnist_vit.safetensors"), w("eps", "model.safetensors"))
    json.dump({"model_type": "vit", "layer_norm_eps": 1e-300}, open(w("eps", "config.json"), "w"))
    r = cli("info", "--model", w("eps", "model.safetensors"))
    expect(r.returncode == 1 and "config.json" in r.stderr and "layer_norm_eps" in r.stderr,
           "9. layer_norm_eps 1e-300: config.json and the field named, not the weights", r.stderr)

    # ------------------------------------------------------------ 6: preprocessing not followed
    # The default model's file without its own config (so the files beside it are read), as a user
    # saving it with a processor config it cannot follow.
    raw = open(os.path.join(a.assets, "fmnist_vit.safetensors"), "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    hb = json.dumps(header).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    os.makedirs(w("pre"))
    open(w("pre", "model.safetensors"), "wb").write(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])
    json.dump({"do_normalize": False, "image_mean": [0.5, 0.5], "image_std": [0.5, 0.5],
               "size": {"height": 64, "width": 64}, "do_resize": True}, open(w("pre", "preprocessor_config.json"), "w"))
    model = w("pre", "model.safetensors")
    r = cli("info", "--model", model, "--heads", "4")
    expect(r.returncode == 0 and "not followed" in r.stdout, "6. (info says it, as before)", r.stdout + r.stderr)
    for cmd in ["trace", "analyze"]:
        out = w("pre-%s.npz" % cmd)
        r = cli(cmd, "--model", model, "--heads", "4", "--image", img, "--out", out)
        note = [l for l in r.stderr.splitlines() if "not followed" in l]
        ok = r.returncode == 0 and note and "do_normalize is false" in note[0] and "image_mean" in note[0] and \
            "preprocessor_config.json" in note[0]
        expect(ok, "6. %s says what of preprocessor_config.json is not followed, on stderr" % cmd, r.stderr)
        if r.returncode == 0:
            with np.load(out) as z:
                o = json.loads(str(z["__options__"]))
            expect("do_normalize is false" in o.get("preprocess_not_followed", ""),
                   "6. %s: __options__ records preprocess_not_followed" % cmd, str(o))

    if a.app:
        # ...and in the window: the toolbar's model notes (its probe, --layout) say it.
        lay = w("pre-window.json")
        r = subprocess.run(["xvfb-run", "-a", "-s", "-screen 0 1600x1000x24", a.app, "--no-settings", "--model", model,
                            "--heads", "4", "--image", img, "--screenshot", w("pre-window.png"), "--layout", lay],
                           capture_output=True, text=True, timeout=300, env=dict(env, LIBGL_ALWAYS_SOFTWARE="1"))
        notes = json.load(open(lay)).get("strings", {}).get("toolbar.model_notes", "") if os.path.exists(lay) else ""
        expect(r.returncode == 0 and "preprocessing not followed" in notes and "do_normalize is false" in notes,
               "6. the window's model notes say what of preprocessor_config.json is not followed", r.stderr + notes)

    print("\n%d failure(s)" % len(FAIL))
    for f in FAIL:
        print("  " + f)
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
