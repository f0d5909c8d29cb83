// The probe: what the views drew this frame and where, for the headless sweep's checks and the
// --layout dump the GUI tests read (tests/gui/layout.py). Rebuilt every frame; nothing in it is
// read back as state by the views.
//
// Every key a view writes and a test reads is declared once, in probe_schema() (probe.cpp): the
// dump carries the schema, the sweep fails on a key written that is not declared, and the tests'
// helper fails on a key read that is not declared (a misspelt key is an error, never an empty read).
#pragma once
#include <map>
#include <string>
#include <vector>

namespace vit::app {

struct Rect { float x = 0, y = 0, w = 0, h = 0; };

// A label drawn on screen (axis ticks, colour-bar figures, patch numbers), recorded so that tests
// can check that no two overlap and none is clipped by its panel.
struct DrawnText {
    std::string group;   // "stage.rows", "stage.cols", "stage.colorbar", "image.patches", ...
    std::string text;
    Rect box, clip;      // where it was drawn, and the region it must stay inside
};

// A window drawn this frame, and how far its content reached (a layout that does not fit shows as
// content past the edge of a window that cannot scroll).
struct DrawnWindow {
    std::string name;
    Rect rect;
    float content_right = 0, content_bottom = 0;  // the content's reach (screen coordinates)
    float right = 0, bottom = 0;                  // the edges inside the padding
    bool scroll_x = false, scroll_y = false;      // it may scroll that way
    bool floating = false;                        // a top-level, popup or tooltip window (not a child)
    bool auto_size = false;                       // sized to its content (a tooltip, the toolbar)
};

// A text wrapped onto several lines (TextWrappedWords): the text and the lines it was drawn as, for
// the sweep's rule that no line break falls inside a number ("0." / "1095").
struct WrappedText {
    std::string key;                 // who drew it ("tour.notice")
    std::string text;                // the text in full
    std::vector<std::string> lines;  // as drawn, in order
};

// A heatmap drawn this frame: where its cells show (the visible part), its size and cell size.
struct DrawnHeatmap {
    std::string name;
    Rect rect;
    int rows = 0, cols = 0;
    float cell_w = 0, cell_h = 0;
    bool key = false;  // drawn with its colour key (the bar beside it, or a key under a short strip)
    bool width_bound = false;  // as wide as its room (square cells: the width limits its height)
    float vmin = 0, vmax = 0;  // its key's range (the sweep's rule on near-constant keys)
    bool flat_note = false;    // a note says that the key spans a near-constant range (colours stretch noise)
};

struct Probe {
    std::map<std::string, Rect> rects;           // where things were drawn
    std::map<std::string, double> numbers;       // numbers drawn (ranges, counts, cell sizes)
    std::map<std::string, std::string> strings;  // texts shown (explanations, reasons, preprocessing)
    std::vector<DrawnText> texts;                // labels, by group
    std::vector<DrawnWindow> windows;
    std::vector<DrawnHeatmap> heatmaps;          // every heatmap drawn (heatmap.cpp)            // every window drawn, with its content's reach (layout.cpp)
    std::vector<WrappedText> wrapped;            // texts wrapped onto lines (layout.cpp TextWrappedWords)

    void clear();
    void text(const std::string& group, const std::string& text, const Rect& box, const Rect& clip) {
        texts.push_back({group, text, box, clip});
    }
    double number(const std::string& key, double otherwise = 0) const {
        auto it = numbers.find(key);
        return it == numbers.end() ? otherwise : it->second;
    }
    std::string string(const std::string& key) const {
        auto it = strings.find(key);
        return it == strings.end() ? std::string() : it->second;
    }
    // Keys written this frame that the schema does not declare ("rects: stgae", "groups: x"), sorted.
    std::vector<std::string> undeclared() const;
};

// The declared keys. A pattern is literal text with placeholders: <what> stands for any non-empty
// text (a stage name, an index), {a|b|c} for one of the listed words.
enum class ProbeKind { Top, Rect, Number, String, Group };
// The heatmaps that record their rectangle, range and cells (HeatmapArgs::rect_name), for the views' probe keys.
inline const std::string kProbeHeatmaps = "{stage|diff|lens|pos.large|pos.embed|pos.run|ln.mean|ln.std|ln.rms|ln.normalized|ln.out|norms|uses.heads}";
// The boxes of the map (model_map.cpp box_of): a new kind of box is declared here.
inline const std::string kProbeBoxes = "{input|patches|patch_embed|tokens|embed|dropped|registers|ln_pre|ln1|attn|ls1|resid_mid|ln2|mlp|ls2|resid_post|ln_final|pooled|map|logits|probs|embedding}";

struct ProbeKey {
    ProbeKind kind;
    std::string pattern;
    std::string what;  // what it is, for the reader of the schema
};
const std::vector<ProbeKey>& probe_schema();
const char* probe_kind_name(ProbeKind k);  // "top", "rects", "numbers", "strings", "groups"
bool probe_declared(ProbeKind kind, const std::string& key);

}  // namespace vit::app
