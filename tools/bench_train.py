#!/usr/bin/python3
"""Training-throughput benchmark: ViTScope's trainer (forward, backward, AdamW)
against PyTorch training the same config with the same batch size, in the same
run, on the same cores. Prints one line per config:
    bench-train MODEL ours_img_s=... torch_img_s=... ratio=...
ratio = ours / torch (above 1 means ViTScope is faster)."""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "parity"))
import vitref  # noqa: E402
from test_grads import random_canon  # noqa: E402

CONFIGS = {  # name: (image, channels, patch, layers, heads, width, mlp, classes)
    "fmnist-p4": (28, 1, 4, 6, 4, 64, 128, 10),   # the embedded default model
    "fmnist-p7": (28, 1, 7, 6, 4, 64, 128, 10),   # the PyTorch reference point
}


class TorchViT(torch.nn.Module):
    """A batched PyTorch ViT built from the standard modules, as a user would write it."""

    def __init__(self, S, C, P, L, H, D, M, K):
        super().__init__()
        self.patch = torch.nn.Conv2d(C, D, P, P)
        self.cls = torch.nn.Parameter(torch.zeros(1, 1, D))
        self.pos = torch.nn.Parameter(torch.randn(1, (S // P) ** 2 + 1, D) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(D, H, M, dropout=0.0, activation="gelu", batch_first=True,
                                                 norm_first=True, layer_norm_eps=1e-6)
        self.enc = torch.nn.TransformerEncoder(layer, L)
        self.norm = torch.nn.LayerNorm(D, eps=1e-6)
        self.head = torch.nn.Linear(D, K)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.head(self.norm(self.enc(x)[:, 0]))


def torch_img_s(cfg, batch, steps, warmup):
    model = TorchViT(*cfg).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    S, C, K = cfg[0], cfg[1], cfg[7]
    x = torch.randn(batch, C, S, S)
    y = torch.randint(0, K, (batch,))
    for i in range(warmup + steps):
        if i == warmup:
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return steps * batch / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    tmp = tempfile.mkdtemp(prefix="vitscope-bench-train-")
    for name in a.configs.split(","):
        S, C, P, L, H, D, M, K = CONFIGS[name]
        canon = random_canon(C, S, P, D, L, K, 0)
        for i in range(L):  # random_canon uses mlp = 2D; make it M
            q = f"blocks.{i}."
            canon[q + "mlp.fc1.weight"] = torch.randn(M, D) / D ** 0.5
            canon[q + "mlp.fc1.bias"] = torch.zeros(M)
            canon[q + "mlp.fc2.weight"] = torch.randn(D, M) / M ** 0.5
        path = os.path.join(tmp, name + ".safetensors")
        vitref.write_safetensors(path, canon, {"num_heads": H})
        tt = torch_img_s(CONFIGS[name], a.batch, a.steps, 5)
        env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
        r = subprocess.run([a.bench, "--model", path, "--train-batch", str(a.batch), "--runs", str(a.steps),
                            "--warmup", "5"], env=env, capture_output=True, text=True, check=True)
        lines = r.stdout.splitlines()
        ours = dict(kv.split("=") for kv in next(l for l in lines if l.startswith("ours_img_s=")).split())
        blas = next((l[6:] for l in lines if l.startswith("blas: ")), "?")
        gemm = next((l[6:] for l in lines if l.startswith("gemm: ")), "?")
        oi = float(ours["ours_img_s"])
        print(f"bench-train {name} ours_img_s={oi:.0f} torch_img_s={tt:.0f} ratio={oi / tt:.2f} batch={a.batch} "
              f"threads={a.threads} peak_mb={ours['peak_mb']} gemm=\"{gemm}\" blas=\"{blas}\"", flush=True)
        os.remove(path)


if __name__ == "__main__":
    main()
