#!/usr/bin/python3
"""Issue 20, the window's side: every view for the families (DeiT distilled, DINO, DINOv2 with
registers, CLIP, SigLIP, MAE) and at non-square input sizes, and the three views of what these
models are studied for (Token norms, Patch features, Self-attention). The real app under Xvfb,
checked by its pixels and by the --layout it reports; the expected numbers come from
`vitscope-cli analyze` and `vitscope-cli trace` read with numpy, for the same model, image and size.
Token orders are written here from each family's published order (DINOv2-reg: cls, reg0..reg3,
patches; DeiT: cls, dist, patches; SigLIP: patches), not read from ViTScope."""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from test_truth import App, run_checks, crop, expect, FAIL  # noqa: E402
from test_gui import viridis  # noqa: E402

REG = ("dinov2-s14-reg", "112,168", 5, 8, 12)  # model, size, tokens before the patches, grid rows, grid columns


def floats(s):
    return np.array([float(v) for v in s.split(",") if v])


def analyze(app, model, size, *flags):
    out = os.path.join(app.dir, f"analyze_{model}.npz")
    args = [app.cli, "analyze", "--model", model, "--image", app.sample, "--out", out, *flags]
    if size:
        args += ["--image-size", size]
    subprocess.run(args, check=True, capture_output=True)
    with np.load(out) as z:
        return {k: z[k] for k in z.files}


def trace(app, model, size):
    return app.trace("--model", model, *(["--image-size", size] if size else []))


def shot(app, model, size, *args):
    return app.shot("--model", model, *(["--image-size", size] if size else []), *args)


def patch_px(img, rect, gh, gw, n, at=0.5):
    """The pixel at the centre of patch n of a picture drawn in `rect` over a gh x gw grid (at: how far
    into the patch, 0.5 its centre; the model input's patch numbers sit in its top-left corner)."""
    x, y, w, h = rect
    return img[int(y + (n // gw + at) * h / gh), int(x + (n % gw + at) * w / gw)]


def check_image_panel_non_square(app):
    """The model input at 112x168 (8x12 patches of 14 px): drawn at its aspect, the grid gh x gw, the cls
    attention overlay skipping cls and the four registers, the preprocessing written for that size."""
    model, size, pre, gh, gw = REG
    t = trace(app, model, size)
    # head 0 (its values 55% apart): the mean of the heads is within 25% (random weights) and drawn faint as flat
    img, lay = shot(app, model, size, "--layer", "11", "--head", "0", "--opacity", "1")
    n, r = lay["numbers"], lay["rects"]
    expect((n["image.h"], n["image.w"], n["image.gh"], n["image.gw"]) == (112, 168, gh, gw),
           f"the image panel draws the run's 112x168 input as {gh}x{gw} patches ({n['image.h']}x{n['image.w']}, "
           f"{n['image.gh']}x{n['image.gw']})")
    x, y, w, h = r["image"]
    expect(abs(w / h - 168 / 112) < 0.02, f"...at its aspect ({w:.0f}x{h:.0f})")
    want = t["blocks.11.attn.pattern"][0, 0, pre:]
    got = floats(lay["strings"].get("overlay.values", ""))
    expect(got.shape == want.shape and np.abs(got - want).max() <= 1e-6,
           f"...the cls attention overlay is pattern[11][0, 0, {pre}:] (cls and 4 registers left out as keys)")
    expect(not lay["strings"].get("overlay.flat"), "...and not flat (drawn at the opacity asked for)")
    top = int(want.argmax())
    px = patch_px(img, r["image"], gh, gw, top, at=0.8)  # (below and right of its number)
    expect(np.abs(px - viridis(1.0)).max() <= 25, f"...patch {top}, the hottest, is drawn opaque yellow (the overlay's "
           f"top at opacity 1) at its place on the 8x12 grid ({px})")
    # the patch numbers sit at their patch's corner on the gh x gw grid (cells w / gw = h / gh wide)
    labels = [tx for tx in lay["texts"] if tx["group"] == "image.patches"]
    cell = w / gw
    off = [abs(tx["box"][0] - (x + (int(tx["text"]) % gw) * cell + 2)) + abs(tx["box"][1] - (y + (int(tx["text"]) // gw) * cell + 1))
           for tx in labels]
    expect(len(labels) >= gw and max(off) < 1, f"...its {len(labels)} patch numbers sit on their patches of the {gh}x{gw} grid "
           f"(worst off by {max(off) if off else '-'} px)")
    pp = lay["strings"]["preprocess"]
    expect("centre crop 168x112" in pp, f"...the preprocessing is written for that size ({pp.splitlines()[-2:]})")
    expect("resized to 8x12" in lay["strings"]["image.pos"], f"...and the position embeddings' resizing is said: "
           f"{lay['strings']['image.pos']}")
    expect("No classification head" in lay["strings"].get("predictions.embedding", ""),
           "...no predictions for an embedding model, said so")
    # the query overlay from register 2 (token 3): its row over the patches
    _, lay = shot(app, model, size, "--query", "3", "--layer", "5")
    got = floats(lay["strings"].get("overlay.values", ""))
    want = t["blocks.5.attn.pattern"][:, 3, pre:].mean(0)
    expect(got.shape == want.shape and np.abs(got - want).max() <= 1e-6, "--query 3 (reg2) shows its row over the patches")
    # a query past the run's tokens is refused naming the range
    rc, err, _, _ = app.run("--model", model, "--image-size", size, "--query", str(pre + gh * gw))
    expect(rc == 2 and "--query" in err and "reg0..reg3" in err, f"--query {pre + gh * gw} is out of range: {err.strip()[:140]}")


def check_siglip_probe(app):
    """SigLIP has no cls token: the overlay is the pooling probe's attention, rollout says why it cannot
    be drawn, the Attention maps tab shows one row of probe maps, the Logit lens says why it is empty."""
    model, size = "siglip-b16", "64,96"
    t = trace(app, model, size)
    img, lay = shot(app, model, size, "--opacity", "1")
    want = t["head.attn.pattern"][:, 0, :].mean(0)
    got = floats(lay["strings"].get("overlay.values", ""))
    expect(lay["strings"].get("overlay.name") == "probe attention", f"the overlay is named probe attention "
           f"({lay['strings'].get('overlay.name')})")
    expect(got.shape == want.shape and np.abs(got - want).max() <= 1e-6, "...its values are head.attn.pattern[:, 0].mean(0)")
    _, lay = shot(app, model, size, "--overlay", "rollout")
    msg = lay["strings"].get("overlay.message", "")
    expect("overlay.values" not in lay["strings"] and "cls token" in msg, f"rollout: nothing drawn, said why ({msg[:90]})")
    img, lay = shot(app, model, size, "--tab", "1")
    r = lay["rects"]
    heads = t["head.attn.pattern"].shape[0]
    expect(all(f"grid.probe.{h}" in r for h in range(heads)) and "grid.probe.mean" in r and "grid.0.0" not in r,
           f"the Attention maps tab shows one row of {heads} probe maps and the mean")
    gx, gy, gw_, gh_ = r["grid.probe.0"]
    expect(abs(gw_ / gh_ - 6 / 4) < 0.05, f"...each at the 4x6 grid's aspect ({gw_:.0f}x{gh_:.0f})")
    _, lay = shot(app, model, size, "--tab", "4")
    expect("no classification head" in lay["strings"].get("lens.message", ""), "the Logit lens says why it is empty: "
           + lay["strings"].get("lens.message", "")[:80])


def check_cls_less_average(app):
    """timm's ViT without a cls token that averages its patches (4 registers, fc_norm): no token's
    attention summarises the image, and the overlay says so instead of naming a probe it lacks; the
    logit lens reads the mean of the patch tokens (the registers left out), as the head does."""
    model, size = "vit-betwixt16-reg4-gap", "64,96"
    t = trace(app, model, size)
    _, lay = shot(app, model, size, "--opacity", "1")
    name = lay["strings"].get("overlay.name", "")
    expect(name == "cls attention (none)", f"the overlay is named for what the model lacks ({name})")
    expect("overlay.values" not in lay["strings"], "...and draws nothing")
    msg = lay["strings"].get("overlay.message", "")
    expect("probe" in msg and "attention from a token" in msg and "head.attn.pattern" not in msg,
           f"...and says why without naming a head it lacks ({msg[:100]})")
    _, lay = shot(app, model, size, "--overlay", "rollout")
    msg = lay["strings"].get("overlay.message", "")
    expect("cls token" in msg and "averages its patch tokens" in msg and "probe" not in msg,
           f"rollout says why it cannot be drawn, true to this model ({msg[:110]})")
    _, lay = shot(app, model, size, "--tab", "4")
    expect(lay["strings"].get("lens.reads") == "mean of patch tokens", f"the logit lens reads the mean of the patches "
           f"({lay['strings'].get('lens.reads')})")
    pooled = t["pooled"]
    resid = t["blocks.11.resid_post"]
    expect(np.abs(resid[4:].mean(0) - pooled).max() <= 1e-4, "the trace's pooled is the mean of the last block's "
           "patch rows (rows 4.. after the 4 registers)")


def check_dinov3_rope(app):
    """DINOv3 (no position table, RoPE): the Positions tab draws how alike two patches' rotations are,
    numpy's mean over the d/2 pairs of cos(angle_i - angle_j) from DINOv3's base-100 periods and the patch
    centres on [-1, 1] (written here from dinov3's rope_position_encoding.py), and analyze's
    rope_similarity; the image panel says the positions are RoPE, not a learned table."""
    model = "dinov3-s16"
    a = analyze(app, model, "")
    d, g = 64, 14
    per = 100.0 ** (2 * np.arange(d // 4) / (d // 2))
    c = (np.arange(g) + 0.5) / g * 2 - 1
    ys, xs = np.meshgrid(c, c, indexing="ij")
    ang = 2 * np.pi * np.concatenate([ys.reshape(-1, 1) / per, xs.reshape(-1, 1) / per], 1)  # (196, 32)
    want = (np.cos(ang) @ np.cos(ang).T + np.sin(ang) @ np.sin(ang).T) / (d // 2)
    expect("rope_similarity" in a and "pos_similarity" not in a and a["rope_similarity"].shape == want.shape and
           np.abs(a["rope_similarity"] - want).max() <= 1e-5, "analyze writes rope_similarity (numpy's), no pos_similarity")
    _, lay = shot(app, model, "", "--tab", "5", "--patch", "100")
    got = floats(lay["strings"].get("pos.values", ""))
    expect(got.shape == (196,) and np.abs(got - want[100]).max() <= 1e-5,
           "the Positions tab draws patch 100's row of the rotations' similarity")
    # relative position only: patch 100 against its neighbour to the right equals patch 101 against its own
    expect(abs(want[100, 101] - want[101, 102]) <= 1e-9, "numpy: RoPE's similarity depends on the offset only")
    pos = lay["strings"].get("image.pos", "")
    expect("no position table" in pos and "RoPE" in pos, f"the image panel says the positions are RoPE ({pos[:80]})")
    _, lay = shot(app, model, "", "--stage", "blocks.0.attn.q_rot")
    title = lay["strings"].get("stage.title", "")
    expect(title.startswith("Queries, rotated by position") and "(6, 201, 64)" in lay["strings"].get("stage.shape", ""),
           f"the q_rot stage opens with its title and shape ({title}, {lay['strings'].get('stage.shape', '')[:60]})")


def check_deit_query_dist(app):
    """DeiT distilled: cls, dist, patches. --query 1 is the dist token's row; the logit lens reads both."""
    model, size = "deit-ti16-distilled", "64,96"
    t = trace(app, model, size)
    _, lay = shot(app, model, size, "--query", "1", "--layer", "11")
    got = floats(lay["strings"].get("overlay.values", ""))
    want = t["blocks.11.attn.pattern"][:, 1, 2:].mean(0)
    expect(got.shape == want.shape and np.abs(got - want).max() <= 1e-6, "--query 1 is the dist token's row over the patches")
    _, lay = shot(app, model, size, "--tab", "4")
    expect(lay["strings"].get("lens.reads") == "cls and dist tokens", f"the logit lens reads cls and dist "
           f"({lay['strings'].get('lens.reads')})")
    last = floats(lay["strings"]["lens.values"])[-t["probs"].size:]
    expect(np.abs(last - t["probs"]).max() <= 1e-6, "...its last row is probs")
    # the mean pooling switch does not apply to DeiT's two heads: refused at launch as bad usage
    rc, err, _, _ = app.run("--model", model, "--pooling", "mean")
    expect(rc == 2 and "--pooling mean" in err and "does not apply" in err,
           f"--pooling mean on DeiT distilled: exit 2, said ({err.strip()[:120]})")


def check_token_norms(app):
    """Token norms: L x T norms of resid_post, the high-norm tokens at the last layer, the registers by name."""
    model, size, pre, gh, gw = REG
    a = analyze(app, model, size)
    img, lay = shot(app, model, size, "--tab", "10")
    got = floats(lay["strings"].get("norms.values", "")).reshape(a["token_norms"].shape)
    expect(np.abs(got - a["token_norms"]).max() <= 1e-4 * a["token_norms"].max(),
           f"the Token norms tab draws analyze's token_norms {a['token_norms'].shape}")
    high = [int(v) for v in lay["strings"].get("norms.high", "").split(",") if v]
    expect(high == [int(v) for v in a["high_norm_tokens"]], f"...its high-norm tokens are analyze's ({high})")
    toks = lay["strings"].get("norms.tokens", "")
    expect(all(f"reg{i}:" in toks for i in range(4)) and toks.startswith("cls:"), "...the registers listed by name, after cls")
    expect(all(f"norms.token.reg{i}" in lay["rects"] for i in range(4)), "...each with where it looks")
    pat = trace(app, model, size)["blocks.11.attn.pattern"]
    want = [float(pat[:, i, pre:].mean(0).max()) for i in range(pre)]
    got = [n_ for n_ in (lay["numbers"].get(f"norms.token.{nm}.vmax") for nm in ["cls"] + [f"reg{i}" for i in range(4)])]
    expect(all(g is not None for g in got) and np.abs(np.array(got) - want).max() <= 1e-6,
           f"...on a key 0 .. the row's largest weight, said beside it ({got} against the trace's {want})")
    # the patch norms over the image: its own key, the heatmap's scale
    expect("norms.image.key" in lay["rects"] and lay["numbers"].get("norms.image.key.vmin") == 0 and
           abs(lay["numbers"].get("norms.image.key.vmax", -1) - a["token_norms"].max()) <= 1e-3 * a["token_norms"].max(),
           "...and the patch norms over the image have their key, 0 .. the largest norm")
    x, y, w, h = lay["rects"]["norms.image"]
    row = a["token_norms"][-1, pre:]
    k = int(row.argmin())
    px = patch_px(img, lay["rects"]["norms.image"], gh, gw, k)
    expect(np.abs(px - viridis(row[k] / a["token_norms"].max())).max() <= 25,
           f"...drawn on it: the weakest patch {k} is viridis({row[k] / a['token_norms'].max():.2f}) ({px})")
    # the heatmap: the largest norm is the colour bar's top (viridis yellow)
    n = lay["numbers"]
    expect(abs(n["norms.vmax"] - a["token_norms"].max()) <= 1e-3 * a["token_norms"].max() and n["norms.vmin"] == 0,
           "...on one scale, 0 .. the largest norm")
    l, t_ = np.unravel_index(np.argmax(a["token_norms"]), a["token_norms"].shape)
    x, y, w, h = lay["rects"]["norms"]
    px = img[int(y + (l + 0.5) * h / n["norms.rows"]), int(x + (t_ + 0.5) * w / n["norms.cols"])]
    expect(px[0] > 200 and px[1] > 200 and px[2] < 90, f"...the largest ({a['token_norms'].max():.3g}, layer {l}, "
           f"token {t_}) drawn yellow ({px})")
    # another factor: the list follows it
    a2 = analyze(app, model, size, "--norm-factor", "1.2")
    _, lay = shot(app, model, size, "--tab", "10", "--keys", "o")  # (o: the tab's key, selects it again)
    expect("norms.high" in lay["strings"], "the tab's key selects it")
    expect(len(a2["high_norm_tokens"]) > len(a["high_norm_tokens"]), "a lower factor lists more tokens (analyze)")
    # exported numbers: what the tab drew, as analyze names them
    d = os.path.join(app.dir, "norms_export")
    os.makedirs(d, exist_ok=True)
    shot(app, model, size, "--tab", "10", "--export-npy", "--export-dir", d)
    f = os.path.join(d, "token_norms.npy")
    expect(os.path.exists(f) and np.abs(np.load(f) - a["token_norms"]).max() <= 1e-4 * a["token_norms"].max(),
           "Numbers .npy+.csv writes token_norms.npy = analyze's")


def check_patch_features(app):
    """Patch features: the first three principal components as RGB, one flat colour per patch, and the
    foreground by the first component, against analyze."""
    model, size, pre, gh, gw = REG
    a = analyze(app, model, size)
    img, lay = shot(app, model, size, "--tab", "11")
    s = lay["strings"]
    rgb = floats(s.get("features.rgb", "")).reshape(-1, 3)
    expect(rgb.shape == a["features_rgb"].shape and np.abs(rgb - a["features_rgb"]).max() <= 1e-5,
           f"the Patch features tab draws analyze's features_rgb {a['features_rgb'].shape}")
    expect(s.get("features.source") == "ln_final.out", f"...of ln_final.out ({s.get('features.source')})")
    fg = floats(s.get("features.fg", ""))
    expect(np.array_equal(fg, a["features_fg"]), f"...foreground = first component > 0: {int(fg.sum())} patches, as analyze")
    # pixels: each patch of the RGB picture is its colour
    worst = 0
    for k in range(gh * gw):
        px = patch_px(img, lay["rects"]["features.rgb"], gh, gw, k)
        worst = max(worst, np.abs(px - np.round(255 * a["features_rgb"][k])).max())
    expect(worst <= 1, f"...every patch drawn in its colour (worst channel off by {worst:.0f})")
    # the mask: background patches darkened, foreground ones as in the input picture
    dark, same = [], []
    for k in range(gh * gw):
        m = patch_px(img, lay["rects"]["features.mask"], gh, gw, k).mean()
        i = patch_px(img, lay["rects"]["features.image"], gh, gw, k).mean()
        (same if a["features_fg"][k] else dark).append(abs(m - i) <= 2 if a["features_fg"][k] else m <= 0.3 * i + 2)
    expect(all(same) and all(dark), f"...the foreground picture keeps the {len(same)} foreground patches and darkens "
           f"the {len(dark)} others")


def check_self_attention(app):
    """DINO's self-attention maps: per head, the cls row at the last layer and its 60% masks, against analyze."""
    model, size = "dino-s16", "64,96"
    gh, gw = 4, 6
    a = analyze(app, model, size)
    img, lay = shot(app, model, size, "--tab", "12")
    s = lay["strings"]
    H = a["self_attn"].shape[0]
    got = floats(s.get("selfattn.values", "")).reshape(H, -1)
    expect(np.abs(got - a["self_attn"]).max() <= 1e-7, f"the Self-attention tab draws analyze's self_attn ({H} heads)")
    mask = floats(s.get("selfattn.mask", "")).reshape(H, -1)
    expect(np.array_equal(mask, a["self_attn_mask"]), "...and its masks (60% of each head's mass)")
    expect(np.abs(floats(s.get("selfattn.kept", "")) - a["self_attn_kept"]).max() <= 1e-6, "...with the mass each keeps")
    expect(s.get("selfattn.source") == "blocks.11.attn.pattern", f"...of the last layer ({s.get('selfattn.source')})")
    # pixels: the hottest patch of all heads is yellow on its map; head 0's mask darkens the patches it leaves out
    hh, kk = np.unravel_index(int(a["self_attn"].argmax()), a["self_attn"].shape)
    px = patch_px(img, lay["rects"][f"selfattn.head.{hh}"], gh, gw, int(kk))
    expect(px[0] > 200 and px[1] > 200 and px[2] < 90, f"...the heads' hottest patch (head {hh}) is drawn yellow ({px})")
    ok = True
    for k in range(gh * gw):
        v = patch_px(img, lay["rects"]["selfattn.mask.0"], gh, gw, k).mean()
        ok &= (v > 12) if a["self_attn_mask"][0, k] else (v < 0.25 * 255)
    expect(ok, "...and head 0's mask leaves its kept patches bright, the others dark")
    # the key, as every attention picture has it: one scale from 0 to the largest weight of all heads, and
    # every head's patches drawn on it (a head whose largest weight is half the top is never yellow)
    n = lay["numbers"]
    top = float(a["self_attn"].max())
    expect("selfattn.key" in lay["rects"] and n.get("selfattn.key.vmin") == 0 and
           abs(n.get("selfattn.key.vmax", -1) - top) <= 1e-6 * top,
           f"...under a colour key from 0 to the heads' largest weight {top:.4g} "
           f"({n.get('selfattn.key.vmin')} .. {n.get('selfattn.key.vmax')})")
    T = gh * gw + 1  # the keys: the cls token and the patches (DINO has no registers)
    key = [x["text"] for x in lay["texts"] if x["group"] == "selfattn.key"]
    expect(f"1/{T} = {1 / T:.4f} (uniform)" in key,
           f"...with uniform attention 1/{T} marked on it, as on the Attention maps tab ({key})")
    worst = 0
    for h in range(H):
        m = a["self_attn"][h]
        for k in (int(m.argmax()), int(m.argmin())):
            px = patch_px(img, lay["rects"][f"selfattn.head.{h}"], gh, gw, k)
            worst = max(worst, float(np.abs(px - viridis(m[k] / top)).max()))
    expect(worst <= 25, f"...every head's patches are viridis(weight / that top) (worst channel error {worst:.0f}/255)")
    _, lay = shot(app, model, size, "--tab", "12", "--attention-scale", "per-map")
    n = lay["numbers"]
    expect(n.get("selfattn.key.vmin") == 0 and n.get("selfattn.key.vmax") == 1,
           "--attention-scale per-map: the key is the fraction of each map's max")
    # SigLIP: the probe's row, said
    a = analyze(app, "siglip-b16", "64,96")
    _, lay = shot(app, "siglip-b16", "64,96", "--tab", "12")
    got = floats(lay["strings"].get("selfattn.values", "")).reshape(a["self_attn"].shape)
    expect(lay["strings"].get("selfattn.source") == "head.attn.pattern" and np.abs(got - a["self_attn"]).max() <= 1e-7,
           "SigLIP: the pooling probe's row (head.attn.pattern), as analyze writes it")


def check_positions_resized(app):
    """Positions at another size: the learned 37x37 table of DINOv2 and the resized one the run added."""
    model, size, pre, gh, gw = REG
    a = analyze(app, model, size)
    _, lay = shot(app, model, size, "--tab", "5", "--patch", "7")
    n, s = lay["numbers"], lay["strings"]
    expect(n["pos.grid_n"] == 37, f"the learned grid is DINOv2's 37x37 ({n['pos.grid_n']})")
    expect(np.abs(floats(s["pos.values"]) - a["pos_similarity"][0]).max() <= 1e-5, "...its similarity is analyze's")
    expect(n["pos.run.patch"] == 7 and np.abs(floats(s["pos.run.values"]) - a["pos_similarity_run"][7]).max() <= 1e-5,
           "the resized table's similarity for the selected patch is analyze's pos_similarity_run")
    expect(n["pos.run.rows"] == gh and n["pos.run.cols"] == gw, f"...drawn {gh}x{gw}")


def check_input_size_control(app):
    """The input-size control: + on the width runs at the next multiple of the patch; - past the smallest
    size is refused in place; --image-size that does not fit the model exits 2 naming the flag."""
    # the default model (28x28, patch 4): + on W runs 28x32 (7x8 patches)
    _, lay = app.shot()
    x, y, w, h = lay["rects"]["image.size.w"]
    _, lay = app.shot("--hover", f"{x + w - h / 2},{y + h / 2}", "--click")
    n = lay["numbers"]
    expect((n["image.h"], n["image.w"], n["image.gh"], n["image.gw"]) == (28, 32, 7, 8),
           f"+ on the width: the model runs at 28x32, 7x8 patches ({n['image.h']}x{n['image.w']})")
    so = lay["shown_options"] or {}
    expect((so.get("image_h"), so.get("image_w")) == (28, 32), f"...the trace on screen is that run's ({so})")
    # at 4x28, - on the height would be 0: refused, said, not applied
    _, lay = app.shot("--image-size", "4,28")
    x, y, w, h = lay["rects"]["image.size.h"]
    _, lay = app.shot("--image-size", "4,28", "--hover", f"{x + w - h - 4 - h / 2},{y + h / 2}", "--click")
    msg = lay["strings"].get("image.size.message", "")
    expect("not applied" in msg and "0x28" in msg and lay["numbers"]["image.h"] == 4,
           f"- below the patch size: refused in place ({msg[:100]})")
    rc, err, _, _ = app.run("--image-size", "30")
    expect(rc == 2 and "--image-size" in err and "multiple of the patch size 4" in err, f"--image-size 30: exit 2 ({err.strip()[:120]})")


if __name__ == "__main__":
    sys.exit(run_checks([check_image_panel_non_square, check_siglip_probe, check_cls_less_average, check_dinov3_rope,
                         check_deit_query_dist,
                         check_token_norms,
                check_patch_features, check_self_attention, check_positions_resized, check_input_size_control],
               "the families' views"))
