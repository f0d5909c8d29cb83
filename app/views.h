// What every view draws with: the session (the trace on screen and what produced it), the user's
// selection, the probe that records what was drawn, and the heatmap program. The panels around the
// tabs (toolbar, navigator, image panel, predictions, status bar) are declared here with the state
// each keeps; the tabs are units of their own (app/tabs/tab.h).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/io/hub.h"
#include "core/model/finite.h"
#include "core/teach/analysis.h"
#include "gl_util.h"
#include "model_scan.h"
#include "probe.h"
#include "session.h"
#include "ui_state.h"

namespace vit::app {

class JobQueue;
class Settings;

struct ViewCtx {
    Session& s;
    UiState& ui;           // the selection (views may change it: a click selects)
    Probe& probe;          // what was drawn where, this frame
    Gfx& gfx;              // the heatmap program
    bool hover;            // the mouse may hover (false in headless screenshots without --hover)
    std::string& notice;   // one line for the status bar ("saved ...", "selected layer 3, head 2")
    Settings* settings;    // the settings file (recent files), null when off
    const JobQueue* jobs;  // the background work (the status bar shows it), null: none
};

// Which derived values a cache holds: stale(name, key) is true (and remembers key) when name was
// computed for another key (a trace version, a model, a slice).
struct CacheKeys {
    std::map<std::string, uint64_t> keys;
    bool stale(const std::string& name, uint64_t key) {
        auto it = keys.find(name);
        if (it != keys.end() && it->second == key) return false;
        keys[name] = key;
        return true;
    }
    void forget(const std::string& name) { keys.erase(name); }
};

// Numbers a view drew, by name (a teaching tab's "Numbers .npy+.csv" export).
using NamedArrays = std::vector<std::pair<std::string, Array>>;

// The stage on screen: the row of the trace on screen that the selection (a stage id) names.
struct ShownStage {
    size_t row = 0;
    const StageInfo* info = nullptr;  // the trace's own table row: its texts are for the options it was computed with
    const Array* value = nullptr;
    const Array* grad = nullptr;      // null when the trace holds no gradient of it
};
// Null when there is no trace. A selection the trace lacks (another model, other options) shows
// the same kind of stage at the nearest block, else the first stage.
std::optional<ShownStage> shown_stage(const Session& s, const UiState& ui);
// The trace's row for an id: that stage, else the same kind at the nearest block, else row 0.
size_t row_of(const Trace& t, StageId id);
// Selects a row of the trace on screen (the selection is its id, so it survives a re-run).
void select_row(UiState& ui, const Trace& t, size_t row);
// Selects a stage by id when the trace has it; returns whether it did.
bool select_stage(UiState& ui, const Trace& t, StageId id);
// "random weights" for presets (their predictions mean nothing), "" otherwise: of the model on screen.
std::string weights_note(const Session& s);
// A note when the image is outside what the model knows (a colour photo on a gray model, a photo
// shrunk many times, the data set its metadata names), "" otherwise.
std::string domain_note(const Session& s);
// The names of the classes of the model on screen (the model's, or "class i").
std::vector<std::string> class_labels(const Config& c, size_t n);
// A number as the heatmaps print it: %.4f, or %.3e when very small or large.
std::string fmt(float v);
std::string fmt_short(float v);  // two significant digits (%.2g), for captions under small maps

// ---- layout (layout.cpp)
// Items left to right that wrap onto a new row when the next one would pass the right edge:
// call next(w) before each item (w: its width with its label).
class Flow {
public:
    Flow();
    // Items within `width` from the cursor (a window that sizes itself to its content reports the last frame's
    // content as its room, which would let a row grow past the window's edge)
    explicit Flow(float width);
    void next(float w, bool group_gap = false);  // group_gap: a wider gap before a new group
    void new_row();                              // the next item starts a row
    static float text_w(const char* text);       // text up to "##"
    static float button_w(const char* label);
    static float checkbox_w(const char* label);
    static float labelled_w(float item_w, const char* label);  // an item of item_w with its label on the right
    // A combo as wide as its preview needs (the text, its padding and the arrow), within [min_w, max_w].
    static float combo_w(const std::string& preview, float min_w, float max_w);
    // The preview shortened at its start ("...oot_test0.png") so that it fits a combo of width w: ImGui would cut
    // its end without saying so.
    static std::string combo_preview(const std::string& preview, float w);
private:
    float left_ = 0, right_ = 0;
    bool first_ = true, row_ = false;
};
// `text` broken into lines no wider than `width`, at spaces only (ImGui's wrapping also breaks after
// a '.', which splits numbers: "0.\n500"); a word wider than `width` keeps a line of its own.
// Leading spaces of the text are kept on its first line.
std::vector<std::string> wrap_at_spaces(const std::string& text, float width);
// `text` drawn wrapped at the wrap position in force (PushTextWrapPos; none: the window's edge) at
// spaces only, so that no number is broken across lines; '\n' starts a line. `col` null: the text
// colour; `disabled`: the disabled colour. Its lines are recorded in the probe (`wrapped`, under
// `key`) for the sweep's rule against a number wrapped inside itself.
void TextWrappedWords(Probe& pr, const char* key, const std::string& text, const ImVec4* col = nullptr, bool disabled = false);
// Records every window of this frame in the probe (after the last End).
void RecordWindows(Probe& probe);

// ---- colour keys (heatmap.cpp): one convention per kind of quantity, shared by every picture
// Signed values (activations, logits, gradients) and differences: diverging around 0, white = 0,
// blue below, red above, symmetric. Probabilities (attention, softmax) and magnitudes (std, norms,
// relative changes): sequential (viridis) from 0 (dark) to the largest value (yellow).
enum class Quantity { Signed, Difference, Probability, Magnitude };
Colormap quantity_colormap(Quantity q, float lo, float hi);
Colormap quantity_range(Quantity q, const float* d, size_t n);  // over the finite values of d
// A bar's colour for a signed value: the diverging map's ends (negative blue, positive red).
ImU32 signed_colour(float v);
// The colour the heatmap shader gives `v` under `cm` (shaders/heatmap.frag, computed here): for what is
// drawn without a texture (bars, a cell's value text on its own colour).
ImU32 colour_of(const Colormap& cm, float v);
// A value marked on a key ("1/50 = 0.0200 (uniform)").
struct KeyMark {
    float value;
    std::string label;
};
// Width a vertical colour bar needs: the bar, a gap and its widest figure or mark.
float colorbar_width(const Colormap& cm, const std::vector<KeyMark>& marks = {});
// A vertical colour bar at p, h tall, with its top, middle and bottom figures and the marks across it.
void DrawColorBar(ViewCtx& v, const std::string& group, const Colormap& cm, ImVec2 p, float h,
                  const std::vector<KeyMark>& marks = {});
// A horizontal key as an item of its own, w wide (under a grid of maps, a thumbnail, an overlay):
// the ramp, its two ends' figures and the marks. Records rects/numbers "<id>.key" and labels.
void ColorKey(ViewCtx& v, const char* id, const Colormap& cm, float w, const std::vector<KeyMark>& marks = {});
float color_key_height();
// The narrowest a ColorKey of `cm` is drawn (its two end values and room between them).
float color_key_min_width(const Colormap& cm);
// The least height at which a heatmap of `rows` rows can be read: 4 px a row up to 100 px (a single
// row: 12 px). The layout sweep holds every heatmap to it; layouts that set their own cell size use it.
float readable_height(int rows);
// The legend of non-finite cells (NaN magenta, +Inf striped white, -Inf striped black) with their
// counts, as items; nothing when all are finite. Returns whether it drew anything.
bool NonFiniteKey(ViewCtx& v, const std::string& group, const NonFinite& nf);
// Attention: one scale shared by every map on screen, from 0 to the largest value (per_map: each
// map from 0 to its own largest), with uniform attention 1/T marked.
Colormap attention_colormap(float shared_max, float map_max, bool per_map);
std::vector<KeyMark> attention_marks(int tokens);
// The scale of a picture of several attention maps, as every such picture has it: the two scales side
// by side ("one for every map", "each map its own": `per_map`, the UI's attention_per_map), a line saying what the scale is, and the key
// under it, "<id>.key": off, one scale from 0 to `shared_max` (the largest value of every map) with
// uniform attention 1/`keys` marked; on, the fraction of each map's own max. `unit` names one map in
// the tooltip ("map", "head"); `caption` says where each map's own max is printed ("under", "above").
void AttentionScaleKey(ViewCtx& v, const char* id, bool& per_map, float shared_max, int keys, const char* unit,
                       const char* caption);
// A curve with its axes: a title (y_label), the y figures (ymin / ymax, NaN: the data's), the x
// figures from first_x to last_x and the x axis's name. Records rects "<id>" and labels "<id>.axes".
void PlotWithAxes(ViewCtx& v, const char* id, const std::vector<float>& y, float ymin, float ymax, const std::string& x_label,
                  const std::string& y_label, float first_x, float last_x, ImVec2 size);
// "random weights: this attention is an untrained model's ..." beside an attention picture of a
// preset (probe string "<key>.random"); false when the weights are not random.
bool AttentionNote(ViewCtx& v, const std::string& key);

// ---- heatmaps (heatmap.cpp)
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
    const char* rect_name = nullptr;  // records rect, range and cells under this name (probe schema)
    float cell = 0;              // > 0: this cell size (side-by-side panels share their rows)
    float cell_h = 0;            // > 0 with cell: rows this tall (cells taller than wide: few rows, many columns)
    bool raise_rows = false;     // square cells bound by the width and shorter than readable_height: rows raised to it
    bool widen_cols = false;     // square cells bound by the height and narrower than readable_height: columns widened to
                                 // it (many rows, few columns: a 261 x 64 q slice was 96 px wide), said in the titles line
    float strip_w = 0;           // > 0 with cols == 1: a column of this width (mean/std per token)
    std::vector<std::string> col_names;  // e.g. class names for a logits strip
    int* clicked_row = nullptr;  // set to the row of a cell clicked this frame (else left alone)
    int* clicked_col = nullptr;  // and its column
    int mark_row = -1, mark_col = -1;  // a cell framed in cyan (the one whose math is shown)
    bool titles = true;          // the line naming the axes above the cells
    bool row_labels = true;      // the row names left of the cells (side-by-side panels: the first only)
    std::function<std::string(int)> row_name, col_name;  // tick names ("cls", "p3"); null: the index
    std::function<std::string(int)> row_long, col_long;  // the tooltip's names ("4 = patch 3 (row 0, col 3)")
    std::vector<KeyMark> marks;  // values marked on the colour bar
    std::optional<Quantity> quantity;  // tensor_heatmap: this convention over the whole tensor (else the stage's)
};
// The token names of a stage's token and patch axes (cls, reg0, dist, p0, ...) from the trace's table.
void token_axis_names(HeatmapArgs& a, const Session& s, StageKind kind);
// Text cut to fit `w` pixels, with "..." when cut (`cut` says whether it was).
std::string fit_text(const std::string& t, float w, bool& cut);
// The draw list's clip rectangle (where a label must stay).
Rect clip_rect(ImDrawList* dl);
// Records a label and draws it (see DrawnText).
void DrawLabel(ImDrawList* dl, Probe& probe, const std::string& group, ImVec2 pos, ImU32 col, const std::string& text,
               const Rect& clip);
void Heatmap(ViewCtx& v, const char* id, Texture& tex, bool upload, const HeatmapArgs& a);
// Cells smaller than a pixel are binned to the pixels they cover (Heatmap): the bins (rows, columns) of a map of
// rows x cols cells of cell_h x cell_w px, each bin's value its cells' farthest from 0 (from_zero: diverging maps) or
// largest (a NaN / Inf cell wins its bin), and the words that say so ("2048 columns in 256 px: each pixel shows ...").
struct Binning { int rows = 0, cols = 0; };
Binning heatmap_binning(int rows, int cols, float cell_h, float cell_w);
std::vector<float> bin_extremes(const float* d, int rows, int cols, const Binning& b, bool from_zero);
std::string binning_text(const HeatmapArgs& a, const Binning& b);
// Whether Heatmap, given `avail` of room, labels its columns with a.col_names (each fits its cell),
// not with numbers: a view decides from it whether a legend of the numbers is needed.
bool heatmap_col_names_fit(const ViewCtx& v, const HeatmapArgs& a, ImVec2 avail);
// Near-constant ranges (issue 36 item 9): (hi - lo) / max(|lo|, |hi|), and whether it is under kFlatSpread.
// A key over such a range stretches its colours over a small difference, and the view says so
// (flat_note: a line in the warning colour, recorded as the probe's "<group>.flat").
constexpr double kFlatSpread = 0.02;
double relative_spread(float lo, float hi);
bool near_constant(float lo, float hi);
void flat_note(ViewCtx& v, const std::string& group, float lo, float hi);
// A flat overlay (issue 36 item 9): its values, lo .. hi over the patches, within kFlatOverlay of each other
// (relative_spread < 0.25): no patch stands out and the overlay is one wash of colour over the photo
// (random weights' attention: ~1/T everywhere; vit-ti16's last layer 10% off uniform). The image panel
// draws it faint with "Flat: no patch stands out"; the sweep's rule asks for that note by this same test.
constexpr double kFlatOverlay = 0.25;
bool flat_overlay(float lo, float hi);
// Range and colormap for a slice under the chosen scale mode.
Colormap colormap_for(const float* all, size_t n_all, const float* slice, size_t n_slice, bool signed_values, ScaleMode mode);
// A heatmap's cached texture and colour range, re-uploaded only when what it shows changes.
struct HeatmapCache {
    Texture tex;
    Colormap range;
    uint64_t key = 0;
    bool valid = false;
};
// One tensor (any rank) as a heatmap of its current slice (head or channel), axes from `info`.
void tensor_heatmap(ViewCtx& v, const char* id, const std::string& name, const Array& t, const StageInfo& info,
                    HeatmapCache& cache, HeatmapArgs a, bool is_grad);

// ---- the panels around the tabs (panel_*.cpp, keys.cpp: one file per panel), each with the state it keeps
struct FileBrowser {
    std::string dir, filter;  // dir "": the working directory
};
bool DrawFileBrowser(FileBrowser& fb, const char* id, std::string& path, const std::vector<std::string>& exts);

struct Toolbar {
    char model_path[1024] = "", image_path[1024] = "";
    FileBrowser browser;
    std::optional<std::vector<std::string>> samples;  // the bundled sample images (listed once)
    ModelScan scan;  // "On this computer": scanned off the UI thread when first opened, and on Rescan
};
// The exports asked for this frame (the toolbar's buttons, --export-*); exports.cpp runs them.
struct ExportRequest {
    bool view_png = false, npy = false, npz = false;
};
// `tab_exports_numbers`: the shown tab exports the numbers it drew (its button says so).
void DrawToolbar(ViewCtx& v, Toolbar& tb, ExportRequest& req, bool tab_exports_numbers);
// The bundled sample images (the Fashion-MNIST samples, the scenes, the photographs), sorted.
std::vector<std::string> sample_images();
void DrawNavigator(ViewCtx& v);

// The image panel: the original, the model input with its overlay and the three attention thumbnails.
struct ImagePanel {
    CacheKeys keys;
    Texture image, overlay, original;
    std::vector<Texture> thumbs;
    std::vector<float> overlay_vals;                  // recomputed only with their texture
    std::string overlay_why;                          // why there are none ("" when there are)
    std::vector<std::pair<float, float>> thumb_range; // min, max per thumbnail
    int painted = -1;                                 // painting patches to drop: the patch the stroke is on
    bool paint_drop = true;                           // the stroke drops (true) or puts back (false)
    std::vector<std::string> thumb_why;               // why a thumbnail is empty
    // the input-size control: what is typed, until applied (or refused, said in size_error)
    int size_h = 0, size_w = 0;
    std::string size_for;                             // the model the typed size is for
    std::string size_error;
    // the thumbnails' row as last drawn: its bottom (screen y; 0: no row), and whether it did not fit
    // the part of the panel shown (a line under the panel then says they continue below)
    float thumbs_bottom = 0;
    bool thumbs_below = false;
};
void DrawImagePanel(ViewCtx& v, ImagePanel& panel);
// The image panel in a scrolling child `height` tall (less a line that says, when the thumbnails'
// row did not fit the part shown last frame, that they continue below).
void DrawImagePanelArea(ViewCtx& v, ImagePanel& panel, float height);
// The trace on screen's input (H, W), denormalized to 0..1, as an RGB texture; false when there is none.
bool upload_model_input(Texture& tex, const Session& s);
void DrawPredictions(ViewCtx& v);
float predictions_height(ViewCtx& v);  // what DrawPredictions needs (under the navigator's stage list)
void DrawStatusBar(ViewCtx& v);
// The status bar's height, and the bar in its own window along the bottom of a W x H window (the workbench
// and Learn mode both end with it).
float status_bar_height();
void DrawStatusWindow(ViewCtx& v, float W, float H);
// The work in flight (a model loading, a forward pass at block k of L), large, for a view that has
// nothing else to show yet; false when nothing runs.
bool DrawWorking(ViewCtx& v);
// A progress bar `w` wide with `label` inside it, cut at its end to fit (never from the left, as
// ImGui's own overlay text is when wider than the bar), recorded as a label of `group`.
void ProgressBarLabelled(ViewCtx& v, const char* group, float fraction, float w, const std::string& label);
void DrawErrorPanel(ViewCtx& v);  // every unread error in full, until dismissed
// Keys that change the stage, head, options and zoom (the tabs' keys are the tab table's).
void HandleKeys(ViewCtx& v);

}  // namespace vit::app
