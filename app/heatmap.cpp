// Heatmaps and their keys: a tensor slice as a coloured grid with labelled axes, a colour bar and a
// hover readout (Heatmap), a stage's tensor drawn at its current slice (tensor_heatmap), and the keys
// every picture of the app draws with (colour bars, horizontal keys, the non-finite legend, the
// attention scale); shared by the tabs and the panels.
//
// Rules every view keeps (issue 8): every access to the trace is guarded; a view with nothing to
// show says why, in place; heatmap cells are square (zoom for more); labels are thinned until none
// overlaps or leaves its panel. Issue 19: every picture has its key with values; one colour
// convention per kind of quantity (quantity_colormap); attention pictures share one scale from 0.
#include "probe.h"
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/model/finite.h"
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

Colormap quantity_colormap(Quantity q, float lo, float hi) {
    Colormap cm;
    if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi) lo = hi = 0;
    if (q == Quantity::Signed || q == Quantity::Difference) {
        // white is 0, blue below, red above, symmetric: no change is white whatever the range
        const float m = std::max(std::fabs(lo), std::fabs(hi));
        cm.mode = Colormap::Diverging;
        cm.vmin = -m; cm.vmax = m;
        if (m <= 0) { cm.vmin = -1e-6f; cm.vmax = 1e-6f; }
    } else {
        // from 0 (dark) to the largest value (yellow); a negative value (none should be) widens it
        cm.mode = Colormap::Sequential;
        cm.vmin = std::min(0.f, lo); cm.vmax = hi;
        if (cm.vmax <= cm.vmin) cm.vmax = cm.vmin + 1e-6f;
    }
    return cm;
}

ImU32 signed_colour(float v) {
    // the diverging map's ends (shaders/heatmap.frag): negative blue, positive red
    return v < 0 ? IM_COL32(59, 76, 192, 255) : IM_COL32(180, 4, 38, 255);
}

ImU32 colour_of(const Colormap& cm, float v) {
    if (std::isnan(v)) return IM_COL32(255, 0, 255, 255);
    float t = cm.vmax > cm.vmin ? std::clamp((v - cm.vmin) / (cm.vmax - cm.vmin), 0.f, 1.f) : 0.5f;
    if (std::isinf(v)) t = v > 0 ? 1.f : 0.f;
    float r, g, b;
    if (cm.mode == Colormap::Diverging) {
        // as heatmap.frag's diverging(): blue, white at the middle, red
        const float bl[3] = {0.230f, 0.299f, 0.754f}, wh[3] = {0.965f, 0.965f, 0.965f}, rd[3] = {0.706f, 0.016f, 0.150f};
        const float* a = t < 0.5f ? bl : wh;
        const float* c = t < 0.5f ? wh : rd;
        const float u = t < 0.5f ? t * 2 : (t - 0.5f) * 2;
        r = a[0] + (c[0] - a[0]) * u; g = a[1] + (c[1] - a[1]) * u; b = a[2] + (c[2] - a[2]) * u;
    } else {
        // heatmap.frag's polynomial fit of viridis
        const double c0[3] = {0.2777273272234177, 0.005407344544966578, 0.3340998053353061};
        const double c1[3] = {0.1050930431085774, 1.404613529898575, 1.384590162594685};
        const double c2[3] = {-0.3308618287255563, 0.214847559468213, 0.09509516302823659};
        const double c3[3] = {-4.634230498983486, -5.799100973351585, -19.33244095627987};
        const double c4[3] = {6.228269936347081, 14.17993336680509, 56.69055260068105};
        const double c5[3] = {4.776384997670288, -13.74514537774601, -65.35303263337234};
        const double c6[3] = {-5.435455855934631, 4.645852612178535, 26.3124352495832};
        float o[3];
        for (int i = 0; i < 3; ++i)
            o[i] = float(std::clamp(c0[i] + t * (c1[i] + t * (c2[i] + t * (c3[i] + t * (c4[i] + t * (c5[i] + t * c6[i]))))), 0.0, 1.0));
        r = o[0]; g = o[1]; b = o[2];
    }
    return IM_COL32(int(r * 255 + 0.5f), int(g * 255 + 0.5f), int(b * 255 + 0.5f), 255);
}

Colormap quantity_range(Quantity q, const float* d, size_t n) {
    float lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; ++i)
        if (std::isfinite(d[i])) { lo = std::min(lo, d[i]); hi = std::max(hi, d[i]); }
    if (lo > hi) lo = hi = 0;
    return quantity_colormap(q, lo, hi);
}

Colormap colormap_for(const float* all, size_t n_all, const float* slice, size_t n_slice, bool signed_values,
                      ScaleMode mode) {
    const float* d = mode == ScaleMode::PerSlice ? slice : all;
    size_t n = mode == ScaleMode::PerSlice ? n_slice : n_all;
    if (!d || n == 0) return Colormap{};
    // the finite values only: NaN and Inf have colours of their own (the legend names them)
    float lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; ++i)
        if (std::isfinite(d[i])) { lo = std::min(lo, d[i]); hi = std::max(hi, d[i]); }
    if (lo > hi) lo = hi = 0;
    const bool sym = signed_values || mode == ScaleMode::Symmetric || lo < 0;
    return quantity_colormap(sym ? Quantity::Signed : Quantity::Probability, lo, hi);
}

std::string fmt_short(float v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2g", double(v));
    return b;
}

std::string fmt(float v) {
    char b[32];
    if (v != 0 && (std::fabs(v) < 1e-3f || std::fabs(v) >= 1e4f)) std::snprintf(b, sizeof b, "%.3e", v);
    else std::snprintf(b, sizeof b, "%.4f", v);
    return b;
}

float colorbar_width(const Colormap& cm, const std::vector<KeyMark>& marks) {
    float w = 0;
    for (float v : {cm.vmin, 0.5f * (cm.vmin + cm.vmax), cm.vmax}) w = std::max(w, ImGui::CalcTextSize(fmt(v).c_str()).x);
    for (const KeyMark& m : marks) w = std::max(w, ImGui::CalcTextSize(m.label.c_str()).x);
    return 6 + 10 + 4 + w + 2;  // gap, bar, gap, figures
}

void DrawColorBar(ViewCtx& v, const std::string& group, const Colormap& cm, ImVec2 p, float h,
                  const std::vector<KeyMark>& marks) {
    if (h < 20) return;
    Colormap unit = cm;
    unit.vmin = 0; unit.vmax = 1;
    if (unit.mode == Colormap::Overlay) unit.opacity = 1;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    v.gfx.draw(dl, v.gfx.ramp(), p, ImVec2(p.x + 10, p.y + h), unit);
    dl->AddRect(p, ImVec2(p.x + 10, p.y + h), IM_COL32(120, 120, 120, 255));
    ImU32 tc = ImGui::GetColorU32(ImGuiCol_Text);
    const float th = ImGui::GetTextLineHeight();
    Rect clip = clip_rect(dl);
    // the marks first (uniform attention, 0): a line across the bar and its name beside it
    std::vector<float> taken;
    for (const KeyMark& m : marks) {
        if (!(m.value >= cm.vmin && m.value <= cm.vmax) || cm.vmax <= cm.vmin) continue;
        const float y = p.y + h * (1 - (m.value - cm.vmin) / (cm.vmax - cm.vmin));
        // a black pixel row edged in white, on whole pixels (a line between pixels blurs to grey)
        const float yi = std::floor(y);
        dl->AddRectFilled(ImVec2(p.x - 3, yi - 1), ImVec2(p.x + 13, yi + 2), IM_COL32(255, 255, 255, 255));
        dl->AddRectFilled(ImVec2(p.x - 3, yi), ImVec2(p.x + 13, yi + 1), IM_COL32(0, 0, 0, 255));
        float ly = std::clamp(y - th / 2, p.y + th / 2 + 1, p.y + h - th * 1.5f - 1);
        if (h < 3 * th) continue;
        DrawLabel(dl, v.probe, group, ImVec2(p.x + 14, ly), IM_COL32(255, 255, 255, 255), m.label, clip);
        taken.push_back(ly);
    }
    auto free_at = [&](float y) {
        for (float t : taken)
            if (std::fabs(t - y) < th) return false;
        return true;
    };
    DrawLabel(dl, v.probe, group, ImVec2(p.x + 14, p.y - th / 2), tc, fmt(cm.vmax), clip);
    const float mid = p.y + h / 2 - th / 2;
    if (h > 3 * th && free_at(mid)) DrawLabel(dl, v.probe, group, ImVec2(p.x + 14, mid), tc, fmt(0.5f * (cm.vmin + cm.vmax)), clip);
    DrawLabel(dl, v.probe, group, ImVec2(p.x + 14, p.y + h - th / 2), tc, fmt(cm.vmin), clip);
}

float color_key_min_width(const Colormap& cm) {
    return ImGui::CalcTextSize(fmt(cm.vmin).c_str()).x + ImGui::CalcTextSize(fmt(cm.vmax).c_str()).x + 40;
}

float readable_height(int rows) { return rows > 1 ? std::min(100.f, 4.f * float(rows)) : 12.f; }

float color_key_height() { return 10 + 2 + ImGui::GetTextLineHeight() + ImGui::GetStyle().ItemSpacing.y; }

void ColorKey(ViewCtx& v, const char* id, const Colormap& cm, float w, const std::vector<KeyMark>& marks) {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float th = ImGui::GetTextLineHeight();
    const std::string lo = fmt(cm.vmin), hi = fmt(cm.vmax);
    const float lw = ImGui::CalcTextSize(lo.c_str()).x, hw = ImGui::CalcTextSize(hi.c_str()).x;
    w = std::max(w, color_key_min_width(cm));
    ImVec2 o = ImGui::GetCursorScreenPos();
    ImGui::Dummy(ImVec2(w, 10 + 2 + th));
    const Rect clip{o.x, o.y, w, 12 + th};
    // the bar: a horizontal ramp (the vertical ramp's texture turned: left = vmin, right = vmax)
    Colormap unit = cm;
    unit.vmin = 0; unit.vmax = 1;
    if (unit.mode == Colormap::Overlay) unit.opacity = 1;
    const ImVec2 b0(o.x, o.y), b1(o.x + w, o.y + 10);
    v.gfx.draw(dl, v.gfx.hramp(), b0, b1, unit);
    dl->AddRect(b0, b1, IM_COL32(120, 120, 120, 255));
    const std::string group = std::string(id) + ".key";
    const ImU32 tc = ImGui::GetColorU32(ImGuiCol_TextDisabled);
    DrawLabel(dl, v.probe, group, ImVec2(o.x, o.y + 12), tc, lo, clip);
    DrawLabel(dl, v.probe, group, ImVec2(o.x + w - hw, o.y + 12), tc, hi, clip);
    float free0 = o.x + lw + 6, free1 = o.x + w - hw - 6;
    if (cm.mode == Colormap::Diverging && cm.vmin < 0 && cm.vmax > 0) {  // white is 0: said at the middle
        const float zx = o.x + w * (0 - cm.vmin) / (cm.vmax - cm.vmin), zw = ImGui::CalcTextSize("0").x;
        dl->AddLine(ImVec2(zx, o.y + 10), ImVec2(zx, o.y + 13), tc);
        if (zx - zw / 2 >= free0 && zx + zw / 2 <= free1) DrawLabel(dl, v.probe, group, ImVec2(zx - zw / 2, o.y + 12), tc, "0", clip);
    }
    for (const KeyMark& m : marks) {
        if (!(m.value >= cm.vmin && m.value <= cm.vmax) || cm.vmax <= cm.vmin) continue;
        const float x = o.x + w * (m.value - cm.vmin) / (cm.vmax - cm.vmin);
        // a black pixel column edged in white, on whole pixels (a line between pixels blurs to grey)
        const float xi = std::floor(x);
        dl->AddRectFilled(ImVec2(xi - 1, o.y - 2), ImVec2(xi + 2, o.y + 12), IM_COL32(255, 255, 255, 255));
        dl->AddRectFilled(ImVec2(xi, o.y - 2), ImVec2(xi + 1, o.y + 12), IM_COL32(0, 0, 0, 255));
        const float mw = ImGui::CalcTextSize(m.label.c_str()).x;
        const float lx = std::clamp(x - mw / 2, free0, free1 - mw);
        if (lx >= free0 && lx + mw <= free1) {
            DrawLabel(dl, v.probe, group, ImVec2(lx, o.y + 12), IM_COL32(255, 255, 255, 255), m.label, clip);
            free0 = lx + mw + 6;
        }
    }
    v.probe.rects[group] = Rect{b0.x, b0.y, w, 10};
    v.probe.numbers[group + ".vmin"] = cm.vmin;
    v.probe.numbers[group + ".vmax"] = cm.vmax;
    v.probe.numbers[group + ".mode"] = cm.mode;
}

namespace {

// The swatch of a non-finite value: magenta for NaN, magenta striped with white (+Inf) or black
// (-Inf), as the shader draws them (shaders/heatmap.frag).
void nonfinite_swatch(ImDrawList* dl, ImVec2 p, float sz, int kind) {
    dl->AddRectFilled(p, ImVec2(p.x + sz, p.y + sz), IM_COL32(255, 0, 255, 255));
    if (kind != 0) {
        const ImU32 c = kind > 0 ? IM_COL32(255, 255, 255, 255) : IM_COL32(0, 0, 0, 255);
        for (float k = 0; k < 2 * sz; k += 6)
            dl->AddLine(ImVec2(p.x + std::max(0.f, k - sz), p.y + std::min(sz, k)), ImVec2(p.x + std::min(sz, k), p.y + std::max(0.f, k - sz)), c, 2.f);
    }
    dl->AddRect(p, ImVec2(p.x + sz, p.y + sz), IM_COL32(120, 120, 120, 255));
}

}  // namespace

bool NonFiniteKey(ViewCtx& v, const std::string& group, const NonFinite& nf) {
    if (!nf.any()) return false;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float th = ImGui::GetTextLineHeight();
    const std::pair<uint64_t, const char*> kinds[3] = {{nf.nan, "NaN"}, {nf.pos_inf, "+Inf"}, {nf.neg_inf, "-Inf"}};
    for (int k = 0; k < 3; ++k) {
        if (!kinds[k].first) continue;
        const std::string text = std::string(kinds[k].second) + ": " + std::to_string(kinds[k].first) + " cell" + (kinds[k].first == 1 ? "" : "s");
        ImVec2 o = ImGui::GetCursorScreenPos();
        ImGui::Dummy(ImVec2(th + 6 + ImGui::CalcTextSize(text.c_str()).x, th));
        nonfinite_swatch(dl, o, th, k == 0 ? 0 : k == 1 ? 1 : -1);
        DrawLabel(dl, v.probe, group, ImVec2(o.x + th + 6, o.y), IM_COL32(255, 120, 255, 255), text, clip_rect(dl));
    }
    v.probe.numbers[group + ".count"] = double(nf.count());
    return true;
}

namespace {
std::string axis_fmt(float v) {  // an axis figure: three significant digits, no exponent for 100
    char b[32];
    std::snprintf(b, sizeof b, "%.3g", double(v));
    return b;
}
}  // namespace

void PlotWithAxes(ViewCtx& v, const char* id, const std::vector<float>& y, float ymin, float ymax, const std::string& x_label,
                  const std::string& y_label, float first_x, float last_x, ImVec2 size) {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float th = ImGui::GetTextLineHeight();
    const ImU32 tc = ImGui::GetColorU32(ImGuiCol_TextDisabled), line = IM_COL32(240, 180, 60, 255);
    float lo = ymin, hi = ymax;
    if (!std::isfinite(lo) || !std::isfinite(hi)) {  // from the data
        lo = INFINITY; hi = -INFINITY;
        for (float f : y)
            if (std::isfinite(f)) { lo = std::min(lo, f); hi = std::max(hi, f); }
        if (lo > hi) lo = hi = 0;
        if (std::isfinite(ymin)) lo = ymin;
        if (std::isfinite(ymax)) hi = ymax;
    }
    if (hi <= lo) hi = lo + 1;
    float axis_w = 0;
    for (float f : {lo, hi, 0.5f * (lo + hi)}) axis_w = std::max(axis_w, ImGui::CalcTextSize(axis_fmt(f).c_str()).x);
    axis_w += 8;
    ImVec2 o = ImGui::GetCursorScreenPos();
    ImGui::Dummy(size);
    const Rect clip{o.x, o.y, size.x, size.y};
    const std::string group = std::string(id) + ".axes";
    // the title (what is plotted), the plot area, the y figures on the left, the x figures under it
    DrawLabel(dl, v.probe, group, ImVec2(o.x, o.y), ImGui::GetColorU32(ImGuiCol_Text), y_label, clip);
    const ImVec2 p0(o.x + axis_w, o.y + th + 4), p1(o.x + size.x - 4, o.y + size.y - 2 * th - 4);
    if (p1.y - p0.y < 20 || p1.x - p0.x < 40) return;
    dl->AddRectFilled(p0, p1, IM_COL32(30, 34, 42, 255));
    dl->AddRect(p0, p1, tc);
    for (float f : {hi, 0.5f * (lo + hi), lo}) {
        const float yy = p1.y - (f - lo) / (hi - lo) * (p1.y - p0.y);
        dl->AddLine(ImVec2(p0.x - 3, yy), ImVec2(p0.x, yy), tc);
        const std::string t = axis_fmt(f);
        DrawLabel(dl, v.probe, group, ImVec2(o.x, std::clamp(yy - th / 2, p0.y - th / 2, p1.y - th / 2)), tc, t, clip);
    }
    const int n = int(y.size());
    if (n == 1 && std::isfinite(y[0]))  // one point: a dot
        dl->AddCircleFilled(ImVec2(p0.x, p1.y - std::clamp((y[0] - lo) / (hi - lo), 0.f, 1.f) * (p1.y - p0.y)), 3.f, line);
    for (int i = 1; i < n; ++i) {
        auto at = [&](int k) {
            const float fx = n > 1 ? float(k) / float(n - 1) : 0.f;
            const float fy = std::isfinite(y[size_t(k)]) ? std::clamp((y[size_t(k)] - lo) / (hi - lo), 0.f, 1.f) : 0.f;
            return ImVec2(p0.x + fx * (p1.x - p0.x), p1.y - fy * (p1.y - p0.y));
        };
        dl->AddLine(at(i - 1), at(i), line, 1.5f);
    }
    const std::string a = axis_fmt(first_x), b = axis_fmt(last_x);
    DrawLabel(dl, v.probe, group, ImVec2(p0.x, p1.y + 3), tc, a, clip);
    const float bw = ImGui::CalcTextSize(b.c_str()).x, xw = ImGui::CalcTextSize(x_label.c_str()).x;
    DrawLabel(dl, v.probe, group, ImVec2(p1.x - bw, p1.y + 3), tc, b, clip);
    if (xw + 16 < p1.x - p0.x - bw - ImGui::CalcTextSize(a.c_str()).x)
        DrawLabel(dl, v.probe, group, ImVec2((p0.x + p1.x - xw) / 2, p1.y + 3 + th), tc, x_label, clip);
    v.probe.rects[std::string(id)] = Rect{p0.x, p0.y, p1.x - p0.x, p1.y - p0.y};
}

std::vector<KeyMark> attention_marks(int tokens) {
    if (tokens <= 0) return {};
    char b[48];
    std::snprintf(b, sizeof b, "1/%d = %s (uniform)", tokens, fmt(1.f / float(tokens)).c_str());
    return {KeyMark{1.f / float(tokens), b}};
}

Colormap attention_colormap(float shared_max, float map_max, bool per_map) {
    Colormap cm = quantity_colormap(Quantity::Probability, 0.f, per_map ? map_max : shared_max);
    return cm;
}

void AttentionScaleKey(ViewCtx& v, const char* id, bool& per_map, float shared_max, int keys, const char* unit,
                       const char* caption) {
    // the two scales side by side, the one in force said on the line and on every map's key (issue 36)
    ImGui::AlignTextToFramePadding();
    ImGui::TextDisabled("scale:");
    ImGui::SameLine();
    if (ImGui::RadioButton(("one for every " + std::string(unit) + "##" + id).c_str(), !per_map)) per_map = false;
    if (v.hover && ImGui::IsItemHovered())
        ImGui::SetTooltip("one scale for every %s, from 0 to the largest weight of them all (colours compare across %ss)", unit, unit);
    ImGui::SameLine();
    if (ImGui::RadioButton(("each " + std::string(unit) + " its own##" + id).c_str(), per_map)) per_map = true;
    if (v.hover && ImGui::IsItemHovered())
        ImGui::SetTooltip("each %s from 0 to its own largest weight, printed %s it (colours do not compare)", unit, caption);
    ImGui::SameLine();
    if (per_map)
        ImGui::TextDisabled("each map: 0 (dark) to its own max, printed %s it", caption);
    else
        ImGui::TextDisabled("all maps: one scale");
    const float w = std::min(ImGui::GetContentRegionAvail().x, 420.f);
    if (!per_map) {
        ColorKey(v, id, attention_colormap(shared_max, shared_max, false), w, attention_marks(keys));
    } else {
        ColorKey(v, id, attention_colormap(1.f, 1.f, false), w);
        ImGui::SameLine();
        ImGui::TextDisabled("(fraction of each map's max)");
    }
}

bool AttentionNote(ViewCtx& v, const std::string& key) {
    const std::string note = weights_note(v.s);
    if (note.empty()) return false;
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s: this attention is an untrained model's; its pattern means nothing", note.c_str());
    ImGui::PopTextWrapPos();
    v.probe.strings[key + ".random"] = note;
    return true;
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

// The label of axis i of a rank-`rank` tensor; never reads past the list it is given.
std::string axis_label(const StageInfo& info, size_t i, size_t rank) {
    if (info.axes.size() == rank && i < info.axes.size()) return info.axes[i];
    return "axis " + std::to_string(i);
}

// Where a heatmap's parts go, from the room it is given (avail) and its arguments alone: the
// panel (W x H), the row names' margin, the colour bar's width, the cells' width and height, and
// whether the columns carry a.col_names (else numbers: the names do not fit the cells).
struct HeatmapGeometry {
    float W = 0, H = 0, left = 0, bar_w = 0, cwf = 0, chf = 0, cw = 0, ch = 0;
    bool col_names = false, widened = false;
};
HeatmapGeometry heatmap_geometry(const HeatmapArgs& a, ImVec2 avail, float zoom) {
    HeatmapGeometry g;
    g.W = a.max_w > 0 ? std::min(a.max_w, avail.x) : avail.x;
    g.H = a.max_h > 0 ? std::min(a.max_h, avail.y) : avail.y;
    const float th = ImGui::GetTextLineHeight();
    g.bar_w = a.colorbar ? colorbar_width(a.cm, a.marks) : 0.f;
    auto row_text = [&](int r) { return a.row_name ? a.row_name(r) : std::to_string(r); };
    if (a.row_labels) {
        // numbers grow with the row: a few rows tell the widest; names (classes, heads) are measured
        // one by one (a long class name among short ones was left unlabelled), up to 40% of the width
        // (a longer one is cut short with "...", its whole name in the hover line); token axes longer
        // than 512 rows (cls, reg0, p0, p1, ...: widest at the end) keep to the sample, per frame
        for (int r : {0, std::min(a.rows - 1, 1), a.rows - 1, a.rows / 2, std::max(0, a.rows - 2)})
            g.left = std::max(g.left, ImGui::CalcTextSize(row_text(r).c_str()).x);
        if (a.row_name) {
            for (int r = 0; r < (a.rows <= 512 ? a.rows : 0); ++r)
                g.left = std::max(g.left, ImGui::CalcTextSize(row_text(r).c_str()).x);
            g.left = std::min(g.left, std::max(60.f, 0.4f * g.W));
        }
        g.left += 8;
    }
    const float top = th + 2;
    // Square cells, as large as the panel allows; zoom (wheel) for more.
    g.cwf = (g.W - g.bar_w - g.left) / a.cols;
    g.chf = (g.H - th - top - 4) / a.rows;
    float cell = a.cell > 0 ? a.cell : std::max(std::min(g.cwf, g.chf), 0.05f);
    if (a.rows == 1 && a.cell <= 0) cell = std::min(g.cwf, 48.f);  // a vector: square cells up to 48 px
    const float z = a.zoomable ? zoom : 1.f;
    g.cw = cell * z;
    g.ch = cell * z;
    if (a.cell > 0 && a.cell_h > 0) g.ch = a.cell_h * z;
    if (a.raise_rows && a.cell <= 0 && a.rows > 1 && g.cwf < g.chf && cell * a.rows < readable_height(a.rows))
        g.ch = std::min(readable_height(a.rows) / float(a.rows), g.chf) * z;  // few rows, many columns (50 x 768)
    if (a.widen_cols && a.cell <= 0 && a.cols > 1 && a.rows > 1 && g.chf < g.cwf && cell * a.cols < readable_height(a.cols)) {
        g.cw = std::min(readable_height(a.cols) / float(a.cols), g.cwf) * z;  // many rows, few columns (261 x 64)
        g.widened = g.cw > g.ch * 1.01f;
    }
    if (a.cols == 1 && a.strip_w > 0) g.cw = a.strip_w;  // one value per row (LayerNorm mean/std): a column
    if (a.rows == 1 && g.ch < 12) g.ch = 12;              // a long vector: a visible strip (cells taller than wide)
    if (!a.col_names.empty() && int(a.col_names.size()) == a.cols) {
        float widest = 0;
        for (auto& n : a.col_names) widest = std::max(widest, ImGui::CalcTextSize(n.c_str()).x);
        g.col_names = widest + 6 <= g.cw;
    }
    return g;
}

}  // namespace

double relative_spread(float lo, float hi) {
    const double m = std::max(std::fabs(double(lo)), std::fabs(double(hi)));
    return m > 0 && std::isfinite(m) ? (double(hi) - double(lo)) / m : 1.0;
}

bool near_constant(float lo, float hi) { return hi > lo && relative_spread(lo, hi) < kFlatSpread; }

bool flat_overlay(float lo, float hi) { return std::isfinite(lo) && std::isfinite(hi) && relative_spread(lo, hi) < kFlatOverlay; }

void flat_note(ViewCtx& v, const std::string& group, float lo, float hi) {
    char b[200];
    std::snprintf(b, sizeof b, "Near-constant: every value lies in %s .. %s, a spread of %.2g%% of their size; the colours stretch "
                  "that small difference.", fmt(lo).c_str(), fmt(hi).c_str(), 100 * relative_spread(lo, hi));
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s", b);
    ImGui::PopTextWrapPos();
    v.probe.strings[group + ".flat"] = b;
}

bool heatmap_col_names_fit(const ViewCtx& v, const HeatmapArgs& a, ImVec2 avail) {
    return a.rows > 0 && a.cols > 0 && heatmap_geometry(a, avail, v.ui.zoom).col_names;
}

Binning heatmap_binning(int rows, int cols, float cell_h, float cell_w) {
    Binning b;
    b.rows = cell_h < 1 ? std::clamp(int(float(rows) * cell_h), 1, rows) : rows;
    b.cols = cell_w < 1 ? std::clamp(int(float(cols) * cell_w), 1, cols) : cols;
    return b;
}

std::vector<float> bin_extremes(const float* d, int rows, int cols, const Binning& b, bool from_zero) {
    std::vector<float> out(size_t(b.rows) * size_t(b.cols), NAN);
    for (int br = 0; br < b.rows; ++br) {
        const int r0 = int(int64_t(br) * rows / b.rows), r1 = int(int64_t(br + 1) * rows / b.rows);
        for (int bc = 0; bc < b.cols; ++bc) {
            const int c0 = int(int64_t(bc) * cols / b.cols), c1 = int(int64_t(bc + 1) * cols / b.cols);
            float best = NAN;
            bool nonfinite = false;  // a NaN / Inf cell stays visible (its own colour)
            for (int r = r0; r < r1 && !nonfinite; ++r)
                for (int c = c0; c < c1; ++c) {
                    const float v = d[size_t(r) * size_t(cols) + size_t(c)];
                    if (!std::isfinite(v)) { best = v; nonfinite = true; break; }
                    if (std::isnan(best) || (from_zero ? std::fabs(v) > std::fabs(best) : v > best)) best = v;
                }
            out[size_t(br) * size_t(b.cols) + size_t(bc)] = best;
        }
    }
    return out;
}

std::string binning_text(const HeatmapArgs& a, const Binning& b) {
    const bool diverging = a.cm.mode == Colormap::Diverging;
    std::string what;
    if (b.cols != a.cols) what = std::to_string(a.cols) + " columns in " + std::to_string(b.cols) + " px";
    if (b.rows != a.rows) what += (what.empty() ? "" : ", ") + std::to_string(a.rows) + " rows in " + std::to_string(b.rows) + " px";
    return what + ": each pixel shows its cells' " + (diverging ? "value farthest from 0" : "largest value");
}

void Heatmap(ViewCtx& v, const char* id, Texture& tex, bool upload, const HeatmapArgs& a) {
    UiState& ui = v.ui;
    Probe& pr = v.probe;
    if (a.rows <= 0 || a.cols <= 0 || !a.data) {
        ImGui::TextDisabled("(nothing to draw: the slice is empty)");
        return;
    }
    ImGui::PushID(id);
    const std::string group = a.rect_name ? a.rect_name : id;
    const HeatmapGeometry g = heatmap_geometry(a, ImGui::GetContentRegionAvail(), ui.zoom);
    // Cells narrower (or shorter) than a pixel: sampled as they are, a pixel would show one of the few cells it covers
    // and hide the others (an outlier among 8 columns vanished 7 times in 8: a wide LayerNorm panel was a wash of
    // near-zero colour). Each pixel shows instead the cell of its bin farthest from 0 (diverging maps) or the largest
    // (sequential), said in the titles line or by the view (probe "<group>.binned").
    const Binning bin = heatmap_binning(a.rows, a.cols, g.ch, g.cw);
    if (upload || tex.width() != bin.cols || tex.height() != bin.rows) {
        if (bin.rows == a.rows && bin.cols == a.cols) {
            tex.upload_float(a.data, a.cols, a.rows);
        } else {
            const std::vector<float> b = bin_extremes(a.data, a.rows, a.cols, bin, a.cm.mode == Colormap::Diverging);
            tex.upload_float(b.data(), bin.cols, bin.rows);
        }
    }
    if (bin.rows != a.rows || bin.cols != a.cols) pr.strings[group + ".binned"] = binning_text(a, bin);
    const float W = g.W, H = g.H, bar_w = g.bar_w, left = g.left;
    const float th = ImGui::GetTextLineHeight();
    // the row names: numbers, or the tokens' names (cls, p0, p1, ...) on a token axis
    auto row_text = [&](int r) { return a.row_name ? a.row_name(r) : std::to_string(r); };
    const float top = th + 2;
    // the non-finite cells of this slice: their legend goes under the colour bar
    const NonFinite nf = count_nonfinite(a.data, size_t(a.rows) * size_t(a.cols));
    // Axis titles: what each axis is and its size (one line, so side-by-side panels start level).
    if (a.titles) {
        char longer[256], shorter[256];
        std::snprintf(longer, sizeof longer, "rows: %s (%d)   columns: %s (%d)", a.row_label.c_str(), a.rows, a.col_label.c_str(), a.cols);
        std::snprintf(shorter, sizeof shorter, "%s (%d) x %s (%d)", a.row_label.c_str(), a.rows, a.col_label.c_str(), a.cols);
        std::string t = ImGui::CalcTextSize(longer).x <= W ? longer : shorter;
        if (g.widened) {
            // the cells are not square: said on the line that names the axes, in as few words as fit
            char note[160], brief[80];
            std::snprintf(note, sizeof note, "; columns widened to %.2g px (rows %.2g px) to be readable", g.cw, g.ch);
            std::snprintf(brief, sizeof brief, "; cells %.2g x %.2g px", g.cw, g.ch);
            t += ImGui::CalcTextSize((t + note).c_str()).x <= W ? note : brief;
            pr.strings[group + ".cells"] = std::string(note + 2);
        }
        if (bin.rows != a.rows || bin.cols != a.cols) {
            const std::string note = "; " + binning_text(a, bin);
            t += ImGui::CalcTextSize((t + note).c_str()).x <= W ? note : "; binned to pixels";
        }
        ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + W);
        ImGui::TextDisabled("%s", t.c_str());
        ImGui::PopTextWrapPos();
    }
    const float legend_h = nf.any() ? 3 * (th + ImGui::GetStyle().ItemSpacing.y) : 0.f;
    const float cwf = g.cwf, chf = g.chf, cw = g.cw, ch = g.ch;
    const bool zoom = a.zoomable;
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
    if (a.row_labels) {
        int rstep = std::max(1, int(std::ceil((th + 1) / ch)));
        for (int r = 0; r < a.rows; r += rstep) {
            float y = p0.y + r * ch + ch / 2 - th / 2;
            if (y < origin.y - 0.5f || y + th > clip1.y + 0.5f) continue;  // left of the cells: clear of the column labels
            bool cut = false;
            const std::string t = fit_text(row_text(r), left - 4, cut);
            if (ImGui::CalcTextSize(t.c_str()).x > left - 4) continue;  // not even "..." fits
            DrawLabel(dl, pr, group + ".rows", ImVec2(origin.x, y), tc, t, clip);
        }
    }
    const bool names = g.col_names;
    auto col_text = [&](int c) { return names ? a.col_names[size_t(c)] : a.col_name ? a.col_name(c) : std::to_string(c); };
    float widest = 0;
    if (names) for (auto& n : a.col_names) widest = std::max(widest, ImGui::CalcTextSize(n.c_str()).x);
    else for (int c : {0, a.cols - 1, a.cols / 2, std::max(0, a.cols - 2)}) widest = std::max(widest, ImGui::CalcTextSize(col_text(c).c_str()).x);
    int cstep = std::max(1, int(std::ceil((widest + 6) / cw)));
    for (int c = 0; c < a.cols; c += cstep) {
        std::string s = col_text(c);
        float w = ImGui::CalcTextSize(s.c_str()).x;
        float x = p0.x + c * cw + cw / 2 - w / 2;
        if (x < img0.x - 0.5f || x + w > clip1.x + 0.5f) continue;
        DrawLabel(dl, pr, group + ".cols", ImVec2(x, origin.y), tc, s, clip);
    }
    bool key_drawn = false;
    if (a.colorbar) {
        float bh = std::min(canvas.y - top - th - legend_h, 260.f);
        if (bh < 20 && canvas.y - top - th >= 20) bh = canvas.y - top - th;  // the bar before the legend
        const ImVec2 bp(origin.x + canvas.x + 6, img0.y + th / 2);
        const float key_w = canvas.x - left;
        if (bh < 20 && key_w >= color_key_min_width(a.cm)) {
            // a strip too short for the bar beside it (a vector of 1000 logits, 12 layers of token
            // norms at 29 px) and wide enough for a key under it: the key goes there, as wide as the
            // cells, with its values
            const ImVec2 below = ImGui::GetCursorScreenPos();
            ImGui::SetCursorScreenPos(ImVec2(img0.x, below.y));
            ColorKey(v, group.c_str(), a.cm, key_w, a.marks);
            key_drawn = true;
            if (nf.any()) {
                ImGui::SetCursorScreenPos(ImVec2(img0.x, ImGui::GetCursorScreenPos().y));
                NonFiniteKey(v, group + ".nonfinite", nf);
            }
        } else {
            DrawColorBar(v, group + ".colorbar", a.cm, bp, bh, a.marks);
            key_drawn = bh >= 20;  // DrawColorBar draws no bar shorter than that
            if (nf.any()) {
                // the legend of the cells that have no place on the bar, under it
                const ImVec2 keep = ImGui::GetCursorScreenPos();
                ImGui::SetCursorScreenPos(ImVec2(bp.x, bp.y + std::max(bh, 0.f) + th));
                ImGui::BeginGroup();
                NonFiniteKey(v, group + ".nonfinite", nf);
                ImGui::EndGroup();
                ImGui::SetCursorScreenPos(keep);
            }
        }
    } else if (nf.any()) {
        NonFiniteKey(v, group + ".nonfinite", nf);
    }
    // a key over a near-constant range stretches its colours over noise: said (issue 36 item 9)
    const bool flat = a.colorbar && near_constant(a.cm.vmin, a.cm.vmax);
    if (flat) flat_note(v, group, a.cm.vmin, a.cm.vmax);
    pr.heatmaps.push_back({group, Rect{img0.x, img0.y, clip1.x - img0.x, clip1.y - img0.y}, a.rows, a.cols, cw, ch, key_drawn,
                           a.cell <= 0 && cwf <= chf, a.cm.vmin, a.cm.vmax, flat});
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
            const std::string rn = a.row_long ? a.row_long(r) : a.row_name ? a.row_name(r) : std::to_string(r);
            const std::string cn = names ? a.col_names[size_t(c)] : a.col_long ? a.col_long(c) : a.col_name ? a.col_name(c) : std::to_string(c);
            ImGui::TextDisabled("%s %s, %s %s", a.row_label.c_str(), rn.c_str(), a.col_label.c_str(), cn.c_str());
            ImGui::EndTooltip();
        }
    }
    ImGui::PopID();
}

void token_axis_names(HeatmapArgs& a, const Session& s, StageKind kind) {
    const Trace* t = s.trace();
    if (!t || t->empty()) return;
    std::shared_ptr<const StageTable> table = t->table_ptr();
    const bool br = before_registers(kind);
    auto names = [&](const std::string& axis, std::function<std::string(int)>& name, std::function<std::string(int)>& longer) {
        if (axis.rfind("tokens", 0) == 0) {
            name = [table, br](int i) { return token_label(*table, i, false, br); };
            longer = [table, br](int i) { return std::to_string(i) + " = " + token_label(*table, i, true, br); };
        } else if (axis.rfind("patches", 0) == 0) {
            name = [](int i) { return "p" + std::to_string(i); };
            longer = [table](int i) { return token_label(*table, table->config().prefix_tokens() + i, true) ; };
        }
    };
    names(a.row_label, a.row_name, a.row_long);
    names(a.col_label, a.col_name, a.col_long);
}

namespace {

// The token a selected patch is on an axis labelled like this (the tokens before the patches
// counted from the table: cls, registers, dist), -1 when the axis is not one of tokens or patches.
int token_index(const Trace* t, StageKind kind, const std::string& axis, int patch) {
    if (patch < 0) return -1;
    if (axis.rfind("patches", 0) == 0) return patch;
    if (axis.rfind("tokens", 0) != 0) return -1;
    if (!t || t->empty()) return patch + 1;
    const Config& c = t->table().config();
    const RunDims& rd = t->table().dims();
    const bool early = before_registers(kind);
    if (!early && rd.dropped()) {  // the blocks' sequence holds the kept patches only
        const auto it = std::find(rd.kept.begin(), rd.kept.end(), patch);
        if (it == rd.kept.end()) return -1;  // dropped: no token
        patch = int(it - rd.kept.begin());
    }
    return patch + int(c.cls_token) + int(c.dist_token) + (early ? 0 : c.registers);
}

}  // namespace

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
    token_axis_names(a, v.s, info.id.kind);
    // The colour range scans the whole tensor: only when the texture is re-uploaded.
    const uint64_t key = hash_str(name + (is_grad ? "g" : ""),
                                  v.s.version() * 1000003ull + uint64_t(sl.slice * 1000 + int(ui.scale_mode) + 7) * 7919ull);
    const bool up = !cache.valid || cache.key != key;
    if (up) {
        cache.range = a.quantity ? quantity_range(*a.quantity, t.data(), t.size())
                                 : colormap_for(t.data(), t.size(), sl.data, sl.size(), info.signed_values || is_grad, ui.scale_mode);
        cache.key = key;
        cache.valid = true;
    }
    a.cm = cache.range;
    const Trace* tr = v.s.trace();
    a.highlight_row = sl.rows > 1 ? token_index(tr, info.id.kind, rl, ui.patch) : -1;
    a.highlight_col = token_index(tr, info.id.kind, cl, ui.patch);
    if (info.id.kind == StageKind::Input && R == 3) a.highlight_row = a.highlight_col = -1;
    // attention patterns: uniform attention (1/T, T the keys) marked on the bar
    if (!is_grad && (info.id.kind == StageKind::AttnPattern || info.id.kind == StageKind::HeadAttnPattern) && a.cm.mode == Colormap::Sequential)
        a.marks = {KeyMark{1.f / float(sl.cols), "uniform 1/" + std::to_string(sl.cols)}};
    Heatmap(v, id, cache.tex, up, a);
}

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_heatmap() {
    using K = ProbeKind;
    return {
        {K::String, "<heatmap>.flat", "the note under a heatmap whose key spans a near-constant range"},
        {K::String, "<heatmap>.binned", "a heatmap whose cells are under a pixel: how they are binned to its pixels"},
        {K::Rect, kProbeHeatmaps, "a heatmap's cells"},
        {K::Rect, kProbeHeatmaps + ".cell", "the framed cell (the math panel's)"},
        {K::Rect, "stage.picture", "an RGB model's input stage drawn as the picture (its channels on request)"},
        {K::Number, kProbeHeatmaps + ".{vmin|vmax|mode|rows|cols|cell_w|cell_h}", "a heatmap's range, colour map and cells"},
        {K::Group, kProbeHeatmaps + ".{rows|cols|colorbar}", "a heatmap's axis and colour-bar labels"},
        {K::Group, "<heatmap>.nonfinite", "a heatmap's legend of NaN / Inf cells"},
        {K::Number, "<heatmap>.nonfinite.count", "how many of its cells are NaN / Inf"},
        {K::Rect, "<picture>.key", "a horizontal colour key (heatmap.cpp ColorKey)"},
        {K::Number, "<picture>.key.{vmin|vmax|mode}", "its range and colour map"},
        {K::Group, "<picture>.key", "its figures and marks"},
        {K::String, "<picture>.random", "the random-weights note beside an attention picture"},
        {K::Group, "stats.hist", "the histogram's axis (its smallest and largest value) under it"},
        {K::Number, "stats.{shown|all}.{min|max|mean|std|n}", "statistics of the slice shown and the whole tensor"},
    };
}

}  // namespace vit::app
