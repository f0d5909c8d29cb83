// The Attention maps tab: the cls token's attention to every patch, one map per layer and head (for a
// model without a cls token, SigLIP, the pooling probe's attention, one map per head).
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
            std::string why = !s.has_image() ? "No image is loaded, so the model has not run." : "Running the model...";
            ImGui::TextDisabled("%s", why.c_str());
            pr.strings["grid.message"] = why;
            return;
        }
        const StageTable& table = t->table();
        const Config& c = table.config();
        const RunDims& rd = table.dims();
        const int L = c.depth, H = c.heads, gh = rd.gh, gw = rd.gw, N = rd.N;
        // a model without a cls token (SigLIP) summarises the image by its pooling head's probe: one row
        const bool probe = !c.cls_token;
        if (L == 0) {
            const std::string why = "This model has no blocks, so there is no attention to show.";
            ImGui::TextDisabled("%s", why.c_str());
            pr.strings["grid.message"] = why;
            return;
        }
        if (probe && !t->has(StageId{StageKind::HeadAttnPattern})) {
            const std::string why = "This model has no cls token and no attention-pooling probe: no token's attention "
                                    "summarises the image (the Stage tab shows every attention pattern; the overlay "
                                    "\"attention from a token\" any token's row).";
            ImGui::PushTextWrapPos(0);
            ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s", why.c_str());
            ImGui::PopTextWrapPos();
            pr.strings["grid.message"] = why;
            return;
        }
        for (int l = 0; l < L; ++l)
            if (!t->has(StageId{StageKind::AttnPattern, l})) {
                const std::string why = "No attention pattern for block " + std::to_string(l) + " in this trace.";
                ImGui::TextDisabled("%s", why.c_str());
                pr.strings["grid.message"] = why;
                return;
            }
        const int rows = probe ? 1 : L;
        ImGui::PushTextWrapPos(0);
        if (probe)
            ImGui::TextWrapped("This model has no cls token: its image summary is the attention-pooling head, whose learned "
                               "probe attends over the %d patches after block %d (head.attn.pattern). One map per head, "
                               "last the mean over heads. Click a map to show it over the image and open its pattern.",
                               N, L - 1);
        else
            ImGui::TextWrapped("The cls token's attention to every patch (%dx%d): one map per layer (rows) and head "
                               "(columns), last column the mean over heads%s. Click a map to show it over the image and "
                               "open its pattern; right-click it (or turn on \"click a map to knock out its head\" above) "
                               "to knock that head out.", gh, gw,
                               rd.prefix > 1 ? " (the other tokens before the patches, as keys, are left out)" : "");
        ImGui::PopTextWrapPos();
        DroppedLegend(v, *t, "grid.dropped");
        int knocked = 0, hatched = 0;
        pr.strings["grid.source"] = probe ? stage_name(StageId{StageKind::HeadAttnPattern}) : stage_local_name(StageId{StageKind::AttnPattern, 0});
        size_t need = size_t(rows) * (H + 1);
        if (grid_.size() != need) { grid_.clear(); grid_.resize(need); range_.assign(need, {0.f, 1.f}); keys_.forget("grid"); }
        bool up = keys_.stale("grid", s.version());
        const std::string first = probe ? "probe" : "L" + std::to_string(L - 1);
        const float label_w = ImGui::CalcTextSize(first.c_str()).x + 10;
        const float gap = ImGui::GetStyle().ItemSpacing.x;
        float cell = std::clamp((ImGui::GetContentRegionAvail().x - label_w - 20) / (H + 1) - gap, 24.f, 96.f);
        // each map at the grid's aspect: its longer side is `cell`
        const float mw = gw >= gh ? cell : cell * float(gw) / float(gh), mh = gh >= gw ? cell : cell * float(gh) / float(gw);
        ImGui::BeginChild("grid", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
        const float x0 = ImGui::GetCursorPosX();
        for (int l = 0; l < rows; ++l) {
            const int layer = probe ? -1 : l;
            // every row starts at the same x whatever the width of its label ("L9" vs "L10")
            float y = ImGui::GetCursorPosY();
            ImGui::SetCursorPosY(y + mh / 2 - ImGui::GetTextLineHeight() / 2);
            ImGui::Text("%s", probe ? "probe" : ("L" + std::to_string(l)).c_str());
            ImGui::SetCursorPosY(y);
            for (int h = 0; h <= H; ++h) {
                ImGui::SameLine(x0 + label_w + h * (mw + gap));
                int head = h == H ? -1 : h;
                size_t gi = size_t(l) * (H + 1) + h;
                Texture& tex = grid_[gi];
                if (up) {
                    // NaN at dropped patches (hatched below)
                    std::vector<float> a = probe ? probe_attention(*t, head) : cls_attention(*t, l, head);
                    if (a.size() == size_t(N)) {
                        const GridRange r = upload_grid(tex, a, gw, gh);
                        range_[gi] = {r.vmin, r.vmax};
                    }
                }
                Colormap cm;
                cm.vmin = range_[gi].first;
                cm.vmax = std::max(range_[gi].second, cm.vmin + 1e-9f);
                ImVec2 p = ImGui::GetCursorScreenPos();
                ImGui::PushID(l * 1000 + h);
                const bool clicked = ImGui::InvisibleButton("m", ImVec2(mw, mh));
                const bool right = ImGui::IsItemClicked(ImGuiMouseButton_Right);
                if (!probe && head >= 0 && (right || (clicked && ui.knock_out))) {
                    toggle_head(s, l, head);  // knocked out, or back: the pass re-runs
                } else if (clicked) {
                    ui.overlay = Overlay::Cls; ui.overlay_layer = probe ? -1 : l; ui.overlay_head = head;
                    select_stage(ui, *t, probe ? StageId{StageKind::HeadAttnPattern} : StageId{StageKind::AttnPattern, l});
                    if (head >= 0) ui.head = head;
                    ui.tab = Tab::Stage;
                }
                if (v.hover && ImGui::IsItemHovered())
                    ImGui::SetTooltip("%s, %s: max %.3f", probe ? "the pooling probe" : ("layer " + std::to_string(l)).c_str(),
                                      head < 0 ? "mean of heads" : ("head " + std::to_string(head)).c_str(), range_[gi].second);
                ImGui::PopID();
                v.gfx.draw(ImGui::GetWindowDrawList(), tex, p, ImVec2(p.x + mw, p.y + mh), cm);
                hatched += DrawDropped(ImGui::GetWindowDrawList(), *t, p, mw / gw, mh / gh);
                if (!probe && head >= 0 && head_ablated(s.shown_options(), l, head)) {  // what ran: this head was knocked out
                    DrawKnockedOut(ImGui::GetWindowDrawList(), p, ImVec2(p.x + mw, p.y + mh));
                    ++knocked;
                }
                pr.rects["grid." + (probe ? std::string("probe") : std::to_string(l)) + "." +
                         (head < 0 ? std::string("mean") : std::to_string(head))] = Rect{p.x, p.y, mw, mh};
                bool sel = ui.overlay == Overlay::Cls && (probe || (ui.overlay_layer < 0 ? L - 1 : ui.overlay_layer) == layer) &&
                           ui.overlay_head == head;
                ImGui::GetWindowDrawList()->AddRect(p, ImVec2(p.x + mw, p.y + mh), sel ? IM_COL32(255, 80, 200, 255) : IM_COL32(70, 70, 70, 255), 0, 0, sel ? 3 : 1);
            }
        }
        ImGui::Text(" ");
        for (int h = 0; h <= H; ++h) {
            ImGui::SameLine(x0 + label_w + h * (mw + gap));
            ImGui::TextDisabled(h == H ? "mean" : "h%d", h);
        }
        ImGui::EndChild();
        pr.numbers["grid.knocked_out"] = knocked;
        if (hatched) pr.numbers["grid.dropped"] = hatched;
    }

    void sweep_check(const Session& s, const UiState&, const Probe& p, const SweepFail& fail) const override {
        if (!s.trace()) return;
        const bool any = std::any_of(p.rects.begin(), p.rects.end(), [](auto& r) { return r.first.rfind("grid.", 0) == 0; });
        if (!any && p.string("grid.message").empty()) fail("the attention maps tab drew no map and gave no reason");
    }

private:
    CacheKeys keys_;
    std::vector<Texture> grid_;                  // layer x (heads + mean)
    std::vector<std::pair<float, float>> range_; // min, max per map
};

}  // namespace

std::unique_ptr<TabView> make_attention_tab(JobQueue&) { return std::make_unique<AttentionTab>(); }

}  // namespace vit::app
