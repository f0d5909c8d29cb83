"""Reference helpers for the parity tests: a safetensors writer (the format is
8 bytes of header length, a JSON header, raw little-endian data), checkpoint
key layouts of timm / Hugging Face / torchvision, and a manual PyTorch ViT
forward pass with the teaching options (used for what torchvision cannot do:
LayerNorm without affine, unbiased variance, mean pooling, grayscale)."""
import json
import math
import struct

import numpy as np
import torch
import torch.nn.functional as F

DT = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
      torch.int64: "I64"}  # I64: the position_ids buffers some Hugging Face files carry


def write_safetensors(path, tensors, metadata=None):
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        if t.dtype in (torch.float16, torch.bfloat16):
            raw = t.view(torch.int16).numpy().tobytes()
        else:
            raw = t.numpy().tobytes()
        header[name] = {"dtype": DT[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """(tensors as float32 numpy arrays, __metadata__) from an F32 safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    out = {}
    for k, v in header.items():
        b, e = v["data_offsets"]
        out[k] = np.frombuffer(data[b:e], np.float32).reshape(v["shape"]).copy()
    return out, meta


def tv_to_canonical(sd, depth):
    """torchvision state dict -> dict of canonical tensors (timm names)."""
    c = {"cls_token": sd["class_token"], "pos_embed": sd["encoder.pos_embedding"],
         "patch_embed.proj.weight": sd["conv_proj.weight"], "patch_embed.proj.bias": sd["conv_proj.bias"],
         "norm.weight": sd["encoder.ln.weight"], "norm.bias": sd["encoder.ln.bias"],
         "head.weight": sd["heads.head.weight"], "head.bias": sd["heads.head.bias"]}
    for i in range(depth):
        p = f"encoder.layers.encoder_layer_{i}."
        q = f"blocks.{i}."
        m = {"norm1": "ln_1", "norm2": "ln_2"}
        for a, b in m.items():
            c[q + a + ".weight"] = sd[p + b + ".weight"]
            c[q + a + ".bias"] = sd[p + b + ".bias"]
        c[q + "attn.qkv.weight"] = sd[p + "self_attention.in_proj_weight"]
        c[q + "attn.qkv.bias"] = sd[p + "self_attention.in_proj_bias"]
        c[q + "attn.proj.weight"] = sd[p + "self_attention.out_proj.weight"]
        c[q + "attn.proj.bias"] = sd[p + "self_attention.out_proj.bias"]
        c[q + "mlp.fc1.weight"] = sd[p + "mlp.0.weight"]
        c[q + "mlp.fc1.bias"] = sd[p + "mlp.0.bias"]
        c[q + "mlp.fc2.weight"] = sd[p + "mlp.3.weight"]
        c[q + "mlp.fc2.bias"] = sd[p + "mlp.3.bias"]
    return c


def canonical_to_hf(c, depth):
    D = c["cls_token"].shape[-1]
    h = {"vit.embeddings.cls_token": c["cls_token"], "vit.embeddings.position_embeddings": c["pos_embed"],
         "vit.embeddings.patch_embeddings.projection.weight": c["patch_embed.proj.weight"],
         "vit.embeddings.patch_embeddings.projection.bias": c["patch_embed.proj.bias"],
         "vit.layernorm.weight": c["norm.weight"], "vit.layernorm.bias": c["norm.bias"],
         "classifier.weight": c["head.weight"], "classifier.bias": c["head.bias"]}
    for i in range(depth):
        p, q = f"vit.encoder.layer.{i}.", f"blocks.{i}."
        h[p + "layernorm_before.weight"] = c[q + "norm1.weight"]
        h[p + "layernorm_before.bias"] = c[q + "norm1.bias"]
        h[p + "layernorm_after.weight"] = c[q + "norm2.weight"]
        h[p + "layernorm_after.bias"] = c[q + "norm2.bias"]
        W, b = c[q + "attn.qkv.weight"], c[q + "attn.qkv.bias"]
        for s, n in enumerate(["query", "key", "value"]):
            h[p + f"attention.attention.{n}.weight"] = W[s * D:(s + 1) * D]
            h[p + f"attention.attention.{n}.bias"] = b[s * D:(s + 1) * D]
        h[p + "attention.output.dense.weight"] = c[q + "attn.proj.weight"]
        h[p + "attention.output.dense.bias"] = c[q + "attn.proj.bias"]
        h[p + "intermediate.dense.weight"] = c[q + "mlp.fc1.weight"]
        h[p + "intermediate.dense.bias"] = c[q + "mlp.fc1.bias"]
        h[p + "output.dense.weight"] = c[q + "mlp.fc2.weight"]
        h[p + "output.dense.bias"] = c[q + "mlp.fc2.bias"]
    return h


def layer_norm(x, w, b, eps, affine, unbiased, rec, prefix):
    """LayerNorm with the teaching switches, recording its internals."""
    D = x.shape[-1]
    mean = x.mean(-1)
    if unbiased:
        var = x.var(-1, unbiased=True)
        std = x.std(-1, unbiased=True)
        normed = (x - mean[..., None]) / torch.sqrt(var[..., None] + eps)
    else:
        std = x.std(-1, unbiased=False)
        normed = torch.nn.LayerNorm(D, eps=eps, elementwise_affine=False)(x)  # PyTorch's own
    out = normed * w + b if affine else normed
    rec[prefix + ".mean"], rec[prefix + ".std"], rec[prefix + ".normalized"], rec[prefix + ".out"] = mean, std, normed, out
    return out


def manual_forward(c, x, heads, eps, affine=True, unbiased=False, pooling="cls"):
    """x: (C, S, S). c: canonical (timm-named) tensors. Returns the dict of stages.
    Differentiable: call under torch.no_grad() when gradients are not wanted."""
    rec = {"input": x}
    W = c["patch_embed.proj.weight"]
    D, C, P, _ = W.shape
    S = x.shape[-1]
    G = S // P
    rec["patches"] = x.unfold(1, P, P).unfold(2, P, P).permute(1, 2, 0, 3, 4).reshape(G * G, C * P * P)
    pe = F.conv2d(x[None], W, c["patch_embed.proj.bias"], stride=P)[0].flatten(1).T
    rec["patch_embed"] = pe
    tok = torch.cat([c["cls_token"].reshape(1, D), pe], 0)
    rec["tokens"] = tok
    rec["pos_embed"] = c["pos_embed"].reshape(-1, D)
    h = tok + rec["pos_embed"]
    rec["embed"] = h
    T, d = tok.shape[0], D // heads
    depth = len({k.split(".")[1] for k in c if k.startswith("blocks.")})
    for i in range(depth):
        q_ = f"blocks.{i}."
        a = layer_norm(h, c[q_ + "norm1.weight"], c[q_ + "norm1.bias"], eps, affine, unbiased, rec, q_ + "ln1")
        qkv = F.linear(a, c[q_ + "attn.qkv.weight"], c[q_ + "attn.qkv.bias"])
        q, k, v = [t.reshape(T, heads, d).transpose(0, 1) for t in qkv.chunk(3, -1)]
        rec[q_ + "attn.q"], rec[q_ + "attn.k"], rec[q_ + "attn.v"] = q, k, v
        s = q @ k.transpose(-1, -2) / math.sqrt(d)
        rec[q_ + "attn.scores"] = s
        pat = s.softmax(-1)
        rec[q_ + "attn.pattern"] = pat
        z = pat @ v
        rec[q_ + "attn.z"] = z
        ao = F.linear(z.transpose(0, 1).reshape(T, D), c[q_ + "attn.proj.weight"], c[q_ + "attn.proj.bias"])
        rec[q_ + "attn.out"] = ao
        h = h + ao
        rec[q_ + "resid_mid"] = h
        a = layer_norm(h, c[q_ + "norm2.weight"], c[q_ + "norm2.bias"], eps, affine, unbiased, rec, q_ + "ln2")
        pre = F.linear(a, c[q_ + "mlp.fc1.weight"], c[q_ + "mlp.fc1.bias"])
        post = F.gelu(pre)
        mo = F.linear(post, c[q_ + "mlp.fc2.weight"], c[q_ + "mlp.fc2.bias"])
        rec[q_ + "mlp.pre"], rec[q_ + "mlp.post"], rec[q_ + "mlp.out"] = pre, post, mo
        h = h + mo
        rec[q_ + "resid_post"] = h
    if pooling == "cls":
        f = layer_norm(h, c["norm.weight"], c["norm.bias"], eps, affine, unbiased, rec, "ln_final")
        rec["pooled"] = f[0]
        feat = rec["pooled"]
    else:
        rec["pooled"] = h[1:].mean(0)
        f = layer_norm(rec["pooled"][None], c["norm.weight"], c["norm.bias"], eps, affine, unbiased, rec, "ln_final")
        feat = f[0]
    rec["logits"] = F.linear(feat, c["head.weight"], c["head.bias"])
    rec["probs"] = rec["logits"].softmax(-1)
    return rec


def randomize(model, seed):
    """Random non-trivial values for every parameter (LayerNorm and biases too)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and "weight" in name:  # LayerNorm gamma around 1
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                fan_in = p[0].numel() if p.dim() > 1 else 1
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(max(fan_in, 1)))
    return model


def compare(ours, ref, names, tol=1e-4):
    """Max abs error relative to the reference tensor's scale, per stage."""
    worst, bad = 0.0, []
    for n in names:
        if n not in ours:
            bad.append(f"{n}: missing from our trace")
            continue
        a, r = np.asarray(ours[n]), ref[n].detach().double().numpy()
        if a.shape != r.shape:
            bad.append(f"{n}: shape {a.shape} vs torch {r.shape}")
            continue
        scale = max(np.abs(r).max(), 1e-6)
        err = float(np.abs(a - r).max() / scale)
        worst = max(worst, err)
        if not err <= tol:
            bad.append(f"{n}: relative max error {err:.2e} > {tol:g}")
    return worst, bad
