#include "probe.h"
#include "headless.h"

#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/io/image.h"
#include "core/teach/teach.h"
#include "tensor_access.h"
#include "views.h"
#include "model_map.h"
#include "paths.h"
#include "settings.h"
#include "text_capture.h"
#include "text_wrap.h"

namespace vit::app {

namespace {

nlohmann::json rect_json(const Rect& r) { return {r.x, r.y, r.w, r.h}; }

// The state being drawn, for the crash handler (a segfault names the state it happened in). A signal
// handler can reach nothing else: the one global of the app's state, written only by the sweep.
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

bool overlaps(const Rect& a, const Rect& b) {
    const float e = 0.5f;  // touching is fine
    return a.x + e < b.x + b.w && b.x + e < a.x + a.w && a.y + e < b.y + b.h && b.y + e < a.y + a.h;
}
bool inside(const Rect& a, const Rect& clip) {
    const float e = 0.5f;
    return a.x >= clip.x - e && a.y >= clip.y - e && a.x + a.w <= clip.x + clip.w + e && a.y + a.h <= clip.y + clip.h + e;
}

// The sweep: every stage x value/gradient on the Stage tab, every tab of the tab table (each adds its
// own states and checks through its sweep hook), the overlays, the tour, the option toggles; two
// frames per state. Every frame is checked: the shown tab's own checks, the state's, and what all
// views share (errors, the status bar, labels, the probe's schema).
class SweepDriver : public Driver {
public:
    explicit SweepDriver(const AppArgs& a) : a_(a) {
        std::signal(SIGSEGV, on_crash);
        std::signal(SIGABRT, on_crash);
        std::signal(SIGFPE, on_crash);
        t0_ = std::chrono::steady_clock::now();
        text_capture_enable(true);  // every text drawn, for the rule on citations
    }
    ~SweepDriver() override { text_capture_enable(false); }
    double poll_wait_ms() const override { return 1e6; }  // every state is drawn on its own result
    void before_frame(AppContext&) override { text_capture_clear(); }  // this frame's texts only
    void before_poll(AppContext& app) override {
        if (states_.empty() && app.s.trace() && !app.s.busy()) {
            if (a_.sweep_sizes.empty()) build(app);
            else build_layout(app);
        }
        if (states_.empty()) return;
        if (next_ < sizes_.size() && !same_size(sizes_[next_], size_)) {
            // the layout sweep's next window size: the window and the content scale change, and the
            // state is drawn once the framebuffer has that size
            const AppArgs::WindowSize& z = sizes_[next_];
            glfwSetWindowSize(app.win, z.w, z.h);
            app.ui_scale = z.scale;
            size_ = z;
            frame_in_state_ = 0;
        }
        if (frame_in_state_ == 0 && next_ < states_.size()) {
            std::snprintf(g_sweep_state, sizeof g_sweep_state, "%s: %s", app.s.model_spec().c_str(), states_[next_].desc.c_str());
            states_[next_].apply(app.s, app.ui);
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
        if (app.s.busy() || app.s.loading() || app.tabs.working())
            return std::nullopt;  // wait for the state's result (and a tab's job: the Distance tab's average)
        if (next_ < sizes_.size()) {
            int fw = 0, fh = 0;
            glfwGetFramebufferSize(app.win, &fw, &fh);
            if (fw != sizes_[next_].w || fh != sizes_[next_].h || app.font_scale != sizes_[next_].scale) {
                if (++resize_wait_ > 200) {
                    fail("the window did not take the size " + std::to_string(sizes_[next_].w) + "x" + std::to_string(sizes_[next_].h) +
                         " (it is " + std::to_string(fw) + "x" + std::to_string(fh) + "; is the X screen large enough?)");
                    return 1;
                }
                return std::nullopt;
            }
            resize_wait_ = 0;
        }
        // a tab chosen this frame shows from the next one: check what is drawn on the state's last frame
        if (frame_in_state_ == 1) {
            check(app);
            if (!sizes_.empty()) {
                check_layout(app);
                check_fits(app);
            }
        } else {
            check_errors(app);
        }
        ++frames_;
        if (++frame_in_state_ >= 2) { frame_in_state_ = 0; ++next_; }
        if (next_ < states_.size()) return std::nullopt;
        double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
        std::printf("sweep model=%s states=%zu frames=%d failures=%zu seconds=%.1f%s\n", app.s.model_spec().c_str(),
                    states_.size(), frames_, failures_.size(), sec, sizes_.empty() ? "" : (" sizes=" + std::to_string(a_.sweep_sizes.size())).c_str());
        for (size_t i = 0; i < failures_.size() && i < 400; ++i) std::printf("FAIL %s\n", failures_[i].c_str());
        if (failures_.size() > 400) std::printf("... and %zu more\n", failures_.size() - 400);
        return failures_.empty() ? 0 : 1;
    }
    void frame_failed(AppContext&, const std::string& what) override { fail("exception while drawing: " + what); }

private:
    void fail(const std::string& what) {
        std::string where = next_ < states_.size() ? states_[next_].desc : "?";
        if (next_ < sizes_.size())
            where = std::to_string(sizes_[next_].w) + "x" + std::to_string(sizes_[next_].h) +
                    (sizes_[next_].scale != 1 ? "@" + fmt_short(sizes_[next_].scale) : "") + " " + where;
        failures_.push_back("[" + where + "] " + what);
    }
    static bool same_size(const AppArgs::WindowSize& a, const AppArgs::WindowSize& b) {
        return a.w == b.w && a.h == b.h && a.scale == b.scale;
    }

    // The layout at this window size: no window's content reaches past an edge it cannot scroll
    // to, the fixed panels do not overlap, the floating panels stay on screen and off the view they
    // explain, every heatmap is large enough to read and has its key.
    void check_layout(AppContext& app) {
        const Probe& p = app.probe;
        const ImVec2 D = ImGui::GetIO().DisplaySize;
        const float e = 1.5f;
        std::vector<const DrawnWindow*> panels;
        for (const DrawnWindow& w : p.windows) {
            const std::string n = w.name;
            if (w.auto_size && n.rfind("##Tooltip", 0) == 0) continue;  // a tooltip sizes itself
            if (!w.scroll_x && w.content_right > w.right + e)
                fail("window '" + n + "' is clipped on the right: its content reaches " + std::to_string(int(w.content_right - w.right)) + " px past it");
            if (!w.scroll_y && w.content_bottom > w.bottom + e)
                fail("window '" + n + "' is clipped at the bottom: its content reaches " + std::to_string(int(w.content_bottom - w.bottom)) + " px past it");
            if (w.floating && (w.rect.x < -e || w.rect.y < -e || w.rect.x + w.rect.w > D.x + e || w.rect.y + w.rect.h > D.y + e))
                fail("window '" + n + "' leaves the screen");
            if (n == "toolbar" || n == "navigator" || n == "image" || n == "center" || n == "status") panels.push_back(&w);
        }
        for (size_t i = 0; i < panels.size(); ++i)
            for (size_t j = i + 1; j < panels.size(); ++j)
                if (overlaps(panels[i]->rect, panels[j]->rect))
                    fail("panels '" + panels[i]->name + "' and '" + panels[j]->name + "' overlap");
        for (auto& [k, n] : p.numbers)
            if (k.rfind("tabs.", 0) == 0 && k.size() > 4 && k.compare(k.size() - 4, 4, ".cut") == 0 && n != 0)
                fail("the tab bar cuts the name of " + k.substr(5, k.size() - 9));
        // the panels that explain a view never cover it
        auto stage = p.rects.find("stage");
        for (const char* over : {"tour", "cellmath"}) {
            auto r = p.rects.find(over);
            if (r != p.rects.end() && stage != p.rects.end() && overlaps(r->second, stage->second))
                fail(std::string("the ") + over + " panel covers the heatmap it explains");
        }
        for (const DrawnHeatmap& h : p.heatmaps) {
            if (app.ui.zoom > 1 && h.name == "stage") continue;  // zoomed in: drawn larger than its window on purpose
            const bool small_multiple = h.name.rfind("grid.", 0) == 0;  // the attention grid's maps, one per head
            const float want_h = small_multiple ? 24.f : readable_height(h.rows);
            const float want_w = small_multiple ? 24.f : std::min(100.f, 4.f * (h.cols > 1 ? h.cols : 6));
            // a map as wide as its room, and that room a large share of the centre, uses the space it has:
            // its square cells make it short (197 x 3072 at 1280 px); zoom shows more
            const auto ce = p.rects.find("center");
            const bool uses_width = (h.width_bound || h.name.rfind("ln.", 0) == 0 || h.name == "stage") && ce != p.rects.end() &&
                                    h.rect.w >= 0.45f * ce->second.w;
            // a LayerNorm panel whose rows are as tall as its room allows (mean and std share them)
            const auto rb = p.numbers.find("ln.rows_room_bound");
            const bool ln_room = rb != p.numbers.end() && rb->second != 0 &&
                                 (h.name.rfind("ln.", 0) == 0 || h.name == "stage");
            if ((h.rect.h + e < want_h && !uses_width && !ln_room) || h.rect.w + e < want_w)
                fail("heatmap '" + h.name + "' (" + std::to_string(h.rows) + "x" + std::to_string(h.cols) + ") is drawn " +
                     std::to_string(int(h.rect.w)) + "x" + std::to_string(int(h.rect.h)) + " px, under " +
                     std::to_string(int(want_w)) + "x" + std::to_string(int(want_h)));
            // a map cut short by the room it was given: rows or columns that are never drawn (the LayerNorm panels
            // lost the last 8 of their 65 token rows at 1280x800, the bottom of the map simply missing)
            if (app.ui.zoom <= 1) {
                if (h.rect.h + 1.5f < float(h.rows) * h.cell_h)
                    fail("heatmap '" + h.name + "' shows " + std::to_string(int(h.rect.h / h.cell_h)) + " of its " +
                         std::to_string(h.rows) + " rows: the rest is cut off");
                if (h.rect.w + 1.5f < float(h.cols) * h.cell_w)
                    fail("heatmap '" + h.name + "' shows " + std::to_string(int(h.rect.w / h.cell_w)) + " of its " +
                         std::to_string(h.cols) + " columns: the rest is cut off");
            }
            // cells under a pixel are binned to the pixels (each the extreme of the cells it covers), and the view says so
            // (a 25 x 2048 LayerNorm panel at 0.13 px a column showed one column in 8: a wash of near-zero colour)
            if ((h.cell_w < 1 || h.cell_h < 1) && !p.strings.count(h.name + ".binned"))
                fail("heatmap '" + h.name + "' draws cells of " + std::to_string(h.cell_w) + " x " + std::to_string(h.cell_h) +
                     " px without binning them to its pixels: most of its cells are never shown");
            const auto lnw = p.numbers.find("ln.cell_w");
            const auto lnc = p.strings.find("ln.cells");
            if (h.cell_w < 1 && lnw != p.numbers.end() && lnw->second < 1 && (h.name.rfind("ln.", 0) == 0 || h.name == "stage") &&
                (lnc == p.strings.end() || lnc->second.find(" of the cells it covers (") == std::string::npos))
                fail("LayerNorm panel '" + h.name + "' bins its " + std::to_string(h.cols) + " columns without saying so");
            // every heatmap its own key (a bar beside it, or a key under or near it that says so):
            // another map's key elsewhere on screen tells nothing about this one's colours
            if (!h.key) fail("heatmap '" + h.name + "' has no key");
        }
    }

    // Issue 36: every picture fits. Each rule is its own function (the layout sweep runs them all).
    void check_fits(AppContext& app) {
        rule_content_wider(app);
        rule_off_screen(app);
        rule_number_wrapped(app.probe);
        rule_model_input(app);
        rule_label_left_clipped(app.probe);
    }

    // A panel whose content is wider than itself, even one that can scroll sideways, hides part of
    // what it says behind a scrollbar without a visible reason (the math panel's check line ended at
    // "(float round..."). The one reason: a heatmap zoomed in, panned by dragging.
    void rule_content_wider(AppContext& app) {
        const float e = 1.5f;
        for (const DrawnWindow& w : app.probe.windows) {
            if (!w.scroll_x || w.auto_size) continue;  // those that cannot scroll: check_layout's "clipped on the right"
            if (app.ui.zoom > 1 && w.name.find("/heat_") != std::string::npos) continue;  // the zoomed heatmap's pan
            if (w.content_right > w.right + e)
                fail("panel '" + w.name + "' is " + std::to_string(int(w.content_right - w.right)) +
                     " px narrower than its content (a sideways scroll hides it)");
        }
    }

    // Every window whole on the screen: fixed panels, floating ones, and the children inside them
    // (a child placed past the window's edge is cut by the screen, not scrolled).
    void rule_off_screen(AppContext& app) {
        const ImVec2 D = ImGui::GetIO().DisplaySize;
        const float e = 1.5f;
        for (const DrawnWindow& w : app.probe.windows) {
            if (w.auto_size && w.name.rfind("##Tooltip", 0) == 0) continue;  // a tooltip follows the mouse
            if (w.rect.x < -e || w.rect.y < -e || w.rect.x + w.rect.w > D.x + e || w.rect.y + w.rect.h > D.y + e)
                fail("window '" + w.name + "' is partly off the screen (" + std::to_string(int(w.rect.x)) + "," +
                     std::to_string(int(w.rect.y)) + " " + std::to_string(int(w.rect.w)) + "x" + std::to_string(int(w.rect.h)) + ")");
        }
    }

    // A number is never broken across lines ("-0." / "8102", "(98." / "4%)"): every text wrapped by
    // TextWrappedWords (the probe's `wrapped`) and every text ImGui drew wrapped (text_wrap.h's capture:
    // TextWrapped, Text under PushTextWrapPos, whoever called it) is checked at each of its breaks
    // against the text in full, with the test wrap_lines keeps numbers whole by (breaks_number).
    void rule_number_wrapped(const Probe& p) {
        std::vector<WrappedText> all = p.wrapped;
        for (const CapturedWrap& c : captured_wraps())
            all.push_back({"the text '" + c.text.substr(0, 40) + (c.text.size() > 40 ? "...'" : "'"), c.text, c.lines});
        for (const WrappedText& w : all) {
            size_t at = 0;
            for (size_t i = 0; i + 1 < w.lines.size(); ++i) {
                const std::string& a = w.lines[i];
                const size_t pos = w.text.find(a, at);
                if (pos == std::string::npos || a.empty()) break;
                at = pos + a.size();
                if (at >= w.text.size() || w.text[at] == ' ' || w.text[at] == '\n') continue;  // broken at a space
                if (breaks_number(w.text, at)) {
                    fail("a number is wrapped inside itself in " + w.key + ": '..." + a.substr(a.size() > 12 ? a.size() - 12 : 0) +
                         "' / '" + w.lines[i + 1].substr(0, 12) + "...'");
                    return;
                }
                // nor a word inside itself (a caption narrower than its one word: 'grad-weighte' / 'd')
                auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
                if (letter(w.text[at - 1]) && letter(w.text[at])) {
                    fail("a word is broken across lines in " + w.key + ": '..." + a.substr(a.size() > 12 ? a.size() - 12 : 0) + "' / '" +
                         w.lines[i + 1].substr(0, 12) + "...'");
                    return;
                }
            }
        }
    }

    // The model input is what a learner clicks and looks at most: at least 128 px on its long side
    // at every window size, and the three attention thumbnails in view beside it, each at least 56 px.
    void rule_model_input(AppContext& app) {
        const Probe& p = app.probe;
        const auto im = p.rects.find("image");
        if (im == p.rects.end()) return;  // no trace: the panel says why
        const float side = std::max(im->second.w, im->second.h);
        if (side + 0.5f < 128.f) fail("the model input is drawn " + std::to_string(int(im->second.w)) + "x" +
                                      std::to_string(int(im->second.h)) + " px, under 128 on its long side");
        const auto th = p.rects.find("thumbs"), pa = p.rects.find("image.panel");
        if (th != p.rects.end() && pa != p.rects.end()) {
            if (th->second.y + th->second.h > pa->second.y + pa->second.h + 0.5f)
                fail("the attention thumbnails are below the part of the image panel shown (scroll down)");
            if (p.number("thumbs.size") + 0.5f < 56.f)
                fail("the attention thumbnails are " + std::to_string(int(p.number("thumbs.size"))) + " px, under 56");
        }
        // the random-weights note under them whole in view too (it was cut at 1366x768 on vit-ti16: its
        // second line, or the query line's, not counted in the room left for the image)
        const auto no = p.rects.find("thumbs.note");
        if (no != p.rects.end() && pa != p.rects.end() && no->second.y + no->second.h > pa->second.y + pa->second.h + 0.5f)
            fail("the random-weights note under the attention thumbnails is cut: it ends at y " +
                 std::to_string(int(no->second.y + no->second.h)) + ", the image panel shown at " +
                 std::to_string(int(pa->second.y + pa->second.h)));
    }

    // A label's first characters never cut (a progress bar's text "m weights (304M parameters)"
    // drawn from left of its bar): a label's left edge is inside its clip.
    void rule_label_left_clipped(const Probe& p) {
        for (const DrawnText& t : p.texts)
            if (t.box.x < t.clip.x - 0.5f) {
                fail("label '" + t.text + "' (" + t.group + ") has its first characters cut");
                return;
            }
    }

    // The layout sweep: at each window size (and content scale), every tab and a choice of stages
    // (all of them at the small sizes where layouts break, fewer at the large ones), the math
    // panel, the tour, the Changes tab with an option off.
    // Learn mode (issue 38): every step at the end of its animation, and a few in the middle of theirs.
    static void add_learn_states(const Session& s, const std::function<void(std::string, std::function<void(Session&, UiState&)>)>& add) {
        const int n = int(learn_steps(s).size());
        for (int k = 0; k < n; ++k)
            for (float t : {kLearnStepSeconds, kLearnStepSeconds * 0.55f, 0.f}) {
                if (t > 0 && t < kLearnStepSeconds && k % 3 != 1 && k != 0) continue;  // step 0 mid-way: the whole model, before the camera goes in
                if (t == 0 && k > 2) continue;  // the first steps from their start
                add("learn step " + std::to_string(k) + " at " + fmt_short(t) + " s", [k, t](Session&, UiState& ui) {
                    ui = UiState{};
                    ui.learn = true;
                    ui.learn_step = k;
                    ui.learn_time = t;
                    ui.learn_playing = false;
                });
            }
        // zoomed into the step (values printed in cells), then back to the workbench
        add("learn step 3 zoomed in", [](Session&, UiState& ui) {
            ui = UiState{};
            ui.learn = true; ui.learn_step = 3; ui.learn_time = kLearnStepSeconds; ui.learn_playing = false;
            ui.learn_zoom = 400; ui.learn_fx = 0.3f; ui.learn_fy = 0.3f;
        });
        // playing (the Play button then says Pause)
        add("learn step 1 playing", [](Session&, UiState& ui) {
            ui = UiState{};
            ui.learn = true; ui.learn_step = 1; ui.learn_time = 1; ui.learn_playing = true;
        });
        // the tour: each of its lessons, as T and --tour N put it on screen (the lessons read when the sweep
        // starts: the bundled ones unless --lessons)
        for (int k = 0; k < 16; ++k)
            add("tour lesson " + std::to_string(k), [k](Session&, UiState& ui) {
                ui = UiState{};
                ui.learn = true; ui.lesson = k; ui.lesson_go = true;
            });
        add("learn off", [](Session&, UiState& ui) { ui = UiState{}; });
    }

    // Learn mode's rules: the picture takes most of the window (55%), every step has a title, a narration
    // from its numbers and a key for its colours, no caption is cut ("..."), the steps are the table's.
    void check_learn(AppContext& app) {
        const Probe& p = app.probe;
        if (!app.ui.learn) return;
        const ImVec2 D = ImGui::GetIO().DisplaySize;
        const auto pic = p.rects.find("learn.picture");
        if (pic == p.rects.end()) { fail("Learn mode drew no picture"); return; }
        if (pic->second.w * pic->second.h < 0.55f * D.x * D.y)
            fail("Learn mode's picture takes " + std::to_string(int(100 * pic->second.w * pic->second.h / (D.x * D.y))) + "% of the window, under 55%");
        if (!app.s.trace()) return;
        if (p.string("learn.title").empty() || p.string("learn.narration").size() < 40)
            fail("Learn step " + std::to_string(app.ui.learn_step) + " has no title or narration");
        if (p.string("learn.narration").find("nothing to show") != std::string::npos)
            fail("Learn step " + p.string("learn.id") + " found no stage to show");
        if (p.number("learn.drawn") > 0 && p.number("learn.keys") < 1)
            fail("Learn step " + p.string("learn.id") + " drew " + std::to_string(int(p.number("learn.drawn"))) + " coloured grids or bars without a key");
        for (const DrawnText& t : p.texts)
            if (t.group == "learn.labels" && t.text.size() > 3 && t.text.compare(t.text.size() - 3, 3, "...") == 0)
                fail("Learn step " + p.string("learn.id") + ": the caption '" + t.text + "' is cut");
        const std::string ids = p.string("learn.step_ids");
        if (int(std::count(ids.begin(), ids.end(), ',')) + 1 != int(p.number("learn.steps")))
            fail("Learn mode's step list and its count disagree");
        // the tour's lesson is on screen: Learn mode is at its step, and the lesson is among the step's
        if (app.ui.lesson >= 0 && !app.ui.lesson_go && p.numbers.count("tour.step")) {
            if (p.string("tour.id") != p.string("learn.id"))
                fail("the tour is at lesson " + std::to_string(int(p.number("tour.step"))) + " (step " + p.string("tour.id") +
                     ") but Learn mode shows step " + p.string("learn.id"));
            const std::string titles = "|" + p.string("learn.lesson.titles") + "|";
            if (titles.find("|" + p.string("tour.title") + "|") == std::string::npos)
                fail("the tour's lesson '" + p.string("tour.title") + "' is not shown (the step shows: " + p.string("learn.lesson.titles") + ")");
        }
        if (app.ui.learn_zoom >= 20 && p.number("learn.value_texts") < 1)
            fail("Learn step " + p.string("learn.id") + " zoomed in x" + fmt_short(app.ui.learn_zoom) + " prints no value");
    }

    void build_layout(AppContext& app) {
        SweepPlan plan = plan_for(app);
        if (a_.sweep_learn_only) {
            for (const AppArgs::WindowSize& z : a_.sweep_sizes)
                add_learn_states(app.s, [&](std::string desc, std::function<void(Session&, UiState&)> f) {
                    plan.add(std::move(desc), std::move(f));
                    sizes_.push_back(z);
                });
            states_ = std::move(plan.states);
            return;
        }
        const Trace& tr = *plan.trace;
        const Config& c = app.s.shown_config();
        const int L = c.depth, last = std::max(0, L - 1);
        auto row = [&](StageKind k, int layer) { return tr.index(StageId{k, layer}); };
        struct Pick { StageKind kind; int layer; bool grad; bool small; };
        const std::vector<Pick> picks = {
            {StageKind::Input, -1, false, true},        {StageKind::Patches, -1, false, false},
            {StageKind::Tokens, -1, false, false},      {StageKind::Embed, -1, false, true},
            {StageKind::Ln1Mean, 0, false, true},       {StageKind::Ln1Out, 0, false, false},
            {StageKind::AttnQ, 0, false, false},        {StageKind::AttnScores, 0, false, false},
            {StageKind::AttnPattern, 0, false, true},   {StageKind::AttnPattern, last, true, false},
            {StageKind::MlpPre, last, false, true},     {StageKind::ResidPost, last, true, false},
            {StageKind::LnFinalNormalized, -1, false, false}, {StageKind::Pooled, -1, false, false},
            {StageKind::Logits, -1, false, true},       {StageKind::Probs, -1, false, false}};
        for (const AppArgs::WindowSize& z : a_.sweep_sizes) {
            const bool full = z.scale != 1 || z.w * z.h <= 1366 * 800;
            const std::string at = std::to_string(z.w) + "x" + std::to_string(z.h);
            auto add = [&](std::string desc, std::function<void(Session&, UiState&)> f) {
                plan.add(std::move(desc), std::move(f));
                sizes_.push_back(z);
            };
            for (const Pick& pk : picks) {
                const int r = row(pk.kind, pk.layer);
                if (r < 0 || (!full && !pk.small)) continue;
                for (bool g : {false, pk.grad}) {
                    add("stage " + tr.name(size_t(r)) + (g ? " gradient" : ""), [r, g](Session& s, UiState& ui) {
                        ui = UiState{};
                        ui.show_grad = g;
                        if (s.trace()) select_row(ui, *s.trace(), size_t(r));
                    });
                    if (!pk.grad) break;
                }
            }
            // the math of a cell beside its heatmap
            if (const int r = row(StageKind::AttnPattern, 0); r >= 0)
                add("math of a cell, attn.pattern", [r](Session& s, UiState& ui) {
                    ui = UiState{};
                    if (s.trace()) select_row(ui, *s.trace(), size_t(r));
                    ui.cell_r = 1; ui.cell_c = 2;
                });
            if (const int r = row(StageKind::Logits, -1); r >= 0 && full)
                add("math of a cell, logits", [r](Session& s, UiState& ui) {
                    ui = UiState{};
                    if (s.trace()) select_row(ui, *s.trace(), size_t(r));
                    ui.cell_r = 0; ui.cell_c = 0;
                });
            // every tab, at a stage in the middle
            for (const TabSpec& t : tab_table())
                add(std::string("tab ") + t.name, [tab = t.tab, mid = int(tr.size() / 2)](Session& s, UiState& ui) {
                    ui = UiState{};
                    ui.tab = tab;
                    if (s.trace()) select_row(ui, *s.trace(), size_t(mid));
                });
            add("attention maps, contrast per map", [](Session&, UiState& ui) { ui = UiState{}; ui.tab = Tab::AttentionMaps; ui.attention_per_map = true; });
            // every overlay: each brings its own controls into the image panel (rollout's head fusion
            // and discard ratio side by side, the query slider, the no-gradients reason)
            for (int o = 0; o < kOverlayCount; ++o)
                add(std::string("overlay ") + overlay_name(Overlay(o)), [o](Session&, UiState& ui) {
                    ui = UiState{};
                    ui.overlay = Overlay(o);
                    ui.query = 5;
                });
            // the Changes tab with an option off (and back)
            add("changes, affine off", [](Session& s, UiState& ui) {
                ui = UiState{};
                Options o;
                o.affine = false;
                s.set_options(o);
                ui.tab = Tab::Changes;
            });
            add("options reset " + at, [](Session& s, UiState& ui) { ui = UiState{}; s.set_options(Options{}); });
            add_learn_states(app.s, add);
        }
        states_ = std::move(plan.states);
    }

    void check_errors(AppContext& app) {
        for (auto& e : app.s.errors()) fail("error in the window: " + e.title + ": " + e.detail.substr(0, 200));
        app.s.dismiss_errors();
    }

    void check(AppContext& app) {
        const UiState& ui = app.ui;
        const Session& s = app.s;
        const Probe& p = app.probe;
        const SweepFail f = [this](const std::string& what) { fail(what); };
        check_errors(app);
        for (const std::string& k : p.undeclared()) fail("the probe has a key its schema does not declare: " + k);
        if (!ui.learn) app.tabs[ui.tab].sweep_check(s, ui, p, f);  // the shown tab's own checks (its sweep hook; none in Learn mode)
        if (next_ < states_.size() && states_[next_].check) states_[next_].check(s, ui, p, f);
        if (s.trace() && ui.overlay == Overlay::Query && s.shown_config().depth > 0) {
            // the run's tokens: cls, registers, dist, then its N patches (another input size included)
            const RunDims& rd = s.trace()->table().dims();
            const int N = rd.N;
            const bool in_range = ui.query >= 0 && ui.query < rd.T;
            const std::string vals = p.string("overlay.values");
            // (a query patch that an intervention dropped has no token: the panel says so instead)
            if (in_range && std::count(vals.begin(), vals.end(), ',') != N - 1 &&
                p.string("overlay.message").find("dropped") == std::string::npos)
                fail("query overlay for token " + std::to_string(ui.query) + " shows no row of " + std::to_string(N) + " values");
            if (!in_range && p.string("overlay.message").empty())
                fail("query token " + std::to_string(ui.query) + " is out of range and the image panel does not say so");
        }
        // any overlay: drawn over the run's grid, or the reason it is not (a model without a cls token: rollout)
        if (s.trace() && ui.overlay != Overlay::None && p.rects.count("image")) {
            const std::string vals = p.string("overlay.values");
            const int N = s.trace()->table().dims().N;
            if (vals.empty() && p.string("overlay.message").empty())
                fail(std::string("the overlay '") + overlay_name(ui.overlay) + "' shows nothing and the image panel does not say why");
            if (!vals.empty() && std::count(vals.begin(), vals.end(), ',') != N - 1)
                fail(std::string("the overlay '") + overlay_name(ui.overlay) + "' does not have one value per patch");
            if (p.number("image.gh") * p.number("image.gw") != N) fail("the image panel's patch grid is not the run's");
        }
        check_strip_and_status(app);
        check_learn(app);
        check_citations(app);
        check_cut_texts();
        check_flat_keys(app);
        if (!s.trace() || p.string("status").find(s.trace()->has_grads() ? "forward+backward" : "forward only") == std::string::npos)
            fail("status bar does not say what was computed: " + p.string("status"));
        // labels: none clipped, none overlapping another of its panel
        const auto& t = p.texts;
        for (size_t i = 0; i < t.size(); ++i) {
            if (!inside(t[i].box, t[i].clip)) {
                fail("label '" + t[i].text + "' (" + t[i].group + ") leaves its panel");
                break;
            }
            std::string gi = t[i].group.substr(0, t[i].group.find('.'));
            for (size_t j = i + 1; j < t.size(); ++j) {
                if (t[j].group.substr(0, t[j].group.find('.')) != gi) continue;
                if (overlaps(t[i].box, t[j].box)) {
                    fail("labels '" + t[i].text + "' and '" + t[j].text + "' overlap (" + t[i].group + ")");
                    return;
                }
            }
        }
    }

    // No text is cut by its widget (a combo's preview "6/15 Does the model need gamma a", a button's label):
    // ImGui clips a text that does not fit without saying so (text_capture.h's captured_cut_texts).
    void check_cut_texts() {
        for (const CutText& c : captured_cut_texts()) {
            fail("the text '" + c.text.substr(0, 60) + "' is cut: " + std::to_string(int(c.width)) + " px wide in " +
                 std::to_string(int(c.room)) + " px");
            return;
        }
    }

    // Text on screen cites no file the repository or the install does not hold (issue 36 item 12: the
    // Train tab's "seed notebook 003"): every text ImGui drew this frame (text_capture.h), each citation
    // of a notebook or of a document or script by name, looked up beside the app's data.
    void check_citations(AppContext&) {
        const std::string root = data_paths().root;
        for (const std::string& t : captured_texts())
            for (const std::string& f : cited_files(t))
                if (!cited_file_exists(f, root)) {
                    fail("the screen cites '" + f + "', which is not in the repository or the install: \"" + t.substr(0, 160) + "\"");
                    return;
                }
    }

    // A key over a near-constant range says so (issue 36 item 9): a heatmap whose key spans under 2% of its
    // values' size (its colours stretch noise), or an overlay whose values lie within 25% of each other
    // (flat_overlay: one wash of colour over the photo, no patch standing out), each needs its note on screen;
    // and an overlay that is not flat is not called flat.
    void check_flat_keys(AppContext& app) {
        const Probe& p = app.probe;
        for (const DrawnHeatmap& h : p.heatmaps)
            if (h.key && near_constant(h.vmin, h.vmax) && !h.flat_note)
                fail("heatmap '" + h.name + "' has a key over " + fmt(h.vmin) + " .. " + fmt(h.vmax) + " (a spread of " +
                     fmt(float(100 * relative_spread(h.vmin, h.vmax))) + "% of its values) and no note that it is near-constant");
        const auto lo = p.numbers.find("overlay.lo"), hi = p.numbers.find("overlay.hi");
        if (lo == p.numbers.end() || hi == p.numbers.end()) return;
        const float l = float(lo->second), h = float(hi->second);
        const bool flat = flat_overlay(l, h), noted = !p.string("overlay.flat").empty();
        if (flat && !noted)
            fail("the overlay's values lie in " + fmt(l) + " .. " + fmt(h) + " (within " + fmt(float(100 * relative_spread(l, h))) +
                 "% of each other) and no note says that it is flat");
        if (!flat && noted)
            fail("the overlay's values lie in " + fmt(l) + " .. " + fmt(h) + " (" + fmt(float(100 * relative_spread(l, h))) +
                 "% apart) and a note calls it flat: " + p.string("overlay.flat"));
    }

    // The map strips leave no box out; the status bar's GEMM field is whole.
    void check_strip_and_status(AppContext& app) {
        const Session& s = app.s;
        const Probe& p = app.probe;
        if (!s.trace()) return;
        for (const char* g : {"strip.dropped"})
            if (p.number(g) > 0) fail(std::string(g) + ": the map strip left out " + std::to_string(int(p.number(g))) + " boxes");
        const float W = ImGui::GetIO().DisplaySize.x;
        auto gemm = p.rects.find("status.gemm"), line = p.rects.find("status.line");
        if (gemm == p.rects.end() || line == p.rects.end()) fail("the status bar has no GEMM field");
        else if (gemm->second.x + gemm->second.w > W + 0.5f || line->second.x + line->second.w > gemm->second.x)
            fail("the status bar's GEMM field is clipped or overlapped");
    }

    // A plan of states for the session's trace on screen.
    static SweepPlan plan_for(AppContext& app) {
        SweepPlan plan;
        plan.session = &app.s;
        plan.trace = app.s.trace();
        return plan;
    }

    void build(AppContext& app) {
        SweepPlan plan = plan_for(app);
        const Trace& tr = *plan.trace;
        const Config& c = app.s.shown_config();
        // the run's sizes: its patches and tokens (at the --image-size the sweep started with)
        const RunDims& rd = tr.table().dims();
        const int T = int(tr.size()), L = c.depth, H = c.heads, N = rd.N, TT = rd.T;
        plan.T = T; plan.L = L; plan.H = H; plan.N = N;
        plan.base = Options{};
        plan.base.image_h = app.s.options().image_h;
        plan.base.image_w = app.s.options().image_w;
        const Options base = plan.base;
        std::vector<int>& sel = plan.stages;
        if (a_.sweep_stages <= 0 || a_.sweep_stages >= T) {
            for (int i = 0; i < T; ++i) sel.push_back(i);
        } else {
            // the stages spread over the trace, and the first of every kind of stage it has (each kind drawn once)
            for (int k = 0; k < a_.sweep_stages; ++k) sel.push_back(int((int64_t(k) * (T - 1)) / std::max(1, a_.sweep_stages - 1)));
            std::vector<char> seen(kStageKinds, 0);
            for (int i = 0; i < T; ++i) {
                const StageKind kind = tr.info(size_t(i)).id.kind;
                if (!seen[size_t(kind)]) { seen[size_t(kind)] = 1; sel.push_back(i); }
            }
            std::sort(sel.begin(), sel.end());
            sel.erase(std::unique(sel.begin(), sel.end()), sel.end());
        }
        auto stage_state = [&](int i, bool grad, Tab tab, const std::string& tag) {
            std::string desc = tag + " stage#" + std::to_string(i) + " (" + tr.name(size_t(std::min(i, T - 1))) + ") " +
                               (grad ? "gradient" : "value") + " tab " + tab_name(tab) + " scale " + std::to_string(i % 3) +
                               " head " + std::to_string(i % std::max(1, H)) + (i % 3 == 0 ? " patch " + std::to_string(i % N) : "") +
                               (i % 7 == 0 ? " zoom 3" : "");
            plan.add(desc, [i, grad, tab, H, N](Session& s, UiState& ui) {
                if (s.trace()) select_row(ui, *s.trace(), size_t(i));
                ui.show_grad = grad;
                ui.tab = tab;
                ui.scale_mode = ScaleMode(i % 3);
                ui.head = i % std::max(1, H);
                ui.channel = i % 3;
                ui.patch = i % 3 == 0 ? i % std::max(1, N) : -1;
                ui.zoom = i % 7 == 0 ? 3.f : 1.f;
            });
        };
        for (int i : sel)
            for (bool g : {false, true}) stage_state(i, g, Tab::Stage, "stages");
        // every tab of the table at a middle stage (drawing the Train tab starts no training)
        for (const TabSpec& t : tab_table()) stage_state(sel[sel.size() / 2], false, t.tab, "tabs");
        for (Overlay ov : {Overlay::None, Overlay::Cls, Overlay::Rollout, Overlay::GradRollout})
            for (int layer : {0, std::max(0, L - 1)})
                for (int head : {-1, std::max(0, H - 1)})
                    plan.add(std::string("overlay ") + overlay_name(ov) + " layer " + std::to_string(layer) + " head " +
                                 std::to_string(head),
                             [ov, layer, head](Session&, UiState& ui) {
                                 ui.tab = ov == Overlay::Cls ? Tab::AttentionMaps : Tab::Stage;
                                 ui.overlay = ov; ui.overlay_layer = layer; ui.overlay_head = head;
                                 ui.fusion = (layer + head + 3) % 3; ui.discard = head < 0 ? 0.f : 0.5f;
                                 ui.opacity = 1.f;
                             });
        // attention from any token: cls, the first, a middle and the last patch, and one past the end
        for (int q : {0, 1, TT / 2, TT - 1, TT + 4})
            for (int layer : {0, std::max(0, L - 1)}) {
                int head = q % 2 ? std::max(0, H - 1) : -1;
                plan.add("overlay query token " + std::to_string(q) + " layer " + std::to_string(layer) + " head " + std::to_string(head),
                         [q, layer, head](Session&, UiState& ui) {
                             ui.tab = Tab::Stage;
                             ui.overlay = Overlay::Query; ui.query = q;
                             ui.overlay_layer = layer; ui.overlay_head = head; ui.opacity = 1.f;
                         });
            }
        // each tab's own states (its sweep hook), in the table's order
        for (const TabSpec& t : tab_table()) app.tabs[t.tab].sweep_states(plan);
        plan.add("overlay query reset", [](Session&, UiState& ui) { ui.query = 0; ui.overlay = Overlay::Cls; });
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
            if (tg.pool) {  // the pooling switch is for ViT classifiers with a cls token: skipped where refused
                Options o = base;
                o.pooling = tg.pool;
                try {
                    StageTable::get(app.s.config(), o);
                } catch (const std::exception&) {
                    continue;
                }
            }
            plan.add(std::string("toggle ") + tg.name, [tg, base](Session& s, UiState& ui) {
                Options o = base;
                o.affine = tg.affine; o.unbiased = tg.unbiased;
                o.bug_scale_after_softmax = tg.bug_scale; o.bug_reshape_patches = tg.bug_reshape;
                o.pooling = tg.pool;
                s.set_options(o);
                s.set_squash(tg.squash ? std::optional<bool>(true) : std::nullopt);
                ui.tab = Tab::Changes;
            });
            plan.add(std::string("[") + tg.name + "] map", [](Session&, UiState& ui) { ui.tab = Tab::Map; });
            plan.add(std::string("[") + tg.name + "] the tour's LayerNorm lesson", [](Session&, UiState& ui) {
                ui.learn = true; ui.lesson = 3; ui.lesson_go = true;
            });
            plan.add(std::string("[") + tg.name + "] workbench", [](Session&, UiState& ui) { ui.learn = false; ui.tab = Tab::Stage; });
            // every 3rd stage of the selection under each toggle (all of them once above)
            for (size_t k = 0; k < sel.size(); k += sel.size() > 24 ? 3 : 1)
                stage_state(sel[k], (k / 2) % 2 == 1, k % 2 ? Tab::Changes : Tab::Stage, std::string("[") + tg.name + "]");
        }
        plan.add("options reset", [base](Session& s, UiState&) { s.set_options(base); s.set_squash(std::nullopt); });
        add_learn_states(app.s, [&plan](std::string d, std::function<void(Session&, UiState&)> f) { plan.add(std::move(d), std::move(f)); });
        // Learn mode under a BUG switch and with affine off: its narration reads the trace's options
        plan.add("learn, affine off", [base](Session& s, UiState& ui) {
            Options o = base;
            o.affine = false;
            s.set_options(o);
            ui = UiState{};
            const auto steps = learn_steps(s);
            for (size_t k = 0; k < steps.size(); ++k)
                if (steps[k].id == "ln") ui.learn_step = int(k);
            ui.learn = true; ui.learn_time = kLearnStepSeconds; ui.learn_playing = false;
        });
        plan.add("learn options reset", [base](Session& s, UiState& ui) { s.set_options(base); ui = UiState{}; });
        // another input size, not square (2 x 3 patches): every tab and the overlays at that size, then back
        {
            const int P = c.patch;
            Options other = base;
            other.image_h = 2 * P;
            other.image_w = 3 * P;
            plan.add("input size 2x3 patches", [other](Session& s, UiState& ui) { s.set_options(other); ui.tab = Tab::Stage; });
            for (const TabSpec& t : tab_table()) {
                const Tab tab = t.tab;
                plan.add(std::string("[input 2x3 patches] tab ") + t.name, [tab](Session&, UiState& ui) { ui.tab = tab; ui.patch = 5; });
            }
            for (Overlay ov : {Overlay::Cls, Overlay::Rollout, Overlay::Query})
                plan.add(std::string("[input 2x3 patches] overlay ") + overlay_name(ov), [ov, TT](Session&, UiState& ui) {
                    ui.tab = Tab::Stage; ui.overlay = ov; ui.query = TT - 1; ui.overlay_layer = -1; ui.overlay_head = -1;
                });
            for (size_t k = 0; k < sel.size(); k += std::max<size_t>(1, sel.size() / 10))
                stage_state(sel[k], false, Tab::Stage, "[input 2x3 patches]");
            plan.add("input size back", [base](Session& s, UiState& ui) { s.set_options(base); ui.overlay = Overlay::Cls; ui.query = 0; });
        }
        if (app.s.can_compute_grads()) {
            // the "compute gradients" button's path, then the gradient views it enables
            plan.add("compute gradients", [](Session& s, UiState&) { s.set_grad_mode(GradMode::On); });
            for (size_t k = 0; k < sel.size(); k += std::max<size_t>(1, sel.size() / 12)) stage_state(sel[k], true, Tab::Stage, "[grads on]");
            plan.add("overlay grad (grads on)", [L](Session&, UiState& ui) {
                ui.overlay = Overlay::GradRollout; ui.overlay_layer = std::max(0, L - 1);
            });
        }
        states_ = std::move(plan.states);
    }

    const AppArgs& a_;
    std::vector<SweepState> states_;
    std::vector<AppArgs::WindowSize> sizes_;  // the layout sweep: the window size of each state
    AppArgs::WindowSize size_;                // the size asked for last
    int resize_wait_ = 0;
    size_t next_ = 0;
    int frame_in_state_ = 0, frames_ = 0, idle_ = 0;
    std::vector<std::string> failures_;
    std::chrono::steady_clock::time_point t0_;
};

}  // namespace

std::unique_ptr<Driver> make_driver(const AppArgs& a) {
    if (a.sweep) return std::make_unique<SweepDriver>(a);
    if (a.bench_frames > 0) return make_bench_driver(a);
    if (!a.screenshot.empty()) return make_screenshot_driver(a);
    return nullptr;
}

void write_layout(const std::string& path, AppContext& app, int W, int H) {
    Session& s = app.s;
    const UiState& ui = app.ui;
    const Probe& p = app.probe;
    const auto cur = shown_stage(s, ui);
    auto options = [](const Options& o) {
        return nlohmann::json{{"affine", o.affine}, {"unbiased", o.unbiased},
                              {"pooling", o.pooling ? int(*o.pooling) : -1},
                              {"bug_scale_after_softmax", o.bug_scale_after_softmax},
                              {"bug_reshape_patches", o.bug_reshape_patches},
                              {"interventions", o.iv.describe()},
                              {"image_h", o.image_h}, {"image_w", o.image_w}};  // 0: the model's own size
    };
    nlohmann::json j;
    j["window"] = {W, H};
    j["title"] = window_title(s);
    j["stage"] = cur ? cur->info->name : "";
    j["model"] = s.model_spec();
    j["image"] = s.image_path();
    j["error"] = s.error();
    j["errors"] = nlohmann::json::array();
    for (auto& e : s.errors()) j["errors"].push_back({{"title", e.title}, {"detail", e.detail}});
    j["shader_error"] = app.gfx.error();
    j["data_dir"] = data_paths().root;
    j["settings_error"] = app.settings ? app.settings->error() : "";
    j["options"] = options(s.options());
    j["shown_options"] = s.trace() ? options(s.shown_options()) : nlohmann::json();
    j["busy"] = s.busy();
    j["grads"] = s.trace() && s.trace()->has_grads();
    j["heads"] = s.config().heads;
    j["heads_from"] = s.model().heads_from;
    j["labels_from"] = s.model().labels_from;
    if (const auto& rq = s.heads_request()) j["heads_request"] = {{"spec", rq->spec}, {"width", rq->width}, {"choices", rq->choices}};
    else j["heads_request"] = nullptr;
    j["tab"] = tab_name(ui.tab);
    j["overlay"] = overlay_name(ui.overlay);
    j["query"] = ui.query;
    j["rects"] = nlohmann::json::object();
    for (auto& [k, r] : p.rects) j["rects"][k] = rect_json(r);
    j["numbers"] = nlohmann::json::object();
    for (auto& [k, v] : p.numbers) j["numbers"][k] = v;
    j["strings"] = nlohmann::json::object();
    for (auto& [k, v] : p.strings) j["strings"][k] = v;
    j["texts"] = nlohmann::json::array();
    for (auto& t : p.texts) j["texts"].push_back({{"group", t.group}, {"text", t.text}, {"box", rect_json(t.box)}, {"clip", rect_json(t.clip)}});
    j["windows"] = nlohmann::json::array();
    for (auto& w : p.windows)
        j["windows"].push_back({{"name", w.name}, {"rect", rect_json(w.rect)}, {"content_right", w.content_right},
                                {"content_bottom", w.content_bottom}, {"right", w.right}, {"bottom", w.bottom},
                                {"scroll_x", w.scroll_x}, {"scroll_y", w.scroll_y}, {"floating", w.floating}});
    j["heatmaps"] = nlohmann::json::array();
    for (auto& h : p.heatmaps)
        j["heatmaps"].push_back({{"name", h.name}, {"rect", rect_json(h.rect)}, {"rows", h.rows}, {"cols", h.cols},
                                 {"cell_w", h.cell_w}, {"cell_h", h.cell_h}, {"key", h.key}, {"width_bound", h.width_bound}});
    j["ui_scale"] = app.font_scale;
    // the declared keys (probe.cpp): tests/gui/layout.py reads nothing else, and fails on any undeclared key written
    j["schema"] = nlohmann::json::object();
    for (ProbeKind k : {ProbeKind::Top, ProbeKind::Rect, ProbeKind::Number, ProbeKind::String, ProbeKind::Group})
        j["schema"][probe_kind_name(k)] = nlohmann::json::array();
    for (const ProbeKey& k : probe_schema()) j["schema"][probe_kind_name(k.kind)].push_back(k.pattern);
    j["undeclared"] = p.undeclared();
    for (auto it = j.begin(); it != j.end(); ++it)
        if (!probe_declared(ProbeKind::Top, it.key())) j["undeclared"].push_back("top: " + it.key());
    std::ofstream(path) << j.dump(1);
}

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_layout_dump() {
    using K = ProbeKind;
    return {
        {K::Top, "window", "framebuffer [W, H]"},
        {K::Top, "title", "the window title"},
        {K::Top, "stage", "the current stage's name (\"\" when no trace)"},
        {K::Top, "model", "the model spec loaded"},
        {K::Top, "image", "the image path loaded"},
        {K::Top, "error", "the last error, one line"},
        {K::Top, "errors", "every unread error: [{title, detail}]"},
        {K::Top, "shader_error", "the heatmap shader's compile log"},
        {K::Top, "data_dir", "where the app found its data"},
        {K::Top, "settings_error", "the settings file's problem"},
        {K::Top, "options", "the options requested (the toolbar's)"},
        {K::Top, "shown_options", "the options of the trace on screen (null: no trace)"},
        {K::Top, "busy", "a forward pass is running"},
        {K::Top, "grads", "the trace on screen has gradients"},
        {K::Top, "heads", "the heads in force"},
        {K::Top, "heads_from", "where the head count came from"},
        {K::Top, "labels_from", "where the class names came from"},
        {K::Top, "heads_request", "the question of the head count (spec, width, choices), null when none"},
        {K::Top, "tab", "the tab shown, by name"},
        {K::Top, "overlay", "the overlay, as --overlay names it"},
        {K::Top, "query", "the query token"},
        {K::Top, "rects", "where things were drawn: {key: [x, y, w, h]}"},
        {K::Top, "numbers", "numbers drawn: {key: value}"},
        {K::Top, "strings", "texts shown: {key: text}"},
        {K::Top, "texts", "labels: [{group, text, box, clip}]"},
        {K::Top, "windows", "every window drawn: [{name, rect, content_right, content_bottom, right, bottom, scroll_x, scroll_y, floating}]"},
        {K::Top, "heatmaps", "every heatmap drawn: [{name, rect, rows, cols, cell_w, cell_h, key (drawn), width_bound}]"},
        {K::Top, "ui_scale", "the content scale (logical pixels are the framebuffer's over it)"},
        {K::Top, "schema", "this list"},
        {K::Top, "undeclared", "keys written that this list does not declare (must be empty)"},
    };
}

}  // namespace vit::app
