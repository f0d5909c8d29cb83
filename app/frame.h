// One frame of the app: the fixed layout of toolbar, navigator, centre tabs, image panel,
// status bar and (when there is one) the error panel. main() calls it between NewFrame and Render.
#pragma once
#include <string>

#include "interventions_ui.h"
#include "learn.h"
#include "probe.h"
#include "tabs/tab.h"
#include "views.h"

struct GLFWwindow;

namespace vit::app {

class Settings;

// Everything the app holds across frames.
struct AppContext {
    AppContext() : s(jobs), tabs(jobs) {}
    ~AppContext() { jobs.shutdown(); }  // every job ends before what it may use goes
    JobQueue jobs;                  // the background work: forward passes, loads, averages, training
    GLFWwindow* win = nullptr;
    Gfx gfx;                        // the heatmap program (before anything that draws with it)
    Session s;
    UiState ui;                     // the selection
    Tabs tabs;                      // the centre tabs, each with its state (tabs/tab.h)
    Toolbar toolbar;
    ImagePanel image;
    InterventionsUi iv;             // the interventions' controls (interventions_ui.h)
    LearnView learn;                // Learn mode's textures (learn.h)
    Probe probe;                    // what was drawn where this frame (--layout, the sweep)
    ExportRequest exports;          // asked for this frame (toolbar buttons, --export-*)
    std::string export_dir = ".";
    std::string notice;             // one line in the status bar ("saved ...")
    bool hover = true;              // false in headless screenshots: no tooltip unless --hover asks
    Settings* settings = nullptr;   // the settings file, null when off
    std::vector<std::string> dropped;  // files dropped on the window, taken by the next frame
    std::optional<Tab> last_tab;    // the tab shown last frame (a tab chosen by key or click is selected once)
    std::string title;              // the window title now set
    float ui_scale = 1;             // the content scale asked for (--ui-scale, else the monitor's)
    float font_scale = 0;           // the scale the font was built for (main.cpp apply_ui_scale)

    ViewCtx view() { return ViewCtx{s, ui, probe, gfx, hover, notice, settings, &jobs}; }
};

// Draws every view for a window of W x H logical pixels (the framebuffer over the content scale).
// Throws only if a view has a bug (the sweep catches it).
void draw_frame(AppContext& app, float W, float H);
// The widths of the side panels for a window W logical pixels wide (the centre gets the rest).
struct PanelWidths { float left, right; };
PanelWidths panel_widths(float W);
// "ViTScope - <model> - <image>": what is loaded, always (a failed load leaves the old names).
std::string window_title(const Session& s);

}  // namespace vit::app
