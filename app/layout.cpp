// Layout helpers shared by the views: a flow of items that wraps onto new rows when the window is
// narrow (the toolbar, the rows of controls above a view), and the record of every window drawn
// (its rectangle and how far its content reaches) that the layout sweep checks for clipping.
#include <imgui.h>
#include <imgui_internal.h>

#include <algorithm>

#include "views.h"

namespace vit::app {

Flow::Flow() {
    left_ = ImGui::GetCursorScreenPos().x;
    right_ = left_ + ImGui::GetContentRegionAvail().x;
}

Flow::Flow(float width) {
    left_ = ImGui::GetCursorScreenPos().x;
    right_ = left_ + width;
}

void Flow::next(float w, bool group_gap) {
    if (!first_ && !row_) {
        // on this row when it fits, else (without moving there first: a SameLine then NewLine would leave the
        // row's reach past the window's edge, a phantom overflow) on the next
        const float gap = group_gap ? 2.5f * ImGui::GetStyle().ItemSpacing.x : ImGui::GetStyle().ItemSpacing.x;
        if (ImGui::GetItemRectMax().x + gap + w <= right_ + 0.5f) ImGui::SameLine(0, gap);
    }
    first_ = false;
    row_ = false;
}

void Flow::new_row() { row_ = true; }

namespace {
float combo_chrome() { return ImGui::GetFrameHeight() + 2 * ImGui::GetStyle().FramePadding.x + 2; }
}  // namespace

float Flow::combo_w(const std::string& preview, float min_w, float max_w) {
    return std::clamp(ImGui::CalcTextSize(preview.c_str()).x + combo_chrome(), min_w, std::max(min_w, max_w));
}

std::string Flow::combo_preview(const std::string& preview, float w) {
    const float room = w - combo_chrome();
    if (ImGui::CalcTextSize(preview.c_str()).x <= room) return preview;
    for (size_t cut = 1; cut < preview.size(); ++cut) {
        std::string s = "..." + preview.substr(cut);
        if (ImGui::CalcTextSize(s.c_str()).x <= room) return s;
    }
    return "...";
}

float Flow::text_w(const char* text) { return ImGui::CalcTextSize(text, nullptr, true).x; }

std::vector<std::string> wrap_at_spaces(const std::string& text, float width) {
    std::vector<std::string> lines;
    std::string line = text.substr(0, text.find_first_not_of(' ') == std::string::npos ? text.size()
                                                                                         : text.find_first_not_of(' '));
    bool empty = true;  // no word on `line` yet (only the leading spaces)
    size_t i = line.size();
    while (i < text.size()) {
        const size_t e = std::min(text.find(' ', i), text.size());
        const std::string word = text.substr(i, e - i);
        if (!word.empty()) {
            const std::string next = empty ? line + word : line + " " + word;
            if (!empty && ImGui::CalcTextSize(next.c_str()).x > width) {
                lines.push_back(line);
                line = word;
            } else {
                line = next;
            }
            empty = false;
        }
        i = e + 1;
    }
    lines.push_back(line);
    return lines;
}

void TextWrappedWords(Probe& pr, const char* key, const std::string& text, const ImVec4* col, bool disabled) {
    ImGuiWindow* w = ImGui::GetCurrentWindow();
    const float wrap_x = w->DC.TextWrapPos;
    const float width = wrap_x < 0 ? ImGui::GetContentRegionAvail().x : ImGui::CalcWrapWidthForPos(w->DC.CursorPos, wrap_x);
    WrappedText rec{key, text, {}};
    size_t i = 0;
    while (i <= text.size()) {
        const size_t e = std::min(text.find('\n', i), text.size());
        for (std::string& line : wrap_at_spaces(text.substr(i, e - i), std::max(1.f, width))) rec.lines.push_back(std::move(line));
        i = e + 1;
    }
    for (const std::string& line : rec.lines) {
        if (col) ImGui::TextColored(*col, "%s", line.c_str());
        else if (disabled) ImGui::TextDisabled("%s", line.c_str());
        else ImGui::TextUnformatted(line.c_str());
    }
    pr.wrapped.push_back(std::move(rec));
}

float Flow::button_w(const char* label) { return text_w(label) + 2 * ImGui::GetStyle().FramePadding.x; }

float Flow::checkbox_w(const char* label) {
    const float t = text_w(label);
    return ImGui::GetFrameHeight() + (t > 0 ? ImGui::GetStyle().ItemInnerSpacing.x + t : 0.f);
}

float Flow::labelled_w(float item_w, const char* label) {
    const float t = text_w(label);
    return item_w + (t > 0 ? ImGui::GetStyle().ItemInnerSpacing.x + t : 0.f);
}

void RecordWindows(Probe& probe) {
    ImGuiContext& g = *ImGui::GetCurrentContext();
    for (ImGuiWindow* w : g.Windows) {
        if (!w->Active || w->Hidden || w->SkipItems) continue;
        DrawnWindow d;
        d.name = w->Name;
        d.rect = Rect{w->Pos.x, w->Pos.y, w->Size.x, w->Size.y};
        // the content's reach this frame, and where it may go without a scrollbar
        d.content_right = w->DC.CursorMaxPos.x;
        d.content_bottom = w->DC.CursorMaxPos.y;
        d.right = w->InnerRect.Max.x - w->WindowPadding.x;
        d.bottom = w->InnerRect.Max.y - w->WindowPadding.y;
        d.scroll_x = (w->Flags & ImGuiWindowFlags_HorizontalScrollbar) != 0 && !(w->Flags & ImGuiWindowFlags_NoScrollbar);
        d.scroll_y = !(w->Flags & ImGuiWindowFlags_NoScrollbar);
        d.floating = (w->Flags & (ImGuiWindowFlags_Popup | ImGuiWindowFlags_Tooltip | ImGuiWindowFlags_AlwaysAutoResize)) != 0 ||
                     !(w->Flags & ImGuiWindowFlags_ChildWindow);
        d.auto_size = (w->Flags & (ImGuiWindowFlags_Tooltip | ImGuiWindowFlags_AlwaysAutoResize)) != 0;
        probe.windows.push_back(std::move(d));
    }
}

}  // namespace vit::app
