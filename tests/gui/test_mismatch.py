#!/usr/bin/python3
"""The options on screen are the trace's (issue 18): while a slow forward pass runs with new
options, the window keeps drawing the previous trace, and every text that describes it (the
explanation, the PyTorch line, the option labels of the stage view, the map, the Changes tab and the
status bar) must be that trace's, never the options just requested.

The app is driven headless: a random ViT-B/16 (a pass takes a while), a key that changes an option,
and --while-running takes the screenshot while the pass that key started is running (the app exits
3 if it is not). Expected texts come from outside the window: `vitscope-cli info --explain` prints the
stage table's title, explanation and PyTorch line for given options."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_truth import run_checks, expect  # noqa: E402

MODEL = ["--model", "vit-b16", "--no-grads"]
STAGE = "blocks.0.ln1.out"


def explain(app, *flags):
    """({stage: (title, what, torch)}, options line) from `vitscope-cli info --explain` for these flags."""
    out = subprocess.run([app.cli, "info", "--model", "vit-b16", "--explain", *flags], capture_output=True, text=True,
                         check=True).stdout
    texts, options, part = {}, None, False
    for line in out.splitlines():
        if line.startswith("explanations ("):
            options, part = line[len("explanations ("):-2], True
        elif part and line.startswith("  "):
            name, title, what, torch = line[2:].split("\t")
            texts[name] = (title, what, torch)
    return texts, options


def mid_pass(app, *args):
    """A screenshot taken while the pass that --keys started runs: (layout, pixels)."""
    rc, err, img, lay = app.run(*MODEL, *args, "--while-running")
    if rc != 0:
        raise SystemExit(f"vitscope {' '.join(args)} --while-running failed ({rc}): {err.strip()[-300:]}")
    return lay, img


def check_stage_view(app):
    """The stage view explains the trace on screen (affine on) while a pass with affine off runs."""
    on, on_opts = explain(app)
    off, off_opts = explain(app, "--no-affine")
    expect(on[STAGE] != off[STAGE], f"{STAGE}: the stage table says different things with and without affine "
                                    f"(else this test could not tell them apart)")
    lay, _ = mid_pass(app, "--stage", STAGE, "--keys", "a")
    st = lay["strings"]
    expect(lay["busy"] is True and lay["options"]["affine"] is False,
           "the screenshot is mid-pass: a pass with affine off (just requested) is running")
    expect(lay["stage"] == STAGE and lay["shown_options"]["affine"] is True,
           "...and the trace on screen is the one computed before the key, with affine on")
    title, what, torch = on[STAGE]
    expect(st.get("stage.what") == what,
           f"the explanation is the trace's (affine on), not the requested options': {st.get('stage.what', '')[:90]}...")
    expect(st.get("stage.torch") == torch, f"the PyTorch line is the trace's: {st.get('stage.torch')!r} (want {torch!r})")
    expect(st.get("stage.title") == title, f"the title is the trace's: {st.get('stage.title')!r}")
    expect(st.get("stage.options") == on_opts,
           f"the options label says what the trace was computed with: {st.get('stage.options')!r} (want {on_opts!r})")
    expect(off_opts in st.get("stage.running", ""),
           f"...and says a pass with the requested options is running: {st.get('stage.running', '')!r}")


def check_map_and_learn(app):
    """The map's option labels and its LayerNorm boxes, and Learn mode's narration, are the trace's while the new pass runs."""
    _, on_opts = explain(app)
    lay, _ = mid_pass(app, "--stage", STAGE, "--tab", "9", "--keys", "a")
    expect(lay["busy"] is True and lay["tab"] == "Map", "mid-pass, on the Map tab")
    expect(lay["strings"].get("map.options") == on_opts,
           f"the map's 'options in force' are the trace's: {lay['strings'].get('map.options')!r}")
    boxes = [t["text"] for t in lay["texts"] if t["group"] == "map.boxes"]
    expect("affine" in boxes and "no affine" not in boxes, f"its LayerNorm boxes say 'affine' (the trace's): {boxes[:12]}")
    # Learn mode at the tour's LayerNorm lesson (issue 38): L to the workbench, A (a pass with affine off
    # starts), L back: its narration and PyTorch line are the trace on screen's (affine on)
    lay, _ = mid_pass(app, "--tour", "3", "--keys", "l,a,l")
    st = lay["strings"]
    expect(lay["busy"] is True and lay["options"]["affine"] is False and st.get("learn.id") == "ln",
           f"mid-pass (affine off requested), Learn mode at the LayerNorm step ({st.get('learn.id')})")
    expect("elementwise_affine=True" in st.get("learn.narration", "") and "elementwise_affine=True" in st.get("learn.torch", ""),
           f"Learn mode describes the trace on screen (affine on): {st.get('learn.narration', '')[-90:]} / {st.get('learn.torch', '')}")


def check_changes_and_status(app):
    """The Changes tab compares the trace on screen; the status bar's BUG line is the trace's."""
    _, on_opts = explain(app)
    lay, _ = mid_pass(app, "--stage", STAGE, "--tab", "2", "--keys", "a")
    expect(lay["busy"] is True and lay["tab"] == "Changes", "mid-pass, on the Changes tab")
    expect(lay["strings"].get("changes.options") == on_opts,
           f"the Changes tab says which options the trace on screen has: {lay['strings'].get('changes.options')!r}")
    expect("diff" not in lay["rects"],
           "...and draws no difference map: the trace on screen was computed with the default options")
    lay, _ = mid_pass(app, "--stage", STAGE, "--keys", "b")
    status = lay["strings"].get("status", "")
    expect(lay["busy"] is True and lay["options"]["bug_scale_after_softmax"] is True,
           "mid-pass after B: the BUG switch is on in the toolbar (requested)")
    expect("BUG on" not in status, f"...but the status bar does not say BUG for a trace computed without it: {status[:80]}")


if __name__ == "__main__":
    sys.exit(run_checks([check_stage_view, check_map_and_learn, check_changes_and_status],
                        "all options-mismatch checks passed"))
