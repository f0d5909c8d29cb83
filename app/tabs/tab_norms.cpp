// The Token norms tab (issue 20 item 4): the norm of every token after every block (vit::token_norms,
// layer x token), the high-norm "artifact" tokens of a layer (vit::high_norm_tokens: above a factor of
// the median patch norm) over the image, and the tokens before the patches (cls, registers, dist) by
// name, with their norms and their attention: what cls pays them and where they look.
#include "app/probe.h"
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/tabs/tab.h"
#include "core/teach/teach.h"

namespace vit::app {

namespace {

const ImVec4 kWarn(kWarnRGBA[0], kWarnRGBA[1], kWarnRGBA[2], kWarnRGBA[3]);


class NormsTab : public TabView {
public:
    void draw(ViewCtx& v) override {
        Session& s = v.s;
        UiState& ui = v.ui;
        Probe& pr = v.probe;
        const Trace* t = trace_or_why(v, "norms.message");
        if (!t) return;
        const StageTable& table = t->table();
        const Config& c = table.config();
        const RunDims& rd = table.dims();
        if (keys_.stale("norms", s.version())) {
            error_.clear();
            norms_ = Array();
            try {
                norms_ = token_norms(*t);  // the core's numbers
            } catch (const std::exception& e) {
                error_ = e.what();
            }
        }
        ImGui::PushTextWrapPos(0);
        ImGui::TextWrapped("Token norms: the length (L2 norm) of every token of the residual stream after each block "
                           "(blocks.l.resid_post), one row per layer, one column per token (%s). Large ViTs trained "
                           "without registers grow a few patch tokens of very high norm in their later layers, which "
                           "hold global information instead of their patch's (Darcet et al., \"Vision Transformers Need "
                           "Registers\", 2024); register tokens take that role over.", token_range_text(table).c_str());
        if (std::string note = weights_note(s); !note.empty())
            ImGui::TextColored(kWarn, "%s: nothing was learned; a token above the threshold here is chance, not a learned "
                                      "artifact", note.c_str());
        ImGui::PopTextWrapPos();
        if (norms_.dimension() != 2 || norms_.size() == 0) {
            std::string why = c.depth == 0 ? "the model has no blocks, so there is no residual stream to measure"
                                           : "no token norms for this trace: " + error_;
            ImGui::TextColored(kWarn, "%s", why.c_str());
            pr.strings["norms.message"] = why;
            return;
        }
        const int L = int(norms_.shape(0)), T = int(norms_.shape(1)), pre = rd.prefix, N = rd.N;
        layer_ = layer_ < 0 || layer_ >= L ? L - 1 : layer_;
        // ---- controls: the layer whose high-norm tokens are found, and the factor
        ImGui::SetNextItemWidth(200);
        ImGui::SliderInt("layer##norms", &layer_, 0, L - 1, "after block %d");
        ImGui::SameLine();
        ImGui::SetNextItemWidth(200);
        ImGui::SliderFloat("x the median patch norm", &factor_, 1.1f, 20.f, "%.2f", ImGuiSliderFlags_Logarithmic);
        Tensor2 n2 = norms_;
        std::vector<int> high;
        double median = 0;
        try {
            high = high_norm_tokens(n2, layer_, pre, factor_);
        } catch (const std::exception& e) {
            error_ = e.what();
        }
        {  // the median the rule compares with (numpy's median of the patch norms at this layer)
            std::vector<float> p(norms_.data() + size_t(layer_) * T + pre, norms_.data() + size_t(layer_ + 1) * T);
            std::sort(p.begin(), p.end());
            if (!p.empty()) median = p.size() % 2 ? p[p.size() / 2] : 0.5 * (double(p[p.size() / 2 - 1]) + p[p.size() / 2]);
        }
        std::string hl;
        for (int i : high) {
            char b[64];
            std::snprintf(b, sizeof b, "%s%s (%.3g)", hl.empty() ? "" : ", ", token_label(table, i).c_str(),
                          double(norms_(size_t(layer_), size_t(i))));
            hl += b;
        }
        char head[200];
        std::snprintf(head, sizeof head, "After block %d: %zu token%s above %.2f x the median patch norm (%.4g):", layer_,
                      high.size(), high.size() == 1 ? "" : "s", double(factor_), median);
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(high.empty() ? ImVec4(0.7f, 0.7f, 0.7f, 1) : ImVec4(1, 0.5f, 0.4f, 1), "%s %s", head,
                           high.empty() ? "none" : hl.c_str());
        ImGui::PopTextWrapPos();
        pr.numbers["norms.layer"] = layer_;
        pr.numbers["norms.factor"] = factor_;
        pr.numbers["norms.median"] = median;
        pr.numbers["norms.high"] = double(high.size());
        {
            std::string h;
            for (int i : high) h += (h.empty() ? "" : ",") + std::to_string(i);
            pr.strings["norms.high"] = h;
        }
        // ---- layer x token, one fixed scale: 0 .. the largest norm
        float vmax = 1e-6f;
        for (size_t i = 0; i < norms_.size(); ++i) vmax = std::max(vmax, norms_.data()[i]);
        std::vector<std::string> tokens(static_cast<size_t>(T));
        for (int i = 0; i < T; ++i) tokens[size_t(i)] = token_label(table, i);
        const ImVec2 avail = ImGui::GetContentRegionAvail();
        const float lower = std::max(160.f, avail.y * 0.42f);  // the image map and the token list below
        HeatmapArgs a;
        a.data = norms_.data(); a.rows = L; a.cols = T;
        a.row_label = "layer (after block l)"; a.col_label = "tokens";
        a.row_name = [](int l) { return "L" + std::to_string(l); };
        a.col_names = tokens;
        a.cm.mode = Colormap::Sequential; a.cm.vmin = 0; a.cm.vmax = vmax;
        a.zoomable = false; a.colorbar = true; a.rect_name = "norms";
        a.max_h = std::max(100.f, avail.y - lower);
        a.mark_row = layer_;
        a.index_prefix = "[layer ";
        int cr = -1, cc = -1;
        a.clicked_row = &cr; a.clicked_col = &cc;
        Heatmap(v, "norms", tex_, keys_.stale("norms.tex", s.version()), a);
        if (cr >= 0) layer_ = cr;
        if (cc >= pre) ui.patch = cc - pre;  // a patch token: selected everywhere
        // ---- the patch norms at this layer over the image, high-norm patches framed
        ImGui::BeginGroup();
        const int gh = rd.gh, gw = rd.gw;
        if (keys_.stale("norms.map", s.version() * 1009 + uint64_t(layer_))) {
            map_tex_.upload_float(norms_.data() + size_t(layer_) * T + pre, gw, gh);
        }
        const float side = std::max(80.f, std::min(lower - 40, avail.x * 0.4f));
        const float mw = gw >= gh ? side : side * float(gw) / float(gh), mh = gh >= gw ? side : side * float(gh) / float(gw);
        ImGui::TextDisabled("patch norms after block %d (%dx%d), high-norm framed", layer_, gh, gw);
        ImVec2 p0 = ImGui::GetCursorScreenPos();
        ImGui::Dummy(ImVec2(mw, mh));
        Colormap cm;
        cm.mode = Colormap::Sequential;
        cm.vmin = 0; cm.vmax = vmax;
        ImDrawList* dl = ImGui::GetWindowDrawList();
        v.gfx.draw(dl, map_tex_, p0, ImVec2(p0.x + mw, p0.y + mh), cm);
        const float cell = mw / float(gw);
        for (int i : high)
            if (i >= pre) {
                const int n = i - pre;
                ImVec2 q(p0.x + (n % gw) * cell, p0.y + (n / gw) * cell);
                dl->AddRect(q, ImVec2(q.x + cell, q.y + cell), IM_COL32(255, 70, 70, 255), 0, 0, 2);
            }
        if (ui.patch >= 0 && ui.patch < N) {
            ImVec2 q(p0.x + (ui.patch % gw) * cell, p0.y + (ui.patch / gw) * cell);
            dl->AddRect(q, ImVec2(q.x + cell, q.y + cell), IM_COL32(255, 80, 200, 255), 0, 0, 2);
        }
        pr.rects["norms.image"] = Rect{p0.x, p0.y, mw, mh};
        ColorKey(v, "norms.image", cm, mw);  // the heatmap's scale above: 0 .. the largest norm
        ImGui::EndGroup();
        ImGui::SameLine();
        // ---- the tokens before the patches, by name: norm, what cls pays them, where they look
        ImGui::BeginGroup();
        draw_specials(v, *t);
        ImGui::EndGroup();
        pr.strings["norms.values"] = csv(norms_.data(), norms_.size());
        pr.numbers["norms.layers"] = L;
        pr.numbers["norms.tokens"] = T;
        numbers_.push_back({"token_norms", norms_});  // what "Numbers .npy+.csv" exports, as analyze names it
        Array h = Array::from_shape({high.size()});
        for (size_t i = 0; i < high.size(); ++i) h.data()[i] = float(high[i]);
        numbers_.push_back({"high_norm_tokens", h});
    }

    // The tokens before the patches (cls, registers), by name: their norm after the layer shown, what cls pays
    // them, and where each looks.
    void draw_specials(ViewCtx& v, const Trace& trace) {
        const Session& s = v.s;
        Probe& pr = v.probe;
        const Trace* t = &trace;
        const StageTable& table = t->table();
        const Config& c = table.config();
        const RunDims& rd = table.dims();
        const int pre = rd.prefix, gh = rd.gh, gw = rd.gw;
        ImGui::BeginChild("specials", ImVec2(0, std::max(80.f, ImGui::GetContentRegionAvail().y)), false);
        std::string specials;
        if (pre == 0) {
            ImGui::TextWrapped("This model has no tokens before the patches (no cls token, no registers): every token is a "
                               "patch, and its summary is the attention-pooling head's probe (Attention maps tab).");
        } else {
            if (c.registers == 0)
                ImGui::TextWrapped("This model has no registers (DINOv2 with registers adds 4 tokens after cls, with no "
                                   "position, for the global information high-norm patches would otherwise hold).");
            ImGui::TextDisabled("tokens before the patches, after block %d:", layer_);
            const Array* pat = t->find(StageId{StageKind::AttnPattern, layer_});
            for (int i = 0; i < pre; ++i) {
                const std::string name = token_label(table, i);
                double from_cls = -1;  // mean over heads of pattern[:, 0, i]
                if (pat && c.cls_token && i > 0) {
                    from_cls = 0;
                    for (size_t h = 0; h < pat->shape(0); ++h) from_cls += (*pat)(h, 0, size_t(i));
                    from_cls /= double(pat->shape(0));
                }
                char b[200];
                if (from_cls >= 0)
                    std::snprintf(b, sizeof b, "%s: norm %.4g; cls attends to it with %.4f (mean of heads)", name.c_str(),
                                  double(norms_(size_t(layer_), size_t(i))), from_cls);
                else
                    std::snprintf(b, sizeof b, "%s: norm %.4g", name.c_str(), double(norms_(size_t(layer_), size_t(i))));
                ImGui::TextWrapped("%s", b);  // wraps in a narrow window (at 1366x768 it ran 16 px past the child's edge)
                specials += std::string(b) + "\n";
                // where it looks: its attention row over the patches (vit::attention_from), mean of heads
                if (keys_.stale("norms.spec." + std::to_string(i), s.version() * 1009 + uint64_t(layer_))) {
                    if (spec_tex_.size() < size_t(pre)) spec_tex_.resize(size_t(pre));
                    spec_range_.resize(size_t(pre));
                    try {
                        Tensor1 row = attention_from(*t, layer_, -1, i);
                        spec_tex_[size_t(i)].upload_float(row.data(), gw, gh);
                        auto mm = std::minmax_element(row.begin(), row.end());
                        spec_range_[size_t(i)] = {*mm.first, *mm.second};
                    } catch (const std::exception&) {
                        spec_range_[size_t(i)] = {0.f, 0.f};
                    }
                }
                if (size_t(i) < spec_tex_.size() && spec_tex_[size_t(i)].valid()) {
                    const float sm = 72;
                    const float sw = gw >= gh ? sm : sm * float(gw) / float(gh), sh = gh >= gw ? sm : sm * float(gh) / float(gw);
                    ImVec2 q = ImGui::GetCursorScreenPos();
                    ImGui::Dummy(ImVec2(sw, sh));
                    // attention's key: from 0 (dark) to this row's largest weight (yellow)
                    const Colormap scm = attention_colormap(spec_range_[size_t(i)].second, spec_range_[size_t(i)].second, false);
                    v.gfx.draw(ImGui::GetWindowDrawList(), spec_tex_[size_t(i)], q, ImVec2(q.x + sw, q.y + sh), scm);
                    pr.rects["norms.token." + name] = Rect{q.x, q.y, sw, sh};
                    ImGui::SameLine();
                    ImGui::TextDisabled("where %s looks\n(attention over the patches,\nmean of heads; colours 0 .. %s)", name.c_str(),
                                        fmt(scm.vmax).c_str());
                    pr.numbers["norms.token." + name + ".vmax"] = scm.vmax;
                }
            }
        }
        pr.strings["norms.tokens"] = specials;
        ImGui::EndChild();
    }

    void sweep_states(SweepPlan& plan) override {
        for (int k = 0; k < 3; ++k)
            plan.add("token norms, layer " + std::to_string(k == 0 ? 0 : -1) + " factor " + std::to_string(k + 1),
                     [this, k](Session&, UiState& ui) {
                         ui.tab = Tab::Norms;
                         layer_ = k == 0 ? 0 : -1;
                         factor_ = k == 2 ? 1.1f : 2.f;
                     });
    }
    // A heatmap of L x T norms (or the reason there is none), every norm listed, the high-norm count said.
    void sweep_check(const Session& s, const UiState&, const Probe& p, const SweepFail& fail) const override {
        if (!s.trace()) return;
        if (!p.rects.count("norms")) {
            if (p.string("norms.message").empty()) fail("the token norms tab drew no map and gave no reason");
            return;
        }
        const int L = int(p.number("norms.layers")), T = int(p.number("norms.tokens"));
        const std::string vals = p.string("norms.values");
        if (T != s.trace()->table().dims().T || std::count(vals.begin(), vals.end(), ',') != L * T - 1)
            fail("the token norms tab lists " + std::to_string(std::count(vals.begin(), vals.end(), ',') + 1) +
                 " norms for " + std::to_string(L) + " layers x " + std::to_string(T) + " tokens");
        if (!p.rects.count("norms.image")) fail("the token norms tab drew no map over the image");
    }

private:
    CacheKeys keys_;
    Texture tex_, map_tex_;
    std::vector<Texture> spec_tex_;                    // where each token before the patches looks
    std::vector<std::pair<float, float>> spec_range_;
    Array norms_;       // (L, T) vit::token_norms
    std::string error_;
    int layer_ = -1;    // -1: the last
    float factor_ = 2.f;
};

}  // namespace

std::unique_ptr<TabView> make_norms_tab(JobQueue&) { return std::make_unique<NormsTab>(); }

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_norms() {
    using K = ProbeKind;
    return {
        {K::Rect, "norms.image", "the patch norms over the image"},
        {K::Rect, "norms.token.<name>", "where a token before the patches (cls, reg0, dist) looks"},
        {K::Number, "norms.token.<name>.vmax", "the top of its colours (0 .. its largest weight)"},
        {K::Number, "norms.{layer|factor|median|high|layers|tokens}", "the token norms tab's numbers"},
        {K::String, "norms.{message|values|high|tokens}", "the token norms tab's texts and numbers"},
    };
}

}  // namespace vit::app
