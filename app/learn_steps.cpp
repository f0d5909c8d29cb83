// Learn mode's steps (learn.h): each draws its picture in world units from the trace on screen and writes
// its narration from the same numbers.
#include "learn_internal.h"

#include "core/model/rope.h"

namespace vit::app::learn_detail {

namespace {

// ---------------------------------------------------------------- the steps

void step_model(Ctx& x) {
    // every stage of the table outside the blocks and of block 0 (it stands for each block), in order
    std::vector<size_t> pre, blk, post;
    bool after = false;
    for (size_t i = 0; i < x.t.size(); ++i) {
        const StageInfo& s = x.t.info(i);
        if (s.layer > 0) continue;
        if (s.layer == 0) { blk.push_back(i); after = true; continue; }
        (after ? post : pre).push_back(i);
    }
    const float W = x.Wp(), H = x.Hp(), colw = W / 3.3f;
    const float lh = ImGui::GetTextLineHeight();
    struct Slab { size_t row; WRect r; };
    std::vector<Slab> slabs;
    // each slab under its caption, in its real shape (rows : columns), as large as its row allows
    auto lay = [&](const std::vector<size_t>& rows, float cx) {
        if (rows.empty()) return;
        const float rh = std::min(4 * lh, (H - 1.5f * lh) / float(rows.size()));
        for (size_t k = 0; k < rows.size(); ++k) {
            const Array& a = x.t.at(rows[k]);
            const Slice2D s = slice2d(a, 0);
            const float bw = colw * 0.9f, bh = std::max(2.f, rh - lh - 4);
            float w = bw, h = bw * float(s.rows) / float(std::max(1, s.cols));
            if (h > bh) { h = bh; w = bh * float(s.cols) / float(std::max(1, s.rows)); }
            slabs.push_back({rows[k], WRect{cx, lh * 1.5f + k * rh + lh, std::max(w, 2.f), std::max(h, 2.f)}});
        }
    };
    lay(pre, 0.02f * W);
    lay(blk, 1.12f * colw);
    lay(post, 2.22f * colw);
    // the camera: the whole model, then (second half) into the input
    if (x.own_cam && !slabs.empty()) {
        const WRect& r0 = slabs.front().r;
        const float z = std::min(x.Wp() * 0.5f / r0.w, x.Hp() * 0.5f / r0.h);
        const float q = span(x.p, 0.7f, 1.f);
        x.zoom = 1 + (std::max(1.f, z) - 1) * q;
        x.focus = ImVec2(0.5f + ((r0.x + r0.w / 2) / W - 0.5f) * q, 0.5f + ((r0.y + r0.h / 2) / H - 0.5f) * q);
    }
    label(x, 0.02f * W, 0, "embedding (" + itos(pre.size()) + " stages)", IM_COL32(255, 220, 120, 255));
    label(x, 1.12f * colw, 0, "block 0 of " + itos(x.c.depth) + " (each the same)", IM_COL32(255, 220, 120, 255));
    label(x, 2.22f * colw, 0, "head (" + itos(post.size()) + " stages)", IM_COL32(255, 220, 120, 255));
    // the stack of blocks behind block 0
    if (!blk.empty() && x.c.depth > 1) {
        const float bx = 1.12f * colw - 4, by = lh * 1.4f;
        for (int l = std::min(x.c.depth, 8) - 1; l >= 1; --l) {
            const float o = 4.f * l;
            x.dl->AddRect(x.S(bx + o, by - o + lh), x.S(bx + colw * 0.96f + o, H - 2 - o), IM_COL32(90, 90, 110, 255));
        }
    }
    // the highlight follows the data to the end, then (as the camera goes in) comes back to the input
    const int lit = x.p >= 0.7f ? 0 : std::min(int(slabs.size()) - 1, int(span(x.p, 0, 0.7f) * float(slabs.size())));
    for (size_t k = 0; k < slabs.size(); ++k) {
        const StageInfo& s = x.t.info(slabs[k].row);
        const Array& a = x.t.at(slabs[k].row);
        const Slice2D sl = slice2d(a, 0);
        std::string nm = s.name.rfind("blocks.0.", 0) == 0 ? s.name.substr(9) : s.name;
        std::string shape = shape_text(a);
        bool cut = false;
        // a long name (AIMv2's patch_embed.norm.normalized) keeps its whole name: the shape goes where it does not fit
        const float cap_w = 0.95f * colw * x.zoom;
        std::string cap = nm + " " + shape;
        if (ImGui::CalcTextSize(cap.c_str()).x > cap_w) cap = nm;
        label(x, slabs[k].r.x, slabs[k].r.y - lh - 1, fit_text(cap, cap_w, cut),
              int(k) == lit ? IM_COL32(255, 230, 0, 255) : IM_COL32(210, 210, 210, 255));
        if (s.id.kind == K::Input && x.lv.input.valid()) {
            x.dl->AddImage(x.lv.input.id(), x.S(slabs[k].r.x, slabs[k].r.y), x.S(slabs[k].r.x + slabs[k].r.w, slabs[k].r.y + slabs[k].r.h));
        } else {
            const bool probs = s.id.kind == K::AttnPattern || s.id.kind == K::Probs || !s.signed_values;
            const Colormap cm = probs ? prob_cm(sl.data, sl.size()) : signed_cm(sl.data, sl.size());
            grid(x, "slab." + s.name, sl.data, sl.rows, sl.cols, slabs[k].r, cm, CellRef{s.id, 0, 0, 0}, 1, false);
            // the key of the slab the data is at (each slab is coloured over its own range)
            // (the input is drawn as the picture: while it is highlighted, the key is the next slab's)
            const bool after_input = int(k) == lit + 1 && x.t.info(slabs[size_t(lit)].row).id.kind == K::Input;
            if (int(k) == lit || after_input)
                add_key(x, std::string(after_input ? "the next slab, " : "the highlighted slab, ") + s.name + (sl.slices > 1 ? " (head 0)" : "") +
                               "; each slab has its own range", cm);
        }
        if (int(k) == lit) outline(x, WRect{slabs[k].r.x - 2, slabs[k].r.y - 2, slabs[k].r.w + 4, slabs[k].r.h + 4}, IM_COL32(255, 230, 0, 255));
    }
    if (!slabs.empty()) {
        const StageInfo& s = x.t.info(slabs[size_t(lit)].row);
        x.torch = s.id;
        x.v.probe.numbers["learn.keys"] = 0;
    }
    size_t params = 0;
    for (auto& b : x.w.blocks) params += b.qkv_b.size();  // (counted in full below)
    (void)params;
    x.narration = "This is the whole model, every stage a slab of its real values in its real shape: " + itos(pre.size()) +
                  " stages turn the " + itos(x.rd.img_h) + " x " + itos(x.rd.img_w) + " image into " + itos(x.rd.T) +
                  " tokens of " + itos(x.c.width) + " numbers, then " + itos(x.c.depth) + " blocks (block 0 shown, " +
                  itos(blk.size()) + " stages each) update every token, and " + itos(post.size()) +
                  " stages read the answer. The highlight follows the data; then the camera goes into the first stage. "
                  "Scroll to zoom into any slab until its numbers show; click a value to open it in the workbench.";
}

void step_pixels(Ctx& x) {
    const Array* in = x.get(K::Input);
    if (!in) return;
    const int C = int(extent(*in, 0)), Hh = int(extent(*in, 1)), Ww = int(extent(*in, 2));
    const float W = x.Wp(), H = x.Hp(), lh = ImGui::GetTextLineHeight();
    const float side = std::min(W * 0.5f, H - 3 * lh);
    const float iw = Ww >= Hh ? side : side * Ww / Hh, ih = Ww >= Hh ? side * Hh / Ww : side;
    const WRect img{W * 0.03f, lh * 1.5f, iw, ih};
    label(x, img.x, 0, "the model input (" + itos(Hh) + " x " + itos(Ww) + ", " + itos(C) + (C == 3 ? " channels" : " channel") + ")");
    if (x.lv.input.valid()) x.dl->AddImage(x.lv.input.id(), x.S(img.x, img.y), x.S(img.x + img.w, img.y + img.h));
    // a lesson's click on the image: the patch under it
    if (x.clicked && x.capture) {
        const ImVec2 m = ImGui::GetIO().MousePos, a = x.S(img.x, img.y), b = x.S(img.x + img.w, img.y + img.h);
        if (m.x >= a.x && m.x < b.x && m.y >= a.y && m.y < b.y)
            x.pick = {"image", int((m.y - a.y) / (b.y - a.y) * x.rd.gh), int((m.x - a.x) / (b.x - a.x) * x.rd.gw)};
    }
    // the patch grid appears
    const float g = span(x.p, 0.5f, 0.9f);
    if (g > 0) {
        const ImU32 col = IM_COL32(255, 255, 255, int(160 * g));
        for (int i = 0; i <= x.rd.gw; ++i) x.dl->AddLine(x.S(img.x + img.w * i / x.rd.gw, img.y), x.S(img.x + img.w * i / x.rd.gw, img.y + img.h), col);
        for (int i = 0; i <= x.rd.gh; ++i) x.dl->AddLine(x.S(img.x, img.y + img.h * i / x.rd.gh), x.S(img.x + img.w, img.y + img.h * i / x.rd.gh), col);
    }
    // its channels as the numbers the model gets
    const float gx = img.x + img.w + W * 0.05f, avail = W - gx - W * 0.02f;
    const float ch_side = std::min(avail, (H - lh * (1.5f + 1.2f * C)) / C);
    const char* names[] = {"R", "G", "B"};
    const auto [lo, hi] = range_of(in->data(), in->size());
    const Colormap cm = quantity_colormap(Quantity::Signed, lo, hi);
    for (int ch = 0; ch < C; ++ch) {
        const float y = lh * 1.5f + ch * (ch_side + lh * 1.2f);
        label(x, gx, y - lh * 1.2f, std::string("channel ") + (C == 3 ? names[ch] : "0") + ": " + itos(Hh) + " x " + itos(Ww) + " numbers");
        grid(x, "input channels (normalised)", in->data() + size_t(ch) * Hh * Ww, Hh, Ww, WRect{gx, y, ch_side * Ww / std::max(Hh, Ww), ch_side * Hh / std::max(Hh, Ww)},
             cm, CellRef{StageId{K::Input}, ch, 0, 0}, span(x.p, 0.1f, 0.4f), ch == 0);
    }
    x.torch = StageId{K::Input};
    std::string mean, sd;
    for (size_t i = 0; i < x.c.pre.mean.size(); ++i) mean += (i ? ", " : "") + num(x.c.pre.mean[i], 3);
    for (size_t i = 0; i < x.c.pre.std.size(); ++i) sd += (i ? ", " : "") + num(x.c.pre.std[i], 3);
    x.narration = "A picture is numbers. The model sees this image as " + itos(C) + (C == 3 ? " grids (red, green, blue)" : " grid") +
                  " of " + itos(Hh) + " x " + itos(Ww) + " numbers: each pixel (0 to 1) minus the mean (" + mean + ") over the std (" + sd +
                  "), so here they run from " + num(lo) + " to " + num(hi) + ". The lines that appear cut it into " + itos(x.rd.gh) + " x " +
                  itos(x.rd.gw) + " patches of " + itos(x.c.patch) + " x " + itos(x.c.patch) + " pixels: the next step.";
}

void step_patches(Ctx& x) {
    const Array* pa = x.get(K::Patches);
    if (!pa) return;
    const int N = rows_of(*pa), CPP = cols_of(*pa);
    const float W = x.Wp(), H = x.Hp(), lh = ImGui::GetTextLineHeight();
    const float side = std::min(W * 0.42f, H - 3 * lh);
    const int gh = x.rd.gh, gw = x.rd.gw;
    const float iw = gw >= gh ? side : side * gw / gh, ih = gw >= gh ? side * gh / gw : side;
    const WRect img{W * 0.02f, lh * 1.5f, iw, ih};
    const float mx = img.x + img.w + W * 0.1f, mw = W - mx - W * 0.02f, my = lh * 1.5f, mh = H - my - lh * 0.5f;
    const float rh = mh / N;
    label(x, img.x, 0, "the image, " + itos(gh) + " x " + itos(gw) + " patches");
    label(x, mx, 0, "patches: " + itos(N) + " rows of " + itos(CPP) + " numbers");
    if (x.lv.input.valid()) x.dl->AddImage(x.lv.input.id(), x.S(img.x, img.y), x.S(img.x + img.w, img.y + img.h), ImVec2(0, 0), ImVec2(1, 1), IM_COL32(255, 255, 255, 90));
    // the tiles leave the image one after the other, each for its row of the matrix
    const float tw = img.w / gw, th = img.h / gh;
    for (int n = 0; n < gh * gw && n < N; ++n) {
        const int gy = n / gw, gx = n % gw;
        const float q = span(x.p, 0.5f * float(n) / float(N), 0.5f * float(n) / float(N) + 0.35f);
        const float sx = img.x + gx * tw, sy = img.y + gy * th;
        const float dh = std::max(rh, 1.f), dw = dh * tw / th;
        const float dx = mx - dw - W * 0.01f, dy = my + n * rh;
        const float cx = sx + (dx - sx) * q, cy = sy + (dy - sy) * q, cw = tw + (dw - tw) * q, chh = th + (dh - th) * q;
        if (x.lv.input.valid())
            x.dl->AddImage(x.lv.input.id(), x.S(cx, cy), x.S(cx + cw, cy + chh), ImVec2(float(gx) / gw, float(gy) / gh),
                           ImVec2(float(gx + 1) / gw, float(gy + 1) / gh));
    }
    grid(x, "patch matrix", pa->data(), N, CPP, WRect{mx, my, mw, mh}, signed_cm(pa->data(), pa->size()), CellRef{StageId{K::Patches}, 0, 0, 0},
         span(x.p, 0.6f, 0.95f));
    x.torch = StageId{K::Patches};
    x.narration = "The image is cut into " + itos(gh) + " x " + itos(gw) + " = " + itos(N) + " patches of " + itos(x.c.patch) + " x " +
                  itos(x.c.patch) + " pixels. Each patch is unrolled into one row of " + itos(CPP) + " numbers (" + itos(x.c.channels) +
                  " channels x " + itos(x.c.patch) + " x " + itos(x.c.patch) + " pixels), patches read left to right, top to bottom: row 0 is the "
                  "top-left patch." + (x.t.options().bug_reshape_patches ? " BUG switched on: a plain reshape, so a row is NOT one patch." : "");
}

void step_embed(Ctx& x) {
    const Array* pa = x.get(K::Patches);
    const Array* pe = x.get(K::PatchEmbed);
    if (!pa || !pe) return;
    const int N = rows_of(*pa), CPP = cols_of(*pa), D = cols_of(*pe);
    const int p = std::clamp(x.patch, 0, N - 1);
    const float W = x.Wp(), H = x.Hp(), lh = ImGui::GetTextLineHeight();
    const float* prow = row_of_stage(*pa, p);
    const float* erow = row_of_stage(*pe, p);
    const bool have_w = x.w.patch_w.size() == size_t(D) * size_t(CPP);
    const float mx = W * 0.08f, mw = W * 0.62f, top = lh * 3.5f;
    const float mh = std::min(H - top - lh * 2, mw * float(D) / float(CPP) * 4);
    label(x, mx, 0, "patch " + itos(p) + " (" + itos(CPP) + " numbers)");
    grid(x, "patch row", prow, 1, CPP, WRect{mx, lh * 1.3f, mw, lh * 1.2f}, signed_cm(prow, size_t(CPP)), CellRef{StageId{K::Patches}, 0, p, 0});
    const int j = std::min(D - 1, int(span(x.p, 0.1f, 0.9f) * float(D)));
    if (have_w) {
        label(x, mx, top - lh * 1.1f, "W: " + itos(D) + " filters x " + itos(CPP));
        grid(x, "embedding weights W", x.w.patch_w.data(), D, CPP, WRect{mx, top, mw, mh}, signed_cm(x.w.patch_w.data(), x.w.patch_w.size()));
        outline(x, WRect{mx, top + mh * j / D, mw, std::max(mh / D, 1.f)}, IM_COL32(255, 230, 0, 255));
    }
    // the embedding fills, one filter's dot product after the other
    const float ox = mx + mw + W * 0.08f, ow = std::max(W * 0.06f, 12.f);
    label(x, ox + ow / 2, top - lh * 1.1f, "its embedding", IM_COL32(230, 230, 230, 255), 0.5f);
    std::vector<float> shown(erow, erow + D);
    const Colormap ecm = signed_cm(erow, size_t(D));
    grid(x, "patch embedding (the row filling)", shown.data(), D, 1, WRect{ox, top, ow, mh}, ecm, CellRef{StageId{K::PatchEmbed}, 0, p, 0}, 1);
    if (j + 1 < D) x.dl->AddRectFilled(x.S(ox, top + mh * (j + 1) / D), x.S(ox + ow, top + mh), IM_COL32(22, 22, 26, 255));
    outline(x, WRect{ox, top + mh * j / D, ow, std::max(mh / D, 1.f)}, IM_COL32(255, 230, 0, 255));
    arrow(x, mx + mw + 4, top + mh * (j + 0.5f) / D, ox - 4, top + mh * (j + 0.5f) / D);
    record_values(x, "embed.patch", prow, size_t(CPP));
    record_values(x, "embed.row", erow, size_t(D));
    x.v.probe.numbers["learn.patch"] = p;
    // the sum, recomputed here from the weights and the patch row
    std::string check;
    if (have_w) {
        double s = x.w.patch_b.size() == size_t(D) ? double(x.w.patch_b[size_t(j)]) : 0.0;
        for (int k = 0; k < CPP; ++k) s += double(prow[k]) * double(x.w.patch_w(size_t(j), size_t(k)));
        check = std::fabs(s - erow[j]) <= 1e-3 * std::max(1.0, std::fabs(s)) ? " (the sum, done here from the weights: " + num(s, 3) + ")"
                                                                                : " (the sum done here from the weights gives " + num(s, 3) + ")";
    }
    x.torch = StageId{K::PatchEmbed};
    x.narration = "Each patch row goes through the same linear map: " + itos(D) + " filters, each a row of W with " + itos(CPP) +
                  " weights (PyTorch writes it as a Conv2d with kernel and stride " + itos(x.c.patch) + "). The dot product of patch " + itos(p) +
                  " with filter j, plus its bias, is number j of its embedding. Now j = " + itos(j) + ": " + num(erow[j], 3) + check + ". " +
                  "Patch " + itos(p) + x.why_patch + ".";
}

void step_cls(Ctx& x) {
    const Array* pe = x.get(K::PatchEmbed);
    const Array* tk = x.get(K::Tokens);
    if (!pe || !tk) return;
    const int N = rows_of(*pe), D = cols_of(*pe), T0 = rows_of(*tk), pre = T0 - N;
    const float W = x.Wp(), H = x.Hp(), lh = ImGui::GetTextLineHeight();
    const float gx = W * 0.2f, gw = W * 0.55f, gy = lh * 1.5f, gh = H - gy - lh * 0.5f, rh = gh / T0;
    const float q = span(x.p, 0.1f, 0.6f);
    const Colormap cm = signed_cm(tk->data(), tk->size());
    label(x, gx, 0, "tokens: " + itos(T0) + " rows of " + itos(D));
    // the patch rows slide down by the prefix; the prefix rows appear
    grid(x, "token rows", pe->data(), N, D, WRect{gx, gy + rh * pre * q, gw, rh * N}, cm, CellRef{StageId{K::PatchEmbed}, 0, 0, 0});
    grid(x, "prefix rows", tk->data(), pre, D, WRect{gx, gy, gw, rh * pre}, cm, CellRef{StageId{K::Tokens}, 0, 0, 0}, span(x.p, 0.5f, 0.9f), false);
    // the new rows named: each beside its row when the rows are a line tall, else together
    const float lh0 = ImGui::GetTextLineHeight();
    if (rh * x.zoom >= lh0 + 1) {
        for (int i = 0; i < pre; ++i) label(x, gx - 6, gy + rh * i, token_name(x, i, K::Tokens), IM_COL32(255, 230, 0, 255), 1);
    } else {
        std::string names;
        for (int i = 0; i < pre; ++i) names += (i ? ", " : "") + token_name(x, i, K::Tokens);
        label(x, gx - 6, gy, names, IM_COL32(255, 230, 0, 255), 1);
    }
    record_values(x, "cls.row", row_of_stage(*tk, 0), size_t(D));
    x.torch = StageId{K::Tokens};
    const bool cls_pool = x.t.options().pooling_for(x.c) == Pooling::Cls || x.t.options().pooling_for(x.c) == Pooling::ClsThenNorm;
    x.narration = std::string("A learned row, the cls token, is put before the ") + itos(N) + " patch rows" +
                  (x.c.dist_token ? " (and DeiT's distillation token after it)" : "") + ": " + itos(T0) +
                  " tokens. Its " + itos(D) + " numbers are the same for every image: all it will know, it gathers from the patches through "
                  "attention. " + (cls_pool ? "After the last block, its row alone is read to classify." : "This model reads the mean of the patch rows instead.");
}

void step_pos(Ctx& x) {
    const Array* tk = x.get(K::Tokens);
    const Array* pos = x.get(K::PosEmbed);
    const Array* em = x.get(K::Embed);
    if (!tk || !pos || !em) return;
    const int T0 = rows_of(*tk), D = cols_of(*tk);
    const float W = x.Wp(), H = x.Hp(), lh = ImGui::GetTextLineHeight();
    const float gw = W * 0.27f, gap = W * 0.09f, gy = lh * 1.5f, gh = std::min(H - gy - lh, gw * 2.5f);
    const float x0 = W * 0.02f;
    const Colormap cm = signed_cm(em->data(), em->size());
    label(x, x0, 0, "the tokens");
    label(x, x0 + gw + gap, 0, "position embeddings");
    label(x, x0 + 2 * (gw + gap), 0, "sum");
    grid(x, "tokens, positions and their sum", tk->data(), T0, D, WRect{x0, gy, gw, gh}, cm, CellRef{StageId{K::Tokens}, 0, 0, 0});
    const int pr = rows_of(*pos), prow0 = T0 - pr;  // a table without cls rows lines up with the patch rows
    grid(x, "position embeddings", pos->data(), pr, cols_of(*pos), WRect{x0 + gw + gap, gy + gh * prow0 / T0, gw, gh * pr / T0},
         signed_cm(pos->data(), pos->size()), CellRef{StageId{K::PosEmbed}, 0, 0, 0});
    label(x, x0 + gw + gap * 0.5f, gy + gh / 2, "+", IM_COL32(255, 255, 255, 255), 0.5f);
    label(x, x0 + 2 * gw + gap * 1.5f, gy + gh / 2, "=", IM_COL32(255, 255, 255, 255), 0.5f);
    const float q = span(x.p, 0.2f, 0.8f);
    grid(x, "tokens, positions and their sum", tk->data(), T0, D, WRect{x0 + 2 * (gw + gap), gy, gw, gh}, cm, CellRef{StageId{K::Tokens}, 0, 0, 0}, 1 - q, false);
    grid(x, "sum", em->data(), T0, D, WRect{x0 + 2 * (gw + gap), gy, gw, gh}, cm, CellRef{StageId{K::Embed}, 0, 0, 0}, q, false);
    const double mt = mean_abs(tk->data() + size_t(T0 - pr) * D, size_t(pr) * D), mp = mean_abs(pos->data(), pos->size());
    x.torch = StageId{K::Embed};
    x.narration = "Attention does not know where a patch was: it treats the tokens as a set. So a learned row per position is added to "
                  "each token (the same rows for every image). Here the position rows are about " + num(mp / std::max(1e-12, mt), 2) +
                  " times the size of the patch rows (mean |value| " + num(mp, 3) + " against " + num(mt, 3) + ")" +
                  (x.rd.resized ? "; the stored table was resized to this run's grid" : "") + ". The sum is what the blocks get.";
}

void step_registers(Ctx& x) {
    const Array* em = x.get(K::Embed);
    const Array* wr = x.get(K::WithRegisters);
    if (!em || !wr) return;
    const int T = rows_of(*wr), D = cols_of(*wr);
    const float W = x.Wp(), H = x.Hp(), lh = ImGui::GetTextLineHeight();
    const float gx = W * 0.2f, gw = W * 0.55f, gy = lh * 1.5f, gh = H - gy - lh * 0.5f;
    grid(x, "tokens with registers", wr->data(), T, D, WRect{gx, gy, gw, gh}, signed_cm(wr->data(), wr->size()), CellRef{StageId{K::WithRegisters}, 0, 0, 0});
    const float rh = gh / T;
    for (int i = 0; i < x.c.registers; ++i)
        outline(x, WRect{gx, gy + rh * (int(x.c.cls_token) + i), gw, rh}, IM_COL32(255, 230, 0, int(255 * span(x.p, 0.2f, 0.6f))));
    label(x, gx, 0, itos(T) + " tokens: cls, " + itos(x.c.registers) + " registers, the patches");
    x.torch = StageId{K::WithRegisters};
    x.narration = "This model adds " + itos(x.c.registers) + " register tokens after the cls token: learned rows without a position, the same for every "
                  "image. They give the model room to keep global notes, so that it does not overwrite unimportant patches with them (the "
                  "registers paper's high-norm tokens).";
}

// A LayerNorm of one token: its values, mean and std; normalised; times gamma plus beta.
// An RMSNorm (AIMv2) of one token: its values and their root mean square; divided by it (nothing subtracted); times gamma.
void step_ln(Ctx& x, LnSite site, int layer) {
    const bool rms = ln_has(site, LnPart::Rms) && x.t.find(StageId{ln_kind(site, LnPart::Rms), layer}) != nullptr;
    const StageId mid{ln_kind(site, rms ? LnPart::Rms : LnPart::Mean), layer}, sid{ln_kind(site, rms ? LnPart::Rms : LnPart::Std), layer},
        nid{ln_kind(site, LnPart::Normalized), layer}, oid{ln_kind(site, LnPart::Out), layer};
    const Array* mean = x.t.find(mid);
    const Array* sd = x.t.find(sid);
    const Array* nz = x.t.find(nid);
    const Array* out = x.t.find(oid);
    if (!mean || !sd || !nz || !out) {
        x.narration = "This step needs " + x.t.table().name(nid) + " and its statistics, which this trace does not hold.";
        return;
    }
    const StageInfo& mi = x.t.info(mid);
    const Array* in = mi.from.empty() ? nullptr : x.t.find(mi.from[0]);
    if (!in) return;
    const int tok = std::clamp(x.tok, 0, rows_of(*in) - 1), D = cols_of(*in);
    const float* xr = row_of_stage(*in, tok);
    const float* nr = row_of_stage(*nz, tok);
    const float* orow = row_of_stage(*out, tok);
    const float m = rms ? 0.f : mean->data()[tok], s = sd->data()[tok];  // (RMSNorm: no mean is removed; s is the rms)
    const float W = x.Wp(), H = x.Hp(), lh = ImGui::GetTextLineHeight();
    const float q1 = span(x.p, 0.3f, 0.55f), q2 = span(x.p, 0.65f, 0.9f);
    std::vector<float> shown(static_cast<size_t>(D));
    for (int i = 0; i < D; ++i) shown[size_t(i)] = q2 > 0 ? nr[i] + (orow[i] - nr[i]) * q2 : xr[i] + (nr[i] - xr[i]) * q1;
    auto [lo0, hi0] = range_of(xr, size_t(D));
    auto [lo1, hi1] = range_of(nr, size_t(D));
    auto [lo2, hi2] = range_of(orow, size_t(D));
    const float lo = q2 > 0 ? lo1 + (lo2 - lo1) * q2 : lo0 + (lo1 - lo0) * q1, hi = q2 > 0 ? hi1 + (hi2 - hi1) * q2 : hi0 + (hi1 - hi0) * q1;
    const float m_shown = m * (1 - q1), s_shown = s + (1 - s) * q1;
    const WRect r{W * 0.1f, lh * 2.5f, W * 0.8f, H * 0.62f};
    const std::string tn = token_name(x, tok);
    label(x, r.x, 0, tn + "'s " + itos(D) + " numbers entering " + x.t.info(oid).name);
    const float m_abs = std::max(std::fabs(lo), std::fabs(hi));
    bars(x, rms ? "RMSNorm row (blue < 0 < red)" : "LayerNorm row (blue < 0 < red)", shown.data(), D, r, -m_abs, m_abs,
         quantity_colormap(Quantity::Signed, -m_abs, m_abs));
    if (q2 <= 0 && rms) {
        // the band +- rms about 0, which the division makes +- 1
        auto Y = [&](float v) { return r.y + r.h * (m_abs - std::clamp(v, -m_abs, m_abs)) / (2 * m_abs); };
        x.dl->AddRectFilled(x.S(r.x, Y(s_shown)), x.S(r.x + r.w, Y(-s_shown)), IM_COL32(255, 230, 0, 30));
        x.dl->AddLine(x.S(r.x, Y(0)), x.S(r.x + r.w, Y(0)), IM_COL32(255, 230, 0, 120), 1);
        label(x, r.x + r.w + 4, Y(s_shown) - lh / 2, q1 < 0.5f ? "+rms" : "+1", IM_COL32(255, 230, 0, 255));
    } else if (q2 <= 0) {
        // the mean and the mean +- std
        auto Y = [&](float v) { return r.y + r.h * (m_abs - std::clamp(v, -m_abs, m_abs)) / (2 * m_abs); };
        x.dl->AddLine(x.S(r.x, Y(m_shown)), x.S(r.x + r.w, Y(m_shown)), IM_COL32(255, 230, 0, 255), 2);
        x.dl->AddRectFilled(x.S(r.x, Y(m_shown + s_shown)), x.S(r.x + r.w, Y(m_shown - s_shown)), IM_COL32(255, 230, 0, 30));
        label(x, r.x + r.w + 4, Y(m_shown) - lh / 2, q1 < 0.5f ? "mean" : "0", IM_COL32(255, 230, 0, 255));
    }
    const bool affine = x.t.options().affine, unbiased = x.t.options().unbiased;
    const float ly = r.y + r.h + lh;
    if (rms) {
        double mu = 0;
        for (int i = 0; i < D; ++i) mu += xr[i];
        mu /= D;
        label(x, r.x, ly, "rms " + num(s, 4) + " = sqrt(mean of the squares)   (its mean, " + num(float(mu), 3) + ", is not removed)",
              IM_COL32(255, 230, 0, 255));
    } else {
        label(x, r.x, ly, "mean " + num(m, 4) + "   std " + num(s, 4) + (unbiased ? " (unbiased: / (D-1))" : " (biased: / D)"), IM_COL32(255, 230, 0, 255));
    }
    record_values(x, "ln.in", xr, size_t(D));
    record_values(x, "ln.normalized", nr, size_t(D));
    record_values(x, "ln.out", orow, size_t(D));
    x.v.probe.strings[rms ? "learn.values.ln.rms" : "learn.values.ln.mean_std"] = rms ? csv(&s, 1) : csv(&m, 1) + "," + csv(&s, 1);
    x.torch = q2 > 0 ? oid : nid;
    const int blk = layer;
    if (rms) {
        const std::string phase = x.p < 0.3f ? "The band is one root mean square either side of 0."
                                  : q2 <= 0  ? "Divide by the rms: the row's root mean square is now 1. Nothing was subtracted, so its mean is not 0."
                                  : affine   ? "Then each number is multiplied by its own learned gamma (elementwise_affine=True); RMSNorm has no beta."
                                             : "elementwise_affine=False: there is no gamma, so the normalised row is the output.";
        x.narration = "RMSNorm works on one token at a time, like LayerNorm, but only rescales: " + tn + "'s " + itos(D) + " numbers" +
                      (blk >= 0 ? " entering block " + itos(blk) : "") + " have a root mean square of " + num(s, 3) + ". " + phase;
        return;
    }
    std::string phase = x.p < 0.3f ? "Watch the yellow line (the mean) and the band (one std either side)."
                        : q2 <= 0   ? "Subtract the mean, divide by the std: the row now has mean 0 and std 1."
                        : affine    ? "Then each number is multiplied by its own learned gamma and shifted by its beta (elementwise_affine=True)."
                                    : "elementwise_affine=False: there is no gamma and beta, so the normalised row is the output.";
    x.narration = "LayerNorm works on one token at a time. " + tn + "'s " + itos(D) + " numbers" + (blk >= 0 ? " entering block " + itos(blk) : "") +
                  " have mean " + num(m, 3) + " and std " + num(s, 3) + (unbiased ? " (unbiased: divided by D - 1)" : " (divided by D)") +
                  ". " + phase;
}

void step_layer_scale(Ctx& x) {
    const Array* ao = x.get(K::AttnOut, 0);
    const Array* ls = x.get(K::Ls1, 0);
    if (!ao || !ls) return;
    const int tok = std::clamp(x.tok, 0, rows_of(*ao) - 1), D = cols_of(*ao);
    const float* a = row_of_stage(*ao, tok);
    const float* b = row_of_stage(*ls, tok);
    const float W = x.Wp(), lh = ImGui::GetTextLineHeight();
    label(x, W * 0.1f, 0, "attention output of " + token_name(x, tok));
    grid(x, "attention output, before and after the layer scale", a, 1, D, WRect{W * 0.1f, lh * 1.3f, W * 0.8f, lh * 2}, signed_cm(a, size_t(D)), CellRef{StageId{K::AttnOut, 0}, 0, tok, 0});
    label(x, W * 0.1f, lh * 5, "times gamma (one learned number per channel)");
    grid(x, "after layer scale", b, 1, D, WRect{W * 0.1f, lh * 6.3f, W * 0.8f, lh * 2}, signed_cm(b, size_t(D)), CellRef{StageId{K::Ls1, 0}, 0, tok, 0}, span(x.p, 0.3f, 0.8f));
    x.torch = StageId{K::Ls1, 0};
    x.narration = "Layer scale: before the residual add, each channel of the attention's output is multiplied by a learned gamma (DINOv2 and "
                  "CaiT start them small, so that a deep model begins close to doing nothing). |out| goes from " + num(norm2(a, size_t(D))) +
                  " to " + num(norm2(b, size_t(D))) + ".";
}

// x + f(x) = y for one token: three rows.
void residual(Ctx& x, StageId in_id, StageId add_id, StageId out_id, const std::string& what) {
    const Array* in = x.t.find(in_id);
    const Array* add = x.t.find(add_id);
    const Array* out = x.t.find(out_id);
    if (!in || !add || !out) return;
    const int tok = std::clamp(x.tok, 0, rows_of(*out) - 1), D = cols_of(*out);
    const float* a = row_of_stage(*in, tok);
    const float* b = row_of_stage(*add, tok);
    const float* c = row_of_stage(*out, tok);
    const float W = x.Wp(), lh = ImGui::GetTextLineHeight();
    const auto [lo, hi] = range_of(c, size_t(D));
    const float m = std::max({std::fabs(lo), std::fabs(hi), std::fabs(range_of(a, size_t(D)).first), std::fabs(range_of(a, size_t(D)).second)});
    const Colormap cm = quantity_colormap(Quantity::Signed, -m, m);
    // three rows, each a band of the picture (the cells as wide as the width allows, as tall as a third)
    const float x0 = W * 0.1f, w = W * 0.8f, band = (x.Hp() - lh) / 3, rh = std::min(band - lh * 2.5f, w / D * 3);
    label(x, x0, 0, "the stream: " + token_name(x, tok) + " (" + x.t.info(in_id).name + ")");
    grid(x, "residual stream rows (one scale)", a, 1, D, WRect{x0, lh * 1.3f, w, rh}, cm, CellRef{in_id, 0, tok, 0});
    label(x, x0, band, "+ " + what + " (" + x.t.info(add_id).name + ")");
    grid(x, "residual stream rows (one scale)", b, 1, D, WRect{x0, band + lh * 1.3f, w, rh}, cm, CellRef{add_id, 0, tok, 0}, span(x.p, 0.1f, 0.4f), false);
    label(x, x0, 2 * band, "= " + x.t.info(out_id).name);
    grid(x, "residual stream rows (one scale)", c, 1, D, WRect{x0, 2 * band + lh * 1.3f, w, rh}, cm, CellRef{out_id, 0, tok, 0}, span(x.p, 0.5f, 0.9f), false);
    record_values(x, "residual." + x.t.info(out_id).name, c, size_t(D));
    x.torch = out_id;
    // (what the ratio says is said from the ratio: a random model's first blocks add more than the stream holds)
    const double ratio = norm2(b, size_t(D)) / std::max(1e-12, norm2(a, size_t(D)));
    x.narration = "The block does not replace the token: it adds what " + what + " computed to what came in (the residual stream). Here |" +
                  what + "| / |stream| = " + num(ratio, 3) +
                  (ratio < 1 ? ": the block changes the stream only in part, and every later stage can still read what came before."
                             : ": here the addition is larger than the stream itself, yet what came in is still in the sum for every "
                               "later stage to read.");
}

// SwiGLU's gate, as three rows of bars over the M hidden units of one token: silu(gate) from fc1's first half (the
// trace's mlp.pre), the value (its second half), and their product, the trace's mlp.post (what fc2 reads); the
// product row grows in as the step plays. The gate's numbers are silu of the trace's, the product the trace's own.
void mlp_gate(Ctx& x, const float* pre, const float* post, int M, int tok, const WRect& r) {
    const float lh = ImGui::GetTextLineHeight(), gap = lh * 1.6f, h = (r.h - 2 * gap) / 3;
    std::vector<float> gate(static_cast<size_t>(M));
    for (int i = 0; i < M; ++i) gate[size_t(i)] = pre[i] / (1.f + std::exp(-pre[i]));  // silu(x1) = x1 * sigmoid(x1)
    const float* value = pre + M;
    const std::string t = token_name(x, tok);
    struct Row { const char* name; std::string caption; const float* v; };
    const Row rows[3] = {{"SwiGLU gate: silu(fc1's first half)", "gate = silu(x1): " + itos(M) + " numbers of " + t + ", near 0 where x1 < 0", gate.data()},
                         {"SwiGLU value: fc1's second half", "value = x2: the other " + itos(M), value},
                         {"SwiGLU product: gate * value", "gate * value: what fc2 reads (mlp.post)", post}};
    const float grow = span(x.p, 0.35f, 0.7f);
    std::vector<float> prod(static_cast<size_t>(M));
    for (int i = 0; i < M; ++i) prod[size_t(i)] = post[i] * grow;
    for (int k = 0; k < 3; ++k) {
        const WRect rk{r.x, r.y + k * (h + gap), r.w, h};
        const float* v = k == 2 ? prod.data() : rows[k].v;
        const auto [lo, hi] = range_of(rows[k].v, size_t(M));
        const float mm = std::max(std::fabs(lo), std::fabs(hi));
        label(x, r.x, rk.y - lh * 1.2f, rows[k].caption);
        bars(x, rows[k].name, v, M, rk, lo, hi, quantity_colormap(Quantity::Signed, -mm, mm));
    }
    record_values(x, "mlp.gate", gate.data(), size_t(M));
    record_values(x, "mlp.value", value, size_t(M));
    int shut = 0;  // hidden units the gate all but closes
    for (float g : gate) shut += std::fabs(g) < 0.05f;
    x.v.probe.numbers["learn.mlp.gate_shut"] = shut;
}

// The hidden row of one token: fc1's output turning into the nonlinearity's as the step plays (GELU and its kin:
// one number in, one out), on one signed scale that follows the two.
void mlp_hidden(Ctx& x, const float* a, const float* b, int Mi, int M, int tok, const WRect& r) {
    const float q = span(x.p, 0.3f, 0.7f);
    std::vector<float> shown(static_cast<size_t>(M));
    const bool same = Mi == M;
    for (int i = 0; i < M; ++i) shown[size_t(i)] = same ? a[i] + (b[i] - a[i]) * q : b[i];
    const auto [lo0, hi0] = range_of(a, size_t(Mi));
    const auto [lo1, hi1] = range_of(b, size_t(M));
    const float lo = same ? lo0 + (lo1 - lo0) * q : lo1, hi = same ? hi0 + (hi1 - hi0) * q : hi1;
    const float mm = std::max(std::fabs(lo), std::fabs(hi));
    label(x, r.x, 0, (q < 0.5f && same ? "fc1: " : "after the nonlinearity: ") + itos(M) + " numbers of " + token_name(x, tok));
    bars(x, "MLP hidden row (blue < 0 < red)", shown.data(), M, r, lo, hi, quantity_colormap(Quantity::Signed, -mm, mm));
}

void step_mlp(Ctx& x) {
    const Array* ln = x.get(K::Ln2Out, 0);
    const Array* pre = x.get(K::MlpPre, 0);
    const Array* post = x.get(K::MlpPost, 0);
    const Array* out = x.get(K::MlpOut, 0);
    if (!ln || !pre || !post || !out) return;
    const int tok = std::clamp(x.tok, 0, rows_of(*pre) - 1), D = cols_of(*ln), Mi = cols_of(*pre), M = cols_of(*post);
    const float* a = row_of_stage(*pre, tok);
    const float* b = row_of_stage(*post, tok);
    const float* o = row_of_stage(*out, tok);
    const float W = x.Wp(), H = x.Hp(), lh = ImGui::GetTextLineHeight();
    const WRect r{W * 0.1f, lh * 2.5f, W * 0.86f, H * 0.5f};
    if (x.c.act == Act::SwiGlu && Mi == 2 * M) mlp_gate(x, a, b, M, tok, r);
    else mlp_hidden(x, a, b, Mi, M, tok, r);
    const float oy = r.y + r.h + lh * 2.5f;
    label(x, r.x, oy - lh * 1.2f, std::string(x.c.mlp_norm ? "LayerNorm, then fc2: back to " : "fc2: back to ") + itos(D) + " (" +
                                      x.t.info(StageId{K::MlpOut, 0}).name + ")");
    grid(x, "MLP output", o, 1, D, WRect{r.x, oy, r.w, lh * 2}, signed_cm(o, size_t(D)), CellRef{StageId{K::MlpOut, 0}, 0, tok, 0}, span(x.p, 0.75f, 0.95f));
    const auto [lo1, hi1] = range_of(b, size_t(M));
    const bool same = Mi == M;
    int neg = 0;
    for (int i = 0; i < Mi; ++i) neg += a[i] < 0;
    record_values(x, "mlp.hidden", b, size_t(M));
    x.torch = StageId{K::MlpPost, 0};
    x.narration = "The MLP works on each token alone: fc1 widens its " + itos(D) + " numbers to " + itos(Mi) + ", " +
                  (same ? std::string(act_label(x.c.act)) + " keeps the positive ones and squashes the negative ones towards 0 (" + itos(neg) +
                              " of " + itos(Mi) + " were negative here; after it the smallest is " + num(lo1, 3) + ")"
                        : std::string("SwiGLU splits them in two halves: silu of the first is a gate, near 0 where it is "
                                      "negative (here ") + itos(int(x.v.probe.numbers["learn.mlp.gate_shut"])) + " of " + itos(M) +
                              " gates are under 0.05 in size), that scales the second half, the value, unit by unit (" + itos(Mi) +
                              " become " + itos(M) + ")") +
                  (x.c.mlp_norm ? ", a LayerNorm over those " + itos(M) + " hidden numbers (EVA-02's scale_mlp) steadies them, "
                                  "and fc2 brings them back to "
                                : std::string(", and fc2 brings it back to ")) +
                  itos(D) + ". Attention mixes tokens; the MLP thinks about each one.";
}

void step_depth(Ctx& x) {
    const int L = x.c.depth;
    std::vector<const Array*> rows;
    for (int l = 0; l < L; ++l) rows.push_back(x.get(K::ResidPost, l));
    if (rows.empty() || std::count(rows.begin(), rows.end(), nullptr)) return;
    const int tok = std::clamp(x.tok, 0, rows_of(*rows[0]) - 1), D = cols_of(*rows[0]);
    std::vector<float> stack(size_t(L) * D);
    std::vector<double> norms;
    for (int l = 0; l < L; ++l) {
        std::copy_n(row_of_stage(*rows[size_t(l)], tok), D, stack.begin() + size_t(l) * D);
        norms.push_back(norm2(row_of_stage(*rows[size_t(l)], tok), size_t(D)));
    }
    const float W = x.Wp(), H = x.Hp(), lh = ImGui::GetTextLineHeight();
    const int cur = std::min(L - 1, int(span(x.p, 0.05f, 0.85f) * L));
    const float x0 = W * 0.18f, w = W * 0.7f, top = lh * 2, rh = std::min(lh * 5.f, (H - top - lh) / L);
    label(x, x0, 0, token_name(x, tok) + " leaving each block (" + itos(L) + " rows of " + itos(D) + ")");
    const Colormap cm = signed_cm(stack.data(), stack.size());
    for (int l = 0; l < L; ++l) {
        grid(x, "the stream after each block (one scale)", stack.data() + size_t(l) * D, 1, D, WRect{x0, top + l * rh, w, rh * 0.8f}, cm,
             CellRef{StageId{K::ResidPost, l}, 0, tok, 0}, l <= cur ? 1.f : 0.25f, l == 0);
        label(x, x0 - 8, top + l * rh, "block " + itos(l) + "  |x| " + num(norms[size_t(l)], 1), l == cur ? IM_COL32(255, 230, 0, 255) : IM_COL32(200, 200, 200, 255), 1);
    }
    outline(x, WRect{x0 - 2, top + cur * rh - 2, w + 4, rh * 0.8f + 4}, IM_COL32(255, 230, 0, 255));
    // the camera passes along the stack
    if (x.own_cam && rh < lh * 1.6f) {
        x.zoom = 1.6f;
        x.focus = ImVec2(0.5f, std::clamp((top + (cur + 0.5f) * rh) / H, 0.3f, 0.7f));
    }
    record_values(x, "depth.norms", std::vector<float>(norms.begin(), norms.end()).data(), norms.size());
    x.torch = StageId{K::ResidPost, cur};
    x.narration = "The same block, with weights of its own, runs " + itos(L) + " times. Each adds its attention and its MLP to the stream; "
                  "the row of " + token_name(x, tok) + " after block " + itos(cur) + " has |x| = " + num(norms[size_t(cur)], 2) + " (after block 0: " +
                  num(norms[0], 2) + "). Early blocks mostly look near each patch, later ones across the image: the Distance tab measures it.";
}

void step_pool(Ctx& x) {
    const Array* pooled = x.get(K::Pooled);
    if (!pooled) return;
    const StageInfo& pi = x.t.info(StageId{K::Pooled});
    const Array* src = pi.from.empty() ? nullptr : x.t.find(pi.from[0]);
    const float W = x.Wp(), H = x.Hp(), lh = ImGui::GetTextLineHeight();
    const int D = int(pooled->size());
    const Pooling pool = x.t.options().pooling_for(x.c);
    if (src && rank(*src) == 2) {
        const int T = rows_of(*src);
        const float gx = W * 0.1f, gw = W * 0.5f, gy = lh * 1.5f, gh = H - gy - lh * 4;
        label(x, gx, 0, x.t.info(pi.from[0]).name + " (" + itos(T) + " tokens)");
        grid(x, "tokens at the end", src->data(), T, cols_of(*src), WRect{gx, gy, gw, gh}, signed_cm(src->data(), src->size()), CellRef{pi.from[0], 0, 0, 0});
        if (pool == Pooling::Cls || pool == Pooling::ClsThenNorm) outline(x, WRect{gx, gy, gw, gh / T}, IM_COL32(255, 230, 0, 255));
        else outline(x, WRect{gx, gy + gh * x.rd.prefix / T, gw, gh * (T - x.rd.prefix) / T}, IM_COL32(255, 230, 0, 255));
        const float q = span(x.p, 0.3f, 0.8f);
        const float py = gy + (gh + lh * 1.5f - gy) * q;
        grid(x, "the pooled row", pooled->data(), 1, D, WRect{gx, py, gw, lh * 1.6f}, signed_cm(pooled->data(), size_t(D)), CellRef{StageId{K::Pooled}, 0, 0, 0}, std::max(q, 0.3f));
    }
    record_values(x, "pool.pooled", pooled->data(), size_t(D));
    x.torch = StageId{K::Pooled};
    x.narration = std::string("After the last block, one row stands for the image. This model ") +
                  (pool == Pooling::Cls ? "takes the cls token's row (after the final LayerNorm): the token that gathered from every patch."
                   : pool == Pooling::ClsThenNorm ? "takes the cls token's row and normalises it."
                   : pool == Pooling::Mean ? "takes the mean of the patch rows."
                   : pool == Pooling::NormMean ? "normalises every row, then takes the mean of the patch rows."
                                           : "lets a learned probe attend over the tokens (the next step).") +
                  " Its " + itos(D) + " numbers are all the head sees.";
}

void step_head_pool(Ctx& x) {
    const Array* pt = x.get(K::HeadAttnPattern);
    if (!pt) return;
    const int H = int(extent(*pt, 0)), T = int(extent(*pt, 2));
    const int h = std::clamp(x.head, 0, H - 1);
    const float* a = row_of_stage(*pt, 0, h);
    const float W = x.Wp(), Hh = x.Hp(), lh = ImGui::GetTextLineHeight();
    const int best = argmax(a, T);
    bars(x, "probe attention (0 to the largest)", a, T, WRect{W * 0.1f, lh * 2.5f, W * 0.86f, Hh * 0.6f}, 0, *std::max_element(a, a + T),
         quantity_colormap(Quantity::Probability, 0, *std::max_element(a, a + T)), best);
    label(x, W * 0.1f, 0, "the probe's attention over " + itos(T) + " tokens, head " + itos(h));
    record_values(x, "head_pool.row", a, size_t(T));
    x.torch = StageId{K::HeadAttnPattern};
    x.narration = std::string(x.c.cls_token ? "This model has a cls token, but the image's vector is not read from it: a learned probe "
                                              "(one query) attends over every token, the cls token among them, "
                                            : "This model has no cls token: a learned probe (one query) attends over every token, as a "
                                              "cls token would in a block, ") +
                  "with " + itos(H) + " heads of its own, and its output stands for the image. Head " + itos(h) + " gives " +
                  pct(a[best]) + " to " + token_name(x, best) + ".";
}

void step_logits(Ctx& x, bool probs) {
    const Array* lg = x.get(K::Logits);
    const Array* pr = x.get(K::Probs);
    if (!lg || (probs && !pr)) return;
    const int Kc = int(lg->size());
    const std::vector<std::string> names = class_labels(x.c, size_t(Kc));
    const float* l = lg->data();
    const float W = x.Wp(), H = x.Hp(), lh = ImGui::GetTextLineHeight();
    const int show = std::min(Kc, 20);
    std::vector<int> idx(static_cast<size_t>(Kc));
    std::iota(idx.begin(), idx.end(), 0);
    if (Kc > show) std::partial_sort(idx.begin(), idx.begin() + show, idx.end(), [&](int i, int j) { return l[i] > l[j]; });
    idx.resize(size_t(show));
    const float q = probs ? span(x.p, 0.2f, 0.7f) : 1.f;
    std::vector<float> shown(static_cast<size_t>(show));
    for (int i = 0; i < show; ++i) {
        const float a = l[idx[size_t(i)]], b = probs ? pr->data()[idx[size_t(i)]] : a;
        shown[size_t(i)] = a + (b - a) * q;
    }
    const auto [llo, lhi] = range_of(l, size_t(Kc));
    float lo = llo, hi = lhi;
    if (probs) { lo = llo * (1 - q); hi = lhi + (float(*std::max_element(pr->data(), pr->data() + Kc)) - lhi) * q; }
    const WRect r{W * 0.1f, lh * 2.5f, W * 0.86f, H * 0.6f};
    const int best = argmax(l, Kc);
    const Colormap cm = probs && q >= 0.5f ? quantity_colormap(Quantity::Probability, 0, hi) : quantity_colormap(Quantity::Signed, llo, lhi);
    const int best_at = int(std::find(idx.begin(), idx.end(), best) - idx.begin());  // the largest, framed
    bars(x, probs && q >= 0.5f ? "probabilities (0 to the largest)" : "logits (blue < 0 < red)", shown.data(), show, r, lo, hi, cm, best_at,
         [&](int i) { return names[size_t(idx[size_t(i)])]; }, false);
    label(x, r.x, 0, std::string(probs && q >= 0.5f ? "the probabilities" : "the logits") + (Kc > show ? " (the " + itos(show) + " largest of " + itos(Kc) + ")" : ""));
    // the class names under the bars when they fit, else listed
    // under the bars when every name fits two bars' width, else the five largest listed in full
    const float bw = r.w / show * x.zoom;
    bool fits = bw >= 60;
    for (int i = 0; i < show && fits; ++i) fits = ImGui::CalcTextSize(names[size_t(idx[size_t(i)])].c_str()).x <= 2 * bw - 6;
    if (!fits)
        for (int i = 0; i < std::min(show, 5); ++i)
            label(x, r.x, r.y + r.h + lh * (1.2f + i), itos(i + 1) + ". " + names[size_t(idx[size_t(i)])] + "  " +
                      (probs && q >= 0.5f ? pct(pr->data()[idx[size_t(i)]]) : num(l[idx[size_t(i)]], 2)));
    else
        for (int i = 0; i < show; ++i) {
            label(x, r.x + (i + 0.5f) * r.w / show, r.y + r.h + lh * (0.3f + (i % 2)), names[size_t(idx[size_t(i)])],
                  IM_COL32(220, 220, 220, 255), 0.5f);
        }
    record_values(x, probs ? "probabilities" : "class_logits", probs ? pr->data() : l, size_t(Kc));
    x.torch = StageId{probs ? K::Probs : K::Logits};
    if (!probs) {
        x.narration = "The head is one linear map: " + itos(Kc) + " rows of weights, one per class, each dotted with the pooled row, plus a bias. "
                      "The result, one number per class, is a logit: larger means more likely. The largest is " + names[size_t(best)] + " (" +
                      num(l[best], 2) + "), the smallest " + num(llo, 2) + ".";
    } else {
        const float pb = pr->data()[best];
        x.narration = "Softmax once more turns the logits into probabilities that add up to one. The model says " + names[size_t(best)] + " with " +
                      pct(pb) + ". Which patches that answer comes from, the workbench's What it uses tab measures (L), one patch and one head at a time.";
    }
}

void step_embedding(Ctx& x) {
    const Array* e = x.get(K::Embedding);
    if (!e) return;
    const int E = int(e->size());
    const float W = x.Wp(), H = x.Hp(), lh = ImGui::GetTextLineHeight();
    const auto [lo, hi] = range_of(e->data(), size_t(E));
    const float m = std::max(std::fabs(lo), std::fabs(hi));
    bars(x, "embedding (blue < 0 < red)", e->data(), E, WRect{W * 0.1f, lh * 2.5f, W * 0.86f, H * 0.6f}, lo, hi, quantity_colormap(Quantity::Signed, -m, m));
    label(x, W * 0.1f, 0, "the embedding: " + itos(E) + " numbers");
    record_values(x, "output", e->data(), size_t(E));
    x.torch = StageId{K::Embedding};
    x.narration = "This model has no classifier: its answer is an embedding of " + itos(E) + " numbers (|e| = " + num(norm2(e->data(), size_t(E))) +
                  "), compared with other images' or texts' embeddings by cosine similarity.";
}

}  // namespace

void draw_step(Ctx& x, const std::string& id) {
    if (id == "model") step_model(x);
    else if (id == "pixels") step_pixels(x);
    else if (id == "patchify") step_patches(x);
    else if (id == "project") step_embed(x);
    else if (id == "cls") step_cls(x);
    else if (id == "pos") step_pos(x);
    else if (id == "registers") step_registers(x);
    else if (id == "ln_pre") { x.tok = std::min(x.tok, x.rd.T - 1); step_ln(x, LnSite::Pre, -1); }
    else if (id == "ln" || id == "rms") step_ln(x, LnSite::Ln1, 0);
    else if (id == "qkv") step_qkv(x);
    else if (id == "rope") step_rope(x);
    else if (id == "scores") step_scores(x);
    else if (id == "softmax") step_softmax(x);
    else if (id == "weighted") step_weighted(x);
    else if (id == "heads") step_heads(x);
    else if (id == "layer_scale") step_layer_scale(x);
    else if (id == "residual1") {
        const StageInfo& rm = x.t.info(StageId{K::ResidMid, 0});
        const StageId add = x.t.has(StageId{K::Ls1, 0}) ? StageId{K::Ls1, 0} : StageId{K::AttnOut, 0};
        const StageId in = rm.from.empty() ? StageId{K::Embed} : (rm.from[0] == add && rm.from.size() > 1 ? rm.from[1] : rm.from[0]);
        residual(x, in, add, StageId{K::ResidMid, 0}, "attention");
    } else if (id == "mlp") step_mlp(x);
    else if (id == "residual2") {
        const StageId add = x.t.has(StageId{K::Ls2, 0}) ? StageId{K::Ls2, 0} : StageId{K::MlpOut, 0};
        residual(x, StageId{K::ResidMid, 0}, add, StageId{K::ResidPost, 0}, "the MLP");
    } else if (id == "depth") step_depth(x);
    else if (id == "pool") step_pool(x);
    else if (id == "head_pool") step_head_pool(x);
    else if (id == "classify") step_logits(x, false);
    else if (id == "probabilities") step_logits(x, true);
    else if (id == "output") step_embedding(x);
}

// The patch followed by the embedding step: the one selected, else where the last block's cls attention
// peaks (mean over heads), else the middle one.
int followed_patch(const ViewCtx& v, const Trace& t, const Config& c, std::string& why) {
    const RunDims& rd = t.table().dims();
    if (v.ui.patch >= 0 && v.ui.patch < rd.N) {
        why = " is the one you selected";
        return v.ui.patch;
    }
    if (c.depth > 0 && c.cls_token && !rd.dropped()) {
        const int best = peak_patch(cls_attention(t, c.depth - 1, -1));
        if (best >= 0) {
            why = " is where the last block's cls attention peaks";
            return best;
        }
    }
    why = " is the middle one";
    return rd.N / 2;
}

}  // namespace vit::app::learn_detail
