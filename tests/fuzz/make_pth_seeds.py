#!/usr/bin/python3
"""Seeds of the pth harness that only torch can write (Debian's python3-torch):
  torchscript_clip.pt  a TorchScript archive (torch.jit.save) of a tiny OpenAI-CLIP-like image tower
                       (width 64, one block, fp16 weights, the archive's input_resolution buffer), as
                       OpenAI releases its models: a module tree in data.pkl, code/, constants.pkl;
  dino_full.pth        a DINO full checkpoint: {'teacher', 'student', 'args': argparse.Namespace, ...}.
The TorchScript debug files (code/*.debug_pkl) are dropped to keep the seed under libFuzzer's
-max_len; code/ and constants.pkl stay, as the reader needs them to tell a TorchScript archive.
Usage: make_pth_seeds.py [OUTDIR] (default: tests/fuzz/corpus/pth next to this script)."""
import argparse
import collections
import io
import os
import sys
import zipfile

import torch
import torch.nn as nn

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "pth")
torch.manual_seed(0)


class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, 1)
        self.mlp = nn.Sequential(collections.OrderedDict([("c_fc", nn.Linear(d, 8)), ("gelu", QuickGELU()),
                                                          ("c_proj", nn.Linear(8, d))]))

    def forward(self, x):
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.resblocks = nn.Sequential(Block(d))

    def forward(self, x):
        return self.resblocks(x)


class Visual(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.conv1 = nn.Conv2d(3, d, 4, 4, bias=False)
        self.class_embedding = nn.Parameter(torch.randn(d))
        self.positional_embedding = nn.Parameter(torch.randn(5, d))
        self.ln_pre, self.ln_post = nn.LayerNorm(d), nn.LayerNorm(d)
        self.transformer = Transformer(d)
        self.proj = nn.Parameter(torch.randn(d, 8))

    def forward(self, x):
        x = self.conv1(x).flatten(2).permute(0, 2, 1)
        x = torch.cat([self.class_embedding + torch.zeros(x.shape[0], 1, x.shape[-1]), x], 1) + self.positional_embedding
        x = self.transformer(self.ln_pre(x).permute(1, 0, 2)).permute(1, 0, 2)
        return self.ln_post(x[:, 0]) @ self.proj


class Clip(nn.Module):
    def __init__(self):
        super().__init__()
        self.visual = Visual()
        self.register_buffer("input_resolution", torch.tensor(8))

    def forward(self, x):
        return self.visual(x)


def torchscript_seed():
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(Clip().half()), buf)
    out = io.BytesIO()
    with zipfile.ZipFile(buf) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            if info.filename.endswith(".debug_pkl"):
                continue
            zout.writestr(info, zin.read(info.filename))
    return out.getvalue()


def dino_seed():
    d = 8
    sd = collections.OrderedDict([("cls_token", torch.randn(1, 1, d)), ("pos_embed", torch.randn(1, 5, d)),
                                  ("patch_embed.proj.weight", torch.randn(d, 3, 4, 4)),
                                  ("patch_embed.proj.bias", torch.randn(d)),
                                  ("norm.weight", torch.ones(d)), ("norm.bias", torch.zeros(d))])
    teacher = collections.OrderedDict([("backbone." + k, v) for k, v in sd.items()] +
                                      [("head.last_layer.weight_g", torch.ones(4, 1))])
    student = collections.OrderedDict(("module." + k, v.clone()) for k, v in teacher.items())
    buf = io.BytesIO()
    torch.save({"student": student, "teacher": teacher, "epoch": 1,
                "args": argparse.Namespace(arch="vit_small", patch_size=4)}, buf)
    return buf.getvalue()


os.makedirs(OUT, exist_ok=True)
for name, data in [("torchscript_clip.pt", torchscript_seed()), ("dino_full.pth", dino_seed())]:
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
    print(f"{name}: {len(data)} bytes")
