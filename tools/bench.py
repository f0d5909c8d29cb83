#!/usr/bin/python3
"""Forward-pass benchmark: ViTScope's traced forward (every stage recorded)
against torchvision's plain forward of the same weights, in the same run, on
the same cores. Prints one line per model:
    bench MODEL ours_ms=... torch_ms=... ratio=... peak_mb=...
ratio = ours / torch (below 1 means ViTScope is faster)."""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "parity"))
import vitref  # noqa: E402

MODELS = {  # name: (image, channels, patch, layers, heads, width, mlp, classes)
    "vit-ti16": (224, 3, 16, 12, 3, 192, 768, 1000),
    "vit-b16": (224, 3, 16, 12, 12, 768, 3072, 1000),
    "fmnist": (28, 1, 4, 6, 4, 64, 128, 10),
}


def torch_ms(model, x, runs, warmup):
    ts = []
    with torch.no_grad():
        for i in range(warmup + runs):
            t0 = time.perf_counter()
            model(x)
            if i >= warmup:
                ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="path to the vitscope-bench binary")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(a.threads))
    tmp = tempfile.mkdtemp(prefix="vitscope-bench-")
    for name in a.models.split(","):
        S, C, P, L, H, D, M, K = MODELS[name]
        torch.manual_seed(0)
        tv = torchvision.models.VisionTransformer(image_size=S, patch_size=P, num_layers=L, num_heads=H,
                                                  hidden_dim=D, mlp_dim=M, num_classes=K).eval()
        if C == 1:  # torchvision is RGB-only: a 1-channel patch conv, as timm's in_chans=1
            tv.conv_proj = torch.nn.Conv2d(1, D, P, P)
        vitref.randomize(tv, 1)
        path = os.path.join(tmp, name + ".safetensors")
        vitref.write_safetensors(path, tv.state_dict(), {"num_heads": H})
        runs = a.runs if S > 100 else a.runs * 20
        tm = torch_ms(tv, torch.randn(1, C, S, S), runs, 3)
        r = subprocess.run([a.bench, "--model", path, "--runs", str(runs), "--warmup", "3"], env=env,
                           capture_output=True, text=True, check=True)
        lines = r.stdout.splitlines()
        ours = dict(kv.split("=") for kv in lines[0].split())
        blas = next((l[6:] for l in lines if l.startswith("blas: ")), "?")
        om = float(ours["ours_ms"])
        print(f"bench {name} ours_ms={om:.3f} torch_ms={tm:.3f} ratio={om / tm:.3f} peak_mb={ours['peak_mb']} "
              f"trace_mb={ours['trace_mb']} stages={ours['stages']} threads={a.threads} blas=\"{blas}\"", flush=True)
        os.remove(path)
    torch_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"# torch process peak_mb={torch_peak:.1f}")


if __name__ == "__main__":
    main()
