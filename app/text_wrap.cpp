#include "app/text_wrap.h"

#include <imgui.h>
#include <imgui_internal.h>

#include <cfloat>
#include <cstring>

namespace vit::app {

namespace {
bool g_keep_numbers = true;
std::vector<CapturedWrap> g_wraps;

bool digit(char c) { return c >= '0' && c <= '9'; }
bool numeric(char c) { return digit(c) || c == '.' || c == ',' || c == '-' || c == '%' || c == 'e'; }
bool blank(char c) { return c == ' ' || c == '\t'; }
}  // namespace

bool breaks_number(const char* text, const char* at, const char* end) {
    if (at <= text || at >= end) return false;
    const char l = at[-1], r = at[0];
    return (digit(l) || digit(r)) && numeric(l) && numeric(r);
}
bool breaks_number(const std::string& text, size_t at) {
    return breaks_number(text.data(), text.data() + at, text.data() + text.size());
}

std::vector<LineSpan> wrap_lines(const ImFont* font, float size, const char* b, const char* e, float wrap_width) {
    std::vector<LineSpan> out;
    const float scale = size / font->FontSize;
    const char* s = b;
    for (;;) {
        const char* para_end = static_cast<const char*>(std::memchr(s, '\n', size_t(e - s)));
        if (!para_end) para_end = e;
        const char* ls = s;
        if (ls == para_end) out.push_back({ls, ls});
        while (ls < para_end) {
            const char* eol = font->CalcWordWrapPositionA(scale, ls, para_end, wrap_width);
            if (g_keep_numbers && eol > ls && breaks_number(ls, eol, para_end)) {
                const char* p = eol;  // back to the blanks before the number, when the line has any
                while (p > ls && !blank(p[-1])) --p;
                while (p > ls && blank(p[-1])) --p;
                if (p > ls) eol = p;
            }
            if (eol <= ls) {  // nothing fits: one character (as ImGui), whole in UTF-8
                eol = ls + 1;
                while (eol < para_end && (static_cast<unsigned char>(*eol) & 0xC0) == 0x80) ++eol;
            }
            out.push_back({ls, eol});
            ls = eol;
            while (ls < para_end && blank(*ls)) ++ls;  // wrapping skips the blanks after the break
        }
        if (para_end >= e || para_end + 1 >= e) break;  // a final '\n' adds no line
        s = para_end + 1;
    }
    return out;
}

const std::vector<CapturedWrap>& captured_wraps() { return g_wraps; }
std::vector<CapturedWrap>& captured_wraps_mutable() { return g_wraps; }
void set_keep_numbers_whole(bool on) { g_keep_numbers = on; }

}  // namespace vit::app

// The wrapped ImFont::CalcTextSizeA (-Wl,--wrap): with a wrap width, the size of wrap_lines' lines
// (the widest line, a line height each), so that an item is as large as what AddText draws.
extern "C" {
ImVec2 __real__ZNK6ImFont13CalcTextSizeAEfffPKcS1_PS1_(const ImFont*, float, float, float, const char*, const char*, const char**);

ImVec2 __wrap__ZNK6ImFont13CalcTextSizeAEfffPKcS1_PS1_(const ImFont* font, float size, float max_width, float wrap_width,
                                                     const char* b, const char* e, const char** remaining) {
    if (wrap_width <= 0.f || remaining || max_width < FLT_MAX || !b)
        return __real__ZNK6ImFont13CalcTextSizeAEfffPKcS1_PS1_(font, size, max_width, wrap_width, b, e, remaining);
    if (!e) e = b + std::strlen(b);
    const std::vector<vit::app::LineSpan> lines = vit::app::wrap_lines(font, size, b, e, wrap_width);
    ImVec2 sz(0.f, size * float(lines.size()));
    for (const vit::app::LineSpan& l : lines)
        if (l.e > l.b)
            sz.x = ImMax(sz.x, __real__ZNK6ImFont13CalcTextSizeAEfffPKcS1_PS1_(font, size, FLT_MAX, 0.f, l.b, l.e, nullptr).x);
    return sz;
}
}
