#include "app_args.h"

#include <cstdlib>
#include <GLFW/glfw3.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "learn.h"
#include "tabs/tab.h"
#include "core/io/image.h"
#include "core/model/stages.h"

namespace vit::app {

namespace {

// The keys --keys names (the tab table's keys among them).
const std::pair<const char*, int> kKeys[] = {
    {"Right", GLFW_KEY_RIGHT}, {"Left", GLFW_KEY_LEFT}, {"Up", GLFW_KEY_UP}, {"Down", GLFW_KEY_DOWN},
    {"PageUp", GLFW_KEY_PAGE_UP}, {"PageDown", GLFW_KEY_PAGE_DOWN}, {"Home", GLFW_KEY_HOME}, {"End", GLFW_KEY_END},
    {"Escape", GLFW_KEY_ESCAPE}, {"a", GLFW_KEY_A}, {"u", GLFW_KEY_U}, {"h", GLFW_KEY_H}, {"g", GLFW_KEY_G},
    {"q", GLFW_KEY_Q}, {"b", GLFW_KEY_B}, {"r", GLFW_KEY_R}, {"t", GLFW_KEY_T}, {"n", GLFW_KEY_N}, {"p", GLFW_KEY_P},
    {"0", GLFW_KEY_0}, {"k", GLFW_KEY_K}, {"d", GLFW_KEY_D}, {"x", GLFW_KEY_X}, {"l", GLFW_KEY_L}, {"space", GLFW_KEY_SPACE},
    {"plus", GLFW_KEY_EQUAL}, {"minus", GLFW_KEY_MINUS}};

int key_code(const std::string& k) {
    for (const auto& [name, code] : kKeys)
        if (k == name) return code;
    for (const TabSpec& t : tab_table())  // "1" .. "9", and "m" for the map (as the help writes keys: lower case)
        if (k == t.key || (k.size() == 1 && t.key[1] == 0 && k[0] == std::tolower(static_cast<unsigned char>(t.key[0]))))
            return t.glfw_key;
    return -1;
}

// The options given as text, read into their values once CLI11 has parsed them: an error names the flag (exit 2).
struct Raw {
    std::string hover, cell, image_size, sizes;
};

std::optional<int> read_values(const Raw& r, AppArgs& a) {
    if (!r.hover.empty()) {
        float x = 0, y = 0;
        char extra = 0;
        if (std::sscanf(r.hover.c_str(), "%f,%f%c", &x, &y, &extra) != 2 || !std::isfinite(x) || !std::isfinite(y)) {
            std::fprintf(stderr, "vitscope: --hover wants X,Y (got '%s')\n", r.hover.c_str());
            return 2;
        }
        a.hover = std::make_pair(x, y);
    }
    if (a.while_running && (a.screenshot.empty() || a.keys.empty())) {
        std::fprintf(stderr, "vitscope: --while-running needs --screenshot and --keys (the keys start the pass)\n");
        return 2;
    }
    if (!a.while_loading.empty() && a.screenshot.empty()) {
        std::fprintf(stderr, "vitscope: --while-loading needs --screenshot\n");
        return 2;
    }
    if (a.click && !a.hover) {
        std::fprintf(stderr, "vitscope: --click needs --hover X,Y (where to click)\n");
        return 2;
    }
    if (!r.image_size.empty()) {
        // H or H,W: digits only; the multiple of the patch is checked against the model once it is loaded
        auto number = [](const std::string& t) {
            return !t.empty() && t.size() <= 5 && t.find_first_not_of("0123456789") == std::string::npos ? std::stoi(t) : -1;
        };
        const size_t comma = r.image_size.find(',');
        const int h = number(r.image_size.substr(0, comma)),
                  w = comma == std::string::npos ? h : number(r.image_size.substr(comma + 1));
        if (h < 1 || w < 1 || h > kMaxImageSize || w > kMaxImageSize) {
            std::fprintf(stderr, "vitscope: --image-size wants H or H,W, pixels in 1..%d (got '%s')\n", kMaxImageSize,
                         r.image_size.c_str());
            return 2;
        }
        a.image_h = h;
        a.image_w = w;
    }
    if (!r.cell.empty()) {
        int i = -1, j = -1;
        char extra = 0;
        if (std::sscanf(r.cell.c_str(), "%d,%d%c", &i, &j, &extra) != 2 || i < 0 || j < 0) {
            std::fprintf(stderr, "vitscope: --cell wants I,J, two non-negative integers (got '%s')\n", r.cell.c_str());
            return 2;
        }
        a.cell = std::make_pair(i, j);
    }
    if (!r.sizes.empty()) {
        std::stringstream ss(r.sizes);
        std::string one;
        while (std::getline(ss, one, ',')) {
            AppArgs::WindowSize z;
            char extra = 0;
            const int n = std::sscanf(one.c_str(), "%dx%d@%f%c", &z.w, &z.h, &z.scale, &extra);
            if ((n != 2 && n != 3) || z.w < 320 || z.h < 240 || z.w > 8192 || z.h > 8192 || z.scale < 0.5f || z.scale > 4) {
                std::fprintf(stderr, "vitscope: --sweep-sizes wants WxH[@SCALE],... with 320..8192 pixels and a scale of 0.5..4 (got '%s')\n",
                             one.c_str());
                return 2;
            }
            a.sweep_sizes.push_back(z);
        }
        if (!a.sweep) { std::fprintf(stderr, "vitscope: --sweep-sizes needs --sweep\n"); return 2; }
    }
    if (!a.keys.empty()) {
        std::stringstream ks(a.keys);
        std::string k;
        while (std::getline(ks, k, ',')) {
            int code = key_code(k);
            if (code < 0) { std::fprintf(stderr, "vitscope: unknown key '%s' in --keys\n", k.c_str()); return 2; }
            a.key_codes.push_back(code);
        }
    }
    return std::nullopt;
}

}  // namespace

std::optional<int> parse_args(int argc, char** argv, AppArgs& a) {
    CLI::App cli{"vitscope: step through a Vision Transformer stage by stage"};
    std::string overlay, hover, cell, image_size;
    int tab = -1;
    // CLI::Range lets NaN through (every comparison with it is false): numbers must be finite first
    const CLI::Validator finite(
        [](std::string& v) {
            double d = 0;
            try {
                d = std::stod(v);
            } catch (const std::exception&) {
                return std::string();  // not a number: the option's own conversion says so
            }
            return std::isfinite(d) ? std::string() : "'" + v + "' is not a finite number";
        },
        "FINITE");
    cli.add_option("--settings", a.settings, "remember recent files and options in this file (default: $XDG_CONFIG_HOME/vitscope/settings.json; off in headless runs)");
    cli.add_flag("--no-settings", a.no_settings, "neither read nor write the settings file");
    cli.add_option("--model,-m", a.model, "'scenes' (the embedded model trained on colour scenes, the window's default), 'default' "
                   "(the embedded Fashion-MNIST model), a preset (or a torchvision/timm name such as vit_b_16), a "
                   ".safetensors/.pth/.pt/.bin checkpoint, or hf:ORG/NAME[@REVISION] from the Hugging Face cache (downloaded "
                   "into it when not there); without it, $VITSCOPE_MODEL when set")
        ->default_val(std::getenv("VITSCOPE_MODEL") && *std::getenv("VITSCOPE_MODEL") ? std::getenv("VITSCOPE_MODEL") : "scenes");
    cli.add_flag("--offline", a.offline, "hf: models from the Hugging Face cache only, never downloaded (as HF_HUB_OFFLINE=1)");
    cli.add_option("--image,-i", a.image, "image to load: " + vit::image_formats() + " (default: a bundled test scene for the scenes model, a bundled Fashion-MNIST "
                   "sample for the others)");
    cli.add_option("--labels", a.labels, "class names, one per line");
    cli.add_option("--heads", a.heads, "number of heads, if the checkpoint does not say")->check(CLI::Range(1, 8192));
    cli.add_option("--stage", a.stage, "stage to show: a trace name (blocks.2.attn.pattern) or, with --layer, attn.pattern");
    cli.add_option("--layer", a.layer, "layer for --stage and the overlay");
    cli.add_option("--head", a.head, "head to show (and for the overlay; default: mean of heads)");
    cli.add_option("--patch", a.patch, "select a patch (its token is highlighted everywhere)");
    cli.add_option("--overlay", overlay, "overlay on the image")->check(CLI::IsMember({"none", "cls", "rollout", "grad", "query"}));
    cli.add_option("--query", a.query, "query token for the 'query' overlay (0 = cls, n + 1 = patch n); implies --overlay query")
        ->check(CLI::Range(0, 1000000));
    cli.add_option("--cell", cell, "show the math of cell I,J (row, column) of the current stage's shown slice (head: --head)");
    std::string attention_scale;
    cli.add_option("--attention-scale", attention_scale, "attention pictures: one scale from 0 shared by every map on screen "
                                                         "(shared, the default) or each map on its own, its range printed (per-map)")
        ->check(CLI::IsMember({"shared", "per-map"}));
    std::string changes_order;
    cli.add_option("--changes-order", changes_order, "the Changes tab's list: in the order the stages run (pipeline, the "
                                                       "default) or largest relative change first (largest)")
        ->check(CLI::IsMember({"pipeline", "largest"}));
    cli.add_flag("--input-channels", a.input_channels, "an RGB model's input stage: one channel's numbers as a heatmap "
                                                       "(default: the picture itself)");
    std::string attention_image;
    cli.add_option("--attention-image", attention_image, "the Attention maps tab: the model input faintly under each map (on, "
                                                         "the default) or the maps alone (off: their pixels are the colour scale's)")
        ->check(CLI::IsMember({"on", "off"}));
    cli.add_option("--opacity", a.opacity, "overlay opacity, 0..1")->check(finite)->check(CLI::Range(0.0, 1.0));
    cli.add_option("--tab", tab, "the tab shown: " + tab_help())->check(CLI::Range(0, tab_count() - 1));
    cli.add_option("--distance-images", a.distance_images, "the Distance tab's average over the first N Fashion-MNIST test images: "
                   "set N and run it at launch (headless: before the screenshot)")->check(CLI::Range(1, 10000));
    cli.add_option("--tour", a.tour, "Learn mode at lesson N of the tour (0 = the first; predict, then check)")->check(CLI::Range(0, 1000000));
    cli.add_option("--learn", a.learn, "open Learn mode at step N (0 = the first): the forward pass as an animated lesson (key L)")
        ->check(CLI::Range(0, 1000000));
    cli.add_option("--learn-time", a.learn_time, "with --learn: that many seconds into the step's animation, paused (" +
                   std::to_string(int(kLearnStepSeconds)) + " s: its end)")->check(finite)->check(CLI::Range(0.0, 1000.0));
    cli.add_option("--lessons", a.lessons, "Learn mode's lessons from this file (the format: assets/lessons/scenes.txt)");
    cli.add_option("--learn-answer", a.learn_answer, "with --learn: answer the step's first lesson with this (a button's word; "
                                                     "a patch or key index for a click)");
    cli.add_option("--image-size", image_size, "run the model at this input size, H or H,W pixels (multiples of the patch "
                   "size); the position embeddings are resized by the family's rule (the image panel has the same control)");
    cli.add_option("--pooling", a.pooling, "pool the cls token or the mean of the patch tokens (default: the model's)")->check(CLI::IsMember({"cls", "mean"}));
    cli.add_flag("--no-affine", a.no_affine, "LayerNorm without elementwise_affine");
    cli.add_flag("--unbiased", a.unbiased, "LayerNorm with unbiased (N-1) variance");
    cli.add_flag("--bug-scale-after-softmax", a.bug_scale_after_softmax, "a classic bug on purpose: divide by sqrt(d) after the softmax");
    cli.add_flag("--bug-reshape-patches", a.bug_reshape_patches, "a classic bug on purpose: patchify with a plain reshape instead of unfold");
    cli.add_flag("--squash", a.squash, "resize the image straight to the model's square (aspect lost) instead of resize + centre crop");
    auto* no_grads = cli.add_flag("--no-grads", a.no_grads, "forward pass only: no gradients (gradient views say so)");
    cli.add_flag("--grads", a.grads, "gradients from the start for any model, as the 'compute gradients' button asks for them "
                 "(within the window's memory limit: 1.25 x the weights + 0.5 GB; big models checkpointed)")->excludes(no_grads);
    cli.add_option("--ablate-head", a.ablate_heads, "knock out head H of block L (its slice of attn.z set to 0; :mean: "
                   "to its mean over the tokens); repeatable")->type_name("L.H[:mean]");
    cli.add_option("--ablate", a.ablate, "set blocks.L.attn.out or blocks.L.mlp.out to 0; repeatable")->type_name("STAGE");
    cli.add_option("--drop-patches", a.drop_patches, "drop these patches (0-based, row-major) from the sequence")
        ->type_name("i,j,...");
    cli.add_option("--patch-from", a.patch_from, "activation patching: the other input (an image or a normalized .npy)");
    cli.add_option("--patch-stage", a.patch_stage, "activation patching: the stage taken from the other input's run");
    cli.add_option("--patch-tokens", a.patch_tokens, "activation patching: only these token rows (cls = 0)")->type_name("i,j,...");
    cli.add_option("--screenshot", a.screenshot, "render headless-style, save a PNG of the window and exit");
    cli.add_option("--layout", a.layout_out, "with --screenshot: write where views were drawn (JSON, for tests)");
    cli.add_option("--keys", a.keys, "with --screenshot: key presses to send first, e.g. Right,Right,a");
    cli.add_option("--hover", hover, "with --screenshot: put the mouse at X,Y (window pixels); without it no tooltip is drawn");
    cli.add_flag("--click", a.click, "with --screenshot and --hover: click the left mouse button there once (after --keys)");
    cli.add_flag("--while-running", a.while_running, "with --screenshot and --keys: take it while the forward pass the keys "
                 "start is running, the previous trace on screen (exits 3 if no pass is running)");
    cli.add_option("--while-loading", a.while_loading, "with --screenshot: take it while --model loads (load) or while its "
                                                      "first forward pass runs (pass); the window shows what it is doing")
        ->check(CLI::IsMember({"load", "pass"}));
    // (the window sizes --sweep-sizes takes; a negative width aborted inside GLFW, 0 failed as "cannot create a window")
    cli.add_option("--width", a.width, "window width")->default_val(1600)->check(CLI::Range(320, 8192));
    cli.add_option("--height", a.height, "window height")->default_val(1000)->check(CLI::Range(240, 8192));
    cli.add_option("--train-epochs", a.train_epochs, "start the Train panel at launch for N epochs (headless: wait for it)")
        ->check(CLI::Range(1, 10000));
    cli.add_option("--train-limit", a.train_limit, "with --train-epochs: train on the first N images (0: all)")
        ->check(CLI::Range(0, 1000000));
    cli.add_flag("--export-view", a.export_view, "with --screenshot: also export the centre view as PNG (as the toolbar button does)");
    cli.add_flag("--export-npy", a.export_npy, "with --screenshot: also export the current tensor as .npy (and <stage>.grad.npy when the gradient view shows it)");
    cli.add_flag("--export-npz", a.export_npz, "with --screenshot: also export the whole trace (and gradients) as .npz");
    cli.add_option("--export-dir", a.export_dir, "directory for exports")->default_val(".");
    cli.add_option("--shader-dir", a.shader_dir, "load shaders from this directory (live editing; errors shown in the window)");
    cli.add_option("--bench-frames", a.bench_frames, "render N frames and print frame times")->check(CLI::Range(1, 1000000));
    cli.add_flag("--bench-toggle", a.bench_toggle, "with --bench-frames: toggle elementwise_affine every frame");
    cli.add_flag("--bench-switch", a.bench_switch, "with --bench-frames: show a stage of another block every frame (the Stage "
                 "tab), timing the frame that shows it; with --grads, its gradient (the block's backward pass recomputed)");
    cli.add_option("--stages", a.stages, "how a pass records its stages: auto (every stage for small models, on demand when "
                   "the full trace is over 128 MB), on-demand (keep the residual stream and the attention patterns, "
                   "recompute a block when one of its stages is shown), all")
        ->check(CLI::IsMember({"auto", "on-demand", "all"}));
    cli.add_flag("--sweep", a.sweep, "render every stage x value/gradient x tab x overlay x toggle headless, report failures, exit");
    std::string sizes;
    cli.add_option("--sweep-sizes", sizes, "with --sweep: the layout sweep instead, at each window size WxH[@SCALE], comma-separated "
                                           "(every tab and a choice of stages at each; @2: a 2x content scale)");
    cli.add_option("--ui-scale", a.ui_scale, "content scale (HiDPI): 2 draws everything twice as large (default: the monitor's)")
        ->check(finite)->check(CLI::Range(0.5, 4.0));
    cli.add_option("--sweep-stages", a.sweep_stages, "with --sweep: only this many stages, spread over the trace (0: all)")
        ->check(CLI::Range(0, 1000000));
    std::string only;
    cli.add_option("--sweep-only", only, "with --sweep or --sweep-sizes: only Learn mode's steps (learn)")->check(CLI::IsMember({"learn"}));
    try {
        cli.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return cli.exit(e) == 0 ? 0 : 2;
    }
    a.sweep_learn_only = only == "learn";
    a.model_given = cli.count("--model") > 0;
    a.attention_per_map = attention_scale == "per-map";
    a.changes_largest_first = changes_order == "largest";
    a.attention_image = attention_image != "off";
    if (tab >= 0) a.tab = Tab(tab);
    if (!overlay.empty()) {
        for (Overlay o : {Overlay::None, Overlay::Cls, Overlay::Rollout, Overlay::GradRollout, Overlay::Query})
            if (overlay == overlay_name(o)) a.overlay = o;
    }
    return read_values(Raw{hover, cell, image_size, sizes}, a);
}

std::string model_range_error(const AppArgs& a, const Config& c, int tour_steps) {
    auto range = [](int n) { return n > 1 ? "0.." + std::to_string(n - 1) : std::string("0"); };
    const std::string model = "the model (" + c.name + ")";
    // the run's sizes: patches and tokens at --image-size (the model's own size without it)
    Options o;
    o.image_h = a.image_h;
    o.image_w = a.image_w;
    std::shared_ptr<const StageTable> table;
    try {
        table = StageTable::get(c, o);
    } catch (const std::exception& e) {
        return "--image-size " + std::to_string(a.image_h) + "," + std::to_string(a.image_w) + " does not fit " + model +
               ": " + e.what();
    }
    const RunDims& rd = table->dims();
    if (!a.pooling.empty()) {  // the pooling switch is for ViT classifiers: refused for the other families
        o.pooling = a.pooling == "mean" ? Pooling::Mean : Pooling::Cls;
        try {
            run_dims(c, o);
        } catch (const std::exception& e) {
            return "--pooling " + a.pooling + ": " + e.what();
        }
    }
    if (a.layer < -1 || a.layer >= c.depth)
        return "--layer " + std::to_string(a.layer) + " is out of range: " + model + " has " + std::to_string(c.depth) +
               " blocks (layers " + range(c.depth) + ")";
    if (a.head < -1 || a.head >= c.heads)
        return "--head " + std::to_string(a.head) + " is out of range: " + model + " has " + std::to_string(c.heads) +
               " heads (" + range(c.heads) + "; leave it out for the mean of the heads)";
    const std::string at = a.image_h ? " at " + std::to_string(rd.img_h) + "x" + std::to_string(rd.img_w) : "";
    if (a.patch < -1 || a.patch >= rd.N)
        return "--patch " + std::to_string(a.patch) + " is out of range: " + model + at + " has " + std::to_string(rd.N) +
               " patches (" + range(rd.N) + ")";
    if (a.query >= rd.T)
        return "--query " + std::to_string(a.query) + " is out of range: " + model + at + " has " + std::to_string(rd.T) +
               " tokens (" + token_range_text(*table) + ")";
    if (a.learn >= 0) {
        const size_t n = learn_steps(*table, c).size();
        if (size_t(a.learn) >= n)
            return "--learn " + std::to_string(a.learn) + " is out of range: Learn mode has " + std::to_string(n) + " steps for " + model +
                   " (" + range(int(n)) + ")";
    }
    if (a.tour >= tour_steps)
        return "--tour " + std::to_string(a.tour) + " is out of range: the tour has " + std::to_string(tour_steps) +
               " lessons for " + model + (tour_steps ? " (" + range(tour_steps) + ")" : "");
    return "";
}

std::string cell_range_error(const AppArgs& a, const std::string& what, int rows, int cols) {
    if (!a.cell || (a.cell->first < rows && a.cell->second < cols)) return "";
    return "--cell " + std::to_string(a.cell->first) + "," + std::to_string(a.cell->second) + " is out of range: " + what +
           " shows " + std::to_string(rows) + " x " + std::to_string(cols) + " cells (rows 0.." + std::to_string(rows - 1) +
           ", columns 0.." + std::to_string(cols - 1) + ")";
}

}  // namespace vit::app
