#include "frame.h"

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_internal.h>

#include <algorithm>
#include <filesystem>

#include "heads_prompt.h"
#include "model_map.h"

namespace vit::app {

std::string window_title(const Session& s) {
    std::string t = "ViTScope - " + s.model_spec() + " - ";
    t += s.has_image() ? std::filesystem::path(s.image_path()).filename().string() : std::string("no image");
    return t;
}

PanelWidths panel_widths(float W) {
    // the centre gets what the side panels leave: at 1280 px about 740, at 2560 about 1680
    return PanelWidths{std::clamp(0.16f * W, 200.f, 320.f), std::clamp(0.24f * W, 320.f, 560.f)};
}

void draw_frame(AppContext& app, float W, float H) {
    ViewCtx v = app.view();
    UiState& ui = app.ui;
    // stages on demand: the blocks no view read last frame are dropped (no view holds a reference
    // into a trace across frames), so a session holds the blocks on screen and no more
    app.s.trim_stages();
    app.probe.clear();
    app.tabs.clear_numbers();  // each teaching tab puts the numbers it draws in its own list (exports)
    HandleKeys(v);
    app.tabs.tick(v);
    HandleTourKeys(v);
    const PanelWidths pw = panel_widths(W);
    const float left = pw.left, right = pw.right, bottom = std::max(ImGui::GetFrameHeight() + 12, ImGui::GetStyle().WindowMinSize.y);
    const ImGuiWindowFlags fixed = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse |
                                   ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoTitleBar |
                                   ImGuiWindowFlags_NoBringToFrontOnFocus;
    auto place = [&](float x, float y, float w, float h) {
        ImGui::SetNextWindowPos(ImVec2(x, y));
        ImGui::SetNextWindowSize(ImVec2(w, h));
    };
    // the toolbar wraps onto as many rows as the width needs: its height is its content's
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSizeConstraints(ImVec2(W, 0), ImVec2(W, H * 0.4f));
    ImGui::Begin("toolbar", nullptr, (fixed & ~ImGuiWindowFlags_NoResize) | ImGuiWindowFlags_AlwaysAutoResize);
    DrawToolbar(v, app.toolbar, app.exports, tab_spec(ui.tab).export_name != nullptr);
    const float top = std::max(ImGui::GetWindowSize().y, 2 * ImGui::GetFrameHeightWithSpacing());
    app.probe.rects["toolbar"] = Rect{0, 0, W, top};
    ImGui::End();
    place(0, top, left, float(H) - top - bottom);
    ImGui::Begin("navigator", nullptr, fixed);
    // the predictions close the pipeline's column (its last stages are the head and softmax): the
    // image's column is left to the image, its controls and thumbnails (issue 36)
    ImGui::BeginChild("pipeline", ImVec2(0, ImGui::GetContentRegionAvail().y - predictions_height(v)));
    DrawNavigator(v);
    ImGui::EndChild();
    ImGui::BeginGroup();
    DrawPredictions(v);
    ImGui::EndGroup();
    {
        const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
        app.probe.rects["navigator.predictions"] = Rect{a.x, a.y, b.x - a.x, b.y - a.y};
    }
    ImGui::End();
    place(float(W) - right, top, right, float(H) - top - bottom);
    ImGui::Begin("image", nullptr, fixed);
    DrawImagePanelArea(v, app.image, ImGui::GetContentRegionAvail().y);
    ImGui::End();
    const Rect centre{left, top, float(W) - left - right, float(H) - top - bottom};
    place(centre.x, centre.y, centre.w, centre.h);
    ImGui::Begin("center", nullptr, fixed);
    app.probe.rects["center"] = centre;
    DrawInterventionStrip(v, app.iv);  // always shown, inside the centre: an exported view carries it
    // every tab at its name's width: the bar scrolls (arrows) and lists them all (the menu at its
    // left) when they do not fit, rather than squeezing names until they are cut
    // The bar scrolls by itself: the width of all its tabs, which ImGui adds to the window's content
    // (for auto-sized windows), is not content the window must show; only what the tabs draw is.
    ImGuiWindow* centre_window = ImGui::GetCurrentWindow();
    const float content_right = centre_window->DC.CursorMaxPos.x;
    if (ImGui::BeginTabBar("tabs", ImGuiTabBarFlags_FittingPolicyScroll | ImGuiTabBarFlags_TabListPopupButton)) {
        centre_window->DC.CursorMaxPos.x = content_right;
        for (const TabSpec& spec : tab_table()) {
            const Tab tb = spec.tab;
            bool select = ui.tab == tb && app.last_tab != ui.tab;
            const float before_tab = centre_window->DC.CursorMaxPos.x;
            const bool open = ImGui::BeginTabItem(spec.name, nullptr, select ? ImGuiTabItemFlags_SetSelected : 0);
            centre_window->DC.CursorMaxPos.x = before_tab;
            if (v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("key %s, --tab %d", spec.key, int(tb));
            {
                // a tab squeezed narrower than its name (the bar shrinks tabs that do not fit) is cut
                const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
                const float need = ImGui::CalcTextSize(spec.name).x + 2 * ImGui::GetStyle().FramePadding.x;
                app.probe.rects[std::string("tabs.") + spec.name] = Rect{a.x, a.y, b.x - a.x, b.y - a.y};
                app.probe.numbers[std::string("tabs.") + spec.name + ".cut"] = (b.x - a.x) + 0.5f < need;
            }
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
    RecordWindows(app.probe);
}

}  // namespace vit::app
