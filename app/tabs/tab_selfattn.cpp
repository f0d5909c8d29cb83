// The Self-attention tab (issue 20 item 4): DINO's self-attention maps. Each head's attention from the
// cls token to the patches at a layer (the last by default), and the mask of the patches that hold a
// chosen share of that head's attention mass (vit::cls_head_maps; DINO's visualize_attention.py
// --threshold). A model without a cls token (SigLIP) shows its pooling probe's attention instead, said so.
#include "app/probe.h"
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/interventions_ui.h"
#include "app/tabs/tab.h"
#include "core/teach/teach.h"

namespace vit::app {

namespace {

const ImVec4 kWarn(kWarnRGBA[0], kWarnRGBA[1], kWarnRGBA[2], kWarnRGBA[3]);


class SelfAttnTab : public TabView {
public:
    void draw(ViewCtx& v) override {
        Session& s = v.s;
        UiState& ui = v.ui;
        Probe& pr = v.probe;
        const Trace* t = trace_or_why(v, "selfattn.message");
        if (!t) return;
        const StageTable& table = t->table();
        const Config& c = table.config();
        const RunDims& rd = table.dims();
        const int L = c.depth, gh = rd.gh, gw = rd.gw, N = rd.N;
        if (L > 0) layer_ = layer_ < 0 || layer_ >= L ? L - 1 : layer_;
        const uint64_t key = s.version() * 1000003ull + uint64_t(layer_ + 1) * 1009 + uint64_t(std::lround(keep_ * 10000));
        if (keys_.stale("maps", key)) {
            error_.clear();
            have_ = false;
            try {
                maps_ = cls_head_maps(*t, layer_, keep_);  // the core's numbers
                have_ = true;
                const size_t H = maps_.attn.shape(0);
                tex_.resize(H);
                range_.assign(H, {0.f, 0.f});
                for (size_t h = 0; h < H; ++h) {
                    const float* a = maps_.attn.data() + h * size_t(N);
                    const GridRange r = upload_grid(tex_[h], std::vector<float>(a, a + N), gw, gh);  // NaN: dropped
                    range_[h] = {r.vmin, r.vmax};
                }
            } catch (const std::exception& e) {
                error_ = e.what();
            }
        }
        if (keys_.stale("img", s.version())) upload_model_input(image_, s);
        const bool probe = !c.cls_token;
        ImGui::PushTextWrapPos(0);
        ImGui::TextWrapped("Self-attention maps (DINO, Caron et al. 2021): each head's attention from the %s to the %d "
                           "patches, and below it the patches that hold %.0f%% of that head's attention mass (the "
                           "fewest patches whose weights, largest first, add up to it, as DINO's own attention "
                           "visualisation does with its threshold). In self-supervised ViTs these masks follow the objects.",
                           probe ? "pooling head's probe (this model has no cls token)" : "cls token", N, 100.0 * keep_);
        if (std::string note = weights_note(s); !note.empty())
            ImGui::TextColored(kWarn, "%s: untrained heads attend almost evenly, so each mask covers about that share of the image", note.c_str());
        ImGui::PopTextWrapPos();
        if (!probe && L > 0) {
            ImGui::SetNextItemWidth(200);
            ImGui::SliderInt("layer##selfattn", &layer_, 0, L - 1, "block %d");
            ImGui::SameLine();
        }
        ImGui::SetNextItemWidth(200);
        float pct = keep_ * 100.f;
        if (ImGui::SliderFloat("kept##mass", &pct, 1.f, 100.f, "%.0f%% of the mass")) keep_ = std::clamp(pct / 100.f, 0.01f, 1.f);
        if (v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("the share of each head's attention mass its mask holds");
        pr.numbers["selfattn.keep"] = keep_;
        if (!have_) {
            std::string why = "no self-attention maps for this trace: " + error_;
            ImGui::TextColored(kWarn, "%s", why.c_str());
            pr.strings["selfattn.message"] = why;
            return;
        }
        ImGui::PushTextWrapPos(0);
        ImGui::TextDisabled("%s, the %s row, over the patches%s", maps_.source_name.c_str(), maps_.query.c_str(),
                            rd.prefix > 1 ? " (the other tokens before the patches left out, not renormalised)" : "");
        ImGui::PopTextWrapPos();
        pr.strings["selfattn.source"] = maps_.source_name;
        pr.numbers["selfattn.layer"] = maps_.layer;
        const int H = int(maps_.attn.shape(0));
        pr.numbers["selfattn.heads"] = H;
        // The key, as every attention picture has it: one scale from 0 shared by the heads (or each head
        // from 0 to its own largest weight, printed in its caption), even attention 1/T marked.
        float shared_max = 0;
        for (auto& r : range_) shared_max = std::max(shared_max, r.second);
        const int keys_n = int(t->get(maps_.source).shape().back());
        AttentionScaleKey(v, "selfattn", ui.attention_per_map, shared_max, keys_n, "head", "above");
        // ---- one column per head: its map, then its mask over the image
        const ImVec2 avail = ImGui::GetContentRegionAvail();
        const float gap = ImGui::GetStyle().ItemSpacing.x;
        // a column per head, as wide as its caption at least ("head 11: 100.0% in 1369")
        const float caption = ImGui::CalcTextSize(("head " + std::to_string(H - 1) + ": 100.0% in " + std::to_string(N) +
                                                   (ui.attention_per_map ? ", max 0.0000" : "")).c_str()).x;
        const float min_col = std::max(96.f, caption);
        const int per_row = std::max(1, std::min(H, int((avail.x - ImGui::GetStyle().ScrollbarSize + gap) / (min_col + gap))));
        const float col = std::max(min_col, (avail.x - ImGui::GetStyle().ScrollbarSize - gap * float(per_row - 1)) / float(per_row) - 1);
        const float box = std::clamp(col, 40.f, 200.f);
        const float mw = gw >= gh ? box : box * float(gw) / float(gh), mh = gh >= gw ? box : box * float(gh) / float(gw);
        const float cell = mw / float(gw);
        ImGui::BeginChild("heads", ImVec2(0, 0), false);
        ImDrawList* dl = ImGui::GetWindowDrawList();
        const float x0 = ImGui::GetCursorPosX();
        for (int h = 0; h < H; ++h) {
            if (h % per_row) ImGui::SameLine(x0 + float(h % per_row) * (col + gap));
            ImGui::BeginGroup();
            int kept_n = 0;
            for (int n = 0; n < N; ++n) kept_n += maps_.mask(size_t(h), size_t(n)) > 0;
            if (ui.attention_per_map)
                ImGui::TextDisabled("head %d: %.1f%% in %d, max %s", h, 100.0 * maps_.kept_mass(size_t(h)), kept_n,
                                    fmt(range_[size_t(h)].second).c_str());
            else
                ImGui::TextDisabled("head %d: %.1f%% in %d", h, 100.0 * maps_.kept_mass(size_t(h)), kept_n);
            ImVec2 p0 = ImGui::GetCursorScreenPos();
            ImGui::PushID(h);
            if (ImGui::InvisibleButton("map", ImVec2(mw, mh))) {  // this head's pattern on the Stage tab, over the image
                ui.overlay = Overlay::Cls;
                ui.overlay_layer = probe ? -1 : maps_.layer;
                ui.overlay_head = h;
                ui.head = h;
                select_stage(ui, *t, maps_.source);
                ui.tab = Tab::Stage;
            }
            if (v.hover && ImGui::IsItemHovered())
                ImGui::SetTooltip("head %d: max %.4f; click to open %s", h, double(range_[size_t(h)].second), maps_.source_name.c_str());
            const Colormap cm = attention_colormap(shared_max, range_[size_t(h)].second, ui.attention_per_map);
            v.gfx.draw(dl, tex_[size_t(h)], p0, ImVec2(p0.x + mw, p0.y + mh), cm);
            DrawDropped(dl, *t, p0, cell, cell);
            pr.rects["selfattn.head." + std::to_string(h)] = Rect{p0.x, p0.y, mw, mh};
            // the mask: the image, the patches outside it darkened
            ImVec2 q0 = ImGui::GetCursorScreenPos();
            ImGui::Dummy(ImVec2(mw, mh));
            dl->AddImage(image_.id(), q0, ImVec2(q0.x + mw, q0.y + mh));
            for (int n = 0; n < N; ++n)
                if (maps_.mask(size_t(h), size_t(n)) == 0) {
                    ImVec2 q(q0.x + (n % gw) * cell, q0.y + (n / gw) * cell);
                    dl->AddRectFilled(q, ImVec2(q.x + cell, q.y + cell), IM_COL32(0, 0, 0, 210));
                }
            DrawDropped(dl, *t, q0, cell, cell);
            pr.rects["selfattn.mask." + std::to_string(h)] = Rect{q0.x, q0.y, mw, mh};
            ImGui::PopID();
            ImGui::EndGroup();
        }
        ImGui::EndChild();
        pr.strings["selfattn.values"] = csv(maps_.attn.data(), maps_.attn.size());
        pr.strings["selfattn.mask"] = csv(maps_.mask.data(), maps_.mask.size());
        pr.strings["selfattn.kept"] = csv(maps_.kept_mass.data(), maps_.kept_mass.size());
        // the numbers behind the view, as `vitscope-cli analyze` names them
        numbers_.push_back({"self_attn", Array(maps_.attn)});
        numbers_.push_back({"self_attn_mask", Array(maps_.mask)});
        numbers_.push_back({"self_attn_kept", Array(maps_.kept_mass)});
    }

    void sweep_states(SweepPlan& plan) override {
        const int L = plan.L;
        for (float keep : {0.6f, 0.1f, 1.f})
            plan.add("self-attention, keep " + std::to_string(keep), [this, keep, L](Session&, UiState& ui) {
                ui.tab = Tab::SelfAttention;
                keep_ = keep;
                layer_ = keep < 0.5f ? 0 : L - 1;
            });
        plan.add("self-attention, reset", [this](Session&, UiState&) { keep_ = 0.6f; layer_ = -1; });
    }
    // Every head drawn with its mask (or the reason there are none), each mask holding at least its share.
    void sweep_check(const Session& s, const UiState&, const Probe& p, const SweepFail& fail) const override {
        if (!s.trace()) return;
        const int H = int(p.number("selfattn.heads"));
        if (!p.rects.count("selfattn.head.0")) {
            if (p.string("selfattn.message").empty()) fail("the self-attention tab drew no map and gave no reason");
            return;
        }
        if (!p.rects.count("selfattn.head." + std::to_string(H - 1)) || !p.rects.count("selfattn.mask." + std::to_string(H - 1)))
            fail("the self-attention tab drew fewer heads than the model has");
        const double keep = p.number("selfattn.keep");
        std::string kept = p.string("selfattn.kept");
        for (size_t a = 0; !kept.empty();) {
            const size_t b = kept.find(',', a);
            if (std::stod(kept.substr(a, b - a)) < keep - 1e-5) {
                fail("a self-attention mask holds less than its share of the attention");
                break;
            }
            if (b == std::string::npos) break;
            a = b + 1;
        }
    }

private:
    CacheKeys keys_;
    std::vector<Texture> tex_;
    Texture image_;
    std::vector<std::pair<float, float>> range_;
    HeadMaps maps_;
    bool have_ = false;
    std::string error_;
    int layer_ = -1;     // -1: the last
    float keep_ = 0.6f;  // DINO's default threshold
};

}  // namespace

std::unique_ptr<TabView> make_selfattn_tab(JobQueue&) { return std::make_unique<SelfAttnTab>(); }

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_selfattn() {
    using K = ProbeKind;
    return {
        {K::Rect, "selfattn.{head|mask}.<h>", "a head's self-attention map and its mask"},
        {K::Number, "selfattn.{keep|layer|heads}", "the self-attention tab's numbers"},
        {K::String, "selfattn.{message|source|values|mask|kept}", "the self-attention tab's texts and numbers"},
    };
}

}  // namespace vit::app
