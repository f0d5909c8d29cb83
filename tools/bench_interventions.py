#!/usr/bin/python3
"""Benchmark of issue 21's sweeps: head importance (one head knocked out per pass: 144 on ViT-B/16)
and occlusion (one patch dropped per pass: 196 on ViT-B/16), in seconds, three ways in the same run
on the same weights and input:

  ours      ViTScope as the window and `analyze` run them: each ablation in block L starts from the
            clean run's residual stream entering block L, each dropped patch from the clean stream
            entering block 0 (RunFrom); the passes record nothing (Keep::Output)
  naive     ViTScope with one full traced pass from the input per intervention (every stage
            recorded, as a plain re-run would)
  torch     PyTorch 1.13 doing the same with hooks: the reference model of
            tests/parity/test_interventions.py (a hook point at every stage), one forward per
            intervention with the ablation or drop as a forward hook, torch.no_grad()

It also checks that ours and PyTorch's numbers agree (float32 both) and that ours equals the naive
way bit for bit. Figures, not a test: the machine's other load moves them; the CPU is printed.

    tools/bench_interventions.py --bin build/vitscope-bench-interventions [--model vit-b16|vit-ti16|fmnist]
                                 [--threads 2] [--no-naive] [--no-torch] [--workdir DIR]"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "parity"))
sys.path.insert(0, HERE)
import cpuinfo  # noqa: E402

MODELS = {  # name: (image, patch, layers, heads, width, mlp, classes)
    "vit-b16": (224, 16, 12, 12, 768, 3072, 1000),
    "vit-ti16": (224, 16, 12, 3, 192, 768, 1000),
    "fmnist-like": (28, 4, 6, 4, 64, 128, 10),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="vitscope-bench-interventions")
    ap.add_argument("--model", default="vit-b16", choices=sorted(MODELS))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--no-naive", action="store_true")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--workdir", default="")
    a = ap.parse_args()
    import numpy as np
    import torch
    import families
    import test_families_forward
    import test_interventions as ti
    import vitref

    torch.set_num_threads(a.threads)
    work = a.workdir or tempfile.mkdtemp(prefix="vitscope-bench-iv-")
    os.makedirs(work, exist_ok=True)
    S, P, L, H, D, M, K = MODELS[a.model]
    spec = ti.vit_spec("bench_" + a.model, D, H, L, M, P, S // P, K, 2026)
    c = families.make_weights(spec)
    path = os.path.join(work, spec.layout + ".safetensors")
    vitref.write_safetensors(path, test_families_forward.own_tensors(spec, c),
                             {"vitscope.config": json.dumps(ti.own_config(spec, "cls"))})
    x = torch.randn(3, S, S, generator=torch.Generator().manual_seed(7))
    xin = os.path.join(work, "input.npy")
    np.save(xin, x.numpy())
    N = (S // P) ** 2
    print(f"model {a.model}: {L} blocks x {H} heads = {L * H} head ablations, {N} patches; threads {a.threads}")
    print(f"cpu: {cpuinfo.describe()}")

    # ---- ViTScope
    out = os.path.join(work, "ours.npz")
    r = subprocess.run([a.bin, "--model", path, "--input", xin, "--out", out, "--threads", str(a.threads)] +
                       ([] if a.no_naive else ["--naive"]), capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"{a.bin} failed ({r.returncode}): {r.stderr}")
    print(r.stdout.strip())
    fig = {}
    for line in r.stdout.splitlines():
        m = re.match(r"(\w+) passes=(\d+).*seconds=([\d.]+)", line)
        if m:
            fig[m.group(1)] = float(m.group(3))
        m = re.match(r"full_pass_s=([\d.]+)", line)
        if m:
            fig["full_pass"] = float(m.group(1))
    with np.load(out) as z:
        ours = {k: z[k] for k in z.files}

    # ---- PyTorch with hooks
    if not a.no_torch:
        model = ti.HookedViT(spec, c, "cls").float().eval()
        with torch.no_grad():
            for _ in range(2):  # warm-up
                clean = model(x[None])[0]
            t0 = time.perf_counter()
            clean = model(x[None])[0]
            fig["torch_full_pass"] = time.perf_counter() - t0
        cls = int(torch.argmax(clean))

        def run_with(hook_module, fn):
            h = hook_module.register_forward_hook(fn)
            try:
                with torch.no_grad():
                    return model(x[None])[0]
            finally:
                h.remove()

        def zero_head(head):
            def fn(mod, inp, z):
                z = z.clone()
                z[:, head] = 0
                return z
            return fn

        hi = np.zeros((L, H), np.float32)
        t0 = time.perf_counter()
        for l in range(L):
            for h in range(H):
                o = run_with(model.blocks[l].attn.z, zero_head(h))
                hi[l, h] = float(clean[cls] - o[cls])
        fig["torch_head_importance"] = time.perf_counter() - t0
        occ = np.zeros(N, np.float32)
        t0 = time.perf_counter()
        for p in range(N):
            keep = [0] + [1 + q for q in range(N) if q != p]
            o = run_with(model.hp_pos_drop, lambda mod, i, o, keep=keep: o[:, keep])
            occ[p] = float(clean[cls] - o[cls])
        fig["torch_occlusion"] = time.perf_counter() - t0
        for name, ref in [("head_importance", hi), ("occlusion", occ)]:
            err = float(np.abs(ours[name] - ref).max() / max(np.abs(ref).max(), 1e-12))
            print(f"{name}: ours vs PyTorch (float32 both), max relative difference {err:.2e}")

    # ---- the summary
    print()
    print(f"{'sweep':18} {'passes':>6} {'ours s':>8} {'naive s':>8} {'torch s':>8} {'naive/ours':>10} {'torch/ours':>10}")
    for name, n in [("head_importance", L * H), ("occlusion", N)]:
        o, nv, tt = fig.get(name), fig.get(name + "_naive"), fig.get("torch_" + name)
        f = lambda v: f"{v:8.2f}" if v is not None else f"{'-':>8}"
        ratio = lambda v: f"{v / o:10.2f}" if v is not None and o else f"{'-':>10}"
        print(f"{name:18} {n:6d} {f(o)} {f(nv)} {f(tt)} {ratio(nv)} {ratio(tt)}")
    if "full_pass" in fig:
        print(f"one full traced pass: ours {fig['full_pass']:.3f} s" +
              (f", PyTorch (hooked model, no hooks set) {fig['torch_full_pass']:.3f} s" if "torch_full_pass" in fig else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
