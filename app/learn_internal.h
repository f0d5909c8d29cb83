// Learn mode's internals (learn.h is the interface): the steps a stage table has, the drawing context in
// world units and the small drawing helpers the steps (learn_steps.cpp) and the lessons and the window
// (learn.cpp) share.
#pragma once
#include "learn.h"

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


namespace vit::app::learn_detail {


using K = StageKind;

inline std::string num(double v, int digits = 2) {
    char b[48];
    if (v != 0 && (std::fabs(v) < 1e-3 || std::fabs(v) >= 1e5)) std::snprintf(b, sizeof b, "%.*e", digits, v);
    else std::snprintf(b, sizeof b, "%.*f", digits, v);
    return b;
}
inline std::string pct(double v) { return num(100 * v, 1) + "%"; }
inline std::string itos(long long v) { return std::to_string(v); }

inline float clamp01(float x) { return std::clamp(x, 0.f, 1.f); }
inline float ease(float x) {
    x = clamp01(x);
    return x * x * (3 - 2 * x);
}
// The part of [a, b] of the phase p, eased: 0 before a, 1 after b.
inline float span(float p, float a, float b) { return ease((p - a) / std::max(1e-6f, b - a)); }

// ---------------------------------------------------------------- the steps a table has

struct StepDef {
    const char* id;
    const char* title;
    std::function<bool(const StageTable&, const Config&)> has;
};

inline bool has_k(const StageTable& t, K k, int layer = -1) { return t.has(StageId{k, layer}); }

inline const std::vector<StepDef>& step_defs() {
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
        {"ln", "LayerNorm of one token", [](const StageTable& t, const Config&) { return has_k(t, K::Ln1Mean, 0); }},
        // (an RMSNorm model's: the LayerNorm lessons, which ask about the mean, are not its)
        {"rms", "RMSNorm of one token", [](const StageTable& t, const Config&) { return has_k(t, K::Ln1Rms, 0); }},
        {"qkv", "Query, key and value", [](const StageTable& t, const Config&) { return has_k(t, K::AttnQ, 0); }},
        {"rope", "Positions turn q and k (RoPE)", [](const StageTable& t, const Config&) { return has_k(t, K::AttnQRot, 0); }},
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

inline bool on_screen(const Ctx& x, ImVec2 a, ImVec2 b) {
    return b.x >= x.pic.x && a.x <= x.pic.x + x.pic.w && b.y >= x.pic.y && a.y <= x.pic.y + x.pic.h;
}

// A caption at a world point (align 0 left, 0.5 centre, 1 right), recorded as a label when the step's
// own camera shows it (the user's zoom may cut any caption at the picture's edge).
inline void label(Ctx& x, float wx, float wy, const std::string& text, ImU32 col = IM_COL32(230, 230, 230, 255), float align = 0) {
    const ImVec2 sz = ImGui::CalcTextSize(text.c_str());
    ImVec2 at = x.S(wx, wy);
    at.x -= sz.x * align;
    if (!on_screen(x, at, ImVec2(at.x + sz.x, at.y + sz.y))) return;
    if (x.own_cam) DrawLabel(x.dl, x.v.probe, "learn.labels", at, col, text, x.pic);
    else x.dl->AddText(at, col, text.c_str());
}

inline void outline(Ctx& x, WRect r, ImU32 col, float thick = 2) {
    x.dl->AddRect(x.S(r.x, r.y), x.S(r.x + r.w, r.y + r.h), col, 0, 0, thick);
}

inline void arrow(Ctx& x, float x0, float y0, float x1, float y1, ImU32 col = IM_COL32(200, 200, 200, 255)) {
    const ImVec2 a = x.S(x0, y0), b = x.S(x1, y1);
    x.dl->AddLine(a, b, col, 2);
    const float dx = b.x - a.x, dy = b.y - a.y, n = std::max(1e-3f, std::sqrt(dx * dx + dy * dy));
    const float ux = dx / n, uy = dy / n, s = 8;
    x.dl->AddTriangleFilled(b, ImVec2(b.x - ux * s - uy * s * 0.6f, b.y - uy * s + ux * s * 0.6f),
                            ImVec2(b.x - ux * s + uy * s * 0.6f, b.y - uy * s - ux * s * 0.6f), col);
}

inline void add_key(Ctx& x, const std::string& name, const Colormap& cm) {
    for (auto& k : x.lv.keys)
        if (k.first == name) return;
    x.lv.keys.push_back({name, cm});
}

// What a cell of a grid is in the trace: stage, slice, and the offsets of the grid in it.
struct CellRef {
    std::optional<StageId> stage;
    int slice = 0, row0 = 0, col0 = 0;
};

inline void open_in_workbench(Ctx& x, const CellRef& ref, int r, int c) {
    if (!ref.stage || !select_stage(x.v.ui, x.t, *ref.stage)) return;
    x.v.ui.head = ref.slice;
    x.v.ui.cell_r = ref.row0 + r;
    x.v.ui.cell_c = ref.col0 + c;
    x.v.ui.tab = Tab::Stage;
    x.v.ui.learn = false;
    x.v.notice = "opened " + x.t.info(*ref.stage).name + " [" + itos(ref.row0 + r) + ", " + itos(ref.col0 + c) + "] from Learn mode";
}

inline uint64_t grid_key(const Ctx& x, const std::string& name, const float* d, int rows, int cols) {
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
inline void grid(Ctx& x, const std::string& name, const float* d, int rows, int cols, WRect r, const Colormap& cm,
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
inline void bars(Ctx& x, const std::string& name, const float* vals, int n, WRect r, float lo, float hi, const Colormap& cm,
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

inline Colormap signed_cm(const float* d, size_t n) { return quantity_range(Quantity::Signed, d, n); }
inline Colormap prob_cm(const float* d, size_t n) { return quantity_range(Quantity::Probability, d, n); }
inline std::pair<float, float> range_of(const float* d, size_t n) {
    float lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; ++i)
        if (std::isfinite(d[i])) { lo = std::min(lo, d[i]); hi = std::max(hi, d[i]); }
    if (lo > hi) lo = hi = 0;
    return {lo, hi};
}
inline int argmax(const float* d, int n) { return int(std::max_element(d, d + n) - d); }
inline double mean_abs(const float* d, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += std::fabs(d[i]);
    return n ? s / double(n) : 0;
}
inline double norm2(const float* d, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += double(d[i]) * d[i];
    return std::sqrt(s);
}
inline void record_values(Ctx& x, const std::string& what, const float* d, size_t n) { x.v.probe.strings["learn.values." + what] = csv(d, n); }

// A token's name in this run's sequence, the core's (token_label): "cls", "reg0", "dist", "patch 12 (row 1,
// col 4)"; `kind` says whether the stage's tokens are in the order before the registers are inserted.
inline std::string token_name(const Ctx& x, int tok, K kind = K::ResidPost) {
    return token_label(x.t.table(), tok, true, before_registers(kind));
}

// Row `row` of a (rows, cols) stage, or of slice `slice` of a (slices, rows, cols) one.
inline const float* row_of_stage(const Array& a, int row, int slice = 0) {
    const Slice2D s = slice2d(a, slice);
    if (!s.data || row < 0 || row >= s.rows) return nullptr;
    return s.data + size_t(row) * s.cols;
}
inline int cols_of(const Array& a) { return slice2d(a, 0).cols; }
inline int rows_of(const Array& a) { return slice2d(a, 0).rows; }

// ---------------------------------------------------------------- learn_steps.cpp

// Draws step `id` of Learn mode in the context (its narration, keys and camera too).
void draw_step(Ctx& x, const std::string& id);
// The patch the steps follow (the last block's cls attention peak, or the first), and why.
int followed_patch(const ViewCtx& v, const Trace& t, const Config& c, std::string& why);

// ---------------------------------------------------------------- learn_steps_attention.cpp

void step_qkv(Ctx& x);       // one token's q, k and v from its LayerNorm row
void step_rope(Ctx& x);      // q and k turned by their patch's angles (RoPE models)
void step_scores(Ctx& x);    // the token's q against every key, scaled
void step_softmax(Ctx& x);   // the scores become weights that add up to 1
void step_weighted(Ctx& x);  // the weighted sum of the values
void step_heads(Ctx& x);     // the heads joined and projected

}  // namespace vit::app::learn_detail
