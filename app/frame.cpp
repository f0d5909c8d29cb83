#include "probe.h"
#include "frame.h"

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_internal.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "heads_prompt.h"
#include "model_map.h"

namespace vit::app {

namespace {

// The tab bar scrolls (its tabs do not fit 1280 px): ImGui scrolls just enough to show the selected
// tab, which leaves the leftmost tab shown with its name cut from the left ("tention maps"). The
// scroll is snapped to a tab's start, so that the leftmost tab shown is whole (issue 36).
void snap_tab_scroll(ImGuiTabBar* bar) {
    if (!bar || bar->WidthAllTabs <= bar->BarRect.GetWidth()) return;
    // the room of the tabs pinned at the left (none here; the list button is outside the tabs' offsets)
    float lead = 0;
    for (const ImGuiTabItem& tab : bar->Tabs)
        if (tab.Flags & ImGuiTabItemFlags_Leading) lead += tab.Width + ImGui::GetStyle().ItemInnerSpacing.x;
    const float max_scroll = std::max(0.f, bar->WidthAllTabs - bar->BarRect.GetWidth());
    const float t = bar->ScrollingTarget;
    float floor_s = 0, ceil_s = -1;
    for (const ImGuiTabItem& tab : bar->Tabs) {
        if (tab.Flags & ImGuiTabItemFlags_SectionMask_) continue;
        const float s = std::max(0.f, tab.Offset - lead);
        if (s <= t + 0.5f) floor_s = std::max(floor_s, s);
        else if (ceil_s < 0 || s < ceil_s) ceil_s = s;
    }
    float snapped = floor_s;
    if (floor_s + 0.5f < t) snapped = ceil_s >= 0 && ceil_s <= max_scroll + 0.5f ? ceil_s : floor_s;
    // (no glide: a name never passes under the left edge on its way)
    bar->ScrollingTarget = bar->ScrollingAnim = snapped;
}

// A tab the app selects (a key, --tab) is selected here, not through ImGui's SetSelected: ImGui would
// scroll to it next frame with a glide through positions that cut a name, and at the bar's end to a
// scroll that cuts the leftmost name. The scroll is set at once to a tab's start that shows the tab
// (at the end of the bar, its last characters may run under the arrows: said there is more).
void select_tab(ImGuiTabBar* bar, ImGuiID id) {
    ImGuiTabItem* sel = bar ? ImGui::TabBarFindTabByID(bar, id) : nullptr;
    if (!sel) return;
    if (sel->Width <= 0 || bar->WidthAllTabs <= 0) {  // not laid out yet (the first frame): ImGui's way
        bar->NextSelectedTabId = id;
        return;
    }
    bar->SelectedTabId = id;
    bar->NextSelectedTabId = 0;
    if (bar->WidthAllTabs <= bar->BarRect.GetWidth()) return;
    const float W = bar->BarRect.GetWidth(), max_scroll = std::max(0.f, bar->WidthAllTabs - W);
    const float t = bar->ScrollingTarget;
    if (t <= sel->Offset + 0.5f && t + W >= sel->Offset + sel->Width - 0.5f) return;  // shown whole already
    float best = -1, floor_max = 0;
    for (const ImGuiTabItem& tab : bar->Tabs) {
        if (tab.Flags & ImGuiTabItemFlags_SectionMask_) continue;
        const float s = tab.Offset;
        if (s <= max_scroll + 0.5f) floor_max = std::max(floor_max, s);
        if (s <= sel->Offset + 0.5f && s + W >= sel->Offset + sel->Width - 0.5f && s <= max_scroll + 0.5f && (best < 0 || s < best))
            best = s;
    }
    bar->ScrollingTarget = bar->ScrollingAnim = best >= 0 ? best : floor_max;
}

// What every frame ends with, in either mode: the window's title (what is loaded) and the windows drawn.
void end_frame(AppContext& app) {
    std::string title = window_title(app.s);
    if (title != app.title && app.win) {
        glfwSetWindowTitle(app.win, title.c_str());
        app.title = title;
    }
    app.probe.strings["title"] = title;
    RecordWindows(app.probe);
}

}  // namespace

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
    app.tabs.tick(v);
    HandleLearnKeys(v);
    if (ui.learn) {
        // Learn mode: the picture, its narration and controls instead of the workbench (learn.h)
        DrawLearn(v, app.learn, W, H);
        DrawHeadsPrompt(v);
        end_frame(app);
        return;
    }
    HandleKeys(v);
    const PanelWidths pw = panel_widths(W);
    const float left = pw.left, right = pw.right, bottom = status_bar_height();
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
        ImGuiID selected_now = 0;
        for (const TabSpec& spec : tab_table()) {
            const Tab tb = spec.tab;
            bool select = ui.tab == tb && app.last_tab != ui.tab;
            const float before_tab = centre_window->DC.CursorMaxPos.x;
            const bool open = ImGui::BeginTabItem(spec.name, nullptr, 0);
            if (select) selected_now = ImGui::GetItemID();
            centre_window->DC.CursorMaxPos.x = before_tab;
            if (v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("key %s, --tab %d", spec.key, int(tb));
            if (ImGuiTabBar* bar = ImGui::GetCurrentContext()->CurrentTabBar) {
                // its name, as a label of the bar's scrolling part: shown from its first character (the
                // sweep's rule); its end may run under the scroll arrows at the right (they say there is more)
                const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
                if (b.x > bar->ScrollingRectMinX + 0.5f && a.x < bar->ScrollingRectMaxX - 0.5f) {
                    const ImVec2 ts = ImGui::CalcTextSize(spec.name);
                    app.probe.text("tabs.names", spec.name, Rect{a.x + ImGui::GetStyle().FramePadding.x, a.y, ts.x, ts.y},
                                   Rect{bar->ScrollingRectMinX, a.y, 1e6f, b.y - a.y});
                }
            }
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
        snap_tab_scroll(ImGui::GetCurrentContext()->CurrentTabBar);  // scrolled by its arrows or its list
        if (selected_now) select_tab(ImGui::GetCurrentContext()->CurrentTabBar, selected_now);
        ImGui::EndTabBar();
    }
    ImGui::End();
    app.tabs[ui.tab].draw_over(v, centre);
    DrawStatusWindow(v, float(W), float(H));
    DrawPatchPanel(v, app.iv);
    DrawErrorPanel(v);
    DrawHeadsPrompt(v);  // a checkpoint without a head count: ask, never guess
    end_frame(app);
}

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_frame() {
    using K = ProbeKind;
    return {
        {K::Rect, "center", "the centre panel (the tabs)"},
        {K::Rect, "tabs.<tab>", "a tab of the tab bar"},
        {K::Number, "tabs.<tab>.cut", "1 when the tab is narrower than its name (the bar squeezed it)"},
        {K::String, "title", "the window title"},
        {K::Group, "tabs.names", "the tab bar's names shown (the clip: the bar's scrolling part, unbounded at the right)"},
    };
}

}  // namespace vit::app
