#include "frame.h"

#include <GLFW/glfw3.h>

#include <filesystem>

#include "heads_prompt.h"
#include "model_map.h"

namespace vit::app {

std::string window_title(const Session& s) {
    std::string t = "ViTScope - " + s.model_spec() + " - ";
    t += s.has_image() ? std::filesystem::path(s.image_path()).filename().string() : std::string("no image");
    return t;
}

void draw_frame(AppContext& app, int W, int H) {
    ViewCtx v = app.view();
    UiState& ui = app.ui;
    app.probe.clear();
    app.tabs.clear_numbers();  // each teaching tab puts the numbers it draws in its own list (exports)
    HandleKeys(v);
    app.tabs.tick(v);
    HandleTourKeys(v);
    const float top = 70, left = 260, right = 380, bottom = 28;
    const ImGuiWindowFlags fixed = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse |
                                   ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoTitleBar |
                                   ImGuiWindowFlags_NoBringToFrontOnFocus;
    auto place = [&](float x, float y, float w, float h) {
        ImGui::SetNextWindowPos(ImVec2(x, y));
        ImGui::SetNextWindowSize(ImVec2(w, h));
    };
    place(0, 0, float(W), top);
    ImGui::Begin("toolbar", nullptr, fixed);
    DrawToolbar(v, app.toolbar, app.exports, tab_spec(ui.tab).export_name != nullptr);
    ImGui::End();
    place(0, top, left, float(H) - top - bottom);
    ImGui::Begin("navigator", nullptr, fixed);
    DrawNavigator(v);
    ImGui::End();
    place(float(W) - right, top, right, float(H) - top - bottom);
    ImGui::Begin("image", nullptr, fixed);
    ImGui::BeginChild("imgpanel", ImVec2(0, ImGui::GetContentRegionAvail().y - 150));
    DrawImagePanel(v, app.image);
    ImGui::EndChild();
    DrawPredictions(v);
    ImGui::End();
    const Rect centre{left, top, float(W) - left - right, float(H) - top - bottom};
    place(centre.x, centre.y, centre.w, centre.h);
    ImGui::Begin("center", nullptr, fixed);
    app.probe.rects["center"] = centre;
    DrawInterventionStrip(v, app.iv);  // always shown, inside the centre: an exported view carries it
    if (ImGui::BeginTabBar("tabs")) {
        for (const TabSpec& spec : tab_table()) {
            const Tab tb = spec.tab;
            bool select = ui.tab == tb && app.last_tab != ui.tab;
            const bool open = ImGui::BeginTabItem(spec.name, nullptr, select ? ImGuiTabItemFlags_SetSelected : 0);
            if (v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("key %s, --tab %d", spec.key, int(tb));
            if (open) {
                if (app.last_tab == ui.tab || select) ui.tab = tb;
                app.tabs[tb].draw(v);
                ImGui::EndTabItem();
            }
        }
        app.last_tab = ui.tab;
        ImGui::EndTabBar();
    }
    ImGui::End();
    app.tabs[ui.tab].draw_over(v, centre);
    DrawTour(v, centre);
    place(0, float(H) - bottom, float(W), bottom);
    ImGui::Begin("status", nullptr, fixed);
    DrawStatusBar(v);
    ImGui::End();
    DrawPatchPanel(v, app.iv);
    DrawErrorPanel(v);
    DrawHeadsPrompt(v);  // a checkpoint without a head count: ask, never guess
    std::string title = window_title(app.s);
    if (title != app.title && app.win) {
        glfwSetWindowTitle(app.win, title.c_str());
        app.title = title;
    }
    app.probe.strings["title"] = title;
}

}  // namespace vit::app
