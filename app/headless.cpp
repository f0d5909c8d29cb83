#include "headless.h"

#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/io/image.h"
#include "core/teach/teach.h"
#include "tensor_access.h"
#include "views_map.h"
#include "paths.h"
#include "settings.h"

namespace vit::app {

namespace {

// Frames with a settled result: a trace on screen, no run or load in flight, no training.
bool settled(const AppContext& app) {
    return app.s.trace() && !app.s.busy() && !app.s.loading() && !app.train.running() &&
           !app.ui.distance_autostart && !distance_average_running(app.tx);
}

nlohmann::json rect_json(const Rect& r) { return {r.x, r.y, r.w, r.h}; }

class ScreenshotDriver : public Driver {
public:
    explicit ScreenshotDriver(const AppArgs& a) : a_(a), keys_(a.key_codes) {}
    void before_frame(AppContext& app) override {
        // keys sent by --keys go through the GLFW backend's own key callback
        if (app.s.trace() && !keys_.empty() && settled_frames_ >= 2) {
            int k = keys_.front();
            ImGui_ImplGlfw_KeyCallback(app.win, k, 0, down_ ? GLFW_RELEASE : GLFW_PRESS, 0);
            if (down_) keys_.erase(keys_.begin());
            down_ = !down_;
        } else if (a_.click && clicks_ == 0 && keys_.empty() && app.s.trace() && settled_frames_ >= 2) {
            // --click: a press through the GLFW backend's callback; the release follows on the next frame
            ImGui_ImplGlfw_MouseButtonCallback(app.win, GLFW_MOUSE_BUTTON_LEFT, GLFW_PRESS, 0);
            clicks_ = 1;
        } else if (clicks_ > 0) {
            ++clicks_;
        }
    }
    std::optional<int> after_render(AppContext& app, int W, int H) override {
        if (settled(app) || (!app.s.has_image() && !app.s.busy() && !app.s.loading())) ++settled_frames_;
        if (settled_frames_ < 3 || !keys_.empty() || (a_.click && clicks_ < 4)) return std::nullopt;
        if (app.s.loading() || app.s.busy()) return std::nullopt;  // a click or key started a load or run: its result
        if (!exports_requested_) {
            // exports requested on the command line go through the same path as the buttons (next frame)
            app.ui.request_view_png = a_.export_view;
            app.ui.request_npy = a_.export_npy;
            app.ui.request_npz = a_.export_npz;
            exports_requested_ = true;
            return std::nullopt;
        }
        int rc = 0;
        auto px = read_pixels(0, 0, W, H, H);
        try {
            write_png(a_.screenshot, px.data(), W, H, 3);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "vitscope: %s\n", e.what());
            rc = 1;
        }
        if (!a_.layout_out.empty()) write_layout(a_.layout_out, app, W, H);
        return rc;
    }
private:
    const AppArgs& a_;
    std::vector<int> keys_;
    bool down_ = false, exports_requested_ = false;
    int settled_frames_ = 0, clicks_ = 0;  // --click: frames since the press
};

class BenchDriver : public Driver {
public:
    explicit BenchDriver(const AppArgs& a) : a_(a) {}
    double poll_wait_ms() const override { return a_.bench_toggle ? 1e6 : 50.0; }
    void before_poll(AppContext& app) override {
        // a frame is the whole loop iteration, swap included (GL work is finished at the swap)
        auto now = std::chrono::steady_clock::now();
        if (timing_) ms_.push_back(std::chrono::duration<double, std::milli>(now - t0_).count());
        t0_ = now;
        if (a_.bench_toggle && app.s.trace()) {
            Options t = app.s.options();
            t.affine = !t.affine;
            app.s.set_options(t);
        }
    }
    std::optional<int> after_render(AppContext& app, int, int) override {
        if (settled(app)) ++settled_frames_;
        timing_ = settled_frames_ > 2;
        if (int(ms_.size()) < a_.bench_frames) return std::nullopt;
        std::sort(ms_.begin(), ms_.end());
        double sum = 0;
        for (double v : ms_) sum += v;
        std::printf("frames model=%s toggle=%d n=%zu mean_ms=%.2f median_ms=%.2f p95_ms=%.2f\n",
                    app.s.config().name.c_str(), int(a_.bench_toggle), ms_.size(), sum / double(ms_.size()),
                    ms_[ms_.size() / 2], ms_[size_t(double(ms_.size()) * 0.95)]);
        return 0;
    }
private:
    const AppArgs& a_;
    std::chrono::steady_clock::time_point t0_;
    std::vector<double> ms_;
    int settled_frames_ = 0;
    bool timing_ = false;
};

// The state being drawn, for the crash handler (a segfault names the state it happened in).
char g_sweep_state[512] = "";
void on_crash(int sig) {
    const char* m1 = "vitscope --sweep: crashed (signal) while drawing: ";
    ssize_t r = ::write(2, m1, std::strlen(m1));
    r = ::write(2, g_sweep_state, std::strlen(g_sweep_state));
    r = ::write(2, "\n", 1);
    (void)r;
    std::signal(sig, SIG_DFL);
    std::raise(sig);
}

const char* const kCancelledState = "distance, the cancelled average is said so";

bool overlaps(const Rect& a, const Rect& b) {
    const float e = 0.5f;  // touching is fine
    return a.x + e < b.x + b.w && b.x + e < a.x + a.w && a.y + e < b.y + b.h && b.y + e < a.y + a.h;
}
bool inside(const Rect& a, const Rect& clip) {
    const float e = 0.5f;
    return a.x >= clip.x - e && a.y >= clip.y - e && a.x + a.w <= clip.x + clip.w + e && a.y + a.h <= clip.y + clip.h + e;
}

class SweepDriver : public Driver {
public:
    explicit SweepDriver(const AppArgs& a) : a_(a) {
        std::signal(SIGSEGV, on_crash);
        std::signal(SIGABRT, on_crash);
        std::signal(SIGFPE, on_crash);
        t0_ = std::chrono::steady_clock::now();
    }
    double poll_wait_ms() const override { return 1e6; }  // every state is drawn on its own result
    void before_poll(AppContext& app) override {
        if (states_.empty() && app.s.trace() && !app.s.busy()) build(app);
        if (states_.empty()) return;
        if (frame_in_state_ == 0 && next_ < states_.size()) {
            std::snprintf(g_sweep_state, sizeof g_sweep_state, "%s: %s", app.s.model_spec().c_str(), states_[next_].desc.c_str());
            states_[next_].apply(app);
        }
    }
    std::optional<int> after_render(AppContext& app, int, int) override {
        if (states_.empty()) {
            if (!app.s.busy() && !app.s.loading() && !app.s.trace() && ++idle_ > 3) {
                std::fprintf(stderr, "vitscope --sweep: no trace to sweep (%s)\n",
                             app.s.has_image() ? "the model did not run" : "no image");
                return 1;
            }
            return std::nullopt;
        }
        if (app.s.busy() || app.s.loading() || app.ui.distance_autostart || distance_average_running(app.tx))
            return std::nullopt;  // wait for the state's result (and the Distance tab's average)
        // a tab chosen this frame shows from the next one: check what is drawn on the state's last frame
        if (frame_in_state_ == 1) check(app);
        else check_errors(app);
        ++frames_;
        if (++frame_in_state_ >= 2) { frame_in_state_ = 0; ++next_; }
        if (next_ < states_.size()) return std::nullopt;
        double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
        std::printf("sweep model=%s states=%zu frames=%d failures=%zu seconds=%.1f\n", app.s.model_spec().c_str(),
                    states_.size(), frames_, failures_.size(), sec);
        for (size_t i = 0; i < failures_.size() && i < 40; ++i) std::printf("FAIL %s\n", failures_[i].c_str());
        if (failures_.size() > 40) std::printf("... and %zu more\n", failures_.size() - 40);
        return failures_.empty() ? 0 : 1;
    }
    void frame_failed(AppContext& app, const std::string& what) override {
        fail(app, "exception while drawing: " + what);
    }

private:
    struct State {
        std::string desc;
        std::function<void(AppContext&)> apply;
    };

    void fail(AppContext& app, const std::string& what) {
        std::string where = next_ < states_.size() ? states_[next_].desc : "?";
        (void)app;
        failures_.push_back("[" + where + "] " + what);
    }

    void check_errors(AppContext& app) {
        for (auto& e : app.s.errors()) fail(app, "error in the window: " + e.title + ": " + e.detail.substr(0, 200));
        app.s.dismiss_errors();
    }

    void check(AppContext& app) {
        UiState& ui = app.ui;
        Session& s = app.s;
        check_errors(app);
        if (ui.tab == Tab::Stage && s.trace()) {
            bool showing_grad = ui.numbers.count("stage.showing_grad") && ui.numbers["stage.showing_grad"] != 0;
            bool drew = ui.rects.count("stage") != 0;
            bool said = ui.strings.count("stage.message") && !ui.strings["stage.message"].empty();
            if (ui.show_grad && !showing_grad && !said) fail(app, "gradient view shows nothing and does not say why");
            if (!drew && !said) fail(app, "stage view drew no heatmap and gave no reason");
            if (drew) {
                double rows = ui.numbers["stage.rows"], cols = ui.numbers["stage.cols"];
                double cw = ui.numbers["stage.cell_w"], ch = ui.numbers["stage.cell_h"];
                if (rows > 1 && cols > 1 && std::abs(cw - ch) > 0.01)
                    fail(app, "heatmap cells are not square: " + std::to_string(cw) + " x " + std::to_string(ch));
            }
        }
        if (s.trace() && ui.overlay == Overlay::Query && s.shown_config().depth > 0) {
            const int N = s.shown_config().patches();
            bool in_range = ui.query >= 0 && ui.query <= N;
            if (in_range && std::count(ui.strings["overlay.values"].begin(), ui.strings["overlay.values"].end(), ',') != N - 1)
                fail(app, "query overlay for token " + std::to_string(ui.query) + " shows no row of " + std::to_string(N) + " values");
            if (!in_range && ui.strings["overlay.message"].empty())
                fail(app, "query token " + std::to_string(ui.query) + " is out of range and the image panel does not say so");
        }
        if (s.trace() && ui.tab == Tab::LogitLens && !ui.rects.count("lens") &&
            (!ui.strings.count("lens.message") || ui.strings["lens.message"].empty()))
            fail(app, "the logit lens tab drew no chart and gave no reason");
        if (s.trace() && ui.tab == Tab::Positions && !ui.rects.count("pos.grid") &&
            (!ui.strings.count("pos.message") || ui.strings["pos.message"].empty()))
            fail(app, "the positions tab drew no maps and gave no reason");
        if (s.trace() && ui.tab == Tab::Filters && !ui.rects.count("filters.0") &&
            (!ui.strings.count("filters.message") || ui.strings["filters.message"].empty()))
            fail(app, "the filters tab drew no filter and gave no reason");
        if (s.trace() && ui.tab == Tab::Distance && !ui.rects.count("dist.plot") &&
            (!ui.strings.count("dist.message") || ui.strings["dist.message"].empty()))
            fail(app, "the distance tab drew no plot and gave no reason");
        if (s.trace() && ui.tab == Tab::Distance && ui.rects.count("dist.plot")) {
            const int L = int(ui.numbers["dist.layers"]), H = int(ui.numbers["dist.heads"]);
            const std::string& st = ui.strings["dist.avg.state"];
            if (st == "done" && !ui.rects.count("dist.avgdot." + std::to_string(L - 1) + "." + std::to_string(H - 1)))
                fail(app, "the distance average is done but not drawn");
            if ((st == "stale" || st == "cancelled" || st == "error") && ui.strings["dist.avg.message"].empty())
                fail(app, "the distance average is " + st + " and the tab does not say so");
            if (st != "done" && ui.rects.count("dist.avgdot.0.0")) fail(app, "an average that is " + st + " is drawn");
            // every dot where its number says, on the axis 0 .. diagonal
            std::vector<double> vals;
            std::stringstream ss(ui.strings["dist.values"]);
            for (std::string tok; std::getline(ss, tok, ',');) vals.push_back(std::stod(tok));
            const Rect ax = ui.rects["dist.plot"];
            if (int(vals.size()) != L * H) fail(app, "the distance tab lists " + std::to_string(vals.size()) + " values for " + std::to_string(L * H) + " dots");
            else
                for (int k = 0; k < L * H; ++k) {
                    const Rect d = ui.rects["dist.dot." + std::to_string(k / H) + "." + std::to_string(k % H)];
                    const double want = ax.y + ax.h * (1 - vals[size_t(k)] / ui.numbers["dist.ymax"]);
                    if (std::abs(d.y + d.h / 2 - want) > 0.5) { fail(app, "a distance dot is not at its value"); break; }
                }
        }
        if (next_ < states_.size() && states_[next_].desc == kCancelledState &&
            (ui.strings["dist.avg.state"] != "cancelled" || ui.strings["dist.avg.message"].find("cancelled") == std::string::npos))
            fail(app, "an average cancelled by an option change is not said cancelled (" + ui.strings["dist.avg.state"] + ")");
        if (s.trace() && ui.tab == Tab::Patches && !ui.rects.count("patches.grid") &&
            (!ui.strings.count("patches.message") || ui.strings["patches.message"].empty()))
            fail(app, "the patches tab drew no tiles and gave no reason");
        if (s.trace() && ui.tab == Tab::Patches && ui.rects.count("patches.grid")) {
            const int N = s.shown_config().patches();
            const bool bug = s.result().options.bug_reshape_patches;
            if (!bug && ui.numbers["patches.rows_equal_tiles"] != N)
                fail(app, "without the reshape bug, only " + std::to_string(int(ui.numbers["patches.rows_equal_tiles"])) +
                              " of " + std::to_string(N) + " patches rows are their tiles");
        }
        // the math of one cell: the panel's result is the trace's value, or it says why there is none
        if (s.trace() && ui.tab == Tab::Stage && ui.cell_r >= 0 && ui.cell_c >= 0) {
            const TraceEntry* e = current_entry(s, ui);
            bool has_math = ui.numbers.count("cellmath.ok") != 0;
            bool said = ui.strings.count("cellmath.message") && !ui.strings["cellmath.message"].empty();
            if (!has_math && !said) fail(app, "a cell is selected and the math panel shows nothing and does not say why");
            if (has_math && ui.numbers["cellmath.ok"] != 1)
                fail(app, "math panel's result " + std::to_string(ui.numbers["cellmath.value"]) + " is not the trace's " +
                              std::to_string(ui.numbers["cellmath.recorded"]));
            if (e && !ui.show_grad && cell_math_supported(e->name) && !has_math) {
                Slice2D sl = slice2d(e->tensor, ui.head);
                if (ui.cell_r < sl.rows && ui.cell_c < sl.cols)
                    fail(app, "no math for an in-range cell of " + e->name + ": " + ui.strings["cellmath.message"]);
            }
        }
        check_map(app);
        if (!s.trace() || ui.strings["status"].find(s.result().grads ? "forward+backward" : "forward only") == std::string::npos)
            fail(app, "status bar does not say what was computed: " + ui.strings["status"]);
        // labels: none clipped, none overlapping another of its panel
        const auto& t = ui.texts;
        for (size_t i = 0; i < t.size(); ++i) {
            if (!inside(t[i].box, t[i].clip)) {
                fail(app, "label '" + t[i].text + "' (" + t[i].group + ") leaves its panel");
                break;
            }
            std::string gi = t[i].group.substr(0, t[i].group.find('.'));
            for (size_t j = i + 1; j < t.size(); ++j) {
                if (t[j].group.substr(0, t[j].group.find('.')) != gi) continue;
                if (overlaps(t[i].box, t[j].box)) {
                    fail(app, "labels '" + t[i].text + "' and '" + t[j].text + "' overlap (" + t[i].group + ")");
                    return;
                }
            }
        }
    }

    // The map and the tour (views_map.cpp): every box's shape is its stage's tensor's in the trace, the
    // current stage's box is highlighted, the tour's stage is the one shown and its text the table's.
    void check_map(AppContext& app) {
        UiState& ui = app.ui;
        Session& s = app.s;
        const Trace* t = s.trace();
        if (!t) return;
        if (ui.tab == Tab::Map) {
            if (!ui.rects.count("map")) fail(app, "the map tab drew no map");
            if (ui.numbers["map.current"] < 0) fail(app, "the map highlights no box for the current stage");
            ModelMap m = build_model_map(s, int(ui.numbers["map.layer"]));
            for (const MapBox& b : m.boxes) {
                int i = t->index_of(b.out_stage);
                std::string want = i >= 0 ? shape_text(t->at(size_t(i)).tensor) : "(not in the trace)";
                if (ui.strings["map.shape." + b.out_stage] != want)
                    fail(app, "map arrow after " + b.id + " says " + ui.strings["map.shape." + b.out_stage] + ", the trace's " +
                                  b.out_stage + " is " + want);
                if (!ui.rects.count("map.box." + b.id)) fail(app, "map box " + b.id + " not drawn");
            }
        }
        if (ui.tour_step >= 0 && ui.tour_applied == ui.tour_step) {
            const TraceEntry* e = current_entry(s, ui);
            if (!e || (ui.strings["tour.stage"] != e->name && ui.strings["tour.off"] != e->name))
                fail(app, "the tour is at " + ui.strings["tour.stage"] + " but the app shows " + (e ? e->name : "nothing"));
            else if (ui.strings["tour.what"] != stage_info(e->name, s.shown_config(), s.result().options).what)
                fail(app, "the tour's text for " + e->name + " is not the stage table's explanation");
        }
        for (const char* g : {"strip.dropped", "tour.strip.dropped"})
            if (ui.numbers[g] > 0) fail(app, std::string(g) + ": the map strip left out " + std::to_string(int(ui.numbers[g])) + " boxes");
        const float W = ImGui::GetIO().DisplaySize.x;
        if (!ui.rects.count("status.gemm")) fail(app, "the status bar has no GEMM field");
        else if (ui.rects["status.gemm"].x + ui.rects["status.gemm"].w > W + 0.5f || ui.rects["status.line"].x + ui.rects["status.line"].w > ui.rects["status.gemm"].x)
            fail(app, "the status bar's GEMM field is clipped or overlapped");
    }

    void build(AppContext& app) {
        const Trace& tr = *app.s.trace();
        const Config& c = app.s.shown_config();
        const int T = int(tr.size()), L = c.depth, H = c.heads, N = c.patches();
        std::vector<int> sel;
        if (a_.sweep_stages <= 0 || a_.sweep_stages >= T) for (int i = 0; i < T; ++i) sel.push_back(i);
        else for (int k = 0; k < a_.sweep_stages; ++k) sel.push_back(int((int64_t(k) * (T - 1)) / std::max(1, a_.sweep_stages - 1)));
        auto stage_state = [&](int i, bool grad, Tab tab, const std::string& tag) {
            State st;
            st.desc = tag + " stage#" + std::to_string(i) + " (" + tr.at(size_t(std::min(i, T - 1))).name + ") " +
                      (grad ? "gradient" : "value") + " tab " + tab_name(tab) + " scale " + std::to_string(i % 3) +
                      " head " + std::to_string(i % std::max(1, H)) + (i % 3 == 0 ? " patch " + std::to_string(i % N) : "") +
                      (i % 7 == 0 ? " zoom 3" : "");
            st.apply = [i, grad, tab, H, N](AppContext& a) {
                UiState& ui = a.ui;
                int n = a.s.trace() ? int(a.s.trace()->size()) : 1;
                ui.stage = std::min(i, n - 1);
                ui.show_grad = grad;
                ui.tab = tab;
                ui.scale_mode = ScaleMode(i % 3);
                ui.head = i % std::max(1, H);
                ui.channel = i % 3;
                ui.patch = i % 3 == 0 ? i % std::max(1, N) : -1;
                ui.zoom = i % 7 == 0 ? 3.f : 1.f;
            };
            states_.push_back(std::move(st));
        };
        for (int i : sel)
            for (bool g : {false, true}) stage_state(i, g, Tab::Stage, "stages");
        for (int k = 0; k < kTabs; ++k) {
            if (Tab(k) == Tab::Train) continue;  // drawn below, without starting a training run
            stage_state(sel[sel.size() / 2], false, Tab(k), "tabs");
        }
        states_.push_back({"tabs: Train (form only)", [](AppContext& a) { a.ui.tab = Tab::Train; }});
        for (Overlay ov : {Overlay::None, Overlay::Cls, Overlay::Rollout, Overlay::GradRollout})
            for (int layer : {0, std::max(0, L - 1)})
                for (int head : {-1, std::max(0, H - 1)}) {
                    State st;
                    st.desc = std::string("overlay ") + overlay_name(ov) + " layer " + std::to_string(layer) + " head " +
                              std::to_string(head);
                    st.apply = [ov, layer, head](AppContext& a) {
                        a.ui.tab = ov == Overlay::Cls ? Tab::AttentionMaps : Tab::Stage;
                        a.ui.overlay = ov; a.ui.overlay_layer = layer; a.ui.overlay_head = head;
                        a.ui.fusion = (layer + head + 3) % 3; a.ui.discard = head < 0 ? 0.f : 0.5f;
                        a.ui.opacity = 1.f;
                    };
                    states_.push_back(std::move(st));
                }
        // attention from any token: cls, the first, a middle and the last patch, and one past the end
        for (int q : {0, 1, N / 2 + 1, N, N + 5})
            for (int layer : {0, std::max(0, L - 1)}) {
                int head = q % 2 ? std::max(0, H - 1) : -1;
                State st;
                st.desc = "overlay query token " + std::to_string(q) + " layer " + std::to_string(layer) + " head " + std::to_string(head);
                st.apply = [q, layer, head](AppContext& a) {
                    a.ui.tab = Tab::Stage;
                    a.ui.overlay = Overlay::Query; a.ui.query = q;
                    a.ui.overlay_layer = layer; a.ui.overlay_head = head; a.ui.opacity = 1.f;
                };
                states_.push_back(std::move(st));
            }
        // the math of one cell: every stage kind it explains, at the first and last layer; first, last,
        // middle and one out-of-range cell
        for (int i = 0; i < T; ++i) {
            const TraceEntry& e = tr.at(size_t(i));
            if (!cell_math_supported(e.name) || (e.layer > 0 && e.layer < L - 1)) continue;
            Slice2D sl = slice2d(e.tensor, 0);
            const int rows = sl.rows, cols = sl.cols;
            for (auto rc : {std::make_pair(0, 0), std::make_pair(rows - 1, cols - 1), std::make_pair(rows / 2, cols / 2),
                            std::make_pair(rows + 2, 0)}) {
                int head = (i + rc.first) % std::max(1, H);
                State st;
                st.desc = "cell math " + e.name + " [" + std::to_string(rc.first) + "," + std::to_string(rc.second) +
                          "] head " + std::to_string(head);
                st.apply = [i, rc, head](AppContext& a) {
                    a.ui.tab = Tab::Stage; a.ui.show_grad = false; a.ui.stage = i; a.ui.head = head;
                    a.ui.cell_r = rc.first; a.ui.cell_c = rc.second; a.ui.zoom = 1;
                };
                states_.push_back(std::move(st));
            }
        }
        states_.push_back({"cell math on an unsupported stage", [](AppContext& a) {
                               a.ui.tab = Tab::Stage; a.ui.stage = 0; a.ui.cell_r = 0; a.ui.cell_c = 0;
                           }});
        states_.push_back({"cell math on a gradient view", [L](AppContext& a) {
                               a.ui.tab = Tab::Stage; a.ui.show_grad = true; a.ui.cell_r = 1; a.ui.cell_c = 1;
                               if (const Trace* t = a.s.trace()) {
                                   int k = t->index_of("blocks." + std::to_string(std::max(0, L - 1)) + ".attn.pattern");
                                   if (k >= 0) a.ui.stage = k;
                               }
                           }});
        states_.push_back({"cell math closed", [](AppContext& a) { a.ui.cell_r = a.ui.cell_c = -1; a.ui.show_grad = false; }});
        for (auto pool : {Pooling::Mean, Pooling::Cls}) {
            states_.push_back({std::string("logit lens, ") + (pool == Pooling::Mean ? "mean" : "cls") + " pooling",
                               [pool](AppContext& a) {
                                   Options o; o.pooling = pool; a.s.set_options(o); a.ui.tab = Tab::LogitLens;
                               }});
            states_.push_back({"logit lens, second frame", [](AppContext& a) { a.ui.tab = Tab::LogitLens; }});
        }
        for (int p : {N - 1, N / 2, -1})
            states_.push_back({"positions, patch " + std::to_string(p), [p](AppContext& a) { a.ui.tab = Tab::Positions; a.ui.patch = p; }});
        states_.push_back({"logit lens, options reset", [](AppContext& a) { a.s.set_options(Options{}); }});
        // the Distance tab: a small average (the driver waits for it), then an options change that
        // makes it stale (said, not drawn), then the patches as pictures with and without the bug
        // (a state is applied again on every frame it waits: start the average once)
        const bool can_average = distance_average_unavailable(app.s).empty();
        auto started = std::make_shared<bool>(false);
        if (can_average) {
        states_.push_back({"distance, average over 2 test images", [started](AppContext& a) {
                               a.ui.tab = Tab::Distance;
                               if (*started) return;
                               *started = true;
                               a.ui.distance_images = 2; a.ui.distance_autostart = true;
                           }});
        states_.push_back({"distance, average drawn", [](AppContext& a) { a.ui.tab = Tab::Distance; }});
        states_.push_back({"distance, options changed (average stale)", [](AppContext& a) {
                               Options o; o.affine = false; a.s.set_options(o); a.ui.tab = Tab::Distance;
                           }});
        states_.push_back({"distance, options reset", [](AppContext& a) { a.s.set_options(Options{}); }});
        // an option changed while an average runs cancels it: said, nothing drawn
        auto step = std::make_shared<int>(0);
        states_.push_back({"distance, an option change cancels a running average", [step](AppContext& a) {
                               a.ui.tab = Tab::Distance;
                               if (*step == 0) { a.ui.distance_images = 10000; a.ui.distance_autostart = true; *step = 1; }
                               else if (*step == 1 && distance_average_running(a.tx)) {
                                   Options o; o.unbiased = true; a.s.set_options(o); *step = 2;
                               }
                           }});
        states_.push_back({kCancelledState, [](AppContext& a) { a.ui.tab = Tab::Distance; }});
        states_.push_back({"distance, options reset again", [](AppContext& a) { a.s.set_options(Options{}); }});
        }
        for (int p : {-1, 0, N - 1})
            states_.push_back({"patches, patch " + std::to_string(p), [p](AppContext& a) { a.ui.tab = Tab::Patches; a.ui.patch = p; }});
        states_.push_back({"patches, BUG reshape", [N](AppContext& a) {
                               Options o; o.bug_reshape_patches = true; a.s.set_options(o);
                               a.ui.tab = Tab::Patches; a.ui.patch = N / 2;
                           }});
        states_.push_back({"patches, options reset", [](AppContext& a) { a.s.set_options(Options{}); }});
        // the map of the model and the guided tour: first, block and last stages; tour steps and out of range
        for (int i : {0, T / 2, T - 1})
            states_.push_back({"map, stage#" + std::to_string(i), [i](AppContext& a) { a.ui.tab = Tab::Map; a.ui.stage = i; }});
        for (int k : {0, 5, 12, 1000})
            states_.push_back({"tour step " + std::to_string(k), [k](AppContext& a) { a.ui.tab = Tab::Stage; a.ui.tour_step = k; }});
        states_.push_back({"tour step 3 on the map tab", [](AppContext& a) { a.ui.tab = Tab::Map; a.ui.tour_step = 3; }});
        states_.push_back({"tour left", [](AppContext& a) { a.ui.tour_step = -1; a.ui.tab = Tab::Stage; }});
        states_.push_back({"overlay query reset", [](AppContext& a) { a.ui.query = 0; a.ui.overlay = Overlay::Cls; }});
        struct Toggle { const char* name; bool affine, unbiased; std::optional<Pooling> pool; bool squash; bool bug_scale = false, bug_reshape = false; };
        const Toggle toggles[] = {{"affine off", false, false, std::nullopt, false},
                                  {"unbiased", true, true, std::nullopt, false},
                                  {"mean pooling", true, false, Pooling::Mean, false},
                                  {"cls pooling", true, false, Pooling::Cls, false},
                                  {"squash", true, false, std::nullopt, true},
                                  {"affine off + unbiased + mean pooling", false, true, Pooling::Mean, false},
                                  {"BUG scale after softmax", true, false, std::nullopt, false, true, false},
                                  {"BUG reshape patches", true, false, std::nullopt, false, false, true},
                                  {"both BUGs + mean pooling", true, false, Pooling::Mean, false, true, true}};
        for (const Toggle& tg : toggles) {
            State st;
            st.desc = std::string("toggle ") + tg.name;
            st.apply = [tg](AppContext& a) {
                Options o;
                o.affine = tg.affine; o.unbiased = tg.unbiased;
                o.bug_scale_after_softmax = tg.bug_scale; o.bug_reshape_patches = tg.bug_reshape;
                set_pooling_choice(o, tg.pool);
                a.s.set_options(o);
                a.s.set_squash(tg.squash ? std::optional<bool>(true) : std::nullopt);
                a.ui.tab = Tab::Changes;
            };
            states_.push_back(std::move(st));
            states_.push_back({std::string("[") + tg.name + "] map and tour step 7",
                               [](AppContext& a) { a.ui.tab = Tab::Map; a.ui.tour_step = 7; }});
            states_.push_back({std::string("[") + tg.name + "] tour left", [](AppContext& a) { a.ui.tour_step = -1; }});
            // every 3rd stage of the selection under each toggle (all of them once above)
            for (size_t k = 0; k < sel.size(); k += sel.size() > 24 ? 3 : 1) {
                int i = sel[k];
                stage_state(i, (k / 2) % 2 == 1, k % 2 ? Tab::Changes : Tab::Stage, std::string("[") + tg.name + "]");
            }
        }
        states_.push_back({"options reset", [](AppContext& a) { a.s.set_options(Options{}); a.s.set_squash(std::nullopt); }});
        if (app.s.can_compute_grads()) {
            // the "compute gradients" button's path, then the gradient views it enables
            states_.push_back({"compute gradients", [](AppContext& a) { a.s.set_grad_mode(GradMode::On); }});
            for (size_t k = 0; k < sel.size(); k += std::max<size_t>(1, sel.size() / 12)) stage_state(sel[k], true, Tab::Stage, "[grads on]");
            states_.push_back({"overlay grad (grads on)", [L](AppContext& a) {
                                   a.ui.overlay = Overlay::GradRollout; a.ui.overlay_layer = std::max(0, L - 1);
                               }});
        }
    }

    const AppArgs& a_;
    std::vector<State> states_;
    size_t next_ = 0;
    int frame_in_state_ = 0, frames_ = 0, idle_ = 0;
    std::vector<std::string> failures_;
    std::chrono::steady_clock::time_point t0_;
};

}  // namespace

std::unique_ptr<Driver> make_driver(const AppArgs& a) {
    if (a.sweep) return std::make_unique<SweepDriver>(a);
    if (a.bench_frames > 0) return std::make_unique<BenchDriver>(a);
    if (!a.screenshot.empty()) return std::make_unique<ScreenshotDriver>(a);
    return nullptr;
}

void write_layout(const std::string& path, AppContext& app, int W, int H) {
    Session& s = app.s;
    const UiState& ui = app.ui;
    const TraceEntry* cur = current_entry(s, ui);
    nlohmann::json j;
    j["window"] = {W, H};
    j["title"] = window_title(s);
    j["stage"] = cur ? cur->name : "";
    j["model"] = s.model_spec();
    j["image"] = s.image_path();
    j["error"] = s.error();
    j["errors"] = nlohmann::json::array();
    for (auto& e : s.errors()) j["errors"].push_back({{"title", e.title}, {"detail", e.detail}});
    j["shader_error"] = ui.shader_error;
    j["data_dir"] = data_paths().root;
    if (const Settings* st = current_settings()) j["settings_error"] = st->error();
    else j["settings_error"] = "";
    j["options"] = {{"affine", s.options().affine}, {"unbiased", s.options().unbiased},
                    {"pooling", s.options().pooling ? int(*s.options().pooling) : -1},
                    {"bug_scale_after_softmax", s.options().bug_scale_after_softmax},
                    {"bug_reshape_patches", s.options().bug_reshape_patches}};
    j["grads"] = s.result().grads != nullptr;
    j["heads"] = s.config().heads;
    j["heads_from"] = s.model().heads_from;
    j["labels_from"] = s.model().labels_from;
    if (const auto& rq = s.heads_request()) j["heads_request"] = {{"spec", rq->spec}, {"width", rq->width}, {"choices", rq->choices}};
    else j["heads_request"] = nullptr;
    j["tab"] = tab_name(ui.tab);
    j["overlay"] = overlay_name(ui.overlay);
    j["query"] = ui.query;
    j["rects"] = nlohmann::json::object();
    for (auto& [k, r] : ui.rects) j["rects"][k] = rect_json(r);
    j["numbers"] = nlohmann::json::object();
    for (auto& [k, v] : ui.numbers) j["numbers"][k] = v;
    j["strings"] = nlohmann::json::object();
    for (auto& [k, v] : ui.strings) j["strings"][k] = v;
    j["texts"] = nlohmann::json::array();
    for (auto& t : ui.texts) j["texts"].push_back({{"group", t.group}, {"text", t.text}, {"box", rect_json(t.box)}, {"clip", rect_json(t.clip)}});
    std::ofstream(path) << j.dump(1);
}

}  // namespace vit::app
