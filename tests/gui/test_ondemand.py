#!/usr/bin/python3
"""Issue 22, every stage on demand in the window: the real app under Xvfb, its stages checked
against a full trace (every stage recorded in one pass, nothing recomputed): the window's own with
--stages all, bit for bit (the same process kind runs both with the same threads: the GEMM's sums
depend on how many threads split them), and the command line's `trace --record-all` to float
rounding (it may run on another number of threads).

- ViT-B/16 (random weights) opens on demand: the status bar says so; the block of the stage --stage
  names is kept whole by the first pass, and a stage of another block (PageDown) is recomputed, the
  status bar naming the block; that stage, exported from the window, equals the full trace's.
- a small model forced on demand (--stages on-demand) exports the whole trace from the window with
  every stage of the full trace, bit for bit.
- the default model keeps its full trace, and the status bar says every stage is recorded.
- gradients on demand (checkpointed): ViT-B/16 with --grads, its gradient view of a stage exported from
  the window equals the full trace's (--stages all) bit for bit and the command line's to float
  rounding, the status bar names the block whose gradients were recomputed, and the gradient-weighted
  rollout is the same; small models forced on demand export every gradient of the full backward, bit
  for bit."""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "parity"))
from test_truth import App, run_checks, expect, FAIL  # noqa: E402,F401


def full_trace(app, *args):
    out = os.path.join(app.dir, "full.npz")
    subprocess.run([app.cli, "trace", "--image", app.sample, "--out", out, "--record-all", *args], check=True,
                   capture_output=True, timeout=600)
    with np.load(out) as z:
        return {k: z[k] for k in z.files}


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def window_export(app, sub, *args):
    d = os.path.join(app.dir, sub)
    os.makedirs(d, exist_ok=True)
    _, lay = app.shot(*args, "--export-dir", d)
    return d, lay


def check_vitb_stage_on_demand(app):
    stage = "blocks.5.mlp.pre"
    # the stage --stage names: its block kept whole by the first pass, nothing recomputed
    _, lay = app.shot("--model", "vit-b16", "--no-grads", "--stage", stage)
    st = lay["strings"].get("status.stages", "")
    expect(st.startswith("stages on demand:") and "block 5 kept whole by the pass" in st and "recomputed" not in st,
           f"ViT-B/16 with --stage {stage}: the first pass keeps block 5 whole, nothing recomputed: '{st}'")
    # a stage of another block (PageDown: the same stage one block down) is recomputed from the kept residual
    d, lay = window_export(app, "vitb", "--model", "vit-b16", "--no-grads", "--stage", "blocks.4.mlp.pre",
                           "--keys", "PageDown", "--export-npy")
    st = lay["strings"].get("status.stages", "")
    expect(st.startswith("stages on demand:"), f"ViT-B/16 runs on demand: the status bar says '{st}'")
    expect("block 5 recomputed" in st, f"the status bar names the block recomputed for {stage}: '{st}'")
    got = np.load(os.path.join(d, stage + ".npy"))
    d_all, lay_all = window_export(app, "vitb-all", "--model", "vit-b16", "--no-grads", "--stage", stage, "--export-npy",
                                   "--stages", "all")
    st = lay_all["strings"].get("status.stages", "")
    expect(st.startswith("every stage recorded"), f"--stages all records every stage of ViT-B/16: '{st}'")
    want = np.load(os.path.join(d_all, stage + ".npy"))
    expect(same_bits(got, want), f"{stage} materialized in the window equals the full trace's, bit for bit "
                                 f"(max |diff| {float(np.max(np.abs(got - want))) if got.shape == want.shape else 'shape'})")
    cli = full_trace(app, "--model", "vit-b16", "--stages", stage)[stage]
    expect(cli.shape == got.shape and np.allclose(got, cli, rtol=1e-4, atol=1e-4),
           f"{stage} in the window equals the command line's full trace to float rounding")


def check_export_every_stage(app):
    # ViT-Ti/16's passes run on every core, the default model's on one (app/jobs.h job_threads): a block
    # recomputed on the window's own thread for the export runs with the pass's thread count
    for model in ["vit-ti16", "default"]:
        d, lay = window_export(app, model, "--model", model, "--no-grads", "--stages", "on-demand", "--export-npz")
        st = lay["strings"].get("status.stages", "")
        expect(st.startswith("stages on demand:"), f"{model}, --stages on-demand: the status bar says '{st}'")
        d_all, _ = window_export(app, model + "-all", "--model", model, "--no-grads", "--stages", "all", "--export-npz")
        with np.load(os.path.join(d, "vitscope-trace.npz")) as z:
            got = {k: z[k] for k in z.files}
        with np.load(os.path.join(d_all, "vitscope-trace.npz")) as z:
            want = {k: z[k] for k in z.files}
        names = [k for k in full_trace(app, "--model", model) if not k.startswith("__")]
        expect(sorted(k for k in got if not k.startswith("__")) == sorted(names),
               f"{model}: the window's export of an on-demand trace holds every stage of the full trace ({len(names)})")
        bad = [k for k in names if k not in want or k not in got or not same_bits(got[k], want[k])]
        expect(not bad, f"{model}: every exported stage equals the window's full trace's bit for bit (differ: {bad[:5]})")


def check_vitb_gradient_on_demand(app):
    stage = "blocks.5.mlp.pre"
    # the first pass keeps block 4 (--stage) and its gradients; PageDown shows block 5, whose gradients are recomputed
    args = ["--model", "vit-b16", "--grads", "--stage", "blocks.4.mlp.pre", "--keys", "PageDown,g", "--export-npy",
            "--overlay", "grad"]
    d, lay = window_export(app, "vitb-grads", *args)
    st = lay["strings"].get("status.stages", "")
    expect(st.startswith("stages on demand:") and "gradients checkpointed" in st,
           f"ViT-B/16 with --grads runs on demand, its gradients checkpointed: '{st}'")
    expect("block 5's gradients recomputed" in st, f"the status bar names the block whose gradients were recomputed: '{st}'")
    expect("forward+backward" in lay["strings"].get("status", ""), "the status bar says forward+backward")
    expect(lay["numbers"].get("stage.showing_grad") == 1, "the stage view shows the gradient")
    got = np.load(os.path.join(d, stage + ".grad.npy"))
    d_all, lay_all = window_export(app, "vitb-grads-all", *args, "--stages", "all")
    st = lay_all["strings"].get("status.stages", "")
    expect(st.startswith("every stage recorded"), f"--stages all --grads records every stage of ViT-B/16: '{st}'")
    want = np.load(os.path.join(d_all, stage + ".grad.npy"))
    expect(same_bits(got, want), f"{stage}.grad materialized in the window equals the full backward's, bit for bit "
                                 f"(max |diff| {float(np.max(np.abs(got - want))) if got.shape == want.shape else 'shape'})")
    expect(float(np.max(np.abs(got))) > 0, f"{stage}.grad is not all zero")
    cli = full_trace(app, "--model", "vit-b16", "--grads", "--stages", stage)[stage + ".grad"]
    expect(cli.shape == got.shape and np.allclose(got, cli, rtol=1e-3, atol=1e-6 * float(np.max(np.abs(cli)))),
           f"{stage}.grad in the window equals the command line's full backward to float rounding")
    for k in ["thumbs.2.vmax"]:
        a, b = lay["numbers"].get(k), lay_all["numbers"].get(k)
        expect(a is not None and a == b and a > 0, f"the gradient-weighted rollout on demand is the full trace's ({k}: {a} vs {b})")


def check_export_every_gradient(app):
    for model in ["vit-ti16", "default"]:
        d, lay = window_export(app, model + "-grads", "--model", model, "--stages", "on-demand", "--export-npz")
        st = lay["strings"].get("status.stages", "")
        expect(st.startswith("stages on demand:") and "gradients checkpointed" in st,
               f"{model}, --stages on-demand: gradients checkpointed: '{st}'")
        d_all, _ = window_export(app, model + "-grads-all", "--model", model, "--stages", "all", "--export-npz")
        with np.load(os.path.join(d, "vitscope-trace.npz")) as z:
            got = {k: z[k] for k in z.files}
        with np.load(os.path.join(d_all, "vitscope-trace.npz")) as z:
            want = {k: z[k] for k in z.files}
        grads = [k for k in full_trace(app, "--model", model, "--grads") if k.endswith(".grad")]
        expect(len(grads) > 30 and sorted(k for k in got if k.endswith(".grad")) == sorted(grads),
               f"{model}: the window's export of an on-demand trace holds every gradient of the full backward ({len(grads)})")
        names = [k for k in want if not k.startswith("__")]
        bad = [k for k in names if k not in got or not same_bits(got[k], want[k])]
        expect(not bad, f"{model}: every exported stage and gradient equals the window's full trace's bit for bit "
                        f"({len(names)}; differ: {bad[:5]})")


def check_small_model_full(app):
    _, lay = app.shot("--model", "default")
    st = lay["strings"].get("status.stages", "")
    expect(st.startswith("every stage recorded"), f"the default model records every stage: '{st}'")


if __name__ == "__main__":
    sys.exit(run_checks([check_vitb_stage_on_demand, check_export_every_stage, check_vitb_gradient_on_demand,
                         check_export_every_gradient, check_small_model_full],
                        "all stages-on-demand checks passed"))
