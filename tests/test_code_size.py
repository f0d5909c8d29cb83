#!/usr/bin/env python3
"""Issue 39's size rule for the sources: no function in core/ or app/ over 200 lines, no source file over 900.

A function is found by its body: a `{` opened at namespace or class level (not inside another body) right
after a parameter list's `)` (allowing const, override, noexcept, a trailing return type or a constructor's
initialiser list between them), and runs to its matching `}`. Lambdas and local classes count towards the
function that holds them. Comments, strings and character literals are blanked first, so their braces and
parentheses do not count. Exit 1 and name every offender, with its first line.
"""
import os
import re
import sys

MAX_FUNCTION, MAX_FILE = 200, 900


def blank(src):
    """The source with comments, string and char literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j])); i = j
        elif src.startswith('R"', i) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            k = src.find("(", i)
            delim = ")" + src[i + 2:k] + '"'
            j = src.find(delim, k)
            j = n if j < 0 else j + len(delim)
            out.append(re.sub(r"[^\n]", " ", src[i:j])); i = j
        elif c in "\"'":
            if c == "'" and i > 0 and src[i - 1].isalnum():  # a digit separator (1'000)
                out.append(" "); i += 1; continue
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            j = min(n, j + 1)
            out.append(re.sub(r"[^\n]", " ", src[i:j])); i = j
        else:
            out.append(c); i += 1
    return "".join(out)


OPENS_FUNCTION = re.compile(r"\)\s*(const|override|final|noexcept|mutable|\s|->\s*[\w:<>,\s*&]+)*$")


def functions(text):
    """(name, first line, line count) of every function body at namespace or class level."""
    found, stack = [], []  # stack: for each open brace, whether it is a function body (or inside one)
    line = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == "{":
            inside = any(f for f, _, _ in stack)
            head = text[max(0, i - 2000):i]
            # a constructor's initialiser list: `) : a_(x), b_{y} {` -> look before the ':'
            init = re.search(r"\)\s*:\s*[\w:]+\s*[({][^;{}]*$", head)
            is_fn = not inside and (bool(OPENS_FUNCTION.search(head)) or bool(init))
            name = ""
            if is_fn:
                m = re.search(r"([~\w:]+|operator\s*\S+)\s*\([^;{}]*\)[^;{}()]*$", head if not init else head[:init.start() + 1])
                name = m.group(1) if m else "?"
            stack.append((is_fn, line, name))
        elif c == "}" and stack:
            is_fn, start, name = stack.pop()
            if is_fn:
                found.append((name, start, line - start + 1))
    return found


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    bad = []
    nfiles = nfun = 0
    for top in ("core", "app"):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith((".cpp", ".h")):
                    continue
                path = os.path.join(d, f)
                rel = os.path.relpath(path, root)
                src = open(path, encoding="utf-8").read()
                nfiles += 1
                lines = src.count("\n")
                if lines > MAX_FILE:
                    bad.append(f"{rel}: {lines} lines (at most {MAX_FILE})")
                for name, start, n in functions(blank(src)):
                    nfun += 1
                    if n > MAX_FUNCTION:
                        bad.append(f"{rel}:{start}: {name} is {n} lines (at most {MAX_FUNCTION})")
    for b in bad:
        print("FAIL", b)
    print(f"{nfiles} files, {nfun} functions in core/ and app/; {len(bad)} over the limits")
    return 1 if bad or nfun < 500 else 0


if __name__ == "__main__":
    sys.exit(main())
