// Learn mode (learn.h). The picture is laid out in "world" units: the picture's own size at zoom 1,
// so a step lays out for the room it has; the camera (the user's wheel and drag, or the step's own
// move) maps it to the screen. Grids are float textures coloured by the heatmap shader with a key in
// the narration panel; values are printed in their cells once a cell is large enough on screen.
#include "learn.h"

#include <GLFW/glfw3.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <functional>
#include <numeric>
#include <optional>

#include "core/model/stages.h"
#include "core/teach/analysis.h"
#include "core/teach/scenes_eval.h"
#include "jobs.h"
#include "paths.h"
#include "tabs/tab.h"
#include "tensor_access.h"

namespace vit::app {

namespace {

using K = StageKind;

std::string num(double v, int digits = 2) {
    char b[48];
    if (v != 0 && (std::fabs(v) < 1e-3 || std::fabs(v) >= 1e5)) std::snprintf(b, sizeof b, "%.*e", digits, v);
    else std::snprintf(b, sizeof b, "%.*f", digits, v);
    return b;
}
std::string pct(double v) { return num(100 * v, 1) + "%"; }
std::string itos(long long v) { return std::to_string(v); }

float clamp01(float x) { return std::clamp(x, 0.f, 1.f); }
float ease(float x) {
    x = clamp01(x);
    return x * x * (3 - 2 * x);
}
// The part of [a, b] of the phase p, eased: 0 before a, 1 after b.
float span(float p, float a, float b) { return ease((p - a) / std::max(1e-6f, b - a)); }

// ---------------------------------------------------------------- the steps a table has

struct StepDef {
    const char* id;
    const char* title;
    std::function<bool(const StageTable&, const Config&)> has;
};

bool has_k(const StageTable& t, K k, int layer = -1) { return t.has(StageId{k, layer}); }

const std::vector<StepDef>& step_defs() {
    static const std::vector<StepDef> defs = {
        {"model", "The whole model", [](const StageTable&, const Config&) { return true; }},
        {"pixels", "Pixels are numbers", [](const StageTable& t, const Config&) { return has_k(t, K::Input); }},
        {"patchify", "Pixels become patches", [](const StageTable& t, const Config&) { return has_k(t, K::Patches); }},
        {"project", "A patch becomes an embedding", [](const StageTable& t, const Config&) { return has_k(t, K::PatchEmbed) && has_k(t, K::Patches); }},
        {"cls", "The cls token is put first",
         [](const StageTable& t, const Config& c) { return (c.cls_token || c.dist_token) && has_k(t, K::Tokens) && has_k(t, K::PatchEmbed); }},
        {"pos", "Positions are added", [](const StageTable& t, const Config&) { return has_k(t, K::PosEmbed) && has_k(t, K::Embed) && has_k(t, K::Tokens); }},
        {"registers", "Registers join the tokens", [](const StageTable& t, const Config&) { return has_k(t, K::WithRegisters); }},
        {"ln_pre", "A LayerNorm before the blocks", [](const StageTable& t, const Config&) { return has_k(t, K::LnPreOut); }},
        {"ln", "LayerNorm of one token", [](const StageTable& t, const Config&) { return has_k(t, K::Ln1Out, 0); }},
        {"qkv", "Query, key and value", [](const StageTable& t, const Config&) { return has_k(t, K::AttnQ, 0); }},
        {"scores", "One token's scores", [](const StageTable& t, const Config&) { return has_k(t, K::AttnScores, 0); }},
        {"softmax", "Softmax: scores become weights", [](const StageTable& t, const Config&) { return has_k(t, K::AttnPattern, 0); }},
        {"weighted", "The weighted sum of values", [](const StageTable& t, const Config&) { return has_k(t, K::AttnZ, 0); }},
        {"heads", "Heads are joined and projected", [](const StageTable& t, const Config&) { return has_k(t, K::AttnOut, 0); }},
        {"layer_scale", "Layer scale", [](const StageTable& t, const Config&) { return has_k(t, K::Ls1, 0); }},
        {"residual1", "The residual add", [](const StageTable& t, const Config&) { return has_k(t, K::ResidMid, 0); }},
        {"mlp", "The MLP", [](const StageTable& t, const Config&) { return has_k(t, K::MlpPre, 0) && has_k(t, K::MlpPost, 0); }},
        {"residual2", "The second residual add", [](const StageTable& t, const Config&) { return has_k(t, K::ResidPost, 0); }},
        {"depth", "The same block, again and again", [](const StageTable& t, const Config& c) { return c.depth > 1 && has_k(t, K::ResidPost, 0); }},
        {"pool", "One row is read", [](const StageTable& t, const Config&) { return has_k(t, K::Pooled); }},
        {"head_pool", "A probe attends over the tokens", [](const StageTable& t, const Config&) { return has_k(t, K::HeadAttnPattern); }},
        {"classify", "Logits", [](const StageTable& t, const Config&) { return has_k(t, K::Logits); }},
        {"probabilities", "Probabilities", [](const StageTable& t, const Config&) { return has_k(t, K::Probs); }},
        {"output", "The embedding", [](const StageTable& t, const Config&) { return has_k(t, K::Embedding) && !has_k(t, K::Logits); }},
    };
    return defs;
}

// ---------------------------------------------------------------- drawing in world units

struct Ctx {
    ViewCtx& v;
    LearnView& lv;
    const Trace& t;
    const Config& c;
    const Weights& w;
    const RunDims& rd;
    ImDrawList* dl;
    Rect pic;            // the picture on screen
    float zoom = 1;      // the camera
    ImVec2 focus{0.5f, 0.5f};
    bool own_cam = true; // the step's own camera (the user has not zoomed or panned)
    float p = 0;         // the animation's phase, 0..1
    int tok = 0, head = 0, patch = 0;
    std::string why_patch;
    uint64_t version = 0;
    std::string narration;
    std::optional<StageId> torch;
    int value_texts = 0;
    std::map<std::string, int> grids_of;  // grids drawn this frame, by name
    int drawn = 0;                        // grids and bar charts drawn on screen this frame
    bool clicked = false;  // a click (not a drag) in the picture this frame
    // a lesson waits for a click in the picture: the click answers it (what was clicked) instead of
    // opening the workbench
    bool capture = false;
    struct Pick {
        std::string name;
        int r = -1, c = -1;
    } pick;
    std::string tooltip;

    float Wp() const { return pic.w; }
    float Hp() const { return pic.h; }
    ImVec2 S(float x, float y) const {
        return ImVec2(pic.x + pic.w * 0.5f + (x - focus.x * pic.w) * zoom, pic.y + pic.h * 0.5f + (y - focus.y * pic.h) * zoom);
    }
    const Array* get(K k, int layer = -1) const { return t.find(StageId{k, layer}); }
};

struct WRect {
    float x, y, w, h;
};

bool on_screen(const Ctx& x, ImVec2 a, ImVec2 b) {
    return b.x >= x.pic.x && a.x <= x.pic.x + x.pic.w && b.y >= x.pic.y && a.y <= x.pic.y + x.pic.h;
}

// A caption at a world point (align 0 left, 0.5 centre, 1 right), recorded as a label when the step's
// own camera shows it (the user's zoom may cut any caption at the picture's edge).
void label(Ctx& x, float wx, float wy, const std::string& text, ImU32 col = IM_COL32(230, 230, 230, 255), float align = 0) {
    const ImVec2 sz = ImGui::CalcTextSize(text.c_str());
    ImVec2 at = x.S(wx, wy);
    at.x -= sz.x * align;
    if (!on_screen(x, at, ImVec2(at.x + sz.x, at.y + sz.y))) return;
    if (x.own_cam) DrawLabel(x.dl, x.v.probe, "learn.labels", at, col, text, x.pic);
    else x.dl->AddText(at, col, text.c_str());
}

void outline(Ctx& x, WRect r, ImU32 col, float thick = 2) {
    x.dl->AddRect(x.S(r.x, r.y), x.S(r.x + r.w, r.y + r.h), col, 0, 0, thick);
}

void arrow(Ctx& x, float x0, float y0, float x1, float y1, ImU32 col = IM_COL32(200, 200, 200, 255)) {
    const ImVec2 a = x.S(x0, y0), b = x.S(x1, y1);
    x.dl->AddLine(a, b, col, 2);
    const float dx = b.x - a.x, dy = b.y - a.y, n = std::max(1e-3f, std::sqrt(dx * dx + dy * dy));
    const float ux = dx / n, uy = dy / n, s = 8;
    x.dl->AddTriangleFilled(b, ImVec2(b.x - ux * s - uy * s * 0.6f, b.y - uy * s + ux * s * 0.6f),
                            ImVec2(b.x - ux * s + uy * s * 0.6f, b.y - uy * s - ux * s * 0.6f), col);
}

void add_key(Ctx& x, const std::string& name, const Colormap& cm) {
    for (auto& k : x.lv.keys)
        if (k.first == name) return;
    x.lv.keys.push_back({name, cm});
}

// What a cell of a grid is in the trace: stage, slice, and the offsets of the grid in it.
struct CellRef {
    std::optional<StageId> stage;
    int slice = 0, row0 = 0, col0 = 0;
};

void open_in_workbench(Ctx& x, const CellRef& ref, int r, int c) {
    if (!ref.stage || !select_stage(x.v.ui, x.t, *ref.stage)) return;
    x.v.ui.head = ref.slice;
    x.v.ui.cell_r = ref.row0 + r;
    x.v.ui.cell_c = ref.col0 + c;
    x.v.ui.tab = Tab::Stage;
    x.v.ui.learn = false;
    x.v.notice = "opened " + x.t.info(*ref.stage).name + " [" + itos(ref.row0 + r) + ", " + itos(ref.col0 + c) + "] from Learn mode";
}

uint64_t grid_key(const Ctx& x, const std::string& name, const float* d, int rows, int cols) {
    uint64_t h = x.version * 0x9E3779B97F4A7C15ull ^ std::hash<std::string>()(name) ^ (uint64_t(rows) << 32) ^ uint64_t(cols);
    const size_t n = size_t(rows) * size_t(cols);
    for (size_t i : {size_t(0), n / 3, n / 2, n - 1}) {
        uint32_t b;
        std::memcpy(&b, d + i, 4);
        h = (h ^ b) * 0x100000001B3ull;
    }
    return h;
}

// A rows x cols grid of values (row-major, contiguous) over the world rectangle r, coloured by cm.
// Values are printed in the cells large enough on screen; a click on a cell opens it in the workbench.
void grid(Ctx& x, const std::string& name, const float* d, int rows, int cols, WRect r, const Colormap& cm,
          const CellRef& ref = {}, float alpha = 1, bool key = true) {
    if (!d || rows <= 0 || cols <= 0 || alpha <= 0.01f) return;
    // one texture per grid drawn this frame (the k-th grid of a name, in drawing order): grids that share a
    // name (a key) but not their values must not share a texture, which holds the last upload when drawn
    const std::string slot = name + "#" + itos(x.grids_of[name]++);
    LearnView::Tex& tx = x.lv.tex[slot];
    const uint64_t k = grid_key(x, name, d, rows, cols);
    if (!tx.tex.valid() || tx.key != k) {
        tx.tex.upload_float(d, cols, rows);
        tx.key = k;
    }
    const ImVec2 a = x.S(r.x, r.y), b = x.S(r.x + r.w, r.y + r.h);
    if (!on_screen(x, a, b)) return;
    x.v.gfx.draw(x.dl, tx.tex, a, b, cm, ImVec2(0, 0), ImVec2(1, 1), IM_COL32(255, 255, 255, int(255 * clamp01(alpha))));
    ++x.drawn;
    x.v.probe.rects["learn.grid." + slot] = Rect{a.x, a.y, b.x - a.x, b.y - a.y};
    x.dl->AddRect(ImVec2(a.x - 1, a.y - 1), ImVec2(b.x + 1, b.y + 1), IM_COL32(120, 120, 120, int(200 * clamp01(alpha))));
    if (key) add_key(x, name, cm);
    const float cw = (b.x - a.x) / cols, ch = (b.y - a.y) / rows;
    // the values, once a cell holds its number
    if (alpha > 0.5f && cw >= 34 && ch >= 15) {
        const int r0 = std::max(0, int((x.pic.y - a.y) / ch)), r1 = std::min(rows, int((x.pic.y + x.pic.h - a.y) / ch) + 1);
        const int c0 = std::max(0, int((x.pic.x - a.x) / cw)), c1 = std::min(cols, int((x.pic.x + x.pic.w - a.x) / cw) + 1);
        if ((r1 - r0) * (c1 - c0) <= 2500)
            for (int i = r0; i < r1; ++i)
                for (int j = c0; j < c1; ++j) {
                    const float val = d[size_t(i) * cols + j];
                    const std::string s = std::fabs(val) >= 100 ? num(val, 0) : num(val, 2);
                    const ImVec2 ts = ImGui::CalcTextSize(s.c_str());
                    if (ts.x > cw - 2) continue;
                    const ImU32 bg = colour_of(cm, val);
                    const float lum = 0.299f * (bg & 0xFF) + 0.587f * ((bg >> 8) & 0xFF) + 0.114f * ((bg >> 16) & 0xFF);
                    const ImVec2 at(a.x + (j + 0.5f) * cw - ts.x * 0.5f, a.y + (i + 0.5f) * ch - ts.y * 0.5f);
                    x.dl->AddText(at, lum > 140 ? IM_COL32(0, 0, 0, 255) : IM_COL32(255, 255, 255, 255), s.c_str());
                    ++x.value_texts;
                }
    }
    // hover: the cell and where it is in the trace; a click opens it in the workbench
    if (x.v.hover && ImGui::IsWindowHovered()) {
        const ImVec2 m = ImGui::GetIO().MousePos;
        if (m.x >= a.x && m.x < b.x && m.y >= a.y && m.y < b.y && m.x >= x.pic.x && m.y >= x.pic.y &&
            m.x < x.pic.x + x.pic.w && m.y < x.pic.y + x.pic.h) {
            const int i = std::clamp(int((m.y - a.y) / ch), 0, rows - 1), j = std::clamp(int((m.x - a.x) / cw), 0, cols - 1);
            const float val = d[size_t(i) * cols + j];
            x.dl->AddRect(ImVec2(a.x + j * cw, a.y + i * ch), ImVec2(a.x + (j + 1) * cw, a.y + (i + 1) * ch), IM_COL32(0, 255, 255, 255));
            std::string where = name;
            if (ref.stage) {
                where = x.t.info(*ref.stage).name + "[" + (x.t.info(*ref.stage).per_head ? itos(ref.slice) + ", " : "") +
                        itos(ref.row0 + i) + ", " + itos(ref.col0 + j) + "]";
            }
            x.tooltip = where + " = " + fmt(val) + (ref.stage ? "\nclick: open it in the workbench" : "");
            if (x.clicked && x.capture) x.pick = {name, i, j};
            else if (x.clicked && ref.stage) open_in_workbench(x, ref, i, j);
        }
    }
}

// A bar chart of n values over the world rectangle r, from lo to hi (0 inside: a baseline), coloured
// by cm; `mark` framed. Values are printed over bars wide enough on screen.
void bars(Ctx& x, const std::string& name, const float* vals, int n, WRect r, float lo, float hi, const Colormap& cm,
          int mark = -1, const std::function<std::string(int)>& bar_name = nullptr, bool names_under = true) {
    if (n <= 0 || !vals) return;
    lo = std::min(lo, 0.f);
    hi = std::max(hi, 0.f);
    if (hi - lo < 1e-12f) hi = lo + 1;
    auto Y = [&](float v) { return r.y + r.h * (hi - std::clamp(v, lo, hi)) / (hi - lo); };
    const float bw = r.w / n;
    const ImVec2 a = x.S(r.x, r.y), b = x.S(r.x + r.w, r.y + r.h);
    if (!on_screen(x, a, b)) return;
    x.dl->AddRectFilled(a, b, IM_COL32(30, 30, 34, 255));
    ++x.drawn;
    for (int i = 0; i < n; ++i) {
        const float v = vals[i];
        if (!std::isfinite(v)) continue;
        const ImVec2 p0 = x.S(r.x + i * bw + bw * 0.1f, std::min(Y(v), Y(0))), p1 = x.S(r.x + (i + 1) * bw - bw * 0.1f, std::max(Y(v), Y(0)));
        x.dl->AddRectFilled(p0, ImVec2(std::max(p1.x, p0.x + 1), std::max(p1.y, p0.y + 1)), colour_of(cm, v));
        if (i == mark) x.dl->AddRect(ImVec2(p0.x - 2, p0.y - 2), ImVec2(p1.x + 2, p1.y + 2), IM_COL32(255, 230, 0, 255), 0, 0, 2);
    }
    x.dl->AddLine(x.S(r.x, Y(0)), x.S(r.x + r.w, Y(0)), IM_COL32(200, 200, 200, 255));
    label(x, r.x - 4 / x.zoom, r.y, num(hi), IM_COL32(200, 200, 200, 255), 1);
    if (lo < 0) label(x, r.x - 4 / x.zoom, r.y + r.h - ImGui::GetTextLineHeight() / x.zoom, num(lo), IM_COL32(200, 200, 200, 255), 1);
    add_key(x, name, cm);
    const float sw = (b.x - a.x) / n;
    if (sw >= 36) {
        for (int i = 0; i < n; ++i) {
            const std::string s = num(vals[i], std::fabs(vals[i]) < 0.1f ? 3 : 2);
            const ImVec2 ts = ImGui::CalcTextSize(s.c_str());
            if (ts.x > sw - 2) continue;
            const ImVec2 at = x.S(r.x + (i + 0.5f) * bw, vals[i] >= 0 ? Y(vals[i]) : Y(vals[i]));
            const float y = vals[i] >= 0 ? std::max(at.y - ts.y - 1, a.y) : std::min(at.y + 1, b.y - ts.y);
            if (y < x.pic.y || y + ts.y > x.pic.y + x.pic.h) continue;
            x.dl->AddText(ImVec2(at.x - ts.x * 0.5f, y), IM_COL32(235, 235, 235, 255), s.c_str());
            ++x.value_texts;
        }
    }
    if (bar_name && names_under && sw >= 24) {
        for (int i = 0; i < n; ++i) {
            const std::string s = bar_name(i);
            const ImVec2 ts = ImGui::CalcTextSize(s.c_str());
            if (ts.x > sw - 2) continue;  // within its own bar: never over a neighbour's
            const ImVec2 at = x.S(r.x + (i + 0.5f) * bw, r.y + r.h);
            if (at.y + ts.y + 2 > x.pic.y + x.pic.h) continue;
            x.dl->AddText(ImVec2(at.x - ts.x * 0.5f, at.y + 2), IM_COL32(200, 200, 200, 255), s.c_str());
        }
    }
    if (x.v.hover && ImGui::IsWindowHovered()) {
        const ImVec2 m = ImGui::GetIO().MousePos;
        if (m.x >= a.x && m.x < b.x && m.y >= a.y && m.y < b.y) {
            const int i = std::clamp(int((m.x - a.x) / sw), 0, n - 1);
            x.tooltip = name + " [" + itos(i) + "]" + (bar_name ? " " + bar_name(i) : std::string()) + " = " + fmt(vals[i]);
        }
    }
}

Colormap signed_cm(const float* d, size_t n) { return quantity_range(Quantity::Signed, d, n); }
Colormap prob_cm(const float* d, size_t n) { return quantity_range(Quantity::Probability, d, n); }
std::pair<float, float> range_of(const float* d, size_t n) {
    float lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; ++i)
        if (std::isfinite(d[i])) { lo = std::min(lo, d[i]); hi = std::max(hi, d[i]); }
    if (lo > hi) lo = hi = 0;
    return {lo, hi};
}
int argmax(const float* d, int n) { return int(std::max_element(d, d + n) - d); }
double mean_abs(const float* d, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += std::fabs(d[i]);
    return n ? s / double(n) : 0;
}
double norm2(const float* d, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += double(d[i]) * d[i];
    return std::sqrt(s);
}
void record_values(Ctx& x, const std::string& what, const float* d, size_t n) { x.v.probe.strings["learn.values." + what] = csv(d, n); }

// A token's name in this run's sequence, the core's (token_label): "cls", "reg0", "dist", "patch 12 (row 1,
// col 4)"; `kind` says whether the stage's tokens are in the order before the registers are inserted.
std::string token_name(const Ctx& x, int tok, K kind = K::ResidPost) {
    return token_label(x.t.table(), tok, true, before_registers(kind));
}

// Row `row` of a (rows, cols) stage, or of slice `slice` of a (slices, rows, cols) one.
const float* row_of_stage(const Array& a, int row, int slice = 0) {
    const Slice2D s = slice2d(a, slice);
    if (!s.data || row < 0 || row >= s.rows) return nullptr;
    return s.data + size_t(row) * s.cols;
}
int cols_of(const Array& a) { return slice2d(a, 0).cols; }
int rows_of(const Array& a) { return slice2d(a, 0).rows; }

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
        label(x, slabs[k].r.x, slabs[k].r.y - lh - 1, fit_text(nm + " " + shape, 0.95f * colw * x.zoom, cut),
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
void step_ln(Ctx& x, LnSite site, int layer) {
    const StageId mid{ln_kind(site, LnPart::Mean), layer}, sid{ln_kind(site, LnPart::Std), layer},
        nid{ln_kind(site, LnPart::Normalized), layer}, oid{ln_kind(site, LnPart::Out), layer};
    const Array* mean = x.t.find(mid);
    const Array* sd = x.t.find(sid);
    const Array* nz = x.t.find(nid);
    const Array* out = x.t.find(oid);
    if (!mean || !sd || !nz || !out) return;
    const StageInfo& mi = x.t.info(mid);
    const Array* in = mi.from.empty() ? nullptr : x.t.find(mi.from[0]);
    if (!in) return;
    const int tok = std::clamp(x.tok, 0, rows_of(*in) - 1), D = cols_of(*in);
    const float* xr = row_of_stage(*in, tok);
    const float* nr = row_of_stage(*nz, tok);
    const float* orow = row_of_stage(*out, tok);
    const float m = mean->data()[tok], s = sd->data()[tok];
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
    bars(x, "LayerNorm row (blue < 0 < red)", shown.data(), D, r, -m_abs, m_abs, quantity_colormap(Quantity::Signed, -m_abs, m_abs));
    if (q2 <= 0) {
        // the mean and the mean +- std
        auto Y = [&](float v) { return r.y + r.h * (m_abs - std::clamp(v, -m_abs, m_abs)) / (2 * m_abs); };
        x.dl->AddLine(x.S(r.x, Y(m_shown)), x.S(r.x + r.w, Y(m_shown)), IM_COL32(255, 230, 0, 255), 2);
        x.dl->AddRectFilled(x.S(r.x, Y(m_shown + s_shown)), x.S(r.x + r.w, Y(m_shown - s_shown)), IM_COL32(255, 230, 0, 30));
        label(x, r.x + r.w + 4, Y(m_shown) - lh / 2, q1 < 0.5f ? "mean" : "0", IM_COL32(255, 230, 0, 255));
    }
    const bool affine = x.t.options().affine, unbiased = x.t.options().unbiased;
    const float ly = r.y + r.h + lh;
    label(x, r.x, ly, "mean " + num(m, 4) + "   std " + num(s, 4) + (unbiased ? " (unbiased: / (D-1))" : " (biased: / D)"), IM_COL32(255, 230, 0, 255));
    record_values(x, "ln.in", xr, size_t(D));
    record_values(x, "ln.normalized", nr, size_t(D));
    record_values(x, "ln.out", orow, size_t(D));
    x.v.probe.strings["learn.values.ln.mean_std"] = csv(&m, 1) + "," + csv(&s, 1);
    x.torch = q2 > 0 ? oid : nid;
    const int blk = layer;
    std::string phase = x.p < 0.3f ? "Watch the yellow line (the mean) and the band (one std either side)."
                        : q2 <= 0   ? "Subtract the mean, divide by the std: the row now has mean 0 and std 1."
                        : affine    ? "Then each number is multiplied by its own learned gamma and shifted by its beta (elementwise_affine=True)."
                                    : "elementwise_affine=False: there is no gamma and beta, so the normalised row is the output.";
    x.narration = "LayerNorm works on one token at a time. " + tn + "'s " + itos(D) + " numbers" + (blk >= 0 ? " entering block " + itos(blk) : "") +
                  " have mean " + num(m, 3) + " and std " + num(s, 3) + (unbiased ? " (unbiased: divided by D - 1)" : " (divided by D)") +
                  ". " + phase;
}

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

void step_scores(Ctx& x) {
    const Array* q = x.get(K::AttnQ, 0);
    const Array* k = x.get(K::AttnK, 0);
    const Array* sc = x.get(K::AttnScores, 0);
    if (!q || !k || !sc) return;
    const int H = int(extent(*q, 0)), T = int(extent(*q, 1)), d = int(extent(*q, 2));
    const int tok = std::clamp(x.tok, 0, T - 1), h = std::clamp(x.head, 0, H - 1);
    const float W = x.Wp(), Hh = x.Hp(), lh = ImGui::GetTextLineHeight();
    const float* qr = row_of_stage(*q, tok, h);
    const float* srow = row_of_stage(*sc, tok, h);
    const Slice2D ks = slice2d(*k, h);
    const float kx = W * 0.25f, kw = W * 0.35f, top = lh * 4.5f, kh = Hh - top - lh;
    label(x, kx, 0, "q of " + token_name(x, tok) + ", head " + itos(h));
    grid(x, "q", qr, 1, d, WRect{kx, lh * 1.3f, kw, lh * 1.4f}, signed_cm(qr, size_t(d)), CellRef{StageId{K::AttnQ, 0}, h, tok, 0});
    label(x, kx, top - lh * 1.2f, "k of every token (" + itos(T) + ")");
    grid(x, "K", ks.data, T, d, WRect{kx, top, kw, kh}, signed_cm(ks.data, ks.size()), CellRef{StageId{K::AttnK, 0}, h, 0, 0});
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
    x.narration = "The block does not replace the token: it adds what " + what + " computed to what came in (the residual stream). Here |" +
                  what + "| / |stream| = " + num(norm2(b, size_t(D)) / std::max(1e-12, norm2(a, size_t(D))), 3) +
                  ": each block changes the stream a little, and every later stage can still read what came before.";
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
    const float q = span(x.p, 0.3f, 0.7f);
    const WRect r{W * 0.1f, lh * 2.5f, W * 0.86f, H * 0.5f};
    std::vector<float> shown(static_cast<size_t>(M));
    const bool same = Mi == M;
    for (int i = 0; i < M; ++i) shown[size_t(i)] = same ? a[i] + (b[i] - a[i]) * q : b[i];
    const auto [lo0, hi0] = range_of(a, size_t(Mi));
    const auto [lo1, hi1] = range_of(b, size_t(M));
    const float lo = same ? lo0 + (lo1 - lo0) * q : lo1, hi = same ? hi0 + (hi1 - hi0) * q : hi1;
    const float mm = std::max(std::fabs(lo), std::fabs(hi));
    label(x, r.x, 0, (q < 0.5f && same ? "fc1: " : "after the nonlinearity: ") + itos(M) + " numbers of " + token_name(x, tok));
    bars(x, "MLP hidden row (blue < 0 < red)", shown.data(), M, r, lo, hi, quantity_colormap(Quantity::Signed, -mm, mm));
    const float oy = r.y + r.h + lh * 2.5f;
    label(x, r.x, oy - lh * 1.2f, "fc2: back to " + itos(D) + " (" + x.t.info(StageId{K::MlpOut, 0}).name + ")");
    grid(x, "MLP output", o, 1, D, WRect{r.x, oy, r.w, lh * 2}, signed_cm(o, size_t(D)), CellRef{StageId{K::MlpOut, 0}, 0, tok, 0}, span(x.p, 0.75f, 0.95f));
    int neg = 0;
    for (int i = 0; i < Mi; ++i) neg += a[i] < 0;
    record_values(x, "mlp.hidden", b, size_t(M));
    x.torch = StageId{K::MlpPost, 0};
    x.narration = "The MLP works on each token alone: fc1 widens its " + itos(D) + " numbers to " + itos(Mi) + ", " +
                  (same ? std::string(act_label(x.c.act)) + " keeps the positive ones and squashes the negative ones towards 0 (" + itos(neg) +
                              " of " + itos(Mi) + " were negative here; after it the smallest is " + num(lo1, 3) + ")"
                        : std::string("SwiGLU multiplies silu of one half by the other (") + itos(Mi) + " become " + itos(M) + ")") +
                  ", and fc2 brings it back to " + itos(D) + ". Attention mixes tokens; the MLP thinks about each one.";
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
    x.narration = "This model has no cls token: a learned probe (one query) attends over every token, as a cls token would in a block, "
                  "and its output stands for the image. Head " + itos(h) + " gives " + pct(a[best]) + " to " + token_name(x, best) + ".";
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

void draw_step(Ctx& x, const std::string& id) {
    if (id == "model") step_model(x);
    else if (id == "pixels") step_pixels(x);
    else if (id == "patchify") step_patches(x);
    else if (id == "project") step_embed(x);
    else if (id == "cls") step_cls(x);
    else if (id == "pos") step_pos(x);
    else if (id == "registers") step_registers(x);
    else if (id == "ln_pre") { x.tok = std::min(x.tok, x.rd.T - 1); step_ln(x, LnSite::Pre, -1); }
    else if (id == "ln") step_ln(x, LnSite::Ln1, 0);
    else if (id == "qkv") step_qkv(x);
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


// ---------------------------------------------------------------- lessons: what the trace says

struct LessonTruth {
    std::string answer;  // "" when this trace cannot answer it (a stage it needs is missing)
    std::string detail;
    std::vector<std::string> choices;  // choice-classes: the buttons (sorted: their order gives nothing away)
    std::string unanswerable;          // why this trace cannot answer it, when it says more than "a stage is missing"
};

const float* token_row(const Ctx& x, K k, int layer, int tok, int head = -1) {
    const Array* a = x.get(k, layer);
    if (!a) return nullptr;
    return head >= 0 ? row_of_stage(*a, tok, head) : row_of_stage(*a, tok);
}

LessonTruth lesson_truth(const Ctx& x, const Lesson& L) {
    LessonTruth t;
    const int tok = x.tok, h = x.head;
    const std::string f = L.fact;
    if (f == "cls-peak") {
        if (x.c.depth <= 0 || !x.c.cls_token || x.rd.dropped()) return t;
        const std::vector<float> m = cls_attention(x.t, x.c.depth - 1, -1);  // mean over heads, one value per patch
        const int best = peak_patch(m);
        if (best < 0) return t;
        t.answer = itos(best);
        t.detail = pct(m[size_t(best)]) + " of it (spread evenly, each patch would get " + pct(1.0 / x.rd.T) + ")";
    } else if (f == "score-peak") {
        const float* s = token_row(x, K::AttnScores, 0, tok, h);
        const Array* sc = x.get(K::AttnScores, 0);
        if (!s || !sc) return t;
        const int T = int(extent(*sc, 2)), best = argmax(s, T);
        t.answer = itos(best);
        t.detail = "score " + num(s[best], 3) + " (" + token_name(x, best) + "), the next largest " +
                   num(*std::max_element(s, s + T, [&](float a, float b) { return (a == s[best] ? -1e30f : a) < (b == s[best] ? -1e30f : b); }), 3);
    } else if (f == "patch-is-square") {
        const bool bug = x.t.options().bug_reshape_patches;
        t.answer = bug ? "no" : "yes";
        t.detail = bug ? "No: the BUG switch reshapes the image's rows into patch rows, so a row holds pieces of several image rows: not a patch."
                       : "Yes: each row is one " + itos(x.c.patch) + " x " + itos(x.c.patch) + " square, its " + itos(x.c.channels) +
                             " channels one after the other (unfold, not a plain reshape).";
    } else if (f == "pos-vs-patches") {
        const Array* tk = x.get(K::Tokens);
        const Array* pos = x.get(K::PosEmbed);
        if (!tk || !pos) return t;
        const int T0 = rows_of(*tk), D = cols_of(*tk), pr = rows_of(*pos);
        const double mt = mean_abs(tk->data() + size_t(T0 - pr) * D, size_t(pr) * D), mp = mean_abs(pos->data(), pos->size());
        t.answer = mp > mt ? "larger" : "smaller";
        t.detail = "mean |value| " + num(mp, 3) + " for the position rows against " + num(mt, 3) + " for the patch rows";
    } else if (f == "ln-normalized-mean-zero" || f == "ln-out-mean-zero") {
        const float* r = token_row(x, f == "ln-out-mean-zero" ? K::Ln1Out : K::Ln1Normalized, 0, tok);
        const Array* a = x.get(K::Ln1Out, 0);
        if (!r || !a) return t;
        const int D = cols_of(*a);
        double m = 0, s2 = 0;
        for (int i = 0; i < D; ++i) m += r[i];
        m /= D;
        for (int i = 0; i < D; ++i) s2 += (r[i] - m) * (r[i] - m);
        const double sd = std::sqrt(s2 / D);
        const bool zero = std::fabs(m) <= 0.01 * std::max(sd, 1e-12);
        t.answer = zero ? "yes" : "no";
        if (f == "ln-normalized-mean-zero")
            t.detail = std::string(zero ? "Yes" : "No") + ": its mean is " + num(m, 3) + " (std " + num(sd, 3) +
                       "); subtracting the mean makes it 0 up to float rounding.";
        else
            t.detail = std::string(zero ? "Yes" : "No") + ": its mean is " + num(m, 3) + " (std " + num(sd, 3) + "). " +
                       (x.t.options().affine ? "gamma scales each number and beta shifts it, each channel by its own amount, so the mean moves."
                                             : "elementwise_affine is off: the output is the normalised row itself.");
    } else if (f == "softmax-sums-one") {
        const float* a = token_row(x, K::AttnPattern, 0, tok, h);
        const Array* pt = x.get(K::AttnPattern, 0);
        if (!a || !pt) return t;
        const double s = std::accumulate(a, a + extent(*pt, 2), 0.0);
        t.answer = std::fabs(s - 1) < 1e-4 ? "yes" : "no";
        t.detail = std::string(t.answer == "yes" ? "Yes" : "No") + ": the row adds up to " + num(s, 6) +
                   (x.t.options().bug_scale_after_softmax ? " (the BUG divides the weights after the softmax)" : " (float rounding aside)") + ".";
    } else if (f == "weights-top3-half") {
        const float* a = token_row(x, K::AttnPattern, 0, tok, h);
        const Array* pt = x.get(K::AttnPattern, 0);
        if (!a || !pt) return t;
        std::vector<float> v(a, a + extent(*pt, 2));
        std::sort(v.rbegin(), v.rend());
        const double share = double(v[0]) + (v.size() > 1 ? v[1] : 0) + (v.size() > 2 ? v[2] : 0);
        t.answer = share > 0.5 ? "yes" : "no";
        t.detail = std::string(share > 0.5 ? "Yes" : "No") + ": they make " + pct(share) + " of it (the largest " + pct(v[0]) + ")" +
                   (share > 0.5 ? ": this head looks at a few tokens." : ": this head spreads its attention.");
    } else if (f == "attn-small-change") {
        const float* in = nullptr;
        const StageInfo& rm = x.t.info(StageId{K::ResidMid, 0});
        const StageId add = x.t.has(StageId{K::Ls1, 0}) ? StageId{K::Ls1, 0} : StageId{K::AttnOut, 0};
        for (const StageId& id : rm.from)
            if (id != add && x.t.find(id)) in = row_of_stage(*x.t.find(id), tok);
        const float* ao = x.t.find(add) ? row_of_stage(*x.t.find(add), tok) : nullptr;
        if (!in || !ao) return t;
        const int D = x.c.width;
        const double r = norm2(ao, size_t(D)) / std::max(1e-12, norm2(in, size_t(D)));
        t.answer = r < 0.5 ? "yes" : "no";
        t.detail = std::string(r < 0.5 ? "Yes" : "No") + ": |attention's output| / |stream| = " + num(r, 3) + ".";
    } else if (f == "gelu-negative") {
        const float* r = token_row(x, K::MlpPost, 0, tok);
        const Array* a = x.get(K::MlpPost, 0);
        if (!r || !a) return t;
        const int M = cols_of(*a);
        const float mn = *std::min_element(r, r + M);
        int neg = 0;
        for (int i = 0; i < M; ++i) neg += r[i] < 0;
        t.answer = mn < 0 ? "yes" : "no";
        t.detail = std::string(mn < 0 ? "Yes" : "No") + ": " + itos(neg) + " of the " + itos(M) + " are negative, the smallest " + num(mn, 4) +
                   (x.c.act == Act::SwiGlu ? "." : ": GELU(x) = x * Phi(x) dips below 0 for negative x (to about -0.17), unlike ReLU.");
    } else if (f == "depth-norm") {
        const Array* a = x.get(K::ResidPost, 0);
        const Array* b = x.get(K::ResidPost, x.c.depth - 1);
        if (!a || !b || x.c.depth < 2) return t;
        const double n0 = norm2(row_of_stage(*a, tok), size_t(cols_of(*a))), n1 = norm2(row_of_stage(*b, tok), size_t(cols_of(*b)));
        t.answer = n1 > n0 ? "grows" : "shrinks";
        t.detail = "|x| " + num(n0, 2) + " after block 0, " + num(n1, 2) + " after block " + itos(x.c.depth - 1);
    } else if (is_what_if(f)) {  // a second pass with one thing changed, once per trace
        auto& [version, r] = x.lv.what_ifs[f];
        if (version != x.version || (r.answer.empty() && r.detail.empty())) {
            r = what_if(x.v.s, x.t, f);
            version = x.version;
        }
        t.answer = r.answer;
        t.detail = r.detail;
        if (t.answer.empty()) t.unanswerable = r.detail;
    } else if (f == "top-class") {
        const Array* pr = x.get(K::Probs);
        if (!pr) return t;
        const int Kc = int(pr->size());
        const std::vector<std::string> names = class_labels(x.c, size_t(Kc));
        std::vector<int> idx(static_cast<size_t>(Kc));
        std::iota(idx.begin(), idx.end(), 0);
        std::partial_sort(idx.begin(), idx.begin() + std::min(3, Kc), idx.end(), [&](int i, int j) { return (*pr)(size_t(i)) > (*pr)(size_t(j)); });
        t.answer = names[size_t(idx[0])];
        for (int i = 0; i < std::min(3, Kc); ++i) t.choices.push_back(names[size_t(idx[size_t(i)])]);
        std::sort(t.choices.begin(), t.choices.end());
        t.detail = "The model says " + names[size_t(idx[0])] + " (" + pct((*pr)(size_t(idx[0]))) + ")" +
                   (Kc > 1 ? ", then " + names[size_t(idx[1])] + " (" + pct((*pr)(size_t(idx[1]))) + ")" : std::string()) +
                   (x.v.s.scene_truth() ? "; the scene holds a " + x.v.s.scene_truth()->cls + "." : ".");
    }
    return t;
}

std::string fill(std::string s, const LessonTruth& t, const std::string& shown_truth) {
    for (auto [k, v] : {std::pair<std::string, std::string>{"{truth}", shown_truth}, {"{detail}", t.detail}})
        for (size_t at; (at = s.find(k)) != std::string::npos;) s.replace(at, k.size(), v);
    return s;
}

}  // namespace

std::vector<std::string> learn_step_ids() {
    std::vector<std::string> v;
    for (const StepDef& d : step_defs()) v.push_back(d.id);
    return v;
}

std::vector<LearnStepInfo> learn_steps(const StageTable& table, const Config& c) {
    std::vector<LearnStepInfo> out;
    for (const StepDef& d : step_defs())
        if (d.has(table, c)) out.push_back({d.id, d.title});
    return out;
}

std::vector<LearnStepInfo> learn_steps(const Session& s) {
    const Trace* t = s.trace();
    if (!t || t->empty()) return {};
    return learn_steps(t->table(), s.shown_config());
}

void HandleLearnKeys(ViewCtx& v) {
    if (ImGui::GetIO().WantTextInput) return;
    UiState& ui = v.ui;
    if (ImGui::IsKeyPressed(GLFW_KEY_L, false)) {
        ui.learn = !ui.learn;
        v.notice = ui.learn ? "Learn mode (L: back to the workbench)" : "the workbench (L: Learn mode)";
    }
    // T: the tour of lessons. From the workbench: Learn mode at the tour's lesson (the first one the first
    // time); in Learn mode: the next lesson (Shift+T: the one before).
    if (ImGui::IsKeyPressed(GLFW_KEY_T, false)) {
        if (!ui.learn) {
            ui.learn = true;
            ui.lesson = std::max(ui.lesson, 0);
        } else {
            ui.lesson = std::max(0, ui.lesson + (ImGui::GetIO().KeyShift ? -1 : 1));
        }
        ui.lesson_go = true;
    }
    if (!ui.learn) return;
    const int n = int(learn_steps(v.s).size());
    auto go = [&](int k) {
        ui.learn_step = std::clamp(k, 0, std::max(0, n - 1));
        ui.learn_time = 0;
        ui.learn_zoom = 1;
        ui.learn_fx = ui.learn_fy = 0.5f;
    };
    if (ImGui::IsKeyPressed(GLFW_KEY_SPACE, false)) ui.learn_playing = !ui.learn_playing;
    if (ImGui::IsKeyPressed(GLFW_KEY_RIGHT) || ImGui::IsKeyPressed(GLFW_KEY_N)) go(ui.learn_step + 1);
    if (ImGui::IsKeyPressed(GLFW_KEY_LEFT) || ImGui::IsKeyPressed(GLFW_KEY_P)) go(ui.learn_step - 1);
    if (ImGui::IsKeyPressed(GLFW_KEY_HOME)) go(0);
    if (ImGui::IsKeyPressed(GLFW_KEY_0)) { ui.learn_zoom = 1; ui.learn_fx = ui.learn_fy = 0.5f; }
    // + / -: zoom about the picture's centre (for a trackpad without a wheel: GLFW delivers no pinch gesture)
    if (ImGui::IsKeyPressed(GLFW_KEY_EQUAL) || ImGui::IsKeyPressed(GLFW_KEY_KP_ADD)) ui.learn_zoom = std::min(400.f, ui.learn_zoom * 1.25f);
    if (ImGui::IsKeyPressed(GLFW_KEY_MINUS) || ImGui::IsKeyPressed(GLFW_KEY_KP_SUBTRACT)) ui.learn_zoom = std::max(0.5f, ui.learn_zoom / 1.25f);
}

void DrawLearn(ViewCtx& v, LearnView& lv, float W, float H) {
    UiState& ui = v.ui;
    Probe& pr = v.probe;
    const ImGuiWindowFlags fixed = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse |
                                   ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoBringToFrontOnFocus;
    const std::vector<LearnStepInfo> steps = learn_steps(v.s);
    const int n = int(steps.size());
    if (!lv.lessons_loaded) {
        lv.lessons_loaded = true;
        try {
            lv.lessons = load_lessons(lv.lessons_path.empty() ? default_lessons_path() : lv.lessons_path);
        } catch (const std::exception& e) {
            lv.lessons_error = e.what();
        }
    }
    // the tour: the lessons this model has; T and --tour put its lesson's step on screen, at the end of its
    // animation (the state the question is about), paused for the answer
    const std::vector<int> tour = tour_lessons(lv.lessons, steps);
    if (ui.lesson >= 0 && !tour.empty()) ui.lesson = std::min(ui.lesson, int(tour.size()) - 1);
    if (ui.lesson_go && n && !tour.empty()) {
        ui.lesson_go = false;
        const std::string& at = lv.lessons[size_t(tour[size_t(ui.lesson)])].step;
        for (int i = 0; i < n; ++i)
            if (steps[size_t(i)].id == at) ui.learn_step = i;
        ui.learn_time = kLearnStepSeconds;
        ui.learn_playing = false;
        ui.learn_zoom = 1;
        ui.learn_fx = ui.learn_fy = 0.5f;
    }
    if (n) ui.learn_step = std::clamp(ui.learn_step, 0, n - 1);
    // time: the animation runs while playing, then the next step follows after a pause
    const float dur = kLearnStepSeconds;
    if (ui.learn_playing && n) {
        ui.learn_time += std::min(ImGui::GetIO().DeltaTime, 0.1f) * ui.learn_speed;
        if (ui.learn_time > dur + kLearnHoldSeconds) {
            if (ui.learn_step + 1 < n) {
                ++ui.learn_step;
                ui.learn_time = 0;
                ui.learn_zoom = 1;
                ui.learn_fx = ui.learn_fy = 0.5f;
            } else {
                ui.learn_playing = false;
                ui.learn_time = dur;
            }
        }
    }
    auto go = [&](int k) {
        ui.learn_step = std::clamp(k, 0, std::max(0, n - 1));
        ui.learn_time = 0;
        ui.learn_zoom = 1;
        ui.learn_fx = ui.learn_fy = 0.5f;
    };

    // ---- the controls
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSizeConstraints(ImVec2(W, 0), ImVec2(W, H * 0.3f));
    ImGui::Begin("learn controls", nullptr, (fixed & ~ImGuiWindowFlags_NoResize) | ImGuiWindowFlags_AlwaysAutoResize);
    {
        Flow flow(W - 2 * ImGui::GetStyle().WindowPadding.x);
        flow.next(Flow::button_w("Workbench (L)"));
        if (ImGui::Button("Workbench (L)")) ui.learn = false;
        flow.next(Flow::button_w("< Back"), true);
        if (ImGui::Button("< Back")) go(ui.learn_step - 1);
        const char* play = ui.learn_playing ? "Pause (Space)" : "Play (Space)";
        flow.next(Flow::button_w("Pause (Space)"));
        if (ImGui::Button(play, ImVec2(Flow::button_w("Pause (Space)"), 0))) {  // one width for both labels
            if (!ui.learn_playing && ui.learn_time >= dur && ui.learn_step + 1 >= n) go(0);
            ui.learn_playing = !ui.learn_playing;
        }
        flow.next(Flow::button_w("Next >"));
        if (ImGui::Button("Next >")) go(ui.learn_step + 1);
        // a combo as wide as its widest entry (never a cut title), within a third of the window
        const float arrow = ImGui::GetFrameHeight() + 2 * ImGui::GetStyle().FramePadding.x + 4;
        auto combo_w = [&](float widest) { return std::min(widest + arrow, std::max(200.f, W / 3)); };
        float widest = 0;
        for (int i = 0; i < n; ++i)
            widest = std::max(widest, ImGui::CalcTextSize((itos(i + 1) + "/" + itos(n) + " " + steps[size_t(i)].title).c_str()).x);
        const float step_w = combo_w(std::max(widest, ImGui::CalcTextSize("no steps").x));
        flow.next(Flow::labelled_w(step_w, "step"));
        ImGui::SetNextItemWidth(step_w);
        const std::string cur = n ? itos(ui.learn_step + 1) + "/" + itos(n) + " " + steps[size_t(ui.learn_step)].title : "no steps";
        if (ImGui::BeginCombo("step", cur.c_str())) {
            for (int i = 0; i < n; ++i)
                if (ImGui::Selectable((itos(i + 1) + ". " + steps[size_t(i)].title).c_str(), i == ui.learn_step)) go(i);
            ImGui::EndCombo();
        }
        flow.next(Flow::labelled_w(120, "speed"));
        ImGui::SetNextItemWidth(120);
        const char* speeds[] = {"0.5x", "1x", "2x"};
        int sp = ui.learn_speed < 0.75f ? 0 : ui.learn_speed > 1.5f ? 2 : 1;
        if (ImGui::Combo("speed", &sp, speeds, 3)) ui.learn_speed = sp == 0 ? 0.5f : sp == 2 ? 2.f : 1.f;
        // the tour of lessons: pick one, or go to the next (T)
        if (!tour.empty()) {
            const int nt = int(tour.size());
            auto label = [&](int i) {
                return itos(i + 1) + "/" + itos(nt) + " " + lv.lessons[size_t(tour[size_t(i)])].title +
                       (lv.answers.count(tour[size_t(i)]) ? " (answered)" : "");
            };
            const std::string cur = ui.lesson >= 0 ? label(ui.lesson) : itos(nt) + " lessons: predict, then check";
            float lw = ImGui::CalcTextSize(cur.c_str()).x;
            for (int i = 0; i < nt; ++i) lw = std::max(lw, ImGui::CalcTextSize(label(i).c_str()).x);
            const float lesson_w = combo_w(lw);
            flow.next(Flow::labelled_w(lesson_w, "lesson"), true);
            ImGui::SetNextItemWidth(lesson_w);
            if (ImGui::BeginCombo("lesson", cur.c_str())) {
                for (int i = 0; i < nt; ++i)
                    if (ImGui::Selectable(label(i).c_str(), i == ui.lesson)) { ui.lesson = i; ui.lesson_go = true; }
                ImGui::EndCombo();
            }
            const char* next = ui.lesson < 0 ? "First lesson (T)" : "Next lesson (T)";
            const float next_w = std::max(Flow::button_w("First lesson (T)"), Flow::button_w("Next lesson (T)"));
            flow.next(next_w);
            ImGui::BeginDisabled(ui.lesson + 1 >= nt);
            if (ImGui::Button(next, ImVec2(next_w, 0))) { ui.lesson = std::min(ui.lesson + 1, nt - 1); ui.lesson_go = true; }
            ImGui::EndDisabled();
            if (ui.lesson >= 0) {
                const Lesson& L = lv.lessons[size_t(tour[size_t(ui.lesson)])];
                pr.numbers["tour.step"] = ui.lesson;
                pr.strings["tour.id"] = L.step;
                pr.strings["tour.title"] = L.title;
            }
            pr.numbers["tour.steps"] = nt;
        }
        // the image and the model
        if (lv.samples.empty()) lv.samples = sample_images();
        const std::string img = v.s.has_image() ? std::filesystem::path(v.s.image_path()).filename().string() : "no image";
        const float img_w = Flow::combo_w(img, 220, 320);
        flow.next(Flow::labelled_w(img_w, "image"), true);
        ImGui::SetNextItemWidth(img_w);
        if (ImGui::BeginCombo("image", Flow::combo_preview(img, img_w).c_str())) {
            if (v.s.model_spec() == "scenes" && ImGui::Selectable("New test scene")) v.s.new_scene();
            for (const std::string& p : lv.samples)
                if (ImGui::Selectable(std::filesystem::path(p).filename().string().c_str(), p == v.s.image_path())) v.s.load_image(p);
            ImGui::EndCombo();
        }
        const std::string model = v.s.model_spec();
        const float model_w = Flow::combo_w(model, 200, 320);
        flow.next(Flow::labelled_w(model_w, "model"));
        ImGui::SetNextItemWidth(model_w);
        if (ImGui::BeginCombo("model", Flow::combo_preview(model, model_w).c_str())) {
            for (const char* m : {"scenes", "default", "vit-ti16", "vit-b16", "dinov2-s14-reg", "clip-b32", "siglip-b16"})
                if (ImGui::Selectable(m, model == m)) v.s.begin_load_model(m, 0);
            ImGui::EndCombo();
        }
    }
    const float top = ImGui::GetWindowSize().y;
    pr.rects["learn.controls"] = Rect{0, 0, W, top};
    ImGui::End();

    const float bottom = std::max(ImGui::GetFrameHeight() + 12, ImGui::GetStyle().WindowMinSize.y);
    const float nw = std::clamp(0.3f * W, 320.f, 560.f);
    const Rect picr{0, top, W - nw, H - top - bottom};

    // ---- the picture
    ImGui::SetNextWindowPos(ImVec2(picr.x, picr.y));
    ImGui::SetNextWindowSize(ImVec2(picr.w, picr.h));
    ImGui::Begin("learn picture", nullptr, fixed | ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
    const ImVec2 c0 = ImGui::GetCursorScreenPos(), av = ImGui::GetContentRegionAvail();
    const Rect pic{c0.x, c0.y, av.x, av.y};
    pr.rects["learn.picture"] = pic;
    pr.numbers["learn.steps"] = n;
    std::string step_ids;
    for (auto& s : steps) step_ids += (step_ids.empty() ? "" : ",") + s.id;
    pr.strings["learn.step_ids"] = step_ids;
    std::string narration, title, torch;
    const Trace* t = v.s.trace();
    pr.numbers["learn.lessons"] = double(lv.lessons.size());
    std::vector<int> step_lessons;
    struct LessonView {
        int index;
        std::vector<std::string> choices;
        std::string truth, given, verdict, why, unused;
    };
    std::vector<LessonView> lesson_views;
    lv.keys.clear();
    if (!t || !n) {
        if (!DrawWorking(v))
            say_why(v, "learn.message", v.s.has_image() ? "The model has not run yet: Learn mode shows the forward pass once it has."
                                                         : "No image is loaded, so there is no forward pass to show: choose one in the image menu above.");
    } else {
        // the camera: the wheel zooms about the mouse, a drag pans
        ImGuiIO& io = ImGui::GetIO();
        const bool hovered = ImGui::IsWindowHovered();
        if (hovered && io.MouseWheel != 0) {
            const float z0 = ui.learn_zoom, z1 = std::clamp(z0 * std::pow(1.2f, io.MouseWheel), 0.5f, 400.f);
            const ImVec2 m = io.MousePos;
            // keep the world point under the mouse in place
            const float wx = ui.learn_fx * pic.w + (m.x - pic.x - pic.w * 0.5f) / z0, wy = ui.learn_fy * pic.h + (m.y - pic.y - pic.h * 0.5f) / z0;
            ui.learn_fx = (wx - (m.x - pic.x - pic.w * 0.5f) / z1) / pic.w;
            ui.learn_fy = (wy - (m.y - pic.y - pic.h * 0.5f) / z1) / pic.h;
            ui.learn_zoom = z1;
        }
        if (hovered && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 3)) lv.dragging = true;
        if (lv.dragging && ImGui::IsMouseDown(ImGuiMouseButton_Left)) {
            ui.learn_fx -= io.MouseDelta.x / (pic.w * ui.learn_zoom);
            ui.learn_fy -= io.MouseDelta.y / (pic.h * ui.learn_zoom);
        }
        const bool click = hovered && ImGui::IsMouseReleased(ImGuiMouseButton_Left) && !lv.dragging;
        if (!ImGui::IsMouseDown(ImGuiMouseButton_Left) && !ImGui::IsMouseReleased(ImGuiMouseButton_Left)) lv.dragging = false;
        if (ImGui::IsMouseReleased(ImGuiMouseButton_Left)) lv.dragging = false;

        const Config& c = v.s.shown_config();
        const auto model = v.s.shown_model();
        if (!lv.input.valid() || lv.input_key != v.s.version()) {
            upload_model_input(lv.input, v.s);
            lv.input_key = v.s.version();
        }
        ImDrawList* dl = ImGui::GetWindowDrawList();
        dl->PushClipRect(ImVec2(pic.x, pic.y), ImVec2(pic.x + pic.w, pic.y + pic.h), true);
        Ctx x{v, lv, *t, c, model->weights, t->table().dims(), dl, pic};
        x.zoom = ui.learn_zoom;
        x.focus = ImVec2(ui.learn_fx, ui.learn_fy);
        x.own_cam = ui.learn_zoom == 1 && ui.learn_fx == 0.5f && ui.learn_fy == 0.5f;
        x.p = clamp01(ui.learn_time / dur);
        x.version = v.s.version();
        x.clicked = click;
        const RunDims& rd = x.rd;
        x.tok = ui.learn_token >= 0 && ui.learn_token < rd.T ? ui.learn_token : (c.cls_token ? 0 : rd.prefix);
        x.head = std::clamp(ui.head, 0, std::max(0, c.heads - 1));
        x.patch = followed_patch(v, *t, c, x.why_patch);
        const LearnStepInfo& st = steps[size_t(ui.learn_step)];
        // the lessons on this step; the first unanswered one that waits for a click takes the click
        if (lv.answers_version != v.s.version()) {
            lv.answers.clear();
            lv.answers_version = v.s.version();
        }
        for (size_t i = 0; i < lv.lessons.size(); ++i)
            if (lv.lessons[i].step == st.id) step_lessons.push_back(int(i));
        int waiting = -1;
        for (int i : step_lessons)
            if (!lv.answers.count(i)) { waiting = i; break; }
        if (waiting >= 0 && !lv.pending_answer.empty()) {
            // --learn-answer with --tour: the tour's lesson takes it when it is on this step
            const int tl = ui.lesson >= 0 && ui.lesson < int(tour.size()) ? tour[size_t(ui.lesson)] : -1;
            if (tl >= 0 && lv.lessons[size_t(tl)].step == st.id && !lv.answers.count(tl)) waiting = tl;
            lv.answers[waiting] = lv.pending_answer;
            lv.pending_answer.clear();
            waiting = -1;
            for (int i : step_lessons)
                if (!lv.answers.count(i)) { waiting = i; break; }
        }
        const std::string& wk = waiting >= 0 ? lv.lessons[size_t(waiting)].kind : std::string();
        x.capture = wk == "click-patch" || wk == "click-key";
        draw_step(x, st.id);
        if (x.capture && !x.pick.name.empty()) {
            if (wk == "click-patch" && x.pick.name == "image") lv.answers[waiting] = itos(x.pick.r * rd.gw + x.pick.c);
            if (wk == "click-key" && x.pick.name == "K") lv.answers[waiting] = itos(x.pick.r);
        }
        for (int i : step_lessons) {
            LessonTruth tr = lesson_truth(x, lv.lessons[size_t(i)]);
            const Lesson& L = lv.lessons[size_t(i)];
            auto show = [&](const std::string& a) {
                if (L.kind == "click-patch" && !a.empty()) return token_name(x, rd.prefix + std::atoi(a.c_str()));
                if (L.kind == "click-key" && !a.empty()) return token_name(x, std::atoi(a.c_str()));
                return a;
            };
            LessonView lvw{i, L.kind == "choice-classes" ? tr.choices : L.choices, show(tr.answer), "", "", "", ""};
            if (tr.answer.empty()) lvw.why = tr.unanswerable.empty() ? "This trace cannot answer it (a stage it needs is missing)." : tr.unanswerable;
            auto it = lv.answers.find(i);
            if (it != lv.answers.end() && !tr.answer.empty()) {
                lvw.given = show(it->second);
                bool close = false;
                if (L.kind == "click-patch") {
                    const int a = std::atoi(it->second.c_str()), b = std::atoi(tr.answer.c_str());
                    close = std::abs(a / rd.gw - b / rd.gw) <= 1 && std::abs(a % rd.gw - b % rd.gw) <= 1;
                }
                lvw.verdict = it->second == tr.answer ? "Right." : close ? "Close: next to it." : "Not quite.";
                lvw.why = fill(L.why, tr, show(tr.answer));
            }
            lesson_views.push_back(lvw);
        }
        dl->PopClipRect();
        if (!x.tooltip.empty() && v.hover) ImGui::SetTooltip("%s", x.tooltip.c_str());
        narration = x.narration;
        title = st.title;
        if (x.torch && t->table().has(*x.torch)) torch = t->info(*x.torch).torch;
        pr.strings["learn.id"] = st.id;
        pr.numbers["learn.step"] = ui.learn_step;
        pr.numbers["learn.time"] = ui.learn_time;
        pr.numbers["learn.phase"] = x.p;
        pr.numbers["learn.zoom"] = x.zoom;
        pr.numbers["learn.value_texts"] = x.value_texts;
        pr.numbers["learn.token"] = x.tok;
        pr.numbers["learn.drawn"] = x.drawn;
        if (narration.empty()) narration = "This step has nothing to show for this trace (a stage it reads is missing).";
    }
    ImGui::End();

    // ---- the narration
    ImGui::SetNextWindowPos(ImVec2(W - nw, top));
    ImGui::SetNextWindowSize(ImVec2(nw, picr.h));
    ImGui::Begin("learn narration", nullptr, fixed);
    pr.rects["learn.narration"] = Rect{W - nw, top, nw, picr.h};
    if (n) {
        ImGui::TextDisabled("Step %d of %d", ui.learn_step + 1, n);
        ImGui::SetWindowFontScale(1.3f);
        TextWrappedWords(pr, "learn.title", title);
        ImGui::SetWindowFontScale(1.f);
        ImGui::ProgressBar(clamp01(ui.learn_time / dur), ImVec2(-1, 4), "");
        ImGui::Spacing();
        TextWrappedWords(pr, "learn.narration", narration);
        // the lessons of this step: predict, then check
        for (const LessonView& lw : lesson_views) {
            const Lesson& L = lv.lessons[size_t(lw.index)];
            ImGui::PushID(lw.index);
            ImGui::Spacing();
            ImGui::Separator();
            const ImVec4 gold(1.f, 0.85f, 0.3f, 1.f);
            const auto in_tour = std::find(tour.begin(), tour.end(), lw.index);
            if (in_tour != tour.end()) ImGui::TextDisabled("Lesson %d of %d", int(in_tour - tour.begin()) + 1, int(tour.size()));
            TextWrappedWords(pr, "learn.lesson.title", "Predict: " + L.title, &gold);
            pr.strings["learn.lesson.titles"] += (pr.strings["learn.lesson.titles"].empty() ? "" : "|") + L.title;
            TextWrappedWords(pr, "learn.lesson.ask", L.ask);
            if (lw.given.empty() && lw.why.empty()) {
                if (L.kind == "click-patch" || L.kind == "click-key") {
                    TextWrappedWords(pr, "learn.lesson.hint", L.kind == "click-patch" ? "(click a patch on the image)" : "(click a key row)", nullptr, true);
                } else {
                    Flow flow;
                    for (const std::string& c : lw.choices) {
                        flow.next(Flow::button_w(c.c_str()));
                        if (ImGui::Button(c.c_str())) lv.answers[lw.index] = c;
                    }
                }
            } else {
                if (!lw.given.empty()) {
                    const ImVec4 col = lw.verdict == "Right." ? ImVec4(0.5f, 1.f, 0.5f, 1.f) : ImVec4(1.f, 0.6f, 0.4f, 1.f);
                    TextWrappedWords(pr, "learn.lesson.verdict", "You: " + lw.given + ". " + lw.verdict + " The numbers say: " + lw.truth + ".", &col);
                }
                TextWrappedWords(pr, "learn.lesson.why", lw.why);
                if (!lw.given.empty() && ImGui::SmallButton("Ask again")) lv.answers.erase(lw.index);
            }
            if (lw.index == (lesson_views.empty() ? -1 : lesson_views.front().index)) {
                pr.strings["learn.lesson.title"] = L.title;
                pr.strings["learn.lesson.ask"] = L.ask;
                pr.strings["learn.lesson.answer"] = lw.given;
                pr.strings["learn.lesson.truth"] = lw.truth;
                pr.strings["learn.lesson.verdict"] = lw.verdict;
                pr.strings["learn.lesson.why"] = lw.why;
            }
            pr.strings["learn.lesson.truths"] += (pr.strings["learn.lesson.truths"].empty() ? "" : "|") + lw.truth;
            pr.strings["learn.lesson.verdicts"] += (lw.index == lesson_views.front().index ? "" : "|") + lw.verdict;
            pr.strings["learn.lesson.whys"] += (lw.index == lesson_views.front().index ? "" : "|") + lw.why;
            ImGui::PopID();
        }
        if (!lv.lessons_error.empty()) {
            const ImVec4 warn(kWarnRGBA[0], kWarnRGBA[1], kWarnRGBA[2], kWarnRGBA[3]);
            TextWrappedWords(pr, "learn.lessons_error", "Lessons not read: " + lv.lessons_error, &warn);
            pr.strings["learn.lessons_error"] = lv.lessons_error;
        }
        if (!torch.empty()) {
            ImGui::Spacing();
            ImGui::TextDisabled("In PyTorch:");
            const ImVec4 code(0.6f, 0.85f, 1.f, 1.f);
            TextWrappedWords(pr, "learn.torch", torch, &code);
        }
        if (!lv.keys.empty()) {
            ImGui::Spacing();
            ImGui::TextDisabled("Colour keys:");
            std::string names;
            const float kw = std::max(120.f, ImGui::GetContentRegionAvail().x - 8);
            for (auto& [name, cm] : lv.keys) {
                TextWrappedWords(pr, "learn.keys", name);
                ImGui::PushID(names.c_str());
                ColorKey(v, "learn", cm, kw);
                ImGui::PopID();
                names += (names.empty() ? "" : "\n") + name;
            }
            pr.strings["learn.keys"] = names;
            pr.numbers["learn.keys"] = double(lv.keys.size());
        }
        ImGui::Spacing();
        TextWrappedWords(pr, "learn.help", "Wheel or + / -: zoom (numbers show in large cells), drag: pan, 0: reset; click a value: open it in the workbench. T: the next lesson.",
                         nullptr, true);
    }
    ImGui::End();
    pr.strings["learn.title"] = title;
    pr.strings["learn.narration"] = narration;
    pr.strings["learn.torch"] = torch;

    ImGui::SetNextWindowPos(ImVec2(0, H - bottom));
    ImGui::SetNextWindowSize(ImVec2(W, bottom));
    ImGui::Begin("status", nullptr, fixed);
    DrawStatusBar(v);
    ImGui::End();
    DrawErrorPanel(v);
}

}  // namespace vit::app
