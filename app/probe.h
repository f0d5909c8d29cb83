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

struct Probe {
    std::map<std::string, Rect> rects;           // where things were drawn
    std::map<std::string, double> numbers;       // numbers drawn (ranges, counts, cell sizes)
    std::map<std::string, std::string> strings;  // texts shown (explanations, reasons, preprocessing)
    std::vector<DrawnText> texts;                // labels, by group

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
struct ProbeKey {
    ProbeKind kind;
    std::string pattern;
    std::string what;  // what it is, for the reader of the schema
};
const std::vector<ProbeKey>& probe_schema();
const char* probe_kind_name(ProbeKind k);  // "top", "rects", "numbers", "strings", "groups"
bool probe_declared(ProbeKind kind, const std::string& key);

}  // namespace vit::app
