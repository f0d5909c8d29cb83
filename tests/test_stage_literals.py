#!/usr/bin/env python3
"""No stage-name string literal outside the stage table, the command line's parsing and the tests
(issue 18): every other file addresses a stage by its id (StageKind, layer), so adding, renaming or
removing a stage is one definition in core/model/stages.cpp and nothing else can silently miss it.

The stage names are not typed here: they come from the table itself (`vitscope-cli info
--stage-table`) for one preset of every family, and the test checks that those presets together
cover every StageKind declared in core/model/stage_id.h (so a new kind must be reachable by some
preset before it can be checked). Then every string literal in core/ and app/ (comments stripped) is
compared with those names, whole ("ln1.mean", "blocks.3.attn.pattern") or as the prefix a name is
built from ("blocks."). The few literals that coincide with a stage name without naming a stage
(checkpoint parameter names, axis labels, a tab's name) are listed in ALLOWED with the reason; an
entry that no longer occurs fails too, so the list cannot rot.

    test_stage_literals.py --cli build/vitscope-cli --root .
"""
import argparse
import json
import os
import re
import subprocess
import sys

# One preset per family: together they must reach every StageKind (checked below).
PRESETS = ["toy-rgb8", "deit-ti16-distilled", "dino-s16", "dinov2-s14-reg", "clip-b32", "siglip-b16", "mae-b16", "dinov3-s16", "aimv2-l14", "eva02-s14", "eva02-b14"]
# Kinds that only an intervention adds to the table, with the flags of a run that has them.
RUNS = [[p] for p in PRESETS] + [["toy-rgb8", "--drop-patches", "0"]]

# Files whose job is to hold or parse stage names.
NAME_FILES = {
    "core/model/stages.cpp": "the stage table: every name pattern is defined here",
    "core/model/stage_texts.h": "the stage table's texts (axis labels such as 'tokens')",
    "core/model/stage_texts_embed.cpp": "the stage table's texts, written for each stage",
    "core/model/stage_texts_head.cpp": "the stage table's texts, written for each stage",
    "app/cli.cpp": "the command line's parsing",
    "app/cli_commands.cpp": "the command line's parsing",
    "app/app_args.cpp": "the command line's parsing",
    "app/main.cpp": "the command line's parsing (--stage NAME --layer L)",
}
# Directories whose literals are the checkpoint files' own parameter names (timm's "blocks.",
# "pos_embed", DINOv2's "ls1"), which coincide with some stage names but name weights.
PARAM_DIRS = ("core/io/",)
PARAM_NAMES = {"blocks.", "pos_embed", "ls1", "ls2", "head.probe"}
# (file, literal): a literal that is not a stage's name, and why.
ALLOWED = {
    ("core/model/model.h", "pos_embed"): "the parameter's name in for_each_param (the weights, not the stage)",
    ("core/model/model.h", "blocks."): "the parameters' names in for_each_param (timm's module names)",
    ("core/train/optimizer.cpp", "pos_embed"): "the parameter excluded from weight decay",
    ("core/train/trainer.cpp", "pos_embed"): "the parameter whose grid rows train --init-from leaves at their initialisation or resizes (--init-pos)",
    ("app/heatmap.cpp", "tokens"): "an axis label's prefix (which axis a selected patch is on)",
    ("app/heatmap.cpp", "patches"): "an axis label's prefix (which axis a selected patch is on)",
    ("app/tabs/tab_stage.cpp", "tokens"): "the axis label of a per-token column",
    ("app/tabs/tab_positions.cpp", "tokens"): "the axis label of the position-embedding heatmap",
    ("app/tabs/tab_norms.cpp", "tokens"): "the axis label of the token-norm heatmap",
    ("app/tabs/table.cpp", "patches"): "the Patches tab's --tab name",
    ("core/teach/interventions.cpp", "tokens"): "the JSON key of an activation patch's token rows in __options__",
    ("app/interventions_ui.cpp", "tokens"): "the label of the patching panel's token-rows field",
}

LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def strip_comments(src):
    """C++ source with comments replaced by spaces (string and char literals kept)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if c == "/" and i + 1 < n and src[i + 1] == "/":
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and i + 1 < n and src[i + 1] == "*":
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == 'R' and src.startswith('R"', i):  # raw string: R"delim( ... )delim"
            m = re.match(r'R"([^(\s]*)\(', src[i:])
            end = src.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(src[i:j])
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(src[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--root", required=True)
    a = ap.parse_args()
    fails = []

    header = open(os.path.join(a.root, "core/model/stage_id.h")).read()
    listing = re.search(r"#define VIT_STAGE_KINDS\(X\)(.*?)\n\s*\n", header, re.S)
    kinds_declared = set(re.findall(r"\bX\((\w+)\)", listing.group(1))) if listing else set()
    names, kinds_seen = set(), set()
    for p, *flags in RUNS:
        r = subprocess.run([a.cli, "info", "--model", p, "--stage-table", *flags], capture_output=True, text=True)
        if r.returncode != 0:
            fails.append(f"info --model {p} --stage-table {' '.join(flags)} exits {r.returncode}: {r.stderr.strip()[:200]}")
            continue
        for row in json.loads(r.stdout):
            kinds_seen.add(row["kind"])
            m = re.fullmatch(r"blocks\.\d+\.(.+)", row["name"])
            names.add(m.group(1) if m else row["name"])
    if not kinds_declared:
        fails.append("no StageKind found in core/model/stage_id.h (the X-macro list moved?)")
    missing = sorted(kinds_declared - kinds_seen)
    if missing:
        fails.append(f"no run of {RUNS} records the kinds {missing}: add a preset (or flags) that does")
    print(f"{len(names)} stage names from {len(kinds_seen)} kinds ({len(kinds_declared)} declared)")

    def is_stage_literal(s):
        return s in names or s.startswith("blocks.") and (s == "blocks." or
                                                          re.fullmatch(r"blocks\.\d+\.(.+)", s) and
                                                          re.fullmatch(r"blocks\.\d+\.(.+)", s).group(1) in names)

    seen_allowed = set()
    found = []
    for top in ("core", "app"):
        for dp, _, files in os.walk(os.path.join(a.root, top)):
            for f in sorted(files):
                if not f.endswith((".cpp", ".h", ".hpp", ".in")):
                    continue
                path = os.path.join(dp, f)
                rel = os.path.relpath(path, a.root).replace(os.sep, "/")
                if rel in NAME_FILES:
                    continue
                code = strip_comments(open(path, encoding="utf-8", errors="replace").read())
                for ln, line in enumerate(code.split("\n"), 1):
                    for m in LITERAL.finditer(line):
                        s = m.group(1)
                        if not is_stage_literal(s):
                            continue
                        if rel.startswith(PARAM_DIRS) and s in PARAM_NAMES:
                            continue
                        if (rel, s) in ALLOWED:
                            seen_allowed.add((rel, s))
                            continue
                        found.append(f"{rel}:{ln}: \"{s}\"  {line.strip()[:100]}")
    for x in found:
        fails.append("a stage name typed outside the table (address the stage by its StageId): " + x)
    for k in sorted(set(ALLOWED) - seen_allowed):
        fails.append(f"ALLOWED lists {k} ({ALLOWED[k]}), which no longer occurs: remove the entry")
    files = sum(1 for top in ("core", "app") for _, _, fs in os.walk(os.path.join(a.root, top)) for f in fs)
    print(f"scanned {files} files; {len(seen_allowed)} allowed coincidences")
    for f in fails:
        print("FAIL", f)
    if fails:
        sys.exit(1)
    print("ok   no stage-name literal outside the table and the command line")


if __name__ == "__main__":
    main()
