#include "settings_app.h"

#include <algorithm>

#include <cctype>
#include <filesystem>

#include "core/io/hub.h"
#include "views.h"

namespace fs = std::filesystem;

namespace vit::app {

namespace {

bool is_file(const std::string& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec);
}

std::string absolute(const std::string& p) {
    std::error_code ec;
    fs::path a = fs::absolute(p, ec);
    return ec ? p : a.lexically_normal().string();
}

// A model worth offering again: a checkpoint file, or a name the loader took
// (a preset; names are identifiers). Labels such as "training (live)" are neither.
std::string recordable_model(const std::string& spec) {
    if (is_file(spec)) return absolute(spec);
    if (hub::is_spec(spec)) {  // hf:ORG/NAME[@REV], checked as the loader checks it
        try { hub::parse_spec(spec); return spec; } catch (const std::exception&) { return ""; }
    }
    for (char c : spec)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') return "";
    return spec;
}

}  // namespace

std::string settings_file(const std::string& settings_flag, bool no_settings, bool headless) {
    if (!settings_flag.empty()) return settings_flag;
    if (no_settings || headless) return "";
    return Settings::default_path();
}

void restore_launch(const Settings& st, bool model_given, std::string& model, std::string& image) {
    if (!st.enabled()) return;
    const SettingsData& d = st.data();
    if (!model_given && !d.recent_models.empty()) model = d.recent_models.front();
    if (image.empty() && !d.recent_images.empty() && is_file(d.recent_images.front())) image = d.recent_images.front();
}

void restore_view(const Settings& st, Session& s, UiState& ui) {
    if (!st.enabled()) return;
    const SettingsData& d = st.data();
    Options o = s.options();
    o.affine = d.options.affine;
    o.unbiased = d.options.unbiased;
    o.pooling = d.options.pooling;
    s.set_options(o);
    ui.overlay = Overlay(std::clamp(d.view.overlay, 0, 4));  // none, cls, rollout, gradient-weighted, query
    ui.opacity = d.view.opacity;
    ui.fusion = d.view.fusion;
    ui.discard = d.view.discard;
    ui.scale_mode = ScaleMode(std::clamp(d.view.scale_mode, 0, 2));  // per tensor, per slice, symmetric
    ui.learn = d.view.learn;
}

void remember(Settings& st, const Session& s, const UiState& ui, bool final) {
    if (!st.writable()) return;
    std::string m = recordable_model(s.model_spec());
    if (!m.empty()) st.add_recent_model(m);
    if (!s.image_path().empty()) st.add_recent_image(absolute(s.image_path()));
    SettingsData& d = st.data();
    d.options.affine = s.options().affine;
    d.options.unbiased = s.options().unbiased;
    d.options.pooling = s.options().pooling;
    d.view.overlay = int(ui.overlay);
    d.view.opacity = ui.opacity;
    d.view.fusion = ui.fusion;
    d.view.discard = ui.discard;
    d.view.scale_mode = int(ui.scale_mode);
    d.view.learn = ui.learn;
    st.save(final ? std::chrono::milliseconds(0) : std::chrono::milliseconds(1000));
}

std::string RecentMenu(Settings* st, bool models) {
    if (!st) return "";
    const auto& items = models ? st->data().recent_models : st->data().recent_images;
    if (items.empty()) return "";
    std::string picked;
    ImGui::Separator();
    if (ImGui::BeginMenu("Recent")) {
        for (auto& p : items) {
            bool exists = !fs::path(p).has_parent_path() || hub::is_spec(p) || is_file(p);  // names (presets, hf:) always exist
            std::string label = hub::is_spec(p) ? p : fs::path(p).filename().string();
            if (ImGui::MenuItem(label.c_str(), nullptr, false, exists)) picked = p;
            if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
                ImGui::SetTooltip("%s%s", p.c_str(), exists ? "" : "\n(no longer there)");
        }
        ImGui::EndMenu();
    }
    return picked;
}

void DrawSettingsError(Settings* st) {
    if (!st || st->error().empty()) return;
    ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", st->error().c_str());
    ImGui::SameLine();
    if (ImGui::SmallButton("dismiss##settings")) st->clear_error();
    ImGui::SameLine();
}

}  // namespace vit::app
