#include "cli_commands.h"

#include <cstdio>
#include <iostream>

#include "core/kernels/blas.h"
#include "core/io/checkpoint.h"
#include "core/io/dataset.h"
#include "core/model/finite.h"
#include "core/model/forward.h"
#include "core/io/image.h"
#include "core/io/io.h"
#include "core/kernels/ops.h"
#include "core/model/stages.h"
#include "core/teach/teach.h"
#include "core/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cmath>
#include <set>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

namespace vit::cli {

struct Commands::State {
    std::string model = "default", image, input, out;
    int heads = 0;
    bool no_affine = false, unbiased = false;
    std::string pooling, labels;
    uint64_t seed = 0;
    // train / eval
    std::string data = default_fashion_mnist_dir(), resume, config = "fmnist";
    TrainSettings ts;
    int width = 0, depth = 0, heads_cfg = 0, mlp = 0, patch = 0, limit = 0, threads = 0;
    bool no_augment = false;
    std::string command_line;
    // convert / info --list
    std::string conv_in, conv_out;
    bool list = false;
    bool explain = false;  // info --explain
    // trace / analyze: the two pitfall switches; analyze: images for the averaged attention distance
    bool bug_scale_after_softmax = false, bug_reshape_patches = false;
    int average = 0;
};

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted = true; }

std::string hms(double s) {
    if (!std::isfinite(s) || s < 0) return "?";
    int t = int(s + 0.5);
    char b[32];
    if (t >= 3600) std::snprintf(b, sizeof b, "%dh%02dm", t / 3600, t / 60 % 60);
    else std::snprintf(b, sizeof b, "%dm%02ds", t / 60, t % 60);
    return b;
}

// One progress line: redrawn in place on a terminal, every 10% otherwise.
void progress(const StepInfo& i) {
    static int last_decile = -1;
    bool tty = ::isatty(2);
    double frac = double(i.step_in_epoch) / i.steps_per_epoch;
    int decile = int(frac * 10);
    if (!tty && decile == last_decile && i.step_in_epoch != i.steps_per_epoch) return;
    last_decile = decile;
    const int W = 24;
    std::string bar(size_t(frac * W), '#');
    bar.resize(W, '-');
    std::fprintf(stderr, "%sepoch %d/%d [%s] %3d%%  loss %.4f  acc %5.2f%%  %6.0f img/s  lr %.2e  ETA %s%s",
                 tty ? "\r" : "", i.epoch + 1, i.epochs, bar.c_str(), int(frac * 100), i.epoch_loss,
                 100 * i.epoch_acc, i.images_per_s, i.lr, hms(i.eta_s).c_str(), tty ? "   " : "\n");
    std::fflush(stderr);
}

// Text from files (class names, config names, paths, tensor names) goes to the
// terminal escaped: a class name holding ESC [ 2 J must not clear the screen.
std::string safe(const std::string& t) { return terminal_safe(t); }

void warn(const std::string& m) { std::fprintf(stderr, "vitscope-cli: warning: %s\n", terminal_safe(m, true).c_str()); }

void print_eval(const EvalResult& r, const Config& c) {
    std::printf("test accuracy: %.2f%% (%d images)\n", 100 * r.accuracy, r.n);
    std::printf("confusion matrix (rows: true class, columns: predicted)\n%14s", "");
    for (int j = 0; j < c.classes; ++j) std::printf("%6d", j);
    std::printf("\n");
    for (int i = 0; i < c.classes; ++i) {
        std::string name = c.class_names.empty() ? std::to_string(i) : safe(c.class_names[i]);
        std::printf("%2d %-11.11s", i, name.c_str());
        for (int j = 0; j < c.classes; ++j) std::printf("%6d", r.confusion[size_t(i) * c.classes + j]);
        std::printf("\n");
    }
}

LoadOverrides overrides(const Commands::State& s) {
    LoadOverrides ov;
    ov.heads = s.heads;
    if (s.pooling == "cls") ov.pooling = Pooling::Cls;
    if (s.pooling == "mean") ov.pooling = Pooling::Mean;
    return ov;
}

void model_flags(CLI::App* c, Commands::State& s) {
    c->add_option("--model,-m", s.model, "'default' (embedded Fashion-MNIST model), a preset (" +
                  [] { std::string a; for (auto& p : preset_names()) a += (a.empty() ? "" : ", ") + p; return a; }() +
                  "; torchvision and timm names too: see 'info --list') or a checkpoint file (" + kCheckpointFormats +
                  "; timm, Hugging Face or torchvision layout)")
        ->default_val("default");
    c->add_option("--heads", s.heads, "number of attention heads (when the file does not say; default width/64)")
        ->check(CLI::Range(1, 4096));
    c->add_option("--pooling", s.pooling, "override pooling: cls or mean")->check(CLI::IsMember({"cls", "mean"}));
    c->add_option("--seed", s.seed, "seed for a preset's random weights")->default_val(0);
    c->add_option("--labels", s.labels, "class names, one per line (overrides the checkpoint's)");
}

// The model (load_model names the file in every error, out of memory included);
// NaN or Inf in its tensors is named on stderr.
LoadedModel load(const Commands::State& s) {
    LoadedModel lm = load_model(s.model, overrides(s), s.seed);
    if (!s.labels.empty()) apply_labels_file(lm.weights.cfg, s.labels);
    if (!lm.nonfinite.empty()) warn(lm.nonfinite_warning());
    return lm;
}

// A forward pass; a failure (out of memory, a kernel that could not get its buffers) names the model.
Trace run_named(const LoadedModel& lm, const Tensor3& x, const Options& opt) {
    try {
        return name_out_of_memory(lm.source, "running the forward pass", [&] { return vit::run(lm.weights, x, opt); });
    } catch (const FileError&) {
        throw;
    } catch (const std::exception& e) {
        throw std::runtime_error(lm.source + ": the forward pass failed: " + e.what());
    }
}

// Where NaN or Inf first appears in a pass ("" when nowhere); also warned on stderr.
std::string report_nonfinite(const Trace& t, const std::string& what) {
    auto nf = first_nonfinite_stage(t);
    if (!nf) return "";
    std::string m = nf->describe(t.entries().size());
    warn(what + ": the forward pass produced non-finite values: " + m);
    return m;
}

// The options in force from the command line (trace, analyze).
Options options_from(const Commands::State& s) {
    Options opt;
    opt.affine = !s.no_affine;
    opt.unbiased = s.unbiased;
    opt.bug_scale_after_softmax = s.bug_scale_after_softmax;
    opt.bug_reshape_patches = s.bug_reshape_patches;
    return opt;
}

void option_flags(CLI::App* c, Commands::State& s) {
    c->add_flag("--no-affine", s.no_affine, "LayerNorm without elementwise_affine (gamma, beta ignored)");
    c->add_flag("--unbiased", s.unbiased, "LayerNorm variance over N-1 instead of N");
    c->add_flag("--bug-scale-after-softmax", s.bug_scale_after_softmax,
                "BUG on purpose (teaching): attn = (q @ k.T).softmax(-1) / sqrt(d) instead of (q @ k.T / sqrt(d)).softmax(-1)");
    c->add_flag("--bug-reshape-patches", s.bug_reshape_patches,
                "BUG on purpose (teaching): patches = img.reshape(N, C*P*P) instead of unfold");
}

// The model's input from --image or --input (a normalized (C, H, W) .npy); `fallback` when neither is given.
Tensor3 model_input(const Commands::State& s, const Config& c, bool* fallback) {
    if (fallback) *fallback = false;
    if (!s.input.empty()) {
        Tensor3 x = input_from_array(read_npy(s.input), c, s.input);
        NonFinite nf = count_nonfinite(x.data(), x.size());
        if (nf.any()) warn(s.input + ": the input holds non-finite values: " + nf.describe());
        return x;
    }
    if (!s.image.empty()) {
        Image im = load_image(s.image);
        PreprocessPlan p = plan_preprocess(im, c);
        if (!p.scaled_on_load.empty()) std::fprintf(stderr, "vitscope-cli: note: %s: %s\n", safe(s.image).c_str(), p.scaled_on_load.c_str());
        return name_out_of_memory(s.image, "preprocessing the image", [&] { return preprocess(im, c); });
    }
    if (!fallback) throw CLI::ValidationError("needs --image or --input");
    *fallback = true;
    return xt::zeros<float>({size_t(c.channels), size_t(c.image_size), size_t(c.image_size)});
}

// vitscope-cli analyze: the numbers behind the teaching views (issue 10, "For scripts").
void add_analyze(CLI::App& app, Commands::State& s, std::function<int()>& selected) {
    auto* an = app.add_subcommand("analyze", "write the numbers behind the teaching views (embedding filters, "
                                             "position similarity, attention distance, logit lens) to an .npz");
    model_flags(an, s);
    auto* img = an->add_option("--image,-i", s.image, "image file (default: an all-zero normalized input, the mean colour)");
    auto* inp = an->add_option("--input", s.input, "an already-normalized (C, H, W) float .npy instead of an image");
    img->excludes(inp);
    option_flags(an, s);
    an->add_option("--average", s.average, "also write attn_distance_avg: the mean over the first N Fashion-MNIST "
                                           "test images (through the model's preprocessing: gray repeated to RGB and resized for an RGB model)")->check(CLI::Range(1, 100000));
    an->add_option("--data", s.data, "directory with the IDX files (for --average)")->default_val(default_fashion_mnist_dir());
    an->add_option("--out,-o", s.out, "output .npz")->required();
    an->callback([&s, &selected] {
        selected = [&s] {
            LoadedModel lm = load(s);
            const Weights& w = lm.weights;
            const Config& c = w.cfg;
            bool zero_input = false;
            const Tensor3 x = model_input(s, c, &zero_input);
            const Options opt = options_from(s);
            const Trace t = run_named(lm, x, opt);
            report_nonfinite(t, lm.source);
            const EmbedFilters ef = embed_filters(w);
            const Tensor2 pos = pos_similarity(w), dist = attn_distance(t, c), lens = logit_lens(w, t, opt);
            std::vector<ArrayRef> items{array_ref("embed_filters", ef.filters), array_ref("embed_filters_var", ef.variance),
                                        array_ref("pos_similarity", pos), array_ref("attn_distance", dist),
                                        array_ref("logit_lens", lens)};
            Tensor2 avg;
            int done = 0;
            if (s.average > 0) {
                Dataset test = load_fashion_mnist(s.data, false);
                avg = attn_distance_mean(w, dataset_inputs(test, s.average, c), opt, {}, &done);
                items.push_back(array_ref("attn_distance_avg", avg));
            }
            write_npz(s.out, items, {{"__options__", options_json(opt, c)}});
            std::printf("model: %s [%s]\n", safe(c.describe()).c_str(), safe(lm.source).c_str());
            std::printf("options: %s\n", opt.describe().c_str());
            if (zero_input) std::printf("input: none given, an all-zero normalized input (the mean colour)\n");
            std::printf("embed_filters %s, variance explained by the first %zu: %.1f%%\n",
                        shape_str_of(ef.filters).c_str(), ef.variance.size(), 100.0 * xt::sum(ef.variance)());
            std::printf("attn_distance (pixels) per layer, mean over heads:");
            for (size_t l = 0; l < dist.shape(0); ++l) std::printf(" %.2f", xt::mean(xt::view(dist, l, xt::all()))());
            std::printf("\n");
            if (done) std::printf("attn_distance_avg over %d test images written\n", done);
            std::printf("wrote %s\n", safe(s.out).c_str());
            return 0;
        };
    });
}

}  // namespace

Commands::Commands(CLI::App& app, const std::string& command_line) : s_(std::make_shared<State>()) {
    auto& s = *s_;
    s.command_line = command_line;
    add_training(app);
    add_convert(app);
    auto* tr = app.add_subcommand("trace", "run one image and write every recorded stage to an .npz");
    model_flags(tr, s);
    auto* img = tr->add_option("--image,-i", s.image, "image file (" + image_formats() + "; one over 25 megapixels is scaled down on load)");
    auto* inp = tr->add_option("--input", s.input, "an already-normalized (C, H, W) float .npy instead of an image");
    img->excludes(inp);
    option_flags(tr, s);
    tr->add_option("--out,-o", s.out, "output .npz (numpy.load reads it; its last entry, __options__, is the "
                                      "options in force as JSON text)")->required();
    tr->callback([this] {
        selected_ = [this] {
            auto& s = *s_;
            if (s.image.empty() && s.input.empty()) throw CLI::ValidationError("trace needs --image or --input");
            LoadedModel lm = load(s);
            const Config& c = lm.weights.cfg;
            const Tensor3 x = model_input(s, c, nullptr);
            const Options opt = options_from(s);
            Trace t = run_named(lm, x, opt);
            const std::string nonfinite = report_nonfinite(t, lm.source);
            std::vector<ArrayRef> items;
            for (auto& e : t.entries()) items.push_back(array_ref(e.name, e.tensor));
            name_out_of_memory(s.out, "writing the trace", [&] { write_npz(s.out, items, {{"__options__", options_json(opt, c)}}); });
            if (opt.has_bug()) std::printf("options: %s\n", opt.describe().c_str());
            const Array& p = t.get("probs");
            std::printf("model: %s [%s]\n", safe(c.describe()).c_str(), safe(lm.source).c_str());
            std::printf("wrote %zu stages (%.1f MB) to %s\n", t.size(), t.bytes() / 1e6, safe(s.out).c_str());
            if (!nonfinite.empty()) std::printf("non-finite: %s\n", nonfinite.c_str());
            if (count_nonfinite(p).any()) {
                std::printf("prediction: none (probs holds %s)\n", count_nonfinite(p).describe().c_str());
            } else {
                const size_t best = size_t(std::max_element(p.begin(), p.end()) - p.begin());
                std::printf("prediction: class %zu%s%s (p=%.4f)\n", best, c.class_names.empty() ? "" : " ",
                            c.class_names.empty() ? "" : safe(c.class_names[best]).c_str(), p(best));
            }
            return 0;
        };
    });

    add_analyze(app, s, selected_);

    auto* info = app.add_subcommand("info", "print a model's config, parameter count and per-stage shapes");
    model_flags(info, s);
    info->add_flag("--list", s.list, "list the presets and the torchvision / timm names they answer to");
    info->add_flag("--explain", s.explain, "also print each stage's title and explanation (tab-separated), for these options");
    option_flags(info, s);
    info->callback([this] {
        selected_ = [this] {
            auto& s = *s_;
            if (s.list) {
                std::printf("%-24s %-12s %s\n", "name", "family", "config (published head counts)");
                auto row = [](const std::string& n, const char* fam) {
                    Config c = preset(n);
                    std::printf("%-24s %-12s image %d, patch %d, width %d, depth %d, heads %d, mlp %d, %lld parameters\n",
                                n.c_str(), fam, c.image_size, c.patch, c.width, c.depth, c.heads, c.mlp,
                                (long long)param_count(c));
                };
                for (auto& n : preset_names()) row(n, "vitscope");
                for (auto& a : preset_aliases()) row(a.alias, a.family);
                return 0;
            }
            // A preset's shapes and parameter count follow from its config: no weights needed.
            LoadedModel lm;
            if (is_preset(s.model)) {
                lm.weights.cfg = preset(s.model);
                LoadOverrides ov = overrides(s);
                if (ov.heads > 0) lm.weights.cfg.heads = ov.heads;
                if (ov.pooling) lm.weights.cfg.pooling = *ov.pooling;
                lm.weights.cfg.validate();
                lm.source = "preset:" + s.model;
            } else {
                lm = load(s);
            }
            const Config& c = lm.weights.cfg;
            std::printf("source: %s\nfamily: %s\nconfig: %s\n", safe(lm.source).c_str(),
                        is_preset(s.model) ? "preset (saved under timm's key names)" : family_name(lm.family),
                        safe(c.describe()).c_str());
            std::printf("parameters: %lld\n", (long long)param_count(c));
            std::printf("gemm: %s\n", vit::ops::gemm_engine().c_str());
            std::printf("blas: %s\n", vit::blas::describe().c_str());
            if (c.heads_guessed)
                std::printf("heads: %d (a guess: width %d / 64; the file does not say, pass --heads N if wrong)\n", c.heads, c.width);
            const int rs = c.pre.resize > 0 ? c.pre.resize : c.image_size;
            std::printf("preprocess: %s, mean", c.pre.squash ? ("straight resize to " + std::to_string(rs) + "x" + std::to_string(rs) + " (aspect not kept)" +
                                                                (rs != c.image_size ? " + center crop" : "")).c_str()
                                                             : ("shorter side to " + std::to_string(rs) + " + center crop " + std::to_string(c.image_size)).c_str());
            for (float m : c.pre.mean) std::printf(" %.4g", m);
            std::printf(", std");
            for (float v : c.pre.std) std::printf(" %.4g", v);
            std::printf("\n");
            if (!lm.nonfinite.empty()) {
                // Where the file's NaN / Inf first surface: one pass on the all-zero input (the mean colour).
                std::printf("non-finite weights: %s\n", safe(describe_nonfinite_tensors(lm.nonfinite)).c_str());
                const Tensor3 zero = xt::zeros<float>({size_t(c.channels), size_t(c.image_size), size_t(c.image_size)});
                const Trace t = run_named(lm, zero, options_from(s));
                auto nf = first_nonfinite_stage(t);
                std::printf("non-finite in a pass on an all-zero input: %s\n",
                            nf ? nf->describe(t.entries().size()).c_str() : "none (the non-finite weights do not reach any stage)");
            }
            std::printf("stages:\n");
            for (auto& [n, sh] : stage_shapes(c)) std::printf("  %-28s %s\n", n.c_str(), shape_str(sh).c_str());
            if (s.explain) {  // the stage table's texts, as the app's views and tour show them
                std::printf("explanations (%s):\n", options_from(s).describe().c_str());
                for (const StageInfo& st : stage_table(c, options_from(s)))
                    std::printf("  %s\t%s\t%s\n", st.name.c_str(), st.title.c_str(), st.what.c_str());
            }
            return 0;
        };
    });
}

void Commands::add_convert(CLI::App& app) {
    auto& s = *s_;
    auto* cv = app.add_subcommand("convert", "convert a PyTorch checkpoint (torch.save zip: .pth, .pt, .bin) to .safetensors: "
                                             "the same key names, stored as F32, the source dtypes noted in __metadata__");
    cv->add_option("in", s.conv_in, "the checkpoint to read (.pth, .pt, .bin, .ckpt or .safetensors)")->required();
    cv->add_option("out", s.conv_out, "the .safetensors file to write (atomically)")->required();
    cv->callback([this] {
        selected_ = [this] {
            auto& s = *s_;
            SafeTensors st = name_out_of_memory(s.conv_in, "reading the checkpoint", [&] { return read_checkpoint(s.conv_in); });
            if (auto nf = nonfinite_tensors(st.tensors); !nf.empty())
                warn(s.conv_in + ": " + describe_nonfinite_tensors(nf) + " (converted as they are)");
            std::map<std::string, std::string> meta = st.metadata;
            std::set<std::string> dts;
            std::vector<std::string> dropped;
            for (auto& [k, dt] : st.dtypes) {
                if (st.tensors.count(k)) dts.insert(dt);
                else dropped.push_back(k + " (" + dt + ")");
            }
            std::string src_dt;
            for (auto& d : dts) src_dt += (src_dt.empty() ? "" : ",") + d;
            std::string base = s.conv_in.substr(s.conv_in.find_last_of('/') == std::string::npos ? 0 : s.conv_in.find_last_of('/') + 1);
            meta["format"] = "pt";
            meta["vitscope.converted_from"] = base;
            meta["vitscope.source_dtypes"] = src_dt;
            std::vector<ArrayRef> items;
            size_t bytes = 0;
            for (auto& [k, t] : st.tensors) { items.push_back(array_ref(k, t)); bytes += 4 * t.size(); }
            if (items.empty()) throw FileError(s.conv_in + ": no floating-point tensors to convert");
            write_safetensors(s.conv_out, items, meta);
            for (auto& d : dropped) std::fprintf(stderr, "note: %s not converted (only floating-point tensors are)\n", d.c_str());
            std::printf("wrote %zu tensors (%.1f MB, F32; source %s) to %s\n", items.size(), bytes / 1e6, src_dt.c_str(),
                        s.conv_out.c_str());
            return 0;
        };
    });
}

void Commands::add_training(CLI::App& app) {
    auto& s = *s_;
    auto* tr = app.add_subcommand("train", "train a ViT on Fashion-MNIST (Debian's dataset-fashion-mnist)");
    tr->add_option("--config", s.config, "starting config: a preset name (default fmnist: 28x28, patch 4, width 64, "
                                         "depth 6, 4 heads, mlp 128)")->default_val("fmnist");
    tr->add_option("--width", s.width, "override the width D");
    tr->add_option("--depth", s.depth, "override the number of blocks");
    tr->add_option("--heads", s.heads_cfg, "override the number of heads");
    tr->add_option("--mlp", s.mlp, "override the MLP width");
    tr->add_option("--patch", s.patch, "override the patch size");
    tr->add_option("--epochs", s.ts.epochs, "epochs")->default_val(30)->check(CLI::Range(1, 100000));
    tr->add_option("--batch", s.ts.batch, "batch size")->default_val(128)->check(CLI::Range(1, 65536));
    tr->add_option("--lr", s.ts.lr, "peak learning rate (AdamW)")->default_val(1e-3)->check(CLI::PositiveNumber);
    tr->add_option("--min-lr", s.ts.min_lr, "final learning rate of the cosine schedule")->default_val(1e-5);
    tr->add_option("--wd", s.ts.weight_decay, "AdamW weight decay (matrices only)")->default_val(0.05);
    tr->add_option("--warmup", s.ts.warmup_epochs, "linear warm-up, in epochs")->default_val(2);
    tr->add_flag("--no-augment", s.no_augment, "no random flips and shifts");
    tr->add_option("--limit", s.ts.limit, "train on the first N images only")->default_val(0);
    tr->add_option("--seed", s.ts.seed, "seed for initialisation, shuffling and augmentation")->default_val(0);
    tr->add_option("--threads", s.threads, "threads (default: all cores)");
    tr->add_option("--data", s.data, "directory with the IDX files")->default_val(default_fashion_mnist_dir());
    tr->add_option("--resume", s.resume, "continue from a checkpoint written by train (and its .optim file)");
    tr->add_option("--out,-o", s.out, "where to write the model (.safetensors, timm key names)")->required();
    tr->callback([this] {
        selected_ = [this] {
            auto& s = *s_;
            // Catch Ctrl-C from the start: an interrupt while the data loads must not kill
            // the process without a word; the loop below saves and exits 130.
            std::signal(SIGINT, on_sigint);
            std::signal(SIGTERM, on_sigint);
            if (s.threads > 0) ops::set_threads(s.threads);
            s.ts.augment = !s.no_augment;
            Dataset train = load_fashion_mnist(s.data, true), test = load_fashion_mnist(s.data, false);
            Weights w;
            int start_epoch = 0;
            AdamW adam;
            bool have_adam = false;
            if (!s.resume.empty()) {
                LoadedModel lm = load_model(s.resume);
                w = std::move(lm.weights);
                int e = load_optimizer_state(s.resume, w, adam);
                if (e >= 0) { start_epoch = e; have_adam = true; }
                else if (lm.metadata.count("epoch")) start_epoch = std::stoi(lm.metadata.at("epoch"));
                std::fprintf(stderr, "resuming %s at epoch %d%s\n", s.resume.c_str(), start_epoch + 1,
                             have_adam ? "" : " (no .optim file: optimizer state starts fresh)");
            } else {
                Config c = preset(s.config);
                if (s.width) c.width = s.width;
                if (s.depth) c.depth = s.depth;
                if (s.heads_cfg) c.heads = s.heads_cfg;
                if (s.mlp) c.mlp = s.mlp;
                if (s.patch) c.patch = s.patch;
                if (c.channels != 1 || c.image_size != train.rows) {
                    // Fashion-MNIST is 28x28 gray: keep the preset's shape only if it fits.
                    c.channels = 1; c.pre.mean = {0.2860f}; c.pre.std = {0.3530f};
                }
                c.classes = 10;
                c.class_names = preset("fmnist").class_names;
                c.name = "fmnist-vit";
                c.validate();
                w = init_weights(c, s.ts.seed);
            }
            const Config c = w.cfg;  // a copy: w is moved into the trainer below
            std::printf("training %s\n  %lld parameters, %d train / %d test images, batch %d, %d epochs, %d threads\n",
                        c.describe().c_str(), (long long)param_count(c), s.ts.limit ? std::min(s.ts.limit, train.n) : train.n,
                        test.n, s.ts.batch, s.ts.epochs, ops::threads());
            Trainer tr(std::move(w), s.ts, train);
            if (!s.resume.empty() && have_adam) tr.resume(std::move(adam), start_epoch);
            else if (!s.resume.empty()) tr.set_epoch(start_epoch);
            auto meta = [&](const EvalResult* r) {
                std::map<std::string, std::string> m{{"command", s.command_line}, {"dataset", "fashion-mnist"}};
                if (r) m["test_accuracy"] = std::to_string(r->accuracy);
                return m;
            };
            if (g_interrupted) { std::fprintf(stderr, "interrupted before training started; nothing saved\n"); return 130; }
            while (!tr.done()) {
                bool ok = tr.run_epoch([](const StepInfo& i) { progress(i); return !g_interrupted.load(); });
                if (!ok) {
                    save_training_checkpoint(s.out, tr.weights(), tr.adam(), tr.epoch(), meta(nullptr));
                    std::fprintf(stderr, "\ninterrupted: saved %s (epoch %d will restart); continue with --resume %s\n",
                                 s.out.c_str(), tr.epoch() + 1, s.out.c_str());
                    return 130;
                }
                if (::isatty(2)) std::fprintf(stderr, "\n");
                EvalResult r = evaluate(tr.weights(), test);
                save_training_checkpoint(s.out, tr.weights(), tr.adam(), tr.epoch(), meta(&r));
                std::printf("epoch %d/%d: test accuracy %.2f%%, saved %s\n", tr.epoch(), s.ts.epochs, 100 * r.accuracy,
                            s.out.c_str());
                std::fflush(stdout);
            }
            EvalResult r = evaluate(tr.weights(), test);
            print_eval(r, c);
            return 0;
        };
    });

    auto* ev = app.add_subcommand("eval", "test accuracy and confusion matrix on Fashion-MNIST's test set");
    model_flags(ev, s);
    ev->add_option("--data", s.data, "directory with the IDX files")->default_val(default_fashion_mnist_dir());
    ev->add_option("--limit", s.limit, "evaluate the first N test images only")->default_val(0);
    ev->callback([this] {
        selected_ = [this] {
            auto& s = *s_;
            LoadedModel lm = load(s);
            Dataset test = load_fashion_mnist(s.data, false);
            const Config& c = lm.weights.cfg;
            if (c.classes != 10) throw std::runtime_error("model has " + std::to_string(c.classes) + " classes; Fashion-MNIST has 10");
            EvalResult r = evaluate(lm.weights, test, s.limit);
            std::printf("model: %s [%s]\n", c.describe().c_str(), lm.source.c_str());
            print_eval(r, c);
            return 0;
        };
    });
}

int Commands::run() {
    try {
        if (!selected_) return 2;
        return selected_();
    } catch (const CLI::ValidationError& e) {
        std::cerr << "vitscope-cli: " << terminal_safe(e.what(), true) << "\n";
        return 2;
    } catch (const std::bad_alloc&) {
        // Every reader names its file when it runs out of memory; this is what is left.
        std::cerr << "vitscope-cli: error: out of memory (std::bad_alloc) in '" << terminal_safe(s_->command_line)
                  << "'; no file being read at the time\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "vitscope-cli: error: " << terminal_safe(e.what(), true) << "\n";
        return 1;
    }
}

}  // namespace vit::cli
