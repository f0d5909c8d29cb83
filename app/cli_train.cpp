// vitscope-cli train and eval: the trainer on Fashion-MNIST items or generated scenes, its progress line, Ctrl-C
// (the epoch's model saved, exit 130), and the test figures (accuracy, confusion matrix; scenes: the pointing game,
// the position table's rho and the attention distance, core/teach/scenes_eval.h).
#include "cli_internal.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "core/io/io.h"
#include "core/io/scenes.h"
#include "core/kernels/ops.h"
#include "core/teach/scenes_eval.h"
#include "core/train/evaluate.h"
#include "core/train/optimizer.h"

namespace vit::cli {

namespace {

// Set by the SIGINT handler (a signal handler reaches nothing else): training stops after the step.
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

// One progress line: redrawn in place on a terminal, every 10% otherwise (last_decile: the decile
// of the line last printed, kept by the caller).
void progress(const StepInfo& i, int& last_decile) {
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

// IDX images of another size than the model's are resized (and centre-cropped) by its
// preprocessing, as any image is: said, never done silently.
void note_dataset_size(const std::string& dir, const Dataset& d, const Config& c) {
    if (d.rows == c.image_size && d.cols == c.image_size) return;
    std::fprintf(stderr, "vitscope-cli: note: %s holds %dx%d images and the model takes %dx%d: each is resized and "
                         "centre-cropped by the model's preprocessing, as any image is\n",
                 safe(dir).c_str(), d.cols, d.rows, c.image_size, c.image_size);
}
// Where train writes its model (and the .optim beside it) after every epoch: checked before the
// data loads, so a bad --out costs no epoch.
void check_train_out(const std::string& out) {
    struct stat sb;
    if (::stat(out.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode))
        throw UsageError("--out " + safe(out) + ": is a directory; give the file to write (.safetensors)");
    const std::string::size_type slash = out.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : out.substr(0, slash);
    if (::stat(dir.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode))
        throw UsageError("--out " + safe(out) + ": the directory " + safe(dir) + " does not exist");
    if (::access(dir.c_str(), W_OK) != 0)
        throw UsageError("--out " + safe(out) + ": cannot write in " + safe(dir) + ": " + std::strerror(errno));
}
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

// The model train starts from when not resuming: --config's preset with the flags' shapes; scenes: RGB, named
// scenes-vit (--scenes-crops: scenes-crops-vit, half the scenes' side by default: the object's square).
Config train_config(const Commands::State& s, int fmnist_rows) {
    Config c = preset(s.config);
    if (s.width) c.width = s.width;
    if (s.depth) c.depth = s.depth;
    if (s.heads_cfg) c.heads = s.heads_cfg;
    if (s.mlp) c.mlp = s.mlp;
    if (s.patch) c.patch = s.patch;
    if (s.train_size) c.image_size = s.train_size;
    else if (s.scenes_crops) c.image_size /= 2;  // the scenes preset's 64: 32-pixel squares, 4 x 4 patches
    if (s.scenes || s.scenes_crops) {
        const int scene = s.scenes_crops ? 2 * c.image_size : c.image_size;
        if (c.channels != 3 || scene < 48)
            throw UsageError(std::string(s.scenes_crops ? "--scenes-crops: crops are RGB and at least 24" : "--scenes: scenes are RGB and at least 48") +
                             " pixels wide; --config " + safe(s.config) + " is " + c.describe());
        c.name = s.scenes_crops ? "scenes-crops-vit" : "scenes-vit";
    } else {
        if (c.channels != 1 || c.image_size != fmnist_rows) {
            // Fashion-MNIST is 28x28 gray: keep the preset's shape only if it fits.
            c.channels = 1; c.pre.mean = {0.2860f}; c.pre.std = {0.3530f};
        }
        c.name = "fmnist-vit";
    }
    c.classes = 10;
    c.class_names = preset("fmnist").class_names;
    c.validate();
    return c;
}

// The input of the scene of item `item` drawn with `seed`, for a model of config `c`: the scene, or with `crops` its
// object's square (the crop of a scene twice the model's side, the object on the model's patch grid).
Tensor3 scenes_input(const Dataset& d, int item, uint64_t seed, const Config& c, bool crops) {
    if (!crops) return scene_input(make_scene(d, item, seed, scene_options(c)), c.pre.mean, c.pre.std);
    SceneOptions o = scene_options(c);
    o.size = 2 * c.image_size;
    return scene_input(object_crop(make_scene(d, item, seed, o)), c.pre.mean, c.pre.std);
}

}  // namespace

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
    tr->add_option("--image-size", s.train_size, "override the input side (with --scenes: the scenes' side; the object is "
                                                  "half of it and moves on the patch grid)")->check(CLI::Range(8, 1024));
    tr->add_option("--epochs", s.ts.epochs, "epochs")->default_val(30)->check(CLI::Range(1, 100000));
    tr->add_option("--batch", s.ts.batch, "batch size")->default_val(128)->check(CLI::Range(1, 65536));
    tr->add_option("--lr", s.ts.lr, "peak learning rate (AdamW)")->default_val(1e-3)->check(CLI::PositiveNumber);
    tr->add_option("--min-lr", s.ts.min_lr, "final learning rate of the cosine schedule")->default_val(1e-5);
    tr->add_option("--wd", s.ts.weight_decay, "AdamW weight decay (matrices only)")->default_val(0.05);
    tr->add_option("--warmup", s.ts.warmup_epochs, "linear warm-up, in epochs")->default_val(2);
    tr->add_flag("--no-augment", s.no_augment, "no random flips and shifts");
    tr->add_flag("--scenes", s.scenes, "train on scenes made of the training items (a fresh scene of each item every "
                                       "epoch; --config defaults to scenes) instead of the plain items");
    tr->add_flag("--scenes-crops", s.scenes_crops, "train on the object's square of each scene instead (half the scene's side, "
                                                   "on the patch grid, with its background and clutter: 32x32 for the scenes "
                                                   "model; --config defaults to scenes, at half its image size): a first stage "
                                                   "for --init-from")->excludes("--scenes");
    tr->add_option("--limit", s.ts.limit, "train on the first N images only")->default_val(0);
    tr->add_option("--seed", s.ts.seed, "seed for initialisation, shuffling and augmentation")->default_val(0);
    tr->add_option("--threads", s.threads, "threads (default: all cores)");
    tr->add_option("--data", s.data, "directory with the IDX files")->default_val(default_fashion_mnist_dir());
    auto* resume = tr->add_option("--resume", s.resume, "continue from a checkpoint written by train (and its .optim file)");
    tr->add_option("--init-from", s.init_from, "start a new model from a model written by train: every tensor copied (a "
                                               "position table of another grid: its cls row, its grid rows as --init-pos "
                                               "says); no optimizer state, the schedule from epoch 1")->excludes(resume);
    tr->add_option("--init-pos", s.init_pos, "with --init-from, the grid rows of a position table of another grid: keep "
                                             "(the new model's own initialisation; the default) or resize (the file's grid "
                                             "resized to the model's as timm does: bicubic, antialias)")
        ->check(CLI::IsMember({"keep", "resize"}));
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
            check_train_out(s.out);
            if (!s.init_pos.empty() && s.init_from.empty())
                throw UsageError("--init-pos " + safe(s.init_pos) + ": only with --init-from (it says how the file's position "
                                 "table fills the new model's grid)");
            const bool on_scenes = s.scenes || s.scenes_crops;
            if (on_scenes && s.config == "fmnist") s.config = "scenes";
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
                w = init_weights(train_config(s, train.rows), s.ts.seed);
                if (!s.init_from.empty()) {
                    const InitFrom r = init_from(w, load_model(s.init_from).weights,
                                                 s.init_pos == "resize" ? InitPos::Resize : InitPos::Keep);
                    std::string names;
                    for (const std::string& n : r.copied) names += (names.empty() ? "" : ", ") + n;
                    std::fprintf(stderr, "starting from %s: copied %zu tensors (%s); %s\n", safe(s.init_from).c_str(),
                                 r.copied.size(), names.c_str(),
                                 !r.resized.empty() ? r.resized.c_str()
                                 : r.kept.empty()   ? "nothing re-initialised"
                                                    : ("re-initialised (seed's initialisation): " + r.kept).c_str());
                }
            }
            const Config c = w.cfg;  // a copy: w is moved into the trainer below
            if (on_scenes) {
                if (c.channels != 3) throw UsageError("--scenes: the model is " + c.describe() + "; scenes are RGB");
                s.ts.render = [&train, c, crops = s.scenes_crops](int item, uint64_t draw, float* dst) {
                    const Tensor3 x = scenes_input(train, item, draw, c, crops);
                    std::copy(x.begin(), x.end(), dst);
                };
            } else {
                note_dataset_size(s.data, train, c);
                if (test.rows != train.rows || test.cols != train.cols) note_dataset_size(s.data, test, c);
            }
            // The test figure after each epoch: the test items (scenes: 2,000 test scenes of set 1, or their crops).
            const auto test_eval = [&](const Weights& w) {
                if (!on_scenes) return evaluate(w, test);
                return evaluate_inputs(
                    w, std::min(2000, test.n),
                    [&](int i, float* dst) {
                        const SceneDraw d = scene_draw(test, 1, i);
                        const Tensor3 x = scenes_input(test, d.item, d.seed, c, s.scenes_crops);
                        std::copy(x.begin(), x.end(), dst);
                    },
                    [&](int i) { return int(test.labels[size_t(scene_draw(test, 1, i).item)]); });
            };
            std::printf("training %s\n  %lld parameters, %d train / %d test images, batch %d, %d epochs, %d threads\n",
                        c.describe().c_str(), (long long)param_count(c), s.ts.limit ? std::min(s.ts.limit, train.n) : train.n,
                        test.n, s.ts.batch, s.ts.epochs, ops::threads());
            Trainer tr(std::move(w), s.ts, train);
            if (!s.resume.empty() && have_adam) tr.resume(std::move(adam), start_epoch);
            else if (!s.resume.empty()) tr.set_epoch(start_epoch);
            auto meta = [&](const EvalResult* r) {
                std::map<std::string, std::string> m{{"command", s.command_line},
                                                     {"dataset", s.scenes_crops ? "object crops of scenes of fashion-mnist"
                                                                : s.scenes ? "scenes of fashion-mnist" : "fashion-mnist"}};
                if (r) m["test_accuracy"] = std::to_string(r->accuracy);
                return m;
            };
            if (g_interrupted) { std::fprintf(stderr, "interrupted before training started; nothing saved\n"); return 130; }
            int last_decile = -1;
            while (!tr.done()) {
                bool ok = tr.run_epoch([&last_decile](const StepInfo& i) {
                    progress(i, last_decile);
                    return !g_interrupted.load();
                });
                if (!ok) {
                    save_training_checkpoint(s.out, tr.weights(), tr.adam(), tr.epoch(), meta(nullptr));
                    std::fprintf(stderr, "\ninterrupted: saved %s (epoch %d will restart); continue with --resume %s\n",
                                 s.out.c_str(), tr.epoch() + 1, s.out.c_str());
                    return 130;
                }
                if (::isatty(2)) std::fprintf(stderr, "\n");
                EvalResult r = test_eval(tr.weights());
                save_training_checkpoint(s.out, tr.weights(), tr.adam(), tr.epoch(), meta(&r));
                std::printf("epoch %d/%d: test accuracy %.2f%% (%d %s), saved %s\n", tr.epoch(), s.ts.epochs, 100 * r.accuracy,
                            r.n, s.scenes_crops ? "test scenes' crops" : s.scenes ? "test scenes" : "test images", s.out.c_str());
                std::fflush(stdout);
            }
            EvalResult r = test_eval(tr.weights());
            print_eval(r, c);
            return 0;
        };
    });

    auto* ev = app.add_subcommand("eval", "test accuracy and confusion matrix on Fashion-MNIST's test set");
    model_flags(ev, s);
    ev->add_option("--data", s.data, "directory with the IDX files")->default_val(default_fashion_mnist_dir());
    ev->add_option("--limit", s.limit, "evaluate the first N test images only")->default_val(0);
    ev->add_flag("--scenes", s.scenes, "on test scenes instead (the scenes model): accuracy, the pointing game of the last "
                                       "block's cls attention and of the rollout, the position embeddings' 2D structure, "
                                       "the mean attention distance per block");
    ev->add_option("--count", s.count, "--scenes: how many test scenes (default 10000)")->check(CLI::Range(1, 1000000));
    ev->add_option("--scene-seed", s.scene_seed, "--scenes: the set of scenes (vitscope-cli scenes --seed)")->default_val(1);
    ev->add_option("--distance-scenes", s.distance_n, "--scenes: scenes the attention distance averages over")->default_val(1000);
    ev->callback([this] {
        selected_ = [this] {
            auto& s = *s_;
            LoadedModel lm = load(s);
            Dataset test = load_fashion_mnist(s.data, false);
            const Config& c = lm.weights.cfg;
            if (s.scenes) return eval_scenes(lm, test);
            if (c.classes != 10) throw std::runtime_error("model has " + std::to_string(c.classes) + " classes; Fashion-MNIST has 10");
            note_dataset_size(s.data, test, c);
            EvalResult r = evaluate(lm.weights, test, s.limit);
            print_model(lm);
            print_eval(r, c);
            return 0;
        };
    });
}

int Commands::eval_scenes(const LoadedModel& lm, const Dataset& test) {
    const auto& s = *s_;
    const Config& c = lm.weights.cfg;
    const int n = s.count > 0 ? s.count : 10000;
    const bool tty = ::isatty(2);
    int last = -1;
    const ScenesEval r = evaluate_scenes(lm.weights, test, s.scene_seed, n, s.distance_n, [&](int done, int total) {
        const int pct = int(100.0 * done / total);
        if (pct / 10 != last / 10 || (tty && pct != last)) {
            std::fprintf(stderr, "%sscenes %d/%d (%d%%)%s", tty ? "\r" : "", done, total, pct, tty ? "" : "\n");
            last = pct;
        }
        return !g_interrupted.load();
    });
    if (tty) std::fprintf(stderr, "\n");
    print_model(lm);
    std::printf("test scenes: %d (set %llu of the Fashion-MNIST test split, vitscope-cli scenes --split test --seed %llu)\n", r.n,
                (unsigned long long)s.scene_seed, (unsigned long long)s.scene_seed);
    EvalResult e;
    e.accuracy = r.accuracy;
    e.n = r.n;
    e.confusion = r.confusion;
    print_eval(e, c);
    std::printf("pointing game (the map's peak patch has its centre in the object's box), chance %.3f:\n", r.chance);
    std::printf("  last block's cls attention, mean over heads: %.3f\n", r.pointing_cls);
    std::printf("  attention rollout through every block:        %.3f\n", r.pointing_rollout);
    std::printf("position embeddings: mean Spearman rho (cosine similarity vs grid distance): %.3f\n", r.pos_rho);
    std::printf("mean attention distance per block (pixels, mean over heads, %d scenes):", r.distance_scenes);
    for (double d : r.distance) std::printf(" %.1f", d);
    std::printf("\n");
    return 0;
}

}  // namespace vit::cli
