// vitscope's command line: what to load and show at launch, and the headless modes
// (--screenshot, --sweep, --bench-frames) used by tests and documentation.
#pragma once
#include "core/model/model.h"
#include <optional>
#include <string>
#include <vector>

#include "ui_state.h"

namespace vit::app {

struct AppArgs {
    std::string model = "scenes", image, labels, stage, screenshot, layout_out, shader_dir, keys;
    int tour = -1;  // --tour N: Learn mode at lesson N of the tour (lessons.h)
    int learn = -1;          // --learn N: Learn mode at step N (learn.h)
    float learn_time = -1;   // --learn-time S: at that moment of the step's animation, paused (-1: playing)
    std::string lessons;     // --lessons FILE: the lessons of one's own (else assets/lessons/scenes.txt)
    std::string learn_answer;  // --learn-answer TEXT: the answer to the first lesson of the step shown
    std::string pooling;  // --pooling cls|mean: Options::pooling
    int image_h = 0, image_w = 0;  // --image-size H[,W]: Options::image_h, image_w (0: the model's own size)
    int heads = 0, layer = -1, head = -1, patch = -1, query = -1, width = 1600, height = 1000;
    std::optional<Tab> tab;
    std::optional<Overlay> overlay;
    float opacity = -1;
    bool attention_per_map = false;  // --attention-scale per-map
    bool changes_largest_first = false;  // --changes-order largest
    bool input_channels = false;         // --input-channels
    bool attention_image = true;     // --attention-image off: the attention grid without the image under its maps
    bool offline = false;  // --offline: hf: models from the Hugging Face cache only
    bool no_affine = false, unbiased = false, bug_scale_after_softmax = false, bug_reshape_patches = false, squash = false, no_grads = false, grads = false;
    std::optional<std::pair<int, int>> cell;       // --cell I,J: the cell whose math is shown
    std::optional<std::pair<float, float>> hover;  // headless: put the mouse here (else no tooltip)
    bool click = false;                            // headless, with --hover: one left click there
    bool while_running = false;                    // headless, with --keys: the screenshot while the pass they start runs
    int train_epochs = 0, train_limit = 0;
    int distance_images = 0;  // --distance-images N: run the Distance tab's average over N test images at launch
    bool export_view = false, export_npy = false, export_npz = false;
    std::string export_dir = ".";
    int bench_frames = 0;
    bool bench_toggle = false;
    bool bench_switch = false;  // --bench-switch: a stage of another block every frame (Stage tab)
    std::string stages = "auto";  // --stages auto|on-demand|all: how the window records a pass (session.h StagesMode)
    // --sweep: render every stage x value/gradient x tab x overlay (and toggles) in this process
    bool sweep = false;
    int sweep_stages = 0;  // 0: all; else this many stages spread over the trace
    bool sweep_learn_only = false;  // --sweep-only learn: Learn mode's steps alone
    // --sweep-sizes: the layout sweep at each window size ("1280x800,2560x1600@2": @2 a 2x content scale)
    struct WindowSize { int w = 0, h = 0; float scale = 1; };
    std::vector<WindowSize> sweep_sizes;
    float ui_scale = 0;    // --ui-scale: the content scale (0: the monitor's)
    std::vector<int> key_codes;  // --keys, as GLFW key codes
    bool model_given = false;    // --model was on the command line (else the last one is restored)
    std::string settings;        // --settings FILE
    bool no_settings = false;    // --no-settings
    // Interventions, as vitscope-cli takes them (checked against the model once it is loaded:
    // apply_intervention_flags, interventions_ui.h)
    std::vector<std::string> ablate_heads, ablate;  // --ablate-head L.H[:mean], --ablate STAGE (repeatable)
    std::string drop_patches, patch_from, patch_stage, patch_tokens;

    // --while-loading load|pass: the screenshot while the model loads, or while its first pass runs
    std::string while_loading;

    bool headless() const { return !screenshot.empty() || bench_frames > 0 || sweep; }
    // the model named by --model loads as a job (the window is up meanwhile)
    bool load_in_background() const { return !headless() || !while_loading.empty(); }
};

// Parses argv. Returns nullopt to go on, or the process's exit code (0 for --help, 2 for bad usage).
std::optional<int> parse_args(int argc, char** argv, AppArgs& a);

// The flags that index into the model (--layer, --head, --patch, --query, --tour) and --image-size,
// checked against the model loaded at that size: "" when all fit, else the message (bad usage: exit 2,
// as a bad --stage is refused).
std::string model_range_error(const AppArgs& a, const Config& c, int tour_lessons);
// --cell I,J against the slice of `stage` on screen (rows x cols; `what` names it: "blocks.0.attn.scores, head 1").
std::string cell_range_error(const AppArgs& a, const std::string& what, int rows, int cols);

}  // namespace vit::app
