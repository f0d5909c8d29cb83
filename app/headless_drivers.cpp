// The screenshot and benchmark drivers (headless.h): --screenshot with its keys, clicks, exports and layout,
// and --bench-frames. The sweep's driver and its rules are in headless.cpp.
#include "probe.h"
#include "headless.h"

#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "views.h"

namespace vit::app {

namespace {

// Frames with a settled result: a trace on screen, no run or load in flight, no training.
bool settled(const AppContext& app) {
    return app.s.trace() && !app.s.busy() && !app.s.loading() && !app.tabs.working() && !app.learn.working();
}

class ScreenshotDriver : public Driver {
public:
    explicit ScreenshotDriver(const AppArgs& a) : a_(a), keys_(a.key_codes) {}
    // --while-running: once the keys are going, frames do not wait for the pass they start
    double poll_wait_ms() const override { return (a_.while_running && pressed_) || !a_.while_loading.empty() ? 0.0 : 50.0; }
    void before_frame(AppContext& app) override {
        // keys sent by --keys go through the GLFW backend's own key callback
        if (app.s.trace() && !keys_.empty() && settled_frames_ >= 2) {
            pressed_ = true;
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
        if (!a_.while_loading.empty()) {
            // the frame drawn while the model loads (or its first pass runs), once the step is named:
            // judged by what this frame drew ("name: step" lines, the probe), not by the jobs now, which
            // a worker thread moves on while the frame is read back
            const bool load = a_.while_loading == "load";
            bool named = false;
            const auto drawn = app.probe.strings.find("working");
            std::istringstream lines(drawn == app.probe.strings.end() ? std::string() : drawn->second);
            for (std::string line; std::getline(lines, line);) {
                const size_t colon = line.find(": ");
                if (colon == std::string::npos) continue;  // no step yet
                const std::string name = line.substr(0, colon), step = line.substr(colon + 2);
                if (load ? name.rfind("loading", 0) == 0 : step.find("block") != std::string::npos) named = true;
            }
            if (named) return shoot(app, W, H);
            if (app.s.trace() || (!app.s.loading() && !app.s.busy() && ++idle_frames_ > 20)) {
                std::fprintf(stderr, "vitscope: --while-loading %s: the %s finished before a frame showed it (use a larger model)\n",
                             a_.while_loading.c_str(), load ? "load" : "first pass");
                return 3;
            }
            return std::nullopt;
        }
        if (settled(app) || (!app.s.has_image() && !app.s.busy() && !app.s.loading())) ++settled_frames_;
        if (a_.while_running && pressed_ && keys_.empty()) {
            // the frame drawn while the pass the keys started runs: the previous trace is on screen
            if (app.s.busy() && app.s.trace()) return shoot(app, W, H);
            if (++frames_after_keys_ > 3) {
                std::fprintf(stderr, "vitscope: --while-running: no forward pass was running after --keys (it finished "
                                     "first, or the keys started none): use a slower model\n");
                return 3;
            }
            return std::nullopt;
        }
        if (settled_frames_ < 3 || !keys_.empty() || (a_.click && clicks_ < 4)) return std::nullopt;
        if (app.s.loading() || app.s.busy()) return std::nullopt;  // a click or key started a load or run: its result
        if (!exports_requested_) {
            // exports requested on the command line go through the same path as the buttons (next frame)
            app.exports.view_png = a_.export_view;
            app.exports.npy = a_.export_npy;
            app.exports.npz = a_.export_npz;
            exports_requested_ = true;
            return std::nullopt;
        }
        return shoot(app, W, H);
    }
private:
    int shoot(AppContext& app, int W, int H) {
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
    const AppArgs& a_;
    std::vector<int> keys_;
    bool down_ = false, exports_requested_ = false, pressed_ = false;
    int settled_frames_ = 0, clicks_ = 0;  // --click: frames since the press
    int frames_after_keys_ = 0;            // --while-running: frames drawn after the keys with no pass running
    int idle_frames_ = 0;                  // --while-loading: frames with nothing loading or running
};

// The process's peak resident memory so far (VmHWM), or now (VmRSS), in MB; 0 where /proc does not say.
double status_mb(const char* key) {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind(key, 0) == 0) return std::atof(line.c_str() + std::strlen(key)) / 1024.0;
    return 0;
}

class BenchDriver : public Driver {
public:
    explicit BenchDriver(const AppArgs& a) : a_(a) {}
    double poll_wait_ms() const override { return a_.bench_toggle ? 1e6 : 50.0; }
    void before_poll(AppContext& app) override {
        // a frame is the whole loop iteration, swap included (GL work is finished at the swap)
        auto now = std::chrono::steady_clock::now();
        if (timing_) {
            ms_.push_back(std::chrono::duration<double, std::milli>(now - t0_).count());
            const Result& r = app.s.result();
            if (r.reused_base) reused_ms_.push_back(ms_.back());
            else pass_ms_.push_back(r.pass_ms), toggle_ms_.push_back(ms_.back());
        }
        t0_ = now;
        if (a_.bench_toggle && app.s.trace()) {
            Options t = app.s.options();
            t.affine = !t.affine;
            app.s.set_options(t);
        }
        if (a_.bench_switch && app.s.trace() && app.s.trace()->depth() > 0) {
            // the next stage: another block every frame (so an on-demand trace recomputes one each
            // time), walking four kinds that an on-demand pass does not keep
            const Trace& t = *app.s.trace();
            static const StageKind kinds[] = {StageKind::AttnScores, StageKind::MlpPre, StageKind::AttnQ, StageKind::Ln2Normalized};
            const int L = t.depth();
            const StageId id{kinds[(switches_ / L) % 4], switches_ % L};
            ++switches_;
            app.ui.tab = Tab::Stage;
            app.ui.show_grad = a_.grads;  // with --grads, the gradient view: a block's backward each time
            select_stage(app.ui, t, id);
        }
    }
    std::optional<int> after_render(AppContext& app, int, int) override {
        if (settled(app)) ++settled_frames_;
        timing_ = settled_frames_ > 2;
        if (int(ms_.size()) < a_.bench_frames) return std::nullopt;
        std::sort(ms_.begin(), ms_.end());
        double sum = 0;
        for (double v : ms_) sum += v;
        const Trace* t = app.s.trace();
        const Trace::OnDemandStats od = t ? t->on_demand_stats() : Trace::OnDemandStats{};
        std::printf("frames model=%s toggle=%d switch=%d on_demand=%d grads=%d n=%zu mean_ms=%.2f median_ms=%.2f p95_ms=%.2f "
                    "last_job_ms=%.1f kept_mb=%.1f kept_grad_mb=%.1f blocks_recomputed=%d block_grads_recomputed=%d "
                    "last_block_ms=%.1f peak_rss_mb=%.0f rss_mb=%.0f",
                    app.s.config().name.c_str(), int(a_.bench_toggle), int(a_.bench_switch), int(t && t->on_demand()),
                    int(t && t->has_grads()), ms_.size(), sum / double(ms_.size()), ms_[ms_.size() / 2],
                    ms_[size_t(double(ms_.size()) * 0.95)], app.s.result().ms, double(od.kept_bytes) / 1e6,
                    double(od.kept_grad_bytes) / 1e6, od.recomputes, od.grad_recomputes, od.last_ms, status_mb("VmHWM:"),
                    status_mb("VmRSS:"));
        // With --bench-toggle each frame is a toggle and the frame that shows its trace (the poll waits for
        // the pass): the frame against the pass it waited for, in the same run. A toggle back to the
        // default options reuses the cached baseline (no pass): counted apart.
        auto median = [](std::vector<double> v) {
            std::sort(v.begin(), v.end());
            return v.empty() ? 0.0 : v[v.size() / 2];
        };
        if (a_.bench_toggle && !pass_ms_.empty()) {
            const double pass = median(pass_ms_), toggle = median(toggle_ms_);
            std::printf(" toggles_with_pass=%zu toggle_to_picture_ms=%.2f pass_ms=%.2f toggle_over_pass=%.2f",
                        pass_ms_.size(), toggle, pass, toggle / pass);
        }
        if (a_.bench_toggle && !reused_ms_.empty())
            std::printf(" toggles_back_to_baseline=%zu their_ms=%.2f", reused_ms_.size(), median(reused_ms_));
        std::printf("\n");
        return 0;
    }
private:
    const AppArgs& a_;
    std::chrono::steady_clock::time_point t0_;
    std::vector<double> ms_, pass_ms_, toggle_ms_, reused_ms_;
    int settled_frames_ = 0;
    bool timing_ = false;
    int switches_ = 0;
};

}  // namespace

std::unique_ptr<Driver> make_screenshot_driver(const AppArgs& a) { return std::make_unique<ScreenshotDriver>(a); }
std::unique_ptr<Driver> make_bench_driver(const AppArgs& a) { return std::make_unique<BenchDriver>(a); }

}  // namespace vit::app
