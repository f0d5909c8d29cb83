#include "frame.h"

#include <GLFW/glfw3.h>

#include <filesystem>

#include "heads_prompt.h"
#include "views_map.h"

namespace vit::app {

std::string window_title(const Session& s) {
    std::string t = "ViTScope - " + s.model_spec() + " - ";
    t += s.has_image() ? std::filesystem::path(s.image_path()).filename().string() : std::string("no image");
    return t;
}

void draw_frame(AppContext& app, int W, int H) {
    Session& s = app.s;
    UiState& ui = app.ui;
    ui.rects.clear();
    ui.texts.clear();
    ui.strings.clear();
    app.tx.tab_numbers.clear();  // each teaching view puts the numbers it drew here (exports)
    HandleKeys(s, ui);
    DistanceTick(s, ui, app.tx);
    HandleMapKeys(s, ui);
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
    DrawToolbar(s, ui);
    ImGui::End();
    place(0, top, left, float(H) - top - bottom);
    ImGui::Begin("navigator", nullptr, fixed);
    DrawNavigator(s, ui);
    ImGui::End();
    place(float(W) - right, top, right, float(H) - top - bottom);
    ImGui::Begin("image", nullptr, fixed);
    ImGui::BeginChild("imgpanel", ImVec2(0, ImGui::GetContentRegionAvail().y - 150));
    DrawImagePanel(s, ui, app.tx);
    ImGui::EndChild();
    DrawPredictions(s, ui);
    ImGui::End();
    place(left, top, float(W) - left - right, float(H) - top - bottom);
    ImGui::Begin("center", nullptr, fixed);
    ui.rects["center"] = Rect{left, top, float(W) - left - right, float(H) - top - bottom};
    if (ImGui::BeginTabBar("tabs")) {
        for (int i = 0; i < kTabs; ++i) {
            Tab tb = Tab(i);
            bool select = ui.tab == tb && app.last_tab != ui.tab;
            const bool open = ImGui::BeginTabItem(tab_name(tb), nullptr, select ? ImGuiTabItemFlags_SetSelected : 0);
            if (ui.hover && ImGui::IsItemHovered())
                ImGui::SetTooltip("key %s, --tab %d", tab_key(tb).c_str(), i);
            if (open) {
                if (app.last_tab == ui.tab || select) ui.tab = tb;
                switch (tb) {
                    case Tab::Stage: DrawMapStrip(s, ui); DrawStageView(s, ui, app.tx); break;
                    case Tab::AttentionMaps: DrawAttentionGrid(s, ui, app.tx); break;
                    case Tab::Changes: DrawChanges(s, ui, app.tx); break;
                    case Tab::Train: app.train.Draw(s, ui, app.tx); break;
                    case Tab::LogitLens: DrawLogitLens(s, ui, app.tx); break;
                    case Tab::Positions: DrawPositions(s, ui, app.tx); break;
                    case Tab::Filters: DrawFilters(s, ui, app.tx); break;
                    case Tab::Distance: DrawDistance(s, ui, app.tx); break;
                    case Tab::Patches: DrawPatchPictures(s, ui, app.tx); break;
                    case Tab::Map: DrawModelMap(s, ui); break;
                }
                ImGui::EndTabItem();
            }
        }
        app.last_tab = ui.tab;
        ImGui::EndTabBar();
    }
    ImGui::End();
    DrawCellMath(s, ui, app.tx, Rect{left, top, float(W) - left - right, float(H) - top - bottom});
    DrawTour(s, ui, Rect{left, top, float(W) - left - right, float(H) - top - bottom});
    place(0, float(H) - bottom, float(W), bottom);
    ImGui::Begin("status", nullptr, fixed);
    DrawStatusBar(s, ui);
    ImGui::End();
    DrawErrorPanel(s, ui);
    DrawHeadsPrompt(s, ui);  // a checkpoint without a head count: ask, never guess
    app.train.Poll(s);
    std::string title = window_title(s);
    if (title != app.title && app.win) {
        glfwSetWindowTitle(app.win, title.c_str());
        app.title = title;
    }
    ui.strings["title"] = title;
}

}  // namespace vit::app
