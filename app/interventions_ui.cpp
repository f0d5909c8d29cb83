#include "probe.h"
#include "interventions_ui.h"

#include <GLFW/glfw3.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "app_args.h"
#include "core/io/checkpoint.h"
#include "core/teach/interventions.h"
#include "paths.h"

namespace fs = std::filesystem;

namespace vit::app {

namespace {

const ImU32 kAblated = IM_COL32(255, 70, 70, 255);
const ImVec4 kIvText(1.f, 0.62f, 0.35f, 1.f);  // the colour of everything that is an intervention

std::string base_name(const std::string& p) { return fs::path(p).filename().string(); }

// Every intervention of `iv` as a line, and how to take it out of a set of interventions.
struct Item {
    std::string text;
    std::function<void(Interventions&)> remove;
};
std::vector<Item> items_of(const Interventions& iv) {
    std::vector<Item> v;
    for (const HeadAblation& h : iv.heads) {
        Interventions one;
        one.heads = {h};
        v.push_back({one.describe(), [h](Interventions& x) {
                         x.heads.erase(std::remove(x.heads.begin(), x.heads.end(), h), x.heads.end());
                     }});
    }
    for (const SublayerAblation& sa : iv.sublayers) {
        v.push_back({stage_name({sa.mlp ? StageKind::MlpOut : StageKind::AttnOut, sa.layer}) + " zeroed",
                     [sa](Interventions& x) {
                         x.sublayers.erase(std::remove(x.sublayers.begin(), x.sublayers.end(), sa), x.sublayers.end());
                     }});
    }
    if (!iv.dropped.empty()) {
        Interventions one;
        one.dropped = iv.dropped;
        v.push_back({one.describe(), [](Interventions& x) { x.dropped.clear(); }});
    }
    if (iv.patch) {
        Interventions one;
        one.patch = iv.patch;
        one.patch->source = base_name(iv.patch->source);
        v.push_back({one.describe(), [](Interventions& x) { x.patch.reset(); }});
    }
    return v;
}

}  // namespace

bool same_interventions(const Interventions& a, const Interventions& b) {
    auto strip = [](Interventions x) {
        if (x.patch) x.patch->values = nullptr;
        return x;
    };
    return strip(a) == strip(b);
}

bool head_ablated(const Options& o, int layer, int head) {
    for (const HeadAblation& h : o.iv.heads)
        if (h.layer == layer && h.head == head) return true;
    return false;
}

void toggle_head(Session& s, int layer, int head) {
    Options o = s.options();
    auto& hs = o.iv.heads;
    auto it = std::find_if(hs.begin(), hs.end(), [&](const HeadAblation& h) { return h.layer == layer && h.head == head; });
    if (it != hs.end()) hs.erase(it);
    else hs.push_back(HeadAblation{layer, head, false});
    s.set_options(o);
}

void toggle_dropped(Session& s, int patch) {
    Options o = s.options();
    auto& d = o.iv.dropped;
    auto it = std::find(d.begin(), d.end(), patch);
    if (it != d.end()) d.erase(it);
    else d.insert(std::upper_bound(d.begin(), d.end(), patch), patch);
    // never every patch: the pass needs one (run_dims would refuse the options)
    try {
        run_dims(s.config(), o);
    } catch (const std::exception& e) {
        s.add_error("Patch " + std::to_string(patch) + " was not dropped", e.what());
        return;
    }
    s.set_options(o);
}

void NavigatorHeads(ViewCtx& v, int layer) {
    Session& s = v.s;
    const int H = s.shown_config().heads;
    if (layer < 0 || layer >= s.shown_config().depth) return;
    ImGui::TextDisabled("knock out:");
    for (int h = 0; h < H; ++h) {
        ImGui::SameLine(0, 3);
        const bool off = head_ablated(s.options(), layer, h);
        ImGui::PushID(layer * 4096 + h);
        if (off) ImGui::PushStyleColor(ImGuiCol_Button, IM_COL32(150, 40, 40, 255));
        if (ImGui::SmallButton(("h" + std::to_string(h)).c_str())) toggle_head(s, layer, h);
        if (off) ImGui::PopStyleColor();
        const ImVec2 b0 = ImGui::GetItemRectMin(), b1 = ImGui::GetItemRectMax();
        v.probe.rects["nav.head." + std::to_string(layer) + "." + std::to_string(h)] = Rect{b0.x, b0.y, b1.x - b0.x, b1.y - b0.y};
        if (v.hover && ImGui::IsItemHovered())
            ImGui::SetTooltip("%s (layer %d, head %d): %s", head_label(layer, h).c_str(), layer, h,
                              off ? "knocked out (click to restore)" : "click to knock it out (its slice of attn.z set to 0)");
        ImGui::PopID();
        // wrap inside the navigator's width
        if (h + 1 < H && ImGui::GetItemRectMax().x + 34 > ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x)
            ImGui::NewLine();
    }
}

void DrawInterventionStrip(ViewCtx& v, InterventionsUi& st) {
    Session& s = v.s;
    UiState& ui = v.ui;
    Probe& pr = v.probe;
    const Options& want = s.options();
    // K: knock-out mode, D: paint patches to drop (the keys of the two modes below)
    if (s.trace() && !ImGui::GetIO().WantTextInput) {
        if (ImGui::IsKeyPressed(GLFW_KEY_K)) ui.knock_out = !ui.knock_out;
        if (ImGui::IsKeyPressed(GLFW_KEY_D)) ui.paint_drop = !ui.paint_drop;
    }
    const ImVec2 a = ImGui::GetCursorScreenPos();
    Flow flow;  // the strip wraps onto more rows in a narrow window
    flow.next(Flow::text_w("Interventions:"));
    ImGui::TextColored(kIvText, "Interventions:");
    // What ran: the trace on screen's interventions (a pass with the ones asked for may be running).
    const Interventions shown = s.trace() ? s.shown_options().iv : Interventions{};
    const std::vector<Item> items = items_of(want.iv);
    pr.strings["iv.list"] = shown.describe();
    if (items.empty()) {
        const char* none = "none (knock out a head, drop patches, or patch activations from another image)";
        flow.next(Flow::text_w(none));
        ImGui::PushTextWrapPos(0);
        ImGui::TextDisabled("%s", none);
        ImGui::PopTextWrapPos();
    }
    for (size_t i = 0; i < items.size(); ++i) {
        const std::string label = items[i].text + "  x";
        flow.next(Flow::button_w(label.c_str()));
        ImGui::PushID(int(i));
        ImGui::PushStyleColor(ImGuiCol_Button, IM_COL32(110, 55, 20, 255));
        if (ImGui::SmallButton(label.c_str())) {
            Options o = want;
            items[i].remove(o.iv);
            s.set_options(o);
        }
        ImGui::PopStyleColor();
        if (v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("click to remove this intervention");
        const ImVec2 b0 = ImGui::GetItemRectMin(), b1 = ImGui::GetItemRectMax();
        pr.rects["iv.item." + std::to_string(i)] = Rect{b0.x, b0.y, b1.x - b0.x, b1.y - b0.y};
        ImGui::PopID();
    }
    if (!items.empty()) {
        flow.next(Flow::button_w("Clear all"));
        if (ImGui::SmallButton("Clear all")) {
            Options o = want;
            o.iv = {};
            s.set_options(o);
        }
    }
    std::string state;
    if (s.trace() && !same_interventions(shown, want.iv)) {
        state = "(running: the views show " + (shown.empty() ? std::string("the pass without interventions") : shown.describe()) + ")";
    } else if (s.trace() && !shown.empty() && s.result().from_block >= 0) {
        state = "(recomputed from block " + std::to_string(s.result().from_block) + " on, the stages before it reused)";
        pr.numbers["iv.from_block"] = s.result().from_block;
    }
    if (!state.empty()) {
        flow.next(Flow::text_w(state.c_str()));
        ImGui::PushTextWrapPos(0);
        ImGui::TextDisabled("%s", state.c_str());
        ImGui::PopTextWrapPos();
    }
    // the modes and the patching panel
    Flow modes;
    modes.next(Flow::checkbox_w("click a map to knock out its head (K)"));
    ImGui::Checkbox("click a map to knock out its head (K)", &ui.knock_out);
    if (v.hover && ImGui::IsItemHovered())
        ImGui::SetTooltip("on: a click on a map of the Attention maps tab knocks that head out (or restores it);\n"
                          "off: a click opens its pattern. A right click always knocks out.");
    modes.next(Flow::checkbox_w("paint patches to drop (D)"));
    ImGui::Checkbox("paint patches to drop (D)", &ui.paint_drop);
    if (v.hover && ImGui::IsItemHovered())
        ImGui::SetTooltip("on: clicking (or dragging over) patches of the model input drops them from the sequence\n"
                          "(or puts them back); the pass runs on the patches left");
    const char* patching = st.patch_panel ? "Patching (open)" : "Patching...";
    modes.next(Flow::button_w(patching));
    if (ImGui::SmallButton(patching)) st.patch_panel = !st.patch_panel;
    const ImVec2 b = ImGui::GetCursorScreenPos();
    pr.rects["iv.strip"] = Rect{a.x, a.y, ImGui::GetContentRegionAvail().x, b.y - a.y};
    pr.numbers["iv.count"] = double(items.size());
}

void DrawPatchPanel(ViewCtx& v, InterventionsUi& st) {
    if (!st.patch_panel) return;
    Session& s = v.s;
    Probe& pr = v.probe;
    ImGui::SetNextWindowSize(ImVec2(460, 0), ImGuiCond_Appearing);
    ImGui::SetNextWindowPos(ImVec2(ImGui::GetIO().DisplaySize.x * 0.5f - 230, 120), ImGuiCond_Appearing);
    if (!ImGui::Begin("Activation patching", &st.patch_panel, ImGuiWindowFlags_NoSavedSettings)) {
        ImGui::End();
        return;
    }
    const ImVec2 wp = ImGui::GetWindowPos(), ws = ImGui::GetWindowSize();
    pr.rects["iv.patch_panel"] = Rect{wp.x, wp.y, ws.x, ws.y};
    ImGui::TextWrapped("Run another input with the same options and no interventions, and put one of its stages into "
                       "this run (every row, or the token rows given): every later stage is computed from the patched tensor.");
    const Trace* t = s.trace();
    if (!t) {
        ImGui::TextDisabled("No trace yet: load an image first.");
        ImGui::End();
        return;
    }
    // the other input
    if (!st.samples) {
        st.samples.emplace();
        std::error_code ec;
        for (auto it = fs::recursive_directory_iterator(data_paths().samples, ec); !ec && it != fs::recursive_directory_iterator();
             it.increment(ec))
            if (it->path().extension() == ".png" || it->path().extension() == ".jpg") st.samples->push_back(it->path().string());
        std::sort(st.samples->begin(), st.samples->end());
    }
    ImGui::SetNextItemWidth(260);
    ImGui::InputTextWithHint("##ppath", "other input: image or .npy", st.patch_path, sizeof st.patch_path);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(150);
    if (ImGui::BeginCombo("##psample", "sample image")) {
        for (const std::string& p : *st.samples)
            if (ImGui::Selectable(base_name(p).c_str())) std::snprintf(st.patch_path, sizeof st.patch_path, "%s", p.c_str());
        ImGui::EndCombo();
    }
    // the stage: the patch points of this model's table
    std::vector<size_t> rows;
    for (size_t r = 0; r < t->size(); ++r)
        if (t->info(r).patchable) rows.push_back(r);
    if (st.patch_stage < 0 || size_t(st.patch_stage) >= t->size() || !t->info(size_t(st.patch_stage)).patchable)
        st.patch_stage = rows.empty() ? -1 : int(rows[rows.size() / 2]);
    ImGui::SetNextItemWidth(260);
    if (ImGui::BeginCombo("stage", st.patch_stage >= 0 ? t->name(size_t(st.patch_stage)).c_str() : "none")) {
        for (size_t r : rows)
            if (ImGui::Selectable(t->name(r).c_str(), int(r) == st.patch_stage)) st.patch_stage = int(r);
        ImGui::EndCombo();
    }
    ImGui::SetNextItemWidth(260);
    ImGui::InputTextWithHint("tokens", "every row, or i,j,...", st.patch_tokens, sizeof st.patch_tokens);
    ImGui::TextDisabled("tokens: %s", token_range_text(*t).c_str());
    if (ImGui::Button("Apply")) {
        st.patch_error.clear();
        try {
            if (st.patch_stage < 0) throw std::invalid_argument("this model has no stage to patch");
            const StageInfo& si = t->info(size_t(st.patch_stage));
            std::vector<int> tokens;
            if (st.patch_tokens[0]) tokens = parse_index_list(st.patch_tokens);
            const size_t T = si.shape.size() == 3 ? si.shape[1] : si.shape[0];
            for (int k : tokens)
                if (size_t(k) >= T)
                    throw std::invalid_argument("token " + std::to_string(k) + " is not a token of " + si.name + " (0.." +
                                                std::to_string(T - 1) + ")");
            const std::string path = st.patch_path;
            if (path.empty()) throw std::invalid_argument("choose the other input first");
            if (!s.patch_source() || s.patch_source()->path != path) {
                if (!s.load_patch_source(path)) throw std::invalid_argument("the other input could not be read (see the error panel)");
            }
            Options o = s.options();
            o.iv.patch = ActivationPatch{si.id, tokens, nullptr, path};
            run_dims(s.config(), o);  // a stage or token the model lacks is said here, not by the pass
            s.set_options(o);
        } catch (const std::exception& e) {
            st.patch_error = e.what();
        }
    }
    ImGui::SameLine();
    if (s.options().iv.patch && ImGui::Button("Remove the patch")) {
        Options o = s.options();
        o.iv.patch.reset();
        s.set_options(o);
    }
    if (!st.patch_error.empty()) {
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", st.patch_error.c_str());
        ImGui::PopTextWrapPos();
        pr.strings["iv.patch_error"] = st.patch_error;
    }
    if (const auto& p = s.options().iv.patch) {
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(kIvText, "in force: %s from %s%s", stage_name(p->stage).c_str(), base_name(p->source).c_str(),
                           p->tokens.empty() ? ", every row" : "");
        ImGui::PopTextWrapPos();
    }
    ImGui::End();
}

GridRange grid_range(const std::vector<float>& values) {
    GridRange r;
    bool any = false;
    for (size_t i = 0; i < values.size(); ++i) {
        const float x = values[i];
        if (std::isnan(x)) {
            ++r.absent;
            continue;
        }
        if (!any || x < r.vmin) r.vmin = x, r.argmin = int(i);
        if (!any || x > r.vmax) r.vmax = x, r.argmax = int(i);
        any = true;
    }
    if (!any) r.vmin = 0, r.vmax = 1;
    if (r.vmax <= r.vmin) r.vmax = r.vmin + 1e-9f;
    return r;
}

GridRange upload_grid(Texture& tex, const std::vector<float>& values, int gw, int gh) {
    const GridRange r = grid_range(values);
    if (r.absent == 0) {
        tex.upload_float(values.data(), gw, gh);
        return r;
    }
    std::vector<float> shown(values);
    for (float& x : shown)
        if (std::isnan(x)) x = r.vmin;  // under the hatch
    tex.upload_float(shown.data(), gw, gh);
    return r;
}

int DrawDropped(ImDrawList* dl, const Trace& t, ImVec2 p0, float cw, float ch) {
    const RunDims& rd = t.table().dims();
    if (!rd.dropped()) return 0;
    int n = 0;
    for (int p : t.options().iv.dropped) {
        if (p < 0 || p >= rd.N) continue;
        const float x0 = p0.x + float(p % rd.gw) * cw, y0 = p0.y + float(p / rd.gw) * ch;
        dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x0 + cw, y0 + ch), IM_COL32(20, 20, 24, 200));
        dl->PushClipRect(ImVec2(x0, y0), ImVec2(x0 + cw, y0 + ch), true);
        const float step = std::max(3.f, std::min(cw, ch) / 4);
        for (float k = -ch; k < cw; k += step)  // diagonal hatch lines
            dl->AddLine(ImVec2(x0 + k, y0 + ch), ImVec2(x0 + k + ch, y0), IM_COL32(255, 160, 90, 220), 1.f);
        dl->PopClipRect();
        dl->AddRect(ImVec2(x0, y0), ImVec2(x0 + cw, y0 + ch), IM_COL32(255, 160, 90, 255));
        ++n;
    }
    return n;
}

void DroppedLegend(ViewCtx& v, const Trace& t, const std::string& key) {
    const RunDims& rd = t.table().dims();
    if (!rd.dropped()) return;
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float h = ImGui::GetTextLineHeight();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    // the legend's swatch is the hatch itself
    dl->AddRectFilled(p, ImVec2(p.x + h, p.y + h), IM_COL32(20, 20, 24, 200));
    for (float k = -h; k < h; k += 4) dl->AddLine(ImVec2(p.x + std::max(0.f, k), p.y + std::min(h, h - k)),
                                                  ImVec2(p.x + std::min(h, k + h), p.y + std::max(0.f, -k)),
                                                  IM_COL32(255, 160, 90, 220));
    dl->AddRect(p, ImVec2(p.x + h, p.y + h), IM_COL32(255, 160, 90, 255));
    ImGui::Dummy(ImVec2(h, h));
    ImGui::SameLine();
    const int n = rd.N - rd.kept_n();
    const std::string text = "hatched: " + std::to_string(n) + (n == 1 ? " patch" : " patches") +
                             " dropped (an intervention): no token, no value";
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(kIvText, "%s", text.c_str());
    ImGui::PopTextWrapPos();
    v.probe.strings[key] = text;
}

void DrawKnockedOut(ImDrawList* dl, ImVec2 p0, ImVec2 p1) {
    dl->AddRectFilled(p0, p1, IM_COL32(40, 0, 0, 110));
    dl->AddLine(p0, p1, kAblated, 2.f);
    dl->AddLine(ImVec2(p0.x, p1.y), ImVec2(p1.x, p0.y), kAblated, 2.f);
}

std::string apply_intervention_flags(Session& s, const AppArgs& a) {
    InterventionFlags f;
    f.ablate_heads = a.ablate_heads;
    f.ablate = a.ablate;
    f.drop_patches = a.drop_patches;
    f.patch_from = a.patch_from;
    f.patch_stage = a.patch_stage;
    f.patch_tokens = a.patch_tokens;
    if (!f.any()) return "";
    Options o = s.options();
    try {
        // the patch's values come from the forward pass's job (the source loaded below)
        interventions_from_flags(f, s.weights(), o, a.squash, false);
        if (o.iv.patch) {
            Options target = o;
            target.iv.patch.reset();
            const StageInfo& si = StageTable::get(s.config(), target)->info(o.iv.patch->stage);
            const StageInfo& src = StageTable::get(s.config(), o.clean())->info(o.iv.patch->stage);
            if (si.shape != src.shape)
                throw UsageError("--patch-stage " + f.patch_stage + ": the other input's run gives " + shape_str(src.shape) +
                                 ", this run's " + si.name + " is " + shape_str(si.shape) +
                                 " (dropped patches shorten every stage after embed: patch embed, before the drop)");
        }
    } catch (const UsageError& e) {
        return e.what();
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    if (!f.patch_from.empty() && !s.load_patch_source(f.patch_from)) return "";  // in the error panel (a file: exit 1)
    s.set_options(o);
    return "";
}

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_interventions() {
    using K = ProbeKind;
    return {
        {K::Rect, "iv.strip", "the list of interventions above the tabs"},
        {K::Rect, "iv.item.<i>", "one intervention in the list (a click removes it)"},
        {K::Rect, "iv.patch_panel", "the activation-patching panel"},
        {K::Rect, "nav.head.<layer>.<head>", "the navigator's switch that knocks a head out"},
        {K::Number, "iv.{count|from_block}", "interventions asked for; the block the pass on screen was recomputed from"},
        {K::String, "iv.{list|patch_error}", "the interventions of the trace on screen; why a patch was not applied"},
        {K::String, "{image|grid|uses}.dropped", "the hatch's legend: patches dropped"},
        {K::Number, "{image|grid}.dropped", "dropped patches hatched"},
        {K::Number, "grid.image_alpha", "how much of the model input is laid over each attention map (0: none; --attention-image off)"},
        {K::Number, "grid.knocked_out", "knocked-out heads crossed out in the attention grid"},
    };
}

}  // namespace vit::app
