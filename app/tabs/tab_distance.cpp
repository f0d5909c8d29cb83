// The Distance tab (issue 10 item 4): the mean attention distance (vit::attn_distance) of the trace
// on screen as a layer x pixels dot plot, one dot per head (ViT paper Fig. 7 right), and its average
// over N Fashion-MNIST test images (vit::attn_distance_mean) computed in the background. Every label
// is made from the state that produced the numbers (the trace's model and options).
#include "app/probe.h"
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <unistd.h>

#include "app/app_args.h"
#include "app/jobs.h"
#include "app/tabs/tab.h"
#include "core/io/dataset.h"
#include "core/io/image.h"
#include "core/io/scenes.h"
#include "core/teach/teach.h"

namespace vit::app {

namespace {

// The averaged distance: a job (app/jobs.h) that never touches the session. What was asked is set
// before it starts; the outcome is written by the job and read once the job has finished.
struct DistanceAverage {
    std::shared_ptr<Job> job;
    std::shared_ptr<const LoadedModel> model;
    Options opt;
    std::string key;        // model, options and preprocessing this average belongs to
    std::string opt_text;   // the options, as the legend says them
    int n = 0;
    struct Outcome {
        Tensor2 mean;
        int images = 0;
        std::string opt_text;  // the options it was computed with
    };
    std::shared_ptr<Outcome> out = std::make_shared<Outcome>();
    bool running() const { return !job->finished(); }
    int done() const { return job->units_done(); }
};

const ImVec4 kWarn(kWarnRGBA[0], kWarnRGBA[1], kWarnRGBA[2], kWarnRGBA[3]);
const ImU32 kDot = IM_COL32(80, 170, 255, 255), kAvg = IM_COL32(255, 150, 40, 255);

// What an average must have been computed for to be shown as this trace's.
std::string average_key(const Session& s) {
    const auto m = s.shown_model();
    char b[64];
    std::snprintf(b, sizeof b, "%p|", static_cast<const void*>(m.get()));
    std::string k = b + (m ? options_json(s.shown_options(), m->weights.cfg) : std::string());
    k += s.squash() ? (*s.squash() ? "|squash" : "|crop") : "|model's";
    return k;
}

std::string test_set_file(const std::string& dir) {
    for (const char* f : {"t10k-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte"})
        if (::access((dir + "/" + f).c_str(), R_OK) == 0) return dir + "/" + f;
    return "";
}

// Why the average cannot run for this model ("" when it can).
std::string average_unavailable(const Session& s, const std::string& dir) {
    if (!s.trace()) return "no model has run yet";
    const Config& c = s.shown_config();
    if (c.depth == 0) return "the model has no blocks, so there is no attention";
    if (c.channels != 1 && c.channels != 3)
        return "the model takes " + std::to_string(c.channels) + " channels; Fashion-MNIST's gray images convert to 1 or 3";
    if (test_set_file(dir).empty())
        return "no Fashion-MNIST test set at " + dir + " (the Debian package dataset-fashion-mnist installs it)";
    return "";
}


// A "nice" tick step (1, 2 or 5 x 10^k) giving about `target` steps over `range`.
double nice_step(double range, int target) {
    double raw = range / std::max(1, target), p = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * p >= raw) return m * p;
    return 10 * p;
}


class DistanceTab : public TabView {
public:
    explicit DistanceTab(JobQueue& jobs) : jobs_(jobs) {}
    ~DistanceTab() override { stop_average(); }
    void draw(ViewCtx& v) override;
    // Every frame, whatever the tab: starts the --distance-images average once a trace is in, and
    // cancels a running average that no longer belongs to the trace on screen.
    void tick(ViewCtx& v) override;
    bool working() const override { return autostart_ || (avg_ && avg_->running()); }
    void apply_args(const AppArgs& a) override {
        if (a.distance_images > 0) { images_ = a.distance_images; autostart_ = true; }
    }
    void sweep_states(SweepPlan& plan) override;
    void sweep_check(const Session& s, const UiState& ui, const Probe& p, const SweepFail& fail) const override;

private:
    struct ShownAverage {
        bool draw = false;  // a finished average of the trace's model and options
        Tensor2 mean;       // (L, H)
        int images = 0;
        std::string opt_text;  // the options it was computed with
    };
    ShownAverage draw_average(ViewCtx& v, const std::string& key, int L, int H);
    void draw_legend(ViewCtx& v, const ShownAverage& sa, float uniform, float r, int patches);
    void start_average(const Session& s, int n);
    void stop_average() {
        if (avg_) avg_->job->cancel();
    }
    JobQueue& jobs_;
    CacheKeys keys_;
    Array vals_;                  // (L, H): vit::attn_distance of the trace shown
    std::string error_;
    std::shared_ptr<DistanceAverage> avg_;
    int images_ = 100;            // "Average over N test images"
    bool autostart_ = false;      // --distance-images N: start that average once a trace is in
};

void DistanceTab::start_average(const Session& s, int n) {
    stop_average();
    auto a = std::make_shared<DistanceAverage>();
    a->model = s.shown_model();
    a->opt = s.shown_options();
    a->key = average_key(s);
    a->opt_text = a->opt.describe();
    a->n = n;
    Config pc = a->model->weights.cfg;  // the model's preprocessing, with the squash choice in force
    if (s.squash()) pc.pre.squash = *s.squash();
    auto model = a->model;
    const Options opt = a->opt;
    auto out = a->out;
    const std::string dir = default_fashion_mnist_dir();
    const RunDims rd = s.trace()->table().dims();  // the images at the run's input size
    const int ih = rd.img_h, iw = rd.img_w;
    a->job = jobs_.submit("distance: average over " + std::to_string(n) + " test images", job_threads(param_count(pc)),
                          [model, opt, pc, n, dir, out, ih, iw](Job& job) {
        job.set_total(n);
        job.set_step("reading the test set");
        const Dataset d = load_fashion_mnist(dir, false);
        const int total = std::min(n, d.n);
        job.set_total(total);
        job.set_step("");
        const Weights& w = model->weights;
        Tensor2 acc;
        int done = 0;
        // chunks of 64 images: the inputs of a 224 RGB model are 600 KB each
        for (int start = 0; start < total && !job.cancelled(); start += 64) {
            std::vector<Tensor3> xs;
            for (int i = start; i < std::min(total, start + 64); ++i) {
                if (is_scenes_model(pc)) {  // a model trained on scenes averages over test scenes (set 1), not bare items
                    const SceneDraw sd = scene_draw(d, 1, i);
                    xs.push_back(preprocess_at(scene_image(make_scene(d, sd.item, sd.seed, scene_options(pc))), pc, ih, iw));
                } else {
                    xs.push_back(dataset_input(d, i, pc, ih, iw));
                }
            }
            int k = 0;
            Tensor2 m = attn_distance_mean(w, xs, opt, [&job, start](int i, int) {
                job.units() = start + i;
                return !job.cancelled();
            }, &k);
            if (done == 0) acc = m * float(k);
            else acc += m * float(k);
            done += k;
        }
        if (!job.cancelled() && done > 0) {
            out->mean = acc / float(done);
            out->images = done;
        }
    });
    avg_ = std::move(a);
}

void DistanceTab::tick(ViewCtx& v) {
    Session& s = v.s;
    DistanceAverage* av = avg_.get();
    // a run for another model, options or preprocessing than the trace on screen is cancelled
    if (av && av->running() && s.trace() && av->key != average_key(s)) av->job->cancel();
    // --distance-images N: start once the first trace is in (whatever tab is shown)
    if (autostart_ && s.trace() && !s.busy() && !s.loading()) {
        autostart_ = false;
        const std::string why = average_unavailable(s, default_fashion_mnist_dir());
        if (why.empty()) start_average(s, std::clamp(images_, 1, 10000));
        else s.add_error("Could not average the attention distance", why);
    }
}

// The average's controls (N, run, cancel, progress) and its state; what of it the plot may draw: only a finished
// average of the model, options and preprocessing on screen (`key`), of the trace's L x H.
DistanceTab::ShownAverage DistanceTab::draw_average(ViewCtx& v, const std::string& key, int L, int H) {
    Session& s = v.s;
    Probe& pr = v.probe;
    DistanceAverage* av = avg_.get();
    const std::string dir = default_fashion_mnist_dir();
    const std::string unavailable = average_unavailable(s, dir);
    ImGui::AlignTextToFramePadding();
    ImGui::BeginDisabled(!unavailable.empty() || (av && av->running()));
    char btn[64];
    std::snprintf(btn, sizeof btn, "Average over %d test images", images_);
    if (ImGui::Button(btn)) start_average(s, images_), av = avg_.get();
    ImGui::SameLine();
    ImGui::SetNextItemWidth(110);
    if (ImGui::InputInt("N##distn", &images_, 10, 100)) images_ = std::clamp(images_, 1, 10000);
    ImGui::EndDisabled();
    pr.numbers["dist.avg.n"] = images_;
    std::string avg_state = "none";
    if (!unavailable.empty()) {
        ImGui::SameLine();
        ImGui::TextColored(kWarn, "cannot average: %s", unavailable.c_str());
        pr.strings["dist.avg.message"] = "cannot average: " + unavailable;
    }
    ShownAverage out;
    if (av) {
        if (av->running()) {
            avg_state = "running";
            ImGui::SameLine();
            char ov[64];
            std::snprintf(ov, sizeof ov, "%d / %d images", av->done(), av->n);
            ImGui::SetNextItemWidth(220);
            ImGui::ProgressBar(float(av->done()) / float(std::max(1, av->n)), ImVec2(220, 0), ov);
            ImGui::SameLine();
            if (ImGui::Button("Cancel")) av->job->cancel();
        } else {
            if (av->job->state() == Job::State::Failed) {
                avg_state = "error";
                std::string m = "the average failed: " + av->job->error();
                ImGui::TextColored(kWarn, "%s", m.c_str());
                pr.strings["dist.avg.message"] = m;
            } else if (av->job->cancelled()) {
                avg_state = "cancelled";
                std::string m = "average cancelled after " + std::to_string(av->done()) + " of " +
                                std::to_string(av->n) + " images: nothing to show (run it again)";
                ImGui::TextDisabled("%s", m.c_str());
                pr.strings["dist.avg.message"] = m;
            } else if (av->key != key) {
                avg_state = "stale";
                std::string m = "the average over " + std::to_string(av->out->images) + " images was computed for " +
                                av->model->weights.cfg.name + " with " + av->opt_text +
                                ": not the model and options on screen, so it is not drawn (run it again)";
                ImGui::TextColored(kWarn, "%s", m.c_str());
                pr.strings["dist.avg.message"] = m;
            } else if (av->out->mean.dimension() == 2 && int(av->out->mean.shape(0)) == L && int(av->out->mean.shape(1)) == H) {
                avg_state = "done";
                out.draw = true;
                out.mean = av->out->mean;
                out.images = av->out->images;
                out.opt_text = av->opt_text;
            }
        }
    }
    pr.strings["dist.avg.state"] = avg_state;
    return out;

}

// The legend under the plot: what each mark is, with the options that produced it (lines wrap at the view's edge).
void DistanceTab::draw_legend(ViewCtx& v, const ShownAverage& sa, float uniform, float r, int patches) {
    Session& s = v.s;
    Probe& pr = v.probe;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float th = ImGui::GetTextLineHeight();
    const Options& opt = s.shown_options();
    ImGui::PushTextWrapPos(0);
    ImVec2 lp = ImGui::GetCursorScreenPos();
    dl->AddCircleFilled(ImVec2(lp.x + 8, lp.y + th / 2), r, kDot, 12);
    ImGui::Dummy(ImVec2(18, th));
    ImGui::SameLine();
    std::string this_label = "this image (" + std::filesystem::path(s.image_path()).filename().string() + "), " +
                             opt.describe();
    ImGui::TextUnformatted(this_label.c_str());
    pr.strings["dist.label"] = this_label;
    if (sa.draw) {
        lp = ImGui::GetCursorScreenPos();
        dl->AddCircle(ImVec2(lp.x + 8, lp.y + th / 2), r + 2.f, kAvg, 16, 2.f);
        ImGui::Dummy(ImVec2(18, th));
        ImGui::SameLine();
        const std::string avg_label = is_scenes_model(s.shown_config())
                        ? "mean over " + std::to_string(sa.images) + " test scenes (the first " + std::to_string(sa.images) +
                              " of vitscope-cli scenes --split test --seed 1), " + sa.opt_text
                        : "mean over " + std::to_string(sa.images) + " Fashion-MNIST test images (the first " +
                              std::to_string(sa.images) + "), " + sa.opt_text;
        ImGui::TextUnformatted(avg_label.c_str());
        pr.strings["dist.avg.label"] = avg_label;
        pr.strings["dist.avg.values"] = csv(sa.mean.data(), sa.mean.size());
        pr.numbers["dist.avg.images"] = sa.images;
    }
    if (uniform >= 0) {
        lp = ImGui::GetCursorScreenPos();
        for (float xx = 0; xx < 16; xx += 10)
            dl->AddLine(ImVec2(lp.x + 2 + xx, lp.y + th / 2), ImVec2(lp.x + 2 + std::min(xx + 5, 16.f), lp.y + th / 2),
                        IM_COL32(200, 200, 120, 255), 1.5f);
        ImGui::Dummy(ImVec2(18, th));
        ImGui::SameLine();
        char b[160];
        std::snprintf(b, sizeof b, "a head spreading its attention evenly over all %d patches: %.1f px (the mean distance "
                      "between two patch centres)", patches, uniform);
        ImGui::TextUnformatted(b);
        pr.strings["dist.uniform.label"] = b;
    }
    if (std::string note = weights_note(s); !note.empty())
        ImGui::TextColored(kWarn, "%s: these distances come from untrained attention", note.c_str());
    ImGui::PopTextWrapPos();
}

void DistanceTab::draw(ViewCtx& v) {
    Session& s = v.s;
    UiState& ui = v.ui;
    Probe& pr = v.probe;
    const Trace* t = trace_or_why(v, "dist.message");
    if (!t) return;
    const auto model = s.shown_model();
    const Weights& w = model->weights;
    const Config& c = w.cfg;
    const Options& opt = s.shown_options();
    if (keys_.stale("dist", s.version())) {
        error_.clear();
        vals_ = Array();
        try {
            vals_ = attn_distance(*t);  // the core's numbers for the trace on screen
        } catch (const std::exception& e) {
            error_ = e.what();
        }
    }
    // An average computed for another model, options or preprocessing is never this trace's:
    // a run in flight for them is cancelled; a finished one is shown as what it was, not drawn.
    DistanceAverage* av = avg_.get();

    const RunDims& rd = t->table().dims();  // the run's input H x W and grid (another size than the model's own included)
    const float diag = std::hypot(float(rd.img_h), float(rd.img_w));
    std::string left_out = rd.prefix == 0 ? "every token is a patch: the model has no cls token" : "the rows and columns of";
    for (int i = 0; i < rd.prefix; ++i) left_out += (i ? ", " : " ") + token_label(*t, i);
    if (rd.prefix > 0) left_out += " left out";
    ImGui::PushTextWrapPos(0);
    ImGui::TextWrapped("Mean attention distance: for each layer and head, how far (in input pixels) a patch looks, "
                       "on average over the patches: the sum over keys of attention weight x distance between the two "
                       "patch centres (%s). Small: the head looks near, like a convolution; "
                       "large: it looks across the image (ViT paper Fig. 7 right). %dx%d input, %dx%d patches of %dx%d "
                       "pixels, %d layers x %d heads.",
                       left_out.c_str(),
                       rd.img_h, rd.img_w, rd.gh, rd.gw, c.patch, c.patch, c.depth, c.heads);
    ImGui::PopTextWrapPos();
    const Array& vals = vals_;
    if (vals.dimension() != 2 || vals.size() == 0) {
        std::string why = c.depth == 0 ? "the model has no blocks, so there is no attention to measure"
                                       : "no attention distance for this trace: " + error_;
        ImGui::TextColored(kWarn, "%s", why.c_str());
        pr.strings["dist.message"] = why;
        return;
    }
    const int L = int(vals.shape(0)), H = int(vals.shape(1));

    // ---- the average: N, run / cancel, progress
    const ShownAverage sa = draw_average(v, average_key(s), L, H);
    const bool draw_avg = sa.draw;
    const Tensor2& avg = sa.mean;
    const int avg_images = sa.images;

    // ---- the plot
    ImDrawList* dl = ImGui::GetWindowDrawList();
    ImVec2 avail = ImGui::GetContentRegionAvail();
    const float line = ImGui::GetTextLineHeightWithSpacing();
    const float legend_h = 3.6f * line;
    const float left = 64, bottom = 2.2f * line, top = line * 1.2f, right = 16;
    const float ph = std::max(120.f, std::min(avail.y - legend_h - 8, 560.f));
    const float pw = std::max(200.f, avail.x - 8);
    ImVec2 o = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("distplot", ImVec2(pw, ph));
    const bool hovered = v.hover && ImGui::IsItemHovered();
    const bool clicked = v.hover && ImGui::IsItemClicked(ImGuiMouseButton_Left);
    const Rect clip{o.x, o.y, pw, ph};
    const Rect axes{o.x + left, o.y + top, pw - left - right, ph - top - bottom};
    pr.rects["dist.plot"] = axes;
    pr.numbers["dist.ymax"] = diag;
    pr.numbers["dist.layers"] = L;
    pr.numbers["dist.heads"] = H;
    dl->AddRectFilled(ImVec2(axes.x, axes.y), ImVec2(axes.x + axes.w, axes.y + axes.h), IM_COL32(30, 30, 34, 255));
    const ImU32 grid = IM_COL32(70, 70, 78, 255), tc = ImGui::GetColorU32(ImGuiCol_Text);
    auto ypix = [&](double val) { return float(axes.y + axes.h * (1.0 - val / diag)); };
    const float col_w = axes.w / float(L);
    auto xpix = [&](int l, int h) {
        const float spread = std::min(7.f, 0.7f * col_w / float(std::max(1, H)));
        return axes.x + (float(l) + 0.5f) * col_w + (float(h) - 0.5f * float(H - 1)) * spread;
    };
    // y: 0 .. the image diagonal, in pixels
    const double step = nice_step(diag, 6);
    const float th = ImGui::GetTextLineHeight();
    for (double y = 0; y <= diag - 0.45 * step; y += step) {
        float py = ypix(y);
        dl->AddLine(ImVec2(axes.x, py), ImVec2(axes.x + axes.w, py), grid);
        char b[32];
        std::snprintf(b, sizeof b, "%g", y);
        ImVec2 sz = ImGui::CalcTextSize(b);
        DrawLabel(dl, pr, "dist.y", ImVec2(axes.x - 6 - sz.x, py - th / 2), tc, b, clip);
    }
    {
        char b[128];
        std::snprintf(b, sizeof b, "%.1f", diag);
        ImVec2 sz = ImGui::CalcTextSize(b);
        dl->AddLine(ImVec2(axes.x, axes.y), ImVec2(axes.x + axes.w, axes.y), IM_COL32(140, 140, 150, 255));
        DrawLabel(dl, pr, "dist.y", ImVec2(axes.x - 6 - sz.x, axes.y - th / 2), tc, b, clip);
        std::snprintf(b, sizeof b, "mean attention distance (pixels); top = the image diagonal, %.1f px", diag);
        DrawLabel(dl, pr, "dist.title", ImVec2(axes.x, o.y), tc, b, clip);
    }
    // the reference: a head that spreads its attention evenly over the patches
    float uniform = -1;
    try {
        uniform = uniform_attn_distance(*t);
    } catch (const std::exception&) {
    }
    if (uniform >= 0) {
        const float py = ypix(uniform);
        for (float xx = axes.x; xx < axes.x + axes.w; xx += 10)
            dl->AddLine(ImVec2(xx, py), ImVec2(std::min(xx + 5, axes.x + axes.w), py), IM_COL32(200, 200, 120, 255), 1.5f);
        pr.numbers["dist.uniform"] = uniform;
    }
    // x: layers
    for (int l = 0; l < L; ++l) {
        if (l) dl->AddLine(ImVec2(axes.x + l * col_w, axes.y), ImVec2(axes.x + l * col_w, axes.y + axes.h), IM_COL32(45, 45, 52, 255));
        std::string b = std::to_string(l);
        ImVec2 sz = ImGui::CalcTextSize(b.c_str());
        if (L <= 24 || l % 2 == 0)
            DrawLabel(dl, pr, "dist.x", ImVec2(axes.x + (l + 0.5f) * col_w - sz.x / 2, axes.y + axes.h + 3), tc, b, clip);
    }
    {
        const char* xl = "layer (network depth)";
        ImVec2 sz = ImGui::CalcTextSize(xl);
        DrawLabel(dl, pr, "dist.xlabel", ImVec2(axes.x + axes.w / 2 - sz.x / 2, axes.y + axes.h + 3 + line), tc, xl, clip);
    }
    // the selection: the current stage's layer and the selected head
    int sel_layer = -1;
    if (const auto e = shown_stage(s, ui)) sel_layer = e->info->layer;
    const int sel_head = ui.head;
    // dots: this image (filled), the average (rings, in orange)
    const float r = 4.5f;
    int best_l = -1, best_h = -1;
    bool best_avg = false;
    float best_d = 9.f;
    ImVec2 mp = ImGui::GetIO().MousePos;
    if (draw_avg)  // the average's rings first: this image's dots stay visible on top of them
        for (int l = 0; l < L; ++l)
            for (int h = 0; h < H; ++h) {
                const float x = xpix(l, h), ya = ypix(avg(l, h));
                dl->AddCircle(ImVec2(x, ya), r + 2.f, kAvg, 16, 2.f);
                pr.rects["dist.avgdot." + std::to_string(l) + "." + std::to_string(h)] = Rect{x - r - 2, ya - r - 2, 2 * r + 4, 2 * r + 4};
                float da = std::hypot(mp.x - x, mp.y - ya);
                if (da < best_d) { best_d = da; best_l = l; best_h = h; best_avg = true; }
            }
    for (int l = 0; l < L; ++l)
        for (int h = 0; h < H; ++h) {
            const float x = xpix(l, h);
            const float y = ypix(vals.data()[size_t(l) * H + h]);
            dl->AddCircleFilled(ImVec2(x, y), r, kDot, 12);
            pr.rects["dist.dot." + std::to_string(l) + "." + std::to_string(h)] = Rect{x - r, y - r, 2 * r, 2 * r};
            if (l == sel_layer && h == sel_head) dl->AddCircle(ImVec2(x, y), r + 3.5f, IM_COL32(255, 255, 255, 255), 16, 2);
            float d = std::hypot(mp.x - x, mp.y - y);
            if (d <= best_d) { best_d = d; best_l = l; best_h = h; best_avg = false; }
        }
    if (hovered && best_l >= 0) {
        const double val = best_avg ? double(avg(best_l, best_h)) : double(vals.data()[size_t(best_l) * H + best_h]);
        if (best_avg)
            ImGui::SetTooltip("layer %d, head %d: %.2f px (mean over %d test images)\nclick: show this layer and head",
                              best_l, best_h, val, avg_images);
        else
            ImGui::SetTooltip("layer %d, head %d: %.2f px (this image)\nclick: show this layer and head", best_l, best_h, val);
        pr.strings["dist.hover"] = "layer " + std::to_string(best_l) + ", head " + std::to_string(best_h);
    }
    if (clicked && best_l >= 0) {
        // the app's selection: the head, the layer's attention pattern, the overlay's layer and head
        ui.head = best_h;
        ui.overlay_layer = best_l;
        ui.overlay_head = best_h;
        select_stage(ui, *t, StageId{StageKind::AttnPattern, best_l});
        v.notice = "selected layer " + std::to_string(best_l) + ", head " + std::to_string(best_h) +
                    ": the Stage tab shows its attention pattern";
    }
    // ---- legend: what each colour is, with the options that produced it (lines wrap at the view's edge)
    ImGui::SetCursorScreenPos(ImVec2(o.x, o.y + ph + 4));
    draw_legend(v, sa, uniform, r, rd.N);
    pr.strings["dist.values"] = csv(vals.data(), vals.size());
    // the numbers behind the view, for "Numbers .npy/.csv"
    numbers_.push_back({"attn_distance", vals});
    if (draw_avg) numbers_.push_back({"attn_distance_avg", Array(avg)});
}



// The sweep: a small average (the driver waits for it), then an options change that makes it stale
// (said, not drawn), then an option change while an average runs, which cancels it (said). A state
// is applied again on every frame it waits: each starts its average once.
void DistanceTab::sweep_states(SweepPlan& plan) {
    if (!average_unavailable(*plan.session, default_fashion_mnist_dir()).empty()) return;
    const Options base = plan.base;
    auto started = std::make_shared<bool>(false);
    plan.add("distance, average over 2 test images", [this, started](Session&, UiState& ui) {
        ui.tab = Tab::Distance;
        if (*started) return;
        *started = true;
        images_ = 2;
        autostart_ = true;
    });
    plan.add("distance, average drawn", [](Session&, UiState& ui) { ui.tab = Tab::Distance; });
    plan.add("distance, options changed (average stale)", [base](Session& s, UiState& ui) {
        Options o = base;
        o.affine = false;
        s.set_options(o);
        ui.tab = Tab::Distance;
    });
    plan.add("distance, options reset", [base](Session& s, UiState&) { s.set_options(base); });
    auto step = std::make_shared<int>(0);
    plan.add("distance, an option change cancels a running average", [this, step, base](Session& s, UiState& ui) {
        ui.tab = Tab::Distance;
        if (*step == 0) {
            images_ = 10000;
            autostart_ = true;
            *step = 1;
        } else if (*step == 1 && avg_ && avg_->running()) {
            Options o = base;
            o.unbiased = true;
            s.set_options(o);
            *step = 2;
        }
    });
    SweepState cancelled;
    cancelled.desc = "distance, the cancelled average is said so";
    cancelled.apply = [](Session&, UiState& ui) { ui.tab = Tab::Distance; };
    cancelled.check = [](const Session&, const UiState&, const Probe& p, const SweepFail& fail) {
        if (p.string("dist.avg.state") != "cancelled" || p.string("dist.avg.message").find("cancelled") == std::string::npos)
            fail("an average cancelled by an option change is not said cancelled (" + p.string("dist.avg.state") + ")");
    };
    plan.states.push_back(std::move(cancelled));
    plan.add("distance, options reset again", [base](Session& s, UiState&) { s.set_options(base); });
}

// Every frame of the tab: a plot or the reason there is none; every dot where its number says; an
// average drawn only when it is done and this trace's, and said when it is stale, cancelled or failed.
void DistanceTab::sweep_check(const Session& s, const UiState&, const Probe& p, const SweepFail& fail) const {
    if (!s.trace()) return;
    if (!p.rects.count("dist.plot")) {
        if (p.string("dist.message").empty()) fail("the distance tab drew no plot and gave no reason");
        return;
    }
    const int L = int(p.number("dist.layers")), H = int(p.number("dist.heads"));
    const std::string st = p.string("dist.avg.state");
    if (st == "done" && !p.rects.count("dist.avgdot." + std::to_string(L - 1) + "." + std::to_string(H - 1)))
        fail("the distance average is done but not drawn");
    if ((st == "stale" || st == "cancelled" || st == "error") && p.string("dist.avg.message").empty())
        fail("the distance average is " + st + " and the tab does not say so");
    if (st != "done" && p.rects.count("dist.avgdot.0.0")) fail("an average that is " + st + " is drawn");
    std::vector<double> vals;
    std::stringstream ss(p.string("dist.values"));
    for (std::string tok; std::getline(ss, tok, ',');) vals.push_back(std::stod(tok));
    const Rect ax = p.rects.at("dist.plot");
    if (int(vals.size()) != L * H) {
        fail("the distance tab lists " + std::to_string(vals.size()) + " values for " + std::to_string(L * H) + " dots");
        return;
    }
    for (int k = 0; k < L * H; ++k) {
        auto it = p.rects.find("dist.dot." + std::to_string(k / H) + "." + std::to_string(k % H));
        const Rect d = it == p.rects.end() ? Rect{} : it->second;
        const double want = ax.y + ax.h * (1 - vals[size_t(k)] / p.number("dist.ymax"));
        if (std::abs(d.y + d.h / 2 - want) > 0.5) {
            fail("a distance dot is not at its value");
            break;
        }
    }
}
}  // namespace

std::unique_ptr<TabView> make_distance_tab(JobQueue& jobs) { return std::make_unique<DistanceTab>(jobs); }

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_distance() {
    using K = ProbeKind;
    return {
        {K::Rect, "dist.plot", "the plot's axes"},
        {K::Rect, "dist.dot.<layer>.<head>", "this image's dot"},
        {K::Rect, "dist.avgdot.<layer>.<head>", "the average's ring"},
        {K::Number, "dist.{ymax|layers|heads|uniform}", "the plot's scale"},
        {K::Number, "dist.avg.{n|images}", "the average's size"},
        {K::String, "dist.{message|values|label|hover|uniform.label}", "the Distance tab's texts and numbers"},
        {K::String, "dist.avg.{state|message|label|values}", "the average's state and numbers"},
        {K::Group, "dist.{title|x|xlabel|y}", "the plot's labels"},
    };
}

}  // namespace vit::app
