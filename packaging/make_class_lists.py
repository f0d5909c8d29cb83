#!/usr/bin/env python3
"""Writes the class-name lists installed under share/vitscope/classes/ (one name
per line, for `--labels`):
  fashion_mnist.txt   the default model's classes, from its own __metadata__
  imagenet1k.txt      ImageNet-1k's 1000 classes in index order, from Debian's
                      torchvision (the names its pretrained ViTs were trained with)

    /usr/bin/python3 packaging/make_class_lists.py assets
"""
import json
import os
import struct
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "assets"
os.makedirs(os.path.join(out, "classes"), exist_ok=True)

with open(os.path.join(out, "fmnist_vit.safetensors"), "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    names = json.loads(json.loads(f.read(n))["__metadata__"]["class_names"])
assert len(names) == 10, names

from torchvision.models._meta import _IMAGENET_CATEGORIES as imagenet  # noqa: E402

assert len(imagenet) == 1000
for fname, lst in (("fashion_mnist.txt", names), ("imagenet1k.txt", imagenet)):
    assert all(name and "\n" not in name for name in lst)
    with open(os.path.join(out, "classes", fname), "w", encoding="utf-8") as f:
        f.write("\n".join(lst) + "\n")
    print(fname, len(lst))
