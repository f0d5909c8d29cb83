// The teaching views of issue 10 that draw the core's numbers (core/teach/teach.h); nothing here
// recomputes them. DrawCellMath: the math of one cell of the current stage (vit::cell_math).
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "core/teach/teach.h"
#include "tensor_access.h"
#include "views.h"

namespace vit::app {

namespace {

struct CachedMath {
    uint64_t version = 0;
    std::string stage, index_text;
    std::optional<CellMath> math;
    std::string error;  // why there is no math for this cell (the core's message)
};

std::string join_index(const std::vector<size_t>& idx) {
    std::string s;
    for (size_t i = 0; i < idx.size(); ++i) s += (i ? "," : "") + std::to_string(idx[i]);
    return s;
}

}  // namespace

void DrawCellMath(Session& s, UiState& ui, Textures& tx, const Rect& area) {
    for (auto it = ui.numbers.begin(); it != ui.numbers.end();)  // numbers persist across frames: only this one's
        it = it->first.rfind("cellmath.", 0) == 0 ? ui.numbers.erase(it) : std::next(it);
    if (ui.cell_r < 0 || ui.cell_c < 0 || ui.tab != Tab::Stage) return;
    const Trace* t = s.trace();
    const TraceEntry* e = current_entry(s, ui);
    if (!t || !e) return;
    const float w = std::min(470.f, area.w * 0.6f), h = std::min(380.f, area.h * 0.55f);
    const Rect r{area.x + area.w - w - 6, area.y + area.h - h - 6, w, h};
    ImGui::SetNextWindowPos(ImVec2(r.x, r.y));
    ImGui::SetNextWindowSize(ImVec2(r.w, r.h));
    ImGui::SetNextWindowBgAlpha(0.96f);
    bool open = true;
    ImGui::Begin("The math of one cell", &open, ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize |
                 ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoSavedSettings);
    ui.rects["cellmath"] = r;
    const std::string& name = e->name;
    std::string why;
    std::vector<size_t> idx;
    const Array& a = e->tensor;
    const size_t R = rank(a);
    if (ui.show_grad) why = "The math panel explains values: turn off the gradient view (G) to see it.";
    else if (!cell_math_supported(name))
        why = name + " is not one the math panel explains: it explains attn.scores, attn.pattern, attn.z, "
                     "a LayerNorm's normalized and out, mlp.post and logits. Esc clears the cell.";
    else if (R == 1 && ui.cell_r != 0)
        why = name + " is a vector: its cells are row 0 (got row " + std::to_string(ui.cell_r) + ").";
    else if (R == 1) idx = {size_t(ui.cell_c)};
    else if (R == 2) idx = {size_t(ui.cell_r), size_t(ui.cell_c)};
    else if (R == 3) idx = {size_t(slice2d(a, ui.head).slice), size_t(ui.cell_r), size_t(ui.cell_c)};
    else why = name + " has rank " + std::to_string(R) + ": no cell to explain.";
    const CachedMath* cm = nullptr;
    if (why.empty()) {
        if (!tx.cellmath) tx.cellmath = std::make_shared<CachedMath>();
        auto* c = static_cast<CachedMath*>(tx.cellmath.get());
        std::string it = join_index(idx);
        if (c->version != s.version() || c->stage != name || c->index_text != it) {
            c->version = s.version(); c->stage = name; c->index_text = it;
            c->math.reset(); c->error.clear();
            try {
                // the weights and options that produced this trace (not the ones a run in flight uses)
                const Weights& wts = s.result().model ? s.result().model->weights : s.weights();
                c->math = cell_math(wts, *t, s.result().options, name, idx, 12);
            } catch (const std::exception& ex) {
                c->error = ex.what();
            }
        }
        cm = c;
        if (!c->math) why = c->error.empty() ? "no math for this cell" : c->error;
    }
    ImGui::PushTextWrapPos(0);
    if (!why.empty()) {
        ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s", why.c_str());
        ui.strings["cellmath.message"] = why;
    } else {
        const CellMath& m = *cm->math;
        ImGui::TextColored(ImVec4(1, 0.84f, 0.47f, 1), "%s[%s]", m.stage.c_str(), cm->index_text.c_str());
        ImGui::TextDisabled("%s", m.formula.c_str());
        ImGui::Separator();
        char buf[160];
        std::snprintf(buf, sizeof buf, "= %.9g   (recomputed in double from the numbers below)", m.value);
        ImGui::TextUnformatted(buf);
        std::snprintf(buf, sizeof buf, "the trace holds %.9g", double(m.recorded));
        ImGui::TextUnformatted(buf);
        double diff = std::fabs(m.value - double(m.recorded));
        double tol = 1e-6 * std::max(std::fabs(double(m.recorded)), m.scale);
        std::snprintf(buf, sizeof buf, "|difference| %.3g %s 1e-6 x %.3g (float rounding)", diff, diff <= tol ? "<=" : ">",
                      std::max(std::fabs(double(m.recorded)), m.scale));
        ImGui::TextColored(diff <= tol ? ImVec4(0.5f, 0.9f, 0.5f, 1) : ImVec4(1, 0.4f, 0.4f, 1), "%s", buf);
        ImGui::Separator();
        std::string all;
        for (const std::string& line : m.lines) {
            ImGui::TextUnformatted(line.c_str());
            all += line + "\n";
        }
        ui.strings["cellmath.stage"] = m.stage;
        ui.strings["cellmath.index"] = cm->index_text;
        ui.strings["cellmath.formula"] = m.formula;
        ui.strings["cellmath.lines"] = all;
        ui.numbers["cellmath.value"] = m.value;
        ui.numbers["cellmath.recorded"] = m.recorded;
        ui.numbers["cellmath.scale"] = m.scale;
        ui.numbers["cellmath.terms"] = double(m.terms.size());
        ui.numbers["cellmath.ok"] = diff <= tol;
    }
    ImGui::PopTextWrapPos();
    ImGui::End();
    if (!open) ui.cell_r = ui.cell_c = -1;
}

std::string weights_note(const Session& s) {
    return s.result().model && s.result().model->source.rfind("preset:", 0) == 0 ? "random weights" : "";
}

void DrawLogitLens(Session& s, UiState& ui, Textures& tx) {
    const Trace* t = s.trace();
    if (!t) {
        std::string why = s.has_image() ? "Running the model..." : "No image is loaded, so the model has not run.";
        ImGui::TextDisabled("%s", why.c_str());
        ui.strings["lens.message"] = why;
        return;
    }
    const Config& c = s.shown_config();
    const Options& opt = s.result().options;
    const bool mean = opt.pooling ? *opt.pooling == Pooling::Mean : c.pooling == Pooling::Mean;
    if (tx.stale("lens", s.version())) {
        tx.lens_error.clear();
        tx.lens_vals = Array();
        try {
            const Weights& w = s.result().model ? s.result().model->weights : s.weights();
            tx.lens_vals = logit_lens(w, *t, opt);  // the core's numbers, drawn as they are
        } catch (const std::exception& e) {
            tx.lens_error = e.what();
        }
    }
    const Array& v = tx.lens_vals;
    ImGui::PushTextWrapPos(0);
    ImGui::TextWrapped("Logit lens: for every layer l, the final LayerNorm and the head applied to that layer's %s, "
                       "softmax over the classes. Each row is what the model would predict if it stopped after that "
                       "layer; the last row is its prediction (probs).",
                       mean ? "mean of the patch tokens (this model pools by the mean: there is no cls row to read, "
                              "so the lens reads what the head reads)"
                            : "cls token (row 0 of blocks.l.resid_post)");
    std::string note = weights_note(s);
    if (!note.empty()) ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s: these predictions mean nothing", note.c_str());
    ImGui::PopTextWrapPos();
    ui.strings["lens.reads"] = mean ? "mean of patch tokens" : "cls token";
    if (!note.empty()) ui.strings["lens.note"] = note;
    if (v.dimension() != 2 || v.size() == 0) {
        std::string why = c.depth == 0 ? "the model has no blocks, so there are no layers to read"
                                       : "no logit lens for this trace: " + tx.lens_error;
        ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s", why.c_str());
        ui.strings["lens.message"] = why;
        return;
    }
    const int L = int(v.shape(0)), K = int(v.shape(1));
    // the prediction at each layer, one line each, beside the chart
    std::vector<std::string> names(static_cast<size_t>(K));
    for (int k = 0; k < K; ++k)
        names[size_t(k)] = int(c.class_names.size()) == K ? c.class_names[size_t(k)] : "class " + std::to_string(k);
    HeatmapArgs a;
    a.data = v.data(); a.rows = L; a.cols = K;
    a.row_label = "layer"; a.col_label = "classes";
    a.cm.mode = Colormap::Sequential; a.cm.vmin = 0; a.cm.vmax = 1;  // probabilities: one fixed scale
    a.zoomable = false; a.colorbar = true; a.rect_name = "lens";
    a.col_names = names;
    a.index_prefix = "[layer ";
    a.max_h = std::max(120.f, ImGui::GetContentRegionAvail().y - 30.f - (L + 1) * ImGui::GetTextLineHeightWithSpacing());
    Heatmap("lens", tx.lens, tx.stale("lens.tex", s.version()), a, ui, tx);
    std::string vals, top;
    char b[96];
    for (int l = 0; l < L; ++l) {
        int best = 0;
        for (int k = 0; k < K; ++k) {
            double p = v.data()[size_t(l) * size_t(K) + size_t(k)];
            std::snprintf(b, sizeof b, "%s%.9g", (l || k) ? "," : "", p);
            vals += b;
            if (p > v.data()[size_t(l) * size_t(K) + size_t(best)]) best = k;
        }
        std::snprintf(b, sizeof b, "layer %d: %s (%.1f%%)", l, names[size_t(best)].c_str(),
                      100.0 * v.data()[size_t(l) * size_t(K) + size_t(best)]);
        ImGui::TextDisabled("%s", b);
        top += std::string(b) + "\n";
    }
    ui.strings["lens.values"] = vals;
    ui.strings["lens.top"] = top;
    tx.tab_numbers.push_back({"logit_lens", v});  // what "Numbers .npy/.csv" exports on this tab
}

void DrawPositions(Session& s, UiState& ui, Textures& tx) {
    if (!s.trace() || !s.result().model) {
        std::string why = s.has_image() ? "Running the model..." : "No image is loaded, so no model has run yet.";
        ImGui::TextDisabled("%s", why.c_str());
        ui.strings["pos.message"] = why;
        return;
    }
    const Weights& w = s.result().model->weights;
    const Config& c = w.cfg;
    const int G = c.grid(), N = c.patches();
    const uint64_t key = uint64_t(reinterpret_cast<uintptr_t>(s.result().model.get()));
    if (tx.stale("pos", key)) {
        tx.pos_error.clear();
        tx.pos_sim = Array();
        try {
            tx.pos_sim = pos_similarity(w);  // the core's numbers
        } catch (const std::exception& e) {
            tx.pos_error = e.what();
        }
        if (tx.pos_sim.dimension() == 2 && int(tx.pos_sim.shape(0)) == N && int(tx.pos_sim.shape(1)) == N) {
            // one G x G map per patch, laid out as the patches are: (G*G) x (G*G) texels
            std::vector<float> big(size_t(N) * size_t(N));
            const float* v = tx.pos_sim.data();
            for (int p = 0; p < N; ++p)
                for (int k = 0; k < N; ++k)
                    big[size_t((p / G) * G + k / G) * size_t(G * G) + size_t((p % G) * G + k % G)] = v[size_t(p) * N + k];
            tx.pos_grid.upload_float(big.data(), G * G, G * G);
        } else if (tx.pos_error.empty()) {
            tx.pos_error = "pos_similarity gave no (N, N) matrix for N = " + std::to_string(N) + " patches";
        }
    }
    ImGui::PushTextWrapPos(0);
    ImGui::TextWrapped("Position embeddings: for each patch, the cosine similarity of its position embedding with every "
                       "other patch's, drawn in the patch layout (one small %dx%d map per patch; ViT paper Fig. 7). "
                       "A trained model learns that near patches are alike. Click a map to show it large.", G, G);
    if (std::string note = weights_note(s); !note.empty())
        ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s: these embeddings are random, with no learned structure", note.c_str());
    ImGui::PopTextWrapPos();
    if (tx.pos_sim.size() == 0 || !tx.pos_error.empty()) {
        std::string why = "no position similarity for this model: " + tx.pos_error;
        ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s", why.c_str());
        ui.strings["pos.message"] = why;
        return;
    }
    const int p = ui.patch >= 0 && ui.patch < N ? ui.patch : 0;
    ImVec2 avail = ImGui::GetContentRegionAvail();
    float side = std::max(64.f, std::min(avail.x * 0.5f, avail.y - 8));
    ImDrawList* dl = ImGui::GetWindowDrawList();
    ImGui::BeginGroup();
    ImVec2 p0 = ImGui::GetCursorScreenPos(), p1(p0.x + side, p0.y + side);
    ImGui::InvisibleButton("posgrid", ImVec2(side, side));
    bool hovered = ui.hover && ImGui::IsItemHovered();
    bool clicked = ui.hover && ImGui::IsItemClicked(ImGuiMouseButton_Left);
    Colormap cm;
    cm.mode = Colormap::Diverging; cm.vmin = -1; cm.vmax = 1;  // cosine similarity
    draw_colormapped(dl, tx.pos_grid, p0, p1, cm);
    const float m = side / G;
    ImU32 gap = ImGui::GetColorU32(ImGuiCol_WindowBg);
    for (int k = 1; k < G; ++k) {  // gaps between the maps
        dl->AddLine(ImVec2(p0.x + k * m, p0.y), ImVec2(p0.x + k * m, p1.y), gap, std::max(1.f, m * 0.08f));
        dl->AddLine(ImVec2(p0.x, p0.y + k * m), ImVec2(p1.x, p0.y + k * m), gap, std::max(1.f, m * 0.08f));
    }
    ImVec2 s0(p0.x + (p % G) * m, p0.y + (p / G) * m);
    dl->AddRect(s0, ImVec2(s0.x + m, s0.y + m), IM_COL32(0, 230, 255, 255), 0, 0, 2);
    ui.rects["pos.grid"] = Rect{p0.x, p0.y, side, side};
    ui.rects["pos.selected"] = Rect{s0.x, s0.y, m, m};
    if (hovered || clicked) {
        ImVec2 mp = ImGui::GetIO().MousePos;
        int gx = std::clamp(int((mp.x - p0.x) / m), 0, G - 1), gy = std::clamp(int((mp.y - p0.y) / m), 0, G - 1);
        if (hovered) ImGui::SetTooltip("patch %d (row %d, col %d): click to show its map large", gy * G + gx, gy, gx);
        if (clicked) ui.patch = gy * G + gx;
    }
    ImGui::EndGroup();
    ImGui::SameLine();
    ImGui::BeginGroup();
    ImGui::Text("patch %d (row %d, col %d) against every patch", p, p / G, p % G);
    HeatmapArgs a;
    a.data = tx.pos_sim.data() + size_t(p) * size_t(N);
    a.rows = G; a.cols = G; a.row_label = "patch row"; a.col_label = "patch column";
    a.cm = cm; a.zoomable = false; a.colorbar = true; a.rect_name = "pos.large";
    a.max_h = std::max(80.f, avail.y * 0.55f);
    a.mark_row = p / G; a.mark_col = p % G;
    Heatmap("poslarge", tx.pos_large, tx.stale("pos.large", key * 31 + uint64_t(p)), a, ui, tx);
    // pos_embed itself, (T, D): row 0 is the cls position
    const Array& pe = w.pos;
    if (pe.dimension() == 2 && pe.size() > 0) {
        ImGui::TextDisabled("pos_embed itself: tokens (row 0 = cls) x width");
        float lo = pe.data()[0], hi = lo;
        for (size_t i = 0; i < pe.size(); ++i) { lo = std::min(lo, pe.data()[i]); hi = std::max(hi, pe.data()[i]); }
        HeatmapArgs b;
        b.data = pe.data(); b.rows = int(pe.shape(0)); b.cols = int(pe.shape(1));
        b.row_label = "tokens"; b.col_label = "width";
        b.cm.mode = Colormap::Diverging; b.cm.vmax = std::max({std::fabs(lo), std::fabs(hi), 1e-6f}); b.cm.vmin = -b.cm.vmax;
        b.zoomable = false; b.colorbar = true; b.rect_name = "pos.embed";
        Heatmap("posembed", tx.pos_embed, tx.stale("pos.embed", key), b, ui, tx);
    }
    ImGui::EndGroup();
    std::string vals;
    char buf[32];
    for (int k = 0; k < N; ++k) {
        std::snprintf(buf, sizeof buf, "%s%.9g", k ? "," : "", double(tx.pos_sim.data()[size_t(p) * size_t(N) + size_t(k)]));
        vals += buf;
    }
    ui.strings["pos.values"] = vals;
    ui.numbers["pos.patch"] = p;
    tx.tab_numbers.push_back({"pos_similarity", tx.pos_sim});  // what "Numbers .npy/.csv" exports on this tab
}

void DrawFilters(Session& s, UiState& ui, Textures& tx) {
    if (!s.trace() || !s.result().model) {
        std::string why = s.has_image() ? "Running the model..." : "No image is loaded, so no model has run yet.";
        ImGui::TextDisabled("%s", why.c_str());
        ui.strings["filters.message"] = why;
        return;
    }
    const Weights& w = s.result().model->weights;
    const Config& c = w.cfg;
    const int C = c.channels, P = c.patch;
    const uint64_t key = uint64_t(reinterpret_cast<uintptr_t>(s.result().model.get()));
    if (tx.stale("filters", key)) {
        tx.filters_error.clear();
        tx.filter_var.clear();
        tx.filter_vals.clear();
        try {
            EmbedFilters f = embed_filters(w);  // the core's PCA
            const size_t k = f.filters.shape()[0], n = size_t(C) * P * P;
            if (f.filters.size() != k * n) throw std::runtime_error("embed_filters gave an unexpected shape");
            tx.filters.clear();
            tx.filters.resize(k);
            for (size_t i = 0; i < k; ++i) {
                const float* v = f.filters.data() + i * n;
                tx.filter_vals.emplace_back(v, v + n);
                tx.filter_var.push_back(f.variance.data()[i]);
                // 0 is mid-gray; +-max|v| of this filter are white / black (per channel for RGB)
                float m = 1e-12f;
                for (size_t j = 0; j < n; ++j) m = std::max(m, std::fabs(v[j]));
                std::vector<unsigned char> rgba(size_t(P) * P * 4, 255);
                for (int y = 0; y < P; ++y)
                    for (int x = 0; x < P; ++x)
                        for (int ch = 0; ch < 3; ++ch) {
                            float val = v[size_t(C == 3 ? ch : 0) * P * P + size_t(y) * P + x];
                            rgba[(size_t(y) * P + x) * 4 + ch] = (unsigned char)std::lround(255.f * (0.5f + 0.5f * val / m));
                        }
                tx.filters[i].upload_rgba(rgba.data(), P, P);
            }
        } catch (const std::exception& e) {
            tx.filters_error = e.what();
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
    if (tx.filters.empty() || !tx.filters_error.empty()) {
        std::string why = "no embedding filters for this model: " + (tx.filters_error.empty() ? std::string("none") : tx.filters_error);
        ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s", why.c_str());
        ui.strings["filters.message"] = why;
        return;
    }
    const int k = int(tx.filters.size());
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
        dl->AddImage(tx.filters[size_t(i)].id(), q, ImVec2(q.x + tile, q.y + tile));
        ui.rects["filters." + std::to_string(i)] = Rect{q.x, q.y, tile, tile};
        ImGui::TextDisabled("%d: %.1f%%", i, 100.0 * tx.filter_var[size_t(i)]);
        ImGui::EndGroup();
        char b[32];
        std::snprintf(b, sizeof b, "%s%.9g", i ? "," : "", double(tx.filter_var[size_t(i)]));
        vars += b;
    }
    ImGui::EndChild();
    ui.strings["filters.variance"] = vars;
    {  // what "Numbers .npy/.csv" exports on this tab: as `vitscope-cli analyze` names them
        Array f = Array::from_shape({size_t(k), size_t(C), size_t(P), size_t(P)}), var = Array::from_shape({size_t(k)});
        for (int i = 0; i < k; ++i) {
            std::copy(tx.filter_vals[size_t(i)].begin(), tx.filter_vals[size_t(i)].end(), f.data() + size_t(i) * C * P * P);
            var.data()[i] = tx.filter_var[size_t(i)];
        }
        tx.tab_numbers.push_back({"embed_filters", std::move(f)});
        tx.tab_numbers.push_back({"embed_filters_var", std::move(var)});
    }
    ui.numbers["filters.k"] = k;
    ui.numbers["filters.channels"] = C;
}

}  // namespace vit::app
