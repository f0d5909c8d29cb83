// The Patch features tab (issue 20 item 4): the first three principal components of the final patch
// features as RGB over the image (vit::feature_pca: DINOv2's picture), and foreground / background by
// the first component, with the threshold and the (arbitrary) sign of that component said.
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


class FeaturesTab : public TabView {
public:
    void draw(ViewCtx& v) override {
        Session& s = v.s;
        UiState& ui = v.ui;
        Probe& pr = v.probe;
        const Trace* t = trace_or_why(v, "features.message");
        if (!t) return;
        const RunDims& rd = t->table().dims();
        const int gh = rd.gh, gw = rd.gw, N = rd.N;
        if (keys_.stale("pca", s.version())) {
            error_.clear();
            have_ = false;
            try {
                pca_ = feature_pca(*t, 0.f);  // the core's numbers; the threshold is applied below
                have_ = true;
                std::vector<unsigned char> rgba(size_t(N) * 4, 255);
                for (int i = 0; i < N; ++i)
                    for (int k = 0; k < 3; ++k) {  // a dropped patch (NaN: no features) is black, hatched below
                        const float x = pca_.rgb(size_t(i), size_t(k));
                        rgba[size_t(i) * 4 + k] = std::isnan(x) ? 0 : (unsigned char)std::lround(255.f * x);
                    }
                rgb_tex_.upload_rgba(rgba.data(), gw, gh);
                std::vector<float> first0(static_cast<size_t>(N));
                for (int i = 0; i < N; ++i) first0[size_t(i)] = pca_.proj(size_t(i), 0);
                const GridRange r = grid_range(first0);
                range_ = {r.vmin, r.vmax};  // over the patches that have features (a dropped one has none)
            } catch (const std::exception& e) {
                error_ = e.what();
            }
        }
        if (keys_.stale("img", s.version())) upload_model_input(image_, s);
        ImGui::PushTextWrapPos(0);
        ImGui::TextWrapped("Patch features as colour: the features the model ends with for each patch, reduced to their "
                           "first three principal components (over this image's %d patches), shown as red, green and "
                           "blue; patches alike in the model's eyes get alike colours (the DINOv2 paper's picture). The "
                           "first component often splits the object from the background: patches above a threshold "
                           "on it are the foreground.", N);
        if (std::string note = weights_note(s); !note.empty())
            ImGui::TextColored(kWarn, "%s: the components of untrained features follow the pixels, not objects", note.c_str());
        ImGui::PopTextWrapPos();
        if (!have_) {
            std::string why = "no principal components for this trace: " + error_;
            ImGui::TextColored(kWarn, "%s", why.c_str());
            pr.strings["features.message"] = why;
            return;
        }
        char src[300];
        std::snprintf(src, sizeof src, "features: the %d patch rows of %s; variance explained: R %.1f%%, G %.1f%%, B %.1f%%",
                      N, pca_.source_name.c_str(), 100.0 * pca_.variance(0), 100.0 * pca_.variance(1), 100.0 * pca_.variance(2));
        ImGui::TextDisabled("%s", src);
        pr.strings["features.source"] = pca_.source_name;
        // ---- the foreground rule: first component > threshold (or <, the sign being arbitrary)
        ImGui::SetNextItemWidth(220);
        ImGui::SliderFloat("threshold on the first component", &threshold_, range_.first, range_.second, "%.4g");
        ImGui::SameLine();
        ImGui::Checkbox("foreground below it", &below_);
        if (v.hover && ImGui::IsItemHovered())
            ImGui::SetTooltip("the sign of a principal component is arbitrary (ViTScope makes its largest entry positive):\n"
                              "when the object comes out as background, take the other side");
        if (ImGui::SmallButton("threshold 0")) threshold_ = 0;
        int fg_n = 0;
        std::vector<float> fg(static_cast<size_t>(N));
        for (int i = 0; i < N; ++i) {
            const float x = pca_.proj(size_t(i), 0);
            fg[size_t(i)] = (below_ ? x < threshold_ : x > threshold_) ? 1.f : 0.f;
            fg_n += int(fg[size_t(i)]);
        }
        char rule[160];
        std::snprintf(rule, sizeof rule, "foreground: first component %s %.4g: %d of %d patches", below_ ? "<" : ">",
                      double(threshold_), fg_n, N);
        ImGui::SameLine();
        ImGui::TextUnformatted(rule);
        pr.strings["features.fg_rule"] = rule;
        pr.numbers["features.threshold"] = threshold_;
        pr.numbers["features.fg"] = fg_n;
        // ---- three pictures: the model input, the components as RGB, the foreground over the input
        const ImVec2 avail = ImGui::GetContentRegionAvail();
        const float gap = ImGui::GetStyle().ItemSpacing.x;
        const float box = std::max(80.f, std::min((avail.x - 2 * gap) / 3.f, avail.y - 3 * ImGui::GetTextLineHeightWithSpacing()));
        const float mw = gw >= gh ? box : box * float(gw) / float(gh), mh = gh >= gw ? box : box * float(gh) / float(gw);
        const float cell = mw / float(gw);
        ImDrawList* dl = ImGui::GetWindowDrawList();
        auto picture = [&](const char* id, const char* caption, auto&& paint) {
            ImGui::BeginGroup();
            ImGui::TextDisabled("%s", caption);
            ImVec2 p0 = ImGui::GetCursorScreenPos();
            ImGui::InvisibleButton(id, ImVec2(mw, mh));
            const bool hovered = v.hover && ImGui::IsItemHovered(), clicked = v.hover && ImGui::IsItemClicked(ImGuiMouseButton_Left);
            paint(p0);
            DrawDropped(dl, *t, p0, cell, cell);  // patches the run dropped: no features
            if (ui.patch >= 0 && ui.patch < N) {
                ImVec2 q(p0.x + (ui.patch % gw) * cell, p0.y + (ui.patch / gw) * cell);
                dl->AddRect(q, ImVec2(q.x + cell, q.y + cell), IM_COL32(255, 80, 200, 255), 0, 0, 2);
            }
            if (hovered || clicked) {
                ImVec2 m = ImGui::GetIO().MousePos;
                const int gx = std::clamp(int((m.x - p0.x) / cell), 0, gw - 1), gy = std::clamp(int((m.y - p0.y) / cell), 0, gh - 1);
                const int n = gy * gw + gx;
                if (hovered)
                    ImGui::SetTooltip("patch %d (row %d, col %d): components %.4g, %.4g, %.4g; %s", n, gy, gx,
                                      double(pca_.proj(size_t(n), 0)), double(pca_.proj(size_t(n), 1)),
                                      double(pca_.proj(size_t(n), 2)), fg[size_t(n)] > 0 ? "foreground" : "background");
                if (clicked) ui.patch = n;
            }
            pr.rects[std::string("features.") + id] = Rect{p0.x, p0.y, mw, mh};
            ImGui::EndGroup();
        };
        picture("image", "the model input", [&](ImVec2 p0) { dl->AddImage(image_.id(), p0, ImVec2(p0.x + mw, p0.y + mh)); });
        ImGui::SameLine();
        picture("rgb", "components 1, 2, 3 as R, G, B", [&](ImVec2 p0) {
            dl->AddImage(rgb_tex_.id(), p0, ImVec2(p0.x + mw, p0.y + mh));  // nearest: one flat colour per patch
        });
        ImGui::SameLine();
        picture("mask", "foreground (background darkened)", [&](ImVec2 p0) {
            dl->AddImage(image_.id(), p0, ImVec2(p0.x + mw, p0.y + mh));
            for (int n = 0; n < N; ++n)
                if (fg[size_t(n)] == 0) {
                    ImVec2 q(p0.x + (n % gw) * cell, p0.y + (n / gw) * cell);
                    dl->AddRectFilled(q, ImVec2(q.x + cell, q.y + cell), IM_COL32(0, 0, 0, 200));
                }
        });
        pr.strings["features.rgb"] = csv(pca_.rgb.data(), pca_.rgb.size());
        pr.strings["features.pca"] = csv(pca_.proj.data(), pca_.proj.size());
        pr.strings["features.var"] = csv(pca_.variance.data(), pca_.variance.size());
        pr.strings["features.fg"] = csv(fg.data(), fg.size());
        // the numbers behind the view, as `vitscope-cli analyze` names them (the mask: this threshold and side)
        numbers_.push_back({"features_pca", Array(pca_.proj)});
        numbers_.push_back({"features_rgb", Array(pca_.rgb)});
        numbers_.push_back({"features_var", Array(pca_.variance)});
        Array fga = Array::from_shape({size_t(N)});
        std::copy(fg.begin(), fg.end(), fga.data());
        numbers_.push_back({"features_fg", fga});
    }

    void sweep_states(SweepPlan& plan) override {
        for (int k = 0; k < 3; ++k)
            plan.add("patch features, threshold " + std::to_string(k), [this, k](Session&, UiState& ui) {
                ui.tab = Tab::Features;
                threshold_ = k == 2 ? 1e9f : 0.f;  // past the range: everything background (said, drawn)
                below_ = k == 1;
            });
        plan.add("patch features, reset", [this](Session&, UiState&) { threshold_ = 0; below_ = false; });
    }
    void sweep_check(const Session& s, const UiState&, const Probe& p, const SweepFail& fail) const override {
        if (!s.trace()) return;
        if (!p.rects.count("features.rgb")) {
            if (p.string("features.message").empty()) fail("the patch features tab drew no picture and gave no reason");
            return;
        }
        const int N = s.trace()->table().dims().N;
        const std::string rgb = p.string("features.rgb");
        if (std::count(rgb.begin(), rgb.end(), ',') != 3 * N - 1) fail("the patch features tab lists no colour per patch");
        if (p.string("features.fg_rule").empty()) fail("the patch features tab does not say its foreground rule");
    }

private:
    CacheKeys keys_;
    Texture rgb_tex_, image_;
    FeaturePca pca_;
    bool have_ = false;
    std::pair<float, float> range_{0.f, 0.f};  // the first component's range (the threshold slider's)
    std::string error_;
    float threshold_ = 0;
    bool below_ = false;
};

}  // namespace

std::unique_ptr<TabView> make_features_tab(JobQueue&) { return std::make_unique<FeaturesTab>(); }

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_features() {
    using K = ProbeKind;
    return {
        {K::Rect, "features.{image|rgb|mask}", "the input, the components as RGB, the foreground"},
        {K::Number, "features.{threshold|fg}", "the foreground rule's threshold and count"},
        {K::String, "features.{message|source|fg_rule|rgb|pca|var|fg}", "the patch features tab's texts and numbers"},
    };
}

}  // namespace vit::app
