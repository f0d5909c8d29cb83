// The Logit lens tab: layer x class probabilities (vit::logit_lens), the core's numbers as they are.
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
        const Trace* t = s.trace();
        if (!t) {
            std::string why = s.has_image() ? "Running the model..." : "No image is loaded, so the model has not run.";
            ImGui::TextDisabled("%s", why.c_str());
            pr.strings["lens.message"] = why;
            return;
        }
        const Config& c = s.shown_config();
        const Options& opt = s.shown_options();
        if (!c.has_logits()) {  // DINO, DINOv2, CLIP, SigLIP, MAE: said in place, nothing computed
            const std::string why = std::string("No logit lens: this model (") + family_label(c.family) +
                                    ") has no classification head. Its output is an embedding (the stage embedding), so "
                                    "there are no class scores to read after any layer. The Token norms, Patch features "
                                    "and Self-attention tabs show what such models are studied for.";
            ImGui::PushTextWrapPos(0);
            ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s", why.c_str());
            ImGui::PopTextWrapPos();
            pr.strings["lens.message"] = why;
            return;
        }
        const bool mean = opt.pooling ? *opt.pooling == Pooling::Mean : c.pooling == Pooling::Mean;
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
                           mean ? "mean of the patch tokens (this model pools by the mean: there is no cls row to read, "
                                  "so the lens reads what the head reads)"
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
        // the prediction at each layer, one line each, beside the chart
        std::vector<std::string> names(static_cast<size_t>(K));
        for (int k = 0; k < K; ++k)
            names[size_t(k)] = int(c.class_names.size()) == K ? c.class_names[size_t(k)] : "class " + std::to_string(k);
        HeatmapArgs a;
        a.data = vals.data(); a.rows = L; a.cols = K;
        a.row_label = "layer"; a.col_label = "classes";
        a.cm.mode = Colormap::Sequential; a.cm.vmin = 0; a.cm.vmax = 1;  // probabilities: one fixed scale
        a.zoomable = false; a.colorbar = true; a.rect_name = "lens";
        a.col_names = names;
        a.index_prefix = "[layer ";
        a.max_h = std::max(120.f, ImGui::GetContentRegionAvail().y - 30.f - (L + 1) * ImGui::GetTextLineHeightWithSpacing());
        Heatmap(v, "lens", tex_, keys_.stale("lens.tex", s.version()), a);
        std::string csv, top;
        char b[96];
        for (int l = 0; l < L; ++l) {
            int best = 0;
            for (int k = 0; k < K; ++k) {
                double p = vals.data()[size_t(l) * size_t(K) + size_t(k)];
                std::snprintf(b, sizeof b, "%s%.9g", (l || k) ? "," : "", p);
                csv += b;
                if (p > vals.data()[size_t(l) * size_t(K) + size_t(best)]) best = k;
            }
            std::snprintf(b, sizeof b, "layer %d: %s (%.1f%%)", l, names[size_t(best)].c_str(),
                          100.0 * vals.data()[size_t(l) * size_t(K) + size_t(best)]);
            ImGui::TextDisabled("%s", b);
            top += std::string(b) + "\n";
        }
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
    std::string error_;
};

}  // namespace

std::unique_ptr<TabView> make_lens_tab(JobQueue&) { return std::make_unique<LensTab>(); }

}  // namespace vit::app
