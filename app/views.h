// The app's views: each a Draw function over the session's trace and one
// UiState holding what the user selected (Tracy / imgui_club style).
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/teach/analysis.h"
#include "gl_util.h"
#include "session.h"

namespace vit::app {

struct Rect { float x = 0, y = 0, w = 0, h = 0; };

enum class Tab { Stage = 0, AttentionMaps, Changes, Train, LogitLens, Positions, Filters, Distance, Patches, Map };
constexpr int kTabs = 10;
// The key that selects a tab ("1" .. "9", M for the map), for tooltips and help.
inline std::string tab_key(Tab t) { return t == Tab::Map ? std::string("M") : std::to_string(int(t) + 1); }
// Query: the attention row of any token (ui.query: 0 = cls, 1..N = patches), vit::attention_from.
enum class Overlay { None = 0, Cls, Rollout, GradRollout, Query };
constexpr int kOverlayCount = 5;
enum class ScaleMode { PerTensor = 0, PerSlice, Symmetric };
const char* tab_name(Tab t);
// Options::pooling as the app thinks of it: nullopt = the model's own pooling.
inline std::optional<Pooling> pooling_choice(const Options& o) {
    return o.pooling;
}
inline void set_pooling_choice(Options& o, std::optional<Pooling> p) { o.pooling = p; }
const char* overlay_name(Overlay o);  // as --overlay takes it: none, cls, rollout, grad, query

// A label drawn on screen (axis ticks, colour-bar figures, patch numbers), recorded so that tests
// can check that no two overlap and none is clipped by its panel.
struct DrawnText {
    std::string group;   // "stage.rows", "stage.cols", "stage.colorbar", "image.patches", ...
    std::string text;
    Rect box, clip;      // where it was drawn, and the region it must stay inside
};

struct UiState {
    int stage = 0;            // index into the trace
    int head = 0;             // slice of per-head tensors
    int channel = 0;          // slice of the input
    int patch = -1;           // selected patch (token = patch + 1), -1 none
    int cell_r = -1, cell_c = -1;  // the cell whose math is shown (row, column of the shown slice), -1 none
    int query = 0;            // query token of the Query overlay: 0 = cls, 1..N = patch token (patch + 1)
    int map_layer = 0, tour_step = -1, tour_applied = -1;  // views_map.cpp: block layer on the map; tour step (-1: off)
    ScaleMode scale_mode = ScaleMode::PerTensor;
    bool show_grad = false;   // show d logit / d stage instead of the stage
    Tab tab = Tab::Stage;
    Overlay overlay = Overlay::Cls;
    int overlay_layer = -1;   // -1: last
    int overlay_head = -1;    // -1: mean over heads
    float opacity = 0.65f;
    int fusion = 0;           // rollout head fusion: mean, max, min
    float discard = 0.f;
    float zoom = 1.f, pan_x = 0.f, pan_y = 0.f;
    int pred_class = -1;      // class for gradient views (-1: predicted)
    bool hover = true;        // false in headless screenshots: no tooltip unless --hover asks
    std::string status;       // one line shown in the status bar
    bool request_view_png = false, request_npy = false, request_npz = false;
    int distance_images = 100;      // the Distance tab's "Average over N test images"
    bool distance_autostart = false; // --distance-images N: start that average once a trace is in
    std::string export_dir = ".";
    // For tests and the --layout dump: where things were drawn this frame.
    std::map<std::string, Rect> rects;
    std::map<std::string, double> numbers;
    std::map<std::string, std::string> strings;  // texts shown (explanations, reasons, preprocessing)
    std::vector<DrawnText> texts;
    std::string shader_error;
};

struct DistanceAverage;  // views_distance.cpp

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
    Texture original;                                 // the image file as decoded, before preprocessing
    std::shared_ptr<void> cellmath;                   // views_teach.cpp's cached vit::CellMath (or error)
    Texture lens;                                     // the logit lens (L, K), vit::logit_lens
    Array lens_vals;                                  // its numbers (exported as logit_lens.npy on its tab)
    std::string lens_error;
    Texture pos_grid, pos_large, pos_embed;           // position-embedding similarity (vit::pos_similarity)
    Array pos_sim;                                    // (N, N)
    std::string pos_error;
    std::vector<Texture> filters;                     // principal components of patch_embed (vit::embed_filters)
    std::vector<float> filter_var;
    std::vector<std::vector<float>> filter_vals;      // each (C, P, P) as the core gave it
    std::string filters_error;
    // The Distance tab (views_distance.cpp): vit::attn_distance of the trace shown, and the
    // average over test images (a background job; see DistanceAverage there).
    Array dist_vals;                                  // (L, H)
    std::string dist_error;
    std::shared_ptr<DistanceAverage> dist_avg;
    // The Patches tab: the preprocessed image and the tiles read back from the patches rows.
    Texture patch_image, patch_rows_img, patch_rows;
    Array patch_input;                                // the trace's input (C, S, S), denormalized to 0..1
    std::string patch_error;
    // Numbers behind the teaching tab shown (name -> array): what "Numbers .npy/.csv" exports.
    std::vector<std::pair<std::string, Array>> tab_numbers;
    Tab tab_numbers_tab = Tab::Stage;
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
// views_teach.cpp: the math of one cell (vit::cell_math) of the current stage, in a panel.
void DrawCellMath(Session& s, UiState& ui, Textures& tx, const Rect& area);
// views_teach.cpp: the logit lens tab, layer x class probabilities (vit::logit_lens).
void DrawLogitLens(Session& s, UiState& ui, Textures& tx);
// views_teach.cpp: position-embedding similarity, one small map per patch in the patch layout.
void DrawPositions(Session& s, UiState& ui, Textures& tx);
// views_teach.cpp: the principal components of the patch-embedding filters, as P x P pictures.
void DrawFilters(Session& s, UiState& ui, Textures& tx);
// views_distance.cpp: mean attention distance (vit::attn_distance) as a layer x pixels dot plot, one
// dot per head, with the average over N test images computed in the background.
void DrawDistance(Session& s, UiState& ui, Textures& tx);
// views_distance.cpp: the patches stage as pictures: the image cut into P x P tiles, then each
// row of the patches matrix beside the tile it holds.
void DrawPatchPictures(Session& s, UiState& ui, Textures& tx);
// Every frame, whatever the tab: starts the --distance-images average once a trace is in, and
// cancels a running average that no longer belongs to the trace on screen.
void DistanceTick(Session& s, UiState& ui, Textures& tx);
// True while the Distance tab's average runs (headless drivers wait for it).
bool distance_average_running(const Textures& tx);
// Why the average over test images cannot run for the trace on screen ("" when it can).
std::string distance_average_unavailable(const Session& s);
// Cancels and joins the average's thread (before the session goes away).
void stop_distance_average(Textures& tx);
// "random weights" for presets (their predictions mean nothing), "" otherwise.
std::string weights_note(const Session& s);
void DrawStatusBar(Session& s, UiState& ui);
void DrawErrorPanel(Session& s, UiState& ui);  // every unread error in full, until dismissed
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
    float cell = 0;              // > 0: this cell size (side-by-side panels share their rows)
    float strip_w = 0;           // > 0 with cols == 1: a column of this width (mean/std per token)
    std::vector<std::string> col_names;  // e.g. class names for a logits strip
    int* clicked_row = nullptr;  // set to the row of a cell clicked this frame (else left alone)
    int* clicked_col = nullptr;  // and its column
    int mark_row = -1, mark_col = -1;  // a cell framed in cyan (the one whose math is shown)
};
// Records a label and draws it (see DrawnText).
void DrawLabel(ImDrawList* dl, UiState& ui, const std::string& group, ImVec2 pos, ImU32 col, const std::string& text,
               const Rect& clip);
void Heatmap(const char* id, Texture& tex, bool upload, const HeatmapArgs& a, UiState& ui, Textures& tx);

}  // namespace vit::app
