// The Changes tab: how far each stage moved from the baseline run (session.cpp base_options: the
// default options at the same input size; with interventions, the same options without them: over
// the tokens kept when patches were dropped), ||now - baseline|| / ||baseline|| per
// stage on a labelled scale, and the difference of the current stage as a heatmap on the diverging
// map (white is no change). The tab opens on the first stage that changed.
#include "app/probe.h"
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "app/tabs/tab.h"
#include "app/tensor_access.h"

namespace vit::app {

namespace {

double relative(const StageChange& c) { return c.base_norm > 0 ? c.diff_norm / c.base_norm : (c.diff_norm > 0 ? 1 : 0); }

class ChangesTab : public TabView {
public:
    void draw(ViewCtx& v) override {
        Session& s = v.s;
        UiState& ui = v.ui;
        Probe& pr = v.probe;
        const Result& r = s.result();
        // shown this frame after a frame without it: the tab was just opened
        const int frame = ImGui::GetFrameCount();
        const bool opened = last_frame_ != frame - 1;
        last_frame_ = frame;
        if (!r.trace || !r.base) {
            ImGui::TextDisabled("%s", !s.has_image() ? "No image is loaded, so there is nothing to compare." : "Running the model...");
            return;
        }
        // the options of the trace on screen (a pass with newer ones may be running)
        const Options& opt = s.shown_options();
        const Options base = base_options(opt);
        pr.strings["changes.options"] = opt.describe();
        const bool iv = !opt.iv.empty();  // then the baseline is the same options without interventions
        pr.strings["changes.baseline"] = iv ? "the run without interventions, same options (" + base.describe() + ")" +
                                                  (opt.iv.dropped.empty() ? "" : "; over the tokens kept")
                                            : "the default options at the same input size, no interventions (" + base.describe() + ")";
        ImGui::PushTextWrapPos(0);
        if (opt == base) {
            ImGui::TextWrapped("The options are at their defaults (LayerNorm with elementwise_affine, biased std, the model's "
                               "pooling, no BUG switch). Toggle one in the toolbar (keys A, U, B, R) and this view shows, stage "
                               "by stage, how far each tensor moved from the default run.");
            ImGui::TextDisabled("the trace on screen: %s", opt.describe().c_str());
            ImGui::PopTextWrapPos();
            return;
        }
        // every stage of both runs compared: for traces on demand, in a job that recomputes their
        // blocks one at a time (the list waits for it: no stage is shown as unchanged before it is compared)
        const ChangesState cs = s.changes();
        if (!cs.list) {
            const std::string why = cs.pending ? "Comparing every stage with the baseline: the stages are computed on "
                                                 "demand for this model, so each block of both runs is recomputed for it..."
                                               : "The comparison with the baseline failed: " + cs.error;
            ImGui::TextWrapped("%s", why.c_str());
            ImGui::PopTextWrapPos();
            if (cs.pending) ImGui::ProgressBar(cs.progress, ImVec2(std::min(320.f, ImGui::GetContentRegionAvail().x), 0));
            pr.strings[cs.pending ? "changes.pending" : "changes.message"] = why;
            return;
        }
        const bool fresh = keys_.stale("changes", s.version());
        const std::vector<StageChange>& ch = *cs.list;
        ImGui::Text("How far each stage moved: ||now - baseline|| / ||baseline||");
        ImGui::TextDisabled("baseline: %s", pr.strings["changes.baseline"].c_str());
        ImGui::TextDisabled("now: %s", opt.describe().c_str());
        ImGui::PopTextWrapPos();
        // the first stage that changed: where the tab opens (and goes after a new run) when the
        // current stage did not change
        int first = -1, largest = -1;
        double top = 0;
        for (size_t i = 0; i < ch.size(); ++i) {
            const double rel = relative(ch[i]);
            if (ch[i].diff_norm > 0 && first < 0) first = int(i);
            if (ch[i].diff_norm > 0 && rel > top) largest = int(i);
            top = std::max(top, rel);
        }
        // the stage the tab opens on: the first that changed, or with the list largest first, the largest
        const int open_on = ui.changes_largest_first && largest >= 0 ? largest : first;
        const auto shown0 = shown_stage(s, ui);
        if ((opened || fresh) && first >= 0 && shown0) {
            auto it = std::find_if(ch.begin(), ch.end(), [&](const StageChange& c) { return c.id == shown0->info->id; });
            if (it == ch.end() || it->diff_norm == 0 || ui.changes_largest_first) select_stage(ui, *r.trace, ch[size_t(open_on)].id);
            scroll_to_ = true;
        }
        if (first >= 0) {
            pr.strings["changes.first"] = ch[size_t(first)].name;
        } else {
            ImGui::PushTextWrapPos(0);
            ImGui::TextColored(ImVec4(0.6f, 0.9f, 0.6f, 1), "Nothing changed: every stage equals the baseline's, value for value.");
            // and why (issue 36 item 2): a toggle that changes nothing says so on screen
            const auto m = s.shown_model();
            const std::string why = m ? why_nothing_changed(m->weights, opt, base) : "";
            if (!why.empty()) ImGui::TextWrapped("Why: %s.", why.c_str());
            ImGui::PopTextWrapPos();
            pr.strings["changes.same"] = "nothing changed";
            pr.strings["changes.nothing"] = "nothing changed";  // (changes.same is then the shown stage's)
            pr.strings["changes.why"] = why;
        }
        pr.numbers["changes.scale_max"] = top;
        // the list's order (issue 36 item 5): as the stages run, or the largest change first; which is said
        {
            int order = ui.changes_largest_first ? 1 : 0;
            ImGui::TextUnformatted("Order:");
            ImGui::SameLine();
            if (ImGui::RadioButton("pipeline", &order, 0)) ui.changes_largest_first = false;
            ImGui::SameLine();
            if (ImGui::RadioButton("largest first", &order, 1)) ui.changes_largest_first = true;
            ImGui::SameLine();
            const char* said = ui.changes_largest_first ? "shown: largest relative change first (ties in pipeline order)"
                                                        : "shown: in the order the stages run";
            ImGui::TextDisabled("%s", said);
            pr.strings["changes.order"] = ui.changes_largest_first ? "largest first" : "pipeline";
        }
        std::vector<size_t> rows(ch.size());
        for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
        if (ui.changes_largest_first)
            std::stable_sort(rows.begin(), rows.end(), [&](size_t a, size_t b) { return relative(ch[a]) > relative(ch[b]); });
        {
            std::string names;
            for (size_t i : rows) names += (names.empty() ? "" : ",") + ch[i].name;
            pr.strings["changes.rows"] = names;
        }
        const float list_w = std::clamp(ImGui::GetContentRegionAvail().x * 0.42f, 290.f, 460.f);
        const float bar_w = std::min(140.f, list_w * 0.28f), th = ImGui::GetTextLineHeight();
        const float diff_x = ImGui::GetCursorScreenPos().x + list_w + ImGui::GetStyle().ItemSpacing.x;
        const float top_y = ImGui::GetCursorScreenPos().y;
        {
            // the bars' scale, above the list: 0 at the left, the largest change at the right, labelled
            ImDrawList* dl = ImGui::GetWindowDrawList();
            const ImVec2 o(ImGui::GetCursorScreenPos().x + ImGui::GetStyle().WindowPadding.x, ImGui::GetCursorScreenPos().y);
            ImGui::Dummy(ImVec2(list_w, th + 8));
            const Rect clip{o.x, o.y, list_w, th + 8};
            const ImU32 tc = ImGui::GetColorU32(ImGuiCol_TextDisabled);
            const std::string hi = fmt(float(top));
            dl->AddLine(ImVec2(o.x, o.y + th + 3), ImVec2(o.x + bar_w, o.y + th + 3), tc);
            for (float f : {0.f, 0.5f, 1.f}) dl->AddLine(ImVec2(o.x + f * bar_w, o.y + th), ImVec2(o.x + f * bar_w, o.y + th + 6), tc);
            DrawLabel(dl, pr, "changes.axis", ImVec2(o.x, o.y), tc, "0", clip);
            const float hw = ImGui::CalcTextSize(hi.c_str()).x;
            DrawLabel(dl, pr, "changes.axis", ImVec2(o.x + bar_w - hw, o.y), tc, hi, clip);
            DrawLabel(dl, pr, "changes.axis", ImVec2(o.x + bar_w + 6, o.y), tc, "relative change, stage", clip);
            pr.rects["changes.axis"] = Rect{o.x, o.y + th + 3, bar_w, 1};
        }
        ImGui::BeginChild("list", ImVec2(list_w, 0), true);
        const auto shown = shown_stage(s, ui);
        const auto value_text = [&](const auto& c) { return c.diff_norm == 0 ? std::string("0 (same)") : fmt(float(relative(c))); };
        // block stages by their full names, or all of them as "L3 attn.pattern" when one full name does not fit
        // (not a mix of the two forms down the list)
        bool short_names = false;
        {
            const Rect lc = clip_rect(ImGui::GetWindowDrawList());
            const float room = lc.x + lc.w - (ImGui::GetCursorScreenPos().x + bar_w + 6);
            for (auto& c : ch)
                if (c.id.layer >= 0 && ImGui::CalcTextSize((value_text(c) + "  " + c.name).c_str()).x > room) {
                    short_names = true;
                    break;
                }
        }
        for (size_t row : rows) {
            const StageChange& c = ch[row];
            const double rel = relative(c);
            const bool sel = shown && shown->info->id == c.id;
            ImGui::PushID(c.name.c_str());
            const ImVec2 o = ImGui::GetCursorScreenPos();
            if (ImGui::Selectable("##s", sel, 0, ImVec2(0, th + 2))) select_stage(ui, *r.trace, c.id);
            if (sel && scroll_to_) { ImGui::SetScrollHereY(0.3f); scroll_to_ = false; }
            ImDrawList* dl = ImGui::GetWindowDrawList();
            const float len = top > 0 ? float(rel / top) * bar_w : 0.f;
            dl->AddRectFilled(ImVec2(o.x, o.y + 3), ImVec2(o.x + bar_w, o.y + th - 1), IM_COL32(45, 50, 60, 255));
            if (len > 0) dl->AddRectFilled(ImVec2(o.x, o.y + 3), ImVec2(o.x + std::max(1.f, len), o.y + th - 1), IM_COL32(120, 170, 230, 255));
            pr.rects["changes.bar." + c.name] = Rect{o.x, o.y + 3, len, th - 4};
            // the value and the stage's name
            const std::string val = value_text(c);
            const Rect lc = clip_rect(dl);
            const float room = lc.x + lc.w - (o.x + bar_w + 6);
            std::string label = val + "  " + c.name;
            if (short_names && c.id.layer >= 0) label = val + "  L" + std::to_string(c.id.layer) + " " + stage_local_name(c.id);
            bool cut = false;
            label = fit_text(label, room, cut);  // still too long: cut with "...", the full name in the tooltip
            if (cut && v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("%s: %s", c.name.c_str(), val.c_str());
            const ImU32 col = ImGui::GetColorU32(c.diff_norm == 0 ? ImGuiCol_TextDisabled : ImGuiCol_Text);
            if (o.y >= lc.y - 0.5f && o.y + th <= lc.y + lc.h + 0.5f)  // a row in view (the list scrolls)
                DrawLabel(dl, pr, "changes.list", ImVec2(o.x + bar_w + 6, o.y), col, label, lc);
            else
                dl->AddText(ImVec2(o.x + bar_w + 6, o.y), col, label.c_str());
            ImGui::PopID();
        }
        ImGui::EndChild();
        ImGui::SetCursorScreenPos(ImVec2(diff_x, top_y));
        draw_difference(v);
    }

    // The difference of the stage shown, now - baseline, on the diverging map (white: no change), beside the list.
    void draw_difference(ViewCtx& v) {
        Session& s = v.s;
        UiState& ui = v.ui;
        Probe& pr = v.probe;
        const Result& r = s.result();
        ImGui::BeginChild("diffmap", ImVec2(0, 0), false, ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
        const auto e = shown_stage(s, ui);
        // with patches dropped, the baseline's rows of the tokens kept (analysis.h comparable_base)
        const Array base_kept = e ? comparable_base(*r.base, *r.trace, e->info->id) : Array();
        const Array* base_arr = e && r.base->find(e->info->id) ? &base_kept : nullptr;
        if (e && base_arr && base_arr->size() && same_shape(*base_arr, *e->value)) {
            if (keys_.stale("diffvals", s.version() * 1000003ull + std::hash<std::string>{}(e->info->name)))
                diff_vals_ = difference(*e->value, *base_arr);
            const Array& d = diff_vals_;
            ImGui::PushTextWrapPos(0);
            ImGui::Text("now - baseline: %s", e->info->name.c_str());
            ImGui::PopTextWrapPos();
            // a 3-D stage shows one slice: which one is said, and chosen here
            if (rank(d) == 3) {
                const bool heads = e->info->per_head;
                int& sel = heads ? ui.head : ui.channel;
                const int S = int(extent(d, 0));
                sel = std::clamp(sel, 0, S - 1);
                const std::string label = heads ? "head (H / Shift+H)" : "channel";
                Flow flow;
                const float sw = std::min(160.f, ImGui::GetContentRegionAvail().x * 0.5f);
                flow.next(Flow::labelled_w(sw, label.c_str()));
                ImGui::SetNextItemWidth(sw);
                ImGui::SliderInt(label.c_str(), &sel, 0, S - 1);
                const std::string which = std::string(heads ? "head " : "channel ") + std::to_string(sel) + " of " + std::to_string(S);
                const std::string shown_text = "shown: " + which;
                flow.next(Flow::text_w(shown_text.c_str()));
                ImGui::TextDisabled("%s", shown_text.c_str());
                pr.strings["changes.slice"] = which;
            }
            double m = 0;
            for (size_t i = 0; i < d.size(); ++i)
                if (std::isfinite(d.data()[i])) m = std::max(m, double(std::fabs(d.data()[i])));
            pr.numbers["changes.max_abs"] = m;
            if (m == 0) {
                const std::string why = e->info->name + " did not change: every value equals the baseline's (white is 0)";
                ImGui::PushTextWrapPos(0);
                ImGui::TextColored(ImVec4(0.6f, 0.9f, 0.6f, 1), "%s.", why.c_str());
                ImGui::PopTextWrapPos();
                pr.strings["changes.same"] = why;
            } else {
                ImGui::PushTextWrapPos(0);
                ImGui::TextDisabled("white: no change;  red: now larger;  blue: now smaller (max |difference| %s)", fmt(float(m)).c_str());
                ImGui::PopTextWrapPos();
            }
            StageInfo info = *e->info;
            info.signed_values = true;
            HeatmapArgs a;
            a.colorbar = true; a.rect_name = "diff"; a.zoomable = false;
            a.quantity = Quantity::Difference;  // symmetric around 0 over the whole difference
            if (rank(d) == 1) a.max_h = 120;
            a.raise_rows = true;  // a wide difference (CLIP's ln_pre.out, 50 x 768) stays readable beside the list
            tensor_heatmap(v, "diff", e->info->name + "#diff", d, info, diff_, a, false);
        } else if (e) {
            std::string why = !base_arr ? e->info->name + " is not in the baseline run (the options add or remove it)"
                                        : e->info->name + " has a different shape in the baseline run";
            ImGui::TextDisabled("No difference map: %s.", why.c_str());
            pr.strings["changes.message"] = why;
        }
        ImGui::EndChild();
    }

    // The sweep: the list in both orders, with an option off (issue 36 item 5); a view that says nothing
    // changed says why (item 2).
    void sweep_states(SweepPlan& plan) override {
        const Options base = plan.base;
        for (bool largest : {true, false})
            plan.add(std::string("changes, affine off, ") + (largest ? "largest first" : "pipeline order"), [base, largest](Session& s, UiState& ui) {
                Options o = base;
                o.affine = false;
                s.set_options(o);
                ui.tab = Tab::Changes;
                ui.changes_largest_first = largest;
            });
        plan.add("changes, options back", [base](Session& s, UiState&) { s.set_options(base); });
    }
    void sweep_check(const Session&, const UiState& ui, const Probe& p, const SweepFail& fail) const override {
        if (!p.string("changes.nothing").empty() && p.string("changes.why").empty())
            fail("the Changes tab says nothing changed and not why");
        const std::string rows = p.string("changes.rows");
        if (rows.empty()) return;
        const std::string order = p.string("changes.order");
        if (order != (ui.changes_largest_first ? "largest first" : "pipeline"))
            fail("the Changes tab does not say which order its list is in (" + order + ")");
        if (!ui.changes_largest_first) return;
        // largest first: every bar as long as the next one's, or longer
        float prev = 1e30f;
        size_t at = 0;
        while (at <= rows.size()) {
            const size_t end = std::min(rows.find(',', at), rows.size());
            const auto r = p.rects.find("changes.bar." + rows.substr(at, end - at));
            if (r != p.rects.end()) {
                if (r->second.w > prev + 0.5f) {
                    fail("the Changes tab's list is not largest first at " + rows.substr(at, end - at));
                    return;
                }
                prev = r->second.w;
            }
            at = end + 1;
        }
    }

private:
    int last_frame_ = -10;
    bool scroll_to_ = false;  // the list scrolls to the stage the tab opened on
    CacheKeys keys_;
    Array diff_vals_;
    HeatmapCache diff_;
};

}  // namespace

std::unique_ptr<TabView> make_changes_tab(JobQueue&) { return std::make_unique<ChangesTab>(); }

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_changes() {
    using K = ProbeKind;
    return {
        {K::String, "changes.message", "why the Changes tab shows no difference map"},
        {K::String, "changes.pending", "the comparison is being computed (stages on demand): what the tab says meanwhile"},
        {K::String, "changes.options", "the options the difference is of"},
        {K::String, "changes.{baseline|first|slice|same}", "the baseline's options, the first stage that changed, the slice shown, why the map is white"},
        {K::String, "changes.{nothing|why|order|rows}", "'nothing changed' (no stage moved); why (the options cannot act on this model); the list's order "
                                                "(pipeline or largest first); its stages in the order shown"},
        {K::Number, "changes.{scale_max|max_abs}", "the bars' scale (the largest relative change); the map's largest |difference|"},
        {K::Rect, "changes.axis", "the bars' axis"},
        {K::Rect, "changes.bar.<stage>", "a stage's bar"},
        {K::Group, "changes.{axis|list}", "the bars' axis figures; the values and stage names"},
    };
}

}  // namespace vit::app
