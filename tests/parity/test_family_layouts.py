#!/usr/bin/python3
"""The checkpoint loaders of every family and layout (issue 20 item 1), against the PyTorch
references of tests/parity/families.py.

families.py --write DIR writes every layout's files as the real checkpoints come (safetensors,
torch.save .pth/.bin, the full DINO checkpoint, OpenAI's TorchScript archive), with the
config.json / preprocessor_config.json / open_clip_config.json the real repositories ship. Each
weights file is opened by vitscope-cli as a user would (--model FILE; --heads only where neither
the file, a config beside it nor a published shape says): `info` must name the family and its
parts, the loader's whole Config (tests/config_tool.cpp load) must be the fixture's (family parts,
sizes, eps, activation, position rule, class names, preprocessing), and `trace` at the native size
and at a non-square other size must equal the reference at EVERY stage of the model's stage table
(test_parity.check fails on any stage not compared). Then the refusals: a family's file with a
tensor missing or misshaped, other families' key names (Swin, BEiT, EVA, ConvNeXt, CLIP ResNet),
TorchScript archives with something unexpected, a config.json of another model, a CLIP state dict
whose activation nothing states; each must exit 1 naming the file and the tensor or family.

    test_family_layouts.py --cli build/vitscope-cli --tool build/tests/vitscope_config_tool --workdir DIR
"""
import argparse
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families  # noqa: E402
import test_parity  # noqa: E402

FAIL = []
N = [0]

IMAGENET = (families.IMAGENET_MEAN, families.IMAGENET_STD)
OPENAI = (families.OPENAI_MEAN, families.OPENAI_STD)
HALF = ([0.5] * 3, [0.5] * 3)
# What each layout's files (and the configs beside them) say about preprocessing, written out by
# hand from the processors: (mean/std, resize, squash, interpolation). Native side 20.
PRE = {
    "deit_timm": (IMAGENET, 22, False, "bicubic"),        # timm crop_pct 0.875: floor(20 / 0.875)
    "deit_hf": (IMAGENET, 23, True, "bicubic"),           # DeiTImageProcessor: 23 x 23, then crop 20
    "dino": (IMAGENET, 22, False, "bicubic"),             # dino eval: resize 256, crop 224
    "dinov2": (IMAGENET, 22, False, "bicubic"),
    "dinov2_reg": (IMAGENET, 22, False, "bicubic"),
    "dinov2_swiglu": (IMAGENET, 22, False, "bicubic"),
    "dinov2_timm": (IMAGENET, 20, False, "bicubic"),      # timm crop_pct 1.0
    "dinov2_timm_reg": (IMAGENET, 20, False, "bicubic"),
    "dinov2_hf": (IMAGENET, 23, False, "bicubic"),        # BitImageProcessor: shortest edge 23, crop 20
    "dinov2_reg_hf": (IMAGENET, 23, False, "bicubic"),
    "dinov2_swiglu_hf": (IMAGENET, 23, False, "bicubic"),
    "clip_openai": (OPENAI, 20, False, "bicubic"),        # clip _transform: Resize(n_px, BICUBIC), CenterCrop
    "open_clip_quickgelu": (OPENAI, 20, False, "bicubic"),
    "open_clip_gelu": (OPENAI, 20, False, "bicubic"),
    "clip_hf_vision": (OPENAI, 20, False, "bicubic"),     # CLIPImageProcessor: shortest edge 20, crop 20
    "clip_hf_vision_proj": (OPENAI, 20, False, "bicubic"),
    "clip_hf_model": (OPENAI, 20, False, "bicubic"),
    "siglip_hf_vision": (HALF, 0, True, "bicubic"),       # SiglipImageProcessor: straight to 20 x 20
    "siglip_hf_model": (HALF, 0, True, "bicubic"),
    "mae": (IMAGENET, 22, False, "bicubic"),
    "vit_reg4_gap_timm": (IMAGENET, 21, False, "bicubic"),  # timm crop_pct 0.95: floor(20 / 0.95)
    "vit_gap_timm": (IMAGENET, 21, False, "bicubic"),       # timm crop_pct 0.95: floor(20 / 0.95)
    "dinov3": (IMAGENET, 256, False, "bicubic"),            # dinov3 classification eval: resize 256, crop 224
    "dinov3_hf": (IMAGENET, 0, True, "bilinear"),           # DINOv3ViTImageProcessorFast: straight to 20 x 20
    "dinov3_timm": (IMAGENET, 20, False, "bicubic"),        # timm _dinov3_cfg: ImageNet mean / std, crop_pct 1.0
    "aimv2_timm": (OPENAI, 20, False, "bicubic"),           # timm aimv2_*.apple_pt: OPENAI_CLIP_MEAN, crop_pct 1.0
    # no config beside Apple's weights here: AIMv2's own preprocessing, as timm's pretrained_cfg states it (Apple's
    # hub preprocessor_config.json, a CLIPImageProcessor, says the same; ml-aim's README uses aim.v1's
    # val_transforms instead: ImageNet mean / std, resize ceil(S / 0.875))
    "aimv2_apple": (OPENAI, 20, False, "bicubic"),
    "eva02_timm": (OPENAI, 20, False, "bicubic"),           # timm eva02_*.mim_in22k_ft_in1k: OPENAI_CLIP_MEAN, crop 1.0
    "eva02_timm_mim": (OPENAI, 22, False, "bicubic"),       # timm eva02_*.mim_in22k: eva.py _cfg's crop_pct 0.9
    "eva02_base_timm": (OPENAI, 20, False, "bicubic"),      # timm eva02_base_patch14_448.mim_in22k_ft_in1k: crop 1.0
    "pe_core_timm": (HALF, 20, False, "bicubic"),           # timm _pe_cfg (vit_pe_core_*.fb): mean / std 0.5, crop 1.0
    "pe_core_timm_proj": (HALF, 20, False, "bicubic"),      # the same, with PE's projection (head.weight)
    # no config beside Meta's release: PE's own preprocessing (perception_models transforms.py: resize to the image
    # size, bicubic, mean / std 0.5; timm's _pe_cfg states the same: crop 1.0)
    "pe_core_meta": (HALF, 20, False, "bicubic"),
    "pe_core_open_clip": (HALF, 20, False, "bicubic"),      # its open_clip_config.json: 0.5, bicubic, shortest edge
}
FAMILY_LABEL = {"vit": "ViT", "deit": "DeiT", "dino": "DINO", "dinov2": "DINOv2", "clip": "CLIP", "siglip": "SigLIP", "mae": "MAE",
                "dinov3": "DINOv3", "aimv2": "AIMv2", "eva02": "EVA-02", "pe": "PE"}
LAYOUT = {"deit_timm": "timm", "deit_hf": "huggingface", "dino": "facebookresearch", "dinov2": "facebookresearch",
          "dinov2_reg": "facebookresearch", "dinov2_swiglu": "facebookresearch", "dinov2_timm": "timm",
          "dinov2_timm_reg": "timm", "dinov2_hf": "huggingface", "dinov2_reg_hf": "huggingface",
          "dinov2_swiglu_hf": "huggingface", "clip_openai": "openai", "open_clip_quickgelu": "open_clip",
          "open_clip_gelu": "open_clip", "clip_hf_vision": "huggingface", "clip_hf_vision_proj": "huggingface",
          "clip_hf_model": "huggingface", "siglip_hf_vision": "huggingface", "siglip_hf_model": "huggingface",
          "mae": "facebookresearch", "vit_reg4_gap_timm": "timm", "vit_gap_timm": "timm", "dinov3": "facebookresearch",
          "dinov3_hf": "huggingface", "dinov3_timm": "timm", "aimv2_timm": "timm", "aimv2_apple": "apple",
          "eva02_timm": "timm", "eva02_timm_mim": "timm", "eva02_base_timm": "timm",
          "pe_core_timm": "timm", "pe_core_timm_proj": "timm", "pe_core_meta": "facebookresearch",
          "pe_core_open_clip": "open_clip"}


def ok(cond, label, detail=""):
    N[0] += 1
    if not cond:
        FAIL.append(label)
        print(f"FAIL {label}" + (f"\n     {detail.strip()[:1500]}" if detail else ""))
    return cond


def run(*args):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True)


def expected_config(s):
    """The config the loader must find for spec s (config_to_json's field names)."""
    (mean, std), resize, squash, interp = PRE[s.layout]
    want = dict(families.config_fields(s), mean=mean, std=std, resize=resize, squash=squash, interp=interp,
                class_names=families.LABELS[:s.classes] if s.classes else [])
    if s.layout == "dinov3":  # no table nor config tells the size: DINOv3's default 224 (resize 256)
        want.update(image_size=224, resize=256)
    return want


def same(a, b):
    if isinstance(b, float):
        return isinstance(a, (int, float)) and abs(a - b) <= 1e-6 * abs(b)
    if isinstance(b, list) and b and isinstance(b[0], float):
        return isinstance(a, list) and len(a) == len(b) and all(abs(x - y) <= 1e-6 for x, y in zip(a, b))
    return a == b


def weights_files(entry):
    return [f["file"] for f in entry["files"] if f["what"] != "config" and not f["file"].endswith(".json")]


def needs_heads(layout, entry):
    """Layouts whose files carry no config and are no published shape (the fixtures are tiny):
    the user must say --heads. CLIP's OpenAI files follow OpenAI's width / 64 rule; DINOv3's RoPE
    periods (head width / 4 of them) state the head width. open_clip's PE-Core config names a timm tower
    (timm_model_name: the registered model's shapes, not the tiny fixture's) and states no width nor heads."""
    if layout == "pe_core_open_clip":
        return True
    return layout not in ("clip_openai", "dinov3") and not any(f["file"].endswith(".json") for f in entry["files"])


def check_layout(a, root, layout, entry, xs):
    s = families.SPEC[layout]
    d = os.path.join(root, layout)
    refs = {size: {k: torch.from_numpy(v) for k, v in np.load(os.path.join(d, entry["refs"][size])).items()}
            for size in ("native", "other")}
    want = expected_config(s)
    heads = needs_heads(layout, entry)
    for fname in weights_files(entry):
        path = os.path.join(d, fname)
        label = f"{layout}/{fname}"
        flags = ["--heads", str(s.heads)] if heads else []
        if heads:  # never guessed: without --heads, the error says so
            r = run(a.cli, "info", "--model", path)
            ok(r.returncode == 1 and path in r.stderr and "--heads N" in r.stderr,
               f"{label}: without --heads, exit 1 naming the file and --heads N", r.stderr)
        r = run(a.cli, "info", "--model", path, *flags)
        if not ok(r.returncode == 0, f"{label}: info exits 0", r.stderr):
            continue
        fam_label = FAMILY_LABEL[s.family]
        ok(f"family: {LAYOUT[layout]}\n" in r.stdout, f"{label}: info names the layout {LAYOUT[layout]}", r.stdout)
        ok("\nlayout: " in r.stdout, f"{label}: info says what the file is", r.stdout)
        if layout == "dinov3":  # the head count from the periods, said; the K bias mask said
            ok(f"heads: {s.heads} (from rope_embed.periods" in r.stdout, f"{label}: info says the heads come from "
               "rope_embed.periods", r.stdout)
            ok("bias_mask" in r.stdout, f"{label}: info says the q/k/v bias is masked", r.stdout)
        if layout == "mae":  # what the loader ignored is said, not dropped silently
            ok("\nnote: MAE's decoder (decoder_*)" in r.stdout and "ignored (" in r.stdout,
               f"{label}: info notes the ignored decoder", r.stdout)
        ok((", classes " in r.stdout) == (s.head in ("cls", "mean", "distilled")), f"{label}: classes counted only where there is a classifier", r.stdout)
        ok(f"family {fam_label} (" in r.stdout and f"width {s.D}, depth {s.depth}, heads {s.heads} " in r.stdout,
           f"{label}: info's config is {fam_label}, width {s.D}, depth {s.depth}, {s.heads} heads", r.stdout)
        r = run(a.tool, "load", path, *( [str(s.heads)] if heads else []))
        if not ok(r.returncode == 0, f"{label}: the loader reads it", r.stderr):
            continue
        got = json.loads(r.stdout)
        cfg = got["config"]
        wrong = [f"{k}: {cfg.get(k)!r}, expected {v!r}" for k, v in want.items() if not same(cfg.get(k), v)]
        ok(not wrong, f"{label}: the loaded config is the fixture's", "; ".join(wrong))
        hf = got["heads_from"]
        if heads:
            ok(hf == "--heads", f"{label}: heads from --heads", hf)
        elif layout == "clip_openai":
            ok(hf.startswith("width / 64: OpenAI CLIP's rule"), f"{label}: heads by OpenAI's width / 64 rule, said so", hf)
        elif layout == "dinov3":
            d_head = s.D // s.heads
            ok(hf == f"rope_embed.periods ({d_head // 4} periods: head width {d_head})",
               f"{label}: heads from RoPE's periods, said so", hf)
        else:
            ok(os.path.join(d, "") in hf and ".json" in hf, f"{label}: heads from the config beside it", hf)
        if s.classes:
            ok(got["labels_from"].startswith(os.path.join(d, "config.json")),
               f"{label}: class names from its config.json", got["labels_from"])
        for ignored in entry["ignored_keys"]:
            stem = ignored.rstrip("._")
            ok(any("ignored" in n for n in got["notes"]) and got["notes"],
               f"{label}: the parts it ignores ({stem}, ...) are said in a note", json.dumps(got["notes"]))
            break
        ok("vitscope.preprocess_note" not in got["metadata"], f"{label}: every preprocessing setting followed",
           got["metadata"].get("vitscope.preprocess_note", ""))
        # every stage of the stage table, at both sizes
        for size, x in xs.items():
            inp = os.path.join(d, entry["inputs"][size])
            out = os.path.join(a.workdir, "traces", f"{layout}_{fname}_{size}.npz")
            r = run(a.cli, "trace", "--model", path, "--input", inp, "--out", out, *flags)
            if not ok(r.returncode == 0, f"{label} {size}: trace exits 0", r.stderr):
                continue
            hw = f"{x.shape[1]},{x.shape[2]}"
            t = run(a.cli, "info", "--model", path, "--stage-table", "--image-size", hw, *flags)
            if not ok(t.returncode == 0, f"{label} {size}: info --stage-table exits 0", t.stderr):
                continue
            table = json.loads(t.stdout)
            with np.load(out) as z:
                ours = {k: z[k] for k in z.files}
            last = "probs" if entry["last_stage"] == "logits" else entry["last_stage"]
            ok(table[-1]["name"] == last, f"{label}: the model ends in {entry['last_stage']}", table[-1]["name"])
            N[0] += 1
            test_parity.check(f"{label} {size} {x.shape[1]}x{x.shape[2]}", ours, refs[size], table, fail=FAIL)


# ------------------------------------------------------------------ refusals

def read_any(path):
    """{name: tensor} of a safetensors (F32/F16/I64) or torch.save file, and its __metadata__."""
    if path.endswith(".safetensors"):
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            data = f.read()
        meta = header.pop("__metadata__", None)
        dt = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
        out = {}
        for k, v in header.items():
            b, e = v["data_offsets"]
            out[k] = torch.from_numpy(np.frombuffer(data[b:e], dt[v["dtype"]]).reshape(v["shape"]).copy())
        return out, meta
    return torch.load(path), None


def copy_dir_with(src_dir, dst_dir, fname, tensors, meta):
    """The layout's folder (configs included) with `fname` rewritten from `tensors`."""
    if os.path.exists(dst_dir):
        shutil.rmtree(dst_dir)
    shutil.copytree(src_dir, dst_dir)
    path = os.path.join(dst_dir, fname)
    import vitref
    vitref.write_safetensors(path, tensors, meta)
    return path


def refused(label, r, *needles):
    return ok(r.returncode == 1 and all(n in r.stderr for n in needles),
              f"{label}: exit 1 naming {', '.join(repr(n) for n in needles)}", f"exit {r.returncode}: " + r.stderr)


def check_refusals(a, root, manifest):
    """The refusals of each written layout's own files (1-1i): with --only too, for the layouts written."""
    bad = os.path.join(a.workdir, "bad")
    os.makedirs(bad, exist_ok=True)
    # 1. each layout's safetensors file with one tensor missing, and one misshaped
    for layout, entry in manifest["layouts"].items():
        s = families.SPEC[layout]
        st = [f for f in weights_files(entry) if f.endswith(".safetensors")]
        if not st:
            continue
        fname = st[0]
        tensors, meta = read_any(os.path.join(root, layout, fname))
        heads = ["--heads", str(s.heads)] if needs_heads(layout, entry) else []
        # the last block's second MLP matrix, in whatever name the layout gives it
        last = s.depth - 1
        fc2 = [k for k in tensors if f"{last}." in k and any(n in k for n in ("fc2.weight", "mlp.w3.weight",
                                                                               "c_proj.weight", "output.dense.weight",
                                                                               "weights_out.weight",
                                                                               "down_proj.weight"))
               and "text" not in k and not k.startswith(("transformer.", "decoder_"))]
        fc2 = [k for k in fc2 if "attention.output" not in k]
        if not ok(len(fc2) == 1, f"{layout}: one last-block MLP matrix to remove", str(fc2)):
            continue
        t2 = dict(tensors)
        del t2[fc2[0]]
        path = copy_dir_with(os.path.join(root, layout), os.path.join(bad, layout + "_missing"), fname, t2, meta)
        refused(f"{layout}: {fc2[0]} missing", run(a.cli, "info", "--model", path, *heads), path, "missing", fc2[0])
        t3 = dict(tensors)
        w = t3[fc2[0]]
        t3[fc2[0]] = torch.zeros(w.shape[0], w.shape[1] + 1, dtype=w.dtype)
        path = copy_dir_with(os.path.join(root, layout), os.path.join(bad, layout + "_misshaped"), fname, t3, meta)
        refused(f"{layout}: {fc2[0]} misshaped", run(a.cli, "info", "--model", path, *heads), path, "wrong shape",
                fc2[0])

    # 1b. AIMv2 in timm's layout without one half of a block's SwiGLU (fc1_x: the value): refused, not read as
    # another MLP
    if "aimv2_timm" in manifest["layouts"]:
        tensors, meta = read_any(os.path.join(root, "aimv2_timm", "model.safetensors"))
        del tensors["blocks.0.mlp.fc1_x.weight"]
        path = copy_dir_with(os.path.join(root, "aimv2_timm"), os.path.join(bad, "aimv2_timm_no_fc1_x"),
                             "model.safetensors", tensors, meta)
        r = run(a.cli, "info", "--model", path)
        refused("aimv2_timm: blocks.0.mlp.fc1_x.weight missing", r, path, "blocks.0.mlp.fc1_x.weight")
        # read as AIMv2 (RMSNorm, no biases), not as a LayerNorm ViT wanting biases the file never had
        ok("norm1.bias" not in r.stderr and "attn.proj.bias" not in r.stderr,
           "aimv2_timm without fc1_x: refused as AIMv2 (no norm or projection bias asked for)", r.stderr)

    # 1c-1f. A layout without one tensor that shows a part: refused naming it, not read as a model without the part.
    # DINOv3 in timm's layout without a block's second layer-scale gamma (gamma_2); EVA-02 without a block's v_bias
    # (its q_bias kept); EVA-02 Base without a block's SwiGLU norm weight (its bias kept); PE-Core without its
    # attention pool's kv (its q kept)
    for layout, key in [("dinov3_timm", "blocks.0.gamma_2"), ("eva02_timm", "blocks.1.attn.v_bias"),
                        ("eva02_base_timm", "blocks.1.mlp.norm.weight"), ("pe_core_timm", "attn_pool.kv.weight")]:
        if layout not in manifest["layouts"]:
            continue
        tensors, meta = read_any(os.path.join(root, layout, "model.safetensors"))
        del tensors[key]
        path = copy_dir_with(os.path.join(root, layout), os.path.join(bad, f"{layout}_no_{key.replace('.', '_')}"),
                             "model.safetensors", tensors, meta)
        refused(f"{layout}: {key} missing", run(a.cli, "info", "--model", path), path, key)

    # 1g. PE-Core with its projection whose head.bias is not zeros: timm's _convert_pe makes PE's proj a head.bias of
    # zeros, so a non-zero one is a classifier after the attention pool (not implemented): refused naming head.bias,
    # not read as the projection with the bias dropped
    if "pe_core_timm_proj" in manifest["layouts"]:
        tensors, meta = read_any(os.path.join(root, "pe_core_timm_proj", "model.safetensors"))
        tensors["head.bias"] = torch.full_like(tensors["head.bias"], 0.5)
        path = copy_dir_with(os.path.join(root, "pe_core_timm_proj"), os.path.join(bad, "pe_core_timm_proj_head_bias"),
                             "model.safetensors", tensors, meta)
        refused("pe_core_timm_proj: head.bias 0.5 (not zeros)", run(a.cli, "info", "--model", path), path, "head.bias")

    # 1h. norm_pre without PE-Core's attention pool: PE-Spatial / PE-Lang (no norm before a pool either) refused as
    # such, timm's CLIP tower (its norm kept) refused as that: neither read as PE-Core nor as a ViT without norm_pre
    if "pe_core_timm" in manifest["layouts"]:
        for name, drop, needle in [("pe_spatial", ("attn_pool.", "norm."), "PE-Spatial"),
                                   ("timm_clip", ("attn_pool.",), "CLIP image tower")]:
            tensors, meta = read_any(os.path.join(root, "pe_core_timm", "model.safetensors"))
            tensors = {k: v for k, v in tensors.items() if not k.startswith(drop)}
            path = copy_dir_with(os.path.join(root, "pe_core_timm"), os.path.join(bad, "pe_core_timm_" + name),
                                 "model.safetensors", tensors, meta)
            refused(f"pe_core_timm without {', '.join(drop)}: {needle}", run(a.cli, "info", "--model", path), path,
                    needle, "norm_pre.weight")

    # 1i. Meta's PE-Core release (no config: --heads) without its attention pool's MLP matrix: refused naming it; with
    # the pool's probe named query (CoCa's attentional pooler, open_clip coca_model.py, has attn_pool.query): refused
    # as CoCa, not read as PE nor as a CLIP without a pool; with a layer-scale gamma in a block (PE-Lang): refused as
    # PE-Lang, not read as PE-Core with the gamma dropped
    if "pe_core_meta" in manifest["layouts"]:
        src = os.path.join(root, "pe_core_meta")
        for name, edit, needles in [
                ("no_pool_fc1", lambda t: t.pop("visual.attn_pool.mlp.c_fc.weight"),
                 ["visual.attn_pool.mlp.c_fc.weight"]),
                ("coca", lambda t: t.__setitem__("visual.attn_pool.query", t.pop("visual.attn_pool.probe")),
                 ["CoCa"]),
                ("pe_lang", lambda t: t.__setitem__("visual.transformer.resblocks.0.ls_1.gamma",
                                                    torch.full((families.SPEC["pe_core_meta"].D,), 0.1)),
                 ["PE-Lang", "visual.transformer.resblocks.0.ls_1.gamma"])]:
            tensors, meta = read_any(os.path.join(src, "model.safetensors"))
            edit(tensors)
            path = copy_dir_with(src, os.path.join(bad, "pe_core_meta_" + name), "model.safetensors", tensors, meta)
            refused(f"pe_core_meta ({name})", run(a.cli, "info", "--model", path, "--heads",
                                                  str(families.SPEC["pe_core_meta"].heads)), path, *needles)


def check_other_refusals(a, root):
    """The refusals that read several layouts' files (and none): only when every layout was written."""
    bad = os.path.join(a.workdir, "bad")
    os.makedirs(bad, exist_ok=True)

    # 2. a config.json of another model beside the weights
    def other_config(layout, key, value):
        """A copy of a layout's directory whose config.json says `key` is `value`."""
        d = os.path.join(bad, layout + "_other_config")
        shutil.copytree(os.path.join(root, layout), d)
        cfg = json.load(open(os.path.join(d, "config.json")))
        cfg[key] = value
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
        return d

    d = other_config("deit_hf", "num_hidden_layers", 5)
    refused("a config.json saying 5 layers beside a 2-block DeiT", run(a.cli, "info", "--model",
                                                                        os.path.join(d, "model.safetensors")),
            os.path.join(d, "config.json"), "num_hidden_layers 5", "depth is 2")
    d = other_config("dinov2_reg_hf", "num_register_tokens", 2)
    refused("a config.json saying 2 registers beside a 4-register DINOv2", run(a.cli, "info", "--model",
                                                                                os.path.join(d, "model.safetensors")),
            "num_register_tokens 2", "register count is 4")

    # 3. other families' key names
    D, P = 8, 4
    z = lambda *shape: torch.zeros(*shape)
    vit_like = {"patch_embed.proj.weight": z(D, 3, P, P), "patch_embed.proj.bias": z(D), "cls_token": z(1, 1, D),
                "pos_embed": z(1, 5, D), "blocks.0.norm1.weight": z(D), "head.weight": z(2, D)}
    cases = {
        "swin": ({"patch_embed.proj.weight": z(D, 3, P, P), "layers.0.blocks.0.attn.relative_position_bias_table": z(9, 2),
                  "layers.0.blocks.0.attn.qkv.weight": z(3 * D, D)}, "Swin"),
        "beit": (dict(vit_like, **{"blocks.0.attn.relative_position_bias_table": z(9, 2)}), "BEiT"),
        "eva": (dict(vit_like, **{"blocks.0.attn.q_proj.weight": z(D, D), "blocks.0.attn.k_proj.weight": z(D, D)}),
                "EVA"),
        "convnext": ({"stem.0.weight": z(D, 3, 4, 4), "stages.0.blocks.0.conv_dw.weight": z(D, 1, 7, 7)}, "ConvNeXt"),
        "clip_resnet": ({"visual.conv1.weight": z(D, 3, 3, 3), "visual.layer1.0.conv1.weight": z(D, D, 1, 1),
                         "token_embedding.weight": z(5, D)}, "ResNet"),
        "open_clip_timm_tower": ({"visual.trunk.patch_embed.proj.weight": z(D, 3, P, P), "visual.trunk.cls_token": z(1, 1, D),
                                  "visual.head.proj.weight": z(4, D)}, "timm image tower"),
    }
    import vitref
    for name, (t, family) in cases.items():
        path = os.path.join(bad, name + ".safetensors")
        vitref.write_safetensors(path, t)
        refused(f"{family} key names", run(a.cli, "info", "--model", path), path, family)
    d = os.path.join(bad, "hf_swin")
    os.makedirs(d, exist_ok=True)
    vitref.write_safetensors(os.path.join(d, "model.safetensors"), {"embeddings.patch_embeddings.projection.weight": z(D, 3, P, P)})
    json.dump({"model_type": "swin"}, open(os.path.join(d, "config.json"), "w"))
    refused("a Hugging Face Swin (model_type)", run(a.cli, "info", "--model", os.path.join(d, "model.safetensors")),
            os.path.join(d, "model.safetensors"), "'swin'")

    # 4. a CLIP state dict in the OpenAI / open_clip layout with nothing stating its activation
    d = os.path.join(bad, "clip_no_config")
    os.makedirs(d, exist_ok=True)
    src = os.path.join(root, "open_clip_quickgelu", "open_clip_model.safetensors")
    shutil.copy(src, os.path.join(d, "clip.safetensors"))
    refused("a visual.* state dict with no config and no -quickgelu name", run(a.cli, "info", "--model",
                                                                                os.path.join(d, "clip.safetensors")),
            os.path.join(d, "clip.safetensors"), "QuickGELU", "open_clip_config.json")
    shutil.copy(src, os.path.join(d, "ViT-tiny-quickgelu.safetensors"))
    r = run(a.tool, "load", os.path.join(d, "ViT-tiny-quickgelu.safetensors"))
    ok(r.returncode == 0 and json.loads(r.stdout)["config"]["act"] == "quick_gelu" and
       any("the name" in n for n in json.loads(r.stdout)["notes"]),
       "open_clip's -quickgelu name: QuickGELU, said to come from the name", r.stdout + r.stderr)
    # the same weights with open_clip_config.json saying GELU: the config wins and is named
    shutil.copy(os.path.join(root, "open_clip_gelu", "open_clip_config.json"), d)
    r = run(a.tool, "load", os.path.join(d, "ViT-tiny-quickgelu.safetensors"))
    ok(r.returncode == 0 and json.loads(r.stdout)["config"]["act"] == "gelu", "open_clip_config.json's GELU wins over a name",
       r.stdout + r.stderr)

    # 5. a DINO backbone saved under a name that says nothing: a headless timm ViT, and said so
    d = os.path.join(bad, "anonymous")
    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(root, "dino", "dino_backbone.safetensors"), os.path.join(d, "backbone.safetensors"))
    r = run(a.tool, "load", os.path.join(d, "backbone.safetensors"), "4")
    g = json.loads(r.stdout) if r.returncode == 0 else {}
    ok(r.returncode == 0 and g["config"]["family"] == "vit" and g["config"]["pos_rule"] == "timm" and
       g["config"]["head"] == "identity" and any("DINO or MAE" in n for n in g["notes"]),
       "a headless timm-layout file with no sign of DINO: a headless ViT with timm's interpolation, and a note",
       r.stdout + r.stderr)

    # 6. training checkpoints' layouts: DINO's teacher and student side by side under roots of
    # the same length (the teacher is the model), DINOv2's chunked blocks (blocks.<chunk>.<index>)
    for name, src, rename, heads in [
            ("dino_train.safetensors", ("dino", "dino_backbone.safetensors"),
             lambda t: {**{"teacher.backbone." + k: v for k, v in t.items()},
                        **{"student.backbone." + k: torch.zeros_like(v) for k, v in t.items()}}, "4"),
            ("dinov2_chunked.safetensors", ("dinov2", "model.safetensors"),
             lambda t: {(k.replace(f"blocks.{k.split('.')[1]}.", f"blocks.{k.split('.')[1]}.{k.split('.')[1]}.", 1)
                         if k.startswith("blocks.") else k): v for k, v in t.items()}, "4")]:
        t, _ = read_any(os.path.join(root, *src))
        path = os.path.join(bad, name)
        vitref.write_safetensors(path, rename(t))
        out = os.path.join(bad, name + ".npz")
        r = run(a.cli, "trace", "--model", path, "--input", os.path.join(root, src[0], "input_native.npy"), "--out", out,
                "--heads", heads)
        if ok(r.returncode == 0, f"{name}: loads", r.stderr):
            table = json.loads(run(a.cli, "info", "--model", path, "--stage-table", "--heads", heads).stdout)
            ref = {k: torch.from_numpy(v) for k, v in np.load(os.path.join(root, src[0], "ref_native.npz")).items()}
            with np.load(out) as z:
                ours = {k: z[k] for k in z.files}
            N[0] += 1
            test_parity.check(f"{name} native", ours, ref, table, fail=FAIL)
        r = run(a.tool, "load", path, heads)
        ok(r.returncode == 0 and any(("student" in n) or ("chunks" in n) for n in json.loads(r.stdout)["notes"]),
           f"{name}: what was read is said in a note", r.stdout + r.stderr)

    # 7. TorchScript archives with something unexpected
    arch = os.path.join(root, "clip_openai", "ViT-tiny.pt")

    def patched(name, edit):
        with zipfile.ZipFile(arch) as zin:
            items = [(i, zin.read(i.filename)) for i in zin.infolist()]
        path = os.path.join(bad, name)
        with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zout:
            for i, data in items:
                data, keep = edit(i.filename, data)
                if keep:
                    zout.writestr(i.filename, data)
        return path

    def binunicode(t):
        b = t.encode()
        return b"X" + struct.pack("<I", len(b)) + b

    ren = patched("renamed_attr.pt", lambda n, b: (b.replace(binunicode("ln_post"), binunicode("ln_postx"))
                                                   if n.endswith("data.pkl") else b, True))
    refused("a TorchScript archive whose visual module lacks ln_post", run(a.cli, "info", "--model", ren), ren,
            "visual.ln_post.weight", "visual.ln_postx.weight")
    def os_system(b):  # the top module's class (GLOBAL '__torch__[.module] OpenAICLIP') becomes os.system
        start = b.index(b"c__torch__")
        end = b.index(b"\n", b.index(b"\n", start) + 1) + 1
        return b[:start] + b"cos\nsystem\n" + b[end:]
    evil = patched("evil_global.pt", lambda n, b: (os_system(b) if n.endswith("data.pkl") else b, True))
    refused("a TorchScript archive naming os.system", run(a.cli, "info", "--model", evil), evil, "os.system")
    nocode = patched("no_code.pt", lambda n, b: (b, "/code/" not in n))
    refused("__torch__ classes in an archive without code/ (not TorchScript)", run(a.cli, "info", "--model", nocode),
            nocode, "__torch__")
    # a scripted module that is not a ViT
    conv = torch.jit.script(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()))
    cpath = os.path.join(bad, "convnet.pt")
    torch.jit.save(conv, cpath)
    refused("a TorchScript archive of a convolutional network", run(a.cli, "info", "--model", cpath), cpath,
            "not a ViT checkpoint")
    # the archive's tensors as a plain torch.save file still say OpenAI (its integer buffers)
    r = run(a.tool, "load", arch)
    g = json.loads(r.stdout) if r.returncode == 0 else {}
    ok(r.returncode == 0 and g["metadata"].get("pth.torchscript", "").endswith("OpenAICLIP") and
       any("integer buffers" in n for n in g["notes"]) and any("text tower" in n for n in g["notes"]),
       "the TorchScript archive: read as data, its class named, the text tower and buffers ignored with a note",
       r.stdout + r.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--only", default="", help="comma-separated layouts")
    a = ap.parse_args()
    root = os.path.join(a.workdir, "fixtures")
    if os.path.exists(a.workdir):
        shutil.rmtree(a.workdir)
    os.makedirs(os.path.join(a.workdir, "traces"))
    test_parity.self_test()
    argv = ["--write", root, "--no-check"] + (["--only", a.only] if a.only else [])
    if families.main(argv) != 0:
        return 1
    manifest = json.load(open(os.path.join(root, "manifest.json")))
    xs = families.inputs()
    for layout, entry in manifest["layouts"].items():
        check_layout(a, root, layout, entry, xs)
    check_refusals(a, root, manifest)
    if not a.only:
        check_other_refusals(a, root)
    print(f"{N[0]} checks, {len(FAIL)} failed" + (": " + ", ".join(FAIL[:20]) if FAIL else ""))
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
