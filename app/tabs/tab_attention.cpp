// The Attention maps tab: the cls token's attention to every patch, one map per layer and head.
#include <imgui.h>

#include <algorithm>
#include <cfloat>

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
                           "last column the mean over heads. Click a map to show it over the image and open its pattern.");
        AttentionNote(v, "attn");
        size_t need = size_t(L) * (H + 1);
        if (grid_.size() != need) { grid_.clear(); grid_.resize(need); range_.assign(need, {0.f, 1.f}); keys_.forget("grid"); }
        bool up = keys_.stale("grid", s.version());
        // every map is computed before any is drawn: the shared scale is the largest of them all
        if (up) {
            for (int l = 0; l < L; ++l)
                for (int h = 0; h <= H; ++h) {
                    const size_t gi = size_t(l) * (H + 1) + h;
                    std::vector<float> a = cls_attention(*t, l, h == H ? -1 : h);
                    if (a.size() == size_t(G) * G) {
                        grid_[gi].upload_float(a.data(), G, G);
                        auto r = std::minmax_element(a.begin(), a.end());
                        range_[gi] = {*r.first, *r.second};
                    }
                }
        }
        float shared_max = 0;
        for (auto& r : range_) shared_max = std::max(shared_max, r.second);
        // The key: one scale for every map, from 0, uniform attention 1/T marked; or each map's own.
        const int T = int(t->get(StageId{StageKind::AttnPattern, 0}).shape().back());
        ImGui::Checkbox("contrast per map", &ui.attention_per_map);
        if (v.hover && ImGui::IsItemHovered())
            ImGui::SetTooltip("off: one scale for every map, from 0 to the largest value of them all (colours compare across maps)\n"
                              "on: each map from 0 to its own largest value, printed under it (colours do not compare)");
        ImGui::SameLine();
        ImGui::TextDisabled(ui.attention_per_map ? "each map: 0 (dark) to its own max, printed under it" : "all maps: one scale");
        const std::vector<KeyMark> marks = attention_marks(T);
        if (!ui.attention_per_map) {
            ColorKey(v, "attn", attention_colormap(shared_max, shared_max, false), std::min(ImGui::GetContentRegionAvail().x, 420.f), marks);
        } else {
            ColorKey(v, "attn", attention_colormap(1.f, 1.f, false), std::min(ImGui::GetContentRegionAvail().x, 420.f));
            ImGui::SameLine();
            ImGui::TextDisabled("(fraction of each map's max)");
        }
        pr.numbers["attn.per_map"] = ui.attention_per_map;
        pr.numbers["attn.shared_max"] = shared_max;
        pr.numbers["attn.uniform"] = 1.0 / T;
        const float label_w = ImGui::CalcTextSize(("L" + std::to_string(L - 1)).c_str()).x + 10;
        const float gap = ImGui::GetStyle().ItemSpacing.x;
        const float th = ImGui::GetTextLineHeight();
        const float caption = ui.attention_per_map ? th : 0.f;  // each map's max under it
        // as large as the view allows, every map on screen at once (scrolling only below 24 px maps)
        const ImVec2 room = ImGui::GetContentRegionAvail();
        const float fit_w = (room.x - label_w - 4) / (H + 1) - gap;
        const float fit_h = (room.y - th - 8) / L - gap - caption;
        const float cell = std::clamp(std::min(fit_w, fit_h), 24.f, 128.f);
        std::string ranges;
        ImGui::BeginChild("grid", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
        ImDrawList* dl = ImGui::GetWindowDrawList();
        const ImVec2 o = ImGui::GetCursorScreenPos();
        const ImU32 tc = ImGui::GetColorU32(ImGuiCol_TextDisabled);
        // the heads across the top, the layers down the side
        for (int h = 0; h <= H; ++h) {
            const std::string hl = h == H ? "mean" : "h" + std::to_string(h);
            const float w = ImGui::CalcTextSize(hl.c_str()).x;
            dl->AddText(ImVec2(o.x + label_w + h * (cell + gap) + (cell - w) / 2, o.y), tc, hl.c_str());
        }
        const float y0 = o.y + th + 4;
        for (int l = 0; l < L; ++l) {
            const float y = y0 + l * (cell + gap + caption);
            dl->AddText(ImVec2(o.x, y + cell / 2 - th / 2), ImGui::GetColorU32(ImGuiCol_Text), ("L" + std::to_string(l)).c_str());
            for (int h = 0; h <= H; ++h) {
                const int head = h == H ? -1 : h;
                const size_t gi = size_t(l) * (H + 1) + h;
                const Colormap cm = attention_colormap(shared_max, range_[gi].second, ui.attention_per_map);
                const ImVec2 p(o.x + label_w + h * (cell + gap), y);
                ImGui::SetCursorScreenPos(p);
                ImGui::PushID(l * 1000 + h);
                if (ImGui::InvisibleButton("m", ImVec2(cell, cell))) {
                    ui.overlay = Overlay::Cls; ui.overlay_layer = l; ui.overlay_head = head;
                    select_stage(ui, *t, StageId{StageKind::AttnPattern, l});
                    if (head >= 0) ui.head = head;
                    ui.tab = Tab::Stage;
                }
                if (v.hover && ImGui::IsItemHovered())
                    ImGui::SetTooltip("layer %d, %s: %s .. %s (uniform: %s)", l, head < 0 ? "mean of heads" : ("head " + std::to_string(head)).c_str(),
                                      fmt(range_[gi].first).c_str(), fmt(range_[gi].second).c_str(), fmt(1.f / T).c_str());
                ImGui::PopID();
                v.gfx.draw(dl, grid_[gi], p, ImVec2(p.x + cell, p.y + cell), cm);
                const std::string gname = "grid." + std::to_string(l) + "." + (head < 0 ? std::string("mean") : std::to_string(head));
                pr.rects[gname] = Rect{p.x, p.y, cell, cell};
                const bool sel = ui.overlay == Overlay::Cls && (ui.overlay_layer < 0 ? L - 1 : ui.overlay_layer) == l && ui.overlay_head == head;
                dl->AddRect(p, ImVec2(p.x + cell, p.y + cell), sel ? IM_COL32(255, 80, 200, 255) : IM_COL32(70, 70, 70, 255), 0, 0, sel ? 3 : 1);
                pr.heatmaps.push_back({gname, Rect{p.x, p.y, cell, cell}, G, G, cell / G, cell / G, true});
                if (ui.attention_per_map) {
                    // this map's range, printed under it (small type: it must fit the map's width)
                    // (one significant digit when two do not fit; the tooltip has the range in full)
                    std::string cap = fmt_short(range_[gi].second);
                    const float fs = std::min(ImGui::GetFontSize(), 13.f);
                    ImVec2 sz = ImGui::GetFont()->CalcTextSizeA(fs, FLT_MAX, 0, cap.c_str());
                    if (sz.x > cell + gap - 2) {
                        char b[16];
                        std::snprintf(b, sizeof b, "%.1g", double(range_[gi].second));
                        cap = b;
                        sz = ImGui::GetFont()->CalcTextSizeA(fs, FLT_MAX, 0, cap.c_str());
                    }
                    const ImVec2 at(p.x + (cell - sz.x) / 2, p.y + cell + 1);
                    if (sz.x <= cell + gap - 2) {
                        dl->AddText(ImGui::GetFont(), fs, at, tc, cap.c_str());
                        pr.text("attn.ranges", cap, Rect{at.x, at.y, sz.x, sz.y}, Rect{p.x - gap / 2, p.y, cell + gap, cell + caption + 2});
                    }
                    ranges += (ranges.empty() ? "" : ",") + std::to_string(range_[gi].second);
                }
            }
        }
        ImGui::SetCursorScreenPos(o);
        ImGui::Dummy(ImVec2(label_w + (H + 1) * (cell + gap), th + 4 + L * (cell + gap + caption)));
        if (ui.attention_per_map) pr.strings["attn.ranges"] = ranges;
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
