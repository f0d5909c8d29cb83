// The Attention maps tab: the cls token's attention to every patch, one map per layer and head.
#include <imgui.h>

#include <algorithm>

#include "app/interventions_ui.h"
#include "app/tabs/tab.h"

namespace vit::app {

namespace {

class AttentionTab : public TabView {
public:
    void draw(ViewCtx& v) override {
        Session& s = v.s;
        UiState& ui = v.ui;
        Probe& pr = v.probe;
        const Trace* t = s.trace();
        if (!t) {
            ImGui::TextDisabled("%s", !s.has_image() ? "No image is loaded, so the model has not run." : "Running the model...");
            return;
        }
        const Config& c = s.shown_config();
        int L = c.depth, H = c.heads, G = c.grid();
        if (L == 0) { ImGui::TextDisabled("This model has no blocks, so there is no attention to show."); return; }
        for (int l = 0; l < L; ++l)
            if (!t->has(StageId{StageKind::AttnPattern, l})) {
                ImGui::TextDisabled("No attention pattern for block %d in this trace.", l);
                return;
            }
        ImGui::TextWrapped("The cls token's attention to every patch: one map per layer (rows) and head (columns), "
                           "last column the mean over heads. Click a map to show it over the image and open its pattern; "
                           "right-click it (or turn on \"click a map to knock out its head\" above) to knock that head out.");
        DroppedLegend(v, *t, "grid.dropped");
        int knocked = 0, hatched = 0;
        size_t need = size_t(L) * (H + 1);
        if (grid_.size() != need) { grid_.clear(); grid_.resize(need); range_.assign(need, {0.f, 1.f}); keys_.forget("grid"); }
        bool up = keys_.stale("grid", s.version());
        const float label_w = ImGui::CalcTextSize(("L" + std::to_string(L - 1)).c_str()).x + 10;
        const float gap = ImGui::GetStyle().ItemSpacing.x;
        float cell = std::clamp((ImGui::GetContentRegionAvail().x - label_w - 20) / (H + 1) - gap, 24.f, 96.f);
        ImGui::BeginChild("grid", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
        const float x0 = ImGui::GetCursorPosX();
        for (int l = 0; l < L; ++l) {
            // every row starts at the same x whatever the width of its label ("L9" vs "L10")
            float y = ImGui::GetCursorPosY();
            ImGui::SetCursorPosY(y + cell / 2 - ImGui::GetTextLineHeight() / 2);
            ImGui::Text("L%d", l);
            ImGui::SetCursorPosY(y);
            for (int h = 0; h <= H; ++h) {
                ImGui::SameLine(x0 + label_w + h * (cell + gap));
                int head = h == H ? -1 : h;
                size_t gi = size_t(l) * (H + 1) + h;
                Texture& tex = grid_[gi];
                if (up) {
                    std::vector<float> a = cls_attention(*t, l, head);  // NaN at dropped patches (hatched below)
                    if (a.size() == size_t(G) * G) {
                        const GridRange r = upload_grid(tex, a, G, G);
                        range_[gi] = {r.vmin, r.vmax};
                    }
                }
                Colormap cm;
                cm.vmin = range_[gi].first;
                cm.vmax = std::max(range_[gi].second, cm.vmin + 1e-9f);
                ImVec2 p = ImGui::GetCursorScreenPos();
                ImGui::PushID(l * 1000 + h);
                const bool clicked = ImGui::InvisibleButton("m", ImVec2(cell, cell));
                const bool right = ImGui::IsItemClicked(ImGuiMouseButton_Right);
                if (head >= 0 && (right || (clicked && ui.knock_out))) {
                    toggle_head(s, l, head);  // knocked out, or back: the pass re-runs
                } else if (clicked) {
                    ui.overlay = Overlay::Cls; ui.overlay_layer = l; ui.overlay_head = head;
                    select_stage(ui, *t, StageId{StageKind::AttnPattern, l});
                    if (head >= 0) ui.head = head;
                    ui.tab = Tab::Stage;
                }
                if (v.hover && ImGui::IsItemHovered())
                    ImGui::SetTooltip("layer %d, %s: max %.3f", l, head < 0 ? "mean of heads" : ("head " + std::to_string(head)).c_str(),
                                      range_[gi].second);
                ImGui::PopID();
                v.gfx.draw(ImGui::GetWindowDrawList(), tex, p, ImVec2(p.x + cell, p.y + cell), cm);
                hatched += DrawDropped(ImGui::GetWindowDrawList(), *t, p, cell / G, cell / G);
                if (head >= 0 && head_ablated(s.shown_options(), l, head)) {  // what ran: this head was knocked out
                    DrawKnockedOut(ImGui::GetWindowDrawList(), p, ImVec2(p.x + cell, p.y + cell));
                    ++knocked;
                }
                pr.rects["grid." + std::to_string(l) + "." + (head < 0 ? std::string("mean") : std::to_string(head))] =
                    Rect{p.x, p.y, cell, cell};
                bool sel = ui.overlay == Overlay::Cls && (ui.overlay_layer < 0 ? L - 1 : ui.overlay_layer) == l && ui.overlay_head == head;
                ImGui::GetWindowDrawList()->AddRect(p, ImVec2(p.x + cell, p.y + cell), sel ? IM_COL32(255, 80, 200, 255) : IM_COL32(70, 70, 70, 255), 0, 0, sel ? 3 : 1);
            }
        }
        pr.numbers["grid.knocked_out"] = knocked;
        if (hatched) pr.numbers["grid.dropped"] = hatched;
        ImGui::Text(" ");
        for (int h = 0; h <= H; ++h) {
            ImGui::SameLine(x0 + label_w + h * (cell + gap));
            ImGui::TextDisabled(h == H ? "mean" : "h%d", h);
        }
        ImGui::EndChild();
    }

private:
    CacheKeys keys_;
    std::vector<Texture> grid_;                  // layer x (heads + mean)
    std::vector<std::pair<float, float>> range_; // min, max per map
};

}  // namespace

std::unique_ptr<TabView> make_attention_tab(JobQueue&) { return std::make_unique<AttentionTab>(); }

}  // namespace vit::app
