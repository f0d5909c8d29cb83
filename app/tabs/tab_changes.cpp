// The Changes tab: how far each stage moved from the default options' run, ||now - default|| /
// ||default|| per stage, and the difference of the current stage as a heatmap.
#include <imgui.h>

#include <algorithm>
#include <functional>

#include "app/tabs/tab.h"
#include "app/tensor_access.h"

namespace vit::app {

namespace {

class ChangesTab : public TabView {
public:
    void draw(ViewCtx& v) override {
        Session& s = v.s;
        UiState& ui = v.ui;
        Probe& pr = v.probe;
        const Result& r = s.result();
        if (!r.trace || !r.base) {
            ImGui::TextDisabled("%s", !s.has_image() ? "No image is loaded, so there is nothing to compare." : "Running the model...");
            return;
        }
        // the options of the trace on screen (a pass with newer ones may be running)
        const Options& opt = s.shown_options();
        pr.strings["changes.options"] = opt.describe();
        const bool iv = !opt.iv.empty();  // then the comparison is with the same options without interventions
        const char* against = iv ? "the run without interventions" : "the default options";
        if (opt == base_options(opt)) {
            ImGui::TextWrapped("The options are at their defaults (LayerNorm with elementwise_affine, biased std). "
                               "Toggle them in the toolbar (keys A and U) and this view shows, stage by stage, "
                               "how far each tensor moved from the default run.");
            ImGui::TextDisabled("the trace on screen: %s", opt.describe().c_str());
            return;
        }
        if (keys_.stale("changes", s.version())) changes_ = trace_changes(*r.base, *r.trace);
        const std::vector<StageChange>& ch = changes_;
        ImGui::Text("Change from %s, per stage: ||now - %s|| / ||%s||", against, iv ? "clean" : "default",
                    iv ? "clean" : "default");
        ImGui::TextDisabled("now: %s", opt.describe().c_str());
        if (iv) ImGui::TextDisabled("against: %s (patches dropped: over the tokens kept)", r.base->options().describe().c_str());
        ImGui::BeginChild("list", ImVec2(420, 0), true);
        const auto shown = shown_stage(s, ui);
        for (auto& c : ch) {
            double rel = c.base_norm > 0 ? c.diff_norm / c.base_norm : (c.diff_norm > 0 ? 1 : 0);
            const bool sel = shown && shown->info->id == c.id;
            ImGui::PushID(c.name.c_str());
            if (ImGui::Selectable("##s", sel, 0, ImVec2(0, 18))) select_stage(ui, *r.trace, c.id);
            ImGui::SameLine(4);
            ImGui::ProgressBar(float(std::min(1.0, rel)), ImVec2(110, 16), "");
            ImGui::SameLine();
            ImGui::Text("%6.3f  %s", rel, c.name.c_str());
            ImGui::PopID();
        }
        ImGui::EndChild();
        ImGui::SameLine();
        ImGui::BeginChild("diffmap", ImVec2(0, 0), false, ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
        const auto e = shown;
        const Array base_kept = e ? comparable_base(*r.base, *r.trace, e->info->id) : Array();
        const Array* base_arr = e && r.base->find(e->info->id) ? &base_kept : nullptr;
        if (e && base_arr && base_arr->size() && same_shape(*base_arr, *e->value)) {
            if (keys_.stale("diffvals", s.version() * 1000003ull + std::hash<std::string>{}(e->info->name)))
                diff_vals_ = difference(*e->value, *base_arr);
            const Array& d = diff_vals_;
            ImGui::Text("now - %s: %s", iv ? "clean" : "default", e->info->name.c_str());
            StageInfo info = *e->info;
            info.signed_values = true;
            ScaleMode saved = ui.scale_mode;
            ui.scale_mode = ScaleMode::Symmetric;
            HeatmapArgs a;
            a.colorbar = true; a.rect_name = "diff"; a.zoomable = false;
            if (rank(d) == 1) a.max_h = 120;
            tensor_heatmap(v, "diff", e->info->name + "#diff", d, info, diff_, a, false);
            ui.scale_mode = saved;
        } else if (e) {
            std::string why = !base_arr ? e->info->name + " is not in " + against + " (the options add or remove it)"
                                        : e->info->name + " has a different shape in " + against;
            ImGui::TextDisabled("No difference map: %s.", why.c_str());
            pr.strings["changes.message"] = why;
        }
        ImGui::EndChild();
    }

private:
    CacheKeys keys_;
    std::vector<StageChange> changes_;
    Array diff_vals_;
    HeatmapCache diff_;
};

}  // namespace

std::unique_ptr<TabView> make_changes_tab(JobQueue&) { return std::make_unique<ChangesTab>(); }

}  // namespace vit::app
