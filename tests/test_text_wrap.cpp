// Wrapped text never breaks inside a number (issue 36 item 7; app/text_wrap.h): ImGui's own break
// positions otherwise, its measured size and its drawing agreeing, and the capture the layout sweep's
// rule reads. An ImGui context with its default font and no window or GL.
#include <gtest/gtest.h>
#include <imgui.h>

#include <algorithm>
#include <string>
#include <vector>

#include "app/text_capture.h"
#include "app/text_wrap.h"

using namespace vit::app;

namespace {

struct Context {
    Context() {
        ImGui::CreateContext();
        ImGuiIO& io = ImGui::GetIO();
        io.Fonts->AddFontDefault();
        unsigned char* px = nullptr;
        int w = 0, h = 0;
        io.Fonts->GetTexDataAsAlpha8(&px, &w, &h);
        io.DisplaySize = ImVec2(1280, 800);
        io.DeltaTime = 1.f / 60;
        io.IniFilename = nullptr;
    }
    ~Context() { ImGui::DestroyContext(); }
};

std::vector<std::string> lines_of(const std::string& t, float width) {
    const ImFont* f = ImGui::GetIO().Fonts->Fonts[0];
    std::vector<std::string> out;
    for (const LineSpan& l : wrap_lines(f, f->FontSize, t.data(), t.data() + t.size(), width)) out.emplace_back(l.b, l.e);
    return out;
}

// Where each line after the first starts in `t` (lines are spans of `t`, blanks after a break skipped).
bool any_break_in_number(const std::string& t, const std::vector<std::string>& lines) {
    size_t at = 0;
    for (size_t i = 0; i + 1 < lines.size(); ++i) {
        at = t.find(lines[i], at) + lines[i].size();
        if (breaks_number(t, at)) return true;
    }
    return false;
}

const std::string kText = "measure: l2; 24 + 196 passes in 0.07 s, 12 blocks computed (98.4% of them) at -0.8102";

// A width at which ImGui's own wrapping splits a number of kText (after its '.'), or 0.
float splitting_width() {
    set_keep_numbers_whole(false);
    float found = 0;
    for (float w = 100; w < 600 && !found; w += 1)  // wider than any word of it
        if (any_break_in_number(kText, lines_of(kText, w))) found = w;
    set_keep_numbers_whole(true);
    return found;
}

}  // namespace

TEST(TextWrap, BreaksNumberTellsABreakInsideANumber) {
    const std::string t = "in 0.07 s (98.4%) at -0.8102, 1,234 and 5. Then";
    EXPECT_TRUE(breaks_number(t, t.find("07")));        // "0." / "07"
    EXPECT_TRUE(breaks_number(t, t.find("4%")));        // "(98." / "4%)"
    EXPECT_TRUE(breaks_number(t, t.find("8102")));      // "-0." / "8102"
    EXPECT_TRUE(breaks_number(t, t.find("234")));       // "1," / "234"
    EXPECT_FALSE(breaks_number(t, t.find(" s")));       // at a blank
    EXPECT_FALSE(breaks_number(t, t.find("Then")));     // after a sentence's full stop
    EXPECT_FALSE(breaks_number(t, t.find(" (98")));
    EXPECT_FALSE(breaks_number(t, 0));
}

TEST(TextWrap, ImGuiAloneSplitsANumberWrapLinesNever) {
    Context c;
    const float w = splitting_width();
    ASSERT_GT(w, 0) << "ImGui's wrapping no longer splits a number of the sample at any width";
    set_keep_numbers_whole(false);
    const std::vector<std::string> raw = lines_of(kText, w);
    set_keep_numbers_whole(true);
    EXPECT_TRUE(any_break_in_number(kText, raw));
    for (float width = 100; width < 700; width += 1) {  // (a number wider than its line is cut)
        const std::vector<std::string> lines = lines_of(kText, width);
        EXPECT_FALSE(any_break_in_number(kText, lines)) << "at " << width << " px";
        // nothing lost or repeated: the lines are the text's characters in order, less the blanks at the breaks
        std::string joined;
        for (const std::string& l : lines) joined += l;
        auto no_blanks = [](std::string x) { x.erase(std::remove(x.begin(), x.end(), ' '), x.end()); return x; };
        EXPECT_EQ(no_blanks(joined), no_blanks(kText)) << "at " << width << " px";
    }
}

TEST(TextWrap, OtherwiseImGuisOwnBreaks) {
    Context c;
    const std::string t = "Attention shows where the model looks, not what it uses. Here each head is knocked out alone; "
                          "the patches are dropped one at a time.\nA second paragraph!\n\nAfter an empty line.";
    for (float width = 30; width < 700; width += 3) {
        set_keep_numbers_whole(false);
        const std::vector<std::string> raw = lines_of(t, width);
        set_keep_numbers_whole(true);
        EXPECT_EQ(lines_of(t, width), raw) << "at " << width << " px";
    }
    EXPECT_EQ(lines_of("a\n", 100).size(), 1u);  // a final '\n' adds no line (as ImGui)
    EXPECT_EQ(lines_of("a\n\nb", 100).size(), 3u);
    EXPECT_EQ(lines_of("", 100).size(), 1u);
}

// ImGui measures a wrapped text (CalcTextSize, through the wrapped ImFont::CalcTextSizeA) as the lines
// AddText draws: the item is as tall as its lines, and the capture holds them.
TEST(TextWrap, MeasuredAndDrawnAsTheSameLines) {
    Context c;
    const float w = splitting_width();
    ASSERT_GT(w, 0);
    const std::vector<std::string> lines = lines_of(kText, w);
    text_capture_enable(true);
    text_capture_clear();
    ImGui::NewFrame();
    const ImVec2 sz = ImGui::CalcTextSize(kText.c_str(), nullptr, false, w);
    EXPECT_FLOAT_EQ(sz.y, ImGui::GetFontSize() * float(lines.size()));
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImVec2(w + 2 * ImGui::GetStyle().WindowPadding.x + 60, 400));
    ImGui::Begin("wrap", nullptr, ImGuiWindowFlags_NoDecoration);
    ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + w);
    const float y0 = ImGui::GetCursorPosY();
    ImGui::TextUnformatted(kText.c_str());
    const float y1 = ImGui::GetCursorPosY();
    ImGui::PopTextWrapPos();
    ImGui::End();
    ImGui::EndFrame();
    text_capture_enable(false);
    EXPECT_FLOAT_EQ(y1 - y0, ImGui::GetFontSize() * float(lines.size()) + ImGui::GetStyle().ItemSpacing.y);
    ASSERT_EQ(captured_wraps().size(), 1u);
    EXPECT_EQ(captured_wraps()[0].text, kText);
    EXPECT_EQ(captured_wraps()[0].lines, lines);
    EXPECT_FALSE(any_break_in_number(kText, captured_wraps()[0].lines));
}
