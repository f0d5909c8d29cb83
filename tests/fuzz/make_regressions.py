#!/usr/bin/python3
"""Writes tests/fuzz/regressions/: one minimized hostile input per finding of
issue 12 (and of the harnesses), each of which the release CLI must reject
with exit status 1 and a message naming the file. Deterministic."""
import gzip, io, json, os, struct, sys, tempfile, zlib

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.argv = [sys.argv[0], tempfile.mkdtemp()]
sys.path.insert(0, HERE)
import make_corpus as mc  # noqa: E402  (its helpers; it writes a throwaway corpus)

OUT = os.path.join(HERE, "regressions")


def put(kind, name, data):
    os.makedirs(os.path.join(OUT, kind), exist_ok=True)
    with open(os.path.join(OUT, kind, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def raw_safetensors(header: dict, data=b""):
    h = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h)) + h + data


# ---- model: the findings
t = mc.timm(); t["blocks.0.mlp.fc1.weight"] = np.float32(1.0)
put("model", "scalar_fc1.safetensors", mc.safetensors(t, {"num_heads": "2"}))          # was: exit 139
t = mc.timm(); t["head.weight"] = np.float32(1.0)
put("model", "scalar_head.safetensors", mc.safetensors(t, {"num_heads": "2"}))         # was: exit 139
for name, change in {"huge_channels": {"channels": 1_000_000_000},                      # was: 11.7 GB, 56 s
                     "negative_channels": {"channels": -1},                             # was: "vector max_size()"
                     "image_size_1e302": {"image_size": 1e302},                         # was: UB in get<int>
                     "width_2pow40": {"width": 2 ** 40},                                # was: UB in get<int>
                     "eps_1e300": {"eps": 1e300},                                       # was: UB float cast
                     "mean_wrong_length": {"mean": [0.5] * 1000},
                     "depth_string": {"depth": "12"}}.items():
    cfg = dict(mc.cfg); cfg.update(change)
    put("model", f"config_{name}.safetensors",
        mc.safetensors(mc.timm(), {"vitscope.config": json.dumps(cfg), "num_heads": "2"}))
deep = "[" * 10000 + "]" * 10000                                                         # was: memory ~ nesting
put("model", "class_names_deep.safetensors", mc.safetensors(mc.timm(), {"num_heads": "2", "class_names": deep}))
cfg = dict(mc.cfg); cfg["class_names"] = "@"
put("model", "config_deep.safetensors", mc.safetensors(mc.timm(), {"num_heads": "2",
    "vitscope.config": json.dumps(cfg).replace('"@"', deep)}))
put("model", "eps_not_a_number.safetensors", mc.safetensors(mc.timm(), {"num_heads": "2", "eps": "abc"}))  # was: "stof"
put("model", "num_heads_huge.safetensors", mc.safetensors(mc.timm(), {"num_heads": "99999999999999999999"}))
put("model", "num_heads_trailing.safetensors", mc.safetensors(mc.timm(), {"num_heads": "2x"}))
t = mc.timm(); t["blocks.99999.norm1.weight"] = np.zeros(1, np.float32)                # was: 190 MB of blocks
put("model", "absurd_depth.safetensors", mc.safetensors(t, {"num_heads": "2"}))
t = mc.timm(); t["pos_embed"] = np.zeros((1, 1 + 1100 * 1100, 1), np.float32)[:, :, :0]  # grid far over 4096 px
t["patch_embed.proj.weight"] = np.zeros((8, 3, 4, 4), np.float32)
put("model", "pos_grid_empty.safetensors", mc.safetensors(t, {"num_heads": "2"}))
# config asks for far more parameters than the file holds (width 8192 from a 0-sized conv)
t = {"patch_embed.proj.weight": np.zeros((8192, 3, 0, 0), np.float32), "pos_embed": np.zeros((1, 2, 8192), np.float32)[:, :, :0],
     "head.weight": np.zeros((1000, 0), np.float32)}
put("model", "zero_sized_patch.safetensors", mc.safetensors(t, {"num_heads": "2"}))
cfg = dict(mc.cfg); cfg.update({"width": 8192, "mlp": 32768, "depth": 128, "heads": 64})
t = {"patch_embed.proj.weight": np.zeros((8192, 3, 4, 4), np.float32)[:0], "pos_embed": np.zeros((1, 5, 0), np.float32)}

# ---- safetensors
keys = {f"k{i}": 0 for i in range(80000)}                                                # was: 7 s (quadratic)
put("safetensors", "80000_keys.safetensors", raw_safetensors(keys))
put("safetensors", "duplicate_key.safetensors",
    struct.pack("<Q", 2 * 52 + 3) + b'{"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},' +
    b'"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}')
put("safetensors", "deep_nesting.safetensors", raw_safetensors({}).replace(b"{}", b"[" * 5000 + b"]" * 5000)[:8] +
    b"[" * 5000 + b"]" * 5000)
dn = b"[" * 5000 + b"]" * 5000
put("safetensors", "deep_nesting.safetensors", struct.pack("<Q", len(dn)) + dn)
put("safetensors", "shape_overflow.safetensors",
    raw_safetensors({"a": {"dtype": "F32", "shape": [2 ** 32, 2 ** 32], "data_offsets": [0, 0]}}))
put("safetensors", "zero_dim_then_huge_dims.safetensors",                                 # count 0, strides overflow
    raw_safetensors({"a": {"dtype": "F32", "shape": [0, 2 ** 32, 2 ** 32, 2 ** 32], "data_offsets": [0, 0]}}))
put("safetensors", "offsets_past_end.safetensors",
    raw_safetensors({"a": {"dtype": "F32", "shape": [2 ** 28], "data_offsets": [0, 2 ** 30]}}))
put("safetensors", "float_offsets.safetensors",
    raw_safetensors({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0.0, 4e300]}}, b"\0" * 4))
put("safetensors", "header_length_huge.safetensors", struct.pack("<Q", 2 ** 63) + b"{}")

# ---- image
rgb = Image.fromarray(np.zeros((8, 8, 3), np.uint8))
good_jpg = mc.img_bytes(rgb, "JPEG")
# stb_image.h:1990: a Huffman table whose 16 code-length counts add up to more than 256
j = bytearray(good_jpg)
p = j.index(b"\xff\xc4")
j[p + 5:p + 21] = bytes([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255])
put("image", "jpeg_huffman_counts_over_256.jpg", bytes(j))
j = bytearray(good_jpg); p = j.index(b"\xff\xc0")
j[p + 5:p + 9] = struct.pack(">HH", 60000, 60000)                                        # declared 60000 x 60000
put("image", "jpeg_60000x60000.jpg", bytes(j))
put("image", "jpeg_truncated.jpg", good_jpg[: len(good_jpg) // 2])
put("image", "psd.psd", b"8BPS\x00\x01" + b"\x00" * 6 + b"\x00\x03" + struct.pack(">II", 4, 4) + b"\x00\x20\x00\x03" + b"\x00" * 64)
put("image", "hdr.hdr", b"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 4 +X 4\n" + b"\x02\x02\x00\x04" * 16)
# GIF and WebP are read since issue 36 (a GIF's first frame by core/io/image_web.cpp): their hostile forms are refused
def le16(v):
    return struct.pack("<H", v)
put("image", "gif_lzw_code_past_table.gif", b"GIF89a" + le16(2) + le16(1) + b"\x80\0\0" + b"\0" * 6 + b"," + le16(0) + le16(0)
    + le16(2) + le16(1) + b"\0\x02\x01\x3f\0;")
put("image", "gif_canvas_20000x10.gif", b"GIF89a" + le16(20000) + le16(10) + b"\0\0\0;")
put("image", "gif_frame_65535x65535.gif", b"GIF89a" + le16(4) + le16(4) + b"\x80\0\0" + b"\0" * 6 + b"," + le16(0) + le16(0)
    + le16(65535) + le16(65535) + b"\0\x02\x01\x3f\0;")
put("image", "webp_truncated.webp", mc.img_bytes(rgb, "WEBP")[:30])
put("image", "tga.tga", mc.img_bytes(rgb, "TGA"))
put("image", "pnm.ppm", mc.img_bytes(rgb, "PPM"))


def png(w, h, bitdepth=8, colour=2, idat=None):
    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xffffffff)
    ihdr = struct.pack(">IIBBBBB", w, h, bitdepth, colour, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat or zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")

put("image", "png_20000x20000.png", png(20000, 20000))
# a decompression bomb: 6000 x 6000 RGB (36 MP, over the 25 MP limit) of zeros in ~100 KB; since
# issue 23 (large photos are scaled down on load) it is read row by row and kept at 3000 x 3000:
# "scaled_" inputs must end with exit 0 and a note naming the file, within the same limits
put("image", "scaled_png_bomb_6000x6000.png", png(6000, 6000, idat=zlib.compress(b"\0" * (6000 * 3 + 1) * 6000, 9)))
bmp = bytearray(mc.img_bytes(rgb, "BMP"))
bmp[18:26] = struct.pack("<ii", 100000, -100000)
put("image", "bmp_100000x100000.bmp", bytes(bmp))
put("image", "empty.png", b"")
put("image", "text.png", b"this is not an image")

# ---- npy
def npy(header: str, data=b""):
    h = header.encode()
    h += b" " * ((64 - (10 + len(h) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + data

put("npy", "shape_wraps_to_zero.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"))
put("npy", "huge_shape.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (999999999999,), }"))
put("npy", "unterminated_shape.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 8"))
put("npy", "int_dtype.npy", npy("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", b"\0" * 8))

# ---- idx (harness format: 2 bytes little-endian = length of the image file, then images, then labels)
def idx(im, lb):
    return struct.pack("<H", len(im)) + im + lb

hdr = struct.pack(">IIII", 0x803, 2 ** 31, 28, 28)
put("idx", "count_2pow31.idx", idx(hdr, struct.pack(">II", 0x801, 2 ** 31)))
put("idx", "gz_bomb_header_lies.idx",                                                     # 64 MB of zeros for 1 image
    idx(gzip.compress(struct.pack(">IIII", 0x803, 1, 28, 28) + b"\0" * (64 << 20), 9, mtime=0),
        struct.pack(">IIB", 0x801, 1, 0)))
put("idx", "gz_truncated.idx",
    idx(gzip.compress(struct.pack(">IIII", 0x803, 1, 28, 28) + bytes(np.random.default_rng(1).integers(0, 256, 784, dtype=np.uint8)), mtime=0)[:200], struct.pack(">IIB", 0x801, 1, 0)))
put("idx", "rows_0.idx", idx(struct.pack(">IIII", 0x803, 1, 0, 28), struct.pack(">IIB", 0x801, 1, 0)))

# ---- labels (for the 10-class fmnist model)
put("labels", "three_names.txt", "a\nb\nc\n")
put("labels", "binary.txt", bytes(range(256)) * 4)
put("labels", "hundred_thousand_lines.txt", "x\n" * 100000)

# ---- optim (for a toy-rgb8 checkpoint written by train)
d, t_, cpp, m, k = 6, 5, 16, 24, 10
def optim_tensors(bad=None):
    o = {}
    for n, s in {"cls_token": (d,), "pos_embed": (t_, d), "patch_embed.proj.weight": (d, cpp), "patch_embed.proj.bias": (d,),
                 "blocks.0.norm1.weight": (d,), "blocks.0.norm1.bias": (d,), "blocks.0.attn.qkv.weight": (3 * d, d),
                 "blocks.0.attn.qkv.bias": (3 * d,), "blocks.0.attn.proj.weight": (d, d), "blocks.0.attn.proj.bias": (d,),
                 "blocks.0.norm2.weight": (d,), "blocks.0.norm2.bias": (d,), "blocks.0.mlp.fc1.weight": (m, d),
                 "blocks.0.mlp.fc1.bias": (m,), "blocks.0.mlp.fc2.weight": (d, m), "blocks.0.mlp.fc2.bias": (d,),
                 "norm.weight": (d,), "norm.bias": (d,), "head.weight": (k, d), "head.bias": (k,)}.items():
        o["m." + n] = np.zeros(s, np.float32)
        o["v." + n] = np.zeros(s, np.float32)
    return o

put("optim", "step_1e99.optim", mc.safetensors(optim_tensors(), {"step": "1e99", "epoch": "1"}))
put("optim", "epoch_negative.optim", mc.safetensors(optim_tensors(), {"step": "5", "epoch": "-3"}))
put("optim", "epoch_trailing.optim", mc.safetensors(optim_tensors(), {"step": "5", "epoch": "1abc"}))
o = optim_tensors(); o["v.head.bias"] = np.full(k, -1.0, np.float32)
put("optim", "negative_v.optim", mc.safetensors(o, {"step": "5", "epoch": "1"}))
o = optim_tensors(); o["m.head.weight"] = np.zeros((3,), np.float32)
put("optim", "wrong_size.optim", mc.safetensors(o, {"step": "5", "epoch": "1"}))
# ---- pth (whole files, through `info --model`)
def stored_zip(entries):
    import warnings, zipfile
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a duplicate name, on purpose
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
            for name, data in entries:
                z.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()


def X(s):
    return b"X" + struct.pack("<I", len(s)) + s.encode()


def shared(level):  # a TorchScript object whose attributes "a" and "b" are one shared child, 'level' deep
    if level == 0:
        return b"h\x00)\x81"
    return b"h\x00)\x81}(" + X("a") + shared(level - 1) + b"q" + bytes([level]) + X("b") + b"h" + bytes([level]) + b"ub"


ts = b"\x80\x02" + shared(60).replace(b"h\x00", b"c__torch__\nM\nq\x00", 1) + b"."
put("pth", "torchscript_shared_subtree_2pow60.pt",                                           # was: a hang (2^60 paths)
    stored_zip([("archive/data.pkl", ts), ("archive/constants.pkl", b"\x80\x02)."), ("archive/code/__torch__.py", b""),
                ("archive/version", b"3\n")]))
empty_sd = b"\x80\x02}."
put("pth", "duplicate_entry.pth", stored_zip([("archive/data.pkl", empty_sd), ("archive/data.pkl", empty_sd)]))

# Found by the harnesses (kept as they found them, not regenerated here):
#   safetensors/empty_tensor_null_data.safetensors  memcpy(null, ., 0) for a (0, 4) tensor
#   image/png_empty_first_idat.png                 stb: memcpy(NULL, p, 0) for an empty first IDAT chunk
#   npy/zero_dim_then_huge_dims.npy                 shape (0, 999999, 99, 999999999999): xtensor stride overflow
print("regressions written to", OUT)
