#include "app/text_capture.h"

#include <imgui.h>
#include <imgui_internal.h>

#include <filesystem>
#include <regex>

#include "app/text_wrap.h"

namespace vit::app {

namespace {
bool g_on = false;
std::vector<std::string> g_texts;
std::vector<CutText> g_cut;
}  // namespace

void record_cut(const ImFont* font, float size, const ImVec2& pos, const char* b, const char* e, const ImVec4& clip) {
    if (!g_on || !font || b == e) return;
    const ImVec2 sz = font->CalcTextSizeA(size, FLT_MAX, 0.f, b, e);
    const float room = clip.z - pos.x;
    if (pos.x + sz.x > clip.z + 1.f && room > 0.f && pos.y < clip.w && pos.y + sz.y > clip.y) g_cut.push_back({std::string(b, e), sz.x, room});
}
const std::vector<CutText>& captured_cut_texts() { return g_cut; }

void text_capture_enable(bool on) { g_on = on; }
std::vector<CapturedWrap>& captured_wraps_mutable();  // text_wrap.cpp
void text_capture_clear() {
    g_texts.clear();
    g_cut.clear();
    captured_wraps_mutable().clear();
}
const std::vector<std::string>& captured_texts() { return g_texts; }

std::vector<std::string> cited_files(const std::string& text) {
    std::vector<std::string> out;
    static const std::regex notebook(R"(\bnotebooks?\s+(#?\d+|[A-Za-z0-9_.-]+\.ipynb))", std::regex::icase);
    static const std::regex file(R"re((?:^|[\s"'(`])((?:\.\./|\./)?[A-Za-z0-9_][A-Za-z0-9_./-]*\.(?:md|py|ipynb|sh|cmake))(?=$|[\s"'),.:;`]))re");
    for (std::sregex_iterator it(text.begin(), text.end(), notebook), end; it != end; ++it) out.push_back("notebook " + (*it)[1].str());
    for (std::sregex_iterator it(text.begin(), text.end(), file), end; it != end; ++it) out.push_back((*it)[1].str());
    return out;
}

bool cited_file_exists(const std::string& cited, const std::string& data_root) {
    namespace fs = std::filesystem;
    if (cited.rfind("notebook ", 0) == 0) return false;
    std::error_code ec;
    if (cited.find('/') != std::string::npos && cited.rfind("../", 0) != 0 && fs::exists(cited, ec)) return true;
    if (data_root.empty()) return false;
    const fs::path root(data_root);
    for (const fs::path& base : {root, root.parent_path()})
        if (cited.rfind("../", 0) != 0 && fs::exists(base / cited, ec)) return true;
    return false;
}

}  // namespace vit::app

// The wrapped ImDrawList::AddText overloads (-Wl,--wrap=<mangled name>): record, then draw; a text with
// a wrap width is drawn line by line as wrap_lines breaks it (text_wrap.h: never inside a number).
extern "C" {
void __real__ZN10ImDrawList7AddTextEPK6ImFontfRK6ImVec2jPKcS7_fPK6ImVec4(ImDrawList*, const ImFont*, float, const ImVec2&, ImU32,
                                                                          const char*, const char*, float, const ImVec4*);
void __real__ZN10ImDrawList7AddTextERK6ImVec2jPKcS4_(ImDrawList*, const ImVec2&, ImU32, const char*, const char*);

void __wrap__ZN10ImDrawList7AddTextEPK6ImFontfRK6ImVec2jPKcS7_fPK6ImVec4(ImDrawList* dl, const ImFont* font, float size,
                                                                          const ImVec2& pos, ImU32 col, const char* b,
                                                                          const char* e, float wrap, const ImVec4* clip) {
    if (vit::app::g_on && b) vit::app::g_texts.emplace_back(b, e ? e : b + std::char_traits<char>::length(b));
    if (wrap > 0.f && b && (col & IM_COL32_A_MASK) != 0) {
        if (!e) e = b + std::char_traits<char>::length(b);
        if (!font) font = dl->_Data->Font;
        if (size == 0.f) size = dl->_Data->FontSize;
        const std::vector<vit::app::LineSpan> lines = vit::app::wrap_lines(font, size, b, e, wrap);
        if (vit::app::g_on && lines.size() > 1) {
            vit::app::CapturedWrap w{std::string(b, e), {}};
            for (const vit::app::LineSpan& l : lines) w.lines.emplace_back(l.b, l.e);
            vit::app::captured_wraps_mutable().push_back(std::move(w));
        }
        for (size_t i = 0; i < lines.size(); ++i)
            if (lines[i].e > lines[i].b)
                __real__ZN10ImDrawList7AddTextEPK6ImFontfRK6ImVec2jPKcS7_fPK6ImVec4(dl, font, size, ImVec2(pos.x, pos.y + size * float(i)), col,
                                                                                  lines[i].b, lines[i].e, 0.f, clip);
        return;
    }
    if (vit::app::g_on && clip && b && (col & IM_COL32_A_MASK) != 0)
        vit::app::record_cut(font ? font : dl->_Data->Font, size == 0.f ? dl->_Data->FontSize : size, pos, b,
                             e ? e : b + std::char_traits<char>::length(b), *clip);
    __real__ZN10ImDrawList7AddTextEPK6ImFontfRK6ImVec2jPKcS7_fPK6ImVec4(dl, font, size, pos, col, b, e, wrap, clip);
}
void __wrap__ZN10ImDrawList7AddTextERK6ImVec2jPKcS4_(ImDrawList* dl, const ImVec2& pos, ImU32 col, const char* b, const char* e) {
    if (vit::app::g_on && b) vit::app::g_texts.emplace_back(b, e ? e : b + std::char_traits<char>::length(b));
    __real__ZN10ImDrawList7AddTextERK6ImVec2jPKcS4_(dl, pos, col, b, e);
}
}
