// Toolbar, navigator, image panel with overlays, predictions, status bar,
// keyboard shortcuts and the built-in file browser.
#include <GLFW/glfw3.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/io.h"
#include "views.h"

namespace fs = std::filesystem;

namespace vit::app {

bool DrawFileBrowser(const char* id, std::string& path, const std::vector<std::string>& exts) {
    static std::string dir = fs::current_path().string();
    static std::string filter;
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

namespace {

std::vector<std::string> sample_images() {
    std::vector<std::string> v;
    for (auto dir : {std::string(VITSCOPE_ASSETS_DIR) + "/samples", std::string("assets/samples")}) {
        std::error_code ec;
        for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
            if (it->path().extension() == ".png" || it->path().extension() == ".jpg") v.push_back(it->path().string());
        if (!v.empty()) break;
    }
    std::sort(v.begin(), v.end());
    return v;
}

}  // namespace

void DrawToolbar(Session& s, UiState& ui) {
    static char model_path[1024] = "", image_path[1024] = "";
    static int heads = 0;
    // Model
    ImGui::SetNextItemWidth(150);
    if (ImGui::BeginCombo("##model", s.model_spec().size() > 24 ? ("..." + s.model_spec().substr(s.model_spec().size() - 21)).c_str() : s.model_spec().c_str())) {
        if (ImGui::Selectable("default (embedded Fashion-MNIST)")) s.begin_load_model("default");
        for (auto& p : preset_names())
            if (ImGui::Selectable((p + " (random weights)").c_str())) s.begin_load_model(p);
        ImGui::EndCombo();
    }
    ImGui::SameLine();
    ImGui::SetNextItemWidth(220);
    bool enter = ImGui::InputTextWithHint("##mpath", "checkpoint.safetensors", model_path, sizeof model_path,
                                          ImGuiInputTextFlags_EnterReturnsTrue);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(70);
    ImGui::InputInt("heads##h", &heads, 0);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("0: from the file's metadata, or width/64");
    ImGui::SameLine();
    if (ImGui::Button("Load model") || enter) s.begin_load_model(model_path, heads);
    ImGui::SameLine();
    if (ImGui::Button("...##m")) ImGui::OpenPopup("Open checkpoint");
    std::string picked;
    if (DrawFileBrowser("Open checkpoint", picked, {".safetensors"})) {
        std::snprintf(model_path, sizeof model_path, "%s", picked.c_str());
        s.begin_load_model(picked, heads);
    }
    ImGui::SameLine();
    ImGui::TextDisabled("|");
    ImGui::SameLine();
    // Image
    static std::vector<std::string> samples = sample_images();
    ImGui::SetNextItemWidth(170);
    std::string cur = fs::path(s.image_path()).filename().string();
    if (ImGui::BeginCombo("##img", cur.empty() ? "sample image" : cur.c_str())) {
        for (auto& p : samples)
            if (ImGui::Selectable(fs::path(p).filename().string().c_str(), p == s.image_path())) s.load_image(p);
        ImGui::EndCombo();
    }
    ImGui::SameLine();
    ImGui::SetNextItemWidth(200);
    bool ienter = ImGui::InputTextWithHint("##ipath", "image path (or drop a file)", image_path, sizeof image_path,
                                           ImGuiInputTextFlags_EnterReturnsTrue);
    ImGui::SameLine();
    if (ImGui::Button("Load image") || ienter) s.load_image(image_path);
    ImGui::SameLine();
    if (ImGui::Button("...##i")) ImGui::OpenPopup("Open image");
    if (DrawFileBrowser("Open image", picked, {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tga", ".psd", ".hdr", ".pgm", ".ppm", ".pnm"})) {
        std::snprintf(image_path, sizeof image_path, "%s", picked.c_str());
        s.load_image(picked);
    }
    // Options (second row)
    Options o = s.options();
    ImGui::Checkbox("LayerNorm elementwise_affine (A)", &o.affine);
    ImGui::SameLine();
    ImGui::Checkbox("unbiased std, N-1 (U)", &o.unbiased);
    ImGui::SameLine();
    int pool = !o.pooling ? 0 : *o.pooling == Pooling::Cls ? 1 : 2;
    ImGui::SetNextItemWidth(130);
    const char* pools[] = {"model's pooling", "cls token", "mean of patches"};
    if (ImGui::Combo("pooling", &pool, pools, 3))
        o.pooling = pool == 0 ? std::nullopt : std::optional<Pooling>(pool == 1 ? Pooling::Cls : Pooling::Mean);
    s.set_options(o);
    ImGui::SameLine();
    if (ImGui::Button("Reset options")) s.set_options(Options{});
    ImGui::SameLine();
    ImGui::TextDisabled("|");
    ImGui::SameLine();
    if (ImGui::Button("Export view PNG")) ui.request_view_png = true;
    ImGui::SameLine();
    if (ImGui::Button("Tensor .npy")) ui.request_npy = true;
    ImGui::SameLine();
    if (ImGui::Button("Trace .npz")) ui.request_npz = true;
    ImGui::SameLine();
    ImGui::TextDisabled("(?)");
    if (ImGui::IsItemHovered()) {
        ImGui::BeginTooltip();
        ImGui::Text("Keys");
        ImGui::BulletText("Up/Down or Left/Right: previous / next stage");
        ImGui::BulletText("PageUp/PageDown: same stage, previous / next layer");
        ImGui::BulletText("H / Shift+H: next / previous head");
        ImGui::BulletText("A: toggle elementwise_affine   U: toggle unbiased std");
        ImGui::BulletText("G: gradient view   0: reset zoom   Esc: clear the selected patch");
        ImGui::BulletText("1-4: Stage / Attention maps / Changes / Train tabs");
        ImGui::EndTooltip();
    }
}

void DrawNavigator(Session& s, UiState& ui) {
    const Trace* t = s.trace();
    if (!t) return;
    const Config& c = s.config();
    int L = c.depth;
    ImGui::TextDisabled("Pipeline (%zu stages)", t->size());
    ImGui::SetNextItemWidth(-1);
    const TraceEntry* e = current_entry(s, ui);
    int layer = e ? e->layer : -1;
    int lsel = std::max(0, layer);
    if (L > 0 && ImGui::SliderInt("##layer", &lsel, 0, L - 1, "layer %d")) {
        std::string rest;
        stage_layer(e->name, &rest);
        if (layer < 0) rest = "attn.pattern";
        int idx = t->index_of("blocks." + std::to_string(lsel) + "." + rest);
        if (idx >= 0) ui.stage = idx;
    }
    ImGui::BeginChild("stages", ImVec2(0, 0), false);
    int last_layer = -2;
    bool open = true;
    for (size_t i = 0; i < t->size(); ++i) {
        const TraceEntry& en = t->at(i);
        if (en.layer != last_layer) {
            if (last_layer >= 0 && open) ImGui::TreePop();
            last_layer = en.layer;
            if (en.layer >= 0) {
                ImGui::SetNextItemOpen(en.layer == layer || L <= 2, ImGuiCond_Always);
                open = ImGui::TreeNodeEx(("Block " + std::to_string(en.layer)).c_str(), ImGuiTreeNodeFlags_SpanAvailWidth);
            } else {
                open = true;
                ImGui::TextDisabled(i == 0 ? "Embedding" : "Head");
            }
        }
        if (!open) continue;
        std::string rest;
        stage_layer(en.name, &rest);
        bool sel = int(i) == ui.stage;
        if (ImGui::Selectable((rest + "##" + std::to_string(i)).c_str(), sel)) ui.stage = int(i);
        if (sel && ImGui::IsWindowAppearing()) ImGui::SetScrollHereY();
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s %s", en.name.c_str(), shape_str_of(en.tensor).c_str());
    }
    if (last_layer >= 0 && open) ImGui::TreePop();
    ImGui::EndChild();
}

void DrawImagePanel(Session& s, UiState& ui, Textures& tx) {
    const Trace* t = s.trace();
    if (!t) return;
    const Config& c = s.config();
    const Array& in = t->get("input");
    int S = c.image_size, G = c.grid(), N = c.patches(), L = c.depth, H = c.heads;
    if (tx.stale("image", s.version())) {
        Tensor3 img = denormalize(Tensor3(in), c);
        std::vector<unsigned char> rgba(size_t(S) * S * 4);
        size_t plane = size_t(S) * S;
        for (size_t i = 0; i < plane; ++i)
            for (int k = 0; k < 3; ++k) {
                float v = img.flat((c.channels == 3 ? k : 0) * plane + i);
                rgba[i * 4 + k] = (unsigned char)(std::lround(std::clamp(v, 0.f, 1.f) * 255));
            }
        for (size_t i = 0; i < plane; ++i) rgba[i * 4 + 3] = 255;
        tx.image.upload_rgba(rgba.data(), S, S);
    }
    // overlay controls
    const char* kinds[] = {"none", "cls attention", "attention rollout", "gradient-weighted rollout"};
    ImGui::SetNextItemWidth(190);
    ImGui::Combo("overlay", &ui.overlay, kinds, s.result().grads ? 4 : 3);
    int ol = ui.overlay_layer < 0 ? L - 1 : std::min(ui.overlay_layer, L - 1);
    ImGui::SetNextItemWidth(190);
    if (ImGui::SliderInt(ui.overlay == 1 ? "layer" : "up to layer", &ol, 0, L - 1)) ui.overlay_layer = ol;
    if (ui.overlay == 1) {
        ImGui::SetNextItemWidth(190);
        int hh = ui.overlay_head + 1;
        char label[32];
        if (hh == 0) std::snprintf(label, sizeof label, "mean of heads");
        else std::snprintf(label, sizeof label, "head %d", hh - 1);
        if (ImGui::SliderInt("head", &hh, 0, H, label)) ui.overlay_head = hh - 1;
    } else if (ui.overlay == 2) {
        const char* fu[] = {"mean", "max", "min"};
        ImGui::SetNextItemWidth(90);
        ImGui::Combo("head fusion", &ui.fusion, fu, 3);
        ImGui::SameLine();
        ImGui::SetNextItemWidth(90);
        ImGui::SliderFloat("discard", &ui.discard, 0.f, 0.95f, "%.2f");
    }
    ImGui::SetNextItemWidth(190);
    ImGui::SliderFloat("opacity", &ui.opacity, 0.f, 1.f, "%.2f");
    // the overlay values over the patch grid: recomputed only when what they depend on changes
    // (rollout is O(T^3 L): ~0.1 s for ViT-B, not something to redo every frame)
    uint64_t okey = s.version() * 131 + uint64_t(ui.overlay) * 17 + uint64_t(ol) * 1009 + uint64_t(ui.overlay_head + 1) * 7 +
                    uint64_t(ui.fusion) * 3 + uint64_t(ui.discard * 1000) * 100003;
    bool ostale = tx.stale("overlay", okey);
    if (ostale) {
        std::vector<float>& ov = tx.overlay_vals;
        ov.clear();
        if (ui.overlay == 1 && L > 0) ov = cls_attention(*t, ol, ui.overlay_head);
        else if (ui.overlay == 2 && L > 0) ov = attention_rollout(*t, ol, Fusion(ui.fusion), ui.discard);
        else if (ui.overlay == 3 && L > 0 && s.result().grads) ov = grad_rollout(*t, *s.result().grads, ol);
        if (!ov.empty()) tx.overlay.upload_float(ov.data(), G, G);
    }
    const std::vector<float>& ov = tx.overlay_vals;
    const bool thumbs = L > 0;
    const float thumb_h = thumbs ? 118.f : 0.f;
    float side = std::min(ImGui::GetContentRegionAvail().x - 8, ImGui::GetContentRegionAvail().y - 40 - thumb_h);
    side = std::max(side, 64.f);
    ImVec2 p0 = ImGui::GetCursorScreenPos(), p1(p0.x + side, p0.y + side);
    ImGui::InvisibleButton("img", ImVec2(side, side));
    bool hovered = ImGui::IsItemHovered();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    dl->AddImage(tx.image.id(), p0, p1);
    ui.rects["image"] = Rect{p0.x, p0.y, side, side};
    if (!ov.empty()) {
        auto mm = std::minmax_element(ov.begin(), ov.end());
        Colormap cm;
        cm.mode = Colormap::Overlay;
        cm.vmin = *mm.first;
        cm.vmax = std::max(*mm.second, *mm.first + 1e-9f);
        cm.opacity = ui.opacity;
        draw_colormapped(dl, tx.overlay, p0, p1, cm);
        ui.numbers["overlay.argmax"] = double(mm.second - ov.begin());
        ui.numbers["overlay.argmin"] = double(mm.first - ov.begin());
    }
    // patch grid and indices
    float cell = side / G;
    ImU32 gc = IM_COL32(255, 255, 255, 60);
    for (int i = 1; i < G; ++i) {
        dl->AddLine(ImVec2(p0.x + i * cell, p0.y), ImVec2(p0.x + i * cell, p1.y), gc);
        dl->AddLine(ImVec2(p0.x, p0.y + i * cell), ImVec2(p1.x, p0.y + i * cell), gc);
    }
    if (cell >= 22)
        for (int n = 0; n < N; ++n)
            dl->AddText(ImVec2(p0.x + (n % G) * cell + 2, p0.y + (n / G) * cell + 1), IM_COL32(255, 255, 255, 150), std::to_string(n).c_str());
    if (ui.patch >= 0 && ui.patch < N) {
        ImVec2 a(p0.x + (ui.patch % G) * cell, p0.y + (ui.patch / G) * cell);
        dl->AddRect(a, ImVec2(a.x + cell, a.y + cell), IM_COL32(255, 80, 200, 255), 0, 0, 3);
    }
    if (hovered) {
        ImVec2 m = ImGui::GetIO().MousePos;
        int gx = std::clamp(int((m.x - p0.x) / cell), 0, G - 1), gy = std::clamp(int((m.y - p0.y) / cell), 0, G - 1);
        int n = gy * G + gx;
        ImGui::SetTooltip("patch %d (row %d, col %d) = token %d%s%s", n, gy, gx, n + 1, ov.empty() ? "" : "\noverlay value: ",
                          ov.empty() ? "" : std::to_string(ov[n]).c_str());
        if (ImGui::IsMouseClicked(0)) ui.patch = ui.patch == n ? -1 : n;
    }
    ImGui::TextDisabled("%dx%d input, %dx%d patches of %d px; click a patch to follow its token", S, S, G, G, c.patch);
    if (!thumbs) return;
    // The three maps side by side for the same layer: click one to put it over the image.
    const char* names[3] = {"cls attention", "rollout", "grad-weighted"};
    int nmaps = s.result().grads ? 3 : 2;
    float tw = std::min(96.f, (ImGui::GetContentRegionAvail().x - 8 * nmaps) / nmaps);
    if (tx.thumbs.size() != 3) { tx.thumbs.resize(3); tx.thumb_range.resize(3); }
    for (int k = 0; k < nmaps; ++k) {
        uint64_t key = s.version() * 131 + uint64_t(ol) * 1009 + uint64_t(ui.overlay_head + 1) * 7 + uint64_t(ui.fusion) * 3 +
                       uint64_t(ui.discard * 1000) * 100003;
        if (tx.stale("thumb" + std::to_string(k), key)) {
            std::vector<float> m = k == 0 ? cls_attention(*t, ol, ui.overlay_head)
                                 : k == 1 ? attention_rollout(*t, ol, Fusion(ui.fusion), ui.discard)
                                          : grad_rollout(*t, *s.result().grads, ol);
            tx.thumbs[k].upload_float(m.data(), G, G);
            auto r = std::minmax_element(m.begin(), m.end());
            tx.thumb_range[k] = {*r.first, *r.second};
        }
        if (k) ImGui::SameLine();
        ImGui::BeginGroup();
        ImVec2 q = ImGui::GetCursorScreenPos();
        ImGui::PushID(k);
        if (ImGui::InvisibleButton("t", ImVec2(tw, tw))) ui.overlay = k + 1;
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s up to layer %d: click to show it over the image", names[k], ol);
        ImGui::PopID();
        Colormap cm;
        cm.vmin = tx.thumb_range[k].first;
        cm.vmax = std::max(tx.thumb_range[k].second, cm.vmin + 1e-9f);
        draw_colormapped(dl, tx.thumbs[k], q, ImVec2(q.x + tw, q.y + tw), cm);
        dl->AddRect(q, ImVec2(q.x + tw, q.y + tw), ui.overlay == k + 1 ? IM_COL32(255, 80, 200, 255) : IM_COL32(80, 80, 80, 255), 0, 0,
                    ui.overlay == k + 1 ? 2.f : 1.f);
        ImGui::TextDisabled("%s", names[k]);
        ImGui::EndGroup();
    }
}

void DrawPredictions(Session& s, UiState& ui) {
    const Trace* t = s.trace();
    if (!t || !t->has("probs")) return;
    const Array& p = t->get("probs");
    const Config& c = s.config();
    std::vector<int> idx(p.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = int(i);
    std::sort(idx.begin(), idx.end(), [&](int a, int b) { return p(a) > p(b); });
    ImGui::TextDisabled("Top predictions");
    for (int k = 0; k < std::min<int>(5, int(idx.size())); ++k) {
        int i = idx[k];
        std::string name = c.class_names.empty() ? "class " + std::to_string(i) : c.class_names[i];
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.1f%%", 100 * p(i));
        ImGui::ProgressBar(p(i), ImVec2(120, 0), buf);
        ImGui::SameLine();
        ImGui::Text("%s", name.c_str());
    }
}

void DrawStatusBar(Session& s, UiState& ui) {
    if (s.loading()) {
        ImGui::TextColored(ImVec4(1, 0.84f, 0.47f, 1), "loading model...");
        ImGui::SameLine();
    }
    if (s.busy()) {
        ImGui::ProgressBar(s.progress(), ImVec2(200, 0), "running forward...");
        ImGui::SameLine();
    }
    if (!s.error().empty()) {
        ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", s.error().c_str());
        ImGui::SameLine();
        if (ImGui::SmallButton("dismiss")) s.error().clear();
        ImGui::SameLine();
    }
    if (!ui.shader_error.empty()) {
        ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "shader: %s", ui.shader_error.c_str());
        ImGui::SameLine();
    }
    ImGui::TextDisabled("%s | %s | forward+backward %.1f ms | %s", s.config().describe().c_str(),
                        s.model().source.c_str(), s.result().ms, ui.status.c_str());
}

void HandleKeys(Session& s, UiState& ui) {
    const Trace* t = s.trace();
    if (!t || ImGui::GetIO().WantTextInput) return;
    auto pressed = [](int key) { return ImGui::IsKeyPressed(key); };
    int n = int(t->size());
    if (pressed(GLFW_KEY_RIGHT) || pressed(GLFW_KEY_DOWN)) ui.stage = std::min(n - 1, ui.stage + 1);
    if (pressed(GLFW_KEY_LEFT) || pressed(GLFW_KEY_UP)) ui.stage = std::max(0, ui.stage - 1);
    if (pressed(GLFW_KEY_HOME)) ui.stage = 0;
    if (pressed(GLFW_KEY_END)) ui.stage = n - 1;
    const TraceEntry* e = current_entry(s, ui);
    if (e && e->layer >= 0 && (pressed(GLFW_KEY_PAGE_UP) || pressed(GLFW_KEY_PAGE_DOWN))) {
        int l = e->layer + (pressed(GLFW_KEY_PAGE_DOWN) ? 1 : -1);
        std::string rest;
        stage_layer(e->name, &rest);
        int idx = t->index_of("blocks." + std::to_string(l) + "." + rest);
        if (idx >= 0) ui.stage = idx;
    }
    bool shift = ImGui::GetIO().KeyShift;
    int H = s.config().heads;
    if (pressed(GLFW_KEY_H)) ui.head = (ui.head + (shift ? H - 1 : 1)) % H;
    Options o = s.options();
    if (pressed(GLFW_KEY_A)) o.affine = !o.affine;
    if (pressed(GLFW_KEY_U)) o.unbiased = !o.unbiased;
    s.set_options(o);
    if (pressed(GLFW_KEY_G)) ui.show_grad = !ui.show_grad;
    if (pressed(GLFW_KEY_0)) { ui.zoom = 1; ui.pan_x = ui.pan_y = 0; }
    if (pressed(GLFW_KEY_ESCAPE)) ui.patch = -1;
    for (int k = 0; k < 4; ++k)
        if (pressed(GLFW_KEY_1 + k)) ui.tab = k;
}

}  // namespace vit::app
