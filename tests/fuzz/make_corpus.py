#!/usr/bin/python3
"""Writes the fuzz harnesses' seed corpora: small valid files of every kind
ViTScope reads (numpy and PIL only). Usage: make_corpus.py [OUTDIR]
(default: tests/fuzz/corpus next to this script). Deterministic."""
import gzip, io, json, os, struct, sys

import numpy as np
from PIL import Image

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
rng = np.random.default_rng(0)


def put(harness, name, data):
    d = os.path.join(OUT, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def safetensors(tensors, metadata=None, dtype="F32"):
    """tensors: {name: ndarray}; written sorted, F32 unless `dtype` is F16/BF16/F64."""
    head, blobs, off = {}, [], 0
    if metadata:
        head["__metadata__"] = metadata
    for name in sorted(tensors):
        if isinstance(tensors[name], np.ndarray) and tensors[name].dtype == np.int64:  # an index buffer
            raw = tensors[name].astype("<i8").tobytes()
            head[name] = {"dtype": "I64", "shape": list(tensors[name].shape), "data_offsets": [off, off + len(raw)]}
            blobs.append(raw)
            off += len(raw)
            continue
        a = np.asarray(tensors[name], dtype=np.float32)
        if dtype == "F16":
            raw = a.astype("<f2").tobytes()
        elif dtype == "F64":
            raw = a.astype("<f8").tobytes()
        elif dtype == "BF16":
            raw = (a.astype("<f4").view("<u4") >> 16).astype("<u2").tobytes()
        else:
            raw = a.astype("<f4").tobytes()
        head[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(head, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32) * 0.1


# ---- a toy ViT (D=8, 2 heads, depth 1, mlp 16, 4 classes, 8x8 RGB, patch 4)
D, M, K, C, P, G = 8, 16, 4, 3, 4, 2
T = G * G + 1


def timm(depth=1, classes=K, fc_norm=False):
    t = {"cls_token": r(1, 1, D), "pos_embed": r(1, T, D), "patch_embed.proj.weight": r(D, C, P, P),
         "patch_embed.proj.bias": r(D), "head.weight": r(classes, D), "head.bias": r(classes)}
    ln = "fc_norm." if fc_norm else "norm."
    t[ln + "weight"], t[ln + "bias"] = r(D), r(D)
    for i in range(depth):
        p = f"blocks.{i}."
        t.update({p + "norm1.weight": r(D), p + "norm1.bias": r(D), p + "attn.qkv.weight": r(3 * D, D),
                  p + "attn.qkv.bias": r(3 * D), p + "attn.proj.weight": r(D, D), p + "attn.proj.bias": r(D),
                  p + "norm2.weight": r(D), p + "norm2.bias": r(D), p + "mlp.fc1.weight": r(M, D),
                  p + "mlp.fc1.bias": r(M), p + "mlp.fc2.weight": r(D, M), p + "mlp.fc2.bias": r(D)})
    return t


def huggingface(prefix="vit."):
    t = {prefix + "embeddings.cls_token": r(1, 1, D), prefix + "embeddings.position_embeddings": r(1, T, D),
         prefix + "embeddings.patch_embeddings.projection.weight": r(D, C, P, P),
         prefix + "embeddings.patch_embeddings.projection.bias": r(D),
         prefix + "layernorm.weight": r(D), prefix + "layernorm.bias": r(D),
         "classifier.weight": r(K, D), "classifier.bias": r(K)}
    p = prefix + "encoder.layer.0."
    for s in ("query", "key", "value"):
        t[p + f"attention.attention.{s}.weight"], t[p + f"attention.attention.{s}.bias"] = r(D, D), r(D)
    t.update({p + "attention.output.dense.weight": r(D, D), p + "attention.output.dense.bias": r(D),
              p + "layernorm_before.weight": r(D), p + "layernorm_before.bias": r(D),
              p + "layernorm_after.weight": r(D), p + "layernorm_after.bias": r(D),
              p + "intermediate.dense.weight": r(M, D), p + "intermediate.dense.bias": r(M),
              p + "output.dense.weight": r(D, M), p + "output.dense.bias": r(D)})
    return t


def torchvision(disk=False):
    t = {"class_token": r(1, 1, D), "encoder.pos_embedding": r(1, T, D), "conv_proj.weight": r(D, C, P, P),
         "conv_proj.bias": r(D), "encoder.ln.weight": r(D), "encoder.ln.bias": r(D),
         "heads.head.weight": r(K, D), "heads.head.bias": r(K)}
    p = "encoder.layers.encoder_layer_0."
    f1, f2 = ("mlp.linear_1.", "mlp.linear_2.") if disk else ("mlp.0.", "mlp.3.")
    t.update({p + "ln_1.weight": r(D), p + "ln_1.bias": r(D), p + "self_attention.in_proj_weight": r(3 * D, D),
              p + "self_attention.in_proj_bias": r(3 * D), p + "self_attention.out_proj.weight": r(D, D),
              p + "self_attention.out_proj.bias": r(D), p + "ln_2.weight": r(D), p + "ln_2.bias": r(D),
              p + f1 + "weight": r(M, D), p + f1 + "bias": r(M), p + f2 + "weight": r(D, M), p + f2 + "bias": r(D)})
    return t


cfg = {"name": "toy", "image_size": 8, "channels": 3, "patch": 4, "width": D, "depth": 1, "heads": 2, "mlp": M,
       "classes": K, "eps": 1e-6, "pooling": "cls", "resize": 0, "interp": "bilinear", "mean": [0.5] * 3,
       "std": [0.5] * 3, "class_names": ["a", "b", "c", "d"]}
models = {
    "timm_heads_meta": safetensors(timm(), {"num_heads": "2", "eps": "1e-6"}),
    "timm_config": safetensors(timm(), {"format": "pt", "vitscope.config": json.dumps(cfg), "num_heads": "2",
                                        "class_names": json.dumps(cfg["class_names"])}),
    "timm_fc_norm_f16": safetensors(timm(fc_norm=True), {"heads": "2"}, "F16"),
    "timm_depth2_bf16": safetensors(timm(depth=2), {"num_heads": "4"}, "BF16"),
    "hf_f64": safetensors(huggingface(), {"num_heads": "2"}, "F64"),
    "hf_noprefix": safetensors(huggingface(""), {"num_heads": "2", "eps": "1e-12"}),
    "tv": safetensors(torchvision(), {"num_heads": "2"}),
    "tv_disk": safetensors(torchvision(True), {"num_heads": "2"}),
}
for name, b in models.items():
    put("model", name + ".safetensors", b)
    put("safetensors", name + ".safetensors", b)
put("safetensors", "empty_header.safetensors", safetensors({}))
put("safetensors", "scalar_and_empty.safetensors", safetensors({"s": np.float32(3.0), "e": np.zeros((0, 4))}))
head = {"a": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]},
        "b": {"dtype": "U8", "shape": [3], "data_offsets": [16, 19]}, "__metadata__": {"k": "v"}}
h = json.dumps(head).encode()
put("safetensors", "ints.safetensors", struct.pack("<Q", len(h)) + h + bytes(range(19)))

# ---- .optim for the fuzz harness's toy-rgb8 model made 1-channel as `train` makes it (D=6, T=5, C*P*P=16, M=24, K=10): internal shapes
d, t_, cpp, m, k = 6, 5, 16, 24, 10
shapes = {"cls_token": (d,), "pos_embed": (t_, d), "patch_embed.proj.weight": (d, cpp), "patch_embed.proj.bias": (d,),
          "blocks.0.norm1.weight": (d,), "blocks.0.norm1.bias": (d,), "blocks.0.attn.qkv.weight": (3 * d, d),
          "blocks.0.attn.qkv.bias": (3 * d,), "blocks.0.attn.proj.weight": (d, d), "blocks.0.attn.proj.bias": (d,),
          "blocks.0.norm2.weight": (d,), "blocks.0.norm2.bias": (d,), "blocks.0.mlp.fc1.weight": (m, d),
          "blocks.0.mlp.fc1.bias": (m,), "blocks.0.mlp.fc2.weight": (d, m), "blocks.0.mlp.fc2.bias": (d,),
          "norm.weight": (d,), "norm.bias": (d,), "head.weight": (k, d), "head.bias": (k,)}
optim = {}
for n, s in shapes.items():
    optim["m." + n] = r(*s)
    optim["v." + n] = np.abs(r(*s))
put("optim", "toy.optim", safetensors(optim, {"step": "120", "epoch": "3"}))
put("optim", "toy_f16.optim", safetensors(optim, {"step": "0", "epoch": "0"}, "F16"))

# ---- .npy
for name, a in {"f4_chw": r(3, 8, 8), "f8_2d": r(4, 5).astype(np.float64), "f4_0d": np.float32(1.5),
                "f4_empty": np.zeros((0, 3), np.float32), "f4_1d": r(7)}.items():
    buf = io.BytesIO()
    np.save(buf, a)
    put("npy", name + ".npy", buf.getvalue())
buf = io.BytesIO()
np.lib.format.write_array(buf, r(2, 3), version=(2, 0))
put("npy", "v2.npy", buf.getvalue())

# ---- images
def img_bytes(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()

rgb = Image.fromarray((rng.random((12, 10, 3)) * 255).astype(np.uint8), "RGB")
gray = rgb.convert("L")
put("image", "rgb.png", img_bytes(rgb, "PNG"))
put("image", "gray.png", img_bytes(gray, "PNG"))
put("image", "rgba.png", img_bytes(rgb.convert("RGBA"), "PNG"))
put("image", "la.png", img_bytes(rgb.convert("LA"), "PNG"))
put("image", "palette.png", img_bytes(rgb.convert("P"), "PNG"))
put("image", "gray16.png", img_bytes(Image.fromarray((rng.random((6, 5)) * 65535).astype(np.uint16)), "PNG"))
put("image", "rgb.jpg", img_bytes(rgb, "JPEG", quality=90))
put("image", "gray.jpg", img_bytes(gray, "JPEG", quality=90))
put("image", "progressive.jpg", img_bytes(rgb, "JPEG", quality=80, progressive=True))
put("image", "subsampled.jpg", img_bytes(Image.fromarray((rng.random((17, 23, 3)) * 255).astype(np.uint8)), "JPEG", subsampling=2))
put("image", "rgb.bmp", img_bytes(rgb, "BMP"))
put("image", "gray.bmp", img_bytes(gray, "BMP"))
put("image", "palette.bmp", img_bytes(rgb.convert("P"), "BMP"))
topdown = bytearray(img_bytes(rgb, "BMP"))
topdown[22:26] = struct.pack("<i", -12)  # negative height: rows stored top-down
put("image", "topdown.bmp", bytes(topdown))

# ---- IDX: 2 bytes saying where the image file ends, then images, then labels
def idx_pair(n, rows, cols, gz_images=False, gz_labels=False):
    im = struct.pack(">IIII", 0x803, n, rows, cols) + bytes(rng.integers(0, 256, n * rows * cols, dtype=np.uint8))
    lb = struct.pack(">II", 0x801, n) + bytes(rng.integers(0, 10, n, dtype=np.uint8))
    if gz_images:
        im = gzip.compress(im, mtime=0)
    if gz_labels:
        lb = gzip.compress(lb, mtime=0)
    return struct.pack("<H", len(im)) + im + lb

put("idx", "plain", idx_pair(3, 4, 4))
put("idx", "gz_images", idx_pair(2, 28, 28, gz_images=True))
put("idx", "gz_both", idx_pair(4, 5, 3, True, True))
put("idx", "empty", idx_pair(0, 2, 2))

# ---- labels
put("labels", "ten.txt", "\n".join(["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                                     "Sneaker", "Bag", "Ankle boot"]).encode() + b"\n")
put("labels", "crlf.txt", b"\r\n".join(b"class %d " % i for i in range(10)) + b"\r\n")
put("labels", "utf8.txt", "\n".join(f"Klasse {i} \u00e4\u00f6\u00fc \u732b" for i in range(10)).encode())
# ---- config files beside a checkpoint (config.json of Hugging Face / timm / open_clip, preprocessor_config.json)
def js(obj):
    return json.dumps(obj, indent=2).encode()

put("hfconfig", "dinov2.json", js({
    "architectures": ["Dinov2Model"], "hidden_act": "gelu", "hidden_size": 384, "image_size": 518,
    "layer_norm_eps": 1e-06, "layerscale_value": 1.0, "mlp_ratio": 4, "model_type": "dinov2",
    "num_attention_heads": 6, "num_channels": 3, "num_hidden_layers": 12, "patch_size": 14, "qkv_bias": True,
    "use_swiglu_ffn": False}))
put("hfconfig", "dinov2_reg.json", js({
    "architectures": ["Dinov2WithRegistersModel"], "hidden_size": 768, "image_size": 518, "mlp_ratio": 4,
    "model_type": "dinov2_with_registers", "num_attention_heads": 12, "num_hidden_layers": 12,
    "num_register_tokens": 4, "patch_size": 14, "layer_norm_eps": 1e-06}))
put("hfconfig", "clip_model.json", js({
    "architectures": ["CLIPModel"], "model_type": "clip", "projection_dim": 512,
    "text_config": {"hidden_size": 512, "model_type": "clip_text_model", "vocab_size": 49408},
    "vision_config": {"hidden_act": "quick_gelu", "hidden_size": 768, "image_size": 224, "intermediate_size": 3072,
                      "layer_norm_eps": 1e-05, "model_type": "clip_vision_model", "num_attention_heads": 12,
                      "num_hidden_layers": 12, "patch_size": 32, "projection_dim": 512}}))
put("hfconfig", "siglip_vision.json", js({
    "architectures": ["SiglipVisionModel"], "hidden_act": "gelu_pytorch_tanh", "hidden_size": 768,
    "image_size": 224, "intermediate_size": 3072, "layer_norm_eps": 1e-06, "model_type": "siglip_vision_model",
    "num_attention_heads": 12, "num_hidden_layers": 12, "patch_size": 16, "vision_use_head": True}))
put("hfconfig", "deit.json", js({
    "architectures": ["DeiTForImageClassificationWithTeacher"], "hidden_size": 192, "model_type": "deit",
    "id2label": {"0": "tench", "1": "goldfish", "2": "great white shark"}, "layer_norm_eps": 1e-12,
    "num_attention_heads": 3, "num_hidden_layers": 12, "intermediate_size": 768, "image_size": [224, 224]}))
put("hfconfig", "timm.json", js({
    "architecture": "vit_small_patch14_reg4_dinov2", "num_classes": 0, "num_features": 384, "global_pool": "token",
    "model_args": {"img_size": 518, "patch_size": 14, "embed_dim": 384, "depth": 12, "num_heads": 6,
                   "init_values": 1e-05, "reg_tokens": 4, "no_embed_class": True},
    "label_names": ["a", "b"],
    "pretrained_cfg": {"input_size": [3, 518, 518], "interpolation": "bicubic", "crop_pct": 1.0,
                       "crop_mode": "center", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}}))
put("hfconfig", "open_clip.json", js({
    "model_cfg": {"embed_dim": 512, "quick_gelu": True,
                  "vision_cfg": {"image_size": 224, "layers": 12, "width": 768, "patch_size": 32,
                                 "norm_kwargs": {"eps": 1e-05}},
                  "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 512, "heads": 8, "layers": 12}},
    "preprocess_cfg": {"mean": [0.48145466, 0.4578275, 0.40821073], "std": [0.26862954, 0.26130258, 0.27577711],
                       "interpolation": "bicubic", "resize_mode": "shortest", "size": 224}}))
put("hfconfig", "preprocessor_clip.json", js({
    "crop_size": {"height": 224, "width": 224}, "do_center_crop": True, "do_convert_rgb": True, "do_normalize": True,
    "do_rescale": True, "do_resize": True, "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_processor_type": "CLIPImageProcessor", "image_std": [0.26862954, 0.26130258, 0.27577711], "resample": 3,
    "rescale_factor": 0.00392156862745098, "size": {"shortest_edge": 224}}))
put("hfconfig", "preprocessor_old.json", js({
    "crop_size": 224, "do_center_crop": True, "do_normalize": True, "do_resize": True,
    "feature_extractor_type": "CLIPFeatureExtractor", "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
    "resample": 3, "size": 224}))
put("hfconfig", "preprocessor_siglip.json", js({
    "do_normalize": True, "do_rescale": True, "do_resize": True, "image_mean": [0.5, 0.5, 0.5],
    "image_processor_type": "SiglipImageProcessor", "image_std": [0.5, 0.5, 0.5], "resample": 3,
    "rescale_factor": 0.00392156862745098, "size": {"height": 384, "width": 384}}))

put("labels", "terminal_escapes.txt", "\n".join(["\x1b[2J\x1b[31mred", "bell\x07", "\u0085c1 control", "back\\slash",
                                                  "cr\rhidden", "ok", "\xe4\xf6", "7", "8", "9"]).encode("utf-8", "surrogatepass"))

# ---- issue 23: the harnesses that joined then, seeded with the issue's cases (scaled to fit
# libFuzzer's 64 KB max_len where the originals are larger)

# pickle: data.pkl alone (fuzz_pickle.cpp wraps it in a zip beside storages "0": 4096 float32,
# "1": 4096 float16, "2": one int64). Pickled as torch.save does, without torch: stand-in
# modules give the globals their torch names.
import collections, pickle, sys, types
torch_mod, utils_mod = types.ModuleType("torch"), types.ModuleType("torch._utils")
class FloatStorage: pass
class HalfStorage: pass
class LongStorage: pass
for cls in (FloatStorage, HalfStorage, LongStorage):
    cls.__module__, cls.__qualname__ = "torch", cls.__name__
    setattr(torch_mod, cls.__name__, cls)
def _rebuild_tensor_v2(*a): pass
_rebuild_tensor_v2.__module__ = "torch._utils"
utils_mod._rebuild_tensor_v2 = _rebuild_tensor_v2
torch_mod._utils = utils_mod
sys.modules["torch"], sys.modules["torch._utils"] = torch_mod, utils_mod

class Storage:
    def __init__(self, key, numel, stype):
        self.key, self.numel, self.stype = key, numel, stype
class View:
    def __init__(self, storage, offset, size, stride=None):
        if stride is None:
            stride, acc = [], 1
            for d in reversed(size):
                stride.insert(0, acc)
                acc *= d
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride
    def __reduce_ex__(self, proto):
        return (_rebuild_tensor_v2, (self.storage, self.offset, tuple(self.size), tuple(self.stride), False,
                                     collections.OrderedDict()))
class TorchLike(pickle.Pickler):
    def persistent_id(self, obj):
        return ("storage", obj.stype, obj.key, "cpu", obj.numel) if isinstance(obj, Storage) else None
def pkl(obj):
    b = io.BytesIO()
    TorchLike(b, protocol=2).dump(obj)
    return b.getvalue()

F32, F16, I64 = Storage("0", 4096, FloatStorage), Storage("1", 4096, HalfStorage), Storage("2", 1, LongStorage)
def state_dict(store, rename=lambda k: k):
    sd, off = collections.OrderedDict(), 0
    for name, a in timm().items():
        sd[rename(name)] = View(store, off, list(a.shape))
        off += a.size
    return sd
put("pickle", "timm_f32.pkl", pkl(state_dict(F32)))
put("pickle", "timm_f16.pkl", pkl(state_dict(F16)))
put("pickle", "wrapped_module.pkl", pkl({"model": state_dict(F32, lambda k: "module." + k), "epoch": 3,
                                         "step": View(I64, 0, [])}))
shared = state_dict(F32)
shared["head.weight"] = View(F32, 7, [K, D], [1, K])  # a transposed view, overlapping others
put("pickle", "views_shared.pkl", pkl(shared))
# the issue's cases: MEMOIZE after MEMOIZE (the memo bomb), MARK only, BINGET onto the stack,
# and one 64-dimensional view rebuilt again and again from memoized arguments
put("pickle", "memo_bomb.pkl", b"\x80\x02N" + b"\x94" * 65000 + b".")
put("pickle", "mark_only.pkl", b"\x80\x02" + b"(" * 65000 + b"N.")
put("pickle", "binget_stack.pkl", b"\x80\x02N\x94" + b"h\x00" * 32000 + b".")
class SharedArgsView:  # every rebuild from the same memoized 64-dimensional arguments
    args = None
    def __reduce_ex__(self, proto):
        if SharedArgsView.args is None:
            SharedArgsView.args = (F32, 0, (1,) * 64, (1,) * 64, False, collections.OrderedDict())
        return (_rebuild_tensor_v2, SharedArgsView.args)
put("pickle", "view_bomb.pkl", pkl([SharedArgsView() for _ in range(5000)]))
# A TorchScript module tree (fuzz_pickle.cpp adds code/ and constants.pkl when the pickle names
# __torch__): objects created empty by NEWOBJ and filled by BUILD, one block shared by two
# parents, and a chain of 12 levels that each hold one child twice (4,096 paths through the memo).
ts_mod = types.ModuleType("__torch__")
class Module:
    pass
Module.__module__, Module.__qualname__ = "__torch__", "Module"
ts_mod.Module = Module
sys.modules["__torch__"] = ts_mod
def module(**attrs):
    m = Module()
    m.__dict__.update(attrs)
    return m
chain = module(w=View(F32, 100, [4]))
for _ in range(12):
    chain = module(a=chain, b=chain, training=False)
block = module(ln_1=module(weight=View(F32, 0, [8]), bias=View(F32, 8, [8])), attn=module(in_proj_weight=View(F16, 0, [24, 8])))
put("pickle", "torchscript_tree.pkl", pkl(module(visual=module(conv1=module(weight=View(F32, 16, [8, 3, 2, 2])),
                                                                  b0=block, b1=block, chain=chain),
                                                 input_resolution=View(I64, 0, []), training=False)))

# model: NaN and Inf in the weights (loaded, and named); a config whose resize (8192) is not
# related to its image size (8)
nan_w = timm()
nan_w["blocks.0.attn.qkv.weight"][0, 0], nan_w["blocks.0.attn.qkv.weight"][1, 1], nan_w["head.bias"][2] = np.nan, np.inf, -np.inf
for name, b in {"timm_nan_inf": safetensors(nan_w, {"num_heads": "2"}),
                "timm_config_resize_8192": safetensors(timm(), {"vitscope.config": json.dumps(dict(cfg, resize=8192)),
                                                                 "num_heads": "2"})}.items():
    put("model", name + ".safetensors", b)
    put("safetensors", name + ".safetensors", b)

# settings: a good file, unknown keys, bad fields, and the issue's deep nesting (30,000 levels here)
put("settings", "good.json", json.dumps({"version": 1, "recent_models": ["vit-s16", "/m/a.pth"],
    "recent_images": ["/i/a.png"], "options": {"affine": False, "unbiased": True, "pooling": "mean"},
    "view": {"overlay": "rollout", "opacity": 0.5, "fusion": "max", "discard": 0.9, "scale": "slice"}}, indent=2).encode())
put("settings", "unknown_keys.json", b'{"version": 2, "future": {"a": [1, 2, {"b": null}]}, "n": 1.50, "s": "x\\u00e4"}')
put("settings", "bad_fields.json", b'{"recent_models": ["", 7], "options": {"pooling": "max"}, "view": {"opacity": 2}}')
put("settings", "deep_arrays.json", b"[" * 30000 + b"]" * 30000)
put("settings", "deep_under_key.json", b'{"x": ' + b"[" * 30000 + b"]" * 30000 + b"}")

# input: (3, 8, 8) for toy-rgb8, the wrong shape, NaN and Inf in it
def npy_bytes(a):
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()
put("input", "good.npy", npy_bytes(r(3, 8, 8)))
put("input", "wrong_shape.npy", npy_bytes(r(3, 8, 9)))
nan_in = r(3, 8, 8)
nan_in[0, 1, 2], nan_in[2, 7, 7], nan_in[1, 0, 0] = np.nan, np.inf, -np.inf
put("input", "nan_inf.npy", npy_bytes(nan_in))
put("input", "f8.npy", npy_bytes(r(3, 8, 8).astype(np.float64)))

# image_full: the corpus of the image harness, and the issue's extreme aspect ratios and sizes
for name in sorted(os.listdir(os.path.join(OUT, "image"))):
    put("image_full", name, open(os.path.join(OUT, "image", name), "rb").read())
put("image_full", "wide_16384x4.png", img_bytes(Image.fromarray(np.zeros((4, 16384, 3), np.uint8)), "PNG", optimize=True))
put("image_full", "wide_16384x1.png", img_bytes(Image.fromarray((np.arange(16384) % 256).astype(np.uint8)[None, :]), "PNG", optimize=True))
put("image_full", "tall_16x16384.png", img_bytes(Image.fromarray(np.zeros((16384, 16), np.uint8)), "PNG", optimize=True))
# 16384 x 16384 1-bit gray (268 MP, scaled down while read): 33 MB of zlib'd zeros in ~33 KB
put("image_full", "big_16384x16384_1bit.png", img_bytes(Image.new("1", (16384, 16384)), "PNG", optimize=True))
def interlaced_png(px):  # Adam7, filter 0 on every scanline (PIL cannot write interlaced PNGs)
    h, w, _ = px.shape
    raw = b""
    for x0, y0, dx, dy in [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]:
        if x0 >= w or y0 >= h:
            continue
        for y in range(y0, h, dy):
            raw += b"\0" + px[y, x0::dx].tobytes()
    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xffffffff)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 1)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
import zlib
put("image_full", "interlaced.png", interlaced_png(np.asarray(rgb)))
put("image", "interlaced.png", interlaced_png(np.asarray(rgb)))

# ---- the families' layouts (core/io/layouts.cpp) for the model harness: the toy shapes under each
# layout's names, heads in __metadata__ (no config file reaches the harness)
def blocks_timm(prefix, depth=1, ls=False, mlp=("fc1", "fc2")):
    t = {}
    for i in range(depth):
        p = f"{prefix}{i}."
        t.update({p + "norm1.weight": r(D), p + "norm1.bias": r(D), p + "attn.qkv.weight": r(3 * D, D),
                  p + "attn.qkv.bias": r(3 * D), p + "attn.proj.weight": r(D, D), p + "attn.proj.bias": r(D),
                  p + "norm2.weight": r(D), p + "norm2.bias": r(D), p + f"mlp.{mlp[0]}.weight": r(M, D),
                  p + f"mlp.{mlp[0]}.bias": r(M), p + f"mlp.{mlp[1]}.weight": r(D, M if mlp[0] == "fc1" else M // 2),
                  p + f"mlp.{mlp[1]}.bias": r(D)})
        if ls:
            t[p + "ls1.gamma"], t[p + "ls2.gamma"] = r(D), r(D)
    return t


heads2 = {"num_heads": "2"}
deit = {"cls_token": r(1, 1, D), "dist_token": r(1, 1, D), "pos_embed": r(1, T + 1, D),
        "patch_embed.proj.weight": r(D, C, P, P), "patch_embed.proj.bias": r(D), "norm.weight": r(D), "norm.bias": r(D),
        "head.weight": r(K, D), "head.bias": r(K), "head_dist.weight": r(K, D), "head_dist.bias": r(K)}
deit.update(blocks_timm("blocks."))
put("model", "deit_timm.safetensors", safetensors(deit, heads2))
dv2 = {"cls_token": r(1, 1, D), "pos_embed": r(1, T, D), "mask_token": r(1, D), "register_tokens": r(1, 4, D),
       "patch_embed.proj.weight": r(D, C, P, P), "patch_embed.proj.bias": r(D), "norm.weight": r(D), "norm.bias": r(D)}
dv2.update(blocks_timm("blocks.", ls=True, mlp=("w12", "w3")))
put("model", "dinov2_reg_swiglu.safetensors", safetensors(dv2, heads2))
dino = {"backbone." + k: v for k, v in timm(classes=K).items() if not k.startswith("head.")}
dino["head.last_layer.weight_g"] = r(4, 1)
put("model", "dino_teacher.safetensors", safetensors(dino, heads2))
mae = {k: v for k, v in timm().items() if not k.startswith("head.")}
mae.update({"mask_token": r(1, 1, 4), "decoder_embed.weight": r(4, D), "decoder_pred.weight": r(C * P * P, 4)})
put("model", "mae_pretrain.safetensors", safetensors(mae, heads2))
clip = {"visual.class_embedding": r(D), "visual.positional_embedding": r(T, D), "visual.conv1.weight": r(D, C, P, P),
        "visual.ln_pre.weight": r(D), "visual.ln_pre.bias": r(D), "visual.ln_post.weight": r(D),
        "visual.ln_post.bias": r(D), "visual.proj": r(D, 4), "logit_scale": r(), "token_embedding.weight": r(5, D),
        "input_resolution": np.array(8, dtype=np.int64)}
p_ = "visual.transformer.resblocks.0."
clip.update({p_ + "ln_1.weight": r(D), p_ + "ln_1.bias": r(D), p_ + "attn.in_proj_weight": r(3 * D, D),
             p_ + "attn.in_proj_bias": r(3 * D), p_ + "attn.out_proj.weight": r(D, D), p_ + "attn.out_proj.bias": r(D),
             p_ + "ln_2.weight": r(D), p_ + "ln_2.bias": r(D), p_ + "mlp.c_fc.weight": r(M, D), p_ + "mlp.c_fc.bias": r(M),
             p_ + "mlp.c_proj.weight": r(D, M), p_ + "mlp.c_proj.bias": r(D)})
put("model", "clip_openai.safetensors", safetensors(clip, heads2, "F16"))
sig = {"vision_model.embeddings.patch_embedding.weight": r(D, C, P, P), "vision_model.embeddings.patch_embedding.bias": r(D),
       "vision_model.embeddings.position_embedding.weight": r(T - 1, D), "vision_model.post_layernorm.weight": r(D),
       "vision_model.post_layernorm.bias": r(D), "vision_model.head.probe": r(1, 1, D),
       "vision_model.head.attention.in_proj_weight": r(3 * D, D), "vision_model.head.attention.in_proj_bias": r(3 * D),
       "vision_model.head.attention.out_proj.weight": r(D, D), "vision_model.head.attention.out_proj.bias": r(D),
       "vision_model.head.layernorm.weight": r(D), "vision_model.head.layernorm.bias": r(D),
       "vision_model.head.mlp.fc1.weight": r(M, D), "vision_model.head.mlp.fc1.bias": r(M),
       "vision_model.head.mlp.fc2.weight": r(D, M), "vision_model.head.mlp.fc2.bias": r(D)}
p_ = "vision_model.encoder.layers.0."
for n in ("q", "k", "v", "out"):
    sig[p_ + f"self_attn.{n}_proj.weight"], sig[p_ + f"self_attn.{n}_proj.bias"] = r(D, D), r(D)
sig.update({p_ + "layer_norm1.weight": r(D), p_ + "layer_norm1.bias": r(D), p_ + "layer_norm2.weight": r(D),
            p_ + "layer_norm2.bias": r(D), p_ + "mlp.fc1.weight": r(M, D), p_ + "mlp.fc1.bias": r(M),
            p_ + "mlp.fc2.weight": r(D, M), p_ + "mlp.fc2.bias": r(D)})
put("model", "siglip_hf.safetensors", safetensors(sig, heads2))

print("corpus written to", OUT)
