// The navigator: every stage of the trace in execution order, grouped by block, with the layer slider.
#include "probe.h"
#include <algorithm>
#include <string>

#include "tabs/tab.h"
#include "tensor_access.h"
#include "views.h"
#include "interventions_ui.h"

namespace vit::app {

void DrawNavigator(ViewCtx& v) {
    Session& s = v.s;
    UiState& ui = v.ui;
    const Trace* t = s.trace();
    if (!t) {
        ImGui::TextWrapped("%s", s.loading() ? "Loading the model..." : s.has_image() ? "Running the model..." : "No image loaded: nothing has run yet.");
        return;
    }
    const Config& c = s.shown_config();
    int L = c.depth;
    ImGui::TextDisabled("Pipeline (%zu stages)", t->size());
    ImGui::SetNextItemWidth(-1);
    const auto e = shown_stage(s, ui);
    int layer = e ? e->info->layer : -1;
    int lsel = std::max(0, layer);
    // outside the blocks (embedding, head) the shown stage has no layer: the slider says so, and
    // what dragging it does
    const char* lfmt = layer < 0 ? "no layer (drag: block %d)" : "layer %d";
    if (L > 0 && e) {
        char shown_text[64];
        std::snprintf(shown_text, sizeof shown_text, lfmt, lsel);
        v.probe.strings["navigator.layer"] = shown_text;
    }
    if (L > 0 && e && ImGui::SliderInt("##layer", &lsel, 0, L - 1, lfmt)) {
        // the same stage in the chosen block (from outside the blocks: that block's attention pattern)
        const StageKind k = layer < 0 ? StageKind::AttnPattern : e->info->id.kind;
        select_stage(ui, *t, StageId{k, lsel});
    }
    const size_t shown_row = e ? e->row : 0;
    ImGui::BeginChild("stages", ImVec2(0, 0), false);
    int last_layer = -2;
    bool open = true;
    for (size_t i = 0; i < t->size(); ++i) {
        const StageInfo& en = t->info(i);
        if (en.layer != last_layer) {
            if (last_layer >= 0 && open) ImGui::TreePop();
            last_layer = en.layer;
            if (en.layer >= 0) {
                ImGui::SetNextItemOpen(en.layer == layer || L <= 2, ImGuiCond_Always);
                open = ImGui::TreeNodeEx(("Block " + std::to_string(en.layer)).c_str(), ImGuiTreeNodeFlags_SpanAvailWidth);
                if (open) NavigatorHeads(v, en.layer);  // knock a head of this block out
            } else {
                open = true;
                ImGui::TextDisabled(i == 0 ? "Embedding" : "Head");
            }
        }
        if (!open) continue;
        const bool sel = i == shown_row;
        // the patch embedding's norm (AIMv2) under it, named within it as a block's stages are within their block
        // (its full name in the tooltip): "patch_embed.norm.normalized" is wider than the list at 1280x800
        // (and EVA-02's norm inside the MLP under mlp: "norm.normalized")
        const std::string local = stage_local_name(en.id);
        const size_t cut = en.layer < 0 && local.rfind("patch_embed.", 0) == 0 ? 12
                           : en.layer >= 0 && local.rfind("mlp.norm.", 0) == 0 ? 4 : 0;
        const bool sub = cut > 0;
        if (sub) ImGui::Indent();
        if (ImGui::Selectable((local.substr(cut) + "##" + std::to_string(i)).c_str(), sel)) select_row(ui, *t, i);
        if (sub) ImGui::Unindent();
        if (sel && ImGui::IsWindowAppearing()) ImGui::SetScrollHereY();
        if (v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("%s %s", en.name.c_str(), shape_text(t->at(i)).c_str());
    }
    if (last_layer >= 0 && open) ImGui::TreePop();
    ImGui::EndChild();
}

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_navigator() {
    using K = ProbeKind;
    return {
        {K::String, "navigator.layer", "the stage list's layer slider as it reads (no layer outside the blocks)"},
    };
}

}  // namespace vit::app
