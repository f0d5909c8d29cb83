// Learn mode's attention steps (learn.h): q, k and v of one token, RoPE's rotation, the scores, the softmax,
// the weighted sum of the values and the heads joined, each drawn from the trace on screen and narrated
// from the same numbers. The other steps are in learn_steps.cpp.
#include "learn_internal.h"

#include "core/model/rope.h"

namespace vit::app::learn_detail {

void step_qkv(Ctx& x) {
    const Array* q = x.get(K::AttnQ, 0);
    const Array* k = x.get(K::AttnK, 0);
    const Array* vv = x.get(K::AttnV, 0);
    const Array* ln = x.get(K::Ln1Out, 0);
    if (!q || !k || !vv || !ln) return;
    const int H = int(extent(*q, 0)), T = int(extent(*q, 1)), d = int(extent(*q, 2)), D = cols_of(*ln);
    const int tok = std::clamp(x.tok, 0, T - 1), h = std::clamp(x.head, 0, H - 1);
    const float W = x.Wp(), Hh = x.Hp(), lh = ImGui::GetTextLineHeight();
    const float* xr = row_of_stage(*ln, tok);
    const std::string tn = token_name(x, tok);
    label(x, W * 0.05f, 0, tn + " after LayerNorm (" + itos(D) + ")");
    grid(x, "LayerNorm output row", xr, 1, D, WRect{W * 0.05f, lh * 1.3f, W * 0.9f, lh * 1.4f}, signed_cm(xr, size_t(D)), CellRef{StageId{K::Ln1Out, 0}, 0, tok, 0});
    // q, k, v of this token, every head a row (head h framed), one after the other
    const char* names[] = {"q", "k", "v"};
    const Array* arrs[] = {q, k, vv};
    const K kinds[] = {K::AttnQ, K::AttnK, K::AttnV};
    const float bw = W * 0.27f, gap = W * 0.045f, top = lh * 5;
    const float bh = std::min(Hh - top - lh * 2, bw * H / std::max(d, 1) * 2.5f);
    for (int i = 0; i < 3; ++i) {
        const float a = span(x.p, 0.15f + 0.25f * i, 0.35f + 0.25f * i);
        std::vector<float> rows(size_t(H) * d);
        for (int hh = 0; hh < H; ++hh) std::copy_n(row_of_stage(*arrs[i], tok, hh), d, rows.begin() + size_t(hh) * d);
        const float x0 = W * 0.05f + i * (bw + gap);
        arrow(x, W * 0.5f, lh * 2.9f, x0 + bw / 2, top - lh * 1.3f, IM_COL32(200, 200, 200, int(255 * std::max(a, 0.2f))));
        label(x, x0, top - lh * 1.2f, std::string(names[i]) + ": " + itos(H) + " heads x " + itos(d));
        grid(x, std::string(names[i]) + " of the token, a row per head", rows.data(), H, d, WRect{x0, top, bw, bh}, signed_cm(rows.data(), rows.size()),
             CellRef{StageId{kinds[i], 0}, 0, 0, 0}, a);
        if (a > 0.5f) outline(x, WRect{x0, top + bh * h / H, bw, bh / H}, IM_COL32(255, 230, 0, 255));
        record_values(x, std::string("qkv.") + names[i], row_of_stage(*arrs[i], tok, h), size_t(d));
    }
    x.v.probe.numbers["learn.head"] = h;
    x.torch = StageId{K::AttnQ, 0};
    x.narration = "One matrix multiply turns " + tn + "'s " + itos(D) + " numbers into three: its query q (what it looks for), its key k "
                  "(what it offers to be found by) and its value v (what it passes on), each " + itos(D) + " numbers split into " + itos(H) +
                  " heads of " + itos(d) + ". Every token gets its own q, k and v from the same weights. Head " + itos(h) + " (framed): |q| = " +
                  num(norm2(row_of_stage(*q, tok, h), size_t(d))) + ", |k| = " + num(norm2(row_of_stage(*k, tok, h), size_t(d))) + ".";
}

// RoPE (DINOv3's, EVA-02's): one patch's query of one head, before and after it is turned by its position. Four of its
// d/2 pairs drawn as arrows in their plane (the fastest and slowest of the row's and the column's angles),
// each turning from where q has it to where q_rot has it; the numbers are the trace's q and q_rot. The pairs and the
// angles' rule are the model's (RopeAngles: DINOv3 pairs dims i and i + d/2, EVA-02 dims 2m and 2m + 1).
void step_rope(Ctx& x) {
    const Array* q = x.get(K::AttnQ, 0);
    const Array* qr = x.get(K::AttnQRot, 0);
    if (!q || !qr) return;
    const int H = int(extent(*q, 0)), T = int(extent(*q, 1)), d = int(extent(*q, 2)), half = d / 2, quarter = d / 4;
    const int pre = x.rd.prefix;
    // the cls and storage tokens are not turned: a patch is shown (the selected token when it is one)
    // (EVA-02 counts from the grid's corner, where the first patch does not turn: its centre patch is shown instead)
    const bool eva = x.c.rope_kind != RopeKind::Dinov3;  // timm's RotaryEmbeddingCat: EVA-02's, PE's
    const bool pe = x.c.rope_kind == RopeKind::Pe;        // PE: indices counted from 1, the column's angles first
    const double off = pe ? 1.0 : 0.0;
    int first = pre;
    if (eva)
        for (size_t i = 0; i < x.rd.kept.size(); ++i)
            if (x.rd.kept[i] == (x.rd.gh / 2) * x.rd.gw + x.rd.gw / 2) first = pre + int(i);
    const int tok = std::clamp(x.tok < pre ? first : x.tok, 0, T - 1), h = std::clamp(x.head, 0, H - 1);
    x.tok = tok;  // the token followed (the probe's learn.token) is the one shown
    const int patch = x.rd.kept[size_t(std::clamp(tok - pre, 0, int(x.rd.kept.size()) - 1))];
    const int prow = patch / x.rd.gw, pcol = patch % x.rd.gw;
    // the coordinates the angles are made of: DINOv3's patch centre on -1..1, EVA-02's index on the reference grid
    const double ref_h = x.c.rope_ref_grid > 0 ? x.c.rope_ref_grid : x.rd.gh, ref_w = x.c.rope_ref_grid > 0 ? x.c.rope_ref_grid : x.rd.gw;
    const float cy = eva ? float((prow + off) * ref_h / x.rd.gh) : 2.f * ((float(prow) + 0.5f) / float(x.rd.gh)) - 1.f;
    const float cx = eva ? float((pcol + off) * ref_w / x.rd.gw) : 2.f * ((float(pcol) + 0.5f) / float(x.rd.gw)) - 1.f;
    const float* a = row_of_stage(*q, tok, h);
    const float* b = row_of_stage(*qr, tok, h);
    const float W = x.Wp(), Hh = x.Hp(), lh = ImGui::GetTextLineHeight();
    const std::string tn = token_name(x, tok);
    const Colormap cm = signed_cm(a, size_t(d));
    label(x, W * 0.05f, 0, "q of " + tn + ", head " + itos(h) + " (" + itos(d) + " dims)");
    grid(x, "q before turning", a, 1, d, WRect{W * 0.05f, lh * 1.3f, W * 0.9f, lh * 1.4f}, cm, CellRef{StageId{K::AttnQ, 0}, h, tok, 0});
    label(x, W * 0.05f, lh * 3.2f, "q_rot: the same q turned by the patch's position");
    grid(x, "q after turning", b, 1, d, WRect{W * 0.05f, lh * 4.5f, W * 0.9f, lh * 1.4f}, cm, CellRef{StageId{K::AttnQRot, 0}, h, tok, 0});
    // four pairs in their planes: dims (pair1(i), pair2(i)), turned by angle i
    // the fastest pair and a slower one of the row's, the same of the column's (the slowest barely turn
    // across an image: their maps would be one colour)
    // (EVA-02's angles slow by 10000^(j / (d/4)): a quarter of the way down they still turn across the grid)
    const int slow = eva ? quarter / 4 : quarter / 2;
    const int pairs[4] = {0, slow, quarter, quarter + slow};
    const char* what[4] = {pe ? "column" : "row", pe ? "column" : "row", pe ? "row" : "column", pe ? "row" : "column"};
    const float top = lh * 8.5f, cw = W * 0.9f / 4, r = std::max(8.f, std::min(cw * 0.3f, (Hh - top - lh * 6) * 0.22f));
    // each pair's angle over the whole grid (the core's RoPE angles, as the forward pass turns by them): cos(angle)
    const RopeAngles ra = rope_angles(x.c, x.w.rope_periods, x.rd);
    const int gh = x.rd.gh, gw = x.rd.gw;
    auto p1 = [&](int i) { return int(ra.pair1(size_t(i))); };
    auto p2 = [&](int i) { return int(ra.pair2(size_t(i))); };
    Colormap ccm;
    ccm.mode = Colormap::Diverging; ccm.vmin = -1; ccm.vmax = 1;
    const float t = span(x.p, 0.15f, 0.85f);
    double vmax = 1e-12;
    for (int i : pairs)
        vmax = std::max({vmax, std::hypot(double(a[p1(i)]), double(a[p2(i)])), std::hypot(double(b[p1(i)]), double(b[p2(i)]))});
    for (int k = 0; k < 4; ++k) {
        const int i = pairs[k];
        const float ox = W * 0.05f + cw * (k + 0.5f), oy = top + lh * 2.6f + r;
        // the angle this pair turns by: from the trace's q and q_rot themselves
        const double a0 = std::atan2(double(a[p2(i)]), double(a[p1(i)])), a1 = std::atan2(double(b[p2(i)]), double(b[p1(i)]));
        double turn = std::remainder(a1 - a0, 2 * M_PI);
        const double len = std::hypot(double(a[p1(i)]), double(a[p2(i)])), len1 = std::hypot(double(b[p1(i)]), double(b[p2(i)]));
        const float rr = float(r * len / vmax);
        const ImVec2 c = x.S(ox, oy);
        x.dl->AddCircle(c, r * x.zoom, IM_COL32(90, 90, 100, 255), 48, 1.5f);
        auto tip = [&](double ang, float l) { return ImVec2(c.x + float(std::cos(ang)) * l * x.zoom, c.y - float(std::sin(ang)) * l * x.zoom); };
        x.dl->AddLine(c, tip(a0, rr), IM_COL32(160, 160, 170, 255), 2);
        x.dl->AddLine(c, tip(a0 + turn * t, float(rr + (r * len1 / vmax - rr) * t)), IM_COL32(255, 230, 0, 255), 3);
        label(x, ox, top, std::string("pair ") + itos(i) + " (dims " + itos(p1(i)) + ", " + itos(p2(i)) + ")", IM_COL32(230, 230, 230, 255), 0.5f);
        const int j = i % std::max(quarter, 1);
        // the pair's speed: DINOv3's period (angle 2 pi coord / period), EVA-02's divisor (angle t / 10000^(j / (d/4)))
        const std::string speed = eva ? ", angle t / " + num(std::pow(10000.0, double(j) / double(std::max(quarter, 1))), 3)
                                      : ", period " + num(x.w.rope_periods.size() > size_t(j) ? x.w.rope_periods(size_t(j)) : 0.f, 3);
        label(x, ox, top + lh * 1.1f, std::string(what[k]) + speed, IM_COL32(170, 170, 180, 255), 0.5f);
        label(x, ox, oy + r + lh * 0.4f, "turned " + num(turn, 2) + " rad", IM_COL32(255, 230, 0, 255), 0.5f);
        x.v.probe.numbers["learn.rope.turn." + itos(k)] = turn;
        // under it: cos(angle) of this pair for every patch of the grid, this patch framed
        std::vector<float> map(size_t(gh) * size_t(gw), 0.f);
        for (size_t n = 0; n < x.rd.kept.size(); ++n) map[size_t(x.rd.kept[n])] = ra.cos[n * ra.half + size_t(i)];
        const float my = oy + r + lh * 2.f, mw = std::min(cw * 0.85f, (Hh - my - lh * 1.5f) * float(gw) / float(gh));
        const float mh = mw * float(gh) / float(gw);
        grid(x, "cos(angle) per patch", map.data(), gh, gw, WRect{ox - mw / 2, my, mw, mh}, ccm);
        outline(x, WRect{ox - mw / 2 + mw * pcol / gw, my + mh * prow / gh, mw / gw, mh / gh}, IM_COL32(255, 230, 0, 255));
        if (k == 0) x.v.probe.strings["learn.values.rope.cos0"] = csv(map.data(), map.size());
    }
    record_values(x, "rope.q", a, size_t(d));
    record_values(x, "rope.q_rot", b, size_t(d));
    x.v.probe.numbers["learn.head"] = h;
    x.torch = StageId{K::AttnQRot, 0};
    const std::string where = eva ? " (t = " + num(cy, 3) + " for the row and " + num(cx, 3) + " for the column, counted " +
                                        (pe ? "from 1 " : "") + "on the " +
                                        itos(int(ref_h)) + "x" + itos(int(ref_w)) + " grid the model was trained at). "
                                  : ", its centre at " + num(cy, 3) + ", " + num(cx, 3) + " on a -1..1 scale. ";
    x.narration = std::string(eva ? "This model adds a learned position vector to the tokens before the blocks; and in every block "
                                    "each patch's query and key are also turned by "
                                  : "This model adds no position vector to the tokens. Instead, in every block, each patch's "
                                    "query and key are turned by ") +
                  "angles set by where the patch is: " + tn + " is in row " + itos(prow) + ", column " + itos(pcol) + " of the " +
                  itos(x.rd.gh) + "x" + itos(x.rd.gw) + " grid" + where +
                  "The " + itos(d) + " dims form " + itos(half) + " pairs; the first " + itos(quarter) + " turn by the " +
                  (pe ? "column" : "row") + ", the next " + itos(quarter) + " by the " + (pe ? "row" : "column") + ", each at its own speed (grey: before, yellow: after); under each, the cosine "
                  "of its angle at every patch: the row pairs change from row to row, the column pairs from column to column. "
                  "Turning keeps each pair's "
                  "length: |q| = " + num(norm2(a, size_t(d)), 3) + " before and " + num(norm2(b, size_t(d)), 3) + " after. Keys are turned "
                  "the same way, so q.k depends on how far apart two patches are, not on where each one is. " +
                  (x.c.registers ? std::string(x.c.cls_token ? "The cls and storage tokens are not turned." : "The storage tokens are not turned.")
                                 : std::string(x.c.cls_token ? "The cls token is not turned." : ""));
}

void step_scores(Ctx& x) {
    // with RoPE the scores are the rotated q and k's (attn.q_rot, attn.k_rot)
    const bool rope = x.get(K::AttnQRot, 0) != nullptr;
    const K qkind = rope ? K::AttnQRot : K::AttnQ, kkind = rope ? K::AttnKRot : K::AttnK;
    const std::string rot = rope ? " (rotated by RoPE)" : "";
    const Array* q = x.get(qkind, 0);
    const Array* k = x.get(kkind, 0);
    const Array* sc = x.get(K::AttnScores, 0);
    if (!q || !k || !sc) return;
    const int H = int(extent(*q, 0)), T = int(extent(*q, 1)), d = int(extent(*q, 2));
    const int tok = std::clamp(x.tok, 0, T - 1), h = std::clamp(x.head, 0, H - 1);
    const float W = x.Wp(), Hh = x.Hp(), lh = ImGui::GetTextLineHeight();
    const float* qr = row_of_stage(*q, tok, h);
    const float* srow = row_of_stage(*sc, tok, h);
    const Slice2D ks = slice2d(*k, h);
    const float kx = W * 0.25f, kw = W * 0.35f, top = lh * 4.5f, kh = Hh - top - lh;
    label(x, kx, 0, "q of " + token_name(x, tok) + ", head " + itos(h) + rot);
    grid(x, "q", qr, 1, d, WRect{kx, lh * 1.3f, kw, lh * 1.4f}, signed_cm(qr, size_t(d)), CellRef{StageId{qkind, 0}, h, tok, 0});
    label(x, kx, top - lh * 1.2f, "k of every token (" + itos(T) + ")" + rot);
    grid(x, "K", ks.data, T, d, WRect{kx, top, kw, kh}, signed_cm(ks.data, ks.size()), CellRef{StageId{kkind, 0}, h, 0, 0});
    const int j = std::min(T - 1, int(span(x.p, 0.05f, 0.7f) * T));
    const float sx = kx + kw + W * 0.1f, sw = std::max(W * 0.06f, 14.f);
    label(x, sx + sw / 2, top - lh * 1.2f, "scores", IM_COL32(230, 230, 230, 255), 0.5f);
    grid(x, "scores (q.k / sqrt(d))", srow, T, 1, WRect{sx, top, sw, kh}, signed_cm(srow, size_t(T)), CellRef{StageId{K::AttnScores, 0}, h, tok, 0});
    if (j + 1 < T) x.dl->AddRectFilled(x.S(sx, top + kh * (j + 1) / T), x.S(sx + sw, top + kh), IM_COL32(22, 22, 26, 255));
    outline(x, WRect{kx, top + kh * j / T, kw, std::max(kh / T, 1.f)}, IM_COL32(255, 230, 0, 255));
    arrow(x, kx + kw + 4, top + kh * (j + 0.5f) / T, sx - 4, top + kh * (j + 0.5f) / T);
    const int best = argmax(srow, T);
    const auto [lo, hi] = range_of(srow, size_t(T));
    // q.k of the key in view, recomputed here
    double dot = 0;
    for (int i = 0; i < d; ++i) dot += double(qr[i]) * double(ks.data[size_t(j) * d + i]);
    const bool bug = x.t.options().bug_scale_after_softmax;
    const double scale = bug ? 1.0 : 1.0 / std::sqrt(double(d));
    record_values(x, "scores.row", srow, size_t(T));
    x.v.probe.numbers["learn.token"] = tok;
    x.torch = StageId{K::AttnScores, 0};
    x.narration = "How much does " + token_name(x, tok) + " look at each token? Its query is compared with every key: the dot product q.k, " +
                  (bug ? "NOT scaled (BUG switched on: the scale comes after the softmax)"
                       : "times 1/sqrt(" + itos(d) + ") = " + num(scale, 4) + " so that the scores do not grow with the head size") +
                  ". Now key " + itos(j) + ", " + token_name(x, j) + ": q.k = " + num(dot, 3) + ", score " + num(srow[j], 3) + "." +
                  (x.p >= 0.999f ? " The largest score goes to " + token_name(x, best) + ": " + num(srow[best], 2) + " (the smallest " + num(lo, 2) + ")."
                                 : "");
    (void)hi;
}

void step_softmax(Ctx& x) {
    const Array* sc = x.get(K::AttnScores, 0);
    const Array* pt = x.get(K::AttnPattern, 0);
    if (!sc || !pt) return;
    const int H = int(extent(*pt, 0)), T = int(extent(*pt, 1));
    const int tok = std::clamp(x.tok, 0, T - 1), h = std::clamp(x.head, 0, H - 1);
    const float* s = row_of_stage(*sc, tok, h);
    const float* a = row_of_stage(*pt, tok, h);
    const float q = span(x.p, 0.3f, 0.8f);
    std::vector<float> shown(static_cast<size_t>(T));
    for (int i = 0; i < T; ++i) shown[size_t(i)] = s[i] + (a[i] - s[i]) * q;
    auto [slo, shi] = range_of(s, size_t(T));
    auto [alo, ahi] = range_of(a, size_t(T));
    const float lo = slo + (alo - slo) * q, hi = shi + (ahi - shi) * q;
    const float W = x.Wp(), Hp = x.Hp(), lh = ImGui::GetTextLineHeight();
    const WRect r{W * 0.1f, lh * 2.5f, W * 0.8f, Hp * 0.65f};
    label(x, r.x, 0, q < 0.5f ? "scores of " + token_name(x, tok) + ", head " + itos(h) : "attention weights of " + token_name(x, tok) + ", head " + itos(h));
    const int best = argmax(a, T);
    const Colormap cm = q < 0.5f ? quantity_colormap(Quantity::Signed, slo, shi) : quantity_colormap(Quantity::Probability, 0, ahi);
    bars(x, q < 0.5f ? "scores (blue < 0 < red)" : "attention weights (0 to the largest)", shown.data(), T, r, lo, hi, cm, best,
         [&](int i) { return token_label(x.t.table(), i); });  // under a bar: the short name ("p12")
    if (q >= 0.99f) {
        auto Y = [&](float v) { return r.y + r.h * (hi - v) / std::max(1e-9f, hi - std::min(0.f, lo)); };
        const float u = 1.f / T;
        x.dl->AddLine(x.S(r.x, Y(u)), x.S(r.x + r.w, Y(u)), IM_COL32(0, 255, 255, 200), 1.5f);
        label(x, r.x + r.w + 4, Y(u) - lh / 2, "1/" + itos(T), IM_COL32(0, 255, 255, 255));
    }
    const double sum = std::accumulate(a, a + T, 0.0);
    record_values(x, "softmax.row", a, size_t(T));
    x.torch = StageId{K::AttnPattern, 0};
    const bool bug = x.t.options().bug_scale_after_softmax;
    x.narration = "Softmax turns the scores into weights: e to the power of each score, divided by their sum. Big scores win, all weights are "
                  "positive and they add up to one (this row: " + num(sum, 4) + (bug ? ", because the BUG divides after the softmax" : "") +
                  "). " + token_name(x, tok) + " gives " + pct(a[best]) + " of its attention to " + token_name(x, best) + "; spread evenly it would give each of the " +
                  itos(T) + " tokens " + pct(1.0 / T) + " (the cyan line).";
}

void step_weighted(Ctx& x) {
    const Array* pt = x.get(K::AttnPattern, 0);
    const Array* vv = x.get(K::AttnV, 0);
    const Array* z = x.get(K::AttnZ, 0);
    if (!pt || !vv || !z) return;
    const int H = int(extent(*vv, 0)), T = int(extent(*vv, 1)), d = int(extent(*vv, 2));
    const int tok = std::clamp(x.tok, 0, T - 1), h = std::clamp(x.head, 0, H - 1);
    const float* a = row_of_stage(*pt, tok, h);
    const Slice2D vs = slice2d(*vv, h);
    const float* zr = row_of_stage(*z, tok, h);
    const float W = x.Wp(), Hh = x.Hp(), lh = ImGui::GetTextLineHeight();
    const float top = lh * 2.5f, vh = Hh - top - lh * 5, vx = W * 0.3f, vw = W * 0.45f;
    const float amax = *std::max_element(a, a + T);
    label(x, W * 0.05f, top - lh * 1.2f, "weights");
    grid(x, "attention weights", a, T, 1, WRect{W * 0.05f, top, W * 0.05f, vh}, quantity_colormap(Quantity::Probability, 0, amax),
         CellRef{StageId{K::AttnPattern, 0}, h, tok, 0});
    label(x, vx, top - lh * 1.2f, "v of every token, head " + itos(h) + " (rows dimmed by their weight)");
    grid(x, "V", vs.data, T, d, WRect{vx, top, vw, vh}, signed_cm(vs.data, vs.size()), CellRef{StageId{K::AttnV, 0}, h, 0, 0});
    const float q = span(x.p, 0.1f, 0.5f);
    for (int i = 0; i < T; ++i) {
        const float dim = q * 0.85f * (1 - a[i] / std::max(amax, 1e-12f));
        x.dl->AddRectFilled(x.S(vx, top + vh * i / T), x.S(vx + vw, top + vh * (i + 1) / T), IM_COL32(0, 0, 0, int(255 * dim)));
    }
    const float zy = top + vh + lh * 1.8f;
    label(x, vx, zy - lh * 1.2f, "z = the weighted sum (" + itos(d) + ")");
    grid(x, "z", zr, 1, d, WRect{vx, zy, vw, lh * 1.6f}, signed_cm(zr, size_t(d)), CellRef{StageId{K::AttnZ, 0}, h, tok, 0}, span(x.p, 0.5f, 0.9f));
    // the three largest weights
    std::vector<int> idx(static_cast<size_t>(T));
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + std::min(3, T), idx.end(), [&](int i, int j) { return a[i] > a[j]; });
    std::string top3;
    double share = 0;
    for (int i = 0; i < std::min(3, T); ++i) {
        top3 += (i ? ", " : "") + token_name(x, idx[size_t(i)]) + " " + num(a[idx[size_t(i)]], 3);
        share += a[idx[size_t(i)]];
    }
    record_values(x, "weighted.z", zr, size_t(d));
    x.torch = StageId{K::AttnZ, 0};
    x.narration = "Each token's value row is multiplied by its weight and the rows are added: z = sum of weight x v. Rows with little weight "
                  "hardly count (dimmed). The three largest weights (" + top3 + ") make " + pct(share) + " of the total, so z is mostly "
                  "their values: this is how " + token_name(x, tok) + " gathers what it looks for.";
}

void step_heads(Ctx& x) {
    const Array* z = x.get(K::AttnZ, 0);
    const Array* o = x.get(K::AttnOut, 0);
    if (!z || !o) return;
    const int H = int(extent(*z, 0)), T = int(extent(*z, 1)), d = int(extent(*z, 2)), D = cols_of(*o);
    const int tok = std::clamp(x.tok, 0, T - 1);
    const float W = x.Wp(), Hh = x.Hp(), lh = ImGui::GetTextLineHeight();
    std::vector<float> cat(size_t(H) * d);
    for (int h = 0; h < H; ++h) std::copy_n(row_of_stage(*z, tok, h), d, cat.begin() + size_t(h) * d);
    const Colormap cm = signed_cm(cat.data(), cat.size());
    // each head's row moves into its place in the joined row
    const float q = span(x.p, 0.1f, 0.55f);
    const float rw = W * 0.8f, x0 = W * 0.1f, y0 = lh * 2.5f, hr = std::min(lh * 2.5f, (Hh * 0.4f) / (1.3f * H)), jy = Hh * 0.55f;
    label(x, x0, 0, "z of " + token_name(x, tok) + ", one row per head, joined into one row of " + itos(H * d));
    for (int h = 0; h < H; ++h) {
        const float sx = x0, sy = y0 + h * hr * 1.3f, sw = rw * d / (H * d) * 3;
        const float dx = x0 + rw * h / H, dy = jy;
        grid(x, "z, per head and joined", row_of_stage(*z, tok, h), 1, d,
             WRect{sx + (dx - sx) * q, sy + (dy - sy) * q, sw + (rw / H - sw) * q, hr}, cm, CellRef{StageId{K::AttnZ, 0}, h, tok, 0}, 1, h == 0);
    }
    const float oy = jy + hr + lh * 3;
    arrow(x, x0 + rw / 2, jy + hr + 4, x0 + rw / 2, oy - 4);
    label(x, x0 + rw / 2 + 8, jy + hr + lh * 0.8f, "x W_proj (" + itos(D) + " x " + itos(H * d) + ") + bias");
    const float* orow = row_of_stage(*o, tok);
    grid(x, "attention output", orow, 1, D, WRect{x0, oy, rw, hr}, signed_cm(orow, size_t(D)), CellRef{StageId{K::AttnOut, 0}, 0, tok, 0}, span(x.p, 0.6f, 0.9f));
    record_values(x, "heads.out", orow, size_t(D));
    x.torch = StageId{K::AttnOut, 0};
    x.narration = "Each of the " + itos(H) + " heads looked for something else and returned " + itos(d) + " numbers. They are laid side by side (" +
                  itos(H * d) + ") and mixed by one more linear map, the projection: the attention's output for " + token_name(x, tok) +
                  ", " + itos(D) + " numbers (|out| = " + num(norm2(orow, size_t(D))) + ").";
}

}  // namespace vit::app::learn_detail
