// vitscope: the desktop app. main() reads top to bottom: parse the arguments, open the window,
// load what the arguments name, then the loop: poll events, let the session take a finished
// forward pass, draw a frame (frame.cpp), render, run exports (exports.cpp), and hand the
// frame to the headless driver when there is one (headless.cpp).
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui_internal.h>

#include <cfloat>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "app_args.h"
#include "core/kernels/blas.h"
#include "exports.h"
#include "frame.h"
#include "headless.h"
#include "paths.h"
#include "settings_app.h"

using namespace vit;
using namespace vit::app;

namespace {

std::vector<std::string> g_dropped;
void on_drop(GLFWwindow*, int n, const char** paths) {
    for (int i = 0; i < n; ++i) g_dropped.emplace_back(paths[i]);
}

GLFWwindow* open_window(const AppArgs& a) {
    if (!glfwInit()) {
        std::fprintf(stderr, "vitscope: cannot initialise GLFW (is there a display? for headless use, run under xvfb-run)\n");
        return nullptr;
    }
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GL_TRUE);
    GLFWwindow* win = glfwCreateWindow(a.width, a.height, "ViTScope", nullptr, nullptr);
    if (!win) {
        std::fprintf(stderr, "vitscope: cannot create an OpenGL 3.3 core window\n");
        glfwTerminate();
        return nullptr;
    }
    glfwMakeContextCurrent(win);
    glfwSwapInterval(a.headless() ? 0 : 1);
    glfwSetDropCallback(win, on_drop);
    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;  // a fixed layout; nothing to remember
    const char* font = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
    if (std::filesystem::exists(font)) io.Fonts->AddFontFromFileTTF(font, 15.f);
    ImGui::StyleColorsDark();
    ImGuiStyle& st = ImGui::GetStyle();
    st.WindowRounding = 0; st.FrameRounding = 3; st.WindowBorderSize = 1;
    ImGui_ImplGlfw_InitForOpenGL(win, true);
    ImGui_ImplOpenGL3_Init("#version 330 core");
    return win;
}

void close_window(GLFWwindow* win) {
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
    glfwDestroyWindow(win);
    glfwTerminate();
}

// Loads what the arguments name. A failure never substitutes silently: the default model stays
// (and the title says so), a bad image leaves no image (the views say so), and each failure is
// in the window's error panel with its full reason. Returns false if anything failed.
bool load_startup(AppContext& app, const AppArgs& a, const Settings& settings) {
    Session& s = app.s;
    bool ok = true;
    auto report = [&] {
        ok = false;
        const ErrorItem& e = s.errors().back();
        std::fprintf(stderr, "vitscope: %s: %s\n", e.title.c_str(), e.detail.c_str());
    };
    if (a.no_grads) s.set_grad_mode(GradMode::Off);
    if (a.model != "default" && !s.load_model(a.model, a.heads)) report();
    if (!a.labels.empty() && !s.load_labels(a.labels)) report();
    std::string image = a.image.empty() ? default_sample_image() : a.image;
    if (a.squash) s.set_squash(true);
    if (!image.empty() && !s.load_image(image)) report();
    UiState& ui = app.ui;
    restore_view(settings, s, ui);  // the remembered options and view; the flags go on top
    Options o = s.options();
    if (a.no_affine) o.affine = false;
    if (a.unbiased) o.unbiased = true;
    if (a.bug_scale_after_softmax) o.bug_scale_after_softmax = true;
    if (a.bug_reshape_patches) o.bug_reshape_patches = true;
    if (!a.pooling.empty()) o.pooling = a.pooling == "mean" ? Pooling::Mean : Pooling::Cls;
    s.set_options(o);
    if (a.overlay) ui.overlay = *a.overlay;
    if (a.query >= 0) {
        ui.query = a.query;  // out of range for the model: the image panel says so in place
        if (!a.overlay) ui.overlay = Overlay::Query;
    }
    if (a.layer >= 0) ui.overlay_layer = a.layer;
    if (a.head >= 0) { ui.head = a.head; ui.overlay_head = a.head; }
    if (a.tab) ui.tab = *a.tab;
    ui.tour_step = a.tour;  // applied to the stage once the trace is in (views_map.cpp)
    if (a.opacity >= 0) ui.opacity = a.opacity;
    if (a.distance_images > 0) { ui.distance_images = a.distance_images; ui.distance_autostart = true; }
    ui.export_dir = a.export_dir;
    ui.patch = a.patch;
    if (a.cell) { ui.cell_r = a.cell->first; ui.cell_c = a.cell->second; }
    ui.hover = !a.headless() || a.hover.has_value();
    return ok;
}

// --stage, applied once the first trace is in. Returns false if the trace has no such stage.
bool apply_stage(AppContext& app, const AppArgs& a) {
    const Trace* t = app.s.trace();
    std::string full = a.stage;
    if (a.layer >= 0 && a.stage.rfind("blocks.", 0) != 0 && t->index_of(a.stage) < 0)
        full = "blocks." + std::to_string(a.layer) + "." + a.stage;
    int idx = t->index_of(full);
    if (idx < 0) {
        app.s.add_error("No stage '" + full + "'", "this model's trace has no stage of that name (try 'vitscope-cli info')");
        std::fprintf(stderr, "vitscope: no stage '%s' in this model's trace (try 'vitscope-cli info')\n", full.c_str());
        return false;
    }
    app.ui.stage = idx;
    return true;
}

int run_loop(AppContext& app, const AppArgs& a, Driver* driver, int exit_code, Settings& settings) {
    Session& s = app.s;
    bool stage_applied = a.stage.empty();
    while (!glfwWindowShouldClose(app.win)) {
        glfwPollEvents();
        for (auto& p : g_dropped) {
            std::string ext = std::filesystem::path(p).extension().string();
            if (ext == ".safetensors" || ext == ".pth" || ext == ".pt" || ext == ".bin") s.begin_load_model(p, a.heads);
            else s.load_image(p);
        }
        g_dropped.clear();
        if (driver) driver->before_poll(app);
        // Small models finish within the frame; large ones keep the old trace on screen.
        s.poll(driver ? driver->poll_wait_ms() : 8.0);
        if (s.trace() && !stage_applied) {
            stage_applied = true;
            if (!apply_stage(app, a) && a.headless()) return 1;
        }
        if (driver) driver->before_frame(app);

        ImGui_ImplOpenGL3_NewFrame();
        ImGui_ImplGlfw_NewFrame();
        if (a.headless()) {
            // Xvfb's pointer sits wherever it is: no hover (and no tooltip) unless --hover asks.
            ImGui::GetIO().MousePos = a.hover ? ImVec2(a.hover->first, a.hover->second) : ImVec2(-FLT_MAX, -FLT_MAX);
        }
        ImGui::NewFrame();
        begin_frame_gl();
        int W, H;
        glfwGetFramebufferSize(app.win, &W, &H);
        try {
            draw_frame(app, W, H);
        } catch (const std::exception& e) {
            // a view's bug: recover ImGui's stacks, report it, keep the window alive
            ImGui::ErrorCheckEndFrameRecover(nullptr);
            if (driver) driver->frame_failed(app, e.what());
            s.add_error("A view failed while drawing", e.what());
        }
        remember(settings, s, app.ui);
        ImGui::Render();
        glViewport(0, 0, W, H);
        glClearColor(0.09f, 0.09f, 0.10f, 1);
        glClear(GL_COLOR_BUFFER_BIT);
        ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());

        // exports read the back buffer before the swap
        for (auto& why : run_exports(app, W, H))
            if (a.headless()) {
                std::fprintf(stderr, "vitscope: export failed: %s\n", why.c_str());
                exit_code = 1;
            }
        if (driver)
            if (auto rc = driver->after_render(app, W, H)) return *rc ? *rc : exit_code;
        glfwSwapBuffers(app.win);
    }
    return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
    vit::blas::init();  // the BLAS kernel for this CPU, before anything else runs
    AppArgs a;
    if (auto rc = parse_args(argc, argv, a)) return *rc;
    // Recent files and options: off in headless runs unless --settings names a file.
    Settings settings(settings_file(a.settings, a.no_settings, a.headless()));
    settings.load();
    if (settings.enabled()) set_current_settings(&settings);
    if (!settings.error().empty()) std::fprintf(stderr, "vitscope: %s\n", settings.error().c_str());
    restore_launch(settings, a.model_given, a.model, a.image);
    GLFWwindow* win = open_window(a);
    if (!win) return 1;
    int exit_code = 0;
    {
        auto app = std::make_unique<AppContext>();
        app->win = win;
        app->ui.shader_error = init_heatmap_program(a.shader_dir);
        if (!app->ui.shader_error.empty()) std::fprintf(stderr, "vitscope: %s\n", app->ui.shader_error.c_str());
        // A bad file: the window stays open with the error panel. Headless runs exit 1 (message on
        // stderr), after saving the screenshot when one was asked for (it shows what a user would see).
        // An unusable settings file: named in the error panel too (defaults in use, the file untouched).
        if (!settings.error().empty()) app->s.add_error("Settings file not used: " + settings.path(), settings.error());
        const bool loaded = load_startup(*app, a, settings);
        if (!loaded && a.headless()) exit_code = 1;
        if (loaded || !a.headless() || !a.screenshot.empty()) {
            if (a.train_epochs > 0) app->train.StartHeadless(a.train_epochs, a.train_limit);
            std::unique_ptr<Driver> driver = make_driver(a);
            exit_code = run_loop(*app, a, driver.get(), exit_code, settings);
        }
        remember(settings, app->s, app->ui, true);
    }
    close_window(win);
    return exit_code;
}
