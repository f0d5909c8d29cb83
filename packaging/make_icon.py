#!/usr/bin/env python3
"""Draws ViTScope's icon: an image cut into a 4x4 grid of patches, each patch
coloured (viridis, as the app's heatmaps) by how much the cls token attends to
it, with the most-attended patch outlined as a clicked patch is in the app.

Deterministic: no randomness, no timestamps, no text chunks; the same Pillow
writes the same bytes. tests/test_install.py redraws it and compares pixels.

    /usr/bin/python3 packaging/make_icon.py assets/icon.png
"""
import math
import sys

from PIL import Image, ImageDraw

# matplotlib's viridis at 0, 0.25, 0.5, 0.75, 1 (its published table)
VIRIDIS = [(68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37)]


def viridis(t):
    t = min(max(t, 0.0), 1.0) * (len(VIRIDIS) - 1)
    i = min(int(t), len(VIRIDIS) - 2)
    f = t - i
    a, b = VIRIDIS[i], VIRIDIS[i + 1]
    return tuple(round(a[k] + (b[k] - a[k]) * f) for k in range(3))


def draw(size=256, grid=4):
    s = 4  # draw at 4x and downsample: smooth edges without antialiasing options
    S = size * s
    im = Image.new("RGBA", (S, S), (0, 0, 0, 0))
    d = ImageDraw.Draw(im)
    d.rounded_rectangle([0, 0, S - 1, S - 1], radius=S // 7, fill=(23, 23, 26, 255))
    margin, gap = S * 0.11, S * 0.025
    cell = (S - 2 * margin - (grid - 1) * gap) / grid
    hot = (1, 2)  # (row, col) of the most-attended patch
    for r in range(grid):
        for c in range(grid):
            dist = math.hypot(r - hot[0], c - hot[1])
            v = math.exp(-dist * dist / 2.2)  # an attention bump around the hot patch
            x0 = margin + c * (cell + gap)
            y0 = margin + r * (cell + gap)
            d.rounded_rectangle([x0, y0, x0 + cell, y0 + cell], radius=cell * 0.12, fill=viridis(0.08 + 0.92 * v) + (255,))
    x0 = margin + hot[1] * (cell + gap) - gap * 0.6
    y0 = margin + hot[0] * (cell + gap) - gap * 0.6
    d.rounded_rectangle([x0, y0, x0 + cell + 1.2 * gap, y0 + cell + 1.2 * gap], radius=cell * 0.16,
                        outline=(255, 255, 255, 255), width=int(gap * 0.9))
    return im.resize((size, size), Image.LANCZOS)


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "assets/icon.png"
    draw().save(out, optimize=False)
    print(out)
