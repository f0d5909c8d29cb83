#!/usr/bin/python3
"""The embedded default model: its Fashion-MNIST test accuracy, measured now
with `vitscope-cli eval`, must equal the figure the README states (the model
is deterministic), and the shipped file must load in plain PyTorch code under
timm's key names with its preprocessing in __metadata__."""
import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "parity"))
import vitref  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--readme", required=True)
    a = ap.parse_args()
    ok = True
    size = os.path.getsize(a.model)
    print(f"{'ok  ' if size < 2_000_000 else 'FAIL'} shipped model is {size / 1e6:.2f} MB (limit 2 MB)")
    ok &= size < 2_000_000
    r = subprocess.run([a.cli, "eval", "--model", "default"], capture_output=True, text=True, check=True)
    m = re.search(r"test accuracy: ([0-9.]+)%", r.stdout)
    measured = float(m.group(1))
    readme = open(a.readme).read()
    stated = re.search(r"default model test accuracy: \*\*([0-9.]+)%\*\*", readme)
    if not stated:
        print("FAIL README does not state 'default model test accuracy: **NN.NN%**'")
        return 1
    stated = float(stated.group(1))
    same = abs(measured - stated) < 0.005
    print(f"{'ok  ' if same else 'FAIL'} eval of the embedded model: {measured:.2f}% (README: {stated:.2f}%)")
    ok &= same
    print(r.stdout.strip().splitlines()[-12])

    # Plain PyTorch, timm key names, preprocessing from __metadata__: same accuracy on 1,000 images.
    arrays, meta = vitref.read_safetensors(a.model)
    sd = {k: torch.from_numpy(v) for k, v in arrays.items()}
    cfg = json.loads(meta["vitscope.config"])
    heads = int(meta["num_heads"])
    import gzip
    with gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz") as f:
        imgs = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)[:1000]
    with gzip.open("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)[:1000]
    x = (torch.from_numpy(imgs.astype(np.float32) / 255) - cfg["mean"][0]) / cfg["std"][0]
    correct = 0
    with torch.no_grad():
        for i in range(len(x)):
            logits = vitref.manual_forward(sd, x[i][None], heads, cfg["eps"])["logits"]
            correct += int(logits.argmax()) == int(labels[i])
    r2 = subprocess.run([a.cli, "eval", "--model", "default", "--limit", "1000"], capture_output=True, text=True, check=True)
    ours = float(re.search(r"test accuracy: ([0-9.]+)%", r2.stdout).group(1))
    same = abs(ours - correct / 10) < 0.05
    print(f"{'ok  ' if same else 'FAIL'} PyTorch on the shipped weights: {correct / 10:.1f}% on the first 1,000 test images (ours {ours:.1f}%)")
    ok &= same
    print("all default-model checks passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
