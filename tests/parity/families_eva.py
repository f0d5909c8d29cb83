#!/usr/bin/python3
"""EVA-02 (timm's Eva as eva02_tiny_patch14_224 / eva02_small_patch14_336 build it, and as eva02_base_patch14_448 /
eva02_large_patch14_448 / eva02_base_patch14_224 do: qkv_fused=False, scale_mlp) for families.py.

Written from timm (read, not copied):
  timm/models/eva.py         Eva (class_token, pos_embed with the cls row, use_rot_pos_emb with rope_type 'cat',
                             ref_feat_shape (16, 16) for every eva02_*, global_pool 'avg' -> use_fc_norm, norm
                             Identity, head), EvaAttention (qkv_fused: qkv.weight without a bias, q_bias, a zero
                             non-persistent k_bias buffer, v_bias; RoPE on the tokens after num_prefix_tokens,
                             interleaved: rope_rotate_half False), EvaBlock (no init_values: no gamma_1 / gamma_2;
                             swiglu_mlp without scale_mlp: GluMlp with hidden int(D * 4 * 2/3) * 2, SiLU, gate first;
                             with scale_mlp: SwiGLU(D, int(D * 4 * 2/3), norm_layer=LayerNorm)), EvaAttention with
                             qkv_fused=False (q_proj with qkv_bias, k_proj without a bias, v_proj with qkv_bias),
                             checkpoint_filter_fn (pos_embed resampled to the model's grid: resample_abs_pos_embed,
                             bicubic, antialias; MIM checkpoints' norm -> fc_norm)
  timm/layers/pos_embed_sincos.py  freq_bands (step 1), build_fourier_pos_embed (in_pixels False: t = index, then
                             t / feat * ref per axis, 'ij' meshgrid), build_rotary_pos_embed (reshape (N, d/2),
                             repeat_interleave(2)), RotaryEmbeddingCat (feat_shape given: a cached non-persistent
                             pos_embed; dynamic: a bands buffer and get_embed(shape)), rot, apply_rot_embed_cat
  timm/layers/mlp.py         GluMlp (fc1 packed [x1; x2], act(x1) * x2 with gate_last=False, fc2); SwiGLU (fc1_g,
                             fc1_x, act SiLU, drop1, norm over the hidden width, fc2: fc2(norm(silu(fc1_g(x)) *
                             fc1_x(x))))
  timm/layers/pos_embed.py   resample_abs_pos_embed
  timm/layers/pool1d.py      global_pool_nlc ('avg': mean of x[:, num_prefix_tokens:])

Two things here: the float64 reference's RoPE ('eva' kind; families.reference uses it) written from the stated
rule, index by index, and a module replica with timm's parameter names and timm's float32 RoPE tables, the
independent path the reference is checked against. This module imports nothing of families.py (families.py imports
it); the checks take families' Checks object.
"""
import collections
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

EVA_TEMPERATURE = 10000.0  # timm Eva rope_temperature default, every eva02_*
EVA_REF_GRID = 16          # ref_feat_shape (16, 16) of every eva02_* (224 / 14)
LAYOUTS = ("eva02_timm", "eva02_timm_mim", "eva02_base_timm")  # families.py's specs of this file's layout


def arch_tag(s):
    """(timm model name, pretrained tag, crop_pct) the layout's config.json names: Tiny's fine-tuned classifier or its
    MIM checkpoint (eva.py _cfg's crop_pct 0.9), or Base's fine-tuned classifier (qkv_fused False, scale_mlp)."""
    if s.scale_mlp:
        assert s.classes and not s.qkv_fused, "the Base fixture is eva02_base_patch14_448's classifier"
        return "eva02_base_patch14_448", "mim_in22k_ft_in1k", 1.0
    return (("eva02_tiny_patch14_336", "mim_in22k_ft_in1k", 1.0) if s.classes else
            ("eva02_tiny_patch14_224", "mim_in22k", 0.9))


# =============================================================================== the reference's RoPE
def eva_rope_angles(d, gh, gw, ref, temperature=EVA_TEMPERATURE, offset=0.0, column_first=False):
    """The angles of each patch (row-major, (gh * gw, d / 2)), float64: pair m of the head's dims turns by angle m.
    The first d/4 angles are the patch row's, the last d/4 its column's: t_row = (r + offset) / gh * ref, t_col =
    (c + offset) / gw * ref, band j = temperature ** (-j / (d / 4)); angle = t * band. EVA-02: offset 0, the row
    first (timm's 'ij'); PE (families_pe.pe_rope_angles): offset 1, the column first ('xy')."""
    assert d % 4 == 0, f"this RoPE needs a head width divisible by 4, not {d}"
    q = d // 4
    ang = torch.empty(gh * gw, 2 * q, dtype=torch.float64)
    for r in range(gh):
        for c in range(gw):
            n = r * gw + c
            t_row, t_col = (r + offset) / gh * ref, (c + offset) / gw * ref
            first, second = (t_col, t_row) if column_first else (t_row, t_col)
            for j in range(q):
                band = temperature ** (-j / q)
                ang[n, j] = first * band
                ang[n, q + j] = second * band
    return ang


def eva_rope_apply(x, ang):
    """x (..., N, d) turned pair by pair: (x[2m], x[2m + 1]) -> (x[2m] cos a_m - x[2m + 1] sin a_m,
    x[2m + 1] cos a_m + x[2m] sin a_m), a = ang (N, d / 2)."""
    pairs = x.unflatten(-1, (x.shape[-1] // 2, 2))
    even, odd = pairs[..., 0], pairs[..., 1]
    c, s = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    return torch.stack([even * c - odd * s, odd * c + even * s], -1).flatten(-2)


# =============================================================================== timm's layout
def eva02_state_dict(s, c):
    """timm Eva's state_dict() of an eva02_tiny/small (qkv_fused, no layer scale, global_pool 'avg'), in its order:
    the model's own parameters (cls_token, pos_embed), then its children (patch_embed, blocks: norm1, attn (q_bias,
    v_bias, then qkv.weight, proj), norm2, mlp (fc1, fc2)), fc_norm, head (only with classes). The K third of the
    canonical qkv bias is zeros (k_bias is a buffer, not saved). eva02_base/large (qkv_fused False, scale_mlp): attn
    holds q_proj (weight, bias), k_proj (weight only), v_proj (weight, bias), proj; mlp is SwiGLU's fc1_g, fc1_x
    (the canonical fc1's gate rows, then its value rows), norm, fc2."""
    D = s.D
    sd = collections.OrderedDict()
    sd["cls_token"] = c["cls"].reshape(1, 1, D)
    sd["pos_embed"] = c["pos"][None]
    sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"] = c["patch_w"], c["patch_b"]
    for i, b in enumerate(c["blocks"]):
        p = f"blocks.{i}."
        sd[p + "norm1.weight"], sd[p + "norm1.bias"] = b["ln1"]
        bq, bk, bv = b["qkv_b"].chunk(3, 0)
        assert not bk.any(), "EVA-02 has no K bias: the canonical one must be zeros"
        if s.qkv_fused:
            sd[p + "attn.q_bias"], sd[p + "attn.v_bias"] = bq, bv
            sd[p + "attn.qkv.weight"] = b["qkv_w"]
        else:
            wq, wk, wv = b["qkv_w"].chunk(3, 0)
            sd[p + "attn.q_proj.weight"], sd[p + "attn.q_proj.bias"] = wq, bq
            sd[p + "attn.k_proj.weight"] = wk
            sd[p + "attn.v_proj.weight"], sd[p + "attn.v_proj.bias"] = wv, bv
        sd[p + "attn.proj.weight"], sd[p + "attn.proj.bias"] = b["proj_w"], b["proj_b"]
        sd[p + "norm2.weight"], sd[p + "norm2.bias"] = b["ln2"]
        if s.scale_mlp:
            M = s.mlp
            sd[p + "mlp.fc1_g.weight"], sd[p + "mlp.fc1_g.bias"] = b["fc1_w"][:M], b["fc1_b"][:M]
            sd[p + "mlp.fc1_x.weight"], sd[p + "mlp.fc1_x.bias"] = b["fc1_w"][M:], b["fc1_b"][M:]
            sd[p + "mlp.norm.weight"], sd[p + "mlp.norm.bias"] = b["mlp_norm"]
        else:
            sd[p + "mlp.fc1.weight"], sd[p + "mlp.fc1.bias"] = b["fc1_w"], b["fc1_b"]
        sd[p + "mlp.fc2.weight"], sd[p + "mlp.fc2.bias"] = b["fc2_w"], b["fc2_b"]
    sd["fc_norm.weight"], sd["fc_norm.bias"] = c["norm"]  # norm is Identity (use_fc_norm with global_pool 'avg')
    if s.classes:
        sd["head.weight"], sd["head.bias"] = c["head"]
    return sd


def expected_keys(s):
    """The keys a timm eva02_tiny/small (or, with scale_mlp, eva02_base/large) state dict holds, written out by hand
    from eva.py and mlp.py (not from the code above): what the replica's state_dict() and the written files must
    hold, nothing more."""
    keys = ["cls_token", "pos_embed", "patch_embed.proj.weight", "patch_embed.proj.bias"]
    tiny = ("norm1.weight", "norm1.bias", "attn.q_bias", "attn.v_bias", "attn.qkv.weight", "attn.proj.weight",
            "attn.proj.bias", "norm2.weight", "norm2.bias", "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight",
            "mlp.fc2.bias")
    base = ("norm1.weight", "norm1.bias", "attn.q_proj.weight", "attn.q_proj.bias", "attn.k_proj.weight",
            "attn.v_proj.weight", "attn.v_proj.bias", "attn.proj.weight", "attn.proj.bias", "norm2.weight",
            "norm2.bias", "mlp.fc1_g.weight", "mlp.fc1_g.bias", "mlp.fc1_x.weight", "mlp.fc1_x.bias",
            "mlp.norm.weight", "mlp.norm.bias", "mlp.fc2.weight", "mlp.fc2.bias")
    assert s.qkv_fused != s.scale_mlp, "timm's eva02_* are Tiny / Small (fused, GluMlp) or Base / Large (neither)"
    for i in range(s.depth):
        keys += [f"blocks.{i}.{n}" for n in (base if s.scale_mlp else tiny)]
    keys += ["fc_norm.weight", "fc_norm.bias"] + (["head.weight", "head.bias"] if s.classes else [])
    return keys


def timm_resample(posemb, new, prefix=1):
    """timm resample_abs_pos_embed(posemb (1, prefix + g * g, D), new, num_prefix_tokens=prefix) with its defaults
    (bicubic, antialias True), in the table's dtype (timm goes through float32; the replicas here stay in float64,
    as families.py's other timm replicas do)."""
    n = posemb.shape[1] - prefix
    side = int(math.isqrt(n))
    if new[0] * new[1] + prefix == posemb.shape[1] and new[0] == new[1]:
        return posemb
    head, grid = posemb[:, :prefix], posemb[:, prefix:]
    grid = grid.reshape(1, side, side, -1).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=tuple(new), mode="bicubic", antialias=True)
    return torch.cat([head, grid.permute(0, 2, 3, 1).reshape(1, new[0] * new[1], -1)], 1)


# =============================================================================== the replica
def _timm_rope_table(feat_shape, bands, ref, dtype):
    """build_rotary_pos_embed (in_pixels False, grid_offset 0, 'ij') as cat(sin, cos), (H * W, 2 d): the grid's
    integer indices in `dtype` scaled by ref / feat per axis, times the bands, sin and cos reshaped to (N, d / 2)
    and each angle repeated for its pair."""
    t = [torch.arange(n, dtype=torch.int64).to(dtype) / n * r for n, r in zip(feat_shape, ref)]
    grid = torch.stack(torch.meshgrid(t, indexing="ij"), dim=-1)[..., None]  # H, W, 2, 1
    pos = grid * bands.to(dtype)                                              # H, W, 2, d / 4
    n = feat_shape[0] * feat_shape[1]
    sin = pos.sin().reshape(n, -1).repeat_interleave(2, -1)
    cos = pos.cos().reshape(n, -1).repeat_interleave(2, -1)
    return torch.cat([sin, cos], -1)


class _TimmRotaryEmbeddingCat(nn.Module):
    """timm RotaryEmbeddingCat(dim=d, in_pixels=False, temperature, ref_feat_shape): with feat_shape (the model
    built at its image size) the table is a cached non-persistent buffer; without (dynamic_img_size) the bands are one
    and get_embed(shape) builds the table. timm computes in float32; dtype float64 shows the rest agrees to
    rounding."""

    def __init__(self, d, feat_shape=None, ref_feat_shape=(EVA_REF_GRID, EVA_REF_GRID), temperature=EVA_TEMPERATURE,
                 dtype=torch.float32):
        super().__init__()
        self.ref, self.dtype = ref_feat_shape, dtype
        num_bands = d // 4  # freq_bands(num_bands, temperature, step=1)
        bands = 1.0 / temperature ** (torch.arange(0, num_bands, 1, dtype=torch.int64).to(dtype) / num_bands)
        if feat_shape is None:
            self.register_buffer("bands", bands, persistent=False)
            self.pos_embed = None
        else:
            self.bands = None
            self.register_buffer("pos_embed", _timm_rope_table(feat_shape, bands, self._ref(feat_shape), dtype),
                                 persistent=False)

    def _ref(self, feat_shape):
        return self.ref if self.ref is not None else feat_shape  # None: t stays the index (no rescale)

    def get_embed(self, shape=None):
        if shape is not None and self.bands is not None:
            return _timm_rope_table(shape, self.bands, self._ref(shape), self.dtype)
        return self.pos_embed


def _timm_rot(t):
    """timm rot: [x0, x1, x2, x3, ...] -> [-x1, x0, -x3, x2, ...]."""
    return torch.stack([-t[..., 1::2], t[..., 0::2]], dim=-1).reshape(t.shape)


def _rotate_half(t):
    t1, t2 = t.chunk(2, dim=-1)
    return torch.cat([-t2, t1], dim=-1)


class _Eva02Attention(nn.Module):
    """timm EvaAttention (qkv_bias, scale_norm off, rotate_half False, eager path): qkv_fused (Tiny / Small: one qkv
    Linear without a bias, q_bias, a zero k_bias buffer, v_bias) or not (Base / Large: q_proj, k_proj without a bias,
    v_proj, each reshaped to heads on its own)."""

    def __init__(self, D, H, num_prefix_tokens=1, rotate_half=False, qkv_fused=True):
        super().__init__()
        self.H, self.npt, self.rotate_half = H, num_prefix_tokens, rotate_half
        if qkv_fused:
            self.qkv = nn.Linear(D, 3 * D, bias=False)
            self.q_bias = nn.Parameter(torch.zeros(D))
            self.register_buffer("k_bias", torch.zeros(D), persistent=False)
            self.v_bias = nn.Parameter(torch.zeros(D))
        else:
            self.qkv = None
            self.q_proj, self.k_proj, self.v_proj = nn.Linear(D, D), nn.Linear(D, D, bias=False), nn.Linear(D, D)
        self.proj = nn.Linear(D, D)

    def forward(self, x, rope):
        B, N, C = x.shape
        if self.qkv is not None:
            qkv = F.linear(x, weight=self.qkv.weight, bias=torch.cat((self.q_bias, self.k_bias, self.v_bias)))
            q, k, v = qkv.reshape(B, N, 3, self.H, -1).permute(2, 0, 3, 1, 4).unbind(0)
        else:
            q, k, v = [f(x).reshape(B, N, self.H, -1).transpose(1, 2) for f in (self.q_proj, self.k_proj, self.v_proj)]
        sin, cos = rope.chunk(2, -1)  # apply_rot_embed_cat
        turn = _rotate_half if self.rotate_half else _timm_rot
        q = torch.cat([q[:, :, :self.npt], q[:, :, self.npt:] * cos + turn(q[:, :, self.npt:]) * sin], 2).type_as(v)
        k = torch.cat([k[:, :, :self.npt], k[:, :, self.npt:] * cos + turn(k[:, :, self.npt:]) * sin], 2).type_as(v)
        attn = ((q * (C // self.H) ** -0.5) @ k.transpose(-2, -1)).softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(B, N, C))


class _GluMlp(nn.Module):
    """timm GluMlp(hidden_features=2M, act_layer=SiLU, gate_last=False): fc1 -> [x1; x2], silu(x1) * x2, fc2."""

    def __init__(self, D, M):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(D, 2 * M), nn.SiLU(), nn.Linear(M, D)

    def forward(self, x):
        x1, x2 = self.fc1(x).chunk(2, dim=-1)
        return self.fc2(self.act(x1) * x2)


class _SwiGLU(nn.Module):
    """timm SwiGLU(D, M, norm_layer=LayerNorm) as EvaBlock builds it with scale_mlp (no align_to, no dropout): x_gate =
    fc1_g(x), x = fc1_x(x), x = silu(x_gate) * x, a LayerNorm (timm's, eps 1e-6) over the M hidden numbers, fc2."""

    def __init__(self, D, M, eps):
        super().__init__()
        self.fc1_g, self.fc1_x = nn.Linear(D, M), nn.Linear(D, M)
        self.act, self.norm, self.fc2 = nn.SiLU(), nn.LayerNorm(M, eps=eps), nn.Linear(M, D)

    def forward(self, x):
        return self.fc2(self.norm(self.act(self.fc1_g(x)) * self.fc1_x(x)))


class _Eva02Block(nn.Module):
    def __init__(self, s, rotate_half=False):
        super().__init__()
        self.norm1 = nn.LayerNorm(s.D, eps=s.eps)
        self.attn = _Eva02Attention(s.D, s.heads, 1, rotate_half, s.qkv_fused)
        self.norm2 = nn.LayerNorm(s.D, eps=s.eps)
        self.mlp = _SwiGLU(s.D, s.mlp, s.eps) if s.scale_mlp else _GluMlp(s.D, s.mlp)

    def forward(self, x, rope):
        x = x + self.attn(self.norm1(x), rope=rope)
        return x + self.mlp(self.norm2(x))


class TimmEva02(nn.Module):
    """timm Eva as eva02_tiny_patch14_224 (or, with the spec's qkv_fused False and scale_mlp, eva02_base_patch14_448)
    builds it (the fixture's shapes), built at image size hw (its grid in
    pos_embed and in RoPE's cached table: load a state dict through eva02_filter for another grid), or with
    dynamic=True (dynamic_img_size: the learned table resampled in _pos_embed, RoPE's table from the bands per call).
    forward: patch_embed, cat(cls, patches) + pos_embed, blocks, norm Identity, forward_head: global_pool 'avg' (the
    patch tokens' mean), fc_norm, head (pre_logits: fc_norm's output). Returns (output row, [block outputs' row])."""

    def __init__(self, s, hw, dynamic=False, rope_dtype=torch.float32, pre_logits=False, ref_feat_shape="eva",
                 rotate_half=False):
        super().__init__()
        D = s.D
        self.s, self.dynamic, self.pre_logits = s, dynamic, pre_logits
        self.grid = (s.grid, s.grid) if dynamic else (hw[0] // s.patch, hw[1] // s.patch)
        self.num_prefix_tokens = 1
        self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + self.grid[0] * self.grid[1], D))
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv2d(s.C, D, s.patch, s.patch)
        ref = (s.rope_ref, s.rope_ref) if ref_feat_shape == "eva" else ref_feat_shape
        self.rope = _TimmRotaryEmbeddingCat(D // s.heads, None if dynamic else list(self.grid), ref, dtype=rope_dtype)
        self.blocks = nn.ModuleList([_Eva02Block(s, rotate_half) for _ in range(s.depth)])
        self.fc_norm = nn.LayerNorm(D, eps=s.eps)
        if s.classes:
            self.head = nn.Linear(D, s.classes)

    def forward(self, img):
        x = self.patch_embed.proj(img).permute(0, 2, 3, 1)  # NHWC
        B, H, W, C = x.shape
        x = x.reshape(B, H * W, C)
        if self.dynamic:
            pos = timm_resample(self.pos_embed, (H, W), self.num_prefix_tokens)
            rope = self.rope.get_embed(shape=[H, W])
        else:
            assert (H, W) == self.grid, f"built for a {self.grid} grid, given {(H, W)}"
            pos, rope = self.pos_embed, self.rope.get_embed()
        x = torch.cat([self.cls_token.expand(B, -1, -1), x], 1) + pos
        outs = []
        for blk in self.blocks:
            x = blk(x, rope=rope)
            outs.append(x[0])
        x = self.fc_norm(x[:, self.num_prefix_tokens:].mean(dim=1))
        if self.s.classes and not self.pre_logits:
            x = self.head(x)
        return x[0], outs


def eva02_filter(sd, grid):
    """What timm's checkpoint_filter_fn does to a timm eva02 state dict for a model of another grid: pos_embed
    resampled (resample_abs_pos_embed, num_prefix_tokens 1), the rest as it is."""
    out = collections.OrderedDict(sd)
    out["pos_embed"] = timm_resample(sd["pos_embed"].double(), grid, 1)
    return out


# =============================================================================== self-checks
def check_eva02(s, sd, refs, x, chk, replica_outputs, run_replica):
    """Beyond families.check_layout (the model built at each size, RoPE in timm's float32): the state dict and the
    replica's are timm's keys, in timm's order, nothing more; loaded strictly, with float64 RoPE tables the replica is
    the reference to 1e-9 at both sizes (what separates the float32 one is only the tables' rounding), and so is timm's
    dynamic_img_size path (table resampled in the forward, RoPE from the bands); the classifier's pre-logits are
    recorded for the group check against the headless MIM layout; and the reference is sensitive to what EVA-02's
    RoPE is: without ref_feat_shape (t = the index) or with rotate-half pairs the output moves."""
    want = expected_keys(s)
    chk.true(f"{s.layout}: the state dict holds exactly timm's keys, in state_dict() order", list(sd) == want,
             f"extra {sorted(set(sd) - set(want))[:6]}, missing {sorted(set(want) - set(sd))[:6]}")
    m = TimmEva02(s, (s.grid * s.patch,) * 2)
    chk.true(f"{s.layout}: the replica's state_dict() has the same keys in the same order",
             list(m.state_dict()) == want, f"{list(m.state_dict())[:8]}")
    last = "logits" if s.classes else "embedding"
    for size, img in x.items():
        rec = refs[size]
        hw = tuple(img.shape[1:])
        grid = (hw[0] // s.patch, hw[1] // s.patch)
        for label, model, msd in [
                ("float64 RoPE tables", TimmEva02(s, hw, rope_dtype=torch.float64), eva02_filter(sd, grid)),
                ("dynamic_img_size, float64 RoPE", TimmEva02(s, hw, dynamic=True, rope_dtype=torch.float64), sd),
                ("dynamic_img_size, timm's float32 RoPE", TimmEva02(s, hw, dynamic=True), sd)]:
            model = model.double()
            model.load_state_dict(msd, strict=True)
            out, blocks = run_replica(s, model, img)
            tol = 1e-9 if "float64" in label else 1e-6
            chk.close(f"{s.layout} {size}: the module ({label}, strict load) vs {last}", out, rec[last], tol)
            chk.close(f"{s.layout} {size}: the module ({label}), block {s.depth - 1} vs resid_post", blocks[-1],
                      rec[f"blocks.{s.depth - 1}.resid_post"], tol)
        if s.classes:
            model = TimmEva02(s, hw, rope_dtype=torch.float64, pre_logits=True).double()
            model.load_state_dict(eva02_filter(sd, grid), strict=True)
            out, _ = run_replica(s, model, img)
            chk.close(f"{s.layout} {size}: pre_logits vs ln_final.out", out, rec["ln_final.out"][0], 1e-9)
            replica_outputs[(s.layout + " pre_logits", size)] = out
        for label, kw in [("ref_feat_shape None (t the patch index)", {"ref_feat_shape": None}),
                          ("rotate-half pairs (DINOv3's)", {"rotate_half": True})]:
            model = TimmEva02(s, hw, rope_dtype=torch.float64, **kw).double()
            model.load_state_dict(eva02_filter(sd, grid), strict=True)
            out, _ = run_replica(s, model, img)
            d = float((out - rec[last]).abs().max() / rec[last].abs().max())
            chk.true(f"{s.layout} {size}: with {label} the output moves ({d:.1e} of its scale)", d > 1e-4)
    if s.scale_mlp:
        check_eva02_base(s, sd, refs, x, chk, run_replica)


def _fused(sd):
    """A Base state dict (q_proj / k_proj / v_proj) in Tiny's attention form: qkv.weight = cat(q, k, v) by rows,
    q_bias = q_proj.bias, v_bias = v_proj.bias (the K bias a zero buffer): ViTScope's canonical form."""
    out = collections.OrderedDict()
    for k, v in sd.items():
        if k.endswith("attn.q_proj.weight"):
            p = k[:-len("q_proj.weight")]
            out[p + "q_bias"], out[p + "v_bias"] = sd[p + "q_proj.bias"], sd[p + "v_proj.bias"]
            out[p + "qkv.weight"] = torch.cat([sd[p + "q_proj.weight"], sd[p + "k_proj.weight"],
                                               sd[p + "v_proj.weight"]], 0)
        elif ".attn.q_proj." in k or ".attn.k_proj." in k or ".attn.v_proj." in k:
            continue
        else:
            out[k] = v
    return out


def check_eva02_base(s, sd, refs, x, chk, run_replica):
    """EVA-02 Base / Large (qkv_fused False, scale_mlp) beyond check_eva02, at both sizes with float64 RoPE tables:
    what timm's submodules give, read by forward hooks (q_proj, k_proj, v_proj; fc1_g, fc1_x; the SwiGLU norm's input,
    its statistics and output; fc2), is the reference's stage (attn.q / k / v, the halves of mlp.pre, mlp.post, the
    four mlp.norm stages, mlp.out); the same weights in Tiny's fused form (ViTScope's canonical qkv: the three matrices'
    rows concatenated, a zero K bias) give the same output; and without the SwiGLU norm, or with fc1_g and fc1_x
    swapped (the value gated), the output moves."""
    import dataclasses
    last = "logits" if s.classes else "embedding"
    M = s.mlp
    for size, img in x.items():
        rec = refs[size]
        hw = tuple(img.shape[1:])
        grid = (hw[0] // s.patch, hw[1] // s.patch)
        msd = eva02_filter(sd, grid)
        model = TimmEva02(s, hw, rope_dtype=torch.float64).double()
        model.load_state_dict(msd, strict=True)
        taps = {}

        def tap(name, inputs=False):
            def hook(mod, inp, out):
                taps[name] = (inp[0] if inputs else out)[0].detach()
            return hook
        handles = []
        for i, blk in enumerate(model.blocks):
            p = f"blocks.{i}."
            for n in ("q_proj", "k_proj", "v_proj"):
                handles.append(getattr(blk.attn, n).register_forward_hook(tap(p + n)))
            for n in ("fc1_g", "fc1_x", "norm", "fc2"):
                handles.append(getattr(blk.mlp, n).register_forward_hook(tap(p + n)))
            handles.append(blk.mlp.norm.register_forward_hook(tap(p + "norm.in", inputs=True)))
        run_replica(s, model, img)
        for h in handles:
            h.remove()
        worst = collections.defaultdict(float)

        def cmp(stage, got, want):
            err = float((got - want).abs().max() / max(float(want.abs().max()), 1e-12))
            worst[stage] = max(worst[stage], err)
        for i in range(s.depth):
            p = f"blocks.{i}."
            T = taps[p + "q_proj"].shape[0]
            for n, st in (("q_proj", "attn.q"), ("k_proj", "attn.k"), ("v_proj", "attn.v")):
                cmp(st, taps[p + n].reshape(T, s.heads, -1).transpose(0, 1), rec[p + st])
            cmp("mlp.pre (gate half: fc1_g)", taps[p + "fc1_g"], rec[p + "mlp.pre"][:, :M])
            cmp("mlp.pre (value half: fc1_x)", taps[p + "fc1_x"], rec[p + "mlp.pre"][:, M:])
            h = taps[p + "norm.in"]
            cmp("mlp.post (the norm's input)", h, rec[p + "mlp.post"])
            cmp("mlp.norm.mean", h.mean(-1), rec[p + "mlp.norm.mean"])
            cmp("mlp.norm.std (biased, no eps)", h.var(-1, unbiased=False).sqrt(), rec[p + "mlp.norm.std"])
            cmp("mlp.norm.normalized", F.layer_norm(h, (M,), eps=s.eps), rec[p + "mlp.norm.normalized"])
            cmp("mlp.norm.out", taps[p + "norm"], rec[p + "mlp.norm.out"])
            cmp("mlp.out (fc2)", taps[p + "fc2"], rec[p + "mlp.out"])
        for stage, err in worst.items():
            chk.true(f"{s.layout} {size}: timm's submodules (hooks) vs {stage}, every block: {err:.1e} of its scale",
                     err <= 1e-9, f"{err:.1e}")
        fused = TimmEva02(dataclasses.replace(s, qkv_fused=True), hw, rope_dtype=torch.float64).double()
        fused.load_state_dict(_fused(msd), strict=True)
        out, _ = run_replica(s, fused, img)
        chk.close(f"{s.layout} {size}: the same weights in the fused form (qkv = cat(q_proj, k_proj, v_proj), zero K "
                  f"bias) vs {last}", out, rec[last], 1e-9)
        for label, edit in [("without the SwiGLU norm (Identity)", lambda b: setattr(b.mlp, "norm", nn.Identity())),
                            ("fc1_g and fc1_x swapped (the value gated)",
                             lambda b: b.mlp._modules.update(fc1_g=b.mlp.fc1_x, fc1_x=b.mlp.fc1_g))]:
            m = TimmEva02(s, hw, rope_dtype=torch.float64).double()
            m.load_state_dict(msd, strict=True)
            for b in m.blocks:
                edit(b)
            out, _ = run_replica(s, m, img)
            d = float((out - rec[last]).abs().max() / rec[last].abs().max())
            chk.true(f"{s.layout} {size}: {label} the output moves ({d:.1e} of its scale)", d > 1e-4)
