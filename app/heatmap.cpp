// Heatmaps: a tensor slice as a coloured grid with labelled axes, a colour bar and a hover readout
// (Heatmap), and a stage's tensor drawn at its current slice (tensor_heatmap); shared by the tabs.
//
// Rules every view keeps (issue 8): every access to the trace is guarded; a view with nothing to
// show says why, in place; heatmap cells are square (zoom for more); labels are thinned until none
// overlaps or leaves its panel.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tensor_access.h"
#include "views.h"

namespace vit::app {

const char* overlay_name(Overlay o) {
    switch (o) {
        case Overlay::None: return "none";
        case Overlay::Cls: return "cls";
        case Overlay::Rollout: return "rollout";
        case Overlay::GradRollout: return "grad";
        case Overlay::Query: return "query";
    }
    return "?";
}

void DrawLabel(ImDrawList* dl, Probe& probe, const std::string& group, ImVec2 pos, ImU32 col, const std::string& text,
               const Rect& clip) {
    ImVec2 sz = ImGui::CalcTextSize(text.c_str());
    dl->AddText(pos, col, text.c_str());
    probe.text(group, text, Rect{pos.x, pos.y, sz.x, sz.y}, clip);
}

Colormap colormap_for(const float* all, size_t n_all, const float* slice, size_t n_slice, bool signed_values,
                      ScaleMode mode) {
    Colormap cm;
    const float* d = mode == ScaleMode::PerSlice ? slice : all;
    size_t n = mode == ScaleMode::PerSlice ? n_slice : n_all;
    if (!d || n == 0) return cm;
    float lo = d[0], hi = d[0];
    for (size_t i = 1; i < n; ++i) { lo = std::min(lo, d[i]); hi = std::max(hi, d[i]); }
    bool diverging = signed_values && lo < 0 && hi > 0;
    if (mode == ScaleMode::Symmetric || diverging) {
        float m = std::max(std::fabs(lo), std::fabs(hi));
        cm.mode = Colormap::Diverging;
        cm.vmin = -m; cm.vmax = m;
    } else {
        cm.mode = Colormap::Sequential;
        cm.vmin = lo; cm.vmax = hi;
    }
    if (cm.vmax <= cm.vmin) cm.vmax = cm.vmin + 1e-6f;
    return cm;
}

std::string fmt(float v) {
    char b[32];
    if (v != 0 && (std::fabs(v) < 1e-3f || std::fabs(v) >= 1e4f)) std::snprintf(b, sizeof b, "%.3e", v);
    else std::snprintf(b, sizeof b, "%.4f", v);
    return b;
}

float colorbar_width(const Colormap& cm) {
    float w = 0;
    for (float v : {cm.vmin, 0.5f * (cm.vmin + cm.vmax), cm.vmax}) w = std::max(w, ImGui::CalcTextSize(fmt(v).c_str()).x);
    return 10 + 14 + 6 + w + 6;
}

std::vector<std::string> class_labels(const Config& c, size_t n) {
    std::vector<std::string> v(n);
    for (size_t i = 0; i < n; ++i)
        v[i] = c.class_names.size() == n ? c.class_names[i] : "class " + std::to_string(i);
    return v;
}

size_t row_of(const Trace& t, StageId id) {
    if (t.size() == 0) return 0;
    if (const int r = t.index(id); r >= 0) return size_t(r);
    if (id.layer >= 0 && t.depth() > 0) {  // the same kind at the nearest block
        const int r = t.index(StageId{id.kind, std::min(id.layer, t.depth() - 1)});
        if (r >= 0) return size_t(r);
    }
    return 0;
}

std::optional<ShownStage> shown_stage(const Session& s, const UiState& ui) {
    const Trace* t = s.trace();
    if (!t || t->empty() || t->size() == 0) return std::nullopt;
    ShownStage sh;
    sh.row = row_of(*t, ui.stage);
    sh.info = &t->info(sh.row);
    sh.value = &t->at(sh.row);
    sh.grad = t->grad_at(sh.row);
    return sh;
}

void select_row(UiState& ui, const Trace& t, size_t row) {
    if (t.size() == 0) return;
    ui.stage = t.info(std::min(row, t.size() - 1)).id;
}

bool select_stage(UiState& ui, const Trace& t, StageId id) {
    if (t.index(id) < 0) return false;
    ui.stage = id;
    return true;
}

Rect clip_rect(ImDrawList* dl) {
    ImVec2 a = dl->GetClipRectMin(), b = dl->GetClipRectMax();
    return Rect{a.x, a.y, b.x - a.x, b.y - a.y};
}

std::string weights_note(const Session& s) {
    const auto m = s.shown_model();
    return m && m->source.rfind("preset:", 0) == 0 ? "random weights" : "";
}

namespace {

uint64_t hash_str(const std::string& s, uint64_t h = 1469598103934665603ull) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

void colorbar(ViewCtx& v, const std::string& group, const Colormap& cm, ImVec2 p, float h) {
    if (h < 20) return;
    Colormap unit = cm;
    unit.vmin = 0; unit.vmax = 1;
    if (unit.mode == Colormap::Overlay) unit.opacity = 1;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    v.gfx.draw(dl, v.gfx.ramp(), p, ImVec2(p.x + 14, p.y + h), unit);
    dl->AddRect(p, ImVec2(p.x + 14, p.y + h), IM_COL32(120, 120, 120, 255));
    ImU32 tc = ImGui::GetColorU32(ImGuiCol_Text);
    const float th = ImGui::GetTextLineHeight();
    Rect clip = clip_rect(dl);
    DrawLabel(dl, v.probe, group, ImVec2(p.x + 20, p.y - th / 2), tc, fmt(cm.vmax), clip);
    if (h > 3 * th) DrawLabel(dl, v.probe, group, ImVec2(p.x + 20, p.y + h / 2 - th / 2), tc, fmt(0.5f * (cm.vmin + cm.vmax)), clip);
    DrawLabel(dl, v.probe, group, ImVec2(p.x + 20, p.y + h - th / 2), tc, fmt(cm.vmin), clip);
}

// Which token a selected patch is on an axis labelled like this: after the tokens before it (cls,
// registers, dist; the registers only from with_registers on).
int token_index(const std::string& axis, int patch, int prefix) {
    if (patch < 0) return -1;
    if (axis.rfind("tokens", 0) == 0) return patch + prefix;
    if (axis.rfind("patches", 0) == 0) return patch;
    return -1;
}

// The names of the tokens on a token axis of `n` entries (cls, reg0, dist, p0...), none for another axis.
std::vector<std::string> token_names(const StageTable& table, const StageInfo& info, const std::string& axis, int n) {
    std::vector<std::string> v;
    if (axis.rfind("tokens", 0) != 0) return v;
    const bool before = before_registers(info.id.kind);
    const RunDims& rd = table.dims();
    if (n != rd.T - (before ? table.config().registers : 0)) return v;  // not the run's tokens (a pooled row)
    for (int i = 0; i < n; ++i) v.push_back(token_label(table, i, false, before));
    return v;
}

// The label of axis i of a rank-`rank` tensor; never reads past the list it is given.
std::string axis_label(const StageInfo& info, size_t i, size_t rank) {
    if (info.axes.size() == rank && i < info.axes.size()) return info.axes[i];
    return "axis " + std::to_string(i);
}

}  // namespace

void Heatmap(ViewCtx& v, const char* id, Texture& tex, bool upload, const HeatmapArgs& a) {
    UiState& ui = v.ui;
    Probe& pr = v.probe;
    if (a.rows <= 0 || a.cols <= 0 || !a.data) {
        ImGui::TextDisabled("(nothing to draw: the slice is empty)");
        return;
    }
    if (upload) tex.upload_float(a.data, a.cols, a.rows);
    ImGui::PushID(id);
    const std::string group = a.rect_name ? a.rect_name : id;
    ImVec2 avail = ImGui::GetContentRegionAvail();
    float W = a.max_w > 0 ? std::min(a.max_w, avail.x) : avail.x;
    float H = a.max_h > 0 ? std::min(a.max_h, avail.y) : avail.y;
    const float th = ImGui::GetTextLineHeight();
    const float bar_w = a.colorbar ? colorbar_width(a.cm) : 0.f;
    const bool row_names = int(a.row_names.size()) == a.rows;
    float left = ImGui::CalcTextSize(std::to_string(a.rows - 1).c_str()).x + 8;
    if (row_names)
        for (auto& n : a.row_names) left = std::max(left, ImGui::CalcTextSize(n.c_str()).x + 8);
    const float top = th + 2;
    // Axis titles: what each axis is and its size (one line, so side-by-side panels start level).
    if (W > 360) ImGui::TextDisabled("rows: %s (%d)   columns: %s (%d)", a.row_label.c_str(), a.rows, a.col_label.c_str(), a.cols);
    else ImGui::TextDisabled("%s (%d) x %s (%d)", a.row_label.c_str(), a.rows, a.col_label.c_str(), a.cols);
    // Square cells, as large as the panel allows; zoom (wheel) for more.
    float cwf = (W - bar_w - left) / a.cols, chf = (H - th - top - 4) / a.rows;
    float cell = a.cell > 0 ? a.cell : std::max(std::min(cwf, chf), 0.05f);
    if (a.rows == 1 && a.cell <= 0) cell = std::min(cwf, 48.f);  // a vector: square cells up to 48 px
    bool zoom = a.zoomable;
    float z = zoom ? ui.zoom : 1.f;
    float cw = cell * z, ch = cell * z;
    if (a.cols == 1 && a.strip_w > 0) cw = a.strip_w;  // one value per row (LayerNorm mean/std): a column
    if (a.rows == 1 && ch < 12) ch = 12;                // a long vector: a visible strip (cells taller than wide)
    ImVec2 canvas(std::min(W - bar_w, left + a.cols * cw), std::min(H - th - 4, top + a.rows * ch));
    canvas.x = std::max(canvas.x, 1.f); canvas.y = std::max(canvas.y, 1.f);
    ImVec2 origin = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("canvas", canvas);
    bool hovered = v.hover && ImGui::IsItemHovered();
    bool clicked = v.hover && ImGui::IsItemClicked(ImGuiMouseButton_Left);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    ImVec2 img0(origin.x + left, origin.y + top);
    ImVec2 clip1(origin.x + canvas.x, origin.y + canvas.y);
    // pan (drag) and zoom (wheel) for large tensors
    if (zoom && hovered) {
        float wheel = ImGui::GetIO().MouseWheel;
        if (wheel != 0) {
            float nz = std::clamp(ui.zoom * (wheel > 0 ? 1.25f : 0.8f), 1.f, 64.f);
            ImVec2 m = ImGui::GetIO().MousePos;
            float fx = (m.x - img0.x - ui.pan_x) / ui.zoom, fy = (m.y - img0.y - ui.pan_y) / ui.zoom;
            ui.zoom = nz;
            ui.pan_x = m.x - img0.x - fx * nz;
            ui.pan_y = m.y - img0.y - fy * nz;
        }
        if (ImGui::IsMouseDragging(ImGuiMouseButton_Left)) {
            ImVec2 d = ImGui::GetIO().MouseDelta;
            ui.pan_x += d.x; ui.pan_y += d.y;
        }
    }
    if (!zoom || ui.zoom <= 1.f) { ui.pan_x = ui.pan_y = 0; }
    float px = zoom ? ui.pan_x : 0, py = zoom ? ui.pan_y : 0;
    ImVec2 p0(img0.x + px, img0.y + py), p1(p0.x + a.cols * cw, p0.y + a.rows * ch);
    dl->PushClipRect(img0, clip1, true);
    v.gfx.draw(dl, tex, p0, p1, a.cm);
    ImU32 hl = IM_COL32(255, 80, 200, 255);
    if (a.highlight_row >= 0 && a.highlight_row < a.rows)
        dl->AddRect(ImVec2(p0.x, p0.y + a.highlight_row * ch), ImVec2(p1.x, p0.y + (a.highlight_row + 1) * ch), hl, 0, 0, 2);
    if (a.highlight_col >= 0 && a.highlight_col < a.cols)
        dl->AddRect(ImVec2(p0.x + a.highlight_col * cw, p0.y), ImVec2(p0.x + (a.highlight_col + 1) * cw, p1.y), hl, 0, 0, 2);
    if (a.mark_row >= 0 && a.mark_row < a.rows && a.mark_col >= 0 && a.mark_col < a.cols) {
        ImVec2 m0(p0.x + a.mark_col * cw, p0.y + a.mark_row * ch), m1(m0.x + cw, m0.y + ch);
        dl->AddRect(ImVec2(m0.x - 1, m0.y - 1), ImVec2(m1.x + 1, m1.y + 1), IM_COL32(0, 230, 255, 255), 0, 0, 2);
        if (a.rect_name) pr.rects[std::string(a.rect_name) + ".cell"] = Rect{m0.x, m0.y, cw, ch};
    }
    dl->PopClipRect();
    // Tick labels, thinned so that none overlaps its neighbour or leaves the canvas.
    ImU32 tc = ImGui::GetColorU32(ImGuiCol_TextDisabled);
    Rect clip{origin.x, origin.y, canvas.x, canvas.y};
    int rstep = std::max(1, int(std::ceil((th + 1) / ch)));
    for (int r = 0; r < a.rows; r += rstep) {
        float y = p0.y + r * ch + ch / 2 - th / 2;
        if (y < origin.y - 0.5f || y + th > clip1.y + 0.5f) continue;  // left of the cells: clear of the column labels
        DrawLabel(dl, pr, group + ".rows", ImVec2(origin.x, y), tc, row_names ? a.row_names[size_t(r)] : std::to_string(r), clip);
    }
    bool names = !a.col_names.empty() && int(a.col_names.size()) == a.cols;
    auto col_text = [&](int c) { return names ? a.col_names[size_t(c)] : std::to_string(c); };
    float widest = 0;
    if (names) for (auto& n : a.col_names) widest = std::max(widest, ImGui::CalcTextSize(n.c_str()).x);
    if (!names || widest + 6 > cw) { names = false; widest = ImGui::CalcTextSize(std::to_string(a.cols - 1).c_str()).x; }
    int cstep = std::max(1, int(std::ceil((widest + 6) / cw)));
    for (int c = 0; c < a.cols; c += cstep) {
        std::string s = col_text(c);
        float w = ImGui::CalcTextSize(s.c_str()).x;
        float x = p0.x + c * cw + cw / 2 - w / 2;
        if (x < img0.x - 0.5f || x + w > clip1.x + 0.5f) continue;
        DrawLabel(dl, pr, group + ".cols", ImVec2(x, origin.y), tc, s, clip);
    }
    if (a.colorbar) {
        float bh = std::min(canvas.y - top - th, 260.f);
        colorbar(v, group + ".colorbar", a.cm, ImVec2(origin.x + canvas.x + 10, img0.y + th / 2), bh);
    }
    if (a.rect_name) {
        pr.rects[a.rect_name] = Rect{p0.x, p0.y, p1.x - p0.x, p1.y - p0.y};
        pr.numbers[std::string(a.rect_name) + ".vmin"] = a.cm.vmin;
        pr.numbers[std::string(a.rect_name) + ".vmax"] = a.cm.vmax;
        pr.numbers[std::string(a.rect_name) + ".mode"] = a.cm.mode;
        pr.numbers[std::string(a.rect_name) + ".rows"] = a.rows;
        pr.numbers[std::string(a.rect_name) + ".cols"] = a.cols;
        pr.numbers[std::string(a.rect_name) + ".cell_w"] = cw;
        pr.numbers[std::string(a.rect_name) + ".cell_h"] = ch;
    }
    if ((a.clicked_row || a.clicked_col) && clicked) {
        ImVec2 m = ImGui::GetIO().MousePos;
        int r = int(std::floor((m.y - p0.y) / ch)), c = int(std::floor((m.x - p0.x) / cw));
        if (r >= 0 && r < a.rows && c >= 0 && c < a.cols && m.y >= img0.y && m.x >= img0.x) {
            if (a.clicked_row) *a.clicked_row = r;
            if (a.clicked_col) *a.clicked_col = c;
        }
    }
    if (hovered) {
        ImVec2 m = ImGui::GetIO().MousePos;
        int c = int(std::floor((m.x - p0.x) / cw)), r = int(std::floor((m.y - p0.y) / ch));
        if (r >= 0 && r < a.rows && c >= 0 && c < a.cols && m.x >= img0.x && m.y >= img0.y) {
            ImGui::BeginTooltip();
            ImGui::Text("%s%d, %d] = %s", a.index_prefix.empty() ? "[" : a.index_prefix.c_str(), r, c,
                        fmt(a.data[size_t(r) * a.cols + c]).c_str());
            ImGui::TextDisabled("%s %d%s, %s %d%s", a.row_label.c_str(), r, row_names ? (" (" + a.row_names[size_t(r)] + ")").c_str() : "",
                                a.col_label.c_str(), c,
                                int(a.col_names.size()) == a.cols ? (" (" + a.col_names[size_t(c)] + ")").c_str() : "");
            ImGui::EndTooltip();
        }
    }
    ImGui::PopID();
}

void tensor_heatmap(ViewCtx& v, const char* id, const std::string& name, const Array& t, const StageInfo& info,
                    HeatmapCache& cache, HeatmapArgs a, bool is_grad) {
    const UiState& ui = v.ui;
    const size_t R = rank(t);
    int want = R == 3 ? (info.per_head ? ui.head : ui.channel) : 0;
    Slice2D sl = slice2d(t, want);
    if (!sl.data || sl.size() == 0) { ImGui::TextDisabled("(%s is empty)", name.c_str()); return; }
    std::string rl = "-", cl = R == 1 ? axis_label(info, 0, 1) : "values", prefix;
    if (R == 2) { rl = axis_label(info, 0, 2); cl = axis_label(info, 1, 2); }
    if (R == 3) {
        rl = axis_label(info, 1, 3); cl = axis_label(info, 2, 3);
        prefix = "[" + std::to_string(sl.slice) + ", ";
    }
    a.data = sl.data; a.rows = sl.rows; a.cols = sl.cols; a.row_label = rl; a.col_label = cl; a.index_prefix = prefix;
    // The colour range scans the whole tensor: only when the texture is re-uploaded.
    const uint64_t key = hash_str(name + (is_grad ? "g" : ""),
                                  v.s.version() * 1000003ull + uint64_t(sl.slice * 1000 + int(ui.scale_mode) + 7) * 7919ull);
    const bool up = !cache.valid || cache.key != key;
    if (up) {
        cache.range = colormap_for(t.data(), t.size(), sl.data, sl.size(), info.signed_values || is_grad, ui.scale_mode);
        cache.key = key;
        cache.valid = true;
    }
    a.cm = cache.range;
    // token axes: named (cls, reg0, dist, p12), and the selected patch's token after the tokens before it
    int before = 1;       // the tokens before the patches on this axis
    int patch = ui.patch; // the selected patch's place among the patch tokens of this stage
    if (const Trace* tr = v.s.trace(); tr && !tr->empty()) {
        const StageTable& table = tr->table();
        const RunDims& rd = table.dims();
        const bool early = before_registers(info.id.kind);
        before = rd.prefix - (early ? table.config().registers : 0);
        if (!early && rd.dropped() && patch >= 0) {  // the blocks' sequence holds the kept patches only
            auto it = std::find(rd.kept.begin(), rd.kept.end(), patch);
            patch = it == rd.kept.end() ? -1 : int(it - rd.kept.begin());
        }
        if (a.row_names.empty()) a.row_names = token_names(table, info, rl, sl.rows);
        if (a.col_names.empty()) a.col_names = token_names(table, info, cl, sl.cols);
    }
    a.highlight_row = sl.rows > 1 ? token_index(rl, patch, before) : -1;
    a.highlight_col = token_index(cl, patch, before);
    if (info.id.kind == StageKind::Input && R == 3) a.highlight_row = a.highlight_col = -1;  // pixels, not tokens
    Heatmap(v, id, cache.tex, up, a);
}

}  // namespace vit::app
