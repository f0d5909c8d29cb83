// The toolbar (the model, the image, the options, the BUG switches, the exports) and the built-in file browser.
#include "probe.h"
#include <GLFW/glfw3.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>

#include "core/kernels/blas.h"
#include "core/kernels/ops.h"
#include "core/io/hub.h"
#include "core/io/io.h"
#include "tensor_access.h"
#include "paths.h"
#include "settings_app.h"
#include "views.h"
#include "scene_truth.h"
#include "jobs.h"
#include "tabs/tab.h"
#include "model_map.h"
#include "core/teach/teach.h"
#include "core/model/finite.h"
#include "interventions_ui.h"

namespace fs = std::filesystem;

namespace vit::app {

bool DrawFileBrowser(FileBrowser& fb, const char* id, std::string& path, const std::vector<std::string>& exts) {
    if (fb.dir.empty()) {
        std::error_code ec;
        fb.dir = fs::current_path(ec).string();
    }
    std::string& dir = fb.dir;
    std::string& filter = fb.filter;
    bool chosen = false;
    ImGui::SetNextWindowSize(ImVec2(640, 460), ImGuiCond_Appearing);
    if (ImGui::BeginPopupModal(id, nullptr)) {
        ImGui::TextWrapped("%s", dir.c_str());
        if (ImGui::Button("Up")) dir = fs::path(dir).parent_path().string();
        ImGui::SameLine();
        ImGui::SetNextItemWidth(200);
        char buf[256];
        std::snprintf(buf, sizeof buf, "%s", filter.c_str());
        if (ImGui::InputTextWithHint("##filter", "filter", buf, sizeof buf)) filter = buf;
        ImGui::SameLine();
        if (ImGui::Button("Cancel")) ImGui::CloseCurrentPopup();
        ImGui::BeginChild("files", ImVec2(0, 0), true);
        std::vector<fs::directory_entry> entries;
        std::error_code ec;
        for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) entries.push_back(*it);
        if (ec) ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "%s", ec.message().c_str());
        std::sort(entries.begin(), entries.end(), [](auto& a, auto& b) {
            if (a.is_directory() != b.is_directory()) return a.is_directory();
            return a.path().filename() < b.path().filename();
        });
        for (auto& e : entries) {
            std::string n = e.path().filename().string();
            if (!n.empty() && n[0] == '.') continue;
            if (!filter.empty() && n.find(filter) == std::string::npos && !e.is_directory()) continue;
            if (e.is_directory()) {
                if (ImGui::Selectable((n + "/").c_str())) dir = e.path().string();
                continue;
            }
            std::string ext = e.path().extension().string();
            std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
            if (!exts.empty() && std::find(exts.begin(), exts.end(), ext) == exts.end()) continue;
            if (ImGui::Selectable(n.c_str(), false, ImGuiSelectableFlags_AllowDoubleClick) && ImGui::IsMouseDoubleClicked(0)) {
                path = e.path().string();
                chosen = true;
                ImGui::CloseCurrentPopup();
            }
        }
        ImGui::EndChild();
        ImGui::EndPopup();
    }
    return chosen;
}

std::vector<std::string> sample_images() {
    std::vector<std::string> v;
    std::error_code ec;
    // the Fashion-MNIST samples and, in samples/photos/, the colour photographs
    for (auto it = fs::recursive_directory_iterator(data_paths().samples, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (it->path().extension() == ".png" || it->path().extension() == ".jpg") v.push_back(it->path().string());
    std::sort(v.begin(), v.end());
    return v;
}

// The norm's two teaching switches. RMSNorm (AIMv2): gamma alone, and no variance for the unbiased switch to
// correct, said where the switch is (disabled unless it is on from another model, so that it can be switched off).
static void norm_switches(Flow& flow, const Config& c, Options& o) {
    if (c.norm == Norm::RmsNorm) {
        flow.next(Flow::checkbox_w("RMSNorm elementwise_affine (A)"));
        ImGui::Checkbox("RMSNorm elementwise_affine (A)", &o.affine);
        flow.next(Flow::checkbox_w("unbiased std: none in RMSNorm (U)"));
        ImGui::BeginDisabled(!o.unbiased);
        ImGui::Checkbox("unbiased std: none in RMSNorm (U)", &o.unbiased);
        ImGui::EndDisabled();
        return;
    }
    flow.next(Flow::checkbox_w("LayerNorm elementwise_affine (A)"));
    ImGui::Checkbox("LayerNorm elementwise_affine (A)", &o.affine);
    flow.next(Flow::checkbox_w("unbiased std, N-1 (U)"));
    ImGui::Checkbox("unbiased std, N-1 (U)", &o.unbiased);
}

void DrawToolbar(ViewCtx& v, Toolbar& tb, ExportRequest& req, bool tab_exports_numbers) {
    Session& s = v.s;
    Probe& pr = v.probe;
    char* model_path = tb.model_path;
    char* image_path = tb.image_path;
    const int heads = 0;  // from the file, its config.json or the published shapes; else the window asks
    // Items flow left to right and wrap onto a new row when the window is too narrow for them
    // (1280 px: three rows); the path boxes shrink with the window.
    Flow flow;
    const float W = ImGui::GetContentRegionAvail().x;
    const float path_w = std::clamp(W * 0.14f, 140.f, 320.f);
    // Model
    const float model_w = Flow::combo_w(s.model_spec(), 150, 260);
    flow.next(model_w);
    ImGui::SetNextItemWidth(model_w);
    if (ImGui::BeginCombo("##model", Flow::combo_preview(s.model_spec(), model_w).c_str())) {
        if (ImGui::Selectable("scenes (embedded: trained on colour scenes)")) s.begin_load_model("scenes");
        if (ImGui::Selectable("default (embedded Fashion-MNIST)")) s.begin_load_model("default");
        for (auto& p : preset_names())
            if (ImGui::Selectable((p + " (random weights)").c_str())) s.begin_load_model(p);
        ImGui::Separator();
        ImGui::TextDisabled("torchvision / timm names");
        for (auto& a : preset_aliases())
            if (ImGui::Selectable((std::string(a.alias) + " (random weights)").c_str())) s.begin_load_model(a.alias);
        if (std::string r = RecentMenu(v.settings, true); !r.empty()) s.begin_load_model(r, heads);
        if (ImGui::BeginMenu("On this computer")) {  // the Hugging Face cache and torch.hub (headers only)
            // Scanned on a thread of its own (app/model_scan.h): the menu shows progress meanwhile.
            if (!tb.scan.started() || (!tb.scan.running() && ImGui::MenuItem("Rescan"))) tb.scan.start();
            if (tb.scan.running()) {
                const hub::ScanProgress p = tb.scan.progress();
                ImGui::TextDisabled("scanning %zu of %zu: %s", p.done, p.total, terminal_safe(p.current).c_str());
                if (ImGui::MenuItem("Stop scanning")) tb.scan.cancel();
            }
            const std::optional<hub::ScanResult> found = tb.scan.result();
            for (const hub::Found& f : found ? found->found : std::vector<hub::Found>{})
                if (f.id.vit && ImGui::MenuItem(terminal_safe(hub::is_spec(f.spec) ? f.spec : fs::path(f.spec).filename().string()).c_str(),
                                                terminal_safe(f.id.size).c_str()))
                    s.begin_load_model(f.spec, heads);
            if (found && !found->stopped.empty()) ImGui::TextDisabled("the scan %s", terminal_safe(found->stopped).c_str());
            if (found && !tb.scan.running() && std::none_of(found->found.begin(), found->found.end(), [](const hub::Found& f) { return f.id.vit; }))
                ImGui::TextDisabled("no ViT in %s or %s", hub::cache_dir().c_str(), hub::torch_checkpoints_dir().c_str());
            ImGui::EndMenu();
        }
        ImGui::EndCombo();
    }
    flow.next(path_w);
    ImGui::SetNextItemWidth(path_w);
    // the hint fits the field at every window size (the sweep fails a cut text); the tooltip says the rest
    bool enter = ImGui::InputTextWithHint("##mpath", path_w >= Flow::text_w("checkpoint .safetensors/.pth") + 12 ? "checkpoint .safetensors/.pth" : "checkpoint file",
                                          model_path, sizeof tb.model_path, ImGuiInputTextFlags_EnterReturnsTrue);
    if (v.hover && ImGui::IsItemHovered() && !ImGui::IsItemActive())
        ImGui::SetTooltip("A checkpoint to open: .safetensors, .pth, .pt or .bin (Enter opens it; or drop the file on the window)");
    const std::string heads_text = "heads " + std::to_string(s.config().heads);
    flow.next(Flow::text_w(heads_text.c_str()));
    ImGui::TextUnformatted(heads_text.c_str());  // in force; a file that does not say is asked about (heads_prompt.cpp)
    if (v.hover && ImGui::IsItemHovered())
        ImGui::SetTooltip("from %s", s.model().heads_from.empty() ? "the model's config" : s.model().heads_from.c_str());
    pr.strings["toolbar.heads"] = std::to_string(s.config().heads);
    // What the file is and what the loader ignored or took from elsewhere (the text tower, a decoder,
    // an activation from the config): said where the model is chosen, never dropped silently.
    if (!s.model().layout.empty() || !s.model().notes.empty()) {
        char notes[32];
        std::snprintf(notes, sizeof notes, "(%zu note%s)", s.model().notes.size(), s.model().notes.size() == 1 ? "" : "s");
        flow.next(Flow::text_w(notes));
        ImGui::TextDisabled("%s", notes);
        std::string all = s.model().layout;
        for (const std::string& n : s.model().notes) all += (all.empty() ? "" : "\n") + ("- " + n);
        if (v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", all.c_str());
        pr.strings["toolbar.model_notes"] = all;
    }
    flow.next(Flow::button_w("Load model"));
    if (ImGui::Button("Load model") || enter) s.begin_load_model(model_path, heads);
    flow.next(Flow::button_w("...##m"));
    if (ImGui::Button("...##m")) ImGui::OpenPopup("Open checkpoint");
    std::string picked;
    if (DrawFileBrowser(tb.browser, "Open checkpoint", picked, {".safetensors", ".pth", ".pt", ".bin"})) {
        std::snprintf(model_path, sizeof tb.model_path, "%s", picked.c_str());
        s.begin_load_model(picked, heads);
    }
    // Image
    if (!tb.samples) tb.samples = sample_images();
    const std::vector<std::string>& samples = *tb.samples;
    for (auto& p : samples) pr.strings["toolbar.samples"] += fs::path(p).filename().string() + "\n";  // what the menu lists
    std::string cur = fs::path(s.image_path()).filename().string();
    // what is loaded, or that nothing is (never a sample's name or "sample image" when none is)
    const std::string shown_img = cur.empty() ? "no image: choose one" : cur;
    pr.strings["toolbar.image"] = shown_img;
    const float img_w = Flow::combo_w(shown_img, 170, 260);
    flow.next(img_w, true);
    ImGui::SetNextItemWidth(img_w);
    if (ImGui::BeginCombo("##img", Flow::combo_preview(shown_img, img_w).c_str())) {
        if (ImGui::Selectable("New test scene (Scenes)")) s.new_scene();
        if (v.hover && ImGui::IsItemHovered())
            ImGui::SetTooltip("a new scene of a random Fashion-MNIST test item (one the scenes model never trained on), "
                              "with its box: what vitscope-cli scenes --split test writes");
        ImGui::Separator();
        for (auto& p : samples)
            if (ImGui::Selectable(fs::path(p).filename().string().c_str(), p == s.image_path())) s.load_image(p);
        if (std::string r = RecentMenu(v.settings, false); !r.empty()) s.load_image(r);
        ImGui::EndCombo();
    }
    flow.next(path_w);
    ImGui::SetNextItemWidth(path_w);
    bool ienter = ImGui::InputTextWithHint("##ipath", "image path (or drop a file)", image_path, sizeof tb.image_path,
                                           ImGuiInputTextFlags_EnterReturnsTrue);
    flow.next(Flow::button_w("Load image"));
    if (ImGui::Button("Load image") || ienter) s.load_image(image_path);
    flow.next(Flow::button_w("...##i"));
    if (ImGui::Button("...##i")) ImGui::OpenPopup("Open image");
    if (DrawFileBrowser(tb.browser, "Open image", picked, {".png", ".jpg", ".jpeg", ".bmp"})) {  // what vit::image_formats() reads
        std::snprintf(image_path, sizeof tb.image_path, "%s", picked.c_str());
        s.load_image(picked);
    }
    // Options (a new row)
    flow.new_row();
    Options o = s.options();
    norm_switches(flow, s.config(), o);
    int pool = o.pooling ? int(*o.pooling) + 1 : 0;  // 0: the model's own pooling
    const char* pools[] = {"model's pooling", "cls token", "mean of patches"};
    const float pool_w = Flow::combo_w(pools[0], 130, 200);  // the widest entry
    flow.next(Flow::labelled_w(pool_w, "pooling"));
    ImGui::SetNextItemWidth(pool_w);
    if (ImGui::Combo("pooling", &pool, pools, 3))
        o.pooling = pool == 0 ? std::nullopt : std::optional<Pooling>(Pooling(pool - 1));
    // Two classic bugs (Options::bug_*), off by default; red when on, and the status bar says BUG.
    auto bug_box = [&](const char* label, bool& on_off, const char* tip) {
        flow.next(Flow::checkbox_w(label));
        const bool on = on_off;
        if (on) {
            ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(255, 90, 90, 255));
            ImGui::PushStyleColor(ImGuiCol_FrameBg, IM_COL32(120, 20, 20, 255));
            ImGui::PushStyleColor(ImGuiCol_CheckMark, IM_COL32(255, 90, 90, 255));
        }
        ImGui::Checkbox(label, &on_off);
        if (on) ImGui::PopStyleColor(3);
        if (v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", tip);
        ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
        pr.rects[std::string("toolbar.") + label] = Rect{a.x, a.y, b.x - a.x, b.y - a.y};
    };
    bug_box("BUG: scale after softmax (B)", o.bug_scale_after_softmax,
            "a classic bug, on purpose: softmax(q k^T) / sqrt(d) instead of softmax(q k^T / sqrt(d));\n"
            "the rows of the pattern no longer sum to 1. The Changes tab shows what it does downstream.");
    bug_box("BUG: reshape patches (R)", o.bug_reshape_patches,
            "a classic bug, on purpose: img.reshape(N, C*P*P) instead of cutting P x P tiles (unfold);\n"
            "each 'patch' is then a run of pixel rows. The Changes tab shows what it does downstream.");
    s.set_options(o);
    flow.next(Flow::button_w("Reset options"));
    if (ImGui::Button("Reset options")) s.set_options(Options{});
    // Exports: one menu (the view as PNG, the tensor or the tab's numbers, the whole trace)
    flow.next(Flow::button_w("Export...") + Flow::text_w("(?)") + ImGui::GetStyle().ItemSpacing.x, true);
    if (ImGui::Button("Export...")) ImGui::OpenPopup("export");
    {
        ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
        pr.rects["toolbar.export"] = Rect{a.x, a.y, b.x - a.x, b.y - a.y};
    }
    if (ImGui::BeginPopup("export")) {
        if (ImGui::MenuItem("View as PNG")) req.view_png = true;
        // on a teaching tab: the numbers it draws, as .npy and .csv
        if (ImGui::MenuItem(tab_exports_numbers ? "Numbers .npy+.csv" : "Tensor .npy")) req.npy = true;
        if (ImGui::MenuItem("Trace .npz (every stage)")) req.npz = true;
        ImGui::EndPopup();
    }
    ImGui::SameLine();
    ImGui::TextDisabled("(?)");
    {
        ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
        pr.rects["toolbar.help"] = Rect{a.x, a.y, b.x - a.x, b.y - a.y};
    }
    if (v.hover && ImGui::IsItemHovered()) {
        ImGui::SetNextWindowBgAlpha(1.f);  // opaque: nothing behind shows through
        ImGui::BeginTooltip();
        ImGui::Text("Keys");
        ImGui::BulletText("Up/Down or Left/Right: previous / next stage");
        ImGui::BulletText("PageUp/PageDown: same stage, previous / next layer");
        ImGui::BulletText("H / Shift+H: next / previous head");
        ImGui::BulletText("A: toggle elementwise_affine   U: toggle unbiased std");
        ImGui::BulletText("B / R: the BUG switches (scale after softmax / reshape patches), red when on");
        ImGui::BulletText("G: gradient view   0: reset zoom   Esc: clear the selected patch and cell");
        ImGui::BulletText("Q: attention from a token (overlay); Q / Shift+Q again: next / previous query token");
        ImGui::BulletText("  (or click a patch on the image, or a row of attn.pattern / attn.scores)");
        ImGui::BulletText("Click a cell of attn.scores/pattern/z, LayerNorm normalized/out, mlp.post, logits:");
        ImGui::BulletText("  the math of that cell, with its numbers (Esc closes it)");
        std::string tabs;
        for (const TabSpec& t : tab_table()) tabs += std::string(tabs.empty() ? "" : ", ") + t.key + " " + t.name;
        ImGui::BulletText("Tabs: %s", tabs.c_str());
        ImGui::BulletText("T: the lessons (predict, then check) in Learn mode; L: Learn mode on/off");
        ImGui::BulletText("K: a click on an attention map knocks its head out   D: paint patches to drop");
        ImGui::EndTooltip();
    }
}

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_toolbar() {
    using K = ProbeKind;
    return {
        {K::Rect, "toolbar", "the toolbar (as many rows as the width needs)"},
        {K::Rect, "toolbar.{export|help}", "the Export menu's button and the help mark"},
        {K::Rect, "toolbar.<checkbox>", "a toolbar BUG switch"},
        {K::String, "toolbar.heads", "the heads in force, as the toolbar shows them"},
        {K::String, "toolbar.model_notes", "what the loaded file is and what its loader ignored or took from elsewhere (absent for presets)"},
        {K::String, "toolbar.samples", "the sample images the menu lists"},
        {K::String, "toolbar.image", "what the image menu shows: the loaded image's file name, or that none is loaded"},
    };
}

}  // namespace vit::app
