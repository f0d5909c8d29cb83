#!/usr/bin/python3
"""PyTorch checkpoints (torch.save zip format) read by vitscope-cli.

--part parity: state dicts saved with PyTorch's own torch.save (torchvision's
vit_b_16 with random weights, small random ViTs under torchvision, timm and
Hugging Face names, a {"model": ...} wrapper, non-contiguous and offset views,
shared storages, f16/bf16) are traced and compared with PyTorch stage by
stage; `convert` output holds exactly the source's values.

--part bad: truncated files, a bad zip directory, pickles that would run
os.system / builtins.eval (checked live with Python's own pickle first), a
missing storage, storages and views that overrun, the legacy format: each
must exit 1 with a message naming the file and the reason, write nothing, and
never run the payload."""
import argparse
import json
import collections
import io
import os
import pickle
import subprocess
import sys
import warnings
import zipfile

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.dirname(__file__))
import vitref  # noqa: E402
import test_parity  # noqa: E402  (tv_trace, check, FAIL)

torch.set_num_threads(1)
FAIL = test_parity.FAIL


def ok(cond, label, detail=""):
    print(f"{'ok' if cond else 'FAIL':4} {label}" + (f": {detail}" if detail and not cond else ""))
    if not cond:
        FAIL.append(label)


class Cli:
    def __init__(self, path, workdir):
        self.path, self.dir = path, workdir

    def run(self, *args):
        return subprocess.run([self.path, *args], capture_output=True, text=True)

    def trace(self, model, x, *flags):
        inp, out = os.path.join(self.dir, "input.npy"), os.path.join(self.dir, "trace.npz")
        np.save(inp, x.numpy().astype(np.float32))
        if os.path.exists(out):
            os.remove(out)
        r = self.run("trace", "--model", model, "--input", inp, "--out", out, *flags)
        if r.returncode != 0:
            raise SystemExit(f"vitscope-cli trace {model} failed ({r.returncode}): {r.stderr}")
        with np.load(out) as z:
            return {k: z[k] for k in z.files}


# ---------------------------------------------------------------- hand-made checkpoints

class FakeStorage:
    def __init__(self, key, numel, stype=torch.FloatStorage):
        self.key, self.numel, self.stype = key, numel, stype


class FakeTensor:
    """Pickles exactly as torch.save pickles a tensor, with any view we like."""
    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride

    def __reduce_ex__(self, proto):
        return (torch._utils._rebuild_tensor_v2,
                (self.storage, self.offset, tuple(self.size), tuple(self.stride), False, collections.OrderedDict()))


class Evil:
    def __init__(self, fn, arg):
        self.fn, self.arg = fn, arg

    def __reduce__(self):
        return (self.fn, (self.arg,))


class TorchLikePickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, FakeStorage):
            return ("storage", obj.stype, obj.key, "cpu", obj.numel)
        return None


def pickle_bytes(obj):
    buf = io.BytesIO()
    TorchLikePickler(buf, protocol=2).dump(obj)
    return buf.getvalue()


def write_zip(path, pkl, storages, folder="archive"):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{folder}/data.pkl", pkl)
        for k, b in storages.items():
            z.writestr(f"{folder}/data/{k}", b)
        z.writestr(f"{folder}/version", "3\n")


# ---------------------------------------------------------------- parity

def check_model(cli, label, model_path, x, ref, *flags):
    """Our trace of the file against the reference, over every stage of its stage table."""
    r = cli.run("info", "--model", model_path, "--stage-table", *flags)
    if r.returncode != 0:
        raise SystemExit(f"vitscope-cli info --stage-table failed: {r.stderr}")
    test_parity.check(label, cli.trace(model_path, x, *flags), ref, json.loads(r.stdout))


def small_tv(seed, S=32, P=8, L=2, H=4, D=64, M=128, K=10, eps=1e-6):
    import functools
    torch.manual_seed(seed)
    m = torchvision.models.VisionTransformer(image_size=S, patch_size=P, num_layers=L, num_heads=H, hidden_dim=D,
                                             mlp_dim=M, num_classes=K,
                                             norm_layer=functools.partial(torch.nn.LayerNorm, eps=eps)).eval()
    return vitref.randomize(m, 1000 + seed)


def heads_from_outside(cli, path, x, ref, H):
    """Issue 19: the head count is never guessed. small_tv.pt (torchvision names, width 64, 4 heads) says
    nothing about its heads and is not a published shape: without --heads every command refuses it,
    naming the file and --heads with the counts the width allows; with --heads 4, or a Hugging Face
    config.json beside it (ViT or CLIP-style vision_config), it equals PyTorch. The old guess
    (width / 64 = 1 head) really is wrong: ln_final.out differs from PyTorch."""
    import json
    import shutil
    inp, out = path("heads_in.npy"), path("heads_out.npz")
    np.save(inp, x[0].numpy().astype(np.float32))
    for cmd in (["trace", "--input", inp, "--out", out], ["info"], ["analyze", "--input", inp, "--out", out]):
        if os.path.exists(out):
            os.remove(out)
        r = cli.run(cmd[0], "--model", path("small_tv.pt"), *cmd[1:])
        ok(r.returncode == 1 and "small_tv.pt" in r.stderr and "--heads N" in r.stderr
           and "(1, 2, 4, 8, 16, 32 or 64)" in r.stderr and not os.path.exists(out),
           f"{cmd[0]} without --heads: exit 1 naming the file, --heads and the counts 64 allows", r.stderr)
    one = cli.trace(path("small_tv.pt"), x[0], "--heads", "1")["ln_final.out"]
    d1 = float(np.abs(one - ref["ln_final.out"].numpy()).max())
    ok(d1 > 0.05, f"the old guess (1 head) is wrong: ln_final.out differs from PyTorch by {d1:.2f}")
    check_model(cli, "small torchvision ViT, .pt, --heads 4", path("small_tv.pt"), x[0], ref, "--heads", str(H))

    def beside(name, config):
        d = path(name)
        os.makedirs(d, exist_ok=True)
        shutil.copy(path("small_tv.pt"), os.path.join(d, "model.pt"))
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config, f)
        return os.path.join(d, "model.pt")

    names = ["tee", "pants", "jumper", "frock", "jacket", "flipflop", "blouse", "trainer", "purse", "boot"]
    vit = beside("hf_vit", {"model_type": "vit", "hidden_size": 64, "num_attention_heads": H,
                            "id2label": {str(i): n for i, n in enumerate(names)}})
    check_model(cli, "config.json beside it (num_attention_heads), no --heads", vit, x[0], ref)
    r = cli.run("info", "--model", vit)
    ok(r.returncode == 0 and f"heads: {H} (from " in r.stdout and "config.json num_attention_heads" in r.stdout
       and "class names: tee, ... (from " in r.stdout and "config.json id2label" in r.stdout,
       "info says the heads and the class names came from config.json", r.stdout + r.stderr)
    # trace and analyze say it too (issue 39 item 4: they printed the count without where it came from)
    inp = os.path.join(cli.dir, "input.npy")
    np.save(inp, x[0].numpy().astype(np.float32))
    for cmd, model, flags, src in (("trace", vit, [], "config.json num_attention_heads"),
                                   ("analyze", vit, [], "config.json num_attention_heads"),
                                   ("trace", path("small_tv.pt"), ["--heads", str(H)], "--heads")):
        out = os.path.join(cli.dir, "said.npz")
        r = cli.run(cmd, "--model", model, "--input", inp, "--out", out, *flags)
        ok(r.returncode == 0 and f"heads: {H} (from " in r.stdout and src in r.stdout.split("heads: ", 1)[-1].split("\n", 1)[0],
           f"{cmd} says where its {H} heads came from ({src})", r.stdout + r.stderr)
    clip = beside("hf_clip", {"model_type": "clip", "text_config": {"hidden_size": 512, "num_attention_heads": 8},
                              "vision_config": {"hidden_size": 64, "num_attention_heads": H}})
    check_model(cli, "CLIP-style config.json (vision_config.num_attention_heads)", clip, x[0], ref)
    other = beside("hf_other", {"hidden_size": 768, "num_attention_heads": 12})
    r = cli.run("info", "--model", other)
    ok(r.returncode == 1 and "config.json" in r.stderr and "hidden_size 768" in r.stderr and "width is 64" in r.stderr,
       "a config.json of another width is refused, naming it", r.stderr)
    bad = beside("hf_bad", {"num_attention_heads": "four"})
    r = cli.run("info", "--model", bad)
    ok(r.returncode == 1 and "config.json" in r.stderr and "num_attention_heads" in r.stderr,
       "a config.json with a non-integer num_attention_heads is refused, naming the field", r.stderr)
    ph = beside("hf_placeholders", {"hidden_size": 64, "num_attention_heads": H,
                                    "id2label": {str(i): f"LABEL_{i}" for i in range(10)}})
    r = cli.run("info", "--model", ph)
    ok(r.returncode == 0 and "class names: none" in r.stdout,
       "transformers' placeholder labels (LABEL_0, ...) are not taken as class names", r.stdout + r.stderr)
    r = cli.run("info", "--model", path("small_tv.pt"), "--heads", "5")
    ok(r.returncode == 2 and "--heads 5" in r.stderr and "64" in r.stderr,
       "--heads 5 on width 64: bad usage (exit 2) naming the flag and the width", r.stderr)


@torch.no_grad()
def parity(cli, path):
    # torchvision's own ViT-B/16, random weights, torch.save(model.state_dict()).
    tv = vitref.randomize(torchvision.models.vit_b_16(weights=None).eval(), 5)
    torch.save(tv.state_dict(), path("vit_b_16.pth"))
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    ref = test_parity.tv_trace(tv, x, 12)
    check_model(cli, "torchvision vit_b_16(weights=None), random weights, torch.save -> .pth", path("vit_b_16.pth"), x[0], ref)
    r = cli.run("info", "--model", path("vit_b_16.pth"))
    ok(r.returncode == 0 and "parameters: 86567656" in r.stdout and "heads 12" in r.stdout,
       "info on vit_b_16.pth: 86,567,656 parameters, 12 heads", r.stdout + r.stderr)
    # Issue 39: a .pth is read without holding its weights twice. The peak of a trace from the .pth against the
    # peak from the same weights as .safetensors, in this run (the mapped file's pages are handed back as the
    # storages are read; before, the .pth's peak was 722 MB against 393 MB on this machine).
    conv = path("vit_b_16.pth.safetensors")
    if os.path.exists(conv):
        os.remove(conv)
    r = cli.run("convert", path("vit_b_16.pth"), conv)
    inp = os.path.join(cli.dir, "peak_input.npy")
    np.save(inp, x[0].numpy().astype(np.float32))
    probe = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)")
    peaks = {}
    for f in (path("vit_b_16.pth"), conv):
        q = subprocess.run([sys.executable, "-c", probe, cli.path, "trace", "--model", f, "--input", inp, "--stages",
                            "logits", "--out", os.path.join(cli.dir, "peak.npz")], capture_output=True, text=True)
        peaks[f] = int(q.stdout.split()[-1]) // 1024 if q.returncode == 0 and q.stdout.split() else 1 << 20
    pth_mb, st_mb = peaks[path("vit_b_16.pth")], peaks[conv]
    print(f"     peak RSS of trace --stages logits: {pth_mb} MB from the .pth, {st_mb} MB from the .safetensors")
    ok(r.returncode == 0 and pth_mb <= st_mb + 64,
       f"vit_b_16.pth is read without its weights twice: peak {pth_mb} MB against {st_mb} MB from the same weights "
       f"as .safetensors (within 64 MB; the weights are 346 MB)")
    del tv, ref

    # Small random ViTs under the three families' names.
    L, H = 2, 4
    tv = small_tv(1)
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    ref = test_parity.tv_trace(tv, x, H)
    sd = tv.state_dict()
    meta = ["--heads", str(H)]
    torch.save(sd, path("small_tv.pt"))
    check_model(cli, "small torchvision ViT, .pt", path("small_tv.pt"), x[0], ref, *meta)
    heads_from_outside(cli, path, x, ref, H)
    canon = vitref.tv_to_canonical(sd, L)
    torch.save(canon, path("small_timm.pth"))
    check_model(cli, "small ViT under timm names, .pth", path("small_timm.pth"), x[0], ref, *meta)
    torch.save({"model": canon, "epoch": 7, "args": {"lr": 0.1}, "note": "hi"}, path("wrapped.pth"))
    check_model(cli, '{"model": state_dict, "epoch": 7, ...} wrapper', path("wrapped.pth"), x[0], ref, *meta)
    torch.save({"state_dict": {"module." + k: v for k, v in canon.items()}}, path("ddp.ckpt"))
    check_model(cli, '{"state_dict": ...} with DataParallel "module." keys, .ckpt', path("ddp.ckpt"), x[0], ref, *meta)

    tv12 = small_tv(1, eps=1e-12)
    ref12 = test_parity.tv_trace(tv12, x, H)
    hf = vitref.canonical_to_hf(canon, L)  # q/k/v are views of the fused weight: one storage, three offsets
    torch.save(hf, path("pytorch_model.bin"))
    check_model(cli, "Hugging Face names, pytorch_model.bin (q/k/v share one storage)", path("pytorch_model.bin"), x[0], ref12, *meta)

    # Non-contiguous views, offsets into a larger storage, storage shared by several tensors.
    odd = dict(canon)
    for k in list(odd):
        t = odd[k]
        if t.dim() == 2:  # column-major copy: strides (1, rows)
            odd[k] = t.t().contiguous().t()
    big = torch.randn(3 + canon["head.weight"].numel() + 5)
    big[3:3 + canon["head.weight"].numel()] = canon["head.weight"].flatten()
    odd["head.weight"] = big[3:3 + canon["head.weight"].numel()].view_as(canon["head.weight"])
    pe = canon["pos_embed"]  # (1, T, D) as a permuted view of a (D, T) buffer
    odd["pos_embed"] = pe[0].t().contiguous().t()[None]
    ok(not odd["blocks.0.attn.qkv.weight"].is_contiguous() and odd["head.weight"].storage_offset() == 3
       and not odd["pos_embed"].is_contiguous(), "the test file really holds non-contiguous and offset views")
    torch.save(odd, path("views.pth"))
    check_model(cli, "non-contiguous strides, storage offsets", path("views.pth"), x[0], ref, *meta)

    # f16 / bf16 storages.
    for dt, name in [(torch.float16, "f16"), (torch.bfloat16, "bf16")]:
        low = {k: v.to(dt) for k, v in canon.items()}
        torch.save(low, path(f"small_{name}.pth"))
        mref = vitref.manual_forward({k: v.float() for k, v in low.items()}, x[0], H, 1e-6)
        check_model(cli, f"{name} storages", path(f"small_{name}.pth"), x[0], mref, *meta)

    # nn.Parameter values (torch._utils._rebuild_parameter), and the records newer torch adds
    # (byteorder, .data/version, .data/serialization_id) next to data.pkl.
    torch.save({k: torch.nn.Parameter(v.clone()) for k, v in canon.items()}, path("params.pth"))
    with zipfile.ZipFile(path("params.pth")) as zf:
        ok(b"_rebuild_parameter" in zf.read("params/data.pkl"), "the nn.Parameter file uses _rebuild_parameter")
    check_model(cli, "nn.Parameter values", path("params.pth"), x[0], ref, *meta)
    with zipfile.ZipFile(path("small_timm.pth")) as zin, zipfile.ZipFile(path("newer.pth"), "w") as zout:
        for item in zin.infolist():
            zout.writestr(item.filename, zin.read(item.filename))
        for name, text in [("byteorder", "little"), (".data/version", "3\n"), (".data/serialization_id", "0123456789")]:
            zout.writestr("small_timm/" + name, text)
    check_model(cli, "with byteorder / .data records", path("newer.pth"), x[0], ref, *meta)

    # Protocol 4 (SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL, FRAME) and a re-zipped, deflated file.
    torch.save(canon, path("proto4.pth"), pickle_protocol=4)
    check_model(cli, "pickle protocol 4", path("proto4.pth"), x[0], ref, *meta)
    with zipfile.ZipFile(path("small_timm.pth")) as zin, \
            zipfile.ZipFile(path("deflated.pth"), "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            zout.writestr(item.filename, zin.read(item.filename))
    check_model(cli, "re-zipped with deflate", path("deflated.pth"), x[0], ref, *meta)

    # convert: the safetensors holds the same names and exactly the same values.
    for src, dts in [("small_timm.pth", "F32"), ("views.pth", "F32"), ("small_bf16.pth", "BF16"),
                     ("pytorch_model.bin", "F32")]:
        out = path(src + ".safetensors")
        if os.path.exists(out):
            os.remove(out)
        r = cli.run("convert", path(src), out)
        if r.returncode != 0:
            ok(False, f"convert {src}", r.stderr)
            continue
        got, m = vitref.read_safetensors(out)
        want = torch.load(path(src))
        want = {k: v.float().numpy() for k, v in want.items()}
        same = set(got) == set(want) and all(np.array_equal(got[k], want[k].reshape(got[k].shape)) and
                                             got[k].shape == want[k].shape for k in want)
        ok(same and m.get("vitscope.source_dtypes") == dts,
           f"convert {src} -> .safetensors: {len(got)} tensors, same names, shapes and values, source dtypes {dts}",
           f"metadata {m}")
    a = cli.trace(path("small_timm.pth.safetensors"), x[0], *meta)
    b = cli.trace(path("small_timm.pth"), x[0], *meta)
    ok(set(a) == set(b) and all(np.array_equal(a[k], b[k]) for k in a), "converted file traces identically to the .pth")

    # Familiar names.
    r = cli.run("info", "--list")
    names = ["vit_b_16", "vit_b_32", "vit_l_16", "vit_l_32", "vit_h_14", "vit_tiny_patch16_224",
             "vit_small_patch16_224", "vit_base_patch16_224", "vit_base_patch32_224", "vit_large_patch16_224",
             "vit_huge_patch14_224"]
    ok(r.returncode == 0 and all(n in r.stdout for n in names), "info --list shows the torchvision and timm names",
       r.stdout)
    for name, builder in [("vit_b_16", torchvision.models.vit_b_16), ("vit_b_32", torchvision.models.vit_b_32),
                          ("vit_l_16", torchvision.models.vit_l_16), ("vit_l_32", torchvision.models.vit_l_32),
                          ("vit_h_14", torchvision.models.vit_h_14)]:
        m = builder(weights=None)
        n = sum(p.numel() for p in m.parameters())
        heads = m.encoder.layers[0].self_attention.num_heads
        r = cli.run("info", "--model", name)
        ok(r.returncode == 0 and f"parameters: {n}\n" in r.stdout and f"heads {heads} " in r.stdout,
           f"info --model {name}: {n} parameters and {heads} heads, as torchvision builds it", r.stdout + r.stderr)
        del m


# ---------------------------------------------------------------- bad input

def expect_refused(cli, path, label, file, words, outputs_dir):
    """Every command must exit 1, name the file and the reason, write nothing."""
    out_st = os.path.join(outputs_dir, "out.safetensors")
    out_npz = os.path.join(outputs_dir, "out.npz")
    inp = os.path.join(outputs_dir, "x.npy")
    np.save(inp, np.zeros((3, 8, 8), np.float32))
    for args in (["convert", file, out_st], ["trace", "--model", file, "--input", inp, "--out", out_npz],
                 ["info", "--model", file]):
        r = cli.run(*args)
        msg = r.stderr.strip().replace("\n", " | ")
        good = (r.returncode == 1 and file in r.stderr and all(w.lower() in r.stderr.lower() for w in words)
                and not os.path.exists(out_st) and not os.path.exists(out_npz)
                and not [f for f in os.listdir(outputs_dir) if ".tmp." in f])
        ok(good, f"{label} [{args[0]}] -> exit 1: {msg[:150]}",
           f"exit {r.returncode}, stderr {msg!r}, wanted words {words}")
        for f in os.listdir(outputs_dir):  # a failure must not spill into the next case
            if f != "x.npy":
                os.remove(os.path.join(outputs_dir, f))


def bad_input(cli, path, workdir):
    outs = os.path.join(workdir, "outs")
    os.makedirs(outs, exist_ok=True)
    for f in os.listdir(outs):
        os.remove(os.path.join(outs, f))
    # A good hand-made file first: the defects below are the only difference.
    st = FakeStorage("0", 12)
    good = {"a": FakeTensor(st, 0, (3, 4), (4, 1)), "b": FakeTensor(st, 2, (2, 2), (1, 4))}
    data = {"0": np.arange(12, dtype=np.float32).tobytes()}
    write_zip(path("good.pth"), pickle_bytes(good), data, folder="not_archive")
    r = cli.run("convert", path("good.pth"), path("good.safetensors"))
    got, _ = vitref.read_safetensors(path("good.safetensors")) if r.returncode == 0 else ({}, {})
    ok(r.returncode == 0 and np.array_equal(got.get("b"), np.array([[2, 6], [3, 7]], np.float32)),
       "control: the hand-made file (folder 'not_archive', a strided view) converts, b == [[2, 6], [3, 7]]", r.stderr)

    # Truncated at several points.
    raw = open(path("good.pth"), "rb").read()
    for cut in (len(raw) // 2, len(raw) - 10, 30):
        p = path(f"truncated_{cut}.pth")
        open(p, "wb").write(raw[:cut])
        expect_refused(cli, path, f"truncated to {cut} of {len(raw)} bytes", p, ["zip"], outs)
    # Bad zip directory: the central directory's first record and offsets mangled.
    p = path("bad_directory.pth")
    b = bytearray(raw)
    i = b.find(b"PK\x01\x02")
    b[i + 42:i + 46] = (0x7fffff00).to_bytes(4, "little")  # local header offset far past the end
    open(p, "wb").write(bytes(b))
    expect_refused(cli, path, "central directory points past the end", p, ["zip"], outs)
    p = path("bad_eocd.pth")
    b = bytearray(raw)
    i = b.rfind(b"PK\x05\x06")
    b[i + 16:i + 20] = (len(raw) * 3).to_bytes(4, "little")  # directory offset past the end
    open(p, "wb").write(bytes(b))
    expect_refused(cli, path, "end-of-directory record points past the end", p, ["zip"], outs)
    p = path("not_a_checkpoint.pth")
    open(p, "wb").write(b"hello, this is not a checkpoint at all\n")
    expect_refused(cli, path, "plain text named .pth", p, ["not a torch.save checkpoint"], outs)
    p = path("empty.pth")
    open(p, "wb").close()
    expect_refused(cli, path, "empty file", p, ["not a torch.save checkpoint"], outs)

    # Forbidden globals: the payload is live (Python's pickle runs it), we refuse it.
    marker = os.path.join(workdir, "PWNED")
    for m in (marker, marker + "_control"):
        if os.path.exists(m):
            os.remove(m)
    payloads = [("os.system", Evil(os.system, f"touch {marker}"), "posix.system"),
                ("builtins.eval", Evil(eval, f"open({marker!r}, 'w')"), "builtins.eval"),
                ("builtins.exec", Evil(exec, f"open({marker!r}, 'w')"), "builtins.exec")]
    live = pickle_bytes({"x": Evil(os.system, f"touch {marker}_control")})
    pickle.loads(live)
    ok(os.path.exists(marker + "_control"), "control: Python's own unpickler runs the os.system payload")
    for name, evil, shown in payloads:
        for where, obj in [("top", evil), ("inside a state dict", {"a": good["a"], "evil": evil})]:
            p = path(f"evil_{name}_{where.split()[0]}.pth")
            write_zip(p, pickle_bytes(obj), data)
            expect_refused(cli, path, f"pickle calling {name} ({where})", p, [shown, "refus"], outs)
    ok(not os.path.exists(marker), "the payloads never ran (no marker file)")
    # A REDUCE of an allowed name with a smuggled callable: still refused.
    p = path("evil_reduce_storage.pth")
    write_zip(p, pickle_bytes({"a": Evil(torch.FloatStorage, 3)}), data)
    expect_refused(cli, path, "REDUCE calling torch.FloatStorage", p, ["torch.FloatStorage", "not callable"], outs)

    # Protocol 4 (STACK_GLOBAL, MEMOIZE, FRAME) is refused the same way.
    p = path("evil_protocol4.pth")
    b4 = io.BytesIO()
    TorchLikePickler(b4, protocol=4).dump({"a": good["a"], "evil": Evil(os.system, f"touch {marker}")})
    ok(b"\x93" in b4.getvalue(), "the protocol-4 payload uses STACK_GLOBAL")
    write_zip(p, b4.getvalue(), data)
    expect_refused(cli, path, "protocol-4 pickle calling os.system", p, ["posix.system", "refus"], outs)
    ok(not os.path.exists(marker), "the protocol-4 payload never ran")

    # Damaged archive contents: a flipped storage byte (CRC), a huge declared size (zip bomb).
    p = path("crc.pth")
    b = bytearray(raw)
    i = raw.find(np.arange(12, dtype=np.float32).tobytes())
    b[i + 5] ^= 0xFF
    open(p, "wb").write(bytes(b))
    expect_refused(cli, path, "storage bytes damaged (CRC mismatch)", p, ["crc"], outs)
    p = path("bomb.pth")
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", pickle_bytes(good))
        z.writestr("archive/data/0", data["0"])
        z.writestr("archive/version", "3\n")
    b = bytearray(open(p, "rb").read())
    for sig, off in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # uncompressed size, local and central
        j = 0
        while (j := b.find(sig, j)) >= 0:
            name_len = int.from_bytes(b[j + (26 if sig == b"PK\x03\x04" else 28):][:2], "little")
            name = bytes(b[j + (30 if sig == b"PK\x03\x04" else 46):][:name_len])
            if name == b"archive/data.pkl":
                b[j + off:j + off + 4] = (0xFFFFFFF0).to_bytes(4, "little")
            j += 4
    open(p, "wb").write(bytes(b))
    expect_refused(cli, path, "data.pkl declares 4 GB from a few bytes (zip bomb)", p, ["zip bomb"], outs)
    # A big-endian file (newer torch notes the byte order).
    p = path("big_endian.pth")
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("archive/data.pkl", pickle_bytes(good))
        z.writestr("archive/data/0", data["0"])
        z.writestr("archive/byteorder", "big")
        z.writestr("archive/version", "3\n")
    expect_refused(cli, path, "byteorder 'big'", p, ["byteorder", "little-endian"], outs)
    # A name given twice in the zip (Python's zipfile writes it with a warning): which entry is
    # meant is not said, so the file is refused naming why, for data.pkl and for a storage.
    for label, names in [("data/0 twice, the second all zeros", ["data.pkl", "data/0", "data/0"]),
                         ("data.pkl twice", ["data.pkl", "data.pkl", "data/0"])]:
        p = path("duplicate_entry.pth")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with zipfile.ZipFile(p, "w") as z:
                for i, n in enumerate(names):
                    z.writestr(f"archive/{n}", pickle_bytes(good) if n == "data.pkl" else
                               (data["0"] if i == 1 else bytes(len(data["0"]))))
                z.writestr("archive/version", "3\n")
        expect_refused(cli, path, f"an entry name given twice: {label}", p, ["two entries of the same name"], outs)
    # One storage named with two dtypes: torch.save refuses to write it and torch.load reads every
    # view with the first; refused naming the storage and both types.
    p = path("storage_two_dtypes.pth")
    write_zip(p, pickle_bytes({"a": FakeTensor(FakeStorage("0", 12), 0, (12,), (1,)),
                               "b": FakeTensor(FakeStorage("0", 24, torch.HalfStorage), 0, (24,), (1,))}), data)
    expect_refused(cli, path, "storage '0' as FloatStorage and as HalfStorage", p,
                   ["storage '0'", "FloatStorage", "HalfStorage"], outs)
    # Many views of one storage must not multiply memory without bound.
    big = FakeStorage("0", 1 << 20)
    views = {f"v{i}": FakeTensor(big, 0, (1 << 20,), (1,)) for i in range(300)}
    p = path("views_multiply.pth")
    write_zip(p, pickle_bytes(views), {"0": np.zeros(1 << 20, np.float32).tobytes()})
    expect_refused(cli, path, "300 full views of one 4 MB storage (1.2 GB out)", p, ["shared storages"], outs)

    # Storages: missing, numel larger than the file, views overrunning.
    p = path("missing_storage.pth")
    write_zip(p, pickle_bytes({"a": FakeTensor(FakeStorage("7", 12), 0, (12,), (1,))}), data)
    expect_refused(cli, path, "storage key '7' missing from the archive", p, ["storage '7'", "missing"], outs)
    p = path("storage_too_big.pth")
    write_zip(p, pickle_bytes({"a": FakeTensor(FakeStorage("0", 1 << 40), 0, (12,), (1,))}), data)
    expect_refused(cli, path, "storage numel 2^40 but the file holds 48 bytes", p, ["storage '0'", "48"], outs)
    for label, t in [("shape (4, 4) on a 12-element storage", FakeTensor(st, 0, (4, 4), (4, 1))),
                     ("storage offset 10 + 4 elements", FakeTensor(st, 10, (4,), (1,))),
                     ("stride 100 overruns", FakeTensor(st, 0, (2, 2), (100, 1))),
                     ("shape and stride overflow 64 bits", FakeTensor(st, 0, (1 << 62, 8), (1 << 62, 1))),
                     ("offset past the end, empty shape", FakeTensor(st, 1 << 50, (0,), (1,)))]:
        p = path("overrun.pth")
        write_zip(p, pickle_bytes({"a": t}), data)
        expect_refused(cli, path, label, p, ["tensor 'a'"], outs)
    p = path("no_tensors.pth")
    write_zip(p, pickle_bytes({"epoch": 3, "lr": 0.1}), data)
    expect_refused(cli, path, "a dict without tensors", p, ["no tensors", "'epoch'"], outs)

    # The legacy (pre-1.6) format.
    p = path("legacy.pth")
    torch.save({"w": torch.ones(3)}, p, _use_new_zipfile_serialization=False)
    expect_refused(cli, path, "legacy torch.save format", p, ["legacy", "_use_new_zipfile_serialization=True"], outs)
    p = path("bare.pkl.pth")
    open(p, "wb").write(pickle.dumps({"w": 1}, protocol=2))
    expect_refused(cli, path, "a bare pickle", p, ["bare pickle"], outs)

    # Unknown extensions list the formats.
    p = path("weights.xyz")
    open(p, "wb").write(b"\x00" * 64)
    r = cli.run("info", "--model", p)
    ok(r.returncode == 1 and ".pth" in r.stderr and ".safetensors" in r.stderr and p in r.stderr,
       "unknown extension: exit 1, the message lists the supported formats", r.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--part", choices=["parity", "bad"], required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    cli = Cli(a.cli, a.workdir)
    path = lambda n: os.path.join(a.workdir, n)
    if a.part == "parity":
        parity(cli, path)
    else:
        bad_input(cli, path, a.workdir)
    print(f"{'FAILED: ' + ', '.join(FAIL) if FAIL else 'all checks passed'}")
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
