// The Attention maps tab: the cls token's attention to every patch, one map per layer and head (for a
// model without a cls token, SigLIP, the pooling probe's attention, one map per head), all on one
// scale from 0 with uniform attention marked (or each map on its own, its max printed under it);
// knocked-out heads crossed and dropped patches hatched, as the run on screen had them.
#include "app/probe.h"
#include <imgui.h>

#include <algorithm>
#include <cfloat>

#include "app/interventions_ui.h"
#include "app/tensor_access.h"
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
            say_why(v, "grid.message", why);
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
        AttentionNote(v, "attn");
        DroppedLegend(v, *t, "grid.dropped");
        pr.strings["grid.source"] = probe ? stage_name(StageId{StageKind::HeadAttnPattern}) : stage_local_name(StageId{StageKind::AttnPattern, 0});
        const size_t need = size_t(rows) * (H + 1);
        if (grid_.size() != need) { grid_.clear(); grid_.resize(need); range_.assign(need, {0.f, 1.f}); keys_.forget("grid"); }
        // every map is computed before any is drawn: the shared scale is the largest of them all
        if (keys_.stale("grid", s.version())) {
            for (int l = 0; l < rows; ++l)
                for (int h = 0; h <= H; ++h) {
                    const size_t gi = size_t(l) * (H + 1) + h;
                    const int head = h == H ? -1 : h;
                    // NaN at dropped patches (hatched below; the range is over the patches kept)
                    std::vector<float> a = probe ? probe_attention(*t, head) : cls_attention(*t, l, head);
                    if (a.size() == size_t(N)) {
                        const GridRange r = upload_grid(grid_[gi], a, gw, gh);
                        range_[gi] = {r.vmin, r.vmax};
                    }
                }
        }
        float shared_max = 0;
        for (auto& r : range_) shared_max = std::max(shared_max, r.second);
        // The key: one scale for every map, from 0, uniform attention 1/T (T the keys) marked; or each map's own.
        const StageId src = probe ? StageId{StageKind::HeadAttnPattern} : StageId{StageKind::AttnPattern, 0};
        const int T = int(t->get(src).shape().back());
        AttentionScaleKey(v, "attn", ui.attention_per_map, shared_max, T, "map", "under");
        // the image the maps are of, faintly under each (issue 36): where the attention falls on it
        if (ImGui::GetItemRectMax().x + 24 + Flow::checkbox_w("image under the maps") <=
            ImGui::GetCursorScreenPos().x + ImGui::GetContentRegionAvail().x)
            ImGui::SameLine(0, 24);  // beside the key when it fits
        ImGui::Checkbox("image under the maps", &ui.attention_image);
        if (v.hover && ImGui::IsItemHovered())
            ImGui::SetTooltip("the model input in gray, a quarter over each map: where on the picture the attention falls "
                              "(off: the maps' pixels are exactly the colour scale's)");
        if (ui.attention_image && keys_.stale("image", s.version())) upload_gray_input(image_, *t, s.shown_config());
        const bool under = ui.attention_image && image_.valid();
        pr.numbers["grid.image_alpha"] = under ? kImageAlpha / 255.0 : 0.0;
        pr.numbers["attn.per_map"] = ui.attention_per_map;
        pr.numbers["attn.shared_max"] = shared_max;
        pr.numbers["attn.uniform"] = 1.0 / T;
        const auto row_name = [&](int l) { return probe ? std::string("probe") : "L" + std::to_string(l); };
        const float label_w = ImGui::CalcTextSize(row_name(rows - 1).c_str()).x + 10;
        const float gap = ImGui::GetStyle().ItemSpacing.x;
        const float th = ImGui::GetTextLineHeight();
        const float caption = ui.attention_per_map ? th : 0.f;  // each map's max under it
        // as large as the view allows, every map on screen at once (scrolling only below 24 px maps);
        // each map at the grid's aspect, its longer side `cell`
        const ImVec2 room = ImGui::GetContentRegionAvail();
        const float aw = gw >= gh ? 1.f : float(gw) / float(gh), ah = gh >= gw ? 1.f : float(gh) / float(gw);
        const float fit_w = ((room.x - label_w - 4) / (H + 1) - gap) / aw;
        const float fit_h = ((room.y - th - 8) / rows - gap - caption) / ah;
        // (no cap but a generous one: on a large screen the maps grow, issue 36; they were held to 128 px)
        // (the shorter side at least 24 px: a 4x6 grid's maps were 24x16 at 1280x800, DINOv2 at 56x84)
        const float cell = std::clamp(std::min(fit_w, fit_h), 24.f / std::min(aw, ah), 480.f);
        const float mw = cell * aw, mh = cell * ah;
        std::string ranges;
        int knocked = 0, hatched = 0;
        ImGui::BeginChild("grid", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
        ImDrawList* dl = ImGui::GetWindowDrawList();
        const ImVec2 o = ImGui::GetCursorScreenPos();
        const ImU32 tc = ImGui::GetColorU32(ImGuiCol_TextDisabled);
        // the heads across the top, the layers down the side
        for (int h = 0; h <= H; ++h) {
            const std::string hl = h == H ? "mean" : "h" + std::to_string(h);
            const float w = ImGui::CalcTextSize(hl.c_str()).x;
            dl->AddText(ImVec2(o.x + label_w + h * (mw + gap) + (mw - w) / 2, o.y), tc, hl.c_str());
        }
        const float y0 = o.y + th + 4;
        for (int l = 0; l < rows; ++l) {
            const float y = y0 + l * (mh + gap + caption);
            dl->AddText(ImVec2(o.x, y + mh / 2 - th / 2), ImGui::GetColorU32(ImGuiCol_Text), row_name(l).c_str());
            for (int h = 0; h <= H; ++h) {
                const int head = h == H ? -1 : h;
                const size_t gi = size_t(l) * (H + 1) + h;
                const Colormap cm = attention_colormap(shared_max, range_[gi].second, ui.attention_per_map);
                const ImVec2 p(o.x + label_w + h * (mw + gap), y);
                ImGui::SetCursorScreenPos(p);
                ImGui::PushID(l * 1000 + h);
                const bool clicked = ImGui::InvisibleButton("m", ImVec2(mw, mh));
                const bool right = ImGui::IsItemClicked(ImGuiMouseButton_Right);
                if (!probe && head >= 0 && (right || (clicked && ui.knock_out))) {
                    toggle_head(s, l, head);  // knocked out, or back: the pass re-runs
                } else if (clicked) {
                    ui.overlay = Overlay::Cls; ui.overlay_layer = probe ? -1 : l; ui.overlay_head = head;
                    select_stage(ui, *t, src.kind == StageKind::HeadAttnPattern ? src : StageId{StageKind::AttnPattern, l});
                    if (head >= 0) ui.head = head;
                    ui.tab = Tab::Stage;
                }
                if (v.hover && ImGui::IsItemHovered())
                    ImGui::SetTooltip("%s, %s: %s .. %s (uniform: %s)", probe ? "the pooling probe" : ("layer " + std::to_string(l)).c_str(),
                                      head < 0 ? "mean of heads" : ("head " + std::to_string(head)).c_str(),
                                      fmt(range_[gi].first).c_str(), fmt(range_[gi].second).c_str(), fmt(1.f / T).c_str());
                ImGui::PopID();
                v.gfx.draw(dl, grid_[gi], p, ImVec2(p.x + mw, p.y + mh), cm);
                if (under) dl->AddImage(image_.id(), p, ImVec2(p.x + mw, p.y + mh), ImVec2(0, 0), ImVec2(1, 1),
                                        IM_COL32(255, 255, 255, kImageAlpha));
                hatched += DrawDropped(dl, *t, p, mw / gw, mh / gh);
                if (!probe && head >= 0 && head_ablated(s.shown_options(), l, head)) {  // what ran: this head was knocked out
                    DrawKnockedOut(dl, p, ImVec2(p.x + mw, p.y + mh));
                    ++knocked;
                }
                const std::string gname = "grid." + (probe ? std::string("probe") : std::to_string(l)) + "." +
                                          (head < 0 ? std::string("mean") : std::to_string(head));
                pr.rects[gname] = Rect{p.x, p.y, mw, mh};
                const bool sel = ui.overlay == Overlay::Cls && (probe || (ui.overlay_layer < 0 ? L - 1 : ui.overlay_layer) == l) &&
                                 ui.overlay_head == head;
                dl->AddRect(p, ImVec2(p.x + mw, p.y + mh), sel ? IM_COL32(255, 80, 200, 255) : IM_COL32(70, 70, 70, 255), 0, 0, sel ? 3 : 1);
                pr.heatmaps.push_back({gname, Rect{p.x, p.y, mw, mh}, gh, gw, mw / gw, mh / gh, true});
                if (ui.attention_per_map) {
                    // this map's range, printed under it (small type: it must fit the map's width)
                    // (one significant digit when two do not fit; the tooltip has the range in full)
                    // (said as this map's own scale where it fits: "0..0.80")
                    std::string cap = "0.." + fmt_short(range_[gi].second);
                    if (ImGui::GetFont()->CalcTextSizeA(std::min(ImGui::GetFontSize(), 13.f), FLT_MAX, 0, cap.c_str()).x > mw + gap - 2)
                        cap = fmt_short(range_[gi].second);
                    const float fs = std::min(ImGui::GetFontSize(), 13.f);
                    ImVec2 sz = ImGui::GetFont()->CalcTextSizeA(fs, FLT_MAX, 0, cap.c_str());
                    if (sz.x > mw + gap - 2) {
                        char b[16];
                        std::snprintf(b, sizeof b, "%.1g", double(range_[gi].second));
                        cap = b;
                        sz = ImGui::GetFont()->CalcTextSizeA(fs, FLT_MAX, 0, cap.c_str());
                    }
                    const ImVec2 at(p.x + (mw - sz.x) / 2, p.y + mh + 1);
                    if (sz.x <= mw + gap - 2) {
                        dl->AddText(ImGui::GetFont(), fs, at, tc, cap.c_str());
                        pr.text("attn.ranges", cap, Rect{at.x, at.y, sz.x, sz.y}, Rect{p.x - gap / 2, p.y, mw + gap, mh + caption + 2});
                    }
                    ranges += (ranges.empty() ? "" : ",") + std::to_string(range_[gi].second);
                }
            }
        }
        ImGui::SetCursorScreenPos(o);
        ImGui::Dummy(ImVec2(label_w + (H + 1) * (mw + gap), th + 4 + rows * (mh + gap + caption)));
        if (ui.attention_per_map) pr.strings["attn.ranges"] = ranges;
        ImGui::EndChild();
        pr.numbers["grid.knocked_out"] = knocked;
        if (hatched) pr.numbers["grid.dropped"] = hatched;
    }

    void sweep_check(const Session& s, const UiState&, const Probe& p, const SweepFail& fail) const override {
        if (!s.trace()) return;
        const bool any = std::any_of(p.rects.begin(), p.rects.end(), [](auto& r) { return r.first.rfind("grid.", 0) == 0; });
        if (!any && p.string("grid.message").empty()) fail("the attention maps tab drew no map and gave no reason");
        rule_grid_uses_space(p, fail);
    }

    // Issue 36: the grid grows with the room (at 2560x1440 it took 22% of the centre, its maps held to
    // 128 px): its maps reach across most of the centre's width, or down most of the height below them.
    static void rule_grid_uses_space(const Probe& p, const SweepFail& fail) {
        const auto ce = p.rects.find("center");
        if (ce == p.rects.end()) return;
        float x0 = 1e9f, y0 = 1e9f, x1 = -1e9f, y1 = -1e9f;
        for (const auto& [k, r] : p.rects) {
            if (k.rfind("grid.", 0) != 0) continue;
            x0 = std::min(x0, r.x); y0 = std::min(y0, r.y);
            x1 = std::max(x1, r.x + r.w); y1 = std::max(y1, r.y + r.h);
        }
        if (x1 < x0) return;  // no map: said why (above)
        const Rect& c = ce->second;
        const float wf = (x1 - c.x) / c.w, hf = (y1 - y0) / std::max(1.f, c.y + c.h - y0);
        if (std::max(wf, hf) < 0.8f)
            fail("the attention grid uses " + std::to_string(int(100 * wf)) + "% of the centre's width and " +
                 std::to_string(int(100 * hf)) + "% of the height below its top: its maps do not grow with the room");
    }

    // The model input in gray (0..255 from the denormalized input, channels averaged), for under the maps.
    static void upload_gray_input(Texture& tex, const Trace& t, const Config& c) {
        const Array* in = t.find(StageId{StageKind::Input});
        if (!in || rank(*in) != 3) return;
        const int C = int(extent(*in, 0)), Ih = int(extent(*in, 1)), Iw = int(extent(*in, 2));
        const Tensor3 img = denormalize(Tensor3(*in), c);
        std::vector<unsigned char> rgba(size_t(Ih) * size_t(Iw) * 4, 255);
        for (int y = 0; y < Ih; ++y)
            for (int x = 0; x < Iw; ++x) {
                float g = 0;
                for (int ch = 0; ch < C; ++ch) g += img.data()[(size_t(ch) * Ih + y) * Iw + x];
                const unsigned char u = (unsigned char)(std::clamp(g / float(C), 0.f, 1.f) * 255.f + 0.5f);
                unsigned char* px = &rgba[(size_t(y) * Iw + x) * 4];
                px[0] = px[1] = px[2] = u;
            }
        tex.upload_rgba(rgba.data(), Iw, Ih);
    }

private:
    static constexpr int kImageAlpha = 64;       // the image over each map: a quarter (faint, the map still reads)
    CacheKeys keys_;
    Texture image_;                              // the model input in gray, under the maps
    std::vector<Texture> grid_;                  // layer x (heads + mean)
    std::vector<std::pair<float, float>> range_; // min, max per map
};

}  // namespace

std::unique_ptr<TabView> make_attention_tab(JobQueue&) { return std::make_unique<AttentionTab>(); }

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_attention() {
    using K = ProbeKind;
    return {
        {K::Rect, "grid.<layer>.<head or mean>", "one map of the attention grid (layer 'probe': SigLIP's pooling probe)"},
        {K::String, "grid.{message|source}", "why the attention grid shows nothing; the stage its maps read"},
        {K::Number, "attn.{per_map|shared_max|uniform}", "the attention grid's scale"},
        {K::String, "attn.ranges", "each map's max, when each has its own scale"},
        {K::Group, "attn.ranges", "each map's max, under it"},
    };
}

}  // namespace vit::app
