// The Stage tab's panels beside and under its maps: the statistics of what is shown, the bars of a vector or
// of the classes, and what is said where a gradient is missing.
#include "app/tabs/stage_panels.h"

#include "app/probe.h"
#include <imgui.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>

#include "app/tensor_access.h"
#include "core/teach/teach.h"

namespace vit::app {

std::string join_index(const std::vector<size_t>& idx) {
    std::string s;
    for (size_t i = 0; i < idx.size(); ++i) s += (i ? "," : "") + std::to_string(idx[i]);
    return s;
}

const Stats& cached_stats(std::map<std::string, Stats>& cache, const std::string& key, const float* d, size_t n) {
    auto it = cache.find(key);
    if (it == cache.end()) {
        if (cache.size() > 256) cache.clear();  // keys carry the trace version: old ones are dead
        it = cache.emplace(key, stats(d, n, 40)).first;
    }
    return it->second;
}

// Statistics of exactly what is shown (the slice) with the whole tensor's beside them.
void stats_panel(const Array& t, const Slice2D& sl, const std::string& shown_what, std::map<std::string, Stats>& cache,
                 Probe& pr, const std::string& key) {
    if (t.size() == 0 || !sl.data) { ImGui::TextDisabled("(no values)"); return; }
    const bool is_slice = sl.size() != t.size();
    const Stats& shown = cached_stats(cache, key + "#slice", sl.data, sl.size());
    const Stats& all = is_slice ? cached_stats(cache, key + "#all", t.data(), t.size()) : shown;
    // The table, then the histogram with its axis under it; on a panel too short for both (the
    // LayerNorm view's at 1280x800 and 1366x768: the axis was cut off at the bottom), the histogram
    // beside the table, as tall as it.
    const float line = ImGui::GetTextLineHeightWithSpacing();
    const ImVec2 room = ImGui::GetContentRegionAvail();
    const float table_h = line + 5 * (ImGui::GetTextLineHeight() + 2 * ImGui::GetStyle().CellPadding.y) + ImGui::GetStyle().ItemSpacing.y;
    const bool beside = room.y < 2 * line + table_h + 3 * line + 60 && room.x >= 330;
    // too short for that too (a narrow column, 1280x800): two rows, min .. max and mean, std
    const bool compact = !beside && room.y < 2 * line + table_h + 2 * line + 40;
    if (is_slice || !compact) {  // (compact: the table's "shown" column says it for the whole tensor)
        ImGui::PushTextWrapPos(0);
        ImGui::TextDisabled("%s", is_slice ? shown_what.c_str() : "shown = whole tensor");
        ImGui::PopTextWrapPos();
    }
    const float table_w = beside ? std::min(room.x * 0.5f, is_slice ? 260.f : 170.f) : 0.f;
    if (ImGui::BeginTable("stats", is_slice ? 3 : 2, ImGuiTableFlags_SizingFixedFit, ImVec2(table_w, 0))) {
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
        if (compact) {
            auto row2 = [&](const char* n, float a0, float a1, float b0, float b1, const char* sep) {
                ImGui::TableNextRow();
                ImGui::TableNextColumn(); ImGui::TextUnformatted(n);
                ImGui::TableNextColumn(); ImGui::Text("%s%s%s", fmt(a0).c_str(), sep, fmt(a1).c_str());
                if (is_slice) { ImGui::TableNextColumn(); ImGui::TextDisabled("%s%s%s", fmt(b0).c_str(), sep, fmt(b1).c_str()); }
            };
            row2("min .. max", shown.min, shown.max, all.min, all.max, " .. ");
            row2("mean, std", shown.mean, shown.std, all.mean, all.std, ", ");
        } else {
            row("min", shown.min, all.min);
            row("max", shown.max, all.max);
            row("mean", shown.mean, all.mean);
            row("std", shown.std, all.std);
        }
        ImGui::EndTable();
    }
    const float table_bottom = ImGui::GetItemRectMax().y;
    pr.numbers["stats.shown.min"] = shown.min; pr.numbers["stats.shown.max"] = shown.max;
    pr.numbers["stats.shown.mean"] = shown.mean; pr.numbers["stats.shown.std"] = shown.std;
    pr.numbers["stats.shown.n"] = double(sl.size());
    pr.numbers["stats.all.min"] = all.min; pr.numbers["stats.all.max"] = all.max;
    pr.numbers["stats.all.mean"] = all.mean; pr.numbers["stats.all.std"] = all.std;
    pr.numbers["stats.all.n"] = double(t.size());
    // as tall as the room left above its axis line, 90 px at most (a fixed 90 pushed the axis out of sight)
    // (very short: the title inside the histogram, a line saved for its bars)
    const float left_y = ImGui::GetContentRegionAvail().y - ImGui::GetStyle().ItemSpacing.y;
    const bool title_inside = !beside && left_y - 2 * line < 24;
    float hist_h = std::clamp(left_y - (title_inside ? 1 : 2) * line, 12.f, 90.f);
    if (beside) {
        const ImVec2 tmin = ImGui::GetItemRectMin();
        ImGui::SameLine(0, 2 * ImGui::GetStyle().ItemSpacing.x);
        ImGui::SetCursorScreenPos(ImVec2(ImGui::GetCursorScreenPos().x, tmin.y));
        ImGui::BeginGroup();
        hist_h = std::max(32.f, table_bottom - tmin.y - 2 * line);
    }
    char title[64];
    std::snprintf(title, sizeof title, beside ? "histogram (%zu values)" : "histogram of the shown values (%zu)", sl.size());
    bool cut = false;
    const std::string title_shown = fit_text(title, ImGui::GetContentRegionAvail().x, cut);
    if (!title_inside) ImGui::TextDisabled("%s", title_shown.c_str());
    ImGui::PlotHistogram("##hist", shown.hist.data(), int(shown.hist.size()), 0, title_inside ? title_shown.c_str() : nullptr, 0.f, FLT_MAX,
                         ImVec2(std::max(60.f, ImGui::GetContentRegionAvail().x), hist_h));
    // the axis under it, recorded as a label of the panel's visible part (the sweep: never cut off)
    const std::string axis = fmt(shown.min) + "  ...  " + fmt(shown.max);
    const ImVec2 at = ImGui::GetCursorScreenPos();
    ImGui::TextDisabled("%s", axis.c_str());
    pr.text("stats.hist", axis, Rect{at.x, at.y, ImGui::GetItemRectSize().x, ImGui::GetItemRectSize().y},
            clip_rect(ImGui::GetWindowDrawList()));
    if (beside) ImGui::EndGroup();
}

// A horizontal bar per class, its name on the left and value on the right (all of them up to 30,
// else the 20 largest by magnitude, said so), on an axis with its figures. Signed values (logits)
// take the diverging map's colours, as the heatmap above them: red above 0, blue below;
// probabilities the predictions' colour.
void class_bars(const float* v, size_t n, const Config& c, Probe& pr, bool probabilities) {
    std::vector<std::string> names = class_labels(c, n);
    std::vector<int> idx(n);
    for (size_t i = 0; i < n; ++i) idx[i] = int(i);
    const float th0 = ImGui::GetTextLineHeight();
    // the rows the panel has room for (under the header line, above the axis)
    const size_t fit = size_t(std::max(3.f, (ImGui::GetContentRegionAvail().y - 3 * th0 - 16) / (th0 + 4)));
    size_t shown = n;
    if (n > 30 || n > fit) {
        shown = std::min<size_t>({20, fit, n});
        std::partial_sort(idx.begin(), idx.begin() + long(shown), idx.end(),
                          [&](int a, int b) { return std::fabs(v[a]) > std::fabs(v[b]) || (std::fabs(v[a]) == std::fabs(v[b]) && a < b); });
        ImGui::TextDisabled("the %zu largest of %zu classes by magnitude", shown, n);
    }
    float lo = 0, hi = 0;
    for (size_t k = 0; k < shown; ++k)
        if (std::isfinite(v[idx[k]])) { lo = std::min(lo, v[idx[k]]); hi = std::max(hi, v[idx[k]]); }
    if (probabilities) { lo = 0; hi = std::max(hi, 1e-6f); }
    if (hi - lo <= 0) hi = lo + 1;
    const float th = ImGui::GetTextLineHeight(), rowh = th + 4;
    float name_w = 0, val_w = 0;
    for (size_t k = 0; k < shown; ++k) {
        name_w = std::max(name_w, ImGui::CalcTextSize(names[idx[k]].c_str()).x);
        val_w = std::max(val_w, ImGui::CalcTextSize(fmt(v[idx[k]]).c_str()).x);
    }
    ImVec2 o = ImGui::GetCursorScreenPos();
    float W = ImGui::GetContentRegionAvail().x;
    name_w = std::min(name_w, W * 0.35f);  // long ImageNet names are cut (in full in the heatmap's column names)
    float bar0 = o.x + name_w + 10, bar_w = std::max(40.f, W - name_w - val_w - 30);
    float scale = bar_w / (hi - lo), zero = bar0 + (0 - lo) * scale;
    ImGui::Dummy(ImVec2(W, rowh * float(shown) + th + 8));
    ImDrawList* dl = ImGui::GetWindowDrawList();
    Rect clip = clip_rect(dl);
    ImU32 tc = ImGui::GetColorU32(ImGuiCol_Text);
    for (size_t k = 0; k < shown; ++k) {
        int i = idx[k];
        float y = o.y + rowh * float(k);
        std::string nm = names[size_t(i)];
        while (nm.size() > 1 && ImGui::CalcTextSize(nm.c_str()).x > name_w) nm = nm.substr(0, nm.size() - 4) + "...";
        DrawLabel(dl, pr, "bars.names", ImVec2(o.x, y + 2), tc, nm, clip);
        const float val = std::isfinite(v[i]) ? v[i] : 0.f;
        float x0 = std::min(zero, zero + val * scale), x1 = std::max(zero, zero + val * scale);
        const ImU32 col = probabilities ? IM_COL32(230, 179, 0, 255) : signed_colour(val);
        dl->AddRectFilled(ImVec2(x0, y + 3), ImVec2(std::max(x1, x0 + 1), y + rowh - 1), col);
        pr.rects["bar." + std::to_string(i)] = Rect{x0, y + 3, x1 - x0, rowh - 4};
        DrawLabel(dl, pr, "bars.values", ImVec2(bar0 + bar_w + 8, y + 2), tc, fmt(v[i]), clip);
    }
    const float ybot = o.y + rowh * float(shown);
    dl->AddLine(ImVec2(zero, o.y), ImVec2(zero, ybot), IM_COL32(200, 200, 200, 200));
    // the axis: its ends and 0, under the bars
    const ImU32 ac = ImGui::GetColorU32(ImGuiCol_TextDisabled);
    dl->AddLine(ImVec2(bar0, ybot + 2), ImVec2(bar0 + bar_w, ybot + 2), ac);
    float free_x = bar0 - 1e9f;
    for (float f : {lo, 0.f, hi}) {
        const float x = bar0 + (f - lo) * scale;
        dl->AddLine(ImVec2(x, ybot + 2), ImVec2(x, ybot + 6), ac);
        const std::string t = fmt(f);
        const float tw = ImGui::CalcTextSize(t.c_str()).x;
        const float lx = std::clamp(x - tw / 2, bar0, bar0 + bar_w - tw);
        if (lx < free_x) continue;
        DrawLabel(dl, pr, "bars.axis", ImVec2(lx, ybot + 6), ac, t, clip);
        free_x = lx + tw + 8;
        if (f == lo && lo == 0) continue;
    }
    pr.numbers["bars.zero_x"] = zero;
    pr.numbers["bars.px_per_unit"] = scale;
    pr.numbers["bars.shown"] = double(shown);
}

// One bar per value of a vector (pooled, a mean row), on a vertical axis with its figures: red above
// 0, blue below (the diverging map's colours).
void value_bars(const float* v, size_t n, Probe& pr) {
    float lo = 0, hi = 0;
    for (size_t i = 0; i < n; ++i)
        if (std::isfinite(v[i])) { lo = std::min(lo, v[i]); hi = std::max(hi, v[i]); }
    if (hi - lo <= 0) hi = lo + 1;
    const float th = ImGui::GetTextLineHeight();
    const ImVec2 o = ImGui::GetCursorScreenPos();
    const float H = 110, axis_w = std::max(ImGui::CalcTextSize(fmt(lo).c_str()).x, ImGui::CalcTextSize(fmt(hi).c_str()).x) + 8;
    const float W = ImGui::GetContentRegionAvail().x;
    ImGui::Dummy(ImVec2(W, H + th));
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const Rect clip = clip_rect(dl);
    const float x0 = o.x + axis_w, w = std::max(20.f, W - axis_w - 4), y0 = o.y + th / 2;
    const float scale = H / (hi - lo), zero = y0 + hi * scale;
    const float bw = w / float(n);
    for (size_t i = 0; i < n; ++i) {
        const float val = std::isfinite(v[i]) ? v[i] : 0.f;
        const float ya = std::min(zero, zero - val * scale), yb = std::max(zero, zero - val * scale);
        dl->AddRectFilled(ImVec2(x0 + bw * float(i), ya), ImVec2(x0 + bw * float(i + 1) + 0.3f, std::max(yb, ya + 1)), signed_colour(val));
    }
    const ImU32 ac = ImGui::GetColorU32(ImGuiCol_TextDisabled);
    dl->AddLine(ImVec2(x0, zero), ImVec2(x0 + w, zero), IM_COL32(200, 200, 200, 200));
    dl->AddLine(ImVec2(x0 - 2, y0), ImVec2(x0 - 2, y0 + H), ac);
    for (float f : {hi, 0.f, lo}) {
        const float y = zero - f * scale;
        if (f == 0 && (std::fabs(y - y0) < th || std::fabs(y - (y0 + H)) < th)) continue;
        DrawLabel(dl, pr, "vbars.axis", ImVec2(o.x, y - th / 2), ac, fmt(f), clip);
    }
}

// Why a stage has no recorded gradient (the backward pass's own structure, said plainly).
std::string no_grad_reason(const StageInfo& s) {
    if (s.ln != LnSite::None && (ln_part(s.id.kind) == LnPart::Mean || ln_part(s.id.kind) == LnPart::Std))
        return "the backward pass goes through LayerNorm in one step (d normalized -> d x), so the per-token mean and "
               "std get no gradient of their own";
    if (s.id.kind == StageKind::Probs)
        return "the gradient is of a logit, before the softmax: probs is computed from the logits, so no gradient "
               "flows into it";
    return "the stage table gives " + s.name + " no gradient (the backward pass does not record it)";
}

void draw_grads_missing(Session& s, Probe& pr, const std::string& why) {
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s.", why.c_str());
    ImGui::PopTextWrapPos();
    pr.strings["stage.message"] = why;
    if (s.can_compute_grads()) {
        if (ImGui::Button("Compute gradients for this model")) s.set_grad_mode(GradMode::On);
        pr.rects["compute_grads"] = Rect{ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y, ImGui::GetItemRectSize().x,
                                         ImGui::GetItemRectSize().y};
        ImGui::PushTextWrapPos(0);
        if (s.grad_plan().on_demand)
            ImGui::TextDisabled("(from now on every pass runs a backward pass too, checkpointed: each block's stages computed "
                                "once more, a block's gradients recomputed when shown)");
        else
            ImGui::TextDisabled("(one backward pass per forward pass from now on; slower for large models)");
        ImGui::PopTextWrapPos();
    }
}


}  // namespace vit::app
