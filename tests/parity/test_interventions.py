#!/usr/bin/python3
"""Interventions (issue 21) against a PyTorch reference that intervenes with hooks.

The reference is a ViT written as PyTorch modules with a hook point (an identity module, as
TransformerLens and ViT-Prisma have them) at every stage; the stages are recorded by forward
hooks, and every intervention is a hook too, as a researcher would write it: a head ablation is a
hook on attn.z (the input of the output projection) that zeroes head h or replaces it by its mean
over the tokens; a sub-layer ablation a hook on the attention or MLP module that returns zeros;
dropped patches a hook after the position embeddings that keeps the other tokens; activation
patching a hook that writes the rows of a run on another input into the stage. Without hooks the
reference is first checked against independent forward passes (vitref.manual_forward, itself
checked against torchvision by test_parity.py, and families.reference for DINOv2).

For three models (a ViT with cls pooling; 4 heads with mean pooling; DINOv2 with registers and
layer scale, an embedding model), each kind of intervention and combinations of them: the test
first shows that the intervention changes the output, then compares every stage of the stage
table vitscope-cli reports for those flags (info --stage-table) and the logits (or embedding)
with the reference to 1e-4 of each tensor's scale; then `analyze --head-importance --occlusion`
against the same sweeps done with hooks. Bad flag values must exit 2 naming the flag."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families  # noqa: E402
import test_families_forward  # noqa: E402
import test_parity  # noqa: E402
import vitref  # noqa: E402

torch.set_num_threads(1)
FAIL = test_parity.FAIL


def report(ok, what, detail=""):
    print(f"{'ok' if ok else 'FAIL':4} {what}" + (f" ({detail})" if detail else ""))
    if not ok:
        FAIL.append(what)


# =============================================================================== the hooked reference
class HookPoint(nn.Identity):
    """A stage of the forward pass: hooks read it and may replace it."""


class Gamma(nn.Module):
    def __init__(self, g):
        super().__init__()
        self.gamma = nn.Parameter(g.clone())

    def forward(self, x):
        return x * self.gamma


def linear(w, b):
    m = nn.Linear(w.shape[1], w.shape[0])
    m.weight.data, m.bias.data = w.clone(), b.clone()
    return m


def layernorm(wb, eps):
    m = nn.LayerNorm(wb[0].shape[0], eps=eps)
    m.weight.data, m.bias.data = wb[0].clone(), wb[1].clone()
    return m


class Attention(nn.Module):
    def __init__(self, b, H):
        super().__init__()
        self.H = H
        self.qkv, self.proj = linear(b["qkv_w"], b["qkv_b"]), linear(b["proj_w"], b["proj_b"])
        for n in ("q", "k", "v", "scores", "pattern", "z"):
            setattr(self, n, HookPoint())

    def forward(self, x):
        B, T, D = x.shape
        d = D // self.H
        qkv = self.qkv(x).reshape(B, T, 3, self.H, d).permute(2, 0, 3, 1, 4)
        q, k, v = self.q(qkv[0]), self.k(qkv[1]), self.v(qkv[2])
        pattern = self.pattern(self.scores(q @ k.transpose(-2, -1) / math.sqrt(d)).softmax(-1))
        z = self.z(pattern @ v)                                   # (B, H, T, d): what enters the projection
        return self.proj(z.transpose(1, 2).reshape(B, T, D))


class Mlp(nn.Module):
    def __init__(self, b, act):
        super().__init__()
        self.fc1, self.fc2 = linear(b["fc1_w"], b["fc1_b"]), linear(b["fc2_w"], b["fc2_b"])
        self.act_name = act
        self.act = HookPoint()  # its output is mlp.post

    def forward(self, x):
        return self.fc2(self.act(families._act(self.fc1(x), self.act_name)))


class Block(nn.Module):
    def __init__(self, b, spec):
        super().__init__()
        self.norm1, self.norm2 = layernorm(b["ln1"], spec.eps), layernorm(b["ln2"], spec.eps)
        self.attn, self.mlp = Attention(b, spec.heads), Mlp(b, spec.act)
        self.ls1 = Gamma(b["ls1"]) if spec.layer_scale else None
        self.ls2 = Gamma(b["ls2"]) if spec.layer_scale else None
        self.resid_mid, self.resid_post = HookPoint(), HookPoint()

    def forward(self, x):
        a = self.attn(self.norm1(x))
        x = self.resid_mid(x + (self.ls1(a) if self.ls1 else a))
        m = self.mlp(self.norm2(x))
        return self.resid_post(x + (self.ls2(m) if self.ls2 else m))


class HookedViT(nn.Module):
    """A ViT (optionally with registers and layer scale; cls or mean pooling; a classifier or
    the cls embedding) with a hook point at every stage, from families' canonical weights."""

    def __init__(self, spec, c, pooling="cls"):
        super().__init__()
        self.s, self.pooling = spec, pooling
        D = spec.D
        self.patch_embed = nn.Conv2d(spec.C, D, spec.patch, spec.patch)
        self.patch_embed.weight.data = c["patch_w"].clone()
        self.patch_embed.bias.data = c["patch_b"].clone()
        self.cls_token = nn.Parameter(c["cls"].reshape(1, 1, D).clone())
        self.pos_embed = nn.Parameter(c["pos"][None].clone())
        self.reg_token = nn.Parameter(c["reg"][None].clone()) if spec.regs else None
        self.blocks = nn.ModuleList([Block(b, spec) for b in c["blocks"]])
        self.norm = layernorm(c["norm"], spec.eps)
        self.head = linear(*c["head"]) if "head" in c else None
        for n in ("input", "patches", "patch_embed_out", "tokens", "pos", "embed", "pos_drop", "with_registers",
                  "pooled", "logits", "embedding"):
            setattr(self, "hp_" + n, HookPoint())

    def forward(self, img):                                     # img (B, C, H, W)
        s, P = self.s, self.s.patch
        img = self.hp_input(img)
        B = img.shape[0]
        self.hp_patches(img.unfold(2, P, P).unfold(3, P, P).permute(0, 2, 3, 1, 4, 5).reshape(B, -1, s.C * P * P))
        x = self.hp_patch_embed_out(self.patch_embed(img).flatten(2).transpose(1, 2))
        x = self.hp_tokens(torch.cat([self.cls_token.expand(B, -1, -1), x], 1))
        x = self.hp_embed(x + self.hp_pos(self.pos_embed.expand(B, -1, -1)))
        x = self.hp_pos_drop(x)                                 # a hook here drops patch tokens
        if self.reg_token is not None:
            x = self.hp_with_registers(torch.cat([x[:, :1], self.reg_token.expand(B, -1, -1), x[:, 1:]], 1))
        for blk in self.blocks:
            x = blk(x)
        prefix = 1 + s.regs
        if self.pooling == "mean":                              # timm global_pool='avg' + fc_norm
            f = self.norm(self.hp_pooled(x[:, prefix:].mean(1))[:, None])
            feat = f[:, 0]
        else:
            f = self.norm(x)
            feat = self.hp_pooled(f[:, 0]) if self.head is not None else f[:, 0]
        if self.head is None:
            return self.hp_embedding(feat)
        return self.hp_logits(self.head(feat))


# Stage name -> the module whose output it is (and the hook point of every stage).
def stage_modules(m):
    out = {"input": m.hp_input, "patches": m.hp_patches, "patch_embed": m.hp_patch_embed_out, "tokens": m.hp_tokens,
           "pos_embed": m.hp_pos, "embed": m.hp_embed, "ln_final.out": m.norm, "pooled": m.hp_pooled,
           "logits": m.hp_logits, "embedding": m.hp_embedding, "with_registers": m.hp_with_registers}
    for i, b in enumerate(m.blocks):
        p = f"blocks.{i}."
        out.update({p + "ln1.out": b.norm1, p + "attn.q": b.attn.q, p + "attn.k": b.attn.k, p + "attn.v": b.attn.v,
                    p + "attn.scores": b.attn.scores, p + "attn.pattern": b.attn.pattern, p + "attn.z": b.attn.z,
                    p + "attn.out": b.attn, p + "resid_mid": b.resid_mid, p + "ln2.out": b.norm2,
                    p + "mlp.pre": b.mlp.fc1, p + "mlp.post": b.mlp.act, p + "mlp.out": b.mlp,
                    p + "resid_post": b.resid_post})
        if b.ls1 is not None:
            out[p + "ls1"], out[p + "ls2"] = b.ls1, b.ls2
    return out


class Interventions:
    """What vitscope-cli's flags ask for, as the reference's hooks."""

    def __init__(self, heads=(), sublayers=(), dropped=(), patch=None):
        self.heads = list(heads)          # [(layer, head, mean)]
        self.sublayers = list(sublayers)  # ["blocks.L.attn.out", "blocks.L.mlp.out"]
        self.dropped = sorted(dropped)
        self.patch = patch                # (stage, tokens, source_rec) or None

    def flags(self, source_file=None):
        f = []
        for L, H, mean in self.heads:
            f += ["--ablate-head", f"{L}.{H}" + (":mean" if mean else "")]
        for s in self.sublayers:
            f += ["--ablate", s]
        if self.dropped:
            f += ["--drop-patches", ",".join(map(str, self.dropped))]
        if self.patch:
            f += ["--patch-from", source_file, "--patch-stage", self.patch[0]]
            if self.patch[1]:
                f += ["--patch-tokens", ",".join(map(str, self.patch[1]))]
        return f


def run_hooked(m, x, iv=None):
    """Every stage of one pass of the hooked model (float64), with the interventions as hooks."""
    iv = iv or Interventions()
    mods = stage_modules(m)
    rec, handles = {}, []
    fwd = lambda mod, fn: handles.append(mod.register_forward_hook(fn))

    # --- the interventions, registered before the recording hooks (each sees the one before)
    if iv.patch:  # patching first: then an ablation of the same stage acts on the patched tensor
        stage, tokens, src = iv.patch

        def patch(mod, i, o, stage=stage, tokens=tokens, src=src):
            o = o.clone()
            v = src[stage]
            if not tokens:
                o[0] = v
            elif v.dim() == 3:  # per head: (H, T, d), the tokens on axis 1
                o[0][:, tokens] = v[:, tokens]
            else:
                o[0][tokens] = v[tokens]
            return o
        if stage != "attn.out" and not stage.endswith(("attn.out", "mlp.out")):
            fwd(mods[stage], patch)
    for L, H, mean in iv.heads:
        def ablate(mod, i, z, H=H, mean=mean):
            z = z.clone()
            z[:, H] = z[:, H].mean(-2, keepdim=True).expand_as(z[:, H]) if mean else 0
            return z
        fwd(m.blocks[L].attn.z, ablate)
    for s in iv.sublayers:
        L, which = int(s.split(".")[1]), s.split(".")[2]
        fwd(getattr(m.blocks[L], "attn" if which == "attn" else "mlp"), lambda mod, i, o: torch.zeros_like(o))
    if iv.patch and iv.patch[0].endswith(("attn.out", "mlp.out")):  # after a zeroing of the same sub-layer
        fwd(mods[iv.patch[0]], patch)
    if iv.dropped:
        N = m.pos_embed.shape[1] - 1
        keep = [0] + [1 + p for p in range(N) if p not in iv.dropped]
        fwd(m.hp_pos_drop, lambda mod, i, o: o[:, keep])

    # --- the recording
    def put(name):
        return lambda mod, i, o: rec.__setitem__(name, o[0])
    for name, mod in mods.items():
        fwd(mod, put(name))
    if iv.dropped:
        fwd(m.hp_pos_drop, put("embed.kept"))
    lns = [("ln_final", m.norm)] + [(f"blocks.{i}.{n}", getattr(b, "norm1" if n == "ln1" else "norm2"))
                                    for i, b in enumerate(m.blocks) for n in ("ln1", "ln2")]
    for name, mod in lns:
        def stats(mod, inp, name=name):
            x_ = inp[0][0]
            rec[name + ".mean"] = x_.mean(-1)
            rec[name + ".std"] = x_.std(-1, unbiased=False)
            rec[name + ".normalized"] = F.layer_norm(x_, (x_.shape[-1],), eps=mod.eps)
        handles.append(mod.register_forward_pre_hook(stats))
    with torch.no_grad():
        out = m(x[None])[0]
    for h in handles:
        h.remove()
    if "logits" in rec:
        rec["probs"] = rec["logits"].softmax(-1)
    if m.head is None:
        rec.pop("pooled", None)
        rec.pop("logits", None)
    else:
        rec.pop("embedding", None)
    return rec, out


# =============================================================================== the models
def vit_spec(name, D, heads, depth, mlp, patch, grid, classes, seed):
    return families.Spec(name, "dino", name, D=D, depth=depth, heads=heads, mlp=mlp, patch=patch, grid=grid,
                         head="cls", classes=classes, seed=seed)


def own_config(spec, pooling, family="vit", head="classifier", pos_rule="timm"):
    c = test_families_forward.own_config(spec)
    c.update({"name": spec.layout, "image_size": spec.grid * spec.patch, "family": family, "pooling": pooling,
              "head": head, "pos_rule": pos_rule})
    return c


def models(workdir):
    """(label, spec, canonical weights, pooling, file, input, another input)."""
    out = []
    g = torch.Generator().manual_seed(21)
    for label, spec, pooling in [
        ("ViT 24px/p4 L3 H2 D32, cls pooling", vit_spec("iv_cls", 32, 2, 3, 64, 4, 6, 7, 301), "cls"),
        ("ViT 20px/p4 L2 H4 D32, mean pooling", vit_spec("iv_mean", 32, 4, 2, 96, 4, 5, 5, 302), "mean"),
    ]:
        c = families.make_weights(spec)
        path = os.path.join(workdir, spec.layout + ".safetensors")
        vitref.write_safetensors(path, test_families_forward.own_tensors(spec, c),
                                 {"vitscope.config": json.dumps(own_config(spec, pooling))})
        S = spec.grid * spec.patch
        out.append((label, spec, c, pooling, path, torch.randn(3, S, S, generator=g), torch.randn(3, S, S, generator=g)))
    spec = families.SPEC["dinov2_reg"]  # registers, layer scale, no head: an embedding model
    c = families.stored_weights(spec)
    path = os.path.join(workdir, "iv_dinov2_reg.safetensors")
    vitref.write_safetensors(path, test_families_forward.own_tensors(spec, c),
                             {"vitscope.config": json.dumps(test_families_forward.own_config(spec))})
    S = families.NATIVE
    out.append(("DINOv2 with 4 registers and layer scale (embedding)", spec, c, "cls", path,
                torch.randn(3, S, S, generator=g), torch.randn(3, S, S, generator=g)))
    return out


# =============================================================================== vitscope-cli
class Cli:
    def __init__(self, cli, workdir):
        self.cli, self.dir = cli, workdir

    def npy(self, name, x):
        p = os.path.join(self.dir, name)
        np.save(p, x.numpy().astype(np.float32))
        return p

    def run(self, *args):
        return subprocess.run([self.cli, *args], capture_output=True, text=True)

    def trace(self, model, inp, flags):
        out = os.path.join(self.dir, "trace.npz")
        r = self.run("trace", "--model", model, "--input", inp, "--out", out, *flags)
        if r.returncode:
            raise RuntimeError(f"vitscope-cli trace {' '.join(flags)} exited {r.returncode}: {r.stderr.strip()}")
        with np.load(out) as z:
            return {k: z[k] for k in z.files}

    def table(self, model, flags):
        r = self.run("info", "--model", model, "--stage-table", *flags)
        if r.returncode:
            raise RuntimeError(f"vitscope-cli info {' '.join(flags)} exited {r.returncode}: {r.stderr.strip()}")
        return json.loads(r.stdout)

    def analyze(self, model, inp, flags=()):
        out = os.path.join(self.dir, "analyze.npz")
        r = self.run("analyze", "--model", model, "--input", inp, "--out", out, "--head-importance", "--occlusion", *flags)
        if r.returncode:
            raise RuntimeError(f"vitscope-cli analyze exited {r.returncode}: {r.stderr.strip()}")
        with np.load(out) as z:
            return {k: z[k] for k in z.files}


def output_name(table):
    return "logits" if any(r["name"] == "logits" for r in table) else "embedding"


def cases(spec):
    """(what, Interventions without the patch's source, (stage, tokens) to patch or None)."""
    L, H = spec.depth, spec.heads
    last = L - 1
    N = spec.grid * spec.grid
    prefix = 1 + spec.regs
    return [
        ("head zero-ablated", Interventions(heads=[(last, H - 1, False)]), None),
        ("head mean-ablated", Interventions(heads=[(0, 1, True)]), None),
        ("attn.out ablated", Interventions(sublayers=[f"blocks.{last}.attn.out"]), None),
        ("mlp.out ablated", Interventions(sublayers=[f"blocks.0.mlp.out"]), None),
        ("patches dropped", Interventions(dropped=[0, N // 2, N - 1]), None),
        ("resid_post patched, every row", Interventions(), (f"blocks.0.resid_post", [])),
        ("attn.z patched, cls and one patch token", Interventions(), (f"blocks.{last}.attn.z", [0, prefix + 2])),
        ("mlp.post patched, one token", Interventions(), ("blocks.0.mlp.post", [prefix + 1])),
        ("ln_final.out patched", Interventions(), ("ln_final.out", [0])),
        ("combined: two heads (zero, mean), mlp.out, dropped patches",
         Interventions(heads=[(0, 0, False), (last, 1, True)], sublayers=[f"blocks.{last}.mlp.out"], dropped=[1, 3]), None),
        ("combined: embed patched (before the drop), patches dropped, attn.out ablated",
         Interventions(dropped=[2], sublayers=["blocks.0.attn.out"]), ("embed", [1, 3])),
        ("combined: attn.z patched and a head of the same block ablated",
         Interventions(heads=[(0, 0, False)]), ("blocks.0.attn.z", [])),
        ("combined: attn.out patched where it is ablated (the patch wins)",
         Interventions(sublayers=["blocks.0.attn.out"]), ("blocks.0.attn.out", [0])),
    ]


def effect(clean_out, out, logits, cls):
    if logits:
        return float(clean_out[cls] - out[cls])
    a, b = clean_out.double(), out.double()
    return float(1 - (a @ b) / math.sqrt(float((a @ a) * (b @ b))))


@torch.no_grad()
def main():
    a = test_parity.script_args("cli", "workdir")
    cli = Cli(a.cli, a.workdir)
    test_parity.self_test()

    for label, spec, c, pooling, path, x, y in models(a.workdir):
        print(f"--- {label}")
        m = HookedViT(spec, families.map_tensors(c, lambda t: t.double()), pooling).double().eval()
        xd, yd = x.double(), y.double()
        clean, clean_out = run_hooked(m, xd)
        # the reference without hooks against forward passes written independently of it
        if spec.family == "dinov2":
            ind = families.reference(spec, c, x)
        else:
            canon = test_families_forward.own_tensors(spec, c)
            canon = {k: v.double() for k, v in canon.items()}
            canon["cls_token"] = canon["cls_token"].reshape(1, 1, -1)
            ind = {k: v.double() for k, v in vitref.manual_forward(canon, xd, spec.heads, spec.eps,
                                                                  pooling=pooling).items()}
        table0 = cli.table(path, [])
        test_parity.check(f"  reference without interventions == an independent forward pass",
                          {k: v.numpy() for k, v in clean.items()}, ind, table0, tol=1e-9)
        xin, yin = cli.npy(spec.layout + "_x.npy", x), cli.npy(spec.layout + "_y.npy", y)
        ours0 = cli.trace(path, xin, [])
        test_parity.check("  no interventions", ours0, clean, table0)
        out_name = output_name(table0)
        logits = out_name == "logits"
        source, _ = run_hooked(m, yd)  # the other input's run: same options, no interventions
        for what, iv, patch in cases(spec):
            if patch:
                iv.patch = (patch[0], patch[1], source)
            flags = iv.flags(yin)
            ours = cli.trace(path, xin, flags)
            ref, ref_out = run_hooked(m, xd, iv)
            # first: the intervention changes the output (ours and the reference's)
            moved = float(np.abs(ours[out_name] - ours0[out_name]).max() / np.abs(ours0[out_name]).max())
            ref_moved = float((ref_out - clean_out).abs().max() / clean_out.abs().max())
            report(moved > 1e-4 and ref_moved > 1e-4, f"  {what}: changes the {out_name}",
                   f"ours by {moved:.3g}, the reference by {ref_moved:.3g} of its scale")
            opts = json.loads(str(ours["__options__"]))["interventions"]
            want = {"heads": [{"layer": L, "head": H, "mean": mn} for L, H, mn in iv.heads], "sublayers": iv.sublayers,
                    "dropped": iv.dropped,
                    "patch": {"stage": patch[0], "tokens": patch[1], "source": yin} if patch else None}
            report(opts == want, f"  {what}: __options__ records it", json.dumps(opts))
            check_table = cli.table(path, flags)
            intervened = [r["name"] for r in check_table if r["intervened"]]
            report(bool(intervened), f"  {what}: the stage table marks the intervened stages", ", ".join(intervened))
            test_parity.check(f"  {what}: every stage", ours, ref, check_table)

        # the analyses against the same sweeps done with hooks
        an = cli.analyze(path, xin)
        L, H, N = spec.depth, spec.heads, spec.grid * spec.grid
        cls = int(torch.argmax(clean_out)) if logits else -1
        hi = np.zeros((L, H))
        for l in range(L):
            for h in range(H):
                hi[l, h] = effect(clean_out, run_hooked(m, xd, Interventions(heads=[(l, h, False)]))[1], logits, cls)
        occ = np.array([effect(clean_out, run_hooked(m, xd, Interventions(dropped=[p]))[1], logits, cls)
                        for p in range(N)])
        for name, ref in [("head_importance", hi), ("occlusion", occ)]:
            ours = an.get(name)
            if ours is None or ours.shape != ref.shape:
                report(False, f"  analyze {name}: shape", f"{None if ours is None else ours.shape} vs {ref.shape}")
                continue
            err = float(np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-12))
            report(err <= 1e-4 and np.abs(ref).max() > 1e-3, f"  analyze {name} {ref.shape} == the sweep with hooks "
                   f"({'logit[%d] drop' % cls if logits else '1 - cosine'})", f"relative error {err:.2e}, "
                   f"largest {np.abs(ref).max():.3g}")
        # with interventions on the command line, the sweeps still start from the run without them
        an2 = cli.analyze(path, xin, ["--ablate-head", "0.0"])
        report(np.array_equal(an2["head_importance"], an["head_importance"]) and
               np.array_equal(an2["occlusion"], an["occlusion"]),
               "  analyze with --ablate-head: the sweeps are against the run without interventions")

    # bad values: exit 2, the flag named
    path = os.path.join(a.workdir, "iv_cls.safetensors")
    inp = os.path.join(a.workdir, "iv_cls_x.npy")
    for flags, flag in [(["--ablate-head", "3.0"], "--ablate-head"), (["--ablate-head", "0.2"], "--ablate-head"),
                        (["--ablate-head", "0-1"], "--ablate-head"), (["--ablate", "blocks.0.attn.z"], "--ablate"),
                        (["--ablate", "blocks.9.mlp.out"], "--ablate"), (["--drop-patches", "36"], "--drop-patches"),
                        (["--drop-patches", "1,x"], "--drop-patches"),
                        (["--drop-patches", ",".join(map(str, range(36)))], "--drop-patches"),
                        (["--patch-stage", "embed"], "--patch-"), (["--patch-from", inp], "--patch-"),
                        (["--patch-from", inp, "--patch-stage", "blocks.0.attn.pattern"], "--patch-stage"),
                        (["--patch-from", inp, "--patch-stage", "blocks.0.attn.z", "--patch-tokens", "37"], "--patch-tokens"),
                        (["--patch-from", inp, "--patch-stage", "blocks.0.resid_post", "--drop-patches", "1"], "--patch-stage"),
                        (["--ablate-head", "0.0", "--grads"], "--grads")]:
        r = cli.run("trace", "--model", path, "--input", inp, "--out", os.path.join(a.workdir, "bad.npz"), *flags)
        report(r.returncode == 2 and flag in r.stderr, f"bad value {' '.join(flags)[:60]}: exit 2 naming {flag}",
               f"exit {r.returncode}: {r.stderr.strip()[:160]}")

    print(f"{'FAILED: ' + ', '.join(FAIL) if FAIL else 'all intervention checks passed'}")
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
