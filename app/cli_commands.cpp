#include "cli_commands.h"
#include "cli_internal.h"
#include "cli_scenes.h"

#include <cstdio>
#include <iostream>

#include "core/kernels/blas.h"
#include "core/io/checkpoint.h"
#include "core/io/scenes.h"
#include "core/teach/scenes_eval.h"
#include "core/io/hub.h"
#include "core/io/dataset.h"
#include "core/model/backward.h"
#include "core/model/finite.h"
#include "core/model/forward.h"
#include "core/io/image.h"
#include "core/io/io.h"
#include "core/kernels/ops.h"
#include "core/model/stages.h"
#include "core/teach/interventions.h"
#include "core/teach/teach.h"
#include "core/train/trainer.h"

#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

namespace vit::cli {



// Text from files (class names, config names, paths, tensor names) goes to the
// terminal escaped: a class name holding ESC [ 2 J must not clear the screen.
std::string safe(const std::string& t) { return terminal_safe(t); }

// The model line of every command that runs one, and where its head count came from (as `info` says it): a
// file with no head count of its own runs with a count taken from elsewhere (a .pth of ViT-Ti's shapes runs
// with the published 3 heads), which its output must not leave unsaid.
void print_model(const LoadedModel& lm) {
    std::printf("model: %s [%s]\n", safe(lm.weights.cfg.describe()).c_str(), safe(lm.source).c_str());
    std::printf("heads: %d (from %s)\n", lm.weights.cfg.heads, lm.heads_from.empty() ? "?" : safe(lm.heads_from).c_str());
}

void warn(const std::string& m) { std::fprintf(stderr, "vitscope-cli: warning: %s\n", terminal_safe(m, true).c_str()); }

namespace {

// One line of `models --json`: the fields as JSON (escaped by nlohmann).
std::string models_json_line(const hub::Found& f) {
    nlohmann::json j = {{"spec", f.spec}, {"where", f.where}, {"path", f.path}, {"bytes", f.bytes}, {"vit", f.id.vit},
                        {"family", f.id.family}, {"size", f.id.size}, {"params", f.id.params}, {"note", f.note}};
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A download's progress on stderr: one line redrawn in place on a terminal; otherwise a line every
// 10% and at least every 5 s (a slow transfer is never silent in a log).
bool download_progress(const hub::Progress& p) {
    static std::string last_file;
    static int last_decile = -1;
    static auto t0 = std::chrono::steady_clock::now(), last_line = t0;
    const bool tty = ::isatty(2);
    const auto now = std::chrono::steady_clock::now();
    if (p.file != last_file) {
        last_file = p.file;
        last_decile = -1;
        t0 = now;
        if (p.waiting) std::fprintf(stderr, "waiting for another process downloading %s %s\n", safe(p.repo_id).c_str(), safe(p.file).c_str());
        else if (p.resumed_from)
            std::fprintf(stderr, "resuming %s %s at %.1f of %.1f MB\n", safe(p.repo_id).c_str(), safe(p.file).c_str(),
                         p.resumed_from / 1e6, p.total / 1e6);
    }
    if (!p.note.empty()) {
        std::fprintf(stderr, "%s%s: %s\n", tty ? "\n" : "", safe(p.repo_id).c_str(), safe(p.note).c_str());
        last_decile = -1;
        t0 = now;
    }
    if (p.waiting) return true;
    const double frac = p.total ? std::min(1.0, double(p.done) / double(p.total)) : 0;
    const int decile = int(frac * 10);
    const bool end = p.total && p.done == p.total;
    if (!tty && decile == last_decile && !end && now - last_line < std::chrono::seconds(5)) return true;
    last_decile = decile;
    last_line = now;
    const double s = std::chrono::duration<double>(now - t0).count();
    const double rate = s > 0 && p.done >= p.resumed_from ? (p.done - p.resumed_from) / s : 0;
    const int W = 24;
    std::string bar(size_t(frac * W), '#');
    bar.resize(W, '-');
    std::fprintf(stderr, "%sdownloading %s %s (%d/%d) [%s] %3d%%  %.1f/%.1f MB  %.1f MB/s%s", tty ? "\r" : "",
                 safe(p.repo_id).c_str(), safe(p.file).c_str(), p.index, p.count, bar.c_str(), int(frac * 100), p.done / 1e6,
                 p.total / 1e6, rate / 1e6, tty ? (end ? "\n" : "   ") : "\n");
    std::fflush(stderr);
    return true;
}

LoadOverrides overrides(const Commands::State& s) {
    LoadOverrides ov;
    ov.hub.offline = s.offline;
    ov.hub.progress = download_progress;
    ov.heads = s.heads;
    if (s.pooling == "cls") ov.pooling = Pooling::Cls;
    if (s.pooling == "mean") ov.pooling = Pooling::Mean;
    return ov;
}

}  // namespace

void model_flags(CLI::App* c, Commands::State& s) {
    c->add_option("--model,-m", s.model, "'default' (embedded Fashion-MNIST model), a preset (" +
                  [] { std::string a; for (auto& p : preset_names()) a += (a.empty() ? "" : ", ") + p; return a; }() +
                  "; torchvision and timm names too: see 'info --list'), a checkpoint file (" + kCheckpointFormats +
                  "; timm, Hugging Face or torchvision layout), or hf:ORG/NAME[@REVISION] from the Hugging Face cache "
                  "(downloaded into it from $HF_ENDPOINT when not there; see 'vitscope-cli models')")
        ->default_val("default");
    c->add_flag("--offline", s.offline, "hf: models from the Hugging Face cache only, never downloaded (as HF_HUB_OFFLINE=1)");
    c->add_option("--heads", s.heads, "number of attention heads, when neither the file, a config.json beside it "
                                      "nor the published ViT shapes say (it must divide the width)")
        ->check(CLI::Range(1, kMaxWidth));
    c->add_option("--pooling", s.pooling, "override pooling: cls or mean")->check(CLI::IsMember({"cls", "mean"}));
    c->add_option("--seed", s.seed, "seed for a preset's random weights")->default_val(0);
    c->add_option("--labels", s.labels, "class names, one per line (overrides the checkpoint's)");
}

// The model (load_model names the file in every error, out of memory included);
// NaN or Inf in its tensors is named on stderr.
LoadedModel load(const Commands::State& s) {
    LoadedModel lm = load_model(s.model, overrides(s), s.seed);
    pack_blocks(lm.weights);  // the block matrices held once, packed for the GEMM
    if (!s.labels.empty()) { apply_labels_file(lm.weights.cfg, s.labels); lm.labels_from = s.labels; }
    if (!lm.nonfinite.empty()) warn(lm.nonfinite_warning());
    // What the model's preprocessing files ask for and cannot be done (do_normalize false, a 2-value
    // image_mean on an RGB model, a size that is not the model's): said by every command, not only info.
    if (auto it = lm.metadata.find("vitscope.preprocess_note"); it != lm.metadata.end())
        std::fprintf(stderr, "vitscope-cli: note: not followed: %s\n", safe(it->second).c_str());
    return lm;
}

namespace {

// The k most probable classes in the order the window lists them (vit::top_k: ties by index).
void print_top(const Array& probs, const Config& c, size_t k) {
    const float* p = probs.data();
    const std::vector<int> top = top_k(p, probs.size(), k);
    std::printf("top-%zu:\n", top.size());
    for (size_t r = 0; r < top.size(); ++r) {
        const size_t i = size_t(top[r]);
        std::printf("  %zu. class %zu%s%s (p=%.4f)\n", r + 1, i, i < c.class_names.size() ? " " : "",
                    i < c.class_names.size() ? safe(c.class_names[i]).c_str() : "", p[i]);
    }
}

// --image-size H or H,W as (H, W); (0, 0) when not given.
std::pair<int, int> image_size_flag(const std::string& v) {
    if (v.empty()) return {0, 0};
    auto number = [&](const std::string& t) {
        if (t.empty() || t.size() > 5 || t.find_first_not_of("0123456789") != std::string::npos)
            throw CLI::ValidationError("--image-size", "'" + v + "' is not H or H,W (pixels)");
        return std::stoi(t);
    };
    const size_t comma = v.find(',');
    const int h = number(v.substr(0, comma)), w = comma == std::string::npos ? h : number(v.substr(comma + 1));
    if (h < 1 || w < 1 || h > kMaxImageSize || w > kMaxImageSize)
        throw CLI::ValidationError("--image-size", "'" + v + "' is outside 1.." + std::to_string(kMaxImageSize));
    return {h, w};
}

// A forward pass; a failure (out of memory, a kernel that could not get its buffers) names the model.
Trace run_named(const LoadedModel& lm, const Tensor3& x, const Options& opt, const RunRequest& req = {}) {
    try {
        return name_out_of_memory(lm.source, "running the forward pass", [&] { return vit::run(lm.weights, x, opt, req); });
    } catch (const FileError&) {
        throw;
    } catch (const std::exception& e) {
        throw std::runtime_error(lm.source + ": the forward pass failed: " + e.what());
    }
}

// The rows of `t` whose names match one of the comma-separated globs of --stages (fnmatch: `*`
// crosses dots, `blocks.*.attn.pattern`); all rows when empty. A pattern matching nothing is a
// usage error naming the flag.
std::vector<size_t> select_stages(const StageTable& t, const std::string& patterns) {
    std::vector<size_t> rows;
    if (patterns.empty()) {
        for (size_t r = 0; r < t.size(); ++r) rows.push_back(r);
        return rows;
    }
    std::vector<std::string> pats;
    for (size_t a = 0; a <= patterns.size();) {
        size_t b = patterns.find(',', a);
        if (b == std::string::npos) b = patterns.size();
        std::string p = patterns.substr(a, b - a);
        while (!p.empty() && p.front() == ' ') p.erase(p.begin());
        while (!p.empty() && p.back() == ' ') p.pop_back();
        if (p.empty()) throw UsageError("--stages: an empty pattern in '" + safe(patterns) + "'");
        pats.push_back(p);
        a = b + 1;
    }
    std::vector<char> used(pats.size(), 0);
    for (size_t r = 0; r < t.size(); ++r) {
        bool any = false;
        for (size_t i = 0; i < pats.size(); ++i)
            if (::fnmatch(pats[i].c_str(), t[r].name.c_str(), 0) == 0) any = used[i] = 1;
        if (any) rows.push_back(r);
    }
    for (size_t i = 0; i < pats.size(); ++i)
        if (!used[i])
            throw UsageError("--stages: '" + safe(pats[i]) + "' matches no stage of this run (names as in `vitscope-cli "
                             "info --stage-table`, e.g. blocks.*.attn.pattern)");
    return rows;
}

// Where NaN or Inf first appears in a pass ("" when nowhere); also warned on stderr.
std::string report_nonfinite(const Trace& t, const std::string& what) {
    auto nf = first_nonfinite_stage(t);
    if (!nf) return "";
    std::string m = nf->describe(t.size());
    warn(what + ": the forward pass produced non-finite values: " + m);
    return m;
}

// __options__ of a trace or analysis: the options in force, and the preprocessing the model's files
// ask for that was not followed ("preprocess_not_followed"), so that the file says how it was made.
std::string options_record(const Options& opt, const LoadedModel& lm) {
    std::string j = options_json(opt, lm.weights.cfg);
    auto it = lm.metadata.find("vitscope.preprocess_note");
    if (it == lm.metadata.end() || j.empty() || j.back() != '}') return j;
    j.pop_back();
    return j + ", \"preprocess_not_followed\": " +
           nlohmann::json(it->second).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "}";
}

// The options in force from the command line (trace, analyze).
Options options_from(const Commands::State& s) {
    Options opt;
    opt.affine = !s.no_affine;
    opt.unbiased = s.unbiased;
    opt.bug_scale_after_softmax = s.bug_scale_after_softmax;
    opt.bug_reshape_patches = s.bug_reshape_patches;
    std::tie(opt.image_h, opt.image_w) = image_size_flag(s.image_size);
    return opt;
}

// An --input .npy of another size than the model's native one runs at its own size. A size the
// model cannot run at (a 4096 x 4096 input on a 28-pixel model: a pass of 35 TB) is refused naming
// the file, or --image-size when that set it.
void input_size_into(Options& opt, const Tensor3& x, const Config& c, const Commands::State& s) {
    const bool from_flag = opt.image_h || opt.image_w;
    if (!from_flag && (int(x.shape(1)) != c.image_size || int(x.shape(2)) != c.image_size)) {
        opt.image_h = int(x.shape(1));
        opt.image_w = int(x.shape(2));
    }
    try {
        run_dims(c, opt);
    } catch (const std::exception& e) {
        if (from_flag) throw UsageError("--image-size " + safe(s.image_size) + ": " + e.what());
        if (!s.input.empty())
            throw FileError("--input " + s.input + ": its " + std::to_string(x.shape(1)) + "x" + std::to_string(x.shape(2)) +
                            " input cannot run on this model (" + c.name + "): " + e.what());
        throw;
    }
}

void option_flags(CLI::App* c, Commands::State& s) {
    c->add_option("--image-size", s.image_size, "run at this input size, H or H,W pixels (multiples of the patch "
                                                "size); the position embeddings are resized by the family's rule");
    c->add_flag("--no-affine", s.no_affine, "LayerNorm without elementwise_affine (gamma, beta ignored)");
    c->add_flag("--unbiased", s.unbiased, "LayerNorm variance over N-1 instead of N");
    c->add_flag("--bug-scale-after-softmax", s.bug_scale_after_softmax,
                "BUG on purpose (teaching): attn = (q @ k.T).softmax(-1) / sqrt(d) instead of (q @ k.T / sqrt(d)).softmax(-1)");
    c->add_flag("--bug-reshape-patches", s.bug_reshape_patches,
                "BUG on purpose (teaching): patches = img.reshape(N, C*P*P) instead of unfold");
}

void intervention_flags(CLI::App* c, Commands::State& s) {
    c->add_option("--ablate-head", s.iv.ablate_heads, "knock out head H of block L: its slice of blocks.L.attn.z (the "
                  "input of the output projection) set to 0, or with :mean to its mean over the tokens; repeatable")
        ->type_name("L.H[:mean]");
    c->add_option("--ablate", s.iv.ablate, "set a sub-layer's output to 0 so the residual stream passes it unchanged: "
                  "blocks.L.attn.out or blocks.L.mlp.out; repeatable")->type_name("STAGE");
    c->add_option("--drop-patches", s.iv.drop_patches, "remove these patch tokens (0-based patch indices, row-major) from "
                  "the sequence right after the position embeddings are added: the pass runs on the shorter sequence")
        ->type_name("i,j,...");
    c->add_option("--patch-from", s.iv.patch_from, "activation patching: run this other input (an image, or a normalized "
                  ".npy as --input) with the same options and no interventions, and put its --patch-stage into this run")
        ->type_name("IMAGE|X.npy");
    c->add_option("--patch-stage", s.iv.patch_stage, "the stage to patch: embed, blocks.L.{ln1.out, attn.z, attn.out, "
                  "resid_mid, ln2.out, mlp.post, mlp.out, resid_post} or ln_final.out");
    c->add_option("--patch-tokens", s.iv.patch_tokens, "patch only these token rows of the stage (cls = 0; default: all)")
        ->type_name("i,j,...");
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
    const Options opt = options_from(s);
    const RunDims rd = run_dims(c, opt);
    if (!s.image.empty()) {
        Image im = load_image(s.image);
        PreprocessPlan p = plan_preprocess(im, c);
        if (!p.scaled_on_load.empty()) std::fprintf(stderr, "vitscope-cli: note: %s: %s\n", safe(s.image).c_str(), p.scaled_on_load.c_str());
        return name_out_of_memory(s.image, "preprocessing the image", [&] { return preprocess_at(im, c, rd.img_h, rd.img_w); });
    }
    if (!fallback) throw CLI::ValidationError("needs --image or --input");
    *fallback = true;
    return xt::zeros<float>({size_t(c.channels), size_t(rd.img_h), size_t(rd.img_w)});
}

// vitscope-cli analyze: the numbers behind the teaching views (issue 10, "For scripts").
void add_analyze(CLI::App& app, Commands::State& s, std::function<int()>& selected) {
    auto* an = app.add_subcommand("analyze", "write the numbers behind the teaching views (embedding filters, "
                                             "position similarity, attention distance, logit lens, token norms, "
                                             "patch-feature components, self-attention maps) to an .npz");
    model_flags(an, s);
    auto* img = an->add_option("--image,-i", s.image, "image file (default: an all-zero normalized input, the mean colour)");
    auto* inp = an->add_option("--input", s.input, "an already-normalized (C, H, W) float .npy instead of an image");
    img->excludes(inp);
    option_flags(an, s);
    intervention_flags(an, s);
    an->add_flag("--head-importance", s.head_importance, "also write head_importance (L, H): for the class the run without "
                 "interventions predicts, its logit minus the logit with that one head zero-ablated (embedding models: "
                 "1 - cosine of the embeddings)");
    an->add_flag("--occlusion", s.occlusion, "also write occlusion (N): the same with that one patch dropped");
    an->add_option("--average", s.average, "also write attn_distance_avg: the mean over the first N Fashion-MNIST "
                                           "test images (through the model's preprocessing: gray repeated to RGB and resized for an RGB model)")->check(CLI::Range(1, 100000));
    an->add_option("--data", s.data, "directory with the IDX files (for --average)")->default_val(default_fashion_mnist_dir());
    an->add_option("--keep", s.keep, "self_attn_mask: the patches holding this share of each head's attention mass "
                                     "(DINO's --threshold)")->default_val(0.6)->check(CLI::Range(0.001, 1.0));
    an->add_option("--norm-factor", s.norm_factor, "high_norm_tokens: tokens whose norm at the last layer is above this "
                                                   "many times the median norm of the patch tokens")->default_val(2.0)
        ->check(CLI::Range(1.0, 1000.0));
    an->add_option("--out,-o", s.out, "output .npz")->required();
    an->callback([&s, &selected] {
        selected = [&s] {
            LoadedModel lm = load(s);
            const Weights& w = lm.weights;
            const Config& c = w.cfg;
            bool zero_input = false;
            const Tensor3 x = model_input(s, c, &zero_input);
            Options opt = options_from(s);
            input_size_into(opt, x, c, s);
            interventions_from_flags(s.iv, w, opt);
            const Trace t = run_named(lm, x, opt);
            report_nonfinite(t, lm.source);
            const EmbedFilters ef = embed_filters(w);
            // a model without a position table (RoPE) has no table to compare: the rotations' similarity instead
            const bool table = c.pos_table;
            const Tensor2 pos = table ? pos_similarity(w) : rope_similarity(w), pos_run = table ? pos_similarity(t) : Tensor2(),
                          dist = attn_distance(t);
            std::vector<ArrayRef> items{array_ref("embed_filters", ef.filters), array_ref("embed_filters_var", ef.variance)};
            if (table) {
                items.push_back(array_ref("pos_similarity", pos));
                items.push_back(array_ref("pos_similarity_run", pos_run));
            } else {
                items.push_back(array_ref("rope_similarity", pos));
            }
            items.push_back(array_ref("attn_distance", dist));
            // the logit lens reads class scores: models whose output is an embedding have none
            Tensor2 lens;
            if (c.has_logits()) {
                lens = logit_lens(w, t);
                items.push_back(array_ref("logit_lens", lens));
            }
            // what the families are studied for (the Token norms, Patch features and Self-attention tabs)
            const Tensor2 norms = token_norms(t);
            const std::vector<int> high = high_norm_tokens(norms, int(norms.shape(0)) - 1, t.table().dims().prefix, s.norm_factor);
            Tensor1 high_arr = Tensor1::from_shape({high.size()});
            for (size_t i = 0; i < high.size(); ++i) high_arr(i) = float(high[i]);
            const FeaturePca pca = feature_pca(t);
            const HeadMaps maps = cls_head_maps(t, -1, s.keep);
            for (ArrayRef r : {array_ref("token_norms", norms), array_ref("high_norm_tokens", high_arr),
                               array_ref("features_pca", pca.proj), array_ref("features_rgb", pca.rgb),
                               array_ref("features_var", pca.variance), array_ref("features_fg", pca.fg),
                               array_ref("self_attn", maps.attn), array_ref("self_attn_mask", maps.mask),
                               array_ref("self_attn_kept", maps.kept_mass)})
                items.push_back(std::move(r));
            // The sweeps start from the run without interventions (the trace above when there are none).
            SweepResult hi, oc;
            const Trace* clean = opt.iv.empty() ? &t : nullptr;
            if (s.head_importance) {
                hi = head_importance(w, x, opt, {}, clean);
                items.push_back(array_ref("head_importance", hi.values));
            }
            if (s.occlusion) {
                oc = occlusion(w, x, opt, {}, clean);
                items.push_back(array_ref("occlusion", oc.values));
            }
            Tensor2 avg;
            int done = 0;
            if (s.average > 0) {
                Dataset test = load_fashion_mnist(s.data, false);
                const RunDims rd = run_dims(c, opt);
                avg = attn_distance_mean(w, dataset_inputs(test, s.average, c, rd.img_h, rd.img_w), opt, {}, &done);
                items.push_back(array_ref("attn_distance_avg", avg));
            }
            write_npz(s.out, items, {{"__options__", options_record(opt, lm)}});
            print_model(lm);
            std::printf("options: %s\n", safe(opt.describe()).c_str());
            for (const SweepResult* r : {s.head_importance ? &hi : nullptr, s.occlusion ? &oc : nullptr}) {
                if (!r) continue;
                const bool heads = r == &hi;
                const size_t best = size_t(std::max_element(r->values.begin(), r->values.end()) - r->values.begin());
                std::printf("%s %s: %s, against the run without interventions; largest %s %.4f (%d passes)\n",
                            heads ? "head_importance" : "occlusion", shape_str_of(r->values).c_str(),
                            r->target.measure().c_str(),
                            heads ? ("head " + head_label(int(best / size_t(c.heads)), int(best % size_t(c.heads)))).c_str()
                                  : ("patch " + std::to_string(best)).c_str(),
                            double(r->values.data()[best]), r->passes);
            }
            if (zero_input) std::printf("input: none given, an all-zero normalized input (the mean colour)\n");
            std::printf("embed_filters %s, variance explained by the first %zu: %.1f%%\n",
                        shape_str_of(ef.filters).c_str(), ef.variance.size(), 100.0 * xt::sum(ef.variance)());
            std::printf("attn_distance (pixels) per layer, mean over heads:");
            for (size_t l = 0; l < dist.shape(0); ++l) std::printf(" %.2f", xt::mean(xt::view(dist, l, xt::all()))());
            std::printf("\n");
            if (!c.has_logits())
                std::printf("logit_lens: not written: the model (%s) has no classifier, its output is an embedding\n",
                            family_label(c.family));
            std::string hn;
            for (int i : high) hn += " " + token_label(t.table(), i);
            std::printf("token_norms %s; high-norm tokens at layer %zu (over %.3g x the median patch norm):%s\n",
                        shape_str_of(norms).c_str(), norms.shape(0) - 1, double(s.norm_factor), hn.empty() ? " none" : hn.c_str());
            std::printf("features_pca of %s (%dx%d patches), variance explained: %.1f%% %.1f%% %.1f%%; foreground "
                        "(first component > 0): %d patches\n", pca.source_name.c_str(), pca.gh, pca.gw,
                        100.0 * pca.variance(0), 100.0 * pca.variance(1), 100.0 * pca.variance(2), int(xt::sum(pca.fg)()));
            std::printf("self_attn: %s, the %s row, %zu heads; masks keep %.0f%% of each head's attention\n",
                        maps.source_name.c_str(), maps.query.c_str(), maps.attn.shape(0), 100.0 * s.keep);
            if (done) std::printf("attn_distance_avg over %d test images written\n", done);
            std::printf("wrote %s\n", safe(s.out).c_str());
            return 0;
        };
    });
}

}  // namespace

Commands::Commands(CLI::App& app, const std::string& command_line) : app_(&app), s_(std::make_shared<State>()) {
    auto& s = *s_;
    s.command_line = command_line;
    add_training(app);
    add_scenes_command(app, selected_);
    add_convert(app);
    add_models(app);
    add_trace(app);
    add_analyze(app, s, selected_);
    add_info(app);
}

// trace: one image, every recorded stage to an .npz (and the top predictions)
void Commands::add_trace(CLI::App& app) {
    auto& s = *s_;
    auto* tr = app.add_subcommand("trace", "run one image and write every recorded stage to an .npz");
    model_flags(tr, s);
    auto* img = tr->add_option("--image,-i", s.image, "image file (" + image_formats() + "; one over 25 megapixels is scaled down on load)");
    auto* inp = tr->add_option("--input", s.input, "an already-normalized (C, H, W) float .npy instead of an image");
    img->excludes(inp);
    option_flags(tr, s);
    intervention_flags(tr, s);
    tr->add_flag("--grads", s.grads, "also the backward pass: d logit[class] / d stage as <stage>.grad for every "
                                     "stage that has a gradient (a model without a classifier: d embedding[k] / d stage)");
    tr->add_option("--class", s.grad_class, "the class whose logit --grads differentiates (default: the predicted one); "
                                            "a model without a classifier: the number of its embedding (default: its largest)")
        ->check(CLI::Range(0, kMaxClasses - 1));
    tr->add_option("--out,-o", s.out, "output .npz (numpy.load reads it; its last entry, __options__, is the "
                                      "options in force as JSON text)")->required();
    tr->add_option("--stages", s.stages, "write only these stages: comma-separated globs over the stage names "
                                         "(blocks.*.attn.pattern,logits)");
    tr->add_flag("--record-all", s.record_all, "record the whole trace in memory, then write it (without it the "
                                               "stages, and with --grads their gradients, are computed block by "
                                               "block as they are written)");
    tr->callback([this] {
        selected_ = [this] {
            auto& s = *s_;
            if (s.image.empty() && s.input.empty()) throw CLI::ValidationError("trace needs --image or --input");
            LoadedModel lm = load(s);
            const Config& c = lm.weights.cfg;
            const Tensor3 x = model_input(s, c, nullptr);
            Options opt = options_from(s);
            input_size_into(opt, x, c, s);
            interventions_from_flags(s.iv, lm.weights, opt);
            // a pass the backward cannot follow (an intervention): said before the forward pass, naming the flag, in the
            // words the window's gradient views use (every family has its backward)
            if (const std::string why = s.grads ? backward_unsupported(c, opt) : std::string(); !why.empty())
                throw UsageError("--grads: " + why);
            RunRequest req;
            req.grads = s.grads;
            req.grad_class = s.grad_class;
            req.model = {c.name, lm.source};
            const std::vector<std::pair<std::string, std::string>> texts{{"__options__", options_record(opt, lm)}};
            // Streamed (the default): a pass that keeps the residual stream, then each block's stages
            // recomputed from it as the writer reaches them, written and dropped: never the whole
            // trace in memory. With --grads the backward pass is checkpointed the same way: it keeps
            // the gradient of the stream between blocks, and a block's gradients are recomputed from
            // it as the writer reaches them. --record-all records everything first.
            // The on-demand trace holds the weights to recompute blocks with: lm outlives it (no ownership).
            const bool streamed = !s.record_all;
            if (streamed) req.on_demand = borrowed(lm.weights);
            Trace t;
            if (s.record_all) t = run_named(lm, x, opt, req);
            else
                name_out_of_memory(lm.source, "running the forward pass", [&] {
                    try {
                        forward(lm.weights, x, opt, t, req);
                    } catch (const FileError&) {
                        throw;
                    } catch (const std::invalid_argument& e) {
                        throw std::runtime_error(lm.source + ": the forward pass failed: " + e.what());
                    }
                });
            const std::vector<size_t> rows = select_stages(t.table(), s.stages);
            std::string nonfinite;
            size_t bytes = 0;
            if (!streamed) {
                nonfinite = report_nonfinite(t, lm.source);
                std::vector<ArrayRef> items;
                for (size_t i : rows) items.push_back(array_ref(t.name(i), t.at(i)));
                for (size_t i : rows)
                    if (const Array* g = t.grad_at(i)) items.push_back(array_ref(t.name(i) + ".grad", *g));
                for (const ArrayRef& a : items) bytes += 4 * shape_numel(a.shape);
                name_out_of_memory(s.out, "writing the trace", [&] { write_npz(s.out, items, texts); });
            } else {
                std::optional<NonFiniteStage> nf;
                std::vector<LazyTensor> items;
                // One block held at a time: when the writer reaches another block, what it read of the
                // last one is let go (trim), and goes when the next block is computed.
                int reading = -2;
                auto next = [&](size_t i) {
                    if (t.info(i).layer != reading) t.trim(), reading = t.info(i).layer;
                };
                for (size_t i : rows) {
                    const StageInfo& si = t.info(i);
                    bytes += 4 * shape_numel(si.shape);
                    items.push_back({si.name, si.shape, [&, i] {
                                         next(i);
                                         const Array& a = t.at(i);
                                         const NonFinite n = count_nonfinite(a);
                                         if (n.any()) {
                                             if (!nf) nf = NonFiniteStage{t.name(i), t.info(i).id, i, n, 0};
                                             ++nf->stages_with;
                                         }
                                         return a.data();
                                     },
                                     nullptr});
                }
                // gradients after the stages, in the same order (as the recorded trace writes them):
                // every row the table gives one (the test compares with --record-all's file)
                if (t.has_grads())
                    for (size_t i : rows) {
                        const StageInfo& si = t.info(i);
                        if (!si.has_grad) continue;
                        bytes += 4 * shape_numel(si.shape);
                        items.push_back({si.name + ".grad", si.shape, [&, i] {
                                             next(i);
                                             const Array* g = t.grad_at(i);
                                             if (!g) throw std::logic_error("no gradient for " + t.name(i));
                                             return g->data();
                                         },
                                         nullptr});
                    }
                name_out_of_memory(s.out, "writing the trace", [&] { write_npz_streamed(s.out, items, texts); });
                if (nf) {
                    nonfinite = nf->describe(t.size());
                    warn(lm.source + ": the forward pass produced non-finite values: " + nonfinite);
                }
            }
            if (opt.has_bug()) std::printf("options: %s\n", opt.describe().c_str());
            if (!opt.iv.empty()) std::printf("interventions: %s\n", safe(opt.iv.describe()).c_str());
            print_model(lm);
            if (opt.image_h) std::printf("input: %dx%d\n", opt.image_h, opt.image_w);
            std::printf("wrote %zu stages (%.1f MB%s) to %s\n", rows.size(), bytes / 1e6,
                        streamed ? ", computed block by block as written" : "", safe(s.out).c_str());
            if (!nonfinite.empty()) std::printf("non-finite: %s\n", nonfinite.c_str());
            if (t.has_grads())
                std::printf("gradients: d %s / d stage for every stage that has one (<stage>.grad)\n",
                            grad_target(c, t.grad_class()).c_str());
            if (!c.has_logits()) {
                const Array& e = t.get(StageId{StageKind::Embedding});
                std::printf("output: embedding of %zu dims (no classification head), norm %.4f\n", e.size(),
                            double(std::sqrt(xt::sum(e * e)())));
                return 0;
            }
            const Array& p = t.get(StageId{StageKind::Probs});
            if (count_nonfinite(p).any()) {
                std::printf("prediction: none (probs holds %s)\n", count_nonfinite(p).describe().c_str());
                return 0;
            }
            const size_t best = size_t(top_k(p.data(), p.size(), 1).at(0));
            std::printf("prediction: class %zu%s%s (p=%.4f)\n", best, c.class_names.empty() ? "" : " ",
                        c.class_names.empty() ? "" : safe(c.class_names[best]).c_str(), p(best));
            print_top(p, c, 5);
            return 0;
        };
    });
}

// info: a model's config, parameter count and per-stage shapes
void Commands::add_info(CLI::App& app) {
    auto& s = *s_;
    auto* info = app.add_subcommand("info", "print a model's config, parameter count and per-stage shapes");
    model_flags(info, s);
    info->add_flag("--list", s.list, "list the presets and the torchvision / timm names they answer to");
    info->add_flag("--explain", s.explain, "also print each stage's title, explanation and PyTorch line (tab-separated), for these options");
    info->add_flag("--stage-table", s.stage_table_json, "print only the stage table for these options as JSON (name, "
                                                        "kind, layer, shape, gradient, cell math, map box, hook, texts)");
    option_flags(info, s);
    intervention_flags(info, s);
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
                lm.heads_from = ov.heads > 0 ? "--heads" : "the preset";
                if (ov.heads > 0 && lm.weights.cfg.width % ov.heads)
                    throw UsageError("--heads " + std::to_string(ov.heads) + " does not divide the width " +
                                     std::to_string(lm.weights.cfg.width) + " of preset " + s.model + " (" +
                                     head_choices_text(lm.weights.cfg.width) + ")");
                if (ov.heads > 0) lm.weights.cfg.heads = ov.heads;
                if (ov.pooling) lm.weights.cfg.pooling = *ov.pooling;
                Config& pc = lm.weights.cfg;
                if (!pc.class_names.empty()) lm.labels_from = "the preset";
                else if (pc.has_logits() && pc.classes == 1000 && !imagenet1k_class_names().empty()) {
                    pc.class_names = imagenet1k_class_names();
                    lm.labels_from = "ImageNet-1k (the default for 1000 classes)";
                }
                if (!s.labels.empty()) { apply_labels_file(pc, s.labels); lm.labels_from = s.labels; }
                lm.weights.cfg.validate();
                lm.source = "preset:" + s.model;
            } else {
                lm = load(s);
            }
            const Config& c = lm.weights.cfg;
            Options io = options_from(s);
            interventions_from_flags(s.iv, lm.weights, io, false, false);  // the table needs no patch values
            const auto table = StageTable::get(c, io);
            if (s.stage_table_json) {
                std::printf("%s\n", stage_table_json(*table).c_str());
                return 0;
            }
            std::printf("source: %s\nfamily: %s\nconfig: %s\n", safe(lm.source).c_str(),
                        is_preset(s.model) ? "preset (saved under timm's key names)" : family_name(lm.family),
                        safe(c.describe()).c_str());
            if (!lm.layout.empty()) std::printf("layout: %s\n", safe(lm.layout).c_str());
            for (const std::string& n : lm.notes)
                if (n.rfind("preprocessing not followed: ", 0) != 0) std::printf("note: %s\n", safe(n).c_str());
            std::printf("parameters: %lld\n", (long long)param_count(c));
            std::printf("gemm: %s\n", vit::ops::gemm_engine().c_str());
            std::printf("blas: %s\n", vit::blas::describe().c_str());
            std::printf("heads: %d (from %s)\n", c.heads, lm.heads_from.empty() ? "?" : safe(lm.heads_from).c_str());
            if (c.class_names.empty() && !c.has_logits()) std::printf("class names: none (no classifier: the output is an embedding)\n");
            else if (c.class_names.empty()) std::printf("class names: none (classes are numbered; --labels FILE names them)\n");
            else std::printf("class names: %s, ... (from %s)\n", safe(c.class_names[0]).c_str(), safe(lm.labels_from).c_str());
            for (const char* k : {"hf.weights", "hf.config", "hf.preprocessor"})
                if (auto it = lm.metadata.find(k); it != lm.metadata.end())
                    std::printf("%s: %s\n", k + 3, safe(it->second).c_str());
            if (auto it = lm.metadata.find("vitscope.preprocess_note"); it != lm.metadata.end())
                std::printf("note: not followed: %s\n", safe(it->second).c_str());
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
                const RunDims rd = run_dims(c, options_from(s));
                const Tensor3 zero = xt::zeros<float>({size_t(c.channels), size_t(rd.img_h), size_t(rd.img_w)});
                const Trace t = run_named(lm, zero, options_from(s));
                auto nf = first_nonfinite_stage(t);
                std::printf("non-finite in a pass on an all-zero input: %s\n",
                            nf ? safe(nf->describe(t.size())).c_str() : "none (the non-finite weights do not reach any stage)");
            }
            if (!io.iv.empty()) std::printf("interventions: %s\n", safe(io.iv.describe()).c_str());
            std::printf("stages:\n");
            for (const StageInfo& st : *table) std::printf("  %-28s %s\n", st.name.c_str(), shape_str(st.shape).c_str());
            if (s.explain) {  // the stage table's texts, as the app's views and tour show them
                std::printf("explanations (%s):\n", safe(io.describe()).c_str());
                for (const StageInfo& st : *table)
                    std::printf("  %s\t%s\t%s\t%s\n", st.name.c_str(), st.title.c_str(), st.what.c_str(), st.torch.c_str());
            }
            return 0;
        };
    });

}

void Commands::add_models(CLI::App& app) {
    auto& s = *s_;
    auto* md = app.add_subcommand("models", "list the ViT checkpoints already on this computer: the Hugging Face cache and "
                                            "torch.hub's checkpoints folder (headers only: nothing is loaded)");
    md->add_option("--hf-cache", s.hf_cache, "the Hugging Face hub cache (default: $HF_HUB_CACHE, $HF_HOME/hub or "
                                             "~/.cache/huggingface/hub)");
    md->add_option("--torch-dir", s.torch_dir, "torch.hub's checkpoints folder (default: $TORCH_HOME/hub/checkpoints or "
                                               "~/.cache/torch/hub/checkpoints)");
    md->add_flag("--json", s.json_out, "one JSON object per line: spec, where, path, bytes, vit, family, size, params, note");
    md->callback([this] {
        selected_ = [this] {
            auto& s = *s_;
            const std::string hf = s.hf_cache.empty() ? hub::cache_dir() : s.hf_cache,
                              th = s.torch_dir.empty() ? hub::torch_checkpoints_dir() : s.torch_dir;
            // Bounded and never through a directory link (issue 37: refs/a -> . looped forever).
            const hub::ScanResult scan = hub::scan_models(hf, th);
            const std::vector<hub::Found>& found = scan.found;
            if (!scan.stopped.empty()) warn("the scan of the model folders " + scan.stopped + "; the list may be incomplete");
            if (s.json_out) {
                for (const hub::Found& f : found)
                    std::printf("%s\n", models_json_line(f).c_str());
                return 0;
            }
            // Every text here comes from files and folder names: escaped (a config's model_type
            // holding ESC ] 0 ; ... BEL must not retitle the terminal).
            int vits = 0;
            for (const std::string where : {"huggingface", "torch.hub"}) {
                std::printf("%s: %s\n", where == "huggingface" ? "Hugging Face cache" : "torch.hub checkpoints",
                            safe(where == "huggingface" ? hf : th).c_str());
                int n = 0;
                for (const hub::Found& f : found) {
                    if (f.where != where) continue;
                    ++n;
                    vits += f.id.vit;
                    std::printf("  %s\n      %s", safe(f.spec).c_str(), safe(f.id.family).c_str());
                    if (!f.id.size.empty()) std::printf(" | %s", safe(f.id.size).c_str());
                    const double n = double(f.id.params);
                    if (n >= 1e6) std::printf(" | %.1fM parameters", n / 1e6);
                    else if (n > 0) std::printf(" | %.0f parameters", n);
                    if (f.bytes >= 1000000) std::printf(" | %.1f MB\n", f.bytes / 1e6);
                    else std::printf(" | %.1f kB\n", f.bytes / 1e3);
                    if (!f.note.empty()) std::printf("      %s\n", safe(f.note).c_str());
                }
                if (!n) std::printf("  (no checkpoints)\n");
            }
            std::printf("%d ViT checkpoint%s; open one with --model SPEC\n", vits, vits == 1 ? "" : "s");
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
            for (auto& d : dropped) std::fprintf(stderr, "note: %s not converted (only floating-point tensors are)\n", safe(d).c_str());
            std::printf("wrote %zu tensors (%.1f MB, F32; source %s) to %s\n", items.size(), bytes / 1e6, safe(src_dt).c_str(),
                        safe(s.conv_out).c_str());
            return 0;
        };
    });
}

namespace {
// The files the command line names, each refused before anything is read when it is missing or not
// a regular file (a directory, /dev/zero, /dev/null, a FIFO such as a piped /dev/stdin): the error
// names the flag and the path, "--image /dev/zero: is a character device, not a regular file".
// --model only when it names a file (not 'default', a preset or hf:).
void check_input_files(const Commands::State& s) {
    const auto check = [](const char* flag, const std::string& path) {
        if (path.empty()) return;
        try {
            check_regular_file(path);
        } catch (const FileError& e) {
            throw FileError(std::string(flag) + " " + e.what());
        }
    };
    if (!s.model.empty() && !is_embedded_model(s.model) && !is_preset(s.model) && !hub::is_spec(s.model) &&
        ::access(s.model.c_str(), F_OK) == 0)
        check("--model", s.model);
    check("--labels", s.labels);
    check("--image", s.image);
    check("--input", s.input);
    check("--patch-from", s.iv.patch_from);
    check("--resume", s.resume);
}

// The file an output flag names: not empty, and never one of the inputs (trace --out x.png --image
// x.png, convert x.pth x.pth overwrote the source). train's --out may be its --resume: that is how a
// run is continued.
void check_output_files(const Commands::State& s, const std::string& command) {
    struct In { const char* flag; const std::string& path; };
    const bool model_file = !s.model.empty() && s.model != "default" && !is_preset(s.model) && !hub::is_spec(s.model);
    const In inputs[] = {{"--model", model_file ? s.model : std::string()}, {"--labels", s.labels}, {"--image", s.image},
                         {"--input", s.input}, {"--patch-from", s.iv.patch_from}, {"the checkpoint to convert", s.conv_in}};
    auto check = [&](const std::string& flag, const std::string& out) {
        if (out.empty()) throw UsageError(flag + " \"\": an empty path; give the file to write");
        for (const In& in : inputs)
            if (same_file(out, in.path))
                throw UsageError(flag + " " + safe(out) + ": is the same file as " + in.flag + " " + safe(in.path) +
                                 "; an output never replaces an input: give another file");
    };
    if (command == "trace" || command == "analyze" || command == "train") check("--out", s.out);
    if (command == "convert") check("out", s.conv_out);
}
}  // namespace

int Commands::run() {
    try {
        if (!selected_) return 2;
        check_input_files(*s_);
        std::string command;
        for (const CLI::App* sc : app_->get_subcommands()) command = sc->get_name();
        check_output_files(*s_, command);
        return selected_();
    } catch (const CLI::ValidationError& e) {
        std::cerr << "vitscope-cli: " << terminal_safe(e.what(), true) << "\n";
        return 2;
    } catch (const UsageError& e) {
        std::cerr << "vitscope-cli: " << e.what() << "\n";
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
