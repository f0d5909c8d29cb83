#!/usr/bin/env python3
"""The README and docs/ stay inside the repository (issue 36 item 17): a reader has only the
repository, so no path in them may lead out of it ("as ../shared/DESIGN.md measures it"), and every
relative link or picture they point to is in it.

    test_docs.py --root .
"""
import argparse
import os
import re
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--root", required=True)
args = ap.parse_args()
root = os.path.realpath(args.root)

files = [os.path.join(root, "README.md")] + sorted(
    os.path.join(root, "docs", f) for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
failures = []
# a path written in the text: ../x, ./x, or dir/…/file.ext (in backticks, links or plain)
PATH = re.compile(r"(?<![\w/.~:-])((?:\.\./)+[\w.-][\w./-]*|\./[\w.-][\w./-]*)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
for f in files:
    text = open(f, encoding="utf-8").read()
    base = os.path.dirname(f)
    rel = os.path.relpath(f, root)
    for m in PATH.finditer(text):
        p = m.group(1).rstrip(".,;:")
        target = os.path.realpath(os.path.join(base, p))
        line = text.count("\n", 0, m.start()) + 1
        # a path the text describes on the user's disk (a Hugging Face cache's ../../blobs/) is not a citation
        if "blobs/" in p:
            continue
        if not (target == root or target.startswith(root + os.sep)):
            failures.append(f"{rel}:{line}: '{p}' points outside the repository")
        elif p.startswith("../") and not os.path.exists(target):
            failures.append(f"{rel}:{line}: '{p}' names nothing in the repository")
    for m in LINK.finditer(text):
        t = m.group(1).split("#")[0]
        if not t or re.match(r"^[a-z]+:", t):
            continue
        line = text.count("\n", 0, m.start()) + 1
        target = os.path.realpath(os.path.join(base, t))
        if not (target == root or target.startswith(root + os.sep)):
            failures.append(f"{rel}:{line}: the link '{t}' leads outside the repository")
        elif not os.path.exists(target):
            failures.append(f"{rel}:{line}: the link '{t}' names nothing in the repository")
for x in failures:
    print("FAIL", x)
print(f"{len(files)} files, {len(failures)} failures")
sys.exit(1 if failures else 0)
