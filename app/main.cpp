// vitscope: the desktop app. main() reads top to bottom: parse the arguments, open the window,
// load what the arguments name, then the loop: poll events, let the session take a finished
// forward pass, draw a frame (frame.cpp), render, run exports (exports.cpp), and hand the
// frame to the headless driver when there is one (headless.cpp).
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui_internal.h>

#include <algorithm>
#include <cfloat>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "app_args.h"
#include "core/kernels/blas.h"
#include "exports.h"
#include "frame.h"
#include "headless.h"
#include "interventions_ui.h"
#include "paths.h"
#include "settings_app.h"
#include "tensor_access.h"
#include "model_map.h"

using namespace vit;
using namespace vit::app;

namespace {

// Files dropped on the window go to the AppContext the window's user pointer names.
void on_drop(GLFWwindow* win, int n, const char** paths) {
    auto* app = static_cast<AppContext*>(glfwGetWindowUserPointer(win));
    if (!app) return;
    for (int i = 0; i < n; ++i) app->dropped.emplace_back(paths[i]);
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
    ImGui::StyleColorsDark();
    ImGuiStyle& st = ImGui::GetStyle();
    st.WindowRounding = 0; st.FrameRounding = 3; st.WindowBorderSize = 1;
    // opaque panels and tooltips: nothing behind them shows through their text
    st.Colors[ImGuiCol_WindowBg].w = 1.f;
    st.Colors[ImGuiCol_PopupBg].w = 1.f;
    st.Colors[ImGuiCol_ChildBg].w = 0.f;
    ImGui_ImplGlfw_InitForOpenGL(win, true);
    ImGui_ImplOpenGL3_Init("#version 330 core");
    return win;
}

// The content scale (HiDPI): ImGui lays out in logical pixels (framebuffer / scale) and renders at
// the framebuffer's resolution, so every size in the views scales at once; the font is rasterised at
// its size on screen (15 x scale px) and drawn at 1 / scale, so text stays sharp. Rebuilt when the
// scale changes (a window moved to another monitor, the sweep's 2x round).
void apply_ui_scale(AppContext& app) {
    const float want = std::clamp(app.ui_scale, 0.5f, 4.f);
    if (want == app.font_scale) return;
    ImGuiIO& io = ImGui::GetIO();
    io.Fonts->Clear();
    const char* font = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
    if (std::filesystem::exists(font)) {
        io.Fonts->AddFontFromFileTTF(font, 15.f * want);
    } else {
        ImFontConfig fc;
        fc.SizePixels = 13.f * want;
        io.Fonts->AddFontDefault(&fc);
    }
    io.FontGlobalScale = 1.f / want;
    if (app.font_scale > 0) {  // the backend made the first atlas texture; later ones are remade here
        ImGui_ImplOpenGL3_DestroyFontsTexture();
        ImGui_ImplOpenGL3_CreateFontsTexture();
    }
    app.font_scale = want;
}

// The monitor's content scale (1 on a plain X server, 2 on a HiDPI desktop set to 200%).
float content_scale(GLFWwindow* win) {
    float xs = 1, ys = 1;
    glfwGetWindowContentScale(win, &xs, &ys);
    return xs > 0 ? xs : 1.f;
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
    if (a.grads) s.set_grad_mode(GradMode::On);
    s.set_stages_mode(a.stages == "on-demand" ? StagesMode::OnDemand : a.stages == "all" ? StagesMode::All : StagesMode::Auto);
    s.set_offline(a.offline);
    // In the window (and with --while-loading) a model loads as a job: the window is up at once and
    // says what it is doing; headless runs load it first, so their exit codes name a bad file.
    // The default model is in memory already: loaded again only to check a --heads against it.
    const bool load = a.model != "default" || a.heads > 0;
    if (load && a.load_in_background()) {
        s.begin_load_model(a.model, a.heads);
    } else if (load && !s.load_model(a.model, a.heads)) {
        if (s.heads_request()) {  // not an error panel entry: the window asks for the count
            ok = false;
            std::fprintf(stderr, "vitscope: %s\n", s.heads_request()->why.c_str());
        } else {
            report();
        }
    }
    if (!a.labels.empty() && !s.load_labels(a.labels)) report();
    std::string image = a.image.empty() ? default_sample_image(a.model) : a.image;
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
    if (a.image_h) { o.image_h = a.image_h; o.image_w = a.image_w; }  // checked against the model by model_range_error
    s.set_options(o);
    if (a.overlay) ui.overlay = *a.overlay;
    if (a.query >= 0) {
        ui.query = a.query;  // out of range for the model: the image panel says so in place
        if (!a.overlay) ui.overlay = Overlay::Query;
    }
    if (a.layer >= 0) ui.overlay_layer = a.layer;
    if (a.head >= 0) { ui.head = a.head; ui.overlay_head = a.head; }
    if (a.tab) ui.tab = *a.tab;
    if (a.tab || !a.stage.empty()) ui.learn = false;  // asked for a view of the workbench
    if (a.tour >= 0) {  // the tour's lesson N: Learn mode goes to its step once the trace is in (learn.cpp)
        ui.learn = true;
        ui.lesson = a.tour;
        ui.lesson_go = true;
    }
    if (a.learn >= 0) {
        ui.learn = true;
        ui.learn_step = a.learn;
    }
    if (a.learn_time >= 0) {
        ui.learn_time = a.learn_time;
        ui.learn_playing = false;
    }
    if (a.opacity >= 0) ui.opacity = a.opacity;
    ui.attention_per_map = a.attention_per_map;
    ui.changes_largest_first = a.changes_largest_first;
    ui.input_channels = a.input_channels;
    ui.attention_image = a.attention_image;
    app.export_dir = a.export_dir;
    ui.patch = a.patch;
    if (a.cell) { ui.cell_r = a.cell->first; ui.cell_c = a.cell->second; }
    app.hover = !a.headless() || a.hover.has_value();
    return ok;
}

// --stage takes a full name, or with --layer a block stage's name within its block ("attn.pattern")
std::string stage_arg_name(const AppArgs& a) {
    if (a.layer >= 0 && !parse_stage_name(a.stage)) return "blocks." + std::to_string(a.layer) + "." + a.stage;
    return a.stage;
}

// The block of the stage --stage names (-1: none, or not a block stage). The first pass runs before
// the stage is applied (that needs the trace); an on-demand pass keeps this block whole, so the
// stage asked for is not recomputed once the pass is in.
int stage_arg_block(const AppArgs& a) {
    if (a.stage.empty()) return -1;
    const std::optional<StageId> id = parse_stage_name(stage_arg_name(a));
    return id ? id->layer : -1;
}

// --stage, applied once the first trace is in. Returns false if the trace has no such stage.
bool apply_stage(AppContext& app, const AppArgs& a) {
    const Trace* t = app.s.trace();
    const std::string full = stage_arg_name(a);
    const std::optional<StageId> id = parse_stage_name(full);
    if (!id || !select_stage(app.ui, *t, *id)) {
        app.s.add_error("No stage '" + full + "'", "this model's trace has no stage of that name (try 'vitscope-cli info')");
        std::fprintf(stderr, "vitscope: no stage '%s' in this model's trace (try 'vitscope-cli info')\n", full.c_str());
        return false;
    }
    return true;
}

// --cell, checked against the slice on screen once the stage is applied. False (and the message on
// stderr) when it is outside: bad usage, exit 2.
bool check_cell(AppContext& app, const AppArgs& a) {
    const auto e = shown_stage(app.s, app.ui);
    if (!a.cell || !e) return true;
    const Slice2D sl = slice2d(*e->value, app.ui.head);
    const std::string what = e->info->name + (sl.slices > 1 ? ", head " + std::to_string(sl.slice) : std::string());
    const std::string why = cell_range_error(a, what, sl.rows, sl.cols);
    if (why.empty()) return true;
    std::fprintf(stderr, "vitscope: %s\n", why.c_str());
    return false;
}

int run_loop(AppContext& app, const AppArgs& a, Driver* driver, int exit_code, Settings& settings) {
    Session& s = app.s;
    bool stage_applied = a.stage.empty(), cell_checked = false;
    bool range_checked = !(a.model != "default" && a.load_in_background());
    while (!glfwWindowShouldClose(app.win)) {
        glfwPollEvents();
        for (auto& p : app.dropped) {
            std::string ext = std::filesystem::path(p).extension().string();
            if (ext == ".safetensors" || ext == ".pth" || ext == ".pt" || ext == ".bin") s.begin_load_model(p, a.heads);
            else s.load_image(p);
        }
        app.dropped.clear();
        if (driver) driver->before_poll(app);
        s.set_view_block(stage_applied ? app.ui.stage.layer : stage_arg_block(a));
        // Small models finish within the frame; large ones keep the old trace on screen.
        s.poll(driver ? driver->poll_wait_ms() : 8.0);
        if (!range_checked && !s.loading()) {
            // a model loaded in the background: --layer, --head, ... against it once it is in
            range_checked = true;
            if (s.model_spec() == a.model && !s.heads_request()) {
                const std::string range = model_range_error(a, s.config(), tour_size(s, app.learn.lessons));
                if (!range.empty()) {
                    std::fprintf(stderr, "vitscope: %s\n", range.c_str());
                    if (a.headless()) return 2;
                    s.add_error("A command-line flag is out of range", range);
                }
            } else if (!s.heads_request() && a.headless()) {
                return 1;  // the load failed: the error panel and stderr name the file
            }
        }
        if (s.trace() && !stage_applied) {
            stage_applied = true;
            if (!apply_stage(app, a) && a.headless()) return 1;
        }
        if (s.trace() && stage_applied && !cell_checked) {
            cell_checked = true;
            if (!check_cell(app, a)) return 2;
        }
        if (driver) driver->before_frame(app);

        if (a.ui_scale <= 0 && !a.headless()) app.ui_scale = content_scale(app.win);  // follows the monitor
        apply_ui_scale(app);
        ImGui_ImplOpenGL3_NewFrame();
        ImGui_ImplGlfw_NewFrame();
        int W, H;
        glfwGetFramebufferSize(app.win, &W, &H);
        {
            // logical pixels: the framebuffer divided by the content scale (the mouse too)
            ImGuiIO& io = ImGui::GetIO();
            const float sc = app.font_scale;
            int ww = 1, wh = 1;
            glfwGetWindowSize(app.win, &ww, &wh);
            io.DisplaySize = ImVec2(float(W) / sc, float(H) / sc);
            io.DisplayFramebufferScale = ImVec2(sc, sc);
            if (io.MousePos.x > -FLT_MAX / 2 && ww > 0 && wh > 0)
                io.MousePos = ImVec2(io.MousePos.x * float(W) / float(ww) / sc, io.MousePos.y * float(H) / float(wh) / sc);
        }
        if (a.headless()) {
            // Xvfb's pointer sits wherever it is: no hover (and no tooltip) unless --hover asks.
            ImGui::GetIO().MousePos = a.hover ? ImVec2(a.hover->first, a.hover->second) : ImVec2(-FLT_MAX, -FLT_MAX);
        }
        ImGui::NewFrame();
        app.gfx.begin_frame();
        try {
            draw_frame(app, ImGui::GetIO().DisplaySize.x, ImGui::GetIO().DisplaySize.y);
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
    if (!settings.error().empty()) std::fprintf(stderr, "vitscope: %s\n", settings.error().c_str());
    restore_launch(settings, a.model_given, a.model, a.image);
    GLFWwindow* win = open_window(a);
    if (!win) return 1;
    int exit_code = 0;
    {
        auto app = std::make_unique<AppContext>();
        app->win = win;
        app->ui_scale = a.ui_scale > 0 ? a.ui_scale : content_scale(win);
        apply_ui_scale(*app);
        glfwSetWindowUserPointer(win, app.get());
        if (settings.enabled()) app->settings = &settings;
        if (std::string err = app->gfx.init(a.shader_dir); !err.empty()) std::fprintf(stderr, "vitscope: %s\n", err.c_str());
        // A bad file: the window stays open with the error panel. Headless runs exit 1 (message on
        // stderr), after saving the screenshot when one was asked for (it shows what a user would see).
        // An unusable settings file: named in the error panel too (defaults in use, the file untouched).
        if (!settings.error().empty()) app->s.add_error("Settings file not used: " + settings.path(), settings.error());
        const bool loaded = load_startup(*app, a, settings);
        // --lessons: read now, so that a bad file is named at once (bad usage: exit 2 when headless)
        app->learn.lessons_path = a.lessons;
        app->learn.jobs = &app->jobs;  // the "what if" lessons' second passes run as jobs
        app->learn.pending_answer = a.learn_answer;
        // (the bundled ones too: --tour N is checked against their number)
        bool lessons_bad = false;
        app->learn.lessons_loaded = true;
        try {
            app->learn.lessons = load_lessons(a.lessons.empty() ? default_lessons_path() : a.lessons);
        } catch (const std::exception& e) {
            app->learn.lessons_error = e.what();  // Learn mode says it in its narration
            if (!a.lessons.empty()) {
                std::fprintf(stderr, "vitscope: --lessons: %s\n", e.what());
                lessons_bad = a.headless();
                app->s.add_error("Lessons not read", e.what());
            }
        }
        if (!loaded && a.headless()) exit_code = 1;
        // --layer, --head, --patch, --query, --tour against the model asked for (when it loaded)
        const bool model_in = !app->s.heads_request() && (a.model == "default" || app->s.model_spec() == a.model) &&
                              !app->s.loading();
        std::string range = model_in ? model_range_error(a, app->s.config(), tour_size(app->s, app->learn.lessons)) : "";
        if (range.empty() && model_in) range = apply_intervention_flags(app->s, a);  // --ablate-head ... (exit 2 when bad)
        if (lessons_bad) {
            exit_code = 2;
        } else if (!range.empty()) {
            std::fprintf(stderr, "vitscope: %s\n", range.c_str());
            exit_code = 2;
        } else if (loaded || !a.headless() || !a.screenshot.empty()) {
            app->tabs.apply_args(a);  // --train-epochs, --distance-images
            std::unique_ptr<Driver> driver = make_driver(a);
            exit_code = run_loop(*app, a, driver.get(), exit_code, settings);
        }
        remember(settings, app->s, app->ui, true);
        glfwSetWindowUserPointer(win, nullptr);
    }
    close_window(win);
    return exit_code;
}
