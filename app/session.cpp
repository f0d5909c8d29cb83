#include "session.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cstdio>
#include <random>
#include <thread>

#include "core/io/dataset.h"
#include "core/io/hub.h"
#include "core/io/image.h"
#include "core/kernels/ops.h"
#include "core/io/io.h"
#include "core/model/finite.h"
#include "core/teach/interventions.h"
#include "core/train/train.h"

namespace vit::app {

Session::Session(JobQueue& jobs)
    : jobs_(jobs), model_(std::make_shared<LoadedModel>(vit::load_model("default"))), model_spec_("default") {}

Session::~Session() {
    // the jobs hold what they need (model, input, their result): nothing of this session
    if (run_job_) run_job_->cancel();
    if (load_job_) load_job_->cancel();
    if (changes_.job) changes_.job->cancel();
}

// The overrides of a load: heads, and for hf: models offline and the download's progress (read
// by the UI thread through download(); the box is shared, so a load job never points into the session).
LoadOverrides Session::load_overrides(int heads) {
    LoadOverrides ov;
    ov.heads = heads;
    ov.hub.offline = offline_;
    download_->cancel = false;
    std::shared_ptr<DownloadBox> box = download_;
    ov.hub.progress = [box](const hub::Progress& p) {
        std::lock_guard<std::mutex> g(box->mu);
        box->now = {true, p.waiting, p.repo_id, p.file, p.done, p.total, p.resumed_from, p.index, p.count};
        return !box->cancel.load();
    };
    return ov;
}

Session::Download Session::download() const {
    std::lock_guard<std::mutex> g(download_->mu);
    return download_->now;
}

void Session::DownloadBox::clear() {
    std::lock_guard<std::mutex> g(mu);
    now = Download{};
}

bool Session::load_model(const std::string& spec, int heads) {
    try {
        const LoadOverrides ov = load_overrides(heads);
        auto m = std::make_shared<LoadedModel>(vit::load_model(spec, ov));
        vit::pack_blocks(m->weights);  // the block matrices held once, packed for the GEMM
        download_->clear();
        model_ = std::move(m);
        model_spec_ = spec;
        heads_request_.reset();
        note_nonfinite_weights(spec);
        refresh_input();
        return true;
    } catch (const HeadsNeeded& e) {
        heads_request_ = HeadsRequest{spec, e.width, e.choices, e.what()};
        error_ = "Could not load the model '" + spec + "': the number of heads is needed";
        return false;
    } catch (const std::exception& e) {
        download_->clear();
        add_error("Could not load the model '" + spec + "'", e.what());
        return false;
    }
}

void Session::answer_heads(int n) {
    if (!heads_request_) return;
    const std::string spec = heads_request_->spec;
    heads_request_.reset();
    error_.clear();
    begin_load_model(spec, n);
}

// NaN / Inf in the file's tensors: loaded as they are, and named in the error panel.
void Session::note_nonfinite_weights(const std::string& spec) {
    if (!model_->nonfinite.empty())
        add_error("Non-finite weights in '" + spec + "' (loaded as they are)", model_->nonfinite_warning());
}

void Session::add_error(const std::string& title, const std::string& detail) {
    error_ = title + ": " + detail.substr(0, detail.find('\n'));
    errors_.push_back({title, detail});
}

void Session::dismiss_error(size_t i) {
    if (i < errors_.size()) errors_.erase(errors_.begin() + long(i));
    if (errors_.empty()) error_.clear();
}

void Session::begin_load_model(const std::string& spec, int heads) {
    if (load_job_) load_job_->cancel();  // a newer request supersedes it: its model is dropped
    load_spec_ = spec;
    auto out = std::make_shared<LoadOut>();
    load_out_ = out;
    const LoadOverrides ov = load_overrides(heads);
    load_job_ = jobs_.submit("loading " + spec, all_threads(), [spec, ov, out](Job& job) {
        job.set_step(load_step(spec));
        try {
            auto m = std::make_shared<LoadedModel>(vit::load_model(spec, ov));
            vit::pack_blocks(m->weights);  // the block matrices held once, packed for the GEMM
            ops::cancellation_point();
            out->model = std::move(m);
        } catch (const HeadsNeeded& e) {  // not a failure: the window asks for the count
            out->heads = HeadsRequest{spec, e.width, e.choices, e.what()};
        }
    });
}

void Session::set_weights(std::shared_ptr<LoadedModel> m, const std::string& label) {
    model_ = std::move(m);
    model_spec_ = label;
    refresh_input();
}

// The image as the current model sees it (its size, channels, mean and std). With no image
// there is no input and nothing runs: the views say so (never a run on zeros).
void Session::refresh_input() {
    if (!image_path_.empty()) {
        try {
            input_ = name_out_of_memory(image_path_, "preprocessing the image", [&] { return preprocess_for_run(image_); });
        } catch (const std::exception& e) {  // the image stays on screen; without an input nothing runs
            add_error("Could not preprocess the image '" + image_path_ + "' for this model", e.what());
            input_ = Tensor3();
        }
    } else { input_ = Tensor3(); res_ = Result{}; ++version_; }
    ++input_version_;
    dirty_ = true;
}

// The image at the run's input size (the options' --image-size, else the model's own).
Tensor3 Session::preprocess_for_run(const Image& im) const {
    const RunDims rd = run_dims(config(), opt_);
    return preprocess_at(im, preprocess_config(), rd.img_h, rd.img_w);
}

Config Session::preprocess_config() const {
    Config c = config();
    if (squash_) c.pre.squash = *squash_;
    return c;
}

void Session::set_squash(std::optional<bool> squash) {
    if (squash == squash_) return;
    squash_ = squash;
    refresh_input();
}

void Session::set_grad_mode(GradMode m) {
    if (m == grad_mode_) return;
    grad_mode_ = m;
    dirty_ = true;
}

std::string load_step(const std::string& spec) {
    if (hub::is_spec(spec)) return "finding it in the Hugging Face cache, or downloading";
    if (is_preset(spec)) {
        char b[64];
        std::snprintf(b, sizeof b, "%.0fM", double(param_count(preset(spec))) / 1e6);
        return std::string("making random weights (") + b + " parameters)";
    }
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(spec, ec);
    if (ec) return "reading";
    char b[64];
    std::snprintf(b, sizeof b, "%.0f MB", double(bytes) / 1e6);
    return std::string("reading the file (") + b + ")";
}

Options base_options(const Options& o) {
    if (!o.iv.empty()) return o.clean();
    Options b;
    b.image_h = o.image_h;
    b.image_w = o.image_w;
    return b;
}

bool Session::load_patch_source(const std::string& path) {
    try {
        PatchSource src;
        src.path = path;
        if (path.size() > 4 && path.substr(path.size() - 4) == ".npy")
            src.array = input_from_array(read_npy(path), config(), path);
        else
            src.image = vit::load_image(path);
        patch_src_ = std::move(src);
        patch_values_ = {};
        dirty_ = true;
        return true;
    } catch (const std::exception& e) {
        add_error("Could not load the patching source '" + path + "'", e.what());
        return false;
    }
}

GradBytes grad_bytes(const Config& c, const Options& opt, bool on_demand) {
    GradBytes b;
    b.weights = double(param_count(c)) * sizeof(float);
    const auto table = StageTable::get(c, opt);
    const std::vector<char> kept = on_demand ? on_demand_rows(*table, on_demand_keep_kinds()) : std::vector<char>();
    std::vector<double> block(size_t(std::max(0, c.depth)), 0.0);
    for (size_t r = 0; r < table->size(); ++r) {
        const StageInfo& s = (*table)[r];
        const double n = double(shape_numel(s.shape)) * sizeof(float) * (s.has_grad ? 2 : 1);  // the stage and its gradient
        if (!on_demand || kept[r]) b.kept += n;
        if (s.layer >= 0 && (on_demand ? !kept[r] : true)) block[size_t(s.layer)] += n;
    }
    // on demand: a block's stages and gradients computed for the backward pass or a view (and the one a
    // view still holds); a full trace: the backward's scratch, about one block
    const double one = block.empty() ? 0.0 : *std::max_element(block.begin(), block.end());
    b.block = on_demand ? 2 * one : one;
    return b;
}

namespace {
std::string gb_text(double bytes) {
    char b[32];
    std::snprintf(b, sizeof b, bytes >= 1e9 ? "%.2f GB" : "%.0f MB", bytes >= 1e9 ? bytes / 1e9 : bytes / 1e6);
    return b;
}
}  // namespace

GradPlan grad_plan(GradMode mode, StagesMode stages, const Config& c, const Options& opt) {
    GradPlan p;
    if (std::string why = backward_unsupported(c, opt); !why.empty()) {
        p.why = "no gradients: " + why;
        return p;
    }
    p.on_demand = runs_on_demand(stages, c, opt);
    GradBytes b;
    try {
        b = grad_bytes(c, opt, p.on_demand);
    } catch (const std::exception& e) {  // options the model cannot run: the pass says why
        p.why = std::string("no gradients: ") + e.what();
        return p;
    }
    const bool fits = b.total() <= b.limit();
    const int64_t n = param_count(c);
    char params[32];
    std::snprintf(params, sizeof params, "%.1fM", double(n) / 1e6);
    p.run = fits && (mode == GradMode::On || (mode == GradMode::Auto && n < kAutoGradParams));
    if (p.run) return p;
    p.can_request = fits;
    const std::string off = "gradients are off for this session (--no-grads): only the forward pass ran";
    if (!fits) {
        p.why = (mode == GradMode::Off ? off + "; and for this model they" : "gradients are not computed for this model: they") +
                std::string(" would take the pass to about ") + gb_text(b.total()) +
                " (" + gb_text(b.weights) + " of weights, " + gb_text(b.kept + b.block) + " of stages and gradients" +
                (p.on_demand ? ", on demand" : ", every one recorded") + "), over the window's limit of 1.25 x the weights + 0.5 GB = " +
                gb_text(b.limit());
        if (!p.on_demand) {
            try {
                const GradBytes od = grad_bytes(c, opt, true);
                if (od.total() <= od.limit()) p.why += " (with the stages on demand, --stages on-demand, they would fit)";
            } catch (const std::exception&) {
            }
        }
        return p;
    }
    if (mode == GradMode::Off) {
        p.why = off;
        return p;
    }
    p.why = "gradients are not computed automatically for this model: " + std::string(params) +
            " parameters (automatic only under 30M, where the backward pass costs about a frame)";
    return p;
}

GradPlan Session::grad_plan() const { return app::grad_plan(grad_mode_, stages_mode_, config(), opt_); }

bool Session::want_grads() const { return grad_plan().run; }

bool Session::can_compute_grads() const { return grad_plan().can_request; }

std::string Session::grads_unavailable_reason() const { return grad_plan().why; }

bool Session::load_labels(const std::string& path) {
    try {
        auto m = std::make_shared<LoadedModel>();
        m->weights = model_->weights;
        m->family = model_->family; m->source = model_->source; m->metadata = model_->metadata;
        m->heads_from = model_->heads_from;
        apply_labels_file(m->weights.cfg, path);
        m->labels_from = path;
        model_ = std::move(m);
        dirty_ = true;
        return true;
    } catch (const std::exception& e) {
        add_error("Could not load the class names '" + path + "'", e.what());
        return false;
    }
}

bool Session::load_image(const std::string& path) {
    try {
        Image im = vit::load_image(path);
        Tensor3 x = name_out_of_memory(path, "preprocessing the image", [&] { return preprocess_for_run(im); });
        truth_.reset();
        truth_note_.clear();
        try {
            truth_ = read_scene_truth(path, im.file_width ? im.file_width : im.width, im.file_height ? im.file_height : im.height);
        } catch (const std::exception& e) {
            truth_note_ = e.what();  // the image is fine; the panel says why its truth is not shown
        }
        image_ = std::move(im);
        image_path_ = path;
        input_ = std::move(x);
        ++input_version_;
        dirty_ = true;
        return true;
    } catch (const std::exception& e) {
        add_error("Could not load the image '" + path + "'", e.what());
        return false;
    }
}

bool Session::new_scene() {
    namespace fs = std::filesystem;
    static std::unique_ptr<Dataset> test;  // the test split, read once (the UI thread's: no lock needed)
    try {
        if (!test) test = std::make_unique<Dataset>(load_fashion_mnist(default_fashion_mnist_dir(), false));
        const char* xdg = std::getenv("XDG_CACHE_HOME");
        const char* home = std::getenv("HOME");
        if (!(xdg && *xdg) && !(home && *home)) throw std::runtime_error("neither XDG_CACHE_HOME nor HOME is set: no cache folder");
        static std::random_device rd;
        const uint64_t seed = (uint64_t(rd()) << 32) ^ rd();
        const SceneDraw d = scene_draw(*test, seed, 0);
        const Scene sc = make_scene(*test, d.item, d.seed);
        char name[32];
        std::snprintf(name, sizeof name, "%016llx", (unsigned long long)seed);
        const fs::path dir = (xdg && *xdg ? fs::path(xdg) : fs::path(home) / ".cache") / "vitscope" / "scenes" / name;
        std::error_code ec;
        fs::create_directories(dir, ec);
        if (ec) throw std::runtime_error("cannot create " + dir.string() + ": " + ec.message());
        const std::string file = std::string("scene-") + name + ".png";
        const std::vector<std::string> names = preset("scenes").class_names;
        write_png((dir / file).string(), sc.rgb.data(), sc.size, sc.size, 3);
        write_file_atomic((dir / "labels.json").string(),
                          "[" + scene_labels_entry(sc, file, names[size_t(sc.label)], "test") + "]\n");
        return load_image((dir / file).string());
    } catch (const std::exception& e) {
        add_error("Could not make a new scene", e.what());
        return false;
    }
}

void Session::set_options(const Options& o) {
    if (o == opt_) return;
    const bool resize = o.image_h != opt_.image_h || o.image_w != opt_.image_w;
    opt_ = o;
    if (resize) refresh_input();  // another input size: the image is prepared again
    dirty_ = true;
}

std::string run_step_text(const StageTable& t, int units, bool first_pass, int backward_blocks) {
    const int rows = int(t.size());
    if (rows == 0) return "";
    if (backward_blocks > 0 && units >= rows) {  // the checkpointed backward pass, from the last block down
        if (units < rows + backward_blocks)
            return "the backward pass (checkpointed): block " + std::to_string(t.depth() - (units - rows)) + " of " +
                   std::to_string(t.depth()) + ", its stages recomputed";
        units -= backward_blocks;
    }
    const bool base = units >= rows;  // the second pass: the Changes baseline
    const int u = std::min(units % rows, rows - 1);
    const StageInfo& st = t[size_t(u)];
    std::string where;
    if (st.layer >= 0) {
        where = "running block " + std::to_string(st.layer + 1) + " of " + std::to_string(t.depth());
    } else {
        bool after_blocks = false;
        for (int i = 0; i < u; ++i) after_blocks = after_blocks || t[size_t(i)].layer >= 0;
        where = after_blocks ? "running the head" : "running the embedding";
    }
    if (base) return "the baseline for Changes (default options): " + where;
    return first_pass ? "first pass, packing the weights: " + where : where;
}

const std::vector<StageKind>& on_demand_keep_kinds() {
    static const std::vector<StageKind> k{StageKind::AttnPattern};
    return k;
}

bool runs_on_demand(StagesMode mode, const Config& c, const Options& opt) {
    if (mode == StagesMode::All) return false;
    if (mode == StagesMode::OnDemand) return c.depth > 0;
    try {
        return c.depth > 0 && run_dims(c, opt).full_floats * sizeof(float) > kOnDemandBytes;
    } catch (const std::exception&) {
        return false;  // options the model cannot run: the pass says why
    }
}

void Session::set_stages_mode(StagesMode m) {
    if (m == stages_mode_) return;
    stages_mode_ = m;
    base_ = {};  // the baseline is recorded the same way as the trace
    dirty_ = true;
}

void Session::trim_stages() {
    size_t freed = 0;
    if (res_.trace) freed += res_.trace->trim();
    if (res_.base && res_.base != res_.trace) freed += res_.base->trim();
    if (freed || trim_heap_) {
        // glibc keeps freed arrays of a big model's pass or block for later allocations (its mmap
        // threshold grows as large blocks are freed): give them back, so that the session holds what
        // it uses (tens of MB on ViT-B)
        malloc_trim(0);
        trim_heap_ = false;
    }
}

ChangesState Session::changes() const {
    ChangesState st;
    const Result& r = res_;
    if (!r.trace || !r.base) return st;
    ChangesCache& cc = changes_;
    if (cc.now != r.trace || cc.base != r.base) {
        if (cc.job) cc.job->cancel();
        cc = ChangesCache{r.base, r.trace, nullptr, nullptr};
        if (!r.trace->on_demand() && !r.base->on_demand()) {
            cc.out = std::make_shared<std::vector<StageChange>>(trace_changes(*r.base, *r.trace));
        } else {
            // every block of both passes recomputed once, in traces of the job's own (the window's
            // caches untouched): about two passes of work, off the UI thread
            auto out = std::make_shared<std::vector<StageChange>>();
            const auto base = r.base, now = r.trace;
            cc.job = jobs_.submit("comparing every stage with the baseline",
                                  job_threads(param_count(now->table().config())), [base, now, out](Job& job) {
                                      *out = trace_changes(*base, *now, [&job](int l, int L) {
                                          job.set_progress(float(l) / float(std::max(1, L)));
                                          job.set_step("block " + std::to_string(l + 1) + " of " + std::to_string(L));
                                      });
                                  });
            cc.out = out;
        }
    }
    if (cc.job) {
        if (!cc.job->finished()) {
            st.pending = true;
            st.progress = std::max(0.f, cc.job->progress());
            return st;
        }
        if (cc.job->state() != Job::State::Done) {
            st.error = cc.job->state() == Job::State::Failed ? cc.job->error() : "cancelled";
            return st;
        }
    }
    st.list = cc.out.get();
    return st;
}

float Session::progress() const { return run_job_ ? std::max(0.f, run_job_->progress()) : 1.f; }

void Session::launch() {
    if (run_job_) run_job_->cancel();  // a newer request supersedes the pass in flight
    auto model = model_;
    auto xp = std::make_shared<const Tensor3>(input_);
    const Options opt = opt_;
    const Config& c = model->weights.cfg;
    const Options bopt = base_options(opt);
    // The Changes baseline is computed once per model, input and input size, then reused.
    std::shared_ptr<const Trace> base =
        base_.trace && base_.model == model && base_.input_version == input_version_ && base_.options == bopt
            ? base_.trace : nullptr;
    const bool same_as_base = opt == bopt;
    // The trace on screen, when it is of this model and input: the new pass reuses its stages before
    // the first block the options change (an intervention at block L leaves blocks 0..L-1 as they were).
    const std::shared_ptr<const Trace> prev =
        res_.trace && res_.model == model && res_input_version_ == input_version_ ? res_.trace : nullptr;
    run_input_version_ = input_version_;
    // Activation patching: the other input's stage, computed in the job unless the last one still holds.
    Options opt_run = opt;
    std::shared_ptr<const Tensor3> patch_input;
    auto patch_out = std::make_shared<PatchValues>();
    run_patch_ = nullptr;
    if (opt.iv.patch && !opt.iv.patch->values) {
        const PatchValues& pv = patch_values_;
        const ActivationPatch& p = *opt.iv.patch;
        if (pv.values && pv.model == model && patch_src_ && pv.path == patch_src_->path && pv.stage == stage_name(p.stage) &&
            pv.clean == opt.clean() && pv.squash == squash_) {
            opt_run.iv.patch->values = pv.values;
        } else if (patch_src_) {
            try {  // the other input at this run's size, prepared as the model's input is
                const RunDims rd = run_dims(c, opt.clean());
                patch_input = std::make_shared<const Tensor3>(
                    patch_src_->array.size() ? patch_src_->array
                                             : preprocess_at(patch_src_->image, preprocess_config(), rd.img_h, rd.img_w));
            } catch (const std::exception&) {  // the job says why
            }
            *patch_out = {model, patch_src_->path, stage_name(p.stage), opt.clean(), squash_, nullptr};
            run_patch_ = patch_out;
        }
    }
    size_t rows = 0;
    try {
        rows = StageTable::get(c, opt)->size();
    } catch (const std::exception&) {  // options the model cannot run: the job says why
    }
    const bool want_grads = this->want_grads();
    // Stages on demand (big models): the trace holds the model to recompute a block's stages with.
    std::shared_ptr<const Weights> on_demand;
    if (runs_on_demand(stages_mode_, c, opt)) on_demand = std::shared_ptr<const Weights>(model, &model->weights);
    // a baseline recorded the other way (the mode changed) is not reused
    if (base && base->on_demand() != bool(on_demand)) base = nullptr;
    // Back at the baseline's options (a toggle switched back): the cached baseline is this pass's
    // result, computed with exactly these options on this model and input; no pass runs.
    const bool reuse_base = same_as_base && base && (!want_grads || base->has_grads());
    // the checkpointed backward pass (on demand) counts a unit per block (backward_on_demand)
    const int backward_blocks = want_grads && on_demand ? c.depth : 0;
    const int total = int(rows) * (same_as_base || base ? 1 : 2) + backward_blocks;
    auto out = std::make_shared<Result>();
    out->model = model;
    out->no_grads_why = grads_unavailable_reason();
    run_out_ = out;
    // The pass records into the retired trace's arrays when no one holds it any more (use_count 1: only
    // this session, so no one can take it meanwhile); else into a new one.
    std::shared_ptr<Trace> into;
    if (retired_ && retired_.use_count() == 1) into = std::const_pointer_cast<Trace>(std::move(retired_));
    retired_.reset();
    const ModelIdentity who{c.name, model->source};
    // the first pass on a model packs its matrices for the GEMM kernel as it goes (core/kernels/gemm.h)
    const bool first_pass = packed_model_ != model.get();
    packed_model_ = model.get();
    run_job_ = jobs_.submit("forward pass", job_threads(param_count(c)),
                            [model, xp, opt_run, bopt, base, same_as_base, want_grads, total, out, who, prev, patch_input,
                             patch_out, into, reuse_base, on_demand, view_block = view_block_](Job& job) {
        const Tensor3& x = *xp;
        Result& r = *out;
        Options opt = opt_run;
        job.set_total(total);
        auto t0 = std::chrono::steady_clock::now();
        if (opt.iv.patch && !opt.iv.patch->values) {
            job.set_step("the patching source's pass");
            if (!patch_input) throw std::runtime_error("activation patching has no other input to take " +
                                                       stage_name(opt.iv.patch->stage) + " from (load one)");
            Options target = opt;
            target.iv.patch.reset();
            opt.iv.patch = make_activation_patch(model->weights, *patch_input, target, opt.iv.patch->stage,
                                                 opt.iv.patch->tokens, opt.iv.patch->source);
            patch_out->values = opt.iv.patch->values;
            job.set_step("");
        }
        if (reuse_base) {
            r.trace = r.base = base;
            if (auto nf = first_nonfinite_stage(*base)) r.nonfinite = nf->describe(base->size());
            r.reused_base = true;
            return;
        }
        auto t = into ? into : std::make_shared<Trace>();
        t->set_progress(&job.units());
        RunRequest req;
        req.grads = want_grads;  // the backward pass in the same run: one forward (on demand: checkpointed)
        req.model = who;
        if (on_demand) {
            req.on_demand = on_demand;
            req.keep_kinds = on_demand_keep_kinds();
            req.keep_block = view_block;
        }
        try {
            const int from = prev && !want_grads ? first_changed_block(model->weights.cfg, prev->options(), opt) : -1;
            if (from >= 0) {
                forward_from(model->weights, *prev, opt, from, *t, req);
                r.from_block = from;
            } else {
                forward(model->weights, x, opt, *t, req);
            }
        } catch (const std::bad_alloc&) {
            throw std::runtime_error("out of memory (std::bad_alloc) while running the forward pass of " + model->source);
        }
        t->set_progress(nullptr);
        const auto t_pass = std::chrono::steady_clock::now();
        r.trace = t;
        if (auto nf = first_nonfinite_stage(*t)) r.nonfinite = nf->describe(t->size());
        if (same_as_base) {
            r.base = t;
        } else if (base) {
            r.base = base;
        } else {
            job.set_step("the default options' run (for Changes, once per model and image)");
            auto b = std::make_shared<Trace>();
            b->set_progress(&job.units());
            RunRequest breq;
            breq.model = who;
            breq.on_demand = req.on_demand;
            breq.keep_kinds = req.keep_kinds;
            forward(model->weights, x, bopt, *b, breq);
            b->set_progress(nullptr);
            r.base = b;
        }
        r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        r.pass_ms = std::chrono::duration<double, std::milli>(t_pass - t0).count();
    });
    // the step, named from the stages recorded so far: "running block 3 of 24"
    std::shared_ptr<const StageTable> table;
    try {
        table = StageTable::get(c, opt);
    } catch (const std::exception&) {
    }
    if (table)
        run_job_->set_step_from_units([table, first_pass, backward_blocks](int units) {
            return run_step_text(*table, units, first_pass, backward_blocks);
        });
    dirty_ = false;
}

bool Session::poll(double wait_ms) {
    if (load_job_ && load_job_->finished()) {
        const auto job = std::move(load_job_);
        const auto out = std::move(load_out_);
        download_->clear();
        if (job->state() == Job::State::Done && out->model) {
            model_ = std::move(out->model);
            model_spec_ = load_spec_;
            heads_request_.reset();
            note_nonfinite_weights(model_spec_);
            refresh_input();
        } else if (job->state() == Job::State::Done && out->heads) {
            heads_request_ = std::move(out->heads);
            error_ = "Could not load the model '" + load_spec_ + "': the number of heads is needed";
        } else if (job->state() == Job::State::Failed) {
            add_error("Could not load the model '" + load_spec_ + "'", job->error());
        }
    }
    // a model being loaded runs when it is in (no pass of the one it replaces meanwhile)
    if (dirty_ && input_.size() && !load_job_) launch();
    if (!run_job_ || !run_job_->wait_for(wait_ms)) return false;
    const auto job = std::move(run_job_);
    const auto out = std::move(run_out_);
    if (job->state() == Job::State::Failed) {
        add_error("The forward pass failed (" + model_spec_ + ")", job->error());
        return false;
    }
    if (job->state() != Job::State::Done || job->cancelled()) return false;
    // the old trace goes (its arrays kept for the next pass when no one else holds it): memory is given
    // back at the next trim_stages (on demand: big models)
    trim_heap_ = (res_.trace && res_.trace->on_demand()) || (out->trace && out->trace->on_demand());
    retired_ = std::move(res_.trace);
    res_ = std::move(*out);
    res_input_version_ = run_input_version_;
    if (run_patch_ && run_patch_->values) patch_values_ = *run_patch_;
    run_patch_ = nullptr;
    if (res_.base && res_.model) base_ = {res_.base, res_.model, input_version_, res_.base->options()};
    ++version_;
    // Once per change of report, not at every re-run (a dismissed one stays dismissed while it holds).
    if (!res_.nonfinite.empty() && res_.nonfinite != nonfinite_reported_)
        add_error("NaN / Inf in the forward pass (" + model_spec_ + ")", res_.nonfinite);
    nonfinite_reported_ = res_.nonfinite;
    return true;
}

}  // namespace vit::app
