#!/usr/bin/python3
"""The BLAS kernel ViTScope runs with (vit::blas::init).

  --case default   OPENBLAS_CORETYPE unset: the kernel `vitscope-cli info` reports
                   uses the CPU's best instruction set (AVX-512 or AVX2), no warning.
                   Exit 77 (skipped) on a CPU with neither.
  --case fallback  OpenBLAS picks SSE3 "Prescott" by itself (emulated with
                   VITSCOPE_EMULATE_OPENBLAS_PICK, as on Intel family 6 model 207):
                   ViTScope switches to the best kernel, and the switched kernel's
                   trace equals the Prescott kernel's (same logits within 1e-4).
  --case user      OPENBLAS_CORETYPE=Prescott set by the user: respected, with a
                   warning, exit code 0.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import zipfile

SKIP = 77
AVX512 = {"skylakex", "cooperlake", "sapphirerapids"}
AVX2 = AVX512 | {"haswell", "zen"}


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def run(cli, args, **env_changes):
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("VITSCOPE_EMULATE_OPENBLAS_PICK", None)
    env.update(env_changes)
    return subprocess.run([cli] + args, env=env, capture_output=True, text=True, timeout=300)


def blas_line(r):
    for line in r.stdout.splitlines():
        if line.startswith("blas: "):
            return line[6:]
    raise AssertionError(f"no 'blas:' line in vitscope-cli info's output:\n{r.stdout}\n{r.stderr}")


def kernel_of(line):
    # "OpenBLAS 0.3.21, kernel SkylakeX (...)"
    return line.split(", kernel ", 1)[1].split(" ", 1)[0].lower()


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        sys.exit(1)


def logits(npz):
    import numpy as np
    with zipfile.ZipFile(npz) as z, z.open("logits.npy") as f:
        return np.lib.format.read_array(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--case", required=True, choices=["default", "fallback", "user"])
    ap.add_argument("--image", required=True)
    a = ap.parse_args()
    flags = cpu_flags()
    has512 = {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"} <= flags
    has2 = {"avx2", "fma"} <= flags
    if a.case in ("default", "fallback") and not (has512 or has2):
        print("skipped: this CPU has neither AVX2 nor AVX-512, so every OpenBLAS kernel it can run is a fallback")
        sys.exit(SKIP)
    want = AVX512 if has512 else AVX2
    info = ["info", "--model", "vit-ti16"]

    if a.case == "default":
        r = run(a.cli, info)
        expect(r.returncode == 0, f"info runs with OPENBLAS_CORETYPE unset (rc {r.returncode})")
        line = blas_line(r)
        print("  " + line)
        expect(kernel_of(line) in want, f"kernel {kernel_of(line)} is one for this CPU's "
                                        f"{'AVX-512' if has512 else 'AVX2'}, not a fallback")
        expect("warning" not in line, "no warning")

    elif a.case == "fallback":
        r = run(a.cli, info, VITSCOPE_EMULATE_OPENBLAS_PICK="Prescott")
        expect(r.returncode == 0, f"info runs (rc {r.returncode})")
        line = blas_line(r)
        print("  " + line)
        expect(kernel_of(line) in want, f"OpenBLAS's Prescott replaced by {kernel_of(line)}")
        expect("picked Prescott" in line and "warning" not in line, "the line says what OpenBLAS picked, no warning")
        # The switched kernel computes what the Prescott kernel computes (with the matrix
        # products on OpenBLAS: by default oneDNN runs them and the kernel would not matter).
        with tempfile.TemporaryDirectory() as tmp:
            outs = {}
            for name, env in (("switched", {"VITSCOPE_EMULATE_OPENBLAS_PICK": "Prescott", "VITSCOPE_GEMM": "openblas"}),
                              ("prescott", {"OPENBLAS_CORETYPE": "Prescott", "VITSCOPE_GEMM": "openblas"})):
                out = os.path.join(tmp, name + ".npz")
                r = run(a.cli, ["trace", "--model", "vit-ti16", "--seed", "3", "--image", a.image, "--out", out], **env)
                expect(r.returncode == 0, f"trace with the {name} kernel (rc {r.returncode}: {r.stderr.strip()})")
                outs[name] = logits(out)
            import numpy as np
            s, p = outs["switched"], outs["prescott"]
            err = float(np.max(np.abs(s - p)) / max(1e-6, float(np.max(np.abs(p)))))
            print(f"  logits {s[:3]} vs {p[:3]}: max relative difference {err:.2e}")
            expect(err < 1e-4, "switched kernel's logits equal the Prescott kernel's within 1e-4")

    else:
        r = run(a.cli, info, OPENBLAS_CORETYPE="Prescott")
        expect(r.returncode == 0, f"info runs with OPENBLAS_CORETYPE=Prescott (rc {r.returncode})")
        line = blas_line(r)
        print("  " + line)
        expect(kernel_of(line) == "prescott", "the user's Prescott is respected")
        if has512 or has2:
            expect("warning" in line and "OPENBLAS_CORETYPE=Prescott" in line,
                   "a warning names the variable and says the kernel is not the best")


if __name__ == "__main__":
    main()
