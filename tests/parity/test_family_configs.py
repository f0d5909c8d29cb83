#!/usr/bin/python3
"""core/io/hf_config on the config files the families' fixtures ship (tests/parity/families.py):
every config.json (Hugging Face, timm), open_clip_config.json and preprocessor_config.json is
read by the C++ parser (tests/config_tool.cpp) and what it understood must be the fixture's
model: width, depth, heads, MLP width, image and patch size, eps, activation, registers,
projection, labels, mean/std and resize.
Usage: test_family_configs.py --tool build/tests/vitscope_config_tool --workdir DIR [--only LAYOUT,...]"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families  # noqa: E402

ACT = {"gelu": 0, "gelu_tanh": 1, "quick_gelu": 2}  # hf_config.h ActKind order


def run(tool, kind, path):
    r = subprocess.run([tool, kind, path], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"{path}: refused: {r.stderr.strip()}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--only", default="", help="comma-separated layouts (default: all)")
    a = ap.parse_args()
    if families.main(["--write", a.workdir, "--no-check"] + (["--only", a.only] if a.only else [])) != 0:
        return 1
    only = [x for x in a.only.split(",") if x]
    specs = [s for s in families.SPECS if not only or s.layout in only]
    failed, n = [], 0

    def expect(label, got, want):
        nonlocal n
        n += 1
        if isinstance(want, float):
            ok = got is not None and abs(got - want) <= 1e-12 * abs(want)
        elif isinstance(want, list) and want and isinstance(want[0], float):  # float32 in the struct
            ok = got is not None and len(got) == len(want) and all(abs(g - w) <= 1e-7 for g, w in zip(got, want))
        else:
            ok = got == want
        if not ok:
            failed.append(f"{label}: got {got!r}, expected {want!r}")

    for s in specs:
        d = os.path.join(a.workdir, s.layout)
        for name, obj in families.configs_of(s).items():
            path = os.path.join(d, name)
            L = f"{s.layout}/{name}"
            if name == "preprocessor_config.json":
                p = run(a.tool, "preprocessor", path)
                expect(L + " mean", p["mean"], [float(x) for x in obj["image_mean"]])
                expect(L + " std", p["std"], [float(x) for x in obj["image_std"]])
                # PIL's numbers as the processors write them: 2 bilinear (DINOv3ViT), 3 bicubic (the others)
                expect(L + " resample", p["resample"], {2: "bilinear", 3: "bicubic"}[obj["resample"]])
                size = obj["size"]
                if "shortest_edge" in size:
                    expect(L + " shortest_edge", p["shortest_edge"], size["shortest_edge"])
                else:
                    expect(L + " resize", [p["resize_height"], p["resize_width"]], [size["height"], size["width"]])
                continue
            c = run(a.tool, "config", path)
            side = s.grid * s.patch
            # open_clip's config of a timm image tower (PE-Core-*: timm_model_name) states no width, depth, heads,
            # patch or MLP: the timm model's registration has them; the parser must not make them up
            timm_tower = c["kind"] == "open_clip" and "timm_model_name" in obj["model_cfg"]["vision_cfg"]
            expect(L + " hidden_size", c["hidden_size"], None if timm_tower else s.D)
            expect(L + " num_hidden_layers", c["num_hidden_layers"], None if timm_tower else s.depth)
            expect(L + " num_attention_heads", c["num_attention_heads"], None if timm_tower else s.heads)
            expect(L + " image size", [c["image_height"], c["image_width"]], [side, side])
            expect(L + " patch_size", c["patch_size"], None if timm_tower else s.patch)
            if timm_tower:
                expect(L + " intermediate_size", c["intermediate_size"], None)
                expect(L + " layer_norm_eps (open_clip's default; PE's too)", c["layer_norm_eps"], float(s.eps))
                expect(L + " activation", c.get("activation"), ACT.get(s.act, 0))
            elif c["kind"] != "timm":  # timm's config does not carry eps, activation or the MLP width
                expect(L + " layer_norm_eps", c["layer_norm_eps"], float(s.eps))
                expect(L + " activation", c.get("activation"), ACT.get(s.act, 0))
                mlp = c["intermediate_size"] or int(c["hidden_size"] * c["mlp_ratio"])
                if s.act == "swiglu":
                    mlp = families.swiglu_hidden(c["hidden_size"], c["mlp_ratio"])
                    expect(L + " use_swiglu_ffn", c["use_swiglu_ffn"], True)
                expect(L + " MLP width", mlp, s.mlp)
            # timm's Eva (DINOv3) leaves the registers to the registered model (num_reg_tokens): its config's
            # model_args holds only the fixture's shapes, no register count
            expect(L + " registers", c["num_register_tokens"] or 0, 0 if s.layout == "dinov3_timm" else s.regs)
            if s.proj and c["kind"] == "timm":
                # timm's config states PE's projection width as num_classes (vit_pe_core_*.fb: 512 / 1024, "output
                # proj dim"): there is no projection_dim
                expect(L + " num_classes (the projection width)", c["num_labels"], s.proj)
            elif s.proj:
                expect(L + " projection_dim", c["projection_dim"], s.proj)
            if s.classes:
                expect(L + " labels", c["labels"], families.LABELS[:s.classes])
            if c["kind"] == "timm":
                expect(L + " no_embed_class", bool(c["no_embed_class"]), s.no_embed_class)
                # timm's AIMv2 weights (aimv2_*.apple_pt) and EVA-02's (eva.py _cfg) state OpenAI CLIP's mean and std,
                # PE's (eva.py _pe_cfg) 0.5
                expect(L + " mean", c["mean"], families.OPENAI_MEAN if s.family in ("aimv2", "eva02")
                       else [0.5] * 3 if s.family == "pe" else families.IMAGENET_MEAN)
            if c["kind"] == "open_clip":
                expect(L + " quick_gelu", bool(c["quick_gelu"]), s.act == "quick_gelu")
                expect(L + " mean", c["mean"], [0.5] * 3 if s.family == "pe" else families.OPENAI_MEAN)
            if s.layout == "clip_hf_model":
                expect(L + " read from vision_config", c["from_vision_config"], True)
    for f in failed:
        print("FAIL " + f)
    print(f"{n} fields of {len(specs)} layouts' config files checked, {len(failed)} wrong")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
