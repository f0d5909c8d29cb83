// One frame of the app: the fixed layout of toolbar, navigator, centre tabs, image panel,
// status bar and (when there is one) the error panel. main() calls it between NewFrame and Render.
#pragma once
#include <optional>
#include <string>

#include "views.h"
#include "views_train.h"

struct GLFWwindow;

namespace vit::app {

// Everything the app holds across frames.
struct AppContext {
    GLFWwindow* win = nullptr;
    Session s;
    UiState ui;
    Textures tx;
    TrainPanel train;
    std::optional<Tab> last_tab;  // the tab shown last frame (a tab chosen by key or click is selected once)
    std::string title;            // the window title now set
};

// Draws every view for a W x H framebuffer. Throws only if a view has a bug (the sweep catches it).
void draw_frame(AppContext& app, int W, int H);
// "ViTScope - <model> - <image>": what is loaded, always (a failed load leaves the old names).
std::string window_title(const Session& s);

}  // namespace vit::app
