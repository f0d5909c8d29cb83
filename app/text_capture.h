// Every text ImGui draws this frame, for the headless sweep's rules on what the screen says (a text
// that cites a file the repository and the install do not hold). The app links with
// -Wl,--wrap for ImDrawList::AddText (app/app.cmake): every widget's text, every label a view draws
// with AddText, and every tooltip pass through it. Off unless a sweep turns it on; then each frame's
// texts are kept until the next clear.
#pragma once
#include <string>
#include <vector>

namespace vit::app {

void text_capture_enable(bool on);
void text_capture_clear();
const std::vector<std::string>& captured_texts();

// Texts ImGui drew clipped on the right or at the bottom: wider or taller than the room its widget gave it (a
// combo's preview, a button's label, a clipped caption), so the screen shows only part of it. ImGui passes a
// fine clip rectangle to AddText exactly when a text does not fit (RenderTextClipped).
struct CutText {
    std::string text;
    float width = 0, room = 0;  // the text's width and the room to its clip edge (pixels)
};
const std::vector<CutText>& captured_cut_texts();

// The files a text cites (issue 36 item 12): "notebook 003", "seed notebook 3", and paths or names
// of documents and scripts ("docs/testing.md", "../shared/DESIGN.md", "visualize_attention.py").
std::vector<std::string> cited_files(const std::string& text);
// Whether a cited file is in the repository or the install: relative to the data root (assets/ in
// the source tree, share/vitscope installed), the source tree above it, or as a path that exists.
// A notebook is never there (none ships).
bool cited_file_exists(const std::string& cited, const std::string& data_root);

}  // namespace vit::app
