// The stage view (heatmap, explanation, statistics, LayerNorm side by side),
// the changes view and the grid of attention maps.
//
// Rules every view here keeps (issue 8): every access to the trace is guarded; a view with nothing
// to show says why, in place; heatmap cells are square (zoom for more); labels are thinned until
// none overlaps or leaves its panel.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "tensor_access.h"
#include "views.h"
#include "core/teach/teach.h"

namespace vit::app {

const char* tab_name(Tab t) {
    switch (t) {
        case Tab::Stage: return "Stage";
        case Tab::AttentionMaps: return "Attention maps";
        case Tab::Changes: return "Changes";
        case Tab::Train: return "Train";
        case Tab::LogitLens: return "Logit lens";
        case Tab::Positions: return "Positions";
        case Tab::Filters: return "Filters";
        case Tab::Distance: return "Distance";
        case Tab::Patches: return "Patches";
        case Tab::Map: return "Map";
    }
    return "?";
}

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

void DrawLabel(ImDrawList* dl, UiState& ui, const std::string& group, ImVec2 pos, ImU32 col, const std::string& text,
               const Rect& clip) {
    ImVec2 sz = ImGui::CalcTextSize(text.c_str());
    dl->AddText(pos, col, text.c_str());
    ui.texts.push_back({group, text, Rect{pos.x, pos.y, sz.x, sz.y}, clip});
}

namespace {

uint64_t hash_str(const std::string& s, uint64_t h = 1469598103934665603ull) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}
uint64_t key_of(uint64_t version, const std::string& name, int slice) {
    return hash_str(name, version * 1000003ull + uint64_t(slice + 7) * 7919ull);
}

// Range and colormap for a slice under the chosen scale mode.
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

Rect clip_rect(ImDrawList* dl) {
    ImVec2 a = dl->GetClipRectMin(), b = dl->GetClipRectMax();
    return Rect{a.x, a.y, b.x - a.x, b.y - a.y};
}

// Width the colour bar needs: the bar, a gap and its widest figure.
float colorbar_width(const Colormap& cm) {
    float w = 0;
    for (float v : {cm.vmin, 0.5f * (cm.vmin + cm.vmax), cm.vmax}) w = std::max(w, ImGui::CalcTextSize(fmt(v).c_str()).x);
    return 10 + 14 + 6 + w + 6;
}

void colorbar(Textures& tx, UiState& ui, const std::string& group, const Colormap& cm, ImVec2 p, float h) {
    if (h < 20) return;
    if (!tx.bar.valid()) {
        float ramp[256];
        for (int i = 0; i < 256; ++i) ramp[i] = 1.f - i / 255.f;  // top of the bar = vmax
        tx.bar.upload_float(ramp, 1, 256);
    }
    Colormap unit = cm;
    unit.vmin = 0; unit.vmax = 1;
    if (unit.mode == Colormap::Overlay) unit.opacity = 1;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    draw_colormapped(dl, tx.bar, p, ImVec2(p.x + 14, p.y + h), unit);
    dl->AddRect(p, ImVec2(p.x + 14, p.y + h), IM_COL32(120, 120, 120, 255));
    ImU32 tc = ImGui::GetColorU32(ImGuiCol_Text);
    const float th = ImGui::GetTextLineHeight();
    Rect clip = clip_rect(dl);
    DrawLabel(dl, ui, group, ImVec2(p.x + 20, p.y - th / 2), tc, fmt(cm.vmax), clip);
    if (h > 3 * th) DrawLabel(dl, ui, group, ImVec2(p.x + 20, p.y + h / 2 - th / 2), tc, fmt(0.5f * (cm.vmin + cm.vmax)), clip);
    DrawLabel(dl, ui, group, ImVec2(p.x + 20, p.y + h - th / 2), tc, fmt(cm.vmin), clip);
}

}  // namespace

void Heatmap(const char* id, Texture& tex, bool upload, const HeatmapArgs& a, UiState& ui, Textures& tx) {
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
    const float left = ImGui::CalcTextSize(std::to_string(a.rows - 1).c_str()).x + 8, top = th + 2;
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
    bool hovered = ui.hover && ImGui::IsItemHovered();
    bool clicked = ui.hover && ImGui::IsItemClicked(ImGuiMouseButton_Left);
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
    draw_colormapped(dl, tex, p0, p1, a.cm);
    ImU32 hl = IM_COL32(255, 80, 200, 255);
    if (a.highlight_row >= 0 && a.highlight_row < a.rows)
        dl->AddRect(ImVec2(p0.x, p0.y + a.highlight_row * ch), ImVec2(p1.x, p0.y + (a.highlight_row + 1) * ch), hl, 0, 0, 2);
    if (a.highlight_col >= 0 && a.highlight_col < a.cols)
        dl->AddRect(ImVec2(p0.x + a.highlight_col * cw, p0.y), ImVec2(p0.x + (a.highlight_col + 1) * cw, p1.y), hl, 0, 0, 2);
    if (a.mark_row >= 0 && a.mark_row < a.rows && a.mark_col >= 0 && a.mark_col < a.cols) {
        ImVec2 m0(p0.x + a.mark_col * cw, p0.y + a.mark_row * ch), m1(m0.x + cw, m0.y + ch);
        dl->AddRect(ImVec2(m0.x - 1, m0.y - 1), ImVec2(m1.x + 1, m1.y + 1), IM_COL32(0, 230, 255, 255), 0, 0, 2);
        if (a.rect_name) ui.rects[std::string(a.rect_name) + ".cell"] = Rect{m0.x, m0.y, cw, ch};
    }
    dl->PopClipRect();
    // Tick labels, thinned so that none overlaps its neighbour or leaves the canvas.
    ImU32 tc = ImGui::GetColorU32(ImGuiCol_TextDisabled);
    Rect clip{origin.x, origin.y, canvas.x, canvas.y};
    int rstep = std::max(1, int(std::ceil((th + 1) / ch)));
    for (int r = 0; r < a.rows; r += rstep) {
        float y = p0.y + r * ch + ch / 2 - th / 2;
        if (y < origin.y - 0.5f || y + th > clip1.y + 0.5f) continue;  // left of the cells: clear of the column labels
        DrawLabel(dl, ui, group + ".rows", ImVec2(origin.x, y), tc, std::to_string(r), clip);
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
        DrawLabel(dl, ui, group + ".cols", ImVec2(x, origin.y), tc, s, clip);
    }
    if (a.colorbar) {
        float bh = std::min(canvas.y - top - th, 260.f);
        colorbar(tx, ui, group + ".colorbar", a.cm, ImVec2(origin.x + canvas.x + 10, img0.y + th / 2), bh);
    }
    if (a.rect_name) {
        ui.rects[a.rect_name] = Rect{p0.x, p0.y, p1.x - p0.x, p1.y - p0.y};
        ui.numbers[std::string(a.rect_name) + ".vmin"] = a.cm.vmin;
        ui.numbers[std::string(a.rect_name) + ".vmax"] = a.cm.vmax;
        ui.numbers[std::string(a.rect_name) + ".mode"] = a.cm.mode;
        ui.numbers[std::string(a.rect_name) + ".rows"] = a.rows;
        ui.numbers[std::string(a.rect_name) + ".cols"] = a.cols;
        ui.numbers[std::string(a.rect_name) + ".cell_w"] = cw;
        ui.numbers[std::string(a.rect_name) + ".cell_h"] = ch;
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
            ImGui::TextDisabled("%s %d, %s %d", a.row_label.c_str(), r, a.col_label.c_str(), c);
            ImGui::EndTooltip();
        }
    }
    ImGui::PopID();
}

const TraceEntry* current_entry(const Session& s, const UiState& ui) {
    const Trace* t = s.trace();
    if (!t || t->size() == 0) return nullptr;
    return &t->at(size_t(std::clamp(ui.stage, 0, int(t->size()) - 1)));
}

namespace {

// Which token a selected patch is on an axis labelled like this.
int token_index(const std::string& axis, int patch) {
    if (patch < 0) return -1;
    if (axis.rfind("tokens", 0) == 0) return patch + 1;
    if (axis.rfind("patches", 0) == 0) return patch;
    return -1;
}

// The label of axis i of a rank-`rank` tensor; never reads past the list it is given.
std::string axis_label(const StageInfo& info, size_t i, size_t rank) {
    if (info.axes.size() == rank && i < info.axes.size()) return info.axes[i];
    return "axis " + std::to_string(i);
}

const Stats& cached_stats(Textures& tx, const std::string& key, const float* d, size_t n) {
    auto it = tx.stats.find(key);
    if (it == tx.stats.end()) {
        if (tx.stats.size() > 256) tx.stats.clear();  // keys carry the trace version: old ones are dead
        it = tx.stats.emplace(key, stats(d, n, 40)).first;
    }
    return it->second;
}

// Statistics of exactly what is shown (the slice) with the whole tensor's beside them.
void stats_panel(const Array& t, const Slice2D& sl, const std::string& shown_what, Textures& tx, UiState& ui,
                 const std::string& key) {
    if (t.size() == 0 || !sl.data) { ImGui::TextDisabled("(no values)"); return; }
    const bool is_slice = sl.size() != t.size();
    const Stats& shown = cached_stats(tx, key + "#slice", sl.data, sl.size());
    const Stats& all = is_slice ? cached_stats(tx, key + "#all", t.data(), t.size()) : shown;
    ImGui::TextDisabled("%s", is_slice ? shown_what.c_str() : "shown = whole tensor");
    if (ImGui::BeginTable("stats", is_slice ? 3 : 2, ImGuiTableFlags_SizingFixedFit)) {
        ImGui::TableSetupColumn("");
        ImGui::TableSetupColumn("shown");
        if (is_slice) ImGui::TableSetupColumn("whole tensor");
        ImGui::TableHeadersRow();
        auto row = [&](const char* n, float a, float b) {
            ImGui::TableNextRow();
            ImGui::TableNextColumn(); ImGui::TextUnformatted(n);
            ImGui::TableNextColumn(); ImGui::TextUnformatted(fmt(a).c_str());
            if (is_slice) { ImGui::TableNextColumn(); ImGui::TextDisabled("%s", fmt(b).c_str()); }
        };
        row("min", shown.min, all.min);
        row("max", shown.max, all.max);
        row("mean", shown.mean, all.mean);
        row("std", shown.std, all.std);
        ImGui::EndTable();
    }
    ui.numbers["stats.shown.min"] = shown.min; ui.numbers["stats.shown.max"] = shown.max;
    ui.numbers["stats.shown.mean"] = shown.mean; ui.numbers["stats.shown.std"] = shown.std;
    ui.numbers["stats.shown.n"] = double(sl.size());
    ui.numbers["stats.all.min"] = all.min; ui.numbers["stats.all.max"] = all.max;
    ui.numbers["stats.all.mean"] = all.mean; ui.numbers["stats.all.std"] = all.std;
    ui.numbers["stats.all.n"] = double(t.size());
    ImGui::TextDisabled("histogram of the shown values (%zu)", sl.size());
    ImGui::PlotHistogram("##hist", shown.hist.data(), int(shown.hist.size()), 0, nullptr, 0.f, FLT_MAX,
                         ImVec2(std::max(60.f, ImGui::GetContentRegionAvail().x), 90));
    ImGui::TextDisabled("%s  ...  %s", fmt(shown.min).c_str(), fmt(shown.max).c_str());
}

// Draw one tensor (any rank) as a heatmap of its current slice.
void tensor_heatmap(const char* id, const std::string& name, const Array& t, const StageInfo& info, Session& s,
                    UiState& ui, Textures& tx, Texture& tex, HeatmapArgs a, bool is_grad) {
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
    bool up = tx.stale(id, key_of(s.version(), name + (is_grad ? "g" : ""), sl.slice * 1000 + int(ui.scale_mode)));
    if (up || !tx.ranges.count(id))
        tx.ranges[id] = colormap_for(t.data(), t.size(), sl.data, sl.size(), info.signed_values || is_grad, ui.scale_mode);
    a.cm = tx.ranges[id];
    a.highlight_row = sl.rows > 1 ? token_index(rl, ui.patch) : -1;
    a.highlight_col = token_index(cl, ui.patch);
    if (name.find("input") == 0 && R == 3) a.highlight_row = a.highlight_col = -1;
    Heatmap(id, tex, up, a, ui, tx);
}

// The names of the classes (the model's, or "class i").
std::vector<std::string> class_labels(const Config& c, size_t n) {
    std::vector<std::string> v(n);
    for (size_t i = 0; i < n; ++i)
        v[i] = c.class_names.size() == n ? c.class_names[i] : "class " + std::to_string(i);
    return v;
}

// A horizontal bar per class, its name on the left and value on the right (all of them up to 30,
// else the 20 largest by magnitude, said so).
void class_bars(const float* v, size_t n, const Config& c, UiState& ui) {
    std::vector<std::string> names = class_labels(c, n);
    std::vector<int> idx(n);
    for (size_t i = 0; i < n; ++i) idx[i] = int(i);
    size_t shown = n;
    if (n > 30) {
        shown = 20;
        std::partial_sort(idx.begin(), idx.begin() + long(shown), idx.end(),
                          [&](int a, int b) { return std::fabs(v[a]) > std::fabs(v[b]); });
        ImGui::TextDisabled("the %zu largest of %zu classes by magnitude", shown, n);
    }
    float lo = 0, hi = 0;
    for (size_t k = 0; k < shown; ++k) { lo = std::min(lo, v[idx[k]]); hi = std::max(hi, v[idx[k]]); }
    if (hi - lo <= 0) hi = lo + 1;
    const float th = ImGui::GetTextLineHeight(), rowh = th + 4;
    float name_w = 0, val_w = 0;
    for (size_t k = 0; k < shown; ++k) {
        name_w = std::max(name_w, ImGui::CalcTextSize(names[idx[k]].c_str()).x);
        val_w = std::max(val_w, ImGui::CalcTextSize(fmt(v[idx[k]]).c_str()).x);
    }
    ImVec2 o = ImGui::GetCursorScreenPos();
    float W = ImGui::GetContentRegionAvail().x;
    float bar0 = o.x + name_w + 10, bar_w = std::max(40.f, W - name_w - val_w - 30);
    float scale = bar_w / (hi - lo), zero = bar0 + (0 - lo) * scale;
    ImGui::Dummy(ImVec2(W, rowh * float(shown) + 2));
    ImDrawList* dl = ImGui::GetWindowDrawList();
    Rect clip = clip_rect(dl);
    ImU32 tc = ImGui::GetColorU32(ImGuiCol_Text);
    for (size_t k = 0; k < shown; ++k) {
        int i = idx[k];
        float y = o.y + rowh * float(k);
        DrawLabel(dl, ui, "bars.names", ImVec2(o.x, y + 2), tc, names[size_t(i)], clip);
        float x0 = std::min(zero, zero + v[i] * scale), x1 = std::max(zero, zero + v[i] * scale);
        dl->AddRectFilled(ImVec2(x0, y + 3), ImVec2(std::max(x1, x0 + 1), y + rowh - 1),
                          v[i] >= 0 ? IM_COL32(90, 170, 230, 255) : IM_COL32(230, 120, 90, 255));
        ui.rects["bar." + std::to_string(i)] = Rect{x0, y + 3, x1 - x0, rowh - 4};
        DrawLabel(dl, ui, "bars.values", ImVec2(bar0 + bar_w + 8, y + 2), tc, fmt(v[i]), clip);
    }
    dl->AddLine(ImVec2(zero, o.y), ImVec2(zero, o.y + rowh * float(shown)), IM_COL32(200, 200, 200, 200));
    ui.numbers["bars.zero_x"] = zero;
    ui.numbers["bars.px_per_unit"] = scale;
    ui.numbers["bars.shown"] = double(shown);
}

// Why a stage has no recorded gradient (the backward pass's own structure, said plainly).
std::string no_grad_reason(const std::string& rest) {
    auto ends = [&](const char* s) {
        std::string e(s);
        return rest.size() >= e.size() && rest.compare(rest.size() - e.size(), e.size(), e) == 0;
    };
    if (ends(".mean") || ends(".std"))
        return "the backward pass goes through LayerNorm in one step (d normalized -> d x), so the per-token mean and "
               "std get no gradient of their own";
    if (rest == "probs")
        return "the gradient is of a logit, before the softmax: probs is computed from the logits, so no gradient "
               "flows into it";
    return "the backward pass does not record this stage";
}

// The predicted class of a trace (the class whose logit the gradients are of), -1 if unknown.
int predicted_class(const Trace& t) {
    if (!t.has("logits")) return -1;
    const Array& l = t.get("logits");
    if (l.size() == 0) return -1;
    return int(std::max_element(l.data(), l.data() + l.size()) - l.data());
}

void draw_grads_missing(Session& s, UiState& ui, const std::string& why) {
    ImGui::PushTextWrapPos(ImGui::GetContentRegionAvail().x);
    ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s.", why.c_str());
    ImGui::PopTextWrapPos();
    ui.strings["stage.message"] = why;
    if (s.can_compute_grads()) {
        if (ImGui::Button("Compute gradients for this model")) s.set_grad_mode(GradMode::On);
        ui.rects["compute_grads"] = Rect{ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y, ImGui::GetItemRectSize().x,
                                         ImGui::GetItemRectSize().y};
        ImGui::TextDisabled("(one backward pass per forward pass from now on; slower for large models)");
    }
}

}  // namespace

void DrawStageView(Session& s, UiState& ui, Textures& tx) {
    const Trace* trace = s.trace();
    const TraceEntry* e = current_entry(s, ui);
    if (!e) {
        std::string why = !s.has_image() ? "No image is loaded, so the model has not run: load one with the toolbar "
                                           "(or drop a file on the window)."
                        : s.busy() ? "Running the model..." : "No trace yet.";
        ImGui::TextDisabled("%s", why.c_str());
        ui.strings["stage.message"] = why;
        return;
    }
    ui.stage = trace->index_of(e->name);
    const Config& c = s.shown_config();
    const Trace* grads = s.result().grads.get();
    const std::string name = e->name;
    std::string rest;
    stage_layer(name, &rest);
    const std::string gname = name + ".grad";
    const bool grad_ok = grads && grads->has(gname);
    const bool showing_grad = ui.show_grad && grad_ok;
    const Array* t = showing_grad ? &grads->get(gname) : &e->tensor;
    StageInfo info = stage_info(name, c, s.options());  // the value's description; a gradient has the value's axes
    int pred = predicted_class(*trace);
    if (showing_grad) {
        std::string cls = pred >= 0 ? class_labels(c, size_t(c.classes))[size_t(std::min(pred, c.classes - 1))] : "?";
        info.title = "Gradient: d logit[" + std::to_string(pred) + "] / d " + rest;
        info.what = "How much the predicted class's logit (" + std::to_string(pred) + ", " + cls +
                    ") changes per unit change of each value of " + name + ": one backward pass from that logit. "
                    "Positive (red) raises it, negative (blue) lowers it.";
        info.torch = "logits[0, " + std::to_string(pred) + "].backward();  " + rest + ".grad   # after " + rest + ".retain_grad()";
        info.signed_values = true;
        info.from.clear();
    }
    if (ImGui::ArrowButton("prev", ImGuiDir_Left)) ui.stage = std::max(0, ui.stage - 1);
    if (ui.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("previous stage (Left / Up)");
    ImGui::SameLine();
    if (ImGui::ArrowButton("next", ImGuiDir_Right)) ui.stage = std::min(int(trace->size()) - 1, ui.stage + 1);
    if (ui.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("next stage (Right / Down)");
    ImGui::SameLine();
    ImGui::TextDisabled("%d/%zu", ui.stage + 1, trace->size());
    ImGui::SameLine();
    if (name == "patches" || name == "input") {  // the same numbers as pictures (views_distance.cpp)
        if (ImGui::SmallButton("As pictures")) ui.tab = Tab::Patches;
        if (ui.hover && ImGui::IsItemHovered())
            ImGui::SetTooltip("the image cut into its tiles, and each row of patches beside its tile (key 9, --tab 8)");
        ImGui::SameLine();
    }
    ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(255, 214, 120, 255));
    ImGui::Text("%s", info.title.c_str());
    ImGui::PopStyleColor();
    ImGui::SameLine();
    std::string ax;
    for (size_t i = 0; i < info.axes.size(); ++i) ax += (i ? " x " : "") + info.axes[i];
    ImGui::TextDisabled("  %s   shape %s = %s", showing_grad ? gname.c_str() : name.c_str(), shape_text(*t).c_str(), ax.c_str());
    if (!info.from.empty()) {  // shapes in -> out
        std::string in;
        for (auto& f : info.from) {
            int fi = trace->index_of(f);
            if (fi >= 0) in += (in.empty() ? "" : " + ") + f + " " + shape_text(trace->at(size_t(fi)).tensor);
        }
        if (!in.empty()) ImGui::TextDisabled("in: %s  ->  out: %s", in.c_str(), shape_text(*t).c_str());
    }
    ImGui::PushTextWrapPos(ImGui::GetContentRegionAvail().x);
    ImGui::TextUnformatted(info.what.c_str());
    ImGui::PopTextWrapPos();
    ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(140, 220, 160, 255));
    ImGui::Text(">>> %s", info.torch.c_str());
    ImGui::PopStyleColor();
    ui.strings["stage.title"] = info.title;
    ui.strings["stage.torch"] = info.torch;
    // slice and scale controls
    if (rank(*t) == 3) {
        int S = int(extent(*t, 0));
        int& v = info.per_head ? ui.head : ui.channel;
        v = std::clamp(v, 0, S - 1);
        ImGui::SetNextItemWidth(160);
        ImGui::SliderInt(info.per_head ? "head (H / Shift+H)" : "channel", &v, 0, S - 1);
        ImGui::SameLine();
    }
    ImGui::SetNextItemWidth(130);
    const char* modes[] = {"per tensor", "per slice", "symmetric"};
    int mode = int(ui.scale_mode);
    if (ImGui::Combo("scale", &mode, modes, 3)) ui.scale_mode = ScaleMode(mode);
    ImGui::SameLine();
    ImGui::Checkbox("gradient (G)", &ui.show_grad);
    ImGui::SameLine();
    ImGui::TextDisabled("  zoom %.0f%%  (wheel; drag to pan; 0 resets)", ui.zoom * 100);
    ImGui::Separator();
    ui.numbers["stage.showing_grad"] = showing_grad;

    if (ui.show_grad && !grad_ok) {
        // Say why, in place; never touch data that is not there.
        if (!grads) {
            std::string why = s.result().no_grads_why.empty() ? s.grads_unavailable_reason() : s.result().no_grads_why;
            if (why.empty()) why = "the gradients of this model are being computed";
            draw_grads_missing(s, ui, why);
        } else {
            std::string why = "no gradient is recorded for this stage: " + no_grad_reason(rest);
            ImGui::PushTextWrapPos(ImGui::GetContentRegionAvail().x);
            ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s.", why.c_str());
            ImGui::PopTextWrapPos();
            ui.strings["stage.message"] = why;
        }
        return;
    }

    bool is_ln = rest.rfind("ln", 0) == 0 && !showing_grad;
    const std::string key = std::to_string(s.version()) + name + (showing_grad ? "g" : "");
    if (is_ln) {
        // mean, std, normalized and out side by side, rows aligned: one cell size for all four
        std::string base = name.substr(0, name.rfind('.'));
        const char* parts[4] = {".mean", ".std", ".normalized", ".out"};
        const Array* pt[4] = {};
        for (int i = 0; i < 4; ++i) {
            int pi = trace->index_of(base + parts[i]);
            pt[i] = pi >= 0 ? &trace->at(size_t(pi)).tensor : nullptr;
        }
        float total = ImGui::GetContentRegionAvail().x, h = ImGui::GetContentRegionAvail().y - 210;
        int rows = 0, cols = 1;
        for (int i = 2; i < 4; ++i)
            if (pt[i] && rank(*pt[i]) == 2) { rows = int(extent(*pt[i], 0)); cols = std::max(cols, int(extent(*pt[i], 1))); }
        const float th = ImGui::GetTextLineHeight(), pad = 2 * ImGui::GetStyle().ItemSpacing.x + 8;
        const float left = ImGui::CalcTextSize(std::to_string(std::max(rows - 1, 0)).c_str()).x + 8;
        // Each panel's width is what it needs: row labels, its cells, its colour bar (measured from
        // the range it will show); the two wide panels share what is left, with one cell size.
        float need[4], fixed_w = 0;
        for (int i = 0; i < 4; ++i) {
            Colormap cm;
            if (pt[i]) cm = colormap_for(pt[i]->data(), pt[i]->size(), pt[i]->data(), pt[i]->size(),
                                         stage_info(base + parts[i], c, s.options()).signed_values, ui.scale_mode);
            need[i] = left + colorbar_width(cm) + pad + (i < 2 ? 24.f : 0.f);
            fixed_w += need[i] + ImGui::GetStyle().ItemSpacing.x;
        }
        float cell = rows > 0 ? std::max(0.05f, std::min((total - fixed_w) / (2.f * cols), (h - 3 * th - 8) / rows)) : 1.f;
        float widths[4] = {need[0], need[1], need[2] + cols * cell, need[3] + cols * cell};
        for (int i = 0; i < 4; ++i) {
            if (i) ImGui::SameLine();
            float w = widths[i];
            ImGui::BeginGroup();
            std::string pn = base + parts[i];
            bool cur = pn == name;
            ImGui::TextColored(cur ? ImVec4(1, 0.84f, 0.47f, 1) : ImVec4(0.8f, 0.8f, 0.8f, 1), "%s", parts[i] + 1);
            ImGui::BeginChild(pn.c_str(), ImVec2(w, h), false, ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
            static const char* rect_names[4] = {"ln.mean", "ln.std", "ln.normalized", "ln.out"};
            HeatmapArgs a;
            a.max_w = w; a.max_h = h; a.colorbar = true; a.zoomable = false; a.cell = cell;
            a.rect_name = cur ? "stage" : rect_names[i];
            int crow = -1, ccol = -1;
            if (i >= 2 && cell_math_supported(pn)) {  // normalized, out: click a cell for its math
                a.clicked_row = &crow; a.clicked_col = &ccol;
                if (cur) { a.mark_row = ui.cell_r; a.mark_col = ui.cell_c; }
            }
            if (!pt[i]) {
                ImGui::TextDisabled("(%s is not in this trace)", pn.c_str());
            } else if (rank(*pt[i]) == 1) {  // a column per token
                Array col = make_tensor({pt[i]->size(), 1});
                std::copy_n(pt[i]->data(), pt[i]->size(), col.data());
                StageInfo ci = stage_info(pn, c, s.options());
                ci.axes = {"tokens", pn.substr(pn.rfind('.') + 1)};
                a.strip_w = 24;
                tensor_heatmap(("ln" + std::to_string(i)).c_str(), pn, col, ci, s, ui, tx, tx.ln[i], a, false);
            } else {
                tensor_heatmap(("ln" + std::to_string(i)).c_str(), pn, *pt[i], stage_info(pn, c, s.options()), s, ui, tx, tx.ln[i], a, false);
            }
            if (cur && ui.rects.count("stage")) ui.rects[rect_names[i]] = ui.rects["stage"];
            if (crow >= 0 && ccol >= 0) {
                ui.cell_r = crow; ui.cell_c = ccol;
                int idx = trace->index_of(pn);
                if (idx >= 0) ui.stage = idx;
            }
            ImGui::EndChild();
            ImGui::EndGroup();
        }
        ImGui::Separator();
        ImGui::BeginChild("lnstats", ImVec2(0, 0));
        ImGui::Columns(2, nullptr, false);
        stats_panel(*t, slice2d(*t, 0), "", tx, ui, key);
        ImGui::NextColumn();
        ImGui::TextWrapped("Toggle elementwise_affine (A) and unbiased std (U) in the toolbar: without affine, "
                           "out == normalized; with N-1, normalized shrinks by sqrt((D-1)/D). The Changes tab "
                           "shows the effect on every later stage.");
        ImGui::Columns(1);
        ImGui::EndChild();
        return;
    }
    float stats_w = 270;
    ImGui::BeginChild("heat", ImVec2(ImGui::GetContentRegionAvail().x - stats_w, 0), false,
                      ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
    const bool classes_axis = rank(*t) == 1 && !info.axes.empty() && info.axes.back() == "classes" &&
                              int(t->size()) == c.classes;
    HeatmapArgs a;
    a.colorbar = true; a.rect_name = "stage"; a.zoomable = true;
    if (rank(*t) == 1) a.max_h = 120;
    if (classes_axis) a.col_names = class_labels(c, t->size());
    // A row of an attention pattern (or scores) is one query token: clicking it shows that token's
    // attention over the image (the Query overlay, vit::attention_from) for this layer and head.
    const bool query_rows = e->layer >= 0 && (rest == "attn.pattern" || rest == "attn.scores") && rank(*t) == 3;
    int clicked_row = -1, clicked_col = -1;
    if (query_rows) a.clicked_row = &clicked_row;
    const bool math_cells = !showing_grad && cell_math_supported(name);  // click a cell: its math (views_teach.cpp)
    if (math_cells) {
        a.clicked_row = &clicked_row; a.clicked_col = &clicked_col;
        a.mark_row = rank(*t) == 1 ? 0 : ui.cell_r; a.mark_col = ui.cell_c;
    }
    if (query_rows) ImGui::TextDisabled("click a row: that query token's attention over the image (overlay \"query\")");
    tensor_heatmap("stage", name, *t, info, s, ui, tx, tx.stage, a, showing_grad);
    if (math_cells && clicked_row >= 0 && clicked_col >= 0) { ui.cell_r = clicked_row; ui.cell_c = clicked_col; }
    if (query_rows && clicked_row >= 0) {
        ui.query = clicked_row;
        ui.overlay = Overlay::Query;
        ui.overlay_layer = e->layer;
        ui.overlay_head = ui.head;
    }
    if (classes_axis) {
        ImGui::Separator();
        class_bars(t->data(), t->size(), c, ui);
    } else if (rank(*t) == 1) {  // also as bars
        ImGui::PlotHistogram("##bars", t->data(), int(t->size()), 0, nullptr, FLT_MAX, FLT_MAX, ImVec2(-1, 120));
    }
    ImGui::EndChild();
    ImGui::SameLine();
    ImGui::BeginChild("stats", ImVec2(0, 0), true);
    ImGui::TextDisabled("statistics");
    Slice2D sl = slice2d(*t, rank(*t) == 3 ? (info.per_head ? ui.head : ui.channel) : 0);
    std::string what = rank(*t) == 3 ? std::string(info.per_head ? "shown = head " : "shown = channel ") +
                                           std::to_string(sl.slice) + " of " + std::to_string(sl.slices)
                                     : "";
    stats_panel(*t, sl, what, tx, ui, key + "#" + std::to_string(sl.slice));
    if (ui.patch >= 0) ImGui::TextColored(ImVec4(1, 0.3f, 0.8f, 1), "patch %d = token %d highlighted", ui.patch, ui.patch + 1);
    ImGui::EndChild();
}

void DrawChanges(Session& s, UiState& ui, Textures& tx) {
    const Result& r = s.result();
    if (!r.trace || !r.base) {
        ImGui::TextDisabled("%s", !s.has_image() ? "No image is loaded, so there is nothing to compare." : "Running the model...");
        return;
    }
    if (s.options() == Options{}) {
        ImGui::TextWrapped("The options are at their defaults (LayerNorm with elementwise_affine, biased std). "
                           "Toggle them in the toolbar (keys A and U) and this view shows, stage by stage, "
                           "how far each tensor moved from the default run.");
        return;
    }
    if (tx.stale("changes", s.version())) tx.changes = trace_changes(*r.base, *r.trace);
    const std::vector<StageChange>& ch = tx.changes;
    ImGui::Text("Change from the default options, per stage: ||now - default|| / ||default||");
    ImGui::BeginChild("list", ImVec2(420, 0), true);
    for (auto& c : ch) {
        double rel = c.base_norm > 0 ? c.diff_norm / c.base_norm : (c.diff_norm > 0 ? 1 : 0);
        int idx = s.trace()->index_of(c.name);
        bool sel = idx == ui.stage;
        ImGui::PushID(c.name.c_str());
        if (ImGui::Selectable("##s", sel, 0, ImVec2(0, 18)) && idx >= 0) ui.stage = idx;
        ImGui::SameLine(4);
        ImGui::ProgressBar(float(std::min(1.0, rel)), ImVec2(110, 16), "");
        ImGui::SameLine();
        ImGui::Text("%6.3f  %s", rel, c.name.c_str());
        ImGui::PopID();
    }
    ImGui::EndChild();
    ImGui::SameLine();
    ImGui::BeginChild("diffmap", ImVec2(0, 0), false, ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
    const TraceEntry* e = current_entry(s, ui);
    int bi = e ? r.base->index_of(e->name) : -1;
    if (e && bi >= 0 && same_shape(r.base->at(size_t(bi)).tensor, e->tensor)) {
        if (tx.stale("diffvals", key_of(s.version(), e->name, 0))) {
            const Array& b = r.base->at(size_t(bi)).tensor;
            tx.diff_vals = difference(e->tensor, b);
        }
        const Array& d = tx.diff_vals;
        ImGui::Text("now - default: %s", e->name.c_str());
        StageInfo info = stage_info(e->name, s.shown_config(), s.options());
        info.signed_values = true;
        ScaleMode saved = ui.scale_mode;
        ui.scale_mode = ScaleMode::Symmetric;
        HeatmapArgs a;
        a.colorbar = true; a.rect_name = "diff"; a.zoomable = false;
        if (rank(d) == 1) a.max_h = 120;
        tensor_heatmap("diff", e->name + "#diff", d, info, s, ui, tx, tx.diff, a, false);
        ui.scale_mode = saved;
    } else if (e) {
        std::string why = bi < 0 ? e->name + " is not in the default-options run (pooling changes the stage order)"
                                 : e->name + " has a different shape in the default-options run";
        ImGui::TextDisabled("No difference map: %s.", why.c_str());
        ui.strings["changes.message"] = why;
    }
    ImGui::EndChild();
}

void DrawAttentionGrid(Session& s, UiState& ui, Textures& tx) {
    const Trace* t = s.trace();
    if (!t) {
        ImGui::TextDisabled("%s", !s.has_image() ? "No image is loaded, so the model has not run." : "Running the model...");
        return;
    }
    const Config& c = s.shown_config();
    int L = c.depth, H = c.heads, G = c.grid();
    if (L == 0) { ImGui::TextDisabled("This model has no blocks, so there is no attention to show."); return; }
    for (int l = 0; l < L; ++l)
        if (!t->has("blocks." + std::to_string(l) + ".attn.pattern")) {
            ImGui::TextDisabled("No attention pattern for block %d in this trace.", l);
            return;
        }
    ImGui::TextWrapped("The cls token's attention to every patch: one map per layer (rows) and head (columns), "
                       "last column the mean over heads. Click a map to show it over the image and open its pattern.");
    size_t need = size_t(L) * (H + 1);
    if (tx.grid.size() != need) { tx.grid.clear(); tx.grid.resize(need); tx.grid_range.assign(need, {0.f, 1.f}); tx.keys.erase("grid"); }
    bool up = tx.stale("grid", s.version());
    const float label_w = ImGui::CalcTextSize(("L" + std::to_string(L - 1)).c_str()).x + 10;
    const float gap = ImGui::GetStyle().ItemSpacing.x;
    float cell = std::clamp((ImGui::GetContentRegionAvail().x - label_w - 20) / (H + 1) - gap, 24.f, 96.f);
    ImGui::BeginChild("grid", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
    const float x0 = ImGui::GetCursorPosX();
    for (int l = 0; l < L; ++l) {
        // every row starts at the same x whatever the width of its label ("L9" vs "L10")
        float y = ImGui::GetCursorPosY();
        ImGui::SetCursorPosY(y + cell / 2 - ImGui::GetTextLineHeight() / 2);
        ImGui::Text("L%d", l);
        ImGui::SetCursorPosY(y);
        for (int h = 0; h <= H; ++h) {
            ImGui::SameLine(x0 + label_w + h * (cell + gap));
            int head = h == H ? -1 : h;
            size_t gi = size_t(l) * (H + 1) + h;
            Texture& tex = tx.grid[gi];
            if (up) {
                std::vector<float> a = cls_attention(*t, l, head);
                if (a.size() == size_t(G) * G) {
                    tex.upload_float(a.data(), G, G);
                    auto r = std::minmax_element(a.begin(), a.end());
                    tx.grid_range[gi] = {*r.first, *r.second};
                }
            }
            Colormap cm;
            cm.vmin = tx.grid_range[gi].first;
            cm.vmax = std::max(tx.grid_range[gi].second, cm.vmin + 1e-9f);
            ImVec2 p = ImGui::GetCursorScreenPos();
            ImGui::PushID(l * 1000 + h);
            if (ImGui::InvisibleButton("m", ImVec2(cell, cell))) {
                ui.overlay = Overlay::Cls; ui.overlay_layer = l; ui.overlay_head = head;
                int idx = t->index_of("blocks." + std::to_string(l) + ".attn.pattern");
                if (idx >= 0) ui.stage = idx;
                if (head >= 0) ui.head = head;
                ui.tab = Tab::Stage;
            }
            if (ui.hover && ImGui::IsItemHovered())
                ImGui::SetTooltip("layer %d, %s: max %.3f", l, head < 0 ? "mean of heads" : ("head " + std::to_string(head)).c_str(),
                                  tx.grid_range[gi].second);
            ImGui::PopID();
            draw_colormapped(ImGui::GetWindowDrawList(), tex, p, ImVec2(p.x + cell, p.y + cell), cm);
            ui.rects["grid." + std::to_string(l) + "." + (head < 0 ? std::string("mean") : std::to_string(head))] =
                Rect{p.x, p.y, cell, cell};
            bool sel = ui.overlay == Overlay::Cls && (ui.overlay_layer < 0 ? L - 1 : ui.overlay_layer) == l && ui.overlay_head == head;
            ImGui::GetWindowDrawList()->AddRect(p, ImVec2(p.x + cell, p.y + cell), sel ? IM_COL32(255, 80, 200, 255) : IM_COL32(70, 70, 70, 255), 0, 0, sel ? 3 : 1);
        }
    }
    ImGui::Text(" ");
    for (int h = 0; h <= H; ++h) {
        ImGui::SameLine(x0 + label_w + h * (cell + gap));
        ImGui::TextDisabled(h == H ? "mean" : "h%d", h);
    }
    ImGui::EndChild();
}

}  // namespace vit::app
