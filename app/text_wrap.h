// ImGui's wrapped text (TextWrapped, or Text/TextUnformatted/TextColored under PushTextWrapPos) never
// breaks a line inside a number (issue 36 item 7). ImGui 1.86 wraps at blanks and also after '.', ',',
// ';', '!', '?' and '"', which split "0.07 s" into "0." / "07 s" and "(98.4%)" into "(98." / "4%)".
// The app links with -Wl,--wrap for ImFont::CalcTextSizeA and ImDrawList::AddText (app/app.cmake):
// every wrapped text is measured and drawn through wrap_lines below, so the fix holds for every
// wrapped text on screen, whoever draws it, and the visual result is ImGui's own otherwise (the same
// break positions, line height and item size). Unwrapped text passes through untouched.
#pragma once
#include <string>
#include <vector>

struct ImFont;

namespace vit::app {

struct LineSpan {
    const char* b;
    const char* e;
};

// Whether a line break just before `at` (text[0] < at < end) falls inside a number: the characters
// on either side are both part of a number (digits, '.', ',', '-', '%', 'e') and one is a digit.
// The layout sweep's rule on wrapped text (app/headless.cpp) uses the same test.
bool breaks_number(const char* text, const char* at, const char* end);
bool breaks_number(const std::string& text, size_t at);

// The lines [b, e) is drawn as with `font` at `size` px in `wrap_width` px: ImGui's break positions
// (ImFont::CalcWordWrapPositionA), each moved back to the blank before the number when it would fall
// inside one (kept when the number alone is wider than the line); '\n' starts a line, blanks after a
// wrap are skipped, a final '\n' adds no line (as ImGui).
std::vector<LineSpan> wrap_lines(const ImFont* font, float size, const char* b, const char* e, float wrap_width);

// Every text drawn wrapped onto more than one line while the text capture is on (text_capture.h),
// with its lines, for the sweep's rule that no number is broken across lines.
struct CapturedWrap {
    std::string text;
    std::vector<std::string> lines;
};
const std::vector<CapturedWrap>& captured_wraps();

// Test hook: false makes wrap_lines keep ImGui's break positions as they are (numbers split), so
// that a test can see the sweep's rule fail on them. Default true.
void set_keep_numbers_whole(bool on);

}  // namespace vit::app
