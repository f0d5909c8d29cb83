#include "probe.h"
#include "heads_prompt.h"

#include <imgui.h>

#include <algorithm>
#include <filesystem>
#include <string>

namespace vit::app {

namespace {
constexpr const char* kTitle = "How many attention heads?###heads_prompt";

Rect item_rect() {
    ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
    return Rect{a.x, a.y, b.x - a.x, b.y - a.y};
}
}  // namespace

void DrawHeadsPrompt(ViewCtx& v) {
    Session& s = v.s;
    Probe& pr = v.probe;
    const std::optional<HeadsRequest>& rq = s.heads_request();
    if (!rq) return;
    const HeadsRequest r = *rq;  // a copy: answering clears the request
    if (!ImGui::IsPopupOpen(kTitle)) ImGui::OpenPopup(kTitle);
    ImGuiIO& io = ImGui::GetIO();
    const float w = std::min(620.f, io.DisplaySize.x - 40);
    ImGui::SetNextWindowPos(ImVec2(io.DisplaySize.x * 0.5f, io.DisplaySize.y * 0.5f), ImGuiCond_Always, ImVec2(0.5f, 0.5f));
    ImGui::SetNextWindowSize(ImVec2(w, 0));
    ImGui::PushStyleColor(ImGuiCol_PopupBg, IM_COL32(36, 38, 46, 255));  // opaque: nothing shows through the text
    if (!ImGui::BeginPopupModal(kTitle, nullptr, ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                                                     ImGuiWindowFlags_AlwaysAutoResize)) {
        ImGui::PopStyleColor();
        return;
    }
    const std::string file = std::filesystem::path(r.spec).filename().string();
    ImGui::PushTextWrapPos(w - 16);
    ImGui::Text("%s does not say how many attention heads it has.", file.c_str());
    ImGui::TextDisabled("Not in the file's metadata, not in a config.json beside it, and its shapes are not a "
                        "published ViT's. The heads split the width %d into equal parts; the wrong number gives "
                        "wrong attention, so ViTScope does not guess. Pick the count the model was trained with "
                        "(its model card or code says, e.g. num_heads=...). On the command line: --heads N.",
                        r.width);
    ImGui::PopTextWrapPos();
    ImGui::Spacing();
    std::string line = "Heads (head size = " + std::to_string(r.width) + " / heads):";
    ImGui::TextUnformatted(line.c_str());
    int chosen = 0;
    const float avail = ImGui::GetContentRegionAvail().x;
    float x = 0;
    for (int n : r.choices) {
        std::string label = std::to_string(n) + " (d " + std::to_string(r.width / n) + ")##h" + std::to_string(n);
        const float bw = ImGui::CalcTextSize(label.c_str(), nullptr, true).x + 2 * ImGui::GetStyle().FramePadding.x;
        if (x > 0 && x + bw <= avail) ImGui::SameLine();
        else x = 0;
        if (ImGui::Button(label.c_str())) chosen = n;
        pr.rects["heads.choice." + std::to_string(n)] = item_rect();
        x += bw + ImGui::GetStyle().ItemSpacing.x;
    }
    ImGui::Spacing();
    const std::string cancel_label = "Cancel: keep " + s.model_spec();
    const bool cancel = ImGui::Button(cancel_label.c_str());
    pr.rects["heads.cancel"] = item_rect();
    ImVec2 pos = ImGui::GetWindowPos(), sz = ImGui::GetWindowSize();
    pr.rects["heads.prompt"] = Rect{pos.x, pos.y, sz.x, sz.y};
    pr.strings["heads.prompt"] = r.why;
    if (chosen > 0 || cancel) ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
    ImGui::PopStyleColor();
    if (chosen > 0) s.answer_heads(chosen);
    else if (cancel) s.cancel_heads();
}

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_heads_prompt() {
    using K = ProbeKind;
    return {
        {K::String, "heads.prompt", "why the window asks for the head count"},
        {K::Rect, "heads.prompt", "the heads question"},
        {K::Rect, "heads.choice.<n>", "a head count to choose"},
        {K::Rect, "heads.cancel", "cancel the heads question"},
    };
}

}  // namespace vit::app
