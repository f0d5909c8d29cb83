// The Filters tab: the principal components of the patch-embedding filters as P x P pictures
// (vit::embed_filters), with the variance each explains.
#include "app/probe.h"
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "app/tabs/tab.h"
#include "core/teach/teach.h"

namespace vit::app {

namespace {

class FiltersTab : public TabView {
public:
    void draw(ViewCtx& v) override {
        Session& s = v.s;
        Probe& pr = v.probe;
        if (!trace_or_why(v, "filters.message", "No image is loaded, so no model has run yet.")) return;
        const auto model = s.shown_model();
        const Weights& w = model->weights;
        const Config& c = w.cfg;
        const int C = c.channels, P = c.patch;
        const uint64_t key = uint64_t(reinterpret_cast<uintptr_t>(model.get()));
        if (keys_.stale("filters", key)) {
            error_.clear();
            var_.clear();
            vals_.clear();
            try {
                EmbedFilters f = embed_filters(w);  // the core's PCA
                const size_t k = f.filters.shape()[0], n = size_t(C) * P * P;
                if (f.filters.size() != k * n) throw std::runtime_error("embed_filters gave an unexpected shape");
                tex_.clear();
                tex_.resize(k);
                for (size_t i = 0; i < k; ++i) {
                    const float* fv = f.filters.data() + i * n;
                    vals_.emplace_back(fv, fv + n);
                    var_.push_back(f.variance.data()[i]);
                    // 0 is mid-gray; +-max|v| of this filter are white / black (per channel for RGB)
                    float m = 1e-12f;
                    for (size_t j = 0; j < n; ++j) m = std::max(m, std::fabs(fv[j]));
                    std::vector<unsigned char> rgba(size_t(P) * P * 4, 255);
                    for (int y = 0; y < P; ++y)
                        for (int x = 0; x < P; ++x)
                            for (int ch = 0; ch < 3; ++ch) {
                                float val = fv[size_t(C == 3 ? ch : 0) * P * P + size_t(y) * P + x];
                                rgba[(size_t(y) * P + x) * 4 + ch] = (unsigned char)std::lround(255.f * (0.5f + 0.5f * val / m));
                            }
                    tex_[i].upload_rgba(rgba.data(), P, P);
                }
            } catch (const std::exception& e) {
                error_ = e.what();
            }
        }
        ImGui::PushTextWrapPos(0);
        ImGui::TextWrapped("Patch-embedding filters: the principal components of the %d rows of patch_embed's weight "
                           "(each a %dx%d %s filter), largest first, with the share of the variance each explains "
                           "(ViT paper Fig. 7 left). Mid-gray is 0; each filter is scaled to its own largest |value|.",
                           c.width, P, P, C == 3 ? "RGB" : C == 1 ? "gray" : "channel-0");
        if (std::string note = weights_note(s); !note.empty())
            ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s: these filters are noise, nothing was learned", note.c_str());
        ImGui::PopTextWrapPos();
        if (tex_.empty() || !error_.empty()) {
            std::string why = "no embedding filters for this model: " + (error_.empty() ? std::string("none") : error_);
            ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s", why.c_str());
            pr.strings["filters.message"] = why;
            return;
        }
        const int k = int(tex_.size());
        const float gap = ImGui::GetStyle().ItemSpacing.x;
        const int per_row = 7;
        float tile = std::clamp((ImGui::GetContentRegionAvail().x - gap * per_row) / per_row, 24.f, 110.f);
        ImDrawList* dl = ImGui::GetWindowDrawList();
        std::string vars;
        ImGui::BeginChild("filtergrid", ImVec2(0, 0), false);
        for (int i = 0; i < k; ++i) {
            if (i % per_row) ImGui::SameLine();
            ImGui::BeginGroup();
            ImVec2 q = ImGui::GetCursorScreenPos();
            ImGui::Dummy(ImVec2(tile, tile));
            dl->AddImage(tex_[size_t(i)].id(), q, ImVec2(q.x + tile, q.y + tile));
            pr.rects["filters." + std::to_string(i)] = Rect{q.x, q.y, tile, tile};
            ImGui::TextDisabled("%d: %.1f%%", i, 100.0 * var_[size_t(i)]);
            ImGui::EndGroup();
            char b[32];
            std::snprintf(b, sizeof b, "%s%.9g", i ? "," : "", double(var_[size_t(i)]));
            vars += b;
        }
        ImGui::EndChild();
        pr.strings["filters.variance"] = vars;
        {  // what "Numbers .npy/.csv" exports on this tab: as `vitscope-cli analyze` names them
            Array f = Array::from_shape({size_t(k), size_t(C), size_t(P), size_t(P)}), var = Array::from_shape({size_t(k)});
            for (int i = 0; i < k; ++i) {
                std::copy(vals_[size_t(i)].begin(), vals_[size_t(i)].end(), f.data() + size_t(i) * C * P * P);
                var.data()[i] = var_[size_t(i)];
            }
            numbers_.push_back({"embed_filters", std::move(f)});
            numbers_.push_back({"embed_filters_var", std::move(var)});
        }
        pr.numbers["filters.k"] = k;
        pr.numbers["filters.channels"] = C;
    }


    void sweep_check(const Session& s, const UiState&, const Probe& p, const SweepFail& fail) const override {
        if (s.trace() && !p.rects.count("filters.0") && p.string("filters.message").empty())
            fail("the filters tab drew no filter and gave no reason");
    }

private:
    CacheKeys keys_;
    std::vector<Texture> tex_;               // principal components of patch_embed (vit::embed_filters)
    std::vector<float> var_;
    std::vector<std::vector<float>> vals_;   // each (C, P, P) as the core gave it
    std::string error_;
};

}  // namespace

std::unique_ptr<TabView> make_filters_tab(JobQueue&) { return std::make_unique<FiltersTab>(); }

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_filters() {
    using K = ProbeKind;
    return {
        {K::Rect, "filters.<i>", "a patch-embedding filter"},
        {K::Number, "filters.{k|channels}", "the filters drawn"},
        {K::String, "filters.{message|variance}", "the Filters tab's texts and numbers"},
    };
}

}  // namespace vit::app
