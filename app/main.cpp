// vitscope: the desktop app. A linear main loop: poll events, let the session
// take a finished forward pass, draw every view, render, and (headless) save
// a screenshot. Views live in views_*.cpp; the model lives in core/.
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/image.h"
#include "core/io.h"
#include "gl_util.h"
#include "views.h"
#include "views_train.h"

using namespace vit;
using namespace vit::app;

namespace {

std::vector<std::string> g_dropped;
void on_drop(GLFWwindow*, int n, const char** paths) {
    for (int i = 0; i < n; ++i) g_dropped.emplace_back(paths[i]);
}

int key_code(const std::string& k) {
    static const std::map<std::string, int> m{{"Right", GLFW_KEY_RIGHT}, {"Left", GLFW_KEY_LEFT}, {"Up", GLFW_KEY_UP},
                                              {"Down", GLFW_KEY_DOWN}, {"PageUp", GLFW_KEY_PAGE_UP},
                                              {"PageDown", GLFW_KEY_PAGE_DOWN}, {"a", GLFW_KEY_A}, {"u", GLFW_KEY_U},
                                              {"h", GLFW_KEY_H}, {"g", GLFW_KEY_G}, {"Home", GLFW_KEY_HOME},
                                              {"End", GLFW_KEY_END}, {"1", GLFW_KEY_1}, {"2", GLFW_KEY_2},
                                              {"3", GLFW_KEY_3}, {"4", GLFW_KEY_4}};
    auto it = m.find(k);
    return it == m.end() ? -1 : it->second;
}

std::string safe_name(std::string s) {
    for (auto& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '_' && ch != '-') ch = '_';
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App cli{"vitscope: step through a Vision Transformer stage by stage"};
    std::string model = "default", image, stage, overlay, screenshot, layout_out, shader_dir, keys;
    int layer = -1, head = -1, heads = 0, width = 1600, height = 1000, bench_frames = 0, tab = -1, patch = -1;
    bool no_affine = false, unbiased = false, bench_toggle = false;
    cli.add_option("--model,-m", model, "'default', a preset, or a .safetensors checkpoint")->default_val("default");
    cli.add_option("--image,-i", image, "image to load (default: a bundled Fashion-MNIST sample)");
    std::string labels;
    cli.add_option("--labels", labels, "class names, one per line");
    cli.add_option("--heads", heads, "number of heads, if the checkpoint does not say");
    cli.add_option("--stage", stage, "stage to show: a trace name (blocks.2.attn.pattern) or, with --layer, attn.pattern");
    cli.add_option("--layer", layer, "layer for --stage and the overlay");
    cli.add_option("--head", head, "head to show (and for the overlay; default: mean of heads)");
    cli.add_option("--patch", patch, "select a patch (its token is highlighted everywhere)");
    cli.add_option("--overlay", overlay, "overlay on the image")->check(CLI::IsMember({"none", "cls", "rollout", "grad"}));
    float opacity = -1;
    cli.add_option("--opacity", opacity, "overlay opacity, 0..1")->check(CLI::Range(0.0, 1.0));
    cli.add_option("--tab", tab, "0 stage, 1 attention maps, 2 changes, 3 train")->check(CLI::Range(0, 3));
    cli.add_flag("--no-affine", no_affine, "LayerNorm without elementwise_affine");
    cli.add_flag("--unbiased", unbiased, "LayerNorm with unbiased (N-1) variance");
    cli.add_option("--screenshot", screenshot, "render headless-style, save a PNG of the window and exit");
    cli.add_option("--layout", layout_out, "with --screenshot: write where views were drawn (JSON, for tests)");
    cli.add_option("--keys", keys, "with --screenshot: key presses to send first, e.g. Right,Right,a");
    cli.add_option("--width", width, "window width")->default_val(1600);
    cli.add_option("--height", height, "window height")->default_val(1000);
    int train_epochs = 0, train_limit = 0;
    cli.add_option("--train-epochs", train_epochs, "start the Train panel at launch for N epochs (headless: wait for it)");
    cli.add_option("--train-limit", train_limit, "with --train-epochs: train on the first N images");
    bool export_view = false, export_npy = false, export_npz = false;
    std::string export_dir = ".";
    cli.add_flag("--export-view", export_view, "with --screenshot: also export the centre view as PNG (as the toolbar button does)");
    cli.add_flag("--export-npy", export_npy, "with --screenshot: also export the current tensor as .npy");
    cli.add_flag("--export-npz", export_npz, "with --screenshot: also export the whole trace as .npz");
    cli.add_option("--export-dir", export_dir, "directory for exports")->default_val(".");
    cli.add_option("--shader-dir", shader_dir, "load shaders from this directory (live editing; errors shown in the window)");
    cli.add_option("--bench-frames", bench_frames, "render N frames and print frame times");
    cli.add_flag("--bench-toggle", bench_toggle, "with --bench-frames: toggle elementwise_affine every frame");
    try {
        cli.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return cli.exit(e) == 0 ? 0 : 2;
    }
    const bool headless = !screenshot.empty() || bench_frames > 0;

    if (!glfwInit()) {
        std::fprintf(stderr, "vitscope: cannot initialise GLFW (is there a display? for headless use, run under xvfb-run)\n");
        return 1;
    }
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GL_TRUE);
    GLFWwindow* win = glfwCreateWindow(width, height, "ViTScope", nullptr, nullptr);
    if (!win) {
        std::fprintf(stderr, "vitscope: cannot create an OpenGL 3.3 core window\n");
        glfwTerminate();
        return 1;
    }
    glfwMakeContextCurrent(win);
    glfwSwapInterval(headless ? 0 : 1);
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

    UiState ui;
    ui.shader_error = init_heatmap_program(shader_dir);
    if (!ui.shader_error.empty()) std::fprintf(stderr, "vitscope: %s\n", ui.shader_error.c_str());
    Textures tx;
    Session s;
    TrainPanel train;
    int exit_code = 0;
    if (!s.load_model(model, heads)) {
        std::fprintf(stderr, "vitscope: %s\n", s.error().c_str());
        if (headless) return 1;
        s.load_model("default");
    }
    if (!labels.empty() && !s.load_labels(labels)) {
        std::fprintf(stderr, "vitscope: %s\n", s.error().c_str());
        if (headless) return 1;
    }
    if (image.empty()) {
        for (auto p : {std::string(VITSCOPE_ASSETS_DIR) + "/samples/9_ankle_boot_test0.png",
                       std::string("assets/samples/9_ankle_boot_test0.png")})
            if (std::filesystem::exists(p)) { image = p; break; }
    }
    if (!image.empty() && !s.load_image(image)) {
        std::fprintf(stderr, "vitscope: %s\n", s.error().c_str());
        if (headless) return 1;
    }
    Options o;
    o.affine = !no_affine;
    o.unbiased = unbiased;
    s.set_options(o);
    if (overlay == "none") ui.overlay = 0;
    if (overlay == "cls") ui.overlay = 1;
    if (overlay == "rollout") ui.overlay = 2;
    if (overlay == "grad") ui.overlay = 3;
    if (layer >= 0) ui.overlay_layer = layer;
    if (head >= 0) { ui.head = head; ui.overlay_head = head; }
    if (tab >= 0) ui.tab = tab;
    if (opacity >= 0) ui.opacity = opacity;
    ui.export_dir = export_dir;
    ui.patch = patch;
    bool stage_applied = stage.empty();
    std::vector<int> key_queue;
    if (!keys.empty()) {
        std::stringstream ks(keys);
        std::string k;
        while (std::getline(ks, k, ',')) {
            int code = key_code(k);
            if (code < 0) { std::fprintf(stderr, "vitscope: unknown key '%s' in --keys\n", k.c_str()); return 2; }
            key_queue.push_back(code);
        }
    }

    if (train_epochs > 0) train.StartHeadless(train_epochs, train_limit);
    int frames_after_result = 0, bench_done = 0;
    std::vector<double> frame_ms;
    int last_tab = -1;
    while (!glfwWindowShouldClose(win)) {
        auto f0 = std::chrono::steady_clock::now();
        glfwPollEvents();
        for (auto& p : g_dropped) {
            std::string ext = std::filesystem::path(p).extension().string();
            if (ext == ".safetensors") s.begin_load_model(p, heads);
            else s.load_image(p);
        }
        g_dropped.clear();
        if (bench_toggle && s.trace()) { Options t = s.options(); t.affine = !t.affine; s.set_options(t); }
        // Small models finish within the frame; large ones keep the old trace on screen.
        s.poll(bench_toggle ? 1e6 : (headless ? 50.0 : 8.0));
        if (s.trace() && !stage_applied) {
            std::string full = stage;
            if (layer >= 0 && stage.rfind("blocks.", 0) != 0 && s.trace()->index_of(stage) < 0)
                full = "blocks." + std::to_string(layer) + "." + stage;
            int idx = s.trace()->index_of(full);
            if (idx < 0) {
                std::fprintf(stderr, "vitscope: no stage '%s' in this model's trace (try 'vitscope-cli info')\n", full.c_str());
                if (headless) { exit_code = 1; break; }
            } else ui.stage = idx;
            stage_applied = true;
        }
        // keys sent by --keys go through the GLFW backend's own key callback
        if (s.trace() && !key_queue.empty() && frames_after_result >= 2) {
            int k = key_queue.front();
            static bool down = false;
            ImGui_ImplGlfw_KeyCallback(win, k, 0, down ? GLFW_RELEASE : GLFW_PRESS, 0);
            if (down) key_queue.erase(key_queue.begin());
            down = !down;
        }

        ImGui_ImplOpenGL3_NewFrame();
        ImGui_ImplGlfw_NewFrame();
        ImGui::NewFrame();
        begin_frame_gl();
        ui.rects.clear();
        HandleKeys(s, ui);
        int W, H;
        glfwGetFramebufferSize(win, &W, &H);
        const float top = 70, left = 260, right = 380, bottom = 28;
        const ImGuiWindowFlags fixed = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse |
                                       ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoTitleBar |
                                       ImGuiWindowFlags_NoBringToFrontOnFocus;
        auto place = [&](float x, float y, float w, float h) {
            ImGui::SetNextWindowPos(ImVec2(x, y));
            ImGui::SetNextWindowSize(ImVec2(w, h));
        };
        place(0, 0, float(W), top);
        ImGui::Begin("toolbar", nullptr, fixed);
        DrawToolbar(s, ui);
        ImGui::End();
        place(0, top, left, float(H) - top - bottom);
        ImGui::Begin("navigator", nullptr, fixed);
        DrawNavigator(s, ui);
        ImGui::End();
        place(float(W) - right, top, right, float(H) - top - bottom);
        ImGui::Begin("image", nullptr, fixed);
        ImGui::BeginChild("imgpanel", ImVec2(0, ImGui::GetContentRegionAvail().y - 150));
        DrawImagePanel(s, ui, tx);
        ImGui::EndChild();
        DrawPredictions(s, ui);
        ImGui::End();
        place(left, top, float(W) - left - right, float(H) - top - bottom);
        ImGui::Begin("center", nullptr, fixed);
        ui.rects["center"] = Rect{left, top, float(W) - left - right, float(H) - top - bottom};
        if (ImGui::BeginTabBar("tabs")) {
            const char* names[4] = {"Stage", "Attention maps", "Changes", "Train"};
            for (int i = 0; i < 4; ++i) {
                ImGuiTabItemFlags f = (ui.tab == i && last_tab != ui.tab) ? ImGuiTabItemFlags_SetSelected : 0;
                if (ImGui::BeginTabItem(names[i], nullptr, f)) {
                    if (last_tab == ui.tab || f) ui.tab = i;
                    if (i == 0) DrawStageView(s, ui, tx);
                    if (i == 1) DrawAttentionGrid(s, ui, tx);
                    if (i == 2) DrawChanges(s, ui, tx);
                    if (i == 3) train.Draw(s, ui, tx);
                    ImGui::EndTabItem();
                }
            }
            last_tab = ui.tab;
            ImGui::EndTabBar();
        }
        ImGui::End();
        place(0, float(H) - bottom, float(W), bottom);
        ImGui::Begin("status", nullptr, fixed);
        DrawStatusBar(s, ui);
        ImGui::End();
        train.Poll(s);

        ImGui::Render();
        glViewport(0, 0, W, H);
        glClearColor(0.09f, 0.09f, 0.10f, 1);
        glClear(GL_COLOR_BUFFER_BIT);
        ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());

        // exports read the back buffer before the swap
        const TraceEntry* cur = current_entry(s, ui);
        if (ui.request_view_png && cur) {
            Rect r = ui.rects["center"];
            auto px = read_pixels(int(r.x), int(r.y), int(r.w), int(r.h), H);
            std::string p = ui.export_dir + "/vitscope-" + safe_name(cur->name) + ".png";
            try { write_png(p, px.data(), int(r.w), int(r.h), 3); ui.status = "saved " + p; }
            catch (const std::exception& e) { s.error() = e.what(); }
        }
        if (ui.request_npy && cur) {
            std::string p = ui.export_dir + "/" + safe_name(cur->name) + ".npy";
            try { write_file_atomic(p, npy_bytes(cur->tensor.data(), shape_of(cur->tensor))); ui.status = "saved " + p; }
            catch (const std::exception& e) { s.error() = e.what(); }
        }
        if (ui.request_npz && s.trace()) {
            std::string p = ui.export_dir + "/vitscope-trace.npz";
            std::vector<ArrayRef> items;
            for (auto& e : s.trace()->entries()) items.push_back(array_ref(e.name, e.tensor));
            try { write_npz(p, items); ui.status = "saved " + p; }
            catch (const std::exception& e) { s.error() = e.what(); }
        }
        ui.request_view_png = ui.request_npy = ui.request_npz = false;

        if (s.trace() && !s.busy() && !train.running()) ++frames_after_result;
        if (!screenshot.empty() && frames_after_result == 3 && key_queue.empty()) {
            // exports requested on the command line go through the same path as the buttons
            ui.request_view_png = export_view;
            ui.request_npy = export_npy;
            ui.request_npz = export_npz;
        }
        if (!screenshot.empty() && frames_after_result >= 4 && key_queue.empty()) {
            auto px = read_pixels(0, 0, W, H, H);
            try {
                write_png(screenshot, px.data(), W, H, 3);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "vitscope: %s\n", e.what());
                exit_code = 1;
            }
            if (!layout_out.empty()) {
                nlohmann::json j;
                j["window"] = {W, H};
                j["stage"] = cur ? cur->name : "";
                j["model"] = s.model_spec();
                j["error"] = s.error();
                j["shader_error"] = ui.shader_error;
                for (auto& [k, r] : ui.rects) j["rects"][k] = {r.x, r.y, r.w, r.h};
                for (auto& [k, v] : ui.numbers) j["numbers"][k] = v;
                std::ofstream(layout_out) << j.dump(1);
            }
            break;
        }
        glfwSwapBuffers(win);
        if (bench_frames > 0 && frames_after_result > 2) {
            frame_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - f0).count());
            if (++bench_done >= bench_frames) {
                std::sort(frame_ms.begin(), frame_ms.end());
                double sum = 0;
                for (double v : frame_ms) sum += v;
                std::printf("frames model=%s toggle=%d n=%zu mean_ms=%.2f median_ms=%.2f p95_ms=%.2f\n",
                            s.config().name.c_str(), int(bench_toggle), frame_ms.size(), sum / frame_ms.size(),
                            frame_ms[frame_ms.size() / 2], frame_ms[size_t(frame_ms.size() * 0.95)]);
                break;
            }
        }
    }
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
    glfwDestroyWindow(win);
    glfwTerminate();
    return exit_code;
}
