// The app's views: each a Draw function over the session's trace and one
// UiState holding what the user selected (Tracy / imgui_club style).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/analysis.h"
#include "gl_util.h"
#include "session.h"

namespace vit::app {

struct Rect { float x = 0, y = 0, w = 0, h = 0; };

struct UiState {
    int stage = 0;            // index into the trace
    int head = 0;             // slice of per-head tensors
    int channel = 0;          // slice of the input
    int patch = -1;           // selected patch (token = patch + 1), -1 none
    int scale_mode = 0;       // 0 per tensor, 1 per slice, 2 symmetric around 0
    bool show_grad = false;   // show d logit / d stage instead of the stage
    int tab = 0;              // 0 stage, 1 attention maps, 2 changes, 3 train
    int overlay = 1;          // 0 none, 1 cls attention, 2 rollout, 3 gradient-weighted rollout
    int overlay_layer = -1;   // -1: last
    int overlay_head = -1;    // -1: mean over heads
    float opacity = 0.65f;
    int fusion = 0;           // rollout head fusion: mean, max, min
    float discard = 0.f;
    float zoom = 1.f, pan_x = 0.f, pan_y = 0.f;
    int pred_class = -1;      // class for gradient views (-1: predicted)
    std::string status;       // one line shown in the status bar
    bool request_view_png = false, request_npy = false, request_npz = false;
    std::string export_dir = ".";
    // For tests and the --layout dump: where things were drawn this frame.
    std::map<std::string, Rect> rects;
    std::map<std::string, double> numbers;
    std::string shader_error;
};

// Textures live across frames and are uploaded only when what they show changes.
struct Textures {
    Texture stage, bar, image, overlay, diff, ln[4];
    std::vector<Texture> grid, thumbs;
    std::map<std::string, uint64_t> keys;  // what each texture currently holds
    // Values derived from the trace, recomputed only with their texture (never per frame).
    std::vector<float> overlay_vals;
    std::vector<std::pair<float, float>> grid_range;   // min, max per attention-grid map
    std::vector<std::pair<float, float>> thumb_range;
    std::vector<StageChange> changes;
    Array diff_vals;
    std::map<std::string, Stats> stats;               // by version + stage
    std::map<std::string, Colormap> ranges;           // colour range of each heatmap texture
    bool stale(const std::string& name, uint64_t key) {
        auto it = keys.find(name);
        if (it != keys.end() && it->second == key) return false;
        keys[name] = key;
        return true;
    }
};

const TraceEntry* current_entry(const Session& s, const UiState& ui);
void DrawToolbar(Session& s, UiState& ui);
void DrawNavigator(Session& s, UiState& ui);
void DrawStageView(Session& s, UiState& ui, Textures& tx);
void DrawImagePanel(Session& s, UiState& ui, Textures& tx);
void DrawPredictions(Session& s, UiState& ui);
void DrawChanges(Session& s, UiState& ui, Textures& tx);
void DrawAttentionGrid(Session& s, UiState& ui, Textures& tx);
void DrawStatusBar(Session& s, UiState& ui);
void HandleKeys(Session& s, UiState& ui);
bool DrawFileBrowser(const char* id, std::string& path, const std::vector<std::string>& exts);

// A tensor slice drawn as a heatmap with labelled axes, colour bar and hover readout.
struct HeatmapArgs {
    const float* data = nullptr;
    int rows = 0, cols = 0;
    std::string row_label, col_label;
    Colormap cm;
    int highlight_row = -1, highlight_col = -1;
    std::string index_prefix;  // e.g. "[h=2, " for per-head tensors
    bool zoomable = true;
    float max_w = 0, max_h = 0;  // 0: available region
    bool colorbar = true;
    const char* rect_name = nullptr;
};
void Heatmap(const char* id, Texture& tex, bool upload, const HeatmapArgs& a, UiState& ui, Textures& tx);

}  // namespace vit::app
