// The Positions tab: the cosine similarity of the position embeddings (vit::pos_similarity), one
// small map per patch in the patch layout, one of them large, and pos_embed itself.
#include "app/probe.h"
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/tabs/tab.h"
#include "core/teach/teach.h"

namespace vit::app {

namespace {

class PositionsTab : public TabView {
public:
    void draw(ViewCtx& v) override {
        Session& s = v.s;
        UiState& ui = v.ui;
        Probe& pr = v.probe;
        const Trace* t = trace_or_why(v, "pos.message", "No image is loaded, so no model has run yet.");
        if (!t) return;
        const auto model = s.shown_model();
        const Weights& w = model->weights;
        const Config& c = w.cfg;
        // the learned table's own grid (DINOv2: 37 x 37 whatever the input), and the run's
        const int G = c.stored_grid(), N = G * G;
        const RunDims& rd = t->table().dims();
        const bool resized = rd.resized;
        const uint64_t key = uint64_t(reinterpret_cast<uintptr_t>(model.get()));
        if (keys_.stale("pos", key)) {
            error_.clear();
            sim_ = Array();
            try {
                // the core's numbers: the learned table's similarity, or without a table (RoPE) the rotations'
                sim_ = c.pos_table ? pos_similarity(w) : rope_similarity(w);
            } catch (const std::exception& e) {
                error_ = e.what();
            }
            if (sim_.dimension() == 2 && int(sim_.shape(0)) == N && int(sim_.shape(1)) == N) {
                // one G x G map per patch, laid out as the patches are: (G*G) x (G*G) texels
                std::vector<float> big(size_t(N) * size_t(N));
                const float* sv = sim_.data();
                for (int p = 0; p < N; ++p)
                    for (int k = 0; k < N; ++k)
                        big[size_t((p / G) * G + k / G) * size_t(G * G) + size_t((p % G) * G + k % G)] = sv[size_t(p) * N + k];
                grid_.upload_float(big.data(), G * G, G * G);
            } else if (error_.empty()) {
                error_ = "pos_similarity gave no (N, N) matrix for N = " + std::to_string(N) + " patches";
            }
        }
        if (resized && keys_.stale("pos.run", s.version())) {
            run_error_.clear();
            run_sim_ = Array();
            try {
                run_sim_ = pos_similarity(*t);  // the table this run added, after resizing
            } catch (const std::exception& e) {
                run_error_ = e.what();
            }
        }
        ImGui::PushTextWrapPos(0);
        if (!c.pos_table)
            ImGui::TextWrapped("This model has no position table: it learns no position embeddings. Every block turns each "
                               "patch's query and key by angles set by the patch's row and column (RoPE: stages attn.q_rot, "
                               "attn.k_rot), %d angles per head, with periods from %.3g to %.3g. Shown for each patch of the "
                               "%dx%d grid: how alike its rotation is to every other patch's, the mean over the angles of "
                               "cos(angle here - angle there), which is what q.k keeps when q and k are the same vector "
                               "before turning. It depends only on how far apart two patches are, so every map is the same "
                               "pattern moved: that is the lesson of RoPE. It is fixed, not learned. Click a map to show it large.",
                               int(w.rope_periods.size()) * 2, w.rope_periods.size() ? double(w.rope_periods(0)) : 0.0,
                               w.rope_periods.size() ? double(w.rope_periods(w.rope_periods.size() - 1)) : 0.0, G, G);
        else
        ImGui::TextWrapped("Position embeddings: for each patch, the cosine similarity of its position embedding with every "
                           "other patch's, drawn in the patch layout (one small %dx%d map per patch; ViT paper Fig. 7). "
                           "A trained model learns that near patches are alike. Click a map to show it large.", G, G);
        if (resized)
            ImGui::TextWrapped("This run is %dx%d pixels, %dx%d patches: the learned %dx%d table was resized by %s "
                               "(stages pos_embed.learned -> pos_embed). The small maps and the first large one: the learned "
                               "table; the one marked \"as run\": the table the run added.", rd.img_h, rd.img_w, rd.gh, rd.gw, G, G, pos_rule_label(c.pos_rule));
        if (std::string note = weights_note(s); !note.empty() && c.pos_table)
            ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s: these embeddings are random, with no learned structure", note.c_str());
        ImGui::PopTextWrapPos();
        pr.numbers["pos.grid_n"] = G;
        if (sim_.size() == 0 || !error_.empty()) {
            std::string why = "no position similarity for this model: " + error_;
            ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s", why.c_str());
            pr.strings["pos.message"] = why;
            return;
        }
        // the learned grid's selection: the selected patch when the grids agree, else its own
        int& psel = resized ? learned_patch_ : ui.patch;
        const int p = psel >= 0 && psel < N ? psel : 0;
        ImVec2 avail = ImGui::GetContentRegionAvail();
        // the maps on top (the small multiples and the one shown large), pos_embed itself under them
        // across the whole width
        const bool embed_below = w.pos.dimension() == 2 && w.pos.size() > 0;
        const float top_h = embed_below ? avail.y * 0.58f : avail.y;
        float side = std::max(64.f, std::min(avail.x * 0.5f, top_h - 8));
        ImDrawList* dl = ImGui::GetWindowDrawList();
        ImGui::BeginGroup();
        ImVec2 p0 = ImGui::GetCursorScreenPos(), p1(p0.x + side, p0.y + side);
        ImGui::InvisibleButton("posgrid", ImVec2(side, side));
        bool hovered = v.hover && ImGui::IsItemHovered();
        bool clicked = v.hover && ImGui::IsItemClicked(ImGuiMouseButton_Left);
        Colormap cm;
        cm.mode = Colormap::Diverging; cm.vmin = -1; cm.vmax = 1;  // cosine similarity (RoPE's: a mean of cosines)
        v.gfx.draw(dl, grid_, p0, p1, cm);
        const float m = side / G;
        ImU32 gap = ImGui::GetColorU32(ImGuiCol_WindowBg);
        for (int k = 1; k < G; ++k) {  // gaps between the maps
            dl->AddLine(ImVec2(p0.x + k * m, p0.y), ImVec2(p0.x + k * m, p1.y), gap, std::max(1.f, m * 0.08f));
            dl->AddLine(ImVec2(p0.x, p0.y + k * m), ImVec2(p1.x, p0.y + k * m), gap, std::max(1.f, m * 0.08f));
        }
        ImVec2 s0(p0.x + (p % G) * m, p0.y + (p / G) * m);
        dl->AddRect(s0, ImVec2(s0.x + m, s0.y + m), IM_COL32(0, 230, 255, 255), 0, 0, 2);
        pr.rects["pos.grid"] = Rect{p0.x, p0.y, side, side};
        pr.rects["pos.selected"] = Rect{s0.x, s0.y, m, m};
        if (hovered || clicked) {
            ImVec2 mp = ImGui::GetIO().MousePos;
            int gx = std::clamp(int((mp.x - p0.x) / m), 0, G - 1), gy = std::clamp(int((mp.y - p0.y) / m), 0, G - 1);
            if (hovered) ImGui::SetTooltip("patch %d (row %d, col %d) of the %s grid: click to show its map large", gy * G + gx, gy, gx,
                                           c.pos_table ? "learned" : "native");
            if (clicked) psel = gy * G + gx;
        }
        ImGui::EndGroup();
        ImGui::SameLine();
        // resized: the learned table's map and the run's beside each other where the width allows (one above the
        // other at 1366x768 left each 73 px), else one above the other in the height the maps share
        const float line = ImGui::GetTextLineHeightWithSpacing();
        const float right_w = ImGui::GetContentRegionAvail().x;
        const bool beside = resized && right_w >= 2 * 200.f;
        // (beside: a gap of two spacings plus a margin between them, so that the first map's colour-bar labels stay
        // clear of the second's row labels)
        const float map_w = beside ? (right_w - 3 * ImGui::GetStyle().ItemSpacing.x) / 2 - 12 : right_w;
        const float map_h = std::max(80.f, resized && !beside ? (top_h - 2 * line - 16) / 2 : top_h - 2 * line - 8);
        const ImVec2 maps0 = ImGui::GetCursorScreenPos();
        ImGui::BeginGroup();
        ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + map_w);
        ImGui::Text("patch %d (row %d, col %d) against every patch%s", p, p / G, p % G, resized ? " (learned grid)" : "");
        ImGui::PopTextWrapPos();
        HeatmapArgs a;
        a.data = sim_.data() + size_t(p) * size_t(N);
        a.rows = G; a.cols = G; a.row_label = "patch row"; a.col_label = "patch column";
        a.cm = cm; a.zoomable = false; a.colorbar = true; a.rect_name = "pos.large";
        a.max_h = map_h;
        a.max_w = map_w;
        a.mark_row = p / G; a.mark_col = p % G;
        Heatmap(v, "poslarge", large_, keys_.stale("pos.large", key * 31 + uint64_t(p)), a);
        if (beside) {  // the second map at its own column, whatever the first's colour-bar labels took
            ImGui::EndGroup();
            ImGui::SameLine();
            ImGui::SetCursorScreenPos(ImVec2(maps0.x + map_w + 3 * ImGui::GetStyle().ItemSpacing.x + 12, maps0.y));
            ImGui::BeginGroup();
        }
        if (resized) {
            // the table the run added, resized to gh x gw: the run's selected patch against every other
            const int Nr = rd.N, q = ui.patch >= 0 && ui.patch < Nr ? ui.patch : 0;
            if (run_sim_.dimension() == 2 && int(run_sim_.shape(0)) == Nr) {
                ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + map_w);
                ImGui::Text("as run, %dx%d: patch %d (row %d, col %d) against every patch", rd.gh, rd.gw, q, q / rd.gw, q % rd.gw);
                ImGui::PopTextWrapPos();
                HeatmapArgs b;
                b.data = run_sim_.data() + size_t(q) * size_t(Nr);
                b.rows = rd.gh; b.cols = rd.gw; b.row_label = "patch row"; b.col_label = "patch column";
                b.cm = cm; b.zoomable = false; b.colorbar = true; b.rect_name = "pos.run";
                b.max_h = map_h;
                b.max_w = map_w;
                b.mark_row = q / rd.gw; b.mark_col = q % rd.gw;
                int cr = -1, cc = -1;
                b.clicked_row = &cr; b.clicked_col = &cc;
                Heatmap(v, "posrun", run_, keys_.stale("pos.run.tex", s.version() * 131 + uint64_t(q)), b);
                if (cr >= 0 && cc >= 0) ui.patch = cr * rd.gw + cc;
                pr.strings["pos.run.values"] = csv(run_sim_.data() + size_t(q) * size_t(Nr), size_t(Nr));
                pr.numbers["pos.run.patch"] = q;
                numbers_.push_back({"pos_similarity_run", run_sim_});
            } else {
                const std::string why = "no similarity of the resized table: " + run_error_;
                ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s", why.c_str());
                pr.strings["pos.message"] = why;
            }
        }
        ImGui::EndGroup();
        // pos_embed itself, as stored, under the maps across the width
        if (w.pos.dimension() == 2 && w.pos.size() > 0) {
            ImGui::SetCursorScreenPos(ImVec2(p0.x, std::max(p0.y + side, ImGui::GetCursorScreenPos().y) + 4));
            draw_stored_table(v, w.pos, c.pos_prefix(), key);
        }
        pr.strings["pos.values"] = csv(sim_.data() + size_t(p) * size_t(N), size_t(N));
        pr.numbers["pos.patch"] = p;
        numbers_.push_back({c.pos_table ? "pos_similarity" : "rope_similarity", sim_});  // what "Numbers .npy/.csv" exports
    }


    void sweep_states(SweepPlan& plan) override {
        for (int p : {plan.N - 1, plan.N / 2, -1})
            plan.add("positions, patch " + std::to_string(p), [p](Session&, UiState& ui) {
                ui.tab = Tab::Positions;
                ui.patch = p;
            });
    }
    void sweep_check(const Session& s, const UiState&, const Probe& p, const SweepFail& fail) const override {
        if (!s.trace()) return;
        if (!p.rects.count("pos.grid") && p.string("pos.message").empty())
            fail("the positions tab drew no maps and gave no reason");
        if (s.trace()->table().dims().resized && !p.rects.count("pos.run") && p.string("pos.message").empty())
            fail("the positions tab shows no similarity of the resized table and gives no reason");
    }

private:
    // pos_embed as stored (rows: the tokens before the grid, `pre` of them, then the grid; columns: the width), its
    // columns made wider than its rows are tall when square cells would leave a strip (DINOv2's 1370 x 384: 40 px)
    void draw_stored_table(ViewCtx& v, const Array& pe, int pre, uint64_t key) {
        Probe& pr = v.probe;
        std::string rows_are = pre == 0 ? "tokens (patches only: no cls position is stored)"
                             : pre == 1 ? "tokens (row 0 = cls)" : "tokens (row 0 = cls, row 1 = dist)";
        ImGui::TextDisabled("pos_embed as stored: %s x width", rows_are.c_str());
        float lo = pe.data()[0], hi = lo;
        for (size_t i = 0; i < pe.size(); ++i) { lo = std::min(lo, pe.data()[i]); hi = std::max(hi, pe.data()[i]); }
        HeatmapArgs b;
        b.data = pe.data(); b.rows = int(pe.shape(0)); b.cols = int(pe.shape(1));
        b.row_label = "tokens"; b.col_label = "width";
        b.cm.mode = Colormap::Diverging; b.cm.vmax = std::max({std::fabs(lo), std::fabs(hi), 1e-6f}); b.cm.vmin = -b.cm.vmax;
        b.zoomable = false; b.colorbar = true; b.rect_name = "pos.embed";
        b.max_h = ImGui::GetContentRegionAvail().y;
        // a tall table (DINOv2's 1370 x 384) in square cells is a strip 40 px wide: its columns are made wider
        // than its rows are tall, up to 2 px, and said so under it (two lines kept for that), with the cell
        // sizes the heatmap drew
        const float th = ImGui::GetTextLineHeight(), ln = ImGui::GetTextLineHeightWithSpacing();
        const float label_w = ImGui::CalcTextSize("00000").x + 8, room_w = ImGui::GetContentRegionAvail().x - label_w - 90;
        const float square = std::min(std::max(1.f, b.max_h - 2 * th - 8) / float(b.rows), room_w / float(b.cols));
        const bool wide = square * float(b.cols) < 100.f;
        if (wide) {
            b.max_h -= 2 * ln;
            b.cell = std::clamp(room_w / float(b.cols), square, 2.f);
            b.cell_h = std::max(0.05f, (b.max_h - 2 * th - 8) / float(b.rows));
        }
        Heatmap(v, "posembed", embed_, keys_.stale("pos.embed", key), b);
        if (wide) {
            char note[160];
            std::snprintf(note, sizeof note, "(columns %.2g px wide, rows %.2g px tall: %d rows would leave square cells a "
                          "strip %.0f px wide)", pr.numbers["pos.embed.cell_w"], pr.numbers["pos.embed.cell_h"], b.rows,
                          square * float(b.cols));
            ImGui::PushTextWrapPos(0);
            ImGui::TextDisabled("%s", note);
            ImGui::PopTextWrapPos();
            pr.strings["pos.embed.cells"] = note;
        }
    }

    CacheKeys keys_;
    Texture grid_, large_, embed_, run_;  // one small map per patch; one large; pos_embed itself; the run's
    Array sim_;                           // (N, N) cosine similarity of the learned table (vit::pos_similarity)
    Array run_sim_;                       // the same of the table a resized run added
    std::string error_, run_error_;
    int learned_patch_ = 0;               // the learned grid's selection when the run's grid differs
};

}  // namespace

std::unique_ptr<TabView> make_positions_tab(JobQueue&) { return std::make_unique<PositionsTab>(); }

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_positions() {
    using K = ProbeKind;
    return {
        {K::Rect, "pos.{grid|selected}", "the position-similarity maps"},
        {K::Number, "pos.{patch|grid_n|run.patch}", "the patch shown large, the learned grid's side, the run's patch"},
        {K::String, "pos.{message|values|run.values|embed.cells}", "the Positions tab's texts and numbers (learned; as run; "
                                                                   "pos_embed's non-square cells)"},
    };
}

}  // namespace vit::app
