#include "probe.h"

#include <algorithm>

namespace vit::app {

// The views, each with the probe keys it declares in its own file (the schema is their union): a new view
// adds its function here.
std::vector<ProbeKey> probe_keys_layout_dump();  // app/headless.cpp
std::vector<ProbeKey> probe_keys_frame();  // app/frame.cpp
std::vector<ProbeKey> probe_keys_toolbar();  // app/panel_toolbar.cpp
std::vector<ProbeKey> probe_keys_status();  // app/panel_status.cpp
std::vector<ProbeKey> probe_keys_image();  // app/panel_image.cpp
std::vector<ProbeKey> probe_keys_scene_truth();  // app/scene_truth.cpp
std::vector<ProbeKey> probe_keys_predictions();  // app/panel_predictions.cpp
std::vector<ProbeKey> probe_keys_heatmap();  // app/heatmap.cpp
std::vector<ProbeKey> probe_keys_heads_prompt();  // app/heads_prompt.cpp
std::vector<ProbeKey> probe_keys_stage();  // app/tabs/tab_stage.cpp
std::vector<ProbeKey> probe_keys_navigator();  // app/panel_navigator.cpp
std::vector<ProbeKey> probe_keys_attention();  // app/tabs/tab_attention.cpp
std::vector<ProbeKey> probe_keys_changes();  // app/tabs/tab_changes.cpp
std::vector<ProbeKey> probe_keys_interventions();  // app/interventions_ui.cpp
std::vector<ProbeKey> probe_keys_uses();  // app/tabs/tab_interventions.cpp
std::vector<ProbeKey> probe_keys_train();  // app/tabs/tab_train.cpp
std::vector<ProbeKey> probe_keys_lens();  // app/tabs/tab_lens.cpp
std::vector<ProbeKey> probe_keys_positions();  // app/tabs/tab_positions.cpp
std::vector<ProbeKey> probe_keys_filters();  // app/tabs/tab_filters.cpp
std::vector<ProbeKey> probe_keys_distance();  // app/tabs/tab_distance.cpp
std::vector<ProbeKey> probe_keys_patches();  // app/tabs/tab_patches.cpp
std::vector<ProbeKey> probe_keys_norms();  // app/tabs/tab_norms.cpp
std::vector<ProbeKey> probe_keys_features();  // app/tabs/tab_features.cpp
std::vector<ProbeKey> probe_keys_selfattn();  // app/tabs/tab_selfattn.cpp
std::vector<ProbeKey> probe_keys_map();  // app/tabs/tab_map.cpp
std::vector<ProbeKey> probe_keys_learn();  // app/learn.cpp

namespace {

using K = ProbeKind;


std::vector<ProbeKey> make_schema() {
    std::vector<ProbeKey> v;
    for (auto keys : {
        probe_keys_layout_dump,
        probe_keys_frame,
        probe_keys_toolbar,
        probe_keys_status,
        probe_keys_image,
        probe_keys_scene_truth,
        probe_keys_predictions,
        probe_keys_heatmap,
        probe_keys_heads_prompt,
        probe_keys_stage,
        probe_keys_navigator,
        probe_keys_attention,
        probe_keys_changes,
        probe_keys_interventions,
        probe_keys_uses,
        probe_keys_train,
        probe_keys_lens,
        probe_keys_positions,
        probe_keys_filters,
        probe_keys_distance,
        probe_keys_patches,
        probe_keys_norms,
        probe_keys_features,
        probe_keys_selfattn,
        probe_keys_map,
        probe_keys_learn})
        for (ProbeKey& k : keys()) v.push_back(std::move(k));
    return v;
}



// Whether `key` matches `pat` from positions i and j: literal text, <...> (one or more characters)
// and {a|b|c} (one of the words).
bool match(const std::string& pat, size_t i, const std::string& key, size_t j) {
    if (i == pat.size()) return j == key.size();
    if (pat[i] == '<') {
        const size_t end = pat.find('>', i);
        for (size_t k = j + 1; k <= key.size(); ++k)
            if (match(pat, end + 1, key, k)) return true;
        return false;
    }
    if (pat[i] == '{') {
        const size_t end = pat.find('}', i);
        size_t a = i + 1;
        while (a <= end) {
            size_t b = pat.find_first_of("|}", a);
            const std::string word = pat.substr(a, b - a);
            if (key.compare(j, word.size(), word) == 0 && match(pat, end + 1, key, j + word.size())) return true;
            a = b + 1;
        }
        return false;
    }
    return j < key.size() && pat[i] == key[j] && match(pat, i + 1, key, j + 1);
}

}  // namespace

const std::vector<ProbeKey>& probe_schema() {
    static const std::vector<ProbeKey> schema = make_schema();
    return schema;
}

const char* probe_kind_name(ProbeKind k) {
    switch (k) {
        case ProbeKind::Top: return "top";
        case ProbeKind::Rect: return "rects";
        case ProbeKind::Number: return "numbers";
        case ProbeKind::String: return "strings";
        case ProbeKind::Group: return "groups";
    }
    return "?";
}

bool probe_declared(ProbeKind kind, const std::string& key) {
    for (const ProbeKey& k : probe_schema())
        if (k.kind == kind && match(k.pattern, 0, key, 0)) return true;
    return false;
}

void Probe::clear() {
    rects.clear();
    numbers.clear();
    strings.clear();
    texts.clear();
    windows.clear();
    heatmaps.clear();
    wrapped.clear();
}

std::vector<std::string> Probe::undeclared() const {
    std::vector<std::string> v;
    auto note = [&](ProbeKind kind, const std::string& key) {
        if (!probe_declared(kind, key)) v.push_back(std::string(probe_kind_name(kind)) + ": " + key);
    };
    for (auto& [k, r] : rects) note(ProbeKind::Rect, k);
    for (auto& [k, n] : numbers) note(ProbeKind::Number, k);
    for (auto& [k, s] : strings) note(ProbeKind::String, k);
    for (auto& t : texts) note(ProbeKind::Group, t.group);
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
}

}  // namespace vit::app
