// Two teaching views of issue 10 (items 4 and 1), drawing the core's numbers as they are:
//   DrawDistance: the mean attention distance (vit::attn_distance) of the trace on screen as a
//     layer x pixels dot plot, one dot per head (ViT paper Fig. 7 right), and its average over N
//     Fashion-MNIST test images (vit::attn_distance_mean) computed on a background thread.
//   DrawPatchPictures: the `patches` stage as pictures: the model input cut into its P x P tiles,
//     then every row of the recorded patches matrix beside the tile it holds (paper Fig. 1).
// Every label is made from the state that produced the numbers (the trace's model and options).
#include <imgui.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>
#include <unistd.h>

#include "core/io/dataset.h"
#include "core/io/image.h"
#include "core/teach/teach.h"
#include "views.h"

namespace vit::app {

// The averaged distance: one run on a worker thread. The UI thread starts and cancels it and
// reads its result under `mu`; the worker never touches the session.
struct DistanceAverage {
    std::thread th;
    std::atomic<bool> cancel{false}, running{false};
    std::atomic<int> done{0};
    // What was asked (set before the thread starts, then read-only).
    std::shared_ptr<const LoadedModel> model;
    Options opt;
    std::string key;        // model, options and preprocessing this average belongs to
    std::string opt_text;   // the options, as the legend says them
    int n = 0;
    std::string data_dir;
    // The outcome (under mu).
    std::mutex mu;
    bool finished = false, cancelled = false;
    Tensor2 mean;
    int images = 0;
    std::string error;
    ~DistanceAverage() {
        cancel = true;
        if (th.joinable()) th.join();
    }
};

bool distance_average_running(const Textures& tx) { return tx.dist_avg && tx.dist_avg->running; }

void stop_distance_average(Textures& tx) {
    if (!tx.dist_avg) return;
    tx.dist_avg->cancel = true;
    if (tx.dist_avg->th.joinable()) tx.dist_avg->th.join();
}

namespace {

const ImVec4 kWarn(1, 0.75f, 0.4f, 1);
const ImU32 kDot = IM_COL32(80, 170, 255, 255), kAvg = IM_COL32(255, 150, 40, 255);

// What an average must have been computed for to be shown as this trace's.
std::string average_key(const Session& s) {
    const auto& m = s.result().model;
    char b[64];
    std::snprintf(b, sizeof b, "%p|", static_cast<const void*>(m.get()));
    std::string k = b + (m ? options_json(s.result().options, m->weights.cfg) : std::string());
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
    if (!s.result().model || !s.trace()) return "no model has run yet";
    const Config& c = s.result().model->weights.cfg;
    if (c.depth == 0) return "the model has no blocks, so there is no attention";
    if (c.channels != 1 && c.channels != 3)
        return "the model takes " + std::to_string(c.channels) + " channels; Fashion-MNIST's gray images convert to 1 or 3";
    if (test_set_file(dir).empty())
        return "no Fashion-MNIST test set at " + dir + " (the Debian package dataset-fashion-mnist installs it)";
    return "";
}

void start_average(Textures& tx, const Session& s, int n) {
    stop_distance_average(tx);
    auto a = std::make_shared<DistanceAverage>();
    a->model = s.result().model;
    a->opt = s.result().options;
    a->key = average_key(s);
    a->opt_text = a->opt.describe();
    a->n = n;
    a->data_dir = default_fashion_mnist_dir();
    Config pc = a->model->weights.cfg;  // the model's preprocessing, with the squash choice in force
    if (s.squash()) pc.pre.squash = *s.squash();
    a->running = true;
    DistanceAverage* p = a.get();
    a->th = std::thread([p, pc] {
        Tensor2 acc;
        int done = 0;
        std::string err;
        try {
            const Dataset d = load_fashion_mnist(p->data_dir, false);
            const int n = std::min(p->n, d.n);
            const Weights& w = p->model->weights;
            // chunks of 64 images: the inputs of a 224 RGB model are 600 KB each
            for (int start = 0; start < n && !p->cancel; start += 64) {
                std::vector<Tensor3> xs;
                for (int i = start; i < std::min(n, start + 64); ++i) xs.push_back(dataset_input(d, i, pc));
                int k = 0;
                Tensor2 m = attn_distance_mean(w, xs, p->opt, [p, start](int i, int) {
                    p->done = start + i;
                    return !p->cancel.load();
                }, &k);
                if (done == 0) acc = m * float(k);
                else acc += m * float(k);
                done += k;
            }
        } catch (const std::exception& e) {
            err = e.what();
        }
        std::lock_guard<std::mutex> lk(p->mu);
        p->finished = true;
        p->cancelled = p->cancel.load();
        p->error = err;
        if (err.empty() && !p->cancelled && done > 0) {
            p->mean = acc / float(done);
            p->images = done;
        }
        p->running = false;
    });
    tx.dist_avg = std::move(a);
}

std::string csv_of(const float* v, size_t n) {
    std::string s;
    char b[32];
    for (size_t i = 0; i < n; ++i) {
        std::snprintf(b, sizeof b, "%s%.9g", i ? "," : "", double(v[i]));
        s += b;
    }
    return s;
}

// A "nice" tick step (1, 2 or 5 x 10^k) giving about `target` steps over `range`.
double nice_step(double range, int target) {
    double raw = range / std::max(1, target), p = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * p >= raw) return m * p;
    return 10 * p;
}

}  // namespace

std::string distance_average_unavailable(const Session& s) { return average_unavailable(s, default_fashion_mnist_dir()); }

void DistanceTick(Session& s, UiState& ui, Textures& tx) {
    DistanceAverage* av = tx.dist_avg.get();
    // a run for another model, options or preprocessing than the trace on screen is cancelled
    if (av && av->running && s.trace() && av->key != average_key(s)) av->cancel = true;
    // --distance-images N: start once the first trace is in (whatever tab is shown)
    if (ui.distance_autostart && s.trace() && !s.busy() && !s.loading()) {
        ui.distance_autostart = false;
        const std::string why = average_unavailable(s, default_fashion_mnist_dir());
        if (why.empty()) start_average(tx, s, std::clamp(ui.distance_images, 1, 10000));
        else s.add_error("Could not average the attention distance", why);
    }
}

void DrawDistance(Session& s, UiState& ui, Textures& tx) {
    const Trace* t = s.trace();
    if (!t || !s.result().model) {
        std::string why = s.has_image() ? "Running the model..." : "No image is loaded, so the model has not run.";
        ImGui::TextDisabled("%s", why.c_str());
        ui.strings["dist.message"] = why;
        return;
    }
    const Weights& w = s.result().model->weights;
    const Config& c = w.cfg;
    const Options& opt = s.result().options;
    if (tx.stale("dist", s.version())) {
        tx.dist_error.clear();
        tx.dist_vals = Array();
        try {
            tx.dist_vals = attn_distance(*t, c);  // the core's numbers for the trace on screen
        } catch (const std::exception& e) {
            tx.dist_error = e.what();
        }
    }
    // An average computed for another model, options or preprocessing is never this trace's:
    // a run in flight for them is cancelled; a finished one is shown as what it was, not drawn.
    const std::string key = average_key(s);
    DistanceAverage* av = tx.dist_avg.get();

    const float S = float(c.image_size), diag = S * std::sqrt(2.f);
    ImGui::PushTextWrapPos(0);
    ImGui::TextWrapped("Mean attention distance: for each layer and head, how far (in input pixels) a patch looks, "
                       "on average over the patches: the sum over keys of attention weight x distance between the two "
                       "patch centres (cls row and column left out). Small: the head looks near, like a convolution; "
                       "large: it looks across the image (ViT paper Fig. 7 right). %dx%d input, %dx%d patches, %d "
                       "layers x %d heads.", c.image_size, c.image_size, c.patch, c.patch, c.depth, c.heads);
    ImGui::PopTextWrapPos();
    const Array& v = tx.dist_vals;
    if (v.dimension() != 2 || v.size() == 0) {
        std::string why = c.depth == 0 ? "the model has no blocks, so there is no attention to measure"
                                       : "no attention distance for this trace: " + tx.dist_error;
        ImGui::TextColored(kWarn, "%s", why.c_str());
        ui.strings["dist.message"] = why;
        return;
    }
    const int L = int(v.shape(0)), H = int(v.shape(1));

    // ---- the average: N, run / cancel, progress
    const std::string dir = default_fashion_mnist_dir();
    const std::string unavailable = average_unavailable(s, dir);
    ImGui::AlignTextToFramePadding();
    ImGui::BeginDisabled(!unavailable.empty() || (av && av->running));
    char btn[64];
    std::snprintf(btn, sizeof btn, "Average over %d test images", ui.distance_images);
    if (ImGui::Button(btn)) start_average(tx, s, ui.distance_images), av = tx.dist_avg.get();
    ImGui::SameLine();
    ImGui::SetNextItemWidth(110);
    if (ImGui::InputInt("N##distn", &ui.distance_images, 10, 100)) ui.distance_images = std::clamp(ui.distance_images, 1, 10000);
    ImGui::EndDisabled();
    ui.numbers["dist.avg.n"] = ui.distance_images;
    std::string avg_state = "none", avg_label;
    if (!unavailable.empty()) {
        ImGui::SameLine();
        ImGui::TextColored(kWarn, "cannot average: %s", unavailable.c_str());
        ui.strings["dist.avg.message"] = "cannot average: " + unavailable;
    }
    bool draw_avg = false;
    Tensor2 avg;
    int avg_images = 0;
    if (av) {
        if (av->running) {
            avg_state = "running";
            ImGui::SameLine();
            char ov[64];
            std::snprintf(ov, sizeof ov, "%d / %d images", av->done.load(), av->n);
            ImGui::SetNextItemWidth(220);
            ImGui::ProgressBar(float(av->done.load()) / float(std::max(1, av->n)), ImVec2(220, 0), ov);
            ImGui::SameLine();
            if (ImGui::Button("Cancel")) av->cancel = true;
        } else {
            std::lock_guard<std::mutex> lk(av->mu);
            if (!av->error.empty()) {
                avg_state = "error";
                std::string m = "the average failed: " + av->error;
                ImGui::TextColored(kWarn, "%s", m.c_str());
                ui.strings["dist.avg.message"] = m;
            } else if (av->cancelled) {
                avg_state = "cancelled";
                std::string m = "average cancelled after " + std::to_string(av->done.load()) + " of " +
                                std::to_string(av->n) + " images: nothing to show (run it again)";
                ImGui::TextDisabled("%s", m.c_str());
                ui.strings["dist.avg.message"] = m;
            } else if (av->key != key) {
                avg_state = "stale";
                std::string m = "the average over " + std::to_string(av->images) + " images was computed for " +
                                av->model->weights.cfg.name + " with " + av->opt_text +
                                ": not the model and options on screen, so it is not drawn (run it again)";
                ImGui::TextColored(kWarn, "%s", m.c_str());
                ui.strings["dist.avg.message"] = m;
            } else if (av->mean.dimension() == 2 && int(av->mean.shape(0)) == L && int(av->mean.shape(1)) == H) {
                avg_state = "done";
                draw_avg = true;
                avg = av->mean;
                avg_images = av->images;
            }
        }
    }
    ui.strings["dist.avg.state"] = avg_state;

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
    const bool hovered = ui.hover && ImGui::IsItemHovered();
    const bool clicked = ui.hover && ImGui::IsItemClicked(ImGuiMouseButton_Left);
    const Rect clip{o.x, o.y, pw, ph};
    const Rect axes{o.x + left, o.y + top, pw - left - right, ph - top - bottom};
    ui.rects["dist.plot"] = axes;
    ui.numbers["dist.ymax"] = diag;
    ui.numbers["dist.layers"] = L;
    ui.numbers["dist.heads"] = H;
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
        DrawLabel(dl, ui, "dist.y", ImVec2(axes.x - 6 - sz.x, py - th / 2), tc, b, clip);
    }
    {
        char b[128];
        std::snprintf(b, sizeof b, "%.1f", diag);
        ImVec2 sz = ImGui::CalcTextSize(b);
        dl->AddLine(ImVec2(axes.x, axes.y), ImVec2(axes.x + axes.w, axes.y), IM_COL32(140, 140, 150, 255));
        DrawLabel(dl, ui, "dist.y", ImVec2(axes.x - 6 - sz.x, axes.y - th / 2), tc, b, clip);
        std::snprintf(b, sizeof b, "mean attention distance (pixels); top = the image diagonal, %.1f px", diag);
        DrawLabel(dl, ui, "dist.title", ImVec2(axes.x, o.y), tc, b, clip);
    }
    // the reference: a head that spreads its attention evenly over the patches
    float uniform = -1;
    try {
        uniform = uniform_attn_distance(c);
    } catch (const std::exception&) {
    }
    if (uniform >= 0) {
        const float py = ypix(uniform);
        for (float xx = axes.x; xx < axes.x + axes.w; xx += 10)
            dl->AddLine(ImVec2(xx, py), ImVec2(std::min(xx + 5, axes.x + axes.w), py), IM_COL32(200, 200, 120, 255), 1.5f);
        ui.numbers["dist.uniform"] = uniform;
    }
    // x: layers
    for (int l = 0; l < L; ++l) {
        if (l) dl->AddLine(ImVec2(axes.x + l * col_w, axes.y), ImVec2(axes.x + l * col_w, axes.y + axes.h), IM_COL32(45, 45, 52, 255));
        std::string b = std::to_string(l);
        ImVec2 sz = ImGui::CalcTextSize(b.c_str());
        if (L <= 24 || l % 2 == 0)
            DrawLabel(dl, ui, "dist.x", ImVec2(axes.x + (l + 0.5f) * col_w - sz.x / 2, axes.y + axes.h + 3), tc, b, clip);
    }
    {
        const char* xl = "layer (network depth)";
        ImVec2 sz = ImGui::CalcTextSize(xl);
        DrawLabel(dl, ui, "dist.xlabel", ImVec2(axes.x + axes.w / 2 - sz.x / 2, axes.y + axes.h + 3 + line), tc, xl, clip);
    }
    // the selection: the current stage's layer and the selected head
    int sel_layer = -1;
    if (const TraceEntry* e = current_entry(s, ui)) sel_layer = e->layer;
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
                ui.rects["dist.avgdot." + std::to_string(l) + "." + std::to_string(h)] = Rect{x - r - 2, ya - r - 2, 2 * r + 4, 2 * r + 4};
                float da = std::hypot(mp.x - x, mp.y - ya);
                if (da < best_d) { best_d = da; best_l = l; best_h = h; best_avg = true; }
            }
    for (int l = 0; l < L; ++l)
        for (int h = 0; h < H; ++h) {
            const float x = xpix(l, h);
            const float y = ypix(v.data()[size_t(l) * H + h]);
            dl->AddCircleFilled(ImVec2(x, y), r, kDot, 12);
            ui.rects["dist.dot." + std::to_string(l) + "." + std::to_string(h)] = Rect{x - r, y - r, 2 * r, 2 * r};
            if (l == sel_layer && h == sel_head) dl->AddCircle(ImVec2(x, y), r + 3.5f, IM_COL32(255, 255, 255, 255), 16, 2);
            float d = std::hypot(mp.x - x, mp.y - y);
            if (d <= best_d) { best_d = d; best_l = l; best_h = h; best_avg = false; }
        }
    if (hovered && best_l >= 0) {
        const double val = best_avg ? double(avg(best_l, best_h)) : double(v.data()[size_t(best_l) * H + best_h]);
        if (best_avg)
            ImGui::SetTooltip("layer %d, head %d: %.2f px (mean over %d test images)\nclick: show this layer and head",
                              best_l, best_h, val, avg_images);
        else
            ImGui::SetTooltip("layer %d, head %d: %.2f px (this image)\nclick: show this layer and head", best_l, best_h, val);
        ui.strings["dist.hover"] = "layer " + std::to_string(best_l) + ", head " + std::to_string(best_h);
    }
    if (clicked && best_l >= 0) {
        // the app's selection: the head, the layer's attention pattern, the overlay's layer and head
        ui.head = best_h;
        ui.overlay_layer = best_l;
        ui.overlay_head = best_h;
        int k = t->index_of("blocks." + std::to_string(best_l) + ".attn.pattern");
        if (k >= 0) ui.stage = k;
        ui.status = "selected layer " + std::to_string(best_l) + ", head " + std::to_string(best_h) +
                    ": the Stage tab shows its attention pattern";
    }
    // ---- legend: what each colour is, with the options that produced it
    ImGui::SetCursorScreenPos(ImVec2(o.x, o.y + ph + 4));
    ImVec2 lp = ImGui::GetCursorScreenPos();
    dl->AddCircleFilled(ImVec2(lp.x + 8, lp.y + th / 2), r, kDot, 12);
    ImGui::Dummy(ImVec2(18, th));
    ImGui::SameLine();
    std::string this_label = "this image (" + std::filesystem::path(s.image_path()).filename().string() + "), " +
                             opt.describe();
    ImGui::TextUnformatted(this_label.c_str());
    ui.strings["dist.label"] = this_label;
    if (draw_avg) {
        lp = ImGui::GetCursorScreenPos();
        dl->AddCircle(ImVec2(lp.x + 8, lp.y + th / 2), r + 2.f, kAvg, 16, 2.f);
        ImGui::Dummy(ImVec2(18, th));
        ImGui::SameLine();
        avg_label = "mean over " + std::to_string(avg_images) + " Fashion-MNIST test images (the first " +
                    std::to_string(avg_images) + "), " + av->opt_text;
        ImGui::TextUnformatted(avg_label.c_str());
        ui.strings["dist.avg.label"] = avg_label;
        ui.strings["dist.avg.values"] = csv_of(avg.data(), avg.size());
        ui.numbers["dist.avg.images"] = avg_images;
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
                      "between two patch centres)", c.patches(), uniform);
        ImGui::TextUnformatted(b);
        ui.strings["dist.uniform.label"] = b;
    }
    if (std::string note = weights_note(s); !note.empty())
        ImGui::TextColored(kWarn, "%s: these distances come from untrained attention", note.c_str());
    ui.strings["dist.values"] = csv_of(v.data(), v.size());
    // the numbers behind the view, for "Numbers .npy/.csv"
    tx.tab_numbers.push_back({"attn_distance", v});
    if (draw_avg) tx.tab_numbers.push_back({"attn_distance_avg", Array(avg)});
}

void DrawPatchPictures(Session& s, UiState& ui, Textures& tx) {
    const Trace* t = s.trace();
    if (!t || !s.result().model) {
        std::string why = s.has_image() ? "Running the model..." : "No image is loaded, so there are no patches.";
        ImGui::TextDisabled("%s", why.c_str());
        ui.strings["patches.message"] = why;
        return;
    }
    const Config& c = s.shown_config();
    const int C = c.channels, P = c.patch, S = c.image_size, G = c.grid(), N = c.patches(), CPP = C * P * P;
    const Array* in = t->find("input");
    const Array* pa = t->find("patches");
    std::string why;
    if (!in || !pa) why = std::string("the trace has no ") + (!in ? "input" : "patches") + " stage";
    else if (in->dimension() != 3 || int(in->shape(0)) != C || int(in->shape(1)) != S || int(in->shape(2)) != S)
        why = "the trace's input has shape " + shape_str_of(*in) + ", not the model's (C, S, S)";
    else if (pa->dimension() != 2 || int(pa->shape(0)) != N || int(pa->shape(1)) != CPP)
        why = "the trace's patches has shape " + shape_str_of(*pa) + ", not (" + std::to_string(N) + ", " +
              std::to_string(CPP) + ")";
    else if (C != 1 && C != 3)
        why = "the model takes " + std::to_string(C) + " channels: only gray and RGB tiles can be drawn";
    if (!why.empty()) {
        ImGui::TextColored(kWarn, "%s", why.c_str());
        ui.strings["patches.message"] = why;
        return;
    }
    const float* x = in->data();
    const float* rows = pa->data();
    auto denorm = [&](float val, int ch) {
        const float m = ch < int(c.pre.mean.size()) ? c.pre.mean[size_t(ch)] : 0.f;
        const float sd = ch < int(c.pre.std.size()) ? c.pre.std[size_t(ch)] : 1.f;
        return std::clamp(val * sd + m, 0.f, 1.f);
    };
    if (tx.stale("patches", s.version())) {
        // the model input as the model sees it (denormalized for display), and the same layout
        // rebuilt from the patches rows: tile n's texel (y, x, ch) is row n's entry ch*P*P + y*P + x
        std::vector<unsigned char> img(size_t(S) * S * 4, 255), fromrows(size_t(S) * S * 4, 255);
        tx.patch_input = Array::from_shape({size_t(C), size_t(S), size_t(S)});
        for (int ch = 0; ch < C; ++ch)
            for (int i = 0; i < S * S; ++i) tx.patch_input.data()[size_t(ch) * S * S + i] = denorm(x[size_t(ch) * S * S + i], ch);
        for (int py = 0; py < S; ++py)
            for (int px = 0; px < S; ++px)
                for (int k = 0; k < 3; ++k) {
                    const int ch = C == 3 ? k : 0;
                    img[(size_t(py) * S + px) * 4 + k] = (unsigned char)std::lround(255.f * tx.patch_input.data()[(size_t(ch) * S + py) * S + px]);
                    const int n = (py / P) * G + px / P, yy = py % P, xx = px % P;
                    if (py < G * P && px < G * P)
                        fromrows[(size_t(py) * S + px) * 4 + k] =
                            (unsigned char)std::lround(255.f * denorm(rows[size_t(n) * CPP + size_t(ch) * P * P + yy * P + xx], ch));
                }
        tx.patch_image.upload_rgba(img.data(), S, S);
        tx.patch_rows_img.upload_rgba(fromrows.data(), S, S);
        // the rows as strips in the tiles' colours: entry k is channel k / (P*P) as the model reads it
        // (gray, or that channel's colour alone for RGB)
        std::vector<unsigned char> strip(size_t(N) * CPP * 4, 255);
        for (int n = 0; n < N; ++n)
            for (int k = 0; k < CPP; ++k) {
                const int ch = k / (P * P);
                const auto u = (unsigned char)std::lround(255.f * denorm(rows[size_t(n) * CPP + k], ch));
                unsigned char* q = &strip[(size_t(n) * CPP + k) * 4];
                for (int j = 0; j < 3; ++j) q[j] = C == 1 || j == ch ? u : 0;
            }
        tx.patch_rows.upload_rgba(strip.data(), CPP, N);
    }
    // how many rows are their tile unfolded (channel-major, then row-major inside the tile)
    int equal = 0;
    for (int n = 0; n < N; ++n) {
        bool same = true;
        const int gy = n / G, gx = n % G;
        for (int ch = 0; ch < C && same; ++ch)
            for (int yy = 0; yy < P && same; ++yy)
                for (int xx = 0; xx < P && same; ++xx)
                    same = rows[size_t(n) * CPP + size_t(ch) * P * P + yy * P + xx] ==
                           x[(size_t(ch) * S + size_t(gy * P + yy)) * S + size_t(gx * P + xx)];
        equal += same;
    }
    ui.numbers["patches.rows_equal_tiles"] = equal;
    const bool bug = s.result().options.bug_reshape_patches;
    ImGui::PushTextWrapPos(0);
    ImGui::TextWrapped("Patches as pictures: the %dx%d model input cut into %d tiles of %dx%d (%d x %d, numbered in "
                       "row-major order), then the sequence the transformer reads: row n of `patches` (%d values: %s) "
                       "beside the tile it holds. Cutting tiles and flattening them is what a Conv2d with kernel = "
                       "stride = %d does to each position.", S, S, N, P, P, G, G, CPP,
                       C == 3 ? "R, then G, then B, each P x P row by row: channel-major" : "the tile's pixel rows, one after another",
                       P);
    ImGui::PopTextWrapPos();
    float lo = rows[0], hi = rows[0];
    for (size_t i = 0; i < pa->size(); ++i) { lo = std::min(lo, rows[i]); hi = std::max(hi, rows[i]); }
    const float vmax = std::max({std::fabs(lo), std::fabs(hi), 1e-6f});
    ui.numbers["patches.vmax"] = vmax;
    if (equal == N)
        ImGui::TextColored(ImVec4(0.5f, 0.9f, 0.5f, 1), "All %d rows are their tiles unfolded (the tile read back from each row is the image's tile).", N);
    else {
        char b[320];
        std::snprintf(b, sizeof b, "%s%d of %d rows are their tile (framed red: the others hold other pixels)%s.",
                      bug ? "BUG on (reshape patches): only " : "Only ", equal, N,
                      bug ? ": a plain reshape takes each run of C*P*P values of the (C, H, W) array, i.e. whole pixel rows" : "");
        ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1, 0.4f, 0.4f, 1));
        ImGui::PushTextWrapPos(0);
        ImGui::TextWrapped("%s", b);
        ImGui::PopTextWrapPos();
        ImGui::PopStyleColor();
        ui.strings["patches.mismatch"] = b;
    }
    ImVec2 avail = ImGui::GetContentRegionAvail();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    // ---- the grid, with gaps
    const float side = std::max(96.f, std::min(avail.x * 0.45f, avail.y - 8));
    const float gap = std::max(2.f, side * 0.012f);
    const float tile = (side - gap * float(G - 1)) / float(G);
    ImGui::BeginGroup();
    ImVec2 g0 = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("patchgrid", ImVec2(side, side));
    const bool hovered = ui.hover && ImGui::IsItemHovered(), clicked = ui.hover && ImGui::IsItemClicked(ImGuiMouseButton_Left);
    const Rect gclip{g0.x, g0.y, side, side};
    ui.rects["patches.grid"] = gclip;
    ui.numbers["patches.tile"] = tile;
    ui.numbers["patches.gap"] = gap;
    ui.numbers["patches.grid_n"] = G;
    const float th = ImGui::GetTextLineHeight();
    const float numw = ImGui::CalcTextSize(std::to_string(N - 1).c_str()).x;
    const bool all_numbers = numw + 2 <= tile && th <= tile;
    for (int n = 0; n < N; ++n) {
        const int gy = n / G, gx = n % G;
        ImVec2 a(g0.x + gx * (tile + gap), g0.y + gy * (tile + gap)), b(a.x + tile, a.y + tile);
        dl->AddImage(tx.patch_image.id(), a, b, ImVec2(float(gx * P) / S, float(gy * P) / S),
                     ImVec2(float(gx * P + P) / S, float(gy * P + P) / S));
        if (all_numbers || gx == 0) {
            std::string lbl = std::to_string(n);
            ImVec2 sz = ImGui::CalcTextSize(lbl.c_str());
            if (sz.x + 2 <= tile + gap && sz.y <= tile) {
                dl->AddRectFilled(ImVec2(a.x, a.y), ImVec2(a.x + sz.x + 2, a.y + sz.y), IM_COL32(0, 0, 0, 150));
                DrawLabel(dl, ui, "patches.grid", ImVec2(a.x + 1, a.y), IM_COL32(255, 220, 90, 255), lbl, gclip);
            }
        }
    }
    const int sel = ui.patch >= 0 && ui.patch < N ? ui.patch : -1;
    if (sel >= 0) {
        ImVec2 a(g0.x + (sel % G) * (tile + gap), g0.y + (sel / G) * (tile + gap));
        dl->AddRect(ImVec2(a.x - 1, a.y - 1), ImVec2(a.x + tile + 1, a.y + tile + 1), IM_COL32(0, 230, 255, 255), 0, 0, 2);
    }
    if (hovered || clicked) {
        ImVec2 mp = ImGui::GetIO().MousePos;
        int gx = std::clamp(int((mp.x - g0.x) / (tile + gap)), 0, G - 1), gy = std::clamp(int((mp.y - g0.y) / (tile + gap)), 0, G - 1);
        if (hovered) ImGui::SetTooltip("patch %d (row %d, col %d): pixels [%d:%d, %d:%d] of the input; row %d of patches",
                                       gy * G + gx, gy, gx, gy * P, gy * P + P, gx * P, gx * P + P, gy * G + gx);
        if (clicked) ui.patch = gy * G + gx;
    }
    if (!all_numbers) ImGui::TextDisabled("tiles too small to number: the first column is numbered; hover a tile");
    ImGui::EndGroup();
    ImGui::SameLine();
    ImGui::BeginGroup();
    // ---- the sequence: tile n (read back from row n) beside row n as a strip
    ImDrawList* hdl = ImGui::GetWindowDrawList();
    const float rh = std::clamp(tile, 22.f, 40.f);
    const float stripx = rh + 8 + numw + 10;
    const float sw = std::max(60.f, ImGui::GetContentRegionAvail().x - stripx - 12 - ImGui::GetStyle().ScrollbarSize);
    {
        ImVec2 h0 = ImGui::GetCursorScreenPos();
        std::string cap = "tile n, from row n | n | row n: " + std::to_string(CPP) + " values" +
                          (C == 3 ? ", in their channel's colour" : ", as the pixels they are");
        (void)h0;
        ImGui::PushTextWrapPos(0);
        ImGui::TextWrapped("%s", cap.c_str());
        ImGui::PopTextWrapPos();
        if (C == 3) {  // the channel blocks of a row
            ImVec2 h1 = ImGui::GetCursorScreenPos();
            const char* nm[] = {"R: entries 0..", "G: entries ", "B: entries "};
            for (int ch = 0; ch < 3; ++ch) {
                std::string lbl = std::string(nm[ch]) + (ch ? std::to_string(ch * P * P) + ".." : "") + std::to_string((ch + 1) * P * P - 1);
                if (ImGui::CalcTextSize(lbl.c_str()).x > sw / 3.f - 8) lbl = std::string(1, "RGB"[ch]);
                DrawLabel(hdl, ui, "patches.channels", ImVec2(h1.x + stripx + sw * ch / 3.f + 3, h1.y),
                          ImGui::GetColorU32(ImGuiCol_Text), lbl, Rect{h1.x, h1.y, stripx + sw + 4, th});
            }
            ImGui::Dummy(ImVec2(10, th));
        }
    }
    ImGui::BeginChild("patchseq", ImVec2(0, 0), false);
    // a newly selected patch scrolls its row into view
    if (tx.stale("patches.scroll", uint64_t(int64_t(sel) + 1)) && sel >= 0)
        ImGui::SetScrollY(float(sel) * (rh + ImGui::GetStyle().ItemSpacing.y));
    ImGuiListClipper clip;
    clip.Begin(N, rh + ImGui::GetStyle().ItemSpacing.y);
    const Rect cclip{ImGui::GetWindowPos().x, ImGui::GetWindowPos().y, ImGui::GetWindowSize().x, ImGui::GetWindowSize().y};
    int first_shown = -1;
    while (clip.Step())
        for (int n = clip.DisplayStart; n < clip.DisplayEnd; ++n) {
            if (first_shown < 0) first_shown = n;
            ImVec2 p = ImGui::GetCursorScreenPos();
            ImGui::Dummy(ImVec2(stripx + sw, rh));
            const int gy = n / G, gx = n % G;
            ImDrawList* cdl = ImGui::GetWindowDrawList();
            cdl->AddImage(tx.patch_rows_img.id(), p, ImVec2(p.x + rh, p.y + rh), ImVec2(float(gx * P) / S, float(gy * P) / S),
                          ImVec2(float(gx * P + P) / S, float(gy * P + P) / S));
            const bool same_tile = [&] {
                for (int ch = 0; ch < C; ++ch)
                    for (int yy = 0; yy < P; ++yy)
                        for (int xx = 0; xx < P; ++xx)
                            if (rows[size_t(n) * CPP + size_t(ch) * P * P + yy * P + xx] !=
                                x[(size_t(ch) * S + size_t(gy * P + yy)) * S + size_t(gx * P + xx)])
                                return false;
                return true;
            }();
            if (!same_tile) cdl->AddRect(p, ImVec2(p.x + rh, p.y + rh), IM_COL32(255, 70, 70, 255), 0, 0, 2);
            if (n == sel) cdl->AddRect(ImVec2(p.x - 1, p.y - 1), ImVec2(p.x + rh + 1, p.y + rh + 1), IM_COL32(0, 230, 255, 255), 0, 0, 2);
            std::string lbl = std::to_string(n);
            const ImVec2 lp(p.x + rh + 6, p.y + (rh - th) / 2);
            if (lp.y >= cclip.y && lp.y + th <= cclip.y + cclip.h)  // a row cut by the scroll edge: drawn, not recorded
                DrawLabel(cdl, ui, "patches.seq", lp, ImGui::GetColorU32(ImGuiCol_Text), lbl, cclip);
            else
                cdl->AddText(lp, ImGui::GetColorU32(ImGuiCol_Text), lbl.c_str());
            ImVec2 s0(p.x + stripx, p.y), s1(p.x + stripx + sw, p.y + rh);
            cdl->AddImage(tx.patch_rows.id(), s0, s1, ImVec2(0, float(n) / N), ImVec2(1, float(n + 1) / N));
            // channel boundaries (RGB), and each pixel row of the tile when there is room to see them
            if (sw / float(C * P) >= 12)
                for (int k = 1; k < C * P; ++k)
                    cdl->AddLine(ImVec2(s0.x + sw * k / float(C * P), s0.y), ImVec2(s0.x + sw * k / float(C * P), s1.y),
                                 IM_COL32(70, 110, 200, 200));
            for (int ch = 1; ch < C; ++ch)
                cdl->AddLine(ImVec2(s0.x + sw * ch / float(C), s0.y - 1), ImVec2(s0.x + sw * ch / float(C), s1.y + 1),
                             IM_COL32(255, 255, 255, 255), 2);
            if (ui.hover && ImGui::IsMouseHoveringRect(s0, s1)) {
                const int k = std::clamp(int((ImGui::GetIO().MousePos.x - s0.x) / sw * CPP), 0, CPP - 1);
                const int ch = k / (P * P), yy = k % (P * P) / P, xx = k % P;
                ImGui::SetTooltip("row %d, entry %d = channel %d, pixel (%d, %d) of the tile: %.6g (normalized input)%s", n, k, ch,
                                  yy, xx, double(rows[size_t(n) * CPP + k]),
                                  same_tile ? "" : "\nthis row is not its tile: it holds other pixels of the input");
            }
            ui.rects["patches.seq.tile." + std::to_string(n)] = Rect{p.x, p.y, rh, rh};
            ui.rects["patches.seq.strip." + std::to_string(n)] = Rect{s0.x, s0.y, sw, rh};
        }
    ui.numbers["patches.first_shown"] = first_shown;
    ImGui::EndChild();
    ImGui::EndGroup();
    // the numbers behind the view: the patches matrix and the model input they were cut from
    tx.tab_numbers.push_back({"patches", *pa});
    tx.tab_numbers.push_back({"input", *in});
    tx.tab_numbers.push_back({"input_image", tx.patch_input});
}

}  // namespace vit::app
