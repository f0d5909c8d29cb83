// The Logit lens tab: layer x class probabilities (vit::logit_lens), the core's numbers as they are.
#include "app/probe.h"
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/tabs/tab.h"
#include "core/teach/teach.h"

namespace vit::app {

namespace {

class LensTab : public TabView {
public:
    void draw(ViewCtx& v) override {
        Session& s = v.s;
        Probe& pr = v.probe;
        const Trace* t = trace_or_why(v, "lens.message");
        if (!t) return;
        const Config& c = s.shown_config();
        const Options& opt = s.shown_options();
        if (!c.has_logits()) {  // DINO, DINOv2, CLIP, SigLIP, MAE: said in place, nothing computed
            const std::string why = std::string("No logit lens: this model (") + family_label(c.family) +
                                    ") has no classification head. Its output is an embedding (the stage embedding), so "
                                    "there are no class scores to read after any layer. The Token norms, Patch features "
                                    "and Self-attention tabs show what such models are studied for.";
            say_why(v, "lens.message", why);
            return;
        }
        const Pooling pool = opt.pooling_for(c);
        const bool mean = pool == Pooling::Mean || pool == Pooling::NormMean;
        const bool distilled = c.head == Head::Distilled;
        if (keys_.stale("lens", s.version())) {
            error_.clear();
            vals_ = Array();
            try {
                const Weights& w = s.shown_model()->weights;
                vals_ = logit_lens(w, *t);  // the core's numbers, drawn as they are
            } catch (const std::exception& e) {
                error_ = e.what();
            }
        }
        const Array& vals = vals_;
        ImGui::PushTextWrapPos(0);
        ImGui::TextWrapped("Logit lens: for every layer l, the final LayerNorm and the head applied to that layer's %s, "
                           "softmax over the classes. Each row is what the model would predict if it stopped after that "
                           "layer; the last row is its prediction (probs).",
                           pool == Pooling::NormMean ? "tokens, each normalised, then their mean over the patches (as this "
                                                       "model pools: the norm comes before the average)"
                           : mean ? "mean of the patch tokens (this run pools by the mean, so the lens reads what the "
                                    "head reads)"
                           : distilled ? "cls and dist tokens (DeiT distilled: head(cls) and head_dist(dist), averaged, "
                                         "as its output is)"
                                       : "cls token (row 0 of blocks.l.resid_post)");
        std::string note = weights_note(s);
        if (!note.empty()) ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s: these predictions mean nothing", note.c_str());
        ImGui::PopTextWrapPos();
        pr.strings["lens.reads"] = mean ? "mean of patch tokens" : distilled ? "cls and dist tokens" : "cls token";
        if (!note.empty()) pr.strings["lens.note"] = note;
        if (vals.dimension() != 2 || vals.size() == 0) {
            std::string why = c.depth == 0 ? "the model has no blocks, so there are no layers to read"
                                           : "no logit lens for this trace: " + error_;
            ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s", why.c_str());
            pr.strings["lens.message"] = why;
            return;
        }
        const int L = int(vals.shape(0)), K = int(vals.shape(1));
        // the class names (ImageNet-1k names for 1000 classes, from the model), else the index
        std::vector<std::string> names(static_cast<size_t>(K));
        for (int k = 0; k < K; ++k)
            names[size_t(k)] = int(c.class_names.size()) == K ? c.class_names[size_t(k)] : "class " + std::to_string(k);
        // the prediction at each layer, one line each, beside the chart
        std::vector<std::string> lines;
        std::string csv, top;
        float lines_w = 0;
        {
            char b[96];
            for (int l = 0; l < L; ++l) {
                int best = 0;
                for (int k = 0; k < K; ++k) {
                    double p = vals.data()[size_t(l) * size_t(K) + size_t(k)];
                    std::snprintf(b, sizeof b, "%s%.9g", (l || k) ? "," : "", p);
                    csv += b;
                    if (p > vals.data()[size_t(l) * size_t(K) + size_t(best)]) best = k;
                }
                std::snprintf(b, sizeof b, "layer %d: %s (%.1f%%)", l, names[size_t(best)].substr(0, 48).c_str(),
                              100.0 * vals.data()[size_t(l) * size_t(K) + size_t(best)]);
                lines.push_back(b);
                lines_w = std::max(lines_w, ImGui::CalcTextSize(b).x);
                top += std::string(b) + "\n";
            }
        }
        // One orientation whatever the number of classes (issue 36: 10 classes had the layers on rows,
        // 1000 the classes): a class per row, named down the side where a name reads whole, the layers
        // across, each layer's prediction beside the chart. Every class for a short list; for a long
        // one the classes that matter (the final top 10 and each layer's most likely class).
        HeatmapArgs a;
        a.cm = quantity_colormap(Quantity::Probability, 0, 1);  // probabilities: one fixed scale, 0 to 1
        a.zoomable = false; a.colorbar = true; a.rect_name = "lens";
        std::vector<int> pick;
        auto add = [&](int k) { if (std::find(pick.begin(), pick.end(), k) == pick.end()) pick.push_back(k); };
        const bool all_classes = K <= 30;
        if (all_classes) {
            for (int k = 0; k < K; ++k) add(k);
        } else {
            const std::vector<int> final_top = top_k(vals.data() + size_t(L - 1) * size_t(K), size_t(K), 10);
            for (int k : final_top) add(k);
            for (int l = 0; l < L; ++l) add(top_k(vals.data() + size_t(l) * size_t(K), size_t(K), 1).front());
            pick.resize(std::min<size_t>(pick.size(), 24));
        }
        const int P = int(pick.size());
        if (keys_.stale("lens.sub", s.version())) {
            sub_.assign(size_t(P) * size_t(L), 0.f);
            for (int r = 0; r < P; ++r)
                for (int l = 0; l < L; ++l) sub_[size_t(r) * L + l] = vals.data()[size_t(l) * K + size_t(pick[size_t(r)])];
            keys_.forget("lens.tex");
        }
        ImGui::PushTextWrapPos(0);
        if (all_classes)
            ImGui::TextDisabled("every class a row, every layer a column (probability of the class at that layer)");
        else
            ImGui::TextDisabled("%d of the %d classes: the final top 10 and each layer's most likely class (the rest are not drawn; "
                                "every value is in the export)", P, K);
        ImGui::PopTextWrapPos();
        auto short_name = [names](int k) {
            std::string n = names[size_t(k)];
            return n.substr(0, n.find(','));  // ImageNet names list synonyms: the first one
        };
        a.data = sub_.data(); a.rows = P; a.cols = L;
        a.row_label = all_classes ? "classes" : "classes (chosen)"; a.col_label = "layer";
        a.row_name = [pick, short_name](int r) { return short_name(pick[size_t(r)]); };
        a.row_long = [pick, names](int r) { return std::to_string(pick[size_t(r)]) + " " + names[size_t(pick[size_t(r)])]; };
        a.index_prefix = "[class row ";
        const float gap = 2 * ImGui::GetStyle().ItemSpacing.x;
        a.max_w = std::max(200.f, ImGui::GetContentRegionAvail().x - lines_w - gap);
        a.max_h = std::max(160.f, ImGui::GetContentRegionAvail().y - 8.f);
        // the chart with its colour bar stays within max_w (the bar is drawn, not an item): the
        // lines start after that width
        const float x0 = ImGui::GetCursorPosX();
        ImGui::BeginGroup();
        Heatmap(v, "lens", tex_, keys_.stale("lens.tex", s.version()), a);
        ImGui::EndGroup();
        ImGui::SameLine(x0 + a.max_w + gap);
        ImGui::BeginGroup();
        {
            std::string shown;
            for (int k : pick) shown += (shown.empty() ? "" : ",") + std::to_string(k);
            pr.strings["lens.classes"] = shown;
        }
        for (const std::string& line : lines) ImGui::TextDisabled("%s", line.c_str());
        ImGui::EndGroup();
        pr.strings["lens.values"] = csv;
        pr.strings["lens.top"] = top;
        numbers_.push_back({"logit_lens", vals});  // what "Numbers .npy/.csv" exports on this tab
    }


    // The sweep: both poolings (the lens reads the cls token or the mean of the patches).
    void sweep_states(SweepPlan& plan) override {
        const Options base = plan.base;
        for (auto pool : {Pooling::Mean, Pooling::Cls}) {
            Options o = base;
            o.pooling = pool;
            try {
                StageTable::get(plan.session->config(), o);
            } catch (const std::exception&) {
                continue;  // a model whose pooling cannot be switched (the families other than ViT classifiers)
            }
            plan.add(std::string("logit lens, ") + (pool == Pooling::Mean ? "mean" : "cls") + " pooling",
                     [pool, base](Session& s, UiState& ui) {
                         Options o = base;
                         o.pooling = pool;
                         s.set_options(o);
                         ui.tab = Tab::LogitLens;
                     });
            plan.add("logit lens, second frame", [](Session&, UiState& ui) { ui.tab = Tab::LogitLens; });
        }
        plan.add("logit lens, options reset", [base](Session& s, UiState&) { s.set_options(base); });
    }
    void sweep_check(const Session& s, const UiState&, const Probe& p, const SweepFail& fail) const override {
        if (s.trace() && !p.rects.count("lens") && p.string("lens.message").empty())
            fail("the logit lens tab drew no chart and gave no reason");
    }

private:
    CacheKeys keys_;
    Texture tex_;        // the logit lens (L, K), vit::logit_lens
    Array vals_;         // its numbers
    std::vector<float> sub_;  // many classes: the chosen ones (rows) x layers
    std::string error_;
};

}  // namespace

std::unique_ptr<TabView> make_lens_tab(JobQueue&) { return std::make_unique<LensTab>(); }

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_lens() {
    using K = ProbeKind;
    return {
        {K::Rect, "lens", "the logit lens chart"},
        {K::String, "lens.{message|note|reads|top|values|classes|legend}", "the logit lens's texts and numbers (legend: none since issue 36, the classes are named on rows)"},
    };
}

}  // namespace vit::app
