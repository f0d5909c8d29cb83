// The stage view (heatmap, explanation, statistics, LayerNorm side by side),
// the changes view and the grid of attention maps.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "views.h"

#include <xtensor/xstrided_view.hpp>

namespace vit::app {

namespace {

uint64_t hash_str(const std::string& s, uint64_t h = 1469598103934665603ull) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}
uint64_t key_of(uint64_t version, const std::string& name, int slice) {
    return hash_str(name, version * 1000003ull + uint64_t(slice + 7) * 7919ull);
}

// Range and colormap for a slice under the chosen scale mode.
Colormap colormap_for(const float* all, size_t n_all, const float* slice, size_t n_slice, bool signed_values, int mode) {
    Colormap cm;
    const float* d = mode == 1 ? slice : all;
    size_t n = mode == 1 ? n_slice : n_all;
    float lo = d[0], hi = d[0];
    for (size_t i = 1; i < n; ++i) { lo = std::min(lo, d[i]); hi = std::max(hi, d[i]); }
    bool diverging = signed_values && lo < 0 && hi > 0;
    if (mode == 2 || diverging) {
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

void colorbar(Textures& tx, const Colormap& cm, ImVec2 p, float h) {
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
    dl->AddText(ImVec2(p.x + 18, p.y - 2), tc, fmt(cm.vmax).c_str());
    dl->AddText(ImVec2(p.x + 18, p.y + h / 2 - 7), tc, fmt(0.5f * (cm.vmin + cm.vmax)).c_str());
    dl->AddText(ImVec2(p.x + 18, p.y + h - 14), tc, fmt(cm.vmin).c_str());
}

}  // namespace

void Heatmap(const char* id, Texture& tex, bool upload, const HeatmapArgs& a, UiState& ui, Textures& tx) {
    if (a.rows <= 0 || a.cols <= 0) return;
    if (upload) tex.upload_float(a.data, a.cols, a.rows);
    ImGui::PushID(id);
    ImVec2 avail = ImGui::GetContentRegionAvail();
    float W = a.max_w > 0 ? std::min(a.max_w, avail.x) : avail.x;
    float H = a.max_h > 0 ? std::min(a.max_h, avail.y) : avail.y;
    const float bar_w = a.colorbar ? 80.f : 0.f, left = 40.f, top = 34.f;
    // Axis titles: what each axis is and its size.
    if (W > 360) ImGui::TextDisabled("rows: %s (%d)   columns: %s (%d)", a.row_label.c_str(), a.rows, a.col_label.c_str(), a.cols);
    else ImGui::TextDisabled("%s (%d) x %s (%d)", a.row_label.c_str(), a.rows, a.col_label.c_str(), a.cols);
    // Cells fill the panel, at most 3:1 out of square.
    float cwf = (W - bar_w - left) / a.cols, chf = (H - top) / a.rows;
    cwf = std::min(cwf, 3 * chf);
    chf = std::min(chf, 3 * cwf);
    bool zoom = a.zoomable;
    float z = zoom ? ui.zoom : 1.f;
    float cw = std::max(cwf, 0.05f) * z, ch = std::max(chf, 0.05f) * z;
    if (a.rows == 1) ch = std::min(std::max(ch, 24.f), 48.f);  // a vector: a readable strip
    ImVec2 canvas(std::min(W - bar_w, left + a.cols * cw), std::min(H - 20, 16 + a.rows * ch));
    ImVec2 origin = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("canvas", ImVec2(std::max(canvas.x, 1.f), std::max(canvas.y, 1.f)));
    bool hovered = ImGui::IsItemHovered();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    ImVec2 img0(origin.x + left, origin.y + 16);
    ImVec2 clip1(origin.x + canvas.x, origin.y + canvas.y);
    // pan (drag) and zoom (wheel) for large tensors
    if (zoom && hovered) {
        float wheel = ImGui::GetIO().MouseWheel;
        if (wheel != 0) {
            float nz = std::clamp(ui.zoom * (wheel > 0 ? 1.25f : 0.8f), 1.f, 64.f);
            ImVec2 m = ImGui::GetIO().MousePos;
            // keep the cell under the mouse fixed
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
    dl->PopClipRect();
    // tick labels
    ImU32 tc = ImGui::GetColorU32(ImGuiCol_TextDisabled);
    int rstep = std::max(1, int(std::ceil(16.f / ch))), cstep = std::max(1, int(std::ceil(30.f / cw)));
    for (int r = 0; r < a.rows; r += rstep) {
        float y = p0.y + r * ch + ch / 2 - 7;
        if (y < img0.y - 2 || y > clip1.y - 12) continue;
        dl->AddText(ImVec2(origin.x, y), tc, std::to_string(r).c_str());
    }
    for (int c = 0; c < a.cols; c += cstep) {
        float x = p0.x + c * cw + cw / 2 - 4;
        if (x < img0.x - 2 || x > clip1.x - 10) continue;
        dl->AddText(ImVec2(x, origin.y), tc, std::to_string(c).c_str());
    }
    if (a.colorbar) colorbar(tx, a.cm, ImVec2(origin.x + canvas.x + 10, img0.y), std::min(canvas.y - 16, 260.f));
    if (a.rect_name) {
        ui.rects[a.rect_name] = Rect{p0.x, p0.y, p1.x - p0.x, p1.y - p0.y};
        ui.numbers[std::string(a.rect_name) + ".vmin"] = a.cm.vmin;
        ui.numbers[std::string(a.rect_name) + ".vmax"] = a.cm.vmax;
        ui.numbers[std::string(a.rect_name) + ".mode"] = a.cm.mode;
        ui.numbers[std::string(a.rect_name) + ".rows"] = a.rows;
        ui.numbers[std::string(a.rect_name) + ".cols"] = a.cols;
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

void stats_panel(const float* d, size_t n, Textures& tx, const std::string& key) {
    auto it = tx.stats.find(key);
    if (it == tx.stats.end()) {
        if (tx.stats.size() > 256) tx.stats.clear();  // keys carry the trace version: old ones are dead
        it = tx.stats.emplace(key, stats(d, n, 40)).first;
    }
    const Stats& st = it->second;
    ImGui::Text("min  %s", fmt(st.min).c_str());
    ImGui::Text("max  %s", fmt(st.max).c_str());
    ImGui::Text("mean %s", fmt(st.mean).c_str());
    ImGui::Text("std  %s", fmt(st.std).c_str());
    ImGui::TextDisabled("histogram (%zu values)", n);
    ImGui::PlotHistogram("##hist", st.hist.data(), int(st.hist.size()), 0, nullptr, 0.f, FLT_MAX,
                         ImVec2(std::max(60.f, ImGui::GetContentRegionAvail().x), 90));
    ImGui::TextDisabled("%s  ...  %s", fmt(st.min).c_str(), fmt(st.max).c_str());
}

// Draw one tensor (any rank) as a heatmap of its current slice.
void tensor_heatmap(const char* id, const std::string& name, const Array& t, const StageInfo& info, Session& s,
                    UiState& ui, Textures& tx, Texture& tex, float max_w, float max_h, bool colorbar,
                    const char* rect_name, bool zoomable) {
    int rows = 1, cols = int(t.size()), slice = 0;
    const float* d = t.data();
    std::string rl = "-", cl = info.axes.empty() ? "values" : info.axes.back(), prefix;
    if (t.dimension() == 2) {
        rows = int(t.shape(0)); cols = int(t.shape(1));
        rl = info.axes.size() > 0 ? info.axes[0] : "rows";
        cl = info.axes.size() > 1 ? info.axes[1] : "columns";
    }
    if (t.dimension() == 3) {
        int S = int(t.shape(0));
        slice = info.per_head ? std::clamp(ui.head, 0, S - 1) : std::clamp(ui.channel, 0, S - 1);
        rows = int(t.shape(1)); cols = int(t.shape(2));
        d = t.data() + size_t(slice) * rows * cols;
        rl = info.axes.size() > 1 ? info.axes[1] : "rows";
        cl = info.axes.size() > 2 ? info.axes[2] : "columns";
        prefix = "[" + std::to_string(slice) + ", ";
    }
    HeatmapArgs a;
    a.data = d; a.rows = rows; a.cols = cols; a.row_label = rl; a.col_label = cl; a.index_prefix = prefix;
    // The colour range scans the whole tensor: only when the texture is re-uploaded.
    bool up = tx.stale(id, key_of(s.version(), name + (ui.show_grad ? "g" : ""), slice * 1000 + ui.scale_mode));
    if (up || !tx.ranges.count(id))
        tx.ranges[id] = colormap_for(t.data(), t.size(), d, size_t(rows) * cols, info.signed_values, ui.scale_mode);
    a.cm = tx.ranges[id];
    a.highlight_row = rows > 1 ? token_index(rl, ui.patch) : -1;
    a.highlight_col = token_index(cl, ui.patch);
    if (name.find("input") == 0 && t.dimension() == 3) a.highlight_row = a.highlight_col = -1;
    a.max_w = max_w; a.max_h = max_h; a.colorbar = colorbar; a.rect_name = rect_name; a.zoomable = zoomable;
    Heatmap(id, tex, up, a, ui, tx);
}

}  // namespace

void DrawStageView(Session& s, UiState& ui, Textures& tx) {
    const TraceEntry* e = current_entry(s, ui);
    if (!e) { ImGui::TextDisabled("Running the model..."); return; }
    const Config& c = s.config();
    const Trace* grads = s.result().grads.get();
    std::string name = e->name;
    const Array* t = &e->tensor;
    bool grad_ok = grads && grads->has(name + ".grad");
    if (ui.show_grad && grad_ok) { t = &grads->get(name + ".grad"); }
    StageInfo info = stage_info(ui.show_grad && grad_ok ? name + ".grad" : name, c, s.options());
    if (ImGui::ArrowButton("prev", ImGuiDir_Left)) ui.stage = std::max(0, ui.stage - 1);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("previous stage (Left / Up)");
    ImGui::SameLine();
    if (ImGui::ArrowButton("next", ImGuiDir_Right)) ui.stage = std::min(int(s.trace()->size()) - 1, ui.stage + 1);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("next stage (Right / Down)");
    ImGui::SameLine();
    ImGui::TextDisabled("%d/%zu", ui.stage + 1, s.trace()->size());
    ImGui::SameLine();
    ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(255, 214, 120, 255));
    ImGui::Text("%s", info.title.c_str());
    ImGui::PopStyleColor();
    ImGui::SameLine();
    ImGui::TextDisabled("  %s   shape %s = %s", name.c_str(), shape_str_of(*t).c_str(), [&] {
        std::string ax;
        for (size_t i = 0; i < info.axes.size(); ++i) ax += (i ? " x " : "") + info.axes[i];
        return ax;
    }().c_str());
    if (!info.from.empty()) {  // shapes in -> out
        std::string in;
        for (auto& f : info.from) {
            int fi = s.trace()->index_of(f);
            if (fi >= 0) in += (in.empty() ? "" : " + ") + f + " " + shape_str_of(s.trace()->at(size_t(fi)).tensor);
        }
        ImGui::TextDisabled("in: %s  ->  out: %s", in.c_str(), shape_str_of(*t).c_str());
    }
    ImGui::PushTextWrapPos(ImGui::GetContentRegionAvail().x);
    ImGui::TextUnformatted(info.what.c_str());
    ImGui::PopTextWrapPos();
    ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(140, 220, 160, 255));
    ImGui::Text(">>> %s", info.torch.c_str());
    ImGui::PopStyleColor();
    // slice and scale controls
    if (t->dimension() == 3) {
        int S = int(t->shape(0));
        int& v = info.per_head ? ui.head : ui.channel;
        v = std::clamp(v, 0, S - 1);
        ImGui::SetNextItemWidth(160);
        ImGui::SliderInt(info.per_head ? "head (H / Shift+H)" : "channel", &v, 0, S - 1);
        ImGui::SameLine();
    }
    ImGui::SetNextItemWidth(130);
    const char* modes[] = {"per tensor", "per slice", "symmetric"};
    ImGui::Combo("scale", &ui.scale_mode, modes, 3);
    ImGui::SameLine();
    if (grad_ok) ImGui::Checkbox("gradient (G)", &ui.show_grad);
    else ImGui::TextDisabled("(no gradient for this stage)");
    ImGui::SameLine();
    ImGui::TextDisabled("  zoom %.0f%%  (wheel; drag to pan; 0 resets)", ui.zoom * 100);
    ImGui::Separator();

    std::string rest;
    stage_layer(name, &rest);
    bool is_ln = rest.rfind("ln", 0) == 0 && !ui.show_grad;
    if (is_ln) {
        // mean, std, normalized and out side by side
        std::string base = name.substr(0, name.rfind('.'));
        const char* parts[4] = {".mean", ".std", ".normalized", ".out"};
        // mean and std are one number per token: narrow strips; normalized and out share the rest
        float total = ImGui::GetContentRegionAvail().x, h = ImGui::GetContentRegionAvail().y - 210;
        float strip = 150, wide = (total - 2 * strip) / 2 - 12;
        for (int i = 0; i < 4; ++i) {
            if (i) ImGui::SameLine();
            float w = i < 2 ? strip : wide;
            ImGui::BeginGroup();
            std::string pn = base + parts[i];
            const Array& pt = s.trace()->get(pn);
            StageInfo pi = stage_info(pn, c, s.options());
            bool cur = pn == name;
            ImGui::TextColored(cur ? ImVec4(1, 0.84f, 0.47f, 1) : ImVec4(0.8f, 0.8f, 0.8f, 1), "%s", parts[i] + 1);
            ImGui::BeginChild(pn.c_str(), ImVec2(w, h), false, ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
            if (pt.dimension() == 1) {  // a column per token
                Array col = xt::reshape_view(pt, std::vector<size_t>{pt.size(), 1});
                StageInfo ci = pi;
                ci.axes = {"tokens", pn.substr(pn.rfind('.') + 1)};
                tensor_heatmap(("ln" + std::to_string(i)).c_str(), pn, col, ci, s, ui, tx, tx.ln[i], w, h, true,
                               cur ? "stage" : nullptr, false);
            } else {
                tensor_heatmap(("ln" + std::to_string(i)).c_str(), pn, pt, pi, s, ui, tx, tx.ln[i], w, h, true,
                               cur ? "stage" : (i == 3 ? "ln_out" : nullptr), false);
            }
            ImGui::EndChild();
            ImGui::EndGroup();
        }
        ImGui::Separator();
        ImGui::BeginChild("lnstats", ImVec2(0, 0));
        ImGui::Columns(2, nullptr, false);
        stats_panel(t->data(), t->size(), tx, std::to_string(s.version()) + name + (ui.show_grad ? "g" : ""));
        ImGui::NextColumn();
        ImGui::TextWrapped("Toggle elementwise_affine (A) and unbiased std (U) in the toolbar: without affine, "
                           "out == normalized; with N-1, normalized shrinks by sqrt((D-1)/D). The Changes tab "
                           "shows the effect on every later stage.");
        ImGui::Columns(1);
        ImGui::EndChild();
        return;
    }
    float stats_w = 250;
    ImGui::BeginChild("heat", ImVec2(ImGui::GetContentRegionAvail().x - stats_w, 0), false,
                      ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
    tensor_heatmap("stage", name, *t, info, s, ui, tx, tx.stage, 0, 0, true, "stage", true);
    if (t->dimension() == 1) {  // also as bars
        ImGui::PlotHistogram("##bars", t->data(), int(t->size()), 0, nullptr, FLT_MAX, FLT_MAX, ImVec2(-1, 120));
    }
    ImGui::EndChild();
    ImGui::SameLine();
    ImGui::BeginChild("stats", ImVec2(0, 0), true);
    ImGui::TextDisabled("statistics");
    stats_panel(t->data(), t->size(), tx, std::to_string(s.version()) + name + (ui.show_grad ? "g" : ""));
    if (ui.patch >= 0) ImGui::TextColored(ImVec4(1, 0.3f, 0.8f, 1), "patch %d = token %d highlighted", ui.patch, ui.patch + 1);
    ImGui::EndChild();
}

void DrawChanges(Session& s, UiState& ui, Textures& tx) {
    const Result& r = s.result();
    if (!r.trace || !r.base) return;
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
        if (ImGui::Selectable("##s", sel, 0, ImVec2(0, 18))) ui.stage = idx;
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
    if (e && bi >= 0 && r.base->at(size_t(bi)).tensor.shape() == e->tensor.shape()) {
        if (tx.stale("diffvals", key_of(s.version(), e->name, 0))) {
            tx.diff_vals = e->tensor - r.base->at(size_t(bi)).tensor;  // now - default
        }
        const Array& d = tx.diff_vals;
        ImGui::Text("now - default: %s", e->name.c_str());
        StageInfo info = stage_info(e->name, s.config(), s.options());
        info.signed_values = true;
        int saved = ui.scale_mode;
        ui.scale_mode = 2;
        tensor_heatmap("diff", e->name + "#diff", d, info, s, ui, tx, tx.diff, 0, 0, true, "diff", false);
        ui.scale_mode = saved;
    }
    ImGui::EndChild();
}

void DrawAttentionGrid(Session& s, UiState& ui, Textures& tx) {
    const Trace* t = s.trace();
    if (!t) return;
    const Config& c = s.config();
    int L = c.depth, H = c.heads, G = c.grid();
    ImGui::TextWrapped("The cls token's attention to every patch: one map per layer (rows) and head (columns), "
                       "last column the mean over heads. Click a map to show it over the image and open its pattern.");
    size_t need = size_t(L) * (H + 1);
    if (tx.grid.size() != need) { tx.grid.clear(); tx.grid.resize(need); tx.grid_range.assign(need, {0.f, 1.f}); tx.keys.erase("grid"); }
    bool up = tx.stale("grid", s.version());
    float cell = std::clamp((ImGui::GetContentRegionAvail().x - 60) / (H + 1) - 8, 40.f, 96.f);
    ImGui::BeginChild("grid", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
    for (int l = 0; l < L; ++l) {
        ImGui::Text("L%-2d", l);
        for (int h = 0; h <= H; ++h) {
            ImGui::SameLine();
            int head = h == H ? -1 : h;
            size_t gi = size_t(l) * (H + 1) + h;
            Texture& tex = tx.grid[gi];
            if (up) {
                std::vector<float> a = cls_attention(*t, l, head);
                tex.upload_float(a.data(), G, G);
                auto r = std::minmax_element(a.begin(), a.end());
                tx.grid_range[gi] = {*r.first, *r.second};
            }
            Colormap cm;
            cm.vmin = tx.grid_range[gi].first;
            cm.vmax = std::max(tx.grid_range[gi].second, cm.vmin + 1e-9f);
            ImVec2 p = ImGui::GetCursorScreenPos();
            ImGui::PushID(l * 1000 + h);
            if (ImGui::InvisibleButton("m", ImVec2(cell, cell))) {
                ui.overlay = 1; ui.overlay_layer = l; ui.overlay_head = head;
                ui.stage = t->index_of("blocks." + std::to_string(l) + ".attn.pattern");
                if (head >= 0) ui.head = head;
                ui.tab = 0;
            }
            if (ImGui::IsItemHovered()) ImGui::SetTooltip("layer %d, %s: max %.3f", l, head < 0 ? "mean of heads" : ("head " + std::to_string(head)).c_str(), tx.grid_range[gi].second);
            ImGui::PopID();
            draw_colormapped(ImGui::GetWindowDrawList(), tex, p, ImVec2(p.x + cell, p.y + cell), cm);
            bool sel = ui.overlay == 1 && (ui.overlay_layer < 0 ? L - 1 : ui.overlay_layer) == l && ui.overlay_head == head;
            ImGui::GetWindowDrawList()->AddRect(p, ImVec2(p.x + cell, p.y + cell), sel ? IM_COL32(255, 80, 200, 255) : IM_COL32(70, 70, 70, 255), 0, 0, sel ? 3 : 1);
        }
    }
    ImGui::Text("    ");
    for (int h = 0; h <= H; ++h) {
        ImGui::SameLine(44 + h * (cell + ImGui::GetStyle().ItemSpacing.x));
        ImGui::TextDisabled(h == H ? "mean" : "h%d", h);
    }
    ImGui::EndChild();
}

}  // namespace vit::app
