#!/usr/bin/python3
"""Stage-by-stage parity of vitscope-cli's trace against PyTorch.

torchvision's VisionTransformer with random weights is run with forward hooks;
its weights are saved as .safetensors in torchvision, timm and Hugging Face
layouts (and bf16), vitscope-cli traces the same input, and every recorded
stage must match to 1e-4 of the tensor's scale. The teaching options are
checked against PyTorch's nn.LayerNorm(elementwise_affine=False) and
std(unbiased=True) in a manual forward pass that is itself first checked
against torchvision."""
import functools
import json
import math
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import script_args  # noqa: E402,F401  (the parity scripts' command line, tests/harness.py)
import vitref  # noqa: E402

torch.set_num_threads(1)
FAIL = []


def check(label, ours, ref, table, tol=1e-4, fail=FAIL, quiet=False):
    """Every stage of the model's stage table (vitscope-cli info --stage-table) must be in our
    trace and in the reference, and match: a stage the reference does not compute fails."""
    names = [row["name"] for row in table]
    extra = sorted(set(ours) - set(names) - {"__options__"})
    worst, bad = vitref.compare(ours, ref, [n for n in names if n in ref], tol)
    bad += [f"{n}: not compared (the reference does not compute it)" for n in names if n not in ref]
    bad += [f"{n}: in our trace but not in the stage table" for n in extra]
    if bad:
        fail.append(label)
    if quiet:
        return
    status = "ok" if not bad else "FAIL"
    print(f"{status:4} {label}: {len(names)} stages, worst relative error {worst:.2e}")
    for b in bad:
        print("     " + b)


def self_test():
    """The check fails on a stage the reference lacks, and on a wrong value (it can fail)."""
    table = [{"name": "a"}, {"name": "b"}]
    ours = {"a": np.ones(3, np.float32), "b": np.ones(2, np.float32)}
    for ref, why in [({"a": torch.ones(3)}, "a stage missing from the reference"),
                     ({"a": torch.ones(3), "b": torch.zeros(2)}, "a wrong value")]:
        caught = []
        check(why, ours, ref, table, fail=caught, quiet=True)
        print(f"{'ok' if caught else 'FAIL':4} self-test: the check fails on {why}")
        if not caught:
            FAIL.append(f"self-test ({why}) did not fail")


def tv_trace(model, x, heads):
    """Every stage of torchvision's forward, from hooks and PyTorch ops."""
    rec = {"input": x[0]}
    D = model.hidden_dim
    rec["pos_embed"] = model.encoder.pos_embedding[0]
    P = model.patch_size
    rec["patches"] = x[0].unfold(1, P, P).unfold(2, P, P).permute(1, 2, 0, 3, 4).reshape(-1, 3 * P * P)
    hooks = []
    H = lambda m, f: hooks.append(m.register_forward_hook(f))
    Hp = lambda m, f: hooks.append(m.register_forward_pre_hook(f))
    H(model.conv_proj, lambda m, i, o: rec.__setitem__("patch_embed", o[0].flatten(1).T))
    Hp(model.encoder, lambda m, i: rec.__setitem__("tokens", i[0][0]))
    Hp(model.encoder.layers, lambda m, i: rec.__setitem__("embed", i[0][0]))

    def ln_stats(prefix, x_):
        rec[prefix + ".mean"] = x_.mean(-1)
        rec[prefix + ".std"] = x_.std(-1, unbiased=False)
        rec[prefix + ".normalized"] = F.layer_norm(x_, (D,), eps=model.encoder.ln.eps)

    busy = [False]
    for i, layer in enumerate(model.encoder.layers):
        p = f"blocks.{i}."
        Hp(layer, functools.partial(lambda p, m, inp: ln_stats(p + "ln1", inp[0][0]), p))
        H(layer.ln_1, functools.partial(lambda p, m, inp, o: rec.__setitem__(p + "ln1.out", o[0]), p))

        def attn_hook(m, inp, out, p=p):
            if busy[0]:
                return
            busy[0] = True
            a = rec[p + "ln1.out"][None]  # called with keywords: the input is ln_1's output
            rec[p + "attn.out"] = out[0][0]
            # PyTorch's own per-head attention weights
            rec[p + "attn.pattern"] = m(a, a, a, need_weights=True, average_attn_weights=False)[1][0]
            busy[0] = False
            T = a.shape[1]
            d = D // heads
            qkv = F.linear(a[0], m.in_proj_weight, m.in_proj_bias)
            q, k, v = [t.reshape(T, heads, d).transpose(0, 1) for t in qkv.chunk(3, -1)]
            rec[p + "attn.q"], rec[p + "attn.k"], rec[p + "attn.v"] = q, k, v
            rec[p + "attn.scores"] = q @ k.transpose(-1, -2) / math.sqrt(d)
            rec[p + "attn.z"] = rec[p + "attn.pattern"] @ v
        H(layer.self_attention, attn_hook)
        def ln2_pre(m, inp, p=p):  # a pre-hook must return None to leave the input alone
            rec[p + "resid_mid"] = inp[0][0]
            ln_stats(p + "ln2", inp[0][0])
        Hp(layer.ln_2, ln2_pre)
        H(layer.ln_2, functools.partial(lambda p, m, inp, o: rec.__setitem__(p + "ln2.out", o[0]), p))
        H(layer.mlp[0], functools.partial(lambda p, m, inp, o: rec.__setitem__(p + "mlp.pre", o[0]), p))
        H(layer.mlp[1], functools.partial(lambda p, m, inp, o: rec.__setitem__(p + "mlp.post", o[0]), p))
        H(layer.mlp, functools.partial(lambda p, m, inp, o: rec.__setitem__(p + "mlp.out", o[0]), p))
        H(layer, functools.partial(lambda p, m, inp, o: rec.__setitem__(p + "resid_post", o[0]), p))
    Hp(model.encoder.ln, lambda m, i: ln_stats("ln_final", i[0][0]))
    H(model.encoder.ln, lambda m, i, o: rec.__setitem__("ln_final.out", o[0]))
    Hp(model.heads, lambda m, i: rec.__setitem__("pooled", i[0][0]))
    with torch.no_grad():
        logits = model(x)
    for h in hooks:
        h.remove()
    rec["logits"] = logits[0]
    rec["probs"] = logits[0].softmax(-1)
    return rec


class Runner:
    def __init__(self, cli, workdir):
        self.cli, self.dir = cli, workdir
        os.makedirs(workdir, exist_ok=True)

    def table(self, model_path, *flags):
        """The stage table our trace of this model records with these flags."""
        r = subprocess.run([self.cli, "info", "--model", model_path, "--stage-table", *flags],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"vitscope-cli info failed ({r.returncode}): {r.stderr}")
        return json.loads(r.stdout)

    def trace(self, model_path, x, *flags):
        inp = os.path.join(self.dir, "input.npy")
        out = os.path.join(self.dir, "trace.npz")
        np.save(inp, x.numpy().astype(np.float32))
        r = subprocess.run([self.cli, "trace", "--model", model_path, "--input", inp, "--out", out, *flags],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"vitscope-cli failed ({r.returncode}): {r.stderr}")
        with np.load(out) as z:
            return {k: z[k] for k in z.files}


@torch.no_grad()
def main():
    a = script_args("cli", "workdir")
    run = Runner(a.cli, a.workdir)
    path = lambda n: os.path.join(a.workdir, n)
    self_test()

    # (image, patch, layers, heads, width, mlp, classes, how the heads reach us)
    cases = [
        (32, 8, 2, 4, 64, 128, 10, "metadata"),   # d = 16: heads from __metadata__
        (48, 16, 3, 2, 128, 256, 7, "config"),    # d = 64: heads from a config.json beside the files (never width/64)
        (16, 4, 1, 3, 48, 96, 5, "flag"),         # d = 16: heads from --heads
    ]
    for ci, (S, P, L, Hh, D, M, K, how) in enumerate(cases):
        torch.manual_seed(ci)
        tv = torchvision.models.VisionTransformer(image_size=S, patch_size=P, num_layers=L, num_heads=Hh,
                                                  hidden_dim=D, mlp_dim=M, num_classes=K).eval()
        vitref.randomize(tv, 100 + ci)
        x = torch.randn(1, 3, S, S)
        ref = tv_trace(tv, x, Hh)
        sd = tv.state_dict()
        meta = {"num_heads": Hh} if how == "metadata" else {}
        flags = ["--heads", str(Hh)] if how == "flag" else []
        cpath = path
        if how == "config":  # these files sit in a folder with a Hugging Face config.json, as a hub snapshot does
            os.makedirs(path("cfg"), exist_ok=True)
            cpath = lambda n: os.path.join(a.workdir, "cfg", n)
            with open(cpath("config.json"), "w") as f:
                json.dump({"hidden_size": D, "num_attention_heads": Hh}, f)
        label = f"torchvision {S}px/p{P} L{L} H{Hh} D{D}"

        tvsd = dict(sd)
        if ci == 1:  # torchvision's on-disk names for the MLP
            for k in list(tvsd):
                if ".mlp.0." in k or ".mlp.3." in k:
                    tvsd[k.replace(".mlp.0.", ".mlp.linear_1.").replace(".mlp.3.", ".mlp.linear_2.")] = tvsd.pop(k)
            label += " (mlp.linear_1/2 names)"
        vitref.write_safetensors(cpath(f"tv{ci}.safetensors"), tvsd, meta)
        ours = run.trace(cpath(f"tv{ci}.safetensors"), x[0], *flags)
        table = run.table(cpath(f"tv{ci}.safetensors"), *flags)
        check(label, ours, ref, table)
        missing = [n for n in ref if n not in ours]
        if missing:
            print("FAIL stages torchvision has but our trace lacks: " + ", ".join(missing))
            FAIL.append(label + " names")

        canon = vitref.tv_to_canonical(sd, L)
        man = vitref.manual_forward(canon, x[0], Hh, 1e-6)
        check(f"  reference self-check: manual forward == torchvision ({label})", {k: v.numpy() for k, v in man.items()}, ref, table, tol=1e-5)

        vitref.write_safetensors(cpath(f"timm{ci}.safetensors"), canon, meta)
        check(f"timm layout, same weights ({S}px L{L})", run.trace(cpath(f"timm{ci}.safetensors"), x[0], *flags), ref, table)

        # Hugging Face: its LayerNorm eps is 1e-12; the reference model uses the same.
        tv12 = torchvision.models.VisionTransformer(image_size=S, patch_size=P, num_layers=L, num_heads=Hh, hidden_dim=D,
                                                    mlp_dim=M, num_classes=K,
                                                    norm_layer=functools.partial(torch.nn.LayerNorm, eps=1e-12)).eval()
        tv12.load_state_dict(sd)
        ref12 = tv_trace(tv12, x, Hh)
        vitref.write_safetensors(cpath(f"hf{ci}.safetensors"), vitref.canonical_to_hf(canon, L), meta)
        check(f"Hugging Face layout, eps 1e-12 ({S}px L{L})", run.trace(cpath(f"hf{ci}.safetensors"), x[0], *flags), ref12,
              run.table(cpath(f"hf{ci}.safetensors"), *flags))

        if ci == 0:
            # Teaching options against PyTorch's nn.LayerNorm(elementwise_affine=False) and std(unbiased=True).
            for aff, unb, fl in [(False, False, ["--no-affine"]), (True, True, ["--unbiased"]),
                                 (False, True, ["--no-affine", "--unbiased"])]:
                mref = vitref.manual_forward(canon, x[0], Hh, 1e-6, affine=aff, unbiased=unb)
                check(f"options {' '.join(fl)}", run.trace(path("timm0.safetensors"), x[0], *fl),
                      {k: v for k, v in mref.items()}, run.table(path("timm0.safetensors"), *fl))
                base = run.trace(path("timm0.safetensors"), x[0])
                diff = np.abs(base["blocks.0.ln1.out"] - run.trace(path("timm0.safetensors"), x[0], *fl)["blocks.0.ln1.out"]).max()
                if not diff > 1e-3:
                    print(f"FAIL option {fl} did not change blocks.0.ln1.out")
                    FAIL.append(f"option {fl} no effect")
        if ci == 1:
            # bf16 and f16 checkpoints: compare with the reference on the rounded weights.
            for dt, name in [(torch.bfloat16, "bf16"), (torch.float16, "f16")]:
                low = {k: v.to(dt) for k, v in canon.items()}
                vitref.write_safetensors(cpath(f"timm_{name}.safetensors"), low)
                mref = vitref.manual_forward({k: v.float() for k, v in low.items()}, x[0], Hh, 1e-6)
                check(f"timm layout stored as {name}", run.trace(cpath(f"timm_{name}.safetensors"), x[0]), mref,
                      run.table(cpath(f"timm_{name}.safetensors")))

    # Grayscale + mean pooling (timm global_pool='avg' with fc_norm).
    torch.manual_seed(7)
    D, Hh, L, K, P, S = 32, 2, 2, 4, 4, 12
    canon = {"cls_token": torch.randn(1, 1, D), "pos_embed": torch.randn(1, (S // P) ** 2 + 1, D) * 0.1,
             "patch_embed.proj.weight": torch.randn(D, 1, P, P) / P, "patch_embed.proj.bias": torch.randn(D) * 0.1,
             "norm.weight": 1 + 0.1 * torch.randn(D), "norm.bias": 0.1 * torch.randn(D),
             "head.weight": torch.randn(K, D) / math.sqrt(D), "head.bias": torch.randn(K) * 0.1}
    for i in range(L):
        q = f"blocks.{i}."
        for n, shp in [("norm1", None), ("norm2", None)]:
            canon[q + n + ".weight"] = 1 + 0.1 * torch.randn(D)
            canon[q + n + ".bias"] = 0.1 * torch.randn(D)
        for n, o, ii in [("attn.qkv", 3 * D, D), ("attn.proj", D, D), ("mlp.fc1", 4 * D, D), ("mlp.fc2", D, 4 * D)]:
            canon[q + n + ".weight"] = torch.randn(o, ii) / math.sqrt(ii)
            canon[q + n + ".bias"] = 0.1 * torch.randn(o)
    x = torch.randn(1, S, S)
    mref = vitref.manual_forward(canon, x, Hh, 1e-6, pooling="mean")
    fc = {("fc_norm" + k[4:] if k.startswith("norm.") else k): v for k, v in canon.items()}
    vitref.write_safetensors(path("gray_mean.safetensors"), fc, {"num_heads": Hh})
    check("timm grayscale, global_pool=avg + fc_norm", run.trace(path("gray_mean.safetensors"), x), mref,
          run.table(path("gray_mean.safetensors")))

    # Preprocessing: our resize / center-crop / normalize (the trace's `input`) against
    # torchvision.transforms on the same RGB file, for the torchvision family (bilinear,
    # shorter side 256, crop 224, ImageNet mean/std) and timm (bicubic, 248, crop 224, 0.5).
    from PIL import Image
    import torchvision.transforms as T
    from torchvision.transforms import InterpolationMode as IM
    g = np.random.default_rng(3)
    yy, xx = np.mgrid[0:240, 0:300]
    rgb = np.stack([128 + 100 * np.sin(xx / 17.0), 128 + 100 * np.cos(yy / 11.0), (xx + yy) % 256], -1)
    rgb = np.clip(rgb + g.normal(0, 12, rgb.shape), 0, 255).astype(np.uint8)
    img_path = path("photo.png")
    Image.fromarray(rgb).save(img_path)
    torch.manual_seed(11)
    tv = torchvision.models.VisionTransformer(image_size=224, patch_size=16, num_layers=1, num_heads=1,
                                              hidden_dim=16, mlp_dim=32, num_classes=3).eval()
    vitref.write_safetensors(path("tv224.safetensors"), tv.state_dict(), {"num_heads": 1})
    canon = vitref.tv_to_canonical(tv.state_dict(), 1)
    vitref.write_safetensors(path("timm224.safetensors"), canon, {"num_heads": 1})

    def check_preprocess(image, what, tag):
        # each family's resize + center crop + normalize against torchvision.transforms on `image`
        pil = T.functional.to_tensor(Image.open(image))
        for fam, mean, std, size, interp in [("torchvision", (0.485, 0.456, 0.406), (0.229, 0.224, 0.225), 256, IM.BILINEAR),
                                             ("timm", (0.5,) * 3, (0.5,) * 3, 248, IM.BICUBIC)]:
            ref = T.Compose([T.Resize(size, interpolation=interp, antialias=True), T.CenterCrop(224),
                             T.Normalize(mean, std)])(pil)
            out = path("pre.npz")
            r = subprocess.run([a.cli, "trace", "--model", path(f"{'tv' if fam == 'torchvision' else 'timm'}224.safetensors"),
                                "--image", image, "--out", out], capture_output=True, text=True)
            if r.returncode:
                raise SystemExit(r.stderr)
            with np.load(out) as z:
                ours = z["input"]
            err = float(np.abs(ours - ref.numpy()).max()) * min(std)  # in units of pixel value (0..1)
            st = "ok" if ours.shape == tuple(ref.shape) and err < 2.5 / 255 else "FAIL"
            print(f"{st:4} preprocessing{what}, {fam} family ({interp.value}, resize {size}, crop 224) vs "
                  f"torchvision.transforms: max error {err * 255:.4f}/255 of a pixel")
            if st == "FAIL":
                FAIL.append(f"preprocess {fam}{tag}")

    check_preprocess(img_path, "", "")
    # Extreme aspect ratios (issue 23): the shorter side is upsampled 128x and more and only the
    # crop is computed; still torchvision's Resize + CenterCrop on the same files. (Smaller than
    # the 16384 x 1, which torchvision itself would resize to 12 GB of floats.)
    for (h, w) in [(2, 400), (500, 3)]:
        ext = np.clip(g.normal(128, 60, (h, w, 3)), 0, 255).astype(np.uint8)
        ext_path = path(f"extreme_{w}x{h}.png")
        Image.fromarray(ext).save(ext_path)
        check_preprocess(ext_path, f" of a {w}x{h} image", f" {w}x{h}")

    print(f"{'FAILED: ' + ', '.join(FAIL) if FAIL else 'all parity checks passed'}")
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
