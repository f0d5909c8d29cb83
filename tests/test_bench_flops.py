#!/usr/bin/python3
"""tools/bench.py's GEMM-peak fraction: its numerator, the FLOP of a ViT forward pass (vit_flops),
against PyTorch's own count of the same pass (torch.profiler with_flops: every conv2d, mm, addmm and
bmm of torchvision's VisionTransformer, the attention's products included), for each benchmarked
model; and the pairs of vitscope-bench --paired read back by bench.paired(): each two pass times and
the GEMM peak that the fraction divides them by, and the cores' FMA peak, which the GEMM's stays under.
Usage: test_bench_flops.py --bench PATH_TO_vitscope-bench"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import bench  # noqa: E402

try:
    import torch
except ImportError:
    print("skip: no torch")
    sys.exit(77)

failures = 0


def check(what, ok, detail):
    global failures
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {what}: {detail}")


PRODUCTS = ("aten::conv2d", "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul")
for name, shape in bench.MODELS.items():
    tv, _ = bench.build_torch(name)
    S, C = shape[0], shape[1]
    with torch.no_grad(), torch.profiler.profile(with_flops=True) as prof:
        tv(torch.zeros(1, C, S, S))
    counted = sum(e.flops for e in prof.events() if e.name in PRODUCTS and e.flops)
    ours = bench.vit_flops(*shape)
    check(f"{name} FLOP", counted == ours, f"bench.vit_flops {ours:.0f}, torch.profiler {counted:.0f}")

if "--bench" in sys.argv:
    exe = sys.argv[sys.argv.index("--bench") + 1]

    class A:
        bench, runs, threads = exe, 3, 2

    pairs = bench.paired(A, "default")
    check("--paired gives --runs pairs", len(pairs) == 3, f"{pairs}")
    check("each pair two pass times, a GEMM peak and an FMA peak", all(len(p) == 4 and min(p) > 0 for p in pairs),
          f"{pairs}")
    # the FMA chains are the ceiling of any product (a 2048^3 product above them would mean the chains
    # or the FLOP count wrong); the median pair, with a few percent of room, since this machine's speed
    # can change between the two within a pair
    ratio = sorted(p[2] / p[3] for p in pairs)[len(pairs) // 2]
    check("the GEMM peak within the FMA peak", ratio <= 1.05, f"median GEMM / FMA {ratio:.3f} in {pairs}")

sys.exit(1 if failures else 0)
