#!/usr/bin/env python3
"""Writes the WebP and GIF files of tests/test_image_web.cpp with Pillow (python3-pil: its own
encoders, not ViTScope's), so that the decoder is checked on files as other programs save them.
The pixels are functions of (x, y) that the C++ test computes too:

  rgb(x, y)     = (x * 19 % 256, y * 37 % 256, x * y * 5 % 256)          WebP, lossless
  palette(i)    = (i, 255 - i, i * 7 % 256); index(x, y) = (x + 13 * y) % 256   GIF (interlaced.gif: 17 x 20, interlaced, min side >= 16 for Pillow)

    /usr/bin/python3 tests/images/make_web_images.py tests/images
"""
import sys
from PIL import Image

out = sys.argv[1] if len(sys.argv) > 1 else "."


def rgb_image(w, h, shift=0):
    im = Image.new("RGB", (w, h))
    im.putdata([((x * 19 + shift) % 256, y * 37 % 256, x * y * 5 % 256) for y in range(h) for x in range(w)])
    return im


def gif_image(w, h, shift=0):
    im = Image.new("P", (w, h))
    pal = []
    for i in range(256):
        pal += [i, 255 - i, i * 7 % 256]
    im.putpalette(pal)
    im.putdata([(x + 13 * y + shift) % 256 for y in range(h) for x in range(w)])
    return im


rgb_image(13, 7).save(f"{out}/pattern.webp", lossless=True)
rgba = rgb_image(13, 7).convert("RGBA")
rgba.putalpha(Image.new("L", (13, 7), 100))
rgba.save(f"{out}/pattern_alpha.webp", lossless=True, exact=True)
frames = [rgb_image(13, 7, s) for s in (0, 50, 100)]
frames[0].save(f"{out}/anim.webp", save_all=True, append_images=frames[1:], lossless=True, duration=100)
gif_image(13, 7).save(f"{out}/pattern.gif", interlace=False, optimize=False)
gif_image(17, 20).save(f"{out}/interlaced.gif", interlace=True, optimize=False)
g = [gif_image(13, 7, s) for s in (0, 1, 2)]
g[0].save(f"{out}/anim.gif", save_all=True, append_images=g[1:], duration=100, optimize=False, disposal=1)
