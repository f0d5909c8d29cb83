#include "probe.h"

#include <algorithm>

namespace vit::app {

namespace {

using K = ProbeKind;

// The heatmaps that record their rectangle, range and cells (HeatmapArgs::rect_name).
const std::string kHeatmaps = "{stage|diff|lens|pos.large|pos.embed|pos.run|ln.mean|ln.std|ln.normalized|ln.out|norms|uses.heads}";
// The boxes of the map (model_map.cpp box_of): a new kind of box is declared here.
const std::string kBoxes = "{input|patches|patch_embed|tokens|embed|dropped|registers|ln_pre|ln1|attn|ls1|resid_mid|ln2|mlp|ls2|resid_post|ln_final|pooled|map|logits|probs|embedding}";

std::vector<ProbeKey> make_schema() {
    std::vector<ProbeKey> v = {
        // ---- the --layout dump's own fields (headless.cpp write_layout)
        {K::Top, "window", "framebuffer [W, H]"},
        {K::Top, "title", "the window title"},
        {K::Top, "stage", "the current stage's name (\"\" when no trace)"},
        {K::Top, "model", "the model spec loaded"},
        {K::Top, "image", "the image path loaded"},
        {K::Top, "error", "the last error, one line"},
        {K::Top, "errors", "every unread error: [{title, detail}]"},
        {K::Top, "shader_error", "the heatmap shader's compile log"},
        {K::Top, "data_dir", "where the app found its data"},
        {K::Top, "settings_error", "the settings file's problem"},
        {K::Top, "options", "the options requested (the toolbar's)"},
        {K::Top, "shown_options", "the options of the trace on screen (null: no trace)"},
        {K::Top, "busy", "a forward pass is running"},
        {K::Top, "grads", "the trace on screen has gradients"},
        {K::Top, "heads", "the heads in force"},
        {K::Top, "heads_from", "where the head count came from"},
        {K::Top, "labels_from", "where the class names came from"},
        {K::Top, "heads_request", "the question of the head count (spec, width, choices), null when none"},
        {K::Top, "tab", "the tab shown, by name"},
        {K::Top, "overlay", "the overlay, as --overlay names it"},
        {K::Top, "query", "the query token"},
        {K::Top, "rects", "where things were drawn: {key: [x, y, w, h]}"},
        {K::Top, "numbers", "numbers drawn: {key: value}"},
        {K::Top, "strings", "texts shown: {key: text}"},
        {K::Top, "texts", "labels: [{group, text, box, clip}]"},
        {K::Top, "windows", "every window drawn: [{name, rect, content_right, content_bottom, right, bottom, scroll_x, scroll_y, floating}]"},
        {K::Top, "heatmaps", "every heatmap drawn: [{name, rect, rows, cols, cell_w, cell_h, key (drawn), width_bound}]"},
        {K::Top, "ui_scale", "the content scale (logical pixels are the framebuffer's over it)"},
        {K::Top, "schema", "this list"},
        {K::Top, "undeclared", "keys written that this list does not declare (must be empty)"},

        // ---- frame, panels, status bar
        {K::Rect, "center", "the centre panel (the tabs)"},
        {K::Rect, "toolbar", "the toolbar (as many rows as the width needs)"},
        {K::Rect, "tabs.<tab>", "a tab of the tab bar"},
        {K::Number, "tabs.<tab>.cut", "1 when the tab is narrower than its name (the bar squeezed it)"},
        {K::Rect, "toolbar.{export|help}", "the Export menu's button and the help mark"},
        {K::Rect, "toolbar.<checkbox>", "a toolbar BUG switch"},
        {K::Rect, "status.line", "the status bar's line"},
        {K::Rect, "status.gemm", "the status bar's GEMM field"},
        {K::Rect, "status.stages", "the status bar's stages-on-demand field (only for a trace on demand)"},
        {K::Rect, "errors", "the error panel"},
        {K::Rect, "original", "the image file as decoded"},
        {K::Rect, "original.crop", "the region the model sees, on the original"},
        {K::Rect, "image", "the model input"},
        {K::Rect, "image.query", "the query patch's frame"},
        {K::Rect, "compute_grads", "the 'Compute gradients' button"},
        {K::Number, "status.cut", "1 when the status line was cut to fit"},
        {K::Number, "image.patch_label_step", "every k-th patch is numbered"},
        {K::String, "truth.{class|peak|note}", "a generated scene's truth: its class, where the overlay's peak lies, why labels.json was not read"},
        {K::Rect, "truth.box", "the object's box over the model input"},
        {K::Number, "truth.{clutter|peak_patch|peak_on_object}", "the distractors drawn, the overlay's peak patch, 1 when it is on the object"},
        {K::Number, "truth.{object_patches|clutter_patches}", "the patches the object's box touches, the distractors' other ones"},
        {K::Number, "image.{h|w|gh|gw}", "the run's input size and patch grid, as drawn"},
        {K::Rect, "image.size.{h|w}", "the input-size control's height and width fields (with their - + buttons)"},
        {K::String, "image.size.message", "why the size typed was not applied"},
        {K::String, "image.pos", "what happened to the position embeddings at this size"},
        {K::String, "overlay.name", "the overlay shown, as the menu names it for this model"},
        {K::String, "predictions.embedding", "what a model without a classifier outputs instead"},
        {K::Group, "status.jobs", "the label of each job's progress bar in the status bar (cut at its end to fit)"},
        {K::Group, "image.patches", "patch numbers on the model input"},
        {K::Number, "overlay.argmax", "the overlay's hottest patch"},
        {K::Number, "overlay.argmin", "the overlay's coldest patch"},
        {K::Number, "overlay.{lo|hi|ref|opacity}", "the overlay's smallest and largest value (its key runs from 0 to hi); uniform (1/keys, or the values' mean); the opacity drawn"},
        {K::String, "overlay.flat", "the note under an overlay whose values are within a few percent of each other"},
        {K::String, "<heatmap>.flat", "the note under a heatmap whose key spans a near-constant range"},
        {K::Number, "overlay.query", "the query token drawn"},
        {K::String, "title", "the window title"},
        {K::String, "status", "everything the status bar says, in full"},
        {K::String, "status.gemm", "the GEMM field"},
        {K::String, "status.gemm_full", "the GEMM field's tooltip"},
        {K::String, "status.jobs", "the jobs running: name and progress, one per line"},
        {K::String, "status.stages", "how the trace on screen holds its stages: every one recorded, or on demand (kept, recomputed)"},
        {K::String, "working", "the work in flight shown in the centre while there is no trace: name and step, one per line"},
        {K::String, "errors", "the error panel's text"},
        {K::String, "preprocess", "the preprocessing steps"},
        {K::String, "preprocess.drawn", "the preprocessing steps as drawn, one line per screen line (wrapped at spaces only)"},
        {K::String, "image.message", "why the image panel shows no input"},
        {K::String, "overlay.message", "why the overlay shows nothing"},
        {K::String, "overlay.error", "the overlay's computation failed"},
        {K::String, "overlay.values", "the overlay's values, comma-separated"},
        {K::Group, "thumbs.range", "the range under each thumbnail (0 .. its max)"},
        {K::Rect, "thumbs", "the thumbnails' row, their names and ranges included (where drawn: it may be scrolled out of view)"},
        {K::Rect, "thumbs.note", "the random-weights note: under the thumbnails, or the flat overlay's line under the key that stands for it"},
        {K::Rect, "image.panel", "the part of the image panel shown (it scrolls; the predictions are under it)"},
        {K::Rect, "image.more_below", "the line under the image panel saying the thumbnails continue below"},
        {K::String, "image.more_below", "what that line says (only while the thumbnails' row is below the part shown)"},
        {K::Number, "thumbs.size", "the side of each attention thumbnail (px)"},
        {K::Number, "thumbs.{0|1|2}.vmax", "the largest value of the cls attention, rollout and grad-weighted thumbnails"},
        {K::String, "thumbs.{0|1|2}.why", "why a thumbnail is empty: under its name, with the session's reason for missing gradients"},
        {K::String, "prediction", "the top-1 class name"},
        {K::Rect, "navigator.predictions", "the top predictions, under the stage list (issue 36: the image's column is the image's)"},
        {K::String, "predictions.note", "why the predictions mean nothing"},
        {K::String, "predictions.{domain|nonfinite}", "the image is outside what the model knows; the prediction is not a number"},
        {K::String, "heads.prompt", "why the window asks for the head count"},
        {K::Rect, "heads.prompt", "the heads question"},
        {K::Rect, "heads.choice.<n>", "a head count to choose"},
        {K::Rect, "heads.cancel", "cancel the heads question"},
        {K::String, "toolbar.heads", "the heads in force, as the toolbar shows them"},
        {K::String, "toolbar.model_notes", "what the loaded file is and what its loader ignored or took from elsewhere (absent for presets)"},
        {K::String, "toolbar.samples", "the sample images the menu lists"},
        {K::String, "toolbar.image", "what the image menu shows: the loaded image's file name, or that none is loaded"},
        {K::String, "prediction.<k>", "the k-th prediction: class index and name"},

        // ---- heatmaps (heatmap.cpp) and the statistics beside the stage view
        {K::Rect, kHeatmaps, "a heatmap's cells"},
        {K::Rect, kHeatmaps + ".cell", "the framed cell (the math panel's)"},
        {K::Rect, "stage.picture", "an RGB model's input stage drawn as the picture (its channels on request)"},
        {K::Number, kHeatmaps + ".{vmin|vmax|mode|rows|cols|cell_w|cell_h}", "a heatmap's range, colour map and cells"},
        {K::Group, kHeatmaps + ".{rows|cols|colorbar}", "a heatmap's axis and colour-bar labels"},
        {K::Group, "<heatmap>.nonfinite", "a heatmap's legend of NaN / Inf cells"},
        {K::Number, "<heatmap>.nonfinite.count", "how many of its cells are NaN / Inf"},
        {K::Rect, "<picture>.key", "a horizontal colour key (heatmap.cpp ColorKey)"},
        {K::Number, "<picture>.key.{vmin|vmax|mode}", "its range and colour map"},
        {K::Group, "<picture>.key", "its figures and marks"},
        {K::String, "<picture>.random", "the random-weights note beside an attention picture"},
        {K::Group, "tabs.names", "the tab bar's names shown (the clip: the bar's scrolling part, unbounded at the right)"},
        {K::Group, "stats.hist", "the histogram's axis (its smallest and largest value) under it"},
        {K::Number, "stats.{shown|all}.{min|max|mean|std|n}", "statistics of the slice shown and the whole tensor"},

        // ---- Stage tab (tabs/tab_stage.cpp)
        {K::Number, "stage.showing_grad", "1 when the gradient is drawn"},
        {K::Number, "ln.stacked", "1 when normalized and out are drawn one above the other"},
        {K::Number, "ln.row_h", "the LayerNorm panel's row height in px (cells taller than wide where it exceeds the cell width)"},
        {K::Number, "ln.cell_w", "the LayerNorm panel's cell width in px"},
        {K::Number, "ln.rows_room_bound", "1 when the rows are as tall as the panel's room allows, short of readable_height"},
        {K::String, "stage.message", "why the stage view shows no heatmap"},
        {K::String, "navigator.layer", "the stage list's layer slider as it reads (no layer outside the blocks)"},
        {K::String, "ln.cells", "the LayerNorm panel's note that its cells are not square, and why"},
        {K::String, "stage.title", "the stage's title"},
        {K::String, "stage.shape", "the line with the stage's name, shape and axes"},
        {K::String, "stage.what", "the stage's explanation"},
        {K::String, "stage.torch", "the stage's PyTorch line"},
        {K::String, "stage.options", "the options the trace on screen was computed with"},
        {K::String, "stage.running", "a pass with other options is running (said above the view)"},
        {K::Rect, "bar.<class>", "a logit's bar"},
        {K::Group, "bars.{names|values|axis}", "the bar chart's labels and its axis"},
        {K::Group, "vbars.axis", "a vector's bar chart's axis"},
        {K::Number, "bars.{zero_x|px_per_unit|shown}", "the bar chart's scale"},
        {K::Rect, "cellmath", "the math panel"},
        {K::Number, "cellmath.{ok|value|recorded|scale|terms}", "the math of one cell"},
        {K::String, "cellmath.{stage|index|formula|lines|message}", "the math panel's texts"},

        // ---- Attention maps, Changes
        {K::Rect, "grid.<layer>.<head or mean>", "one map of the attention grid (layer 'probe': SigLIP's pooling probe)"},
        {K::String, "grid.{message|source}", "why the attention grid shows nothing; the stage its maps read"},
        {K::Number, "attn.{per_map|shared_max|uniform}", "the attention grid's scale"},
        {K::String, "attn.ranges", "each map's max, when each has its own scale"},
        {K::Group, "attn.ranges", "each map's max, under it"},
        {K::String, "changes.message", "why the Changes tab shows no difference map"},
        {K::String, "changes.pending", "the comparison is being computed (stages on demand): what the tab says meanwhile"},
        {K::String, "changes.options", "the options the difference is of"},
        {K::String, "changes.{baseline|first|slice|same}", "the baseline's options, the first stage that changed, the slice shown, why the map is white"},
        {K::String, "changes.{nothing|why|order|rows}", "'nothing changed' (no stage moved); why (the options cannot act on this model); the list's order "
                                                "(pipeline or largest first); its stages in the order shown"},
        {K::Number, "changes.{scale_max|max_abs}", "the bars' scale (the largest relative change); the map's largest |difference|"},
        {K::Rect, "changes.axis", "the bars' axis"},
        {K::Rect, "changes.bar.<stage>", "a stage's bar"},
        {K::Group, "changes.{axis|list}", "the bars' axis figures; the values and stage names"},

        // ---- Interventions (interventions_ui.cpp) and the What it uses tab (tabs/tab_interventions.cpp)
        {K::Rect, "iv.strip", "the list of interventions above the tabs"},
        {K::Rect, "iv.item.<i>", "one intervention in the list (a click removes it)"},
        {K::Rect, "iv.patch_panel", "the activation-patching panel"},
        {K::Rect, "nav.head.<layer>.<head>", "the navigator's switch that knocks a head out"},
        {K::Number, "iv.{count|from_block}", "interventions asked for; the block the pass on screen was recomputed from"},
        {K::String, "iv.{list|patch_error}", "the interventions of the trace on screen; why a patch was not applied"},
        {K::String, "{image|grid|uses}.dropped", "the hatch's legend: patches dropped"},
        {K::Number, "{image|grid}.dropped", "dropped patches hatched"},
        {K::Number, "grid.image_alpha", "how much of the model input is laid over each attention map (0: none; --attention-image off)"},
        {K::Number, "grid.knocked_out", "knocked-out heads crossed out in the attention grid"},
        {K::Rect, "uses.{occlusion|cls|rollout}", "the occlusion, cls attention and rollout maps"},
        {K::Number, "uses.{occlusion|cls|rollout}.argmax", "each map's hottest patch"},
        {K::Number, "uses.progress", "the sweeps' progress"},
        {K::String, "uses.{state|message|measure|heads.best}", "the What it uses tab's state and texts"},
        {K::String, "uses.{occlusion|cls|rollout}.message", "why a map is not drawn"},

        // ---- Train
        {K::Rect, "train.{loss|acc|test}", "the curves' plot areas"},
        {K::Group, "train.{loss|acc|test}.axes", "the curves' titles, axis figures and axis names"},
        {K::Number, "train.{steps|epochs_done|first_loss|last_loss|test_acc}", "the training run"},

        // ---- Logit lens, Positions, Filters
        {K::Rect, "lens", "the logit lens chart"},
        {K::String, "lens.{message|note|reads|top|values|classes|legend}", "the logit lens's texts and numbers (legend: none since issue 36, the classes are named on rows)"},
        {K::Rect, "pos.{grid|selected}", "the position-similarity maps"},
        {K::Number, "pos.{patch|grid_n|run.patch}", "the patch shown large, the learned grid's side, the run's patch"},
        {K::String, "pos.{message|values|run.values}", "the Positions tab's texts and numbers (learned; as run)"},
        {K::Rect, "filters.<i>", "a patch-embedding filter"},
        {K::Number, "filters.{k|channels}", "the filters drawn"},
        {K::String, "filters.{message|variance}", "the Filters tab's texts and numbers"},

        // ---- Distance
        {K::Rect, "dist.plot", "the plot's axes"},
        {K::Rect, "dist.dot.<layer>.<head>", "this image's dot"},
        {K::Rect, "dist.avgdot.<layer>.<head>", "the average's ring"},
        {K::Number, "dist.{ymax|layers|heads|uniform}", "the plot's scale"},
        {K::Number, "dist.avg.{n|images}", "the average's size"},
        {K::String, "dist.{message|values|label|hover|uniform.label}", "the Distance tab's texts and numbers"},
        {K::String, "dist.avg.{state|message|label|values}", "the average's state and numbers"},
        {K::Group, "dist.{title|x|xlabel|y}", "the plot's labels"},

        // ---- Patches
        {K::Rect, "patches.grid", "the tiles"},
        {K::Rect, "patches.seq.{tile|strip}.<n>", "row n of the sequence"},
        {K::Number, "patches.{rows_equal_tiles|vmax|tile|gap|grid_n|grid_rows|first_shown|last_shown|first_wrong}", "the Patches tab's numbers (rows in view; the first row that visibly is not its tile, -1: none)"},
        {K::String, "patches.{message|mismatch}", "the Patches tab's texts"},
        {K::Group, "patches.{grid|seq|channels}", "tile and row numbers"},

        // ---- Token norms, Patch features, Self-attention (issue 20: what the families are studied for)
        {K::Rect, "norms.image", "the patch norms over the image"},
        {K::Rect, "norms.token.<name>", "where a token before the patches (cls, reg0, dist) looks"},
        {K::Number, "norms.token.<name>.vmax", "the top of its colours (0 .. its largest weight)"},
        {K::Number, "norms.{layer|factor|median|high|layers|tokens}", "the token norms tab's numbers"},
        {K::String, "norms.{message|values|high|tokens}", "the token norms tab's texts and numbers"},
        {K::Rect, "features.{image|rgb|mask}", "the input, the components as RGB, the foreground"},
        {K::Number, "features.{threshold|fg}", "the foreground rule's threshold and count"},
        {K::String, "features.{message|source|fg_rule|rgb|pca|var|fg}", "the patch features tab's texts and numbers"},
        {K::Rect, "selfattn.{head|mask}.<h>", "a head's self-attention map and its mask"},
        {K::Number, "selfattn.{keep|layer|heads}", "the self-attention tab's numbers"},
        {K::String, "selfattn.{message|source|values|mask|kept}", "the self-attention tab's texts and numbers"},

        // ---- Map and strip (model_map.cpp, tabs/tab_map.cpp)
        {K::Rect, "map", "the map"},
        {K::Rect, "map.box." + kBoxes, "a box of the map"},
        {K::Rect, "map.shape.<stage>", "the shape on the arrow after a stage"},
        {K::Number, "map.{layer|depth|from_trace|current}", "the map's block layer and current box"},
        {K::String, "map.{message|order|repeat|current|options|run}", "the map's texts (run: the run's sizes and tokens)"},
        {K::String, "map.box." + kBoxes + ".stages", "a box's stages"},
        {K::String, "map.shape.<stage>", "the shape on the arrow after a stage"},
        {K::Group, "map.{block|boxes|shapes}", "the map's labels"},
        {K::Rect, "strip." + kBoxes, "a box of the map strip"},
        {K::Number, "strip.dropped", "boxes the strip left out"},
        {K::Number, "strip.current", "the current box on the strip"},
        {K::Group, "strip", "the strip's labels"},
        {K::Number, "tour.{step|steps}", "the tour of lessons (Learn mode, lessons.h): the lesson it is at, how many this model has"},
        {K::String, "tour.{id|title}", "the tour's lesson: the Learn step it sits on, its title"},

        // ---- Learn mode (learn.cpp)
        {K::Rect, "learn.{picture|narration|controls|key}", "Learn mode's picture, narration panel and controls"},
        {K::Rect, "learn.grid.<what>", "a grid Learn mode drew: its key's name, '#', the how-manieth of that name this frame"},
        {K::Number, "learn.{steps|step|time|phase|zoom|value_texts|keys|token|head|patch|drawn}",
         "Learn mode: its steps, the step and moment shown, the camera's zoom, the values printed in cells, the keys drawn, "
         "the token, head and patch followed"},
        {K::String, "learn.{title|id|narration|torch|message|keys|step_ids}", "Learn mode's texts: the step's title, id, narration, "
         "PyTorch line, why nothing is shown, the colour keys, every step's id"},
        {K::String, "learn.values.<what>", "numbers a Learn step drew (a row of the trace, comma-separated)"},
        {K::Number, "learn.lessons", "the lessons read"},
        {K::String, "learn.lesson.{title|ask|answer|truth|verdict|why|truths|titles|verdicts|whys}", "the step's first lesson: its question, the learner's "
         "answer, what the trace says, the verdict and the explanation; every lesson of the step: their truths, titles, verdicts and explanations"},
        {K::String, "learn.lessons_error", "why the lessons file was not read"},
        {K::Group, "learn.{labels|cells|key}", "Learn mode's captions, the values printed in cells, the keys' figures"},
    };
    return v;
}

const std::vector<ProbeKey> kSchema = make_schema();

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

const std::vector<ProbeKey>& probe_schema() { return kSchema; }

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
    for (const ProbeKey& k : kSchema)
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
