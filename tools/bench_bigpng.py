#!/usr/bin/env python3
"""How long a huge PNG takes to open (issue 37, fault 11): a 16-bit RGB 16384 x 16384 PNG (1.6 GB of
samples, ~1.6 MB of file) through `vitscope-cli trace` and through the window (`vitscope --screenshot`
under Xvfb: the picture loaded, the model run and the first frame drawn), each against the same command
on a small image (the launch and the model's own time), median of --runs. Wall-clock seconds, with the
CPU named, so that runs on one machine can be compared before and after a change.

    tools/bench_bigpng.py --build build [--runs 3] [--model scenes] [--filter paeth|none] [--work /tmp/vitscope-bigpng]
"""
import argparse
import os
import platform
import statistics
import struct
import subprocess
import sys
import time
import zlib

W = H = 16384


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def make_png(path, filt):
    """none: each row one colour (a vertical gradient), filter 0: deflate's longest matches, ~1000:1 (2.5 MB).
    paeth: a diagonal gradient filtered with Paeth on every row, as encoders choose for smooth pictures
    (6.5 MB): the decoder unfilters every pixel (numpy needed to write it)."""
    z = zlib.compressobj(9)
    parts = []
    if filt == "none":
        for y in range(H):
            r, g, b = (y * 4) & 0xFFFF, (65535 - y * 3) & 0xFFFF, (y * 7919) & 0xFFFF
            parts.append(z.compress(b"\0" + struct.pack(">HHH", r, g, b) * W))
    else:
        import numpy as np
        x, bpp = np.arange(W, dtype=np.int64), 6
        prev = np.zeros(W * bpp, np.int16)
        pad = np.zeros(bpp, np.int16)
        for y in range(H):
            r, g, b = (x * 3 + y * 2) & 0xFFFF, (x * 2 + 40000 - y) & 0xFFFF, (x + y * 5 + 7) & 0xFFFF
            px = np.stack([r, g, b], 1).astype(">u2").reshape(-1).view(np.uint8).astype(np.int16)
            left, ul = np.concatenate([pad, px[:-bpp]]), np.concatenate([pad, prev[:-bpp]])
            p = left + prev - ul
            pa, pb, pc = np.abs(p - left), np.abs(p - prev), np.abs(p - ul)
            pred = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, prev, ul))
            parts.append(z.compress(b"\4" + ((px - pred) & 255).astype(np.uint8).tobytes()))
            prev = px
    parts.append(z.flush())
    ihdr = struct.pack(">IIBBBBB", W, H, 16, 2, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"".join(parts)) + chunk(b"IEND", b""))


def small_png(path):
    raw = b"".join(b"\0" + bytes((x * 7 + y) % 256 for x in range(96 * 3)) for y in range(96))
    ihdr = struct.pack(">IIBBBBB", 96, 96, 8, 2, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def timed(cmd, env=None):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return dt


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--model", default="scenes", help="the window's and the trace's model (default: the window's own)")
    ap.add_argument("--work", default="/tmp/vitscope-bigpng")
    ap.add_argument("--only", choices=["cli", "window"], help="one of the two measurements")
    ap.add_argument("--filter", choices=["paeth", "none"], default="paeth", help="the big PNG's row filter (see make_png)")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    big, small = os.path.join(a.work, f"big16_16384_{a.filter}.png"), os.path.join(a.work, "small.png")
    if not os.path.exists(big):
        print(f"writing {big} ...", flush=True)
        make_png(big, a.filter)
    if not os.path.exists(small):
        small_png(small)
    cli, app = os.path.join(a.build, "vitscope-cli"), os.path.join(a.build, "vitscope")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", LIBGL_ALWAYS_SOFTWARE="1")
    print(f"CPU: {cpu_name()}, {os.cpu_count()} logical cores, load average {os.getloadavg()[0]:.2f} (other work slows every figure)")
    print(f"file: {big}, {os.path.getsize(big)} bytes, {W}x{H} 16-bit RGB, filter {a.filter}; model {a.model}; median of {a.runs}")
    rows = []
    if a.only in (None, "cli"):
        out = os.path.join(a.work, "t.npz")
        cmd = lambda img: [cli, "trace", "--model", a.model, "--image", img, "--out", out]
        base = statistics.median(timed(cmd(small), env) for _ in range(a.runs))
        full = statistics.median(timed(cmd(big), env) for _ in range(a.runs))
        rows.append(("vitscope-cli trace", full, base))
    if a.only in (None, "window"):
        shot = os.path.join(a.work, "shot.png")
        cmd = lambda img: ["xvfb-run", "-a", "-s", "-screen 0 1600x1000x24", app, "--no-settings", "--model", a.model,
                           "--image", img, "--screenshot", shot]
        base = statistics.median(timed(cmd(small), env) for _ in range(a.runs))
        full = statistics.median(timed(cmd(big), env) for _ in range(a.runs))
        rows.append(("window (--screenshot)", full, base))
    for name, full, base in rows:
        print(f"{name:24s} {full:6.2f} s; the small image {base:5.2f} s; the difference {full - base:5.2f} s")


if __name__ == "__main__":
    main()
