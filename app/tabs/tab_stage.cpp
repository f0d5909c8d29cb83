// The Stage tab: one stage of the trace on screen as a heatmap with its explanation, PyTorch line,
// statistics and (for a LayerNorm) its four parts side by side; the strip of the map above it; and
// over it, when a cell is selected, the math of that cell (vit::cell_math).
#include "app/probe.h"
#include <imgui.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "app/model_map.h"
#include "app/tabs/tab.h"
#include "app/tabs/stage_panels.h"
#include "app/tensor_access.h"
#include "core/teach/teach.h"

namespace vit::app {

namespace {


// The math of the selected cell, computed once per trace, stage and cell.
struct CachedMath {
    uint64_t version = 0;
    std::string stage, index_text;
    std::optional<CellMath> math;
    std::string error;  // why there is no math for this cell (the core's message)
};

class StageTab : public TabView {
public:
    void draw(ViewCtx& v) override {
        DrawMapStrip(v);
        draw_stage(v);
    }
    void sweep_states(SweepPlan& plan) override;
    void sweep_check(const Session& s, const UiState& ui, const Probe& p, const SweepFail& fail) const override;

private:
    void draw_stage(ViewCtx& v);
    void draw_title(ViewCtx& v, const ShownStage& stage, const StageInfo& info, const Array& shown, bool showing_grad);
    void draw_layernorm(ViewCtx& v, const ShownStage& e, const Array& shown, const std::string& key);
    void draw_math(ViewCtx& v, float w, float h);
    float math_width(ViewCtx& v) const;
    // An RGB model's input as the picture it is (issue 36 item 8): true when drawn, false to draw the heatmap.
    bool draw_input_picture(ViewCtx& v, const Trace& t);
    Texture picture_;
    uint64_t picture_version_ = ~0ull;
    HeatmapCache stage_, ln_[4];
    std::map<std::string, Stats> stats_;  // by trace version, stage and slice
    CachedMath math_;
};

}  // namespace

namespace {

struct LnLayout {
    bool stacked = false;  // normalized above out (else the four side by side)
    float header = 0, key_h = 0, w01 = 0, cell = 0, row_h = 0, map_h = 0, ln_h = 0, stats_whole = 0;
};

// Where a LayerNorm's four maps go in `avail`: rows x cols tokens by dims, the row names' margin `left`, the four
// colour bars' widths, the strips' width; `math`: a cell's math takes the room under the maps.
LnLayout ln_layout(ImVec2 avail, int rows, int cols, float left, const float bar[4], bool math, float strip, int strips) {
    const ImGuiStyle& st = ImGui::GetStyle();
    const float th = ImGui::GetTextLineHeight(), sp = st.ItemSpacing.x;
    LnLayout L;
    const float W = avail.x;
    // a panel's lines besides its rows: the part's name, the map's column labels and the map's hover line under it
    const float header = L.header = 3 * th + st.ItemSpacing.y + 6;
    const float stats_min = std::min(150.f, avail.y * 0.3f);  // under the maps: the statistics or the math of a cell
    const float Hm = avail.y - stats_min;                     // the maps' height, at most
    // stacked, the statistics go under the strips, beside out: the maps may take the whole height
    const float Hm_b = math ? Hm : avail.y - 3 * ImGui::GetTextLineHeightWithSpacing();
    // (an RMSNorm has one strip, rms, where a LayerNorm has mean and std)
    const float w01 = L.w01 = left + strip + bar[0] + sp + (strips > 1 ? strip + bar[1] + sp : 0.f);
    // side by side: the two wide maps share the width left of the strips and four bars
    const float cell_a = std::min((W - w01 - bar[2] - bar[3] - 2 * sp) / (2.f * cols), (Hm - header) / rows);
    // stacked: normalized above out, each as wide as the strips leave, half the height each, their
    // keys laid along them (under each map) so that the maps get the bars' width too
    const float key_h = L.key_h = color_key_height();
    const float cell_b = std::min((W - w01 - sp) / float(cols), (Hm_b / 2 - header - key_h - st.ItemSpacing.y) / rows);
    // Stacked when that makes the cells larger, unless it leaves the rows less room than side by side does (at
    // 1366x768 CLIP-B/32's 50 rows got 73 px stacked, under their readable 100, where side by side has 100)
    // (each layout's rows: square cells, or taller up to their readable height where the room allows)
    const float rows_a = std::max(cell_a * rows, std::min(readable_height(rows), Hm - header)),
                rows_b = std::max(cell_b * rows, std::min(readable_height(rows), Hm_b / 2 - header - key_h - st.ItemSpacing.y));
    // and unless the two maps one above the other leave the statistics less than their whole height (at 1366x768
    // CLIP's one-row ln_final left them 85 px, its histogram cut)
    const float ln_h = L.ln_h = ImGui::GetTextLineHeightWithSpacing();
    const float stats_whole = L.stats_whole = 5 * ln_h + 5 * (th + 2 * st.CellPadding.y) + 90 + 4 * st.ItemSpacing.y;
    const bool stats_fit_b = math || avail.y - 2 * (header + rows_b + 2 + key_h) - st.ItemSpacing.y >= stats_whole + ln_h;
    const bool stacked = L.stacked = cell_b > cell_a * 1.15f && rows_b + 0.5f >= std::min(rows_a, readable_height(rows)) && stats_fit_b;
    const float cell = L.cell = std::max(0.05f, stacked ? cell_b : cell_a);
    // Rows at least readable (readable_height) where the room allows, the cells then taller than
    // wide: few tokens and many dims (CLIP-B/32's 50 x 768) in square cells are rows of 0.6 px, and
    // the mean and std strips that share them a 30 px smear.
    const float room = stacked ? Hm_b / 2 - header - key_h - st.ItemSpacing.y : Hm - header;
    const float row_h = L.row_h = std::max(cell, std::min(readable_height(rows), room) / float(rows));
    // stacked, the wide maps' keys lie under them; side by side, a map too short for its bar (under 20 px beside the
    // bar's labels: one row) draws its key under it too
    const bool key_below = stacked || rows * row_h - th < 20;
    L.map_h = header + rows * row_h + 2 + (key_below ? key_h : 0.f);
    return L;
}

// ln_layout, where square cells under a pixel leave a line for the note that says how they are binned (ln_cells_note):
// the maps give it up, not the statistics under them (at 1366x768 ViT-Ti's 197 x 192 panels cut the histogram's
// figures); a map bound by the width gives up the width a line of rows takes (side by side, the two maps').
LnLayout ln_layout_noted(ImVec2 avail, int rows, int cols, float left, const float bar[4], bool math, float strip, int strips) {
    const LnLayout lay = ln_layout(avail, rows, cols, left, bar, math, strip, strips);
    if (!((lay.cell < 1 || lay.row_h < 1) && lay.row_h <= lay.cell * 1.01f)) return lay;
    const float line = ImGui::GetTextLineHeightWithSpacing();
    avail.y -= line;
    avail.x -= (lay.stacked ? 1.f : 2.f) * float(cols) * line / float(rows);
    return ln_layout(avail, rows, cols, left, bar, math, strip, strips);
}

// What the LayerNorm panel says of its cells: rows made taller than the columns are wide, and cells under a pixel
// binned to the pixels (the value farthest from 0 of those a pixel covers, or the largest on a sequential map).
std::string ln_cells_note(int rows, int cols, float cell, float row_h, bool diverging) {
    const bool square = row_h <= cell * 1.01f;
    char note[400] = "";
    if (square)
        std::snprintf(note, sizeof note, "Cells %.2g px:", cell);  // (one line: the maps gave it up, draw_layernorm)
    else if (rows == 1)
        std::snprintf(note, sizeof note, "One row %.2g px tall, columns %.2g px wide: %d dims in square cells would be a "
                      "line too thin to see, so the row is made taller.", row_h, cell, cols);
    else
        std::snprintf(note, sizeof note, "Rows %.2g px tall, columns %.2g px wide: %d tokens x %d dims do not fit square "
                      "cells, so the rows are made taller to tell the tokens apart.", row_h, cell, rows, cols);
    std::string said = note;
    if (cell < 1 || row_h < 1) {
        const Binning b = heatmap_binning(rows, cols, row_h, cell);
        std::string in;
        if (b.cols != cols) in = std::to_string(cols) + " dims in " + std::to_string(b.cols) + " px";
        if (b.rows != rows) in += (in.empty() ? "" : ", ") + std::to_string(rows) + " tokens in " + std::to_string(b.rows) + " px";
        const std::string which = diverging ? "value farthest from 0" : "largest value";
        said += square ? " each pixel shows the " + which + " of the cells it covers (" + in + ")"
                       : std::string(" Each pixel ") + (b.cols != cols ? "column " : "") + "shows the " + which +
                             " of the cells it covers (" + in + "); hover for each.";
    }
    return said;
}

// A LayerNorm's four parts, mean, std, normalized and out, with one cell size so that a token's row
// lines up across them (the row names on the first only). Side by side when that leaves the maps
// large enough; else normalized and out one above the other, columns aligned (out is normalized
// scaled by gamma and shifted by beta, column by column). The layout with the larger cells wins.
void StageTab::draw_layernorm(ViewCtx& v, const ShownStage& e, const Array& shown, const std::string& key) {
    Session& s = v.s;
    UiState& ui = v.ui;
    Probe& pr = v.probe;
    const Trace* trace = s.trace();
    const LnSite site = e.info->ln;
    const int layer = e.info->layer;
    // RMSNorm (AIMv2): rms, normalized and out; the second strip's slot stays empty
    const bool rms = ln_has(site, LnPart::Rms) && trace->find(StageId{ln_kind(site, LnPart::Rms), layer});
    const char* parts[4] = {rms ? "rms" : "mean", rms ? "" : "std", "normalized", "out"};
    const char* const rects[4] = {rms ? "ln.rms" : "ln.mean", "ln.std", "ln.normalized", "ln.out"};
    const LnPart part_of[4] = {rms ? LnPart::Rms : LnPart::Mean, LnPart::Std, LnPart::Normalized, LnPart::Out};
    StageId ids[4];
    const Array* pt[4] = {};
    for (int i = 0; i < 4; ++i) {
        if (rms && i == 1) continue;  // (ids[1] stays the input's: never drawn)
        ids[i] = StageId{ln_kind(site, part_of[i]), layer};
        pt[i] = trace->find(ids[i]);
    }
    int rows = 0, cols = 1;
    for (int i = 2; i < 4; ++i)
        if (pt[i] && rank(*pt[i]) == 2) { rows = int(extent(*pt[i], 0)); cols = std::max(cols, int(extent(*pt[i], 1))); }
    if (rows == 0) rows = 1;
    const ImGuiStyle& st = ImGui::GetStyle();
    const float th = ImGui::GetTextLineHeight(), sp = st.ItemSpacing.x, strip = 24;
    ImGui::PushTextWrapPos(0);
    const char* dims = site == LnSite::Mlp ? "hidden units" : "embedding dims";  // (EVA-02's norm inside the MLP)
    if (rms)
        ImGui::TextDisabled("RMSNorm. rows: the %d token%s, aligned across the three;  rms: one value per token;  normalized, "
                            "out: tokens x %d %s", rows, rows == 1 ? "" : "s", cols, dims);
    else
        ImGui::TextDisabled("rows: the %d token%s, aligned across the four;  mean, std: one value per token;  normalized, out: "
                            "tokens x %d %s", rows, rows == 1 ? "" : "s", cols, dims);
    ImGui::PopTextWrapPos();
    // the row names (tokens: cls, p0, ...) left of the first panel only
    HeatmapArgs names;
    names.row_label = "tokens";
    token_axis_names(names, s, ids[2].kind);
    float left = 0;
    for (int r = 0; r < rows; ++r) left = std::max(left, ImGui::CalcTextSize(names.row_name ? names.row_name(r).c_str() : std::to_string(r).c_str()).x);
    left += 8;
    Colormap cms[4];
    float bar[4];
    for (int i = 0; i < 4; ++i) {
        bar[i] = 0;
        if (rms && i == 1) continue;
        if (pt[i]) cms[i] = colormap_for(pt[i]->data(), pt[i]->size(), pt[i]->data(), pt[i]->size(),
                                         trace->info(ids[i]).signed_values, ui.scale_mode);
        bar[i] = colorbar_width(cms[i]) + 4;
    }
    const bool math = ui.cell_r >= 0 && ui.cell_c >= 0;
    const LnLayout lay = ln_layout_noted(ImGui::GetContentRegionAvail(), rows, cols, left, bar, math, strip, rms ? 1 : 2);
    const bool stacked = lay.stacked;
    const float header = lay.header, key_h = lay.key_h, w01 = lay.w01, cell = lay.cell, row_h = lay.row_h,
                map_h = lay.map_h, ln_h = lay.ln_h, stats_whole = lay.stats_whole;
    pr.numbers["ln.stacked"] = stacked;
    pr.numbers["ln.row_h"] = row_h;
    pr.numbers["ln.cell_w"] = cell;
    pr.numbers["ln.rows_room_bound"] = rows * row_h < readable_height(rows) - 0.5f;
    const ImVec2 o = ImGui::GetCursorScreenPos();
    float x = o.x;
    struct StripKey {
        int part;
        Colormap cm;
    };
    std::vector<StripKey> strip_keys;
    for (int i = 0; i < 4; ++i) {
        if (rms && i == 1) continue;  // (no second strip)
        const bool wide = i >= 2;
        const bool key_under = stacked && wide;
        const float w = (i == 0 ? left : 0.f) + (wide ? cols * cell : strip) + (key_under ? 0.f : bar[i]);
        float px = x, py = o.y;
        if (stacked && i == 3) { px = o.x + w01; py = o.y + map_h + st.ItemSpacing.y; }
        ImGui::SetCursorScreenPos(ImVec2(px, py));
        ImGui::BeginGroup();
        const std::string pn = trace->table().name(ids[i]);
        const bool cur = ids[i] == e.info->id;
        ImGui::TextColored(cur ? ImVec4(1, 0.84f, 0.47f, 1) : ImVec4(0.8f, 0.8f, 0.8f, 1), "%s", parts[i]);
        ImGui::BeginChild(pn.c_str(), ImVec2(w, map_h - th - st.ItemSpacing.y), false, ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
        HeatmapArgs a;
        a.max_w = w; a.colorbar = !key_under; a.zoomable = false; a.cell = cell; a.cell_h = row_h; a.titles = false;
        a.row_labels = i == 0;
        a.rect_name = cur ? "stage" : rects[i];
        int crow = -1, ccol = -1;
        if (wide && pt[i] && trace->info(ids[i]).cell != CellRule::None) {  // normalized, out: click a cell for its math
            a.clicked_row = &crow; a.clicked_col = &ccol;
            if (cur) { a.mark_row = ui.cell_r; a.mark_col = ui.cell_c; }
        }
        const size_t drawn_before = pr.heatmaps.size();  // the entry this part's heatmap adds, if any
        if (!pt[i]) {
            ImGui::TextDisabled("(%s is not in this trace)", pn.c_str());
        } else if (rank(*pt[i]) == 1) {  // a column per token
            Array col = make_tensor({pt[i]->size(), 1});
            std::copy_n(pt[i]->data(), pt[i]->size(), col.data());
            StageInfo ci = trace->info(ids[i]);
            ci.axes = {"tokens", parts[i]};
            a.strip_w = strip;
            tensor_heatmap(v, ("ln" + std::to_string(i)).c_str(), pn, col, ci, ln_[i], a, false);
        } else {
            tensor_heatmap(v, ("ln" + std::to_string(i)).c_str(), pn, *pt[i], trace->info(ids[i]), ln_[i], a, false);
        }
        const bool drew = pr.heatmaps.size() > drawn_before;
        if (key_under && pt[i]) {
            ColorKey(v, rects[i], cms[i], cols * cell);
            if (drew) pr.heatmaps.back().key = true;  // its key, laid along it
        }
        // a strip too short for its bar and too narrow for a key under it: its key goes under the strips
        if (!wide && drew && !pr.heatmaps.back().key) {
            strip_keys.push_back({i, ln_[i].range});
            pr.heatmaps.back().key = true;  // drawn below, after the maps
        }
        if (cur && pr.rects.count("stage")) pr.rects[rects[i]] = pr.rects["stage"];
        if (crow >= 0 && ccol >= 0) {
            ui.cell_r = crow; ui.cell_c = ccol;
            select_stage(ui, *trace, ids[i]);
        }
        ImGui::EndChild();
        ImGui::EndGroup();
        x += w + sp;
    }
    // below the maps (stacked: beside out, under the strips), the statistics and what to try
    const float below_maps = o.y + map_h + st.ItemSpacing.y;
    float below = below_maps;
    // the keys of strips too short for their bars (few tokens: CLIP-B/32's 50 rows in 32 px), one
    // above the other under the strips, each named and as wide as the two strips' column
    for (const StripKey& k : strip_keys) {
        ImGui::SetCursorScreenPos(ImVec2(o.x, below));
        ImGui::TextDisabled("%s", parts[k.part]);
        ImGui::SetCursorScreenPos(ImVec2(o.x, ImGui::GetCursorScreenPos().y));
        ColorKey(v, rects[k.part], k.cm, w01 - sp);
        below = ImGui::GetCursorScreenPos().y + st.ItemSpacing.y;
    }
    // said where the cells are not square, and where they are under a pixel (the maps bin them: Heatmap; said here as
    // their titles are off)
    if (row_h > cell * 1.01f || cell < 1 || row_h < 1) {
        ImGui::SetCursorScreenPos(ImVec2(o.x, below));
        // stacked: in the strips' column (out is beside it)
        ImGui::PushTextWrapPos(stacked ? ImGui::GetCursorPosX() + w01 - sp : 0.f);
        const std::string said = ln_cells_note(rows, cols, cell, row_h, cms[2].mode == Colormap::Diverging);
        ImGui::TextDisabled("%s", said.c_str());
        pr.strings["ln.cells"] = said;
        ImGui::PopTextWrapPos();
        below = ImGui::GetCursorScreenPos().y + st.ItemSpacing.y;
    }
    const char* hint = rms ? "RMSNorm divides each row by its root mean square: every row of normalized has rms 1 over its dims, "
                             "but its mean is not 0 (nothing is subtracted, unlike LayerNorm); out = normalized * gamma, column by "
                             "column, with no beta. Toggle elementwise_affine (A): without it, out == normalized. The unbiased std "
                             "switch (U) has nothing to act on here. The Changes tab shows the effect on every later stage."
                           : "Every row of normalized has mean 0 and std 1 over its dims; out = normalized * gamma + beta, column by "
                             "column. Toggle elementwise_affine (A) and unbiased std (U): without affine, out == normalized; with N-1, "
                             "normalized shrinks by sqrt((D-1)/D). The Changes tab shows the effect on every later stage.";
    if (stacked && !math) {
        ImGui::SetCursorScreenPos(ImVec2(o.x, below));
        // as far down as out reaches (the strips' keys above it take their share)
        // (and as far down as the whole panel needs, histogram axis included, when the view has the
        // room below: the hint under it takes what is left; issue 36)
        const float ln = ln_h, whole = stats_whole;
        // (on a short view the hint is one line, in full in its tooltip: the statistics get its room)
        const float hint_full = ImGui::CalcTextSize(hint, nullptr, false, ImGui::GetContentRegionAvail().x).y + ln;
        const bool hint_short = ImGui::GetContentRegionAvail().y - hint_full < whole;
        const float room_below = ImGui::GetContentRegionAvail().y - (hint_short ? ln : hint_full);
        const float stats_h = std::max({3 * ln, below_maps + map_h - below, std::min(whole, room_below)});
        ImGui::BeginChild("lnstats", ImVec2(w01 - sp, stats_h), false);
        stats_panel(shown, slice2d(shown, 0), "", stats_, pr, key);
        ImGui::EndChild();
        ImGui::SetCursorScreenPos(ImVec2(o.x, below + stats_h + st.ItemSpacing.y));
        if (hint_short) {
            ImGui::TextDisabled("(?) how to read the four maps");
            if (v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", hint);
            return;
        }
        ImGui::PushTextWrapPos(0);
        ImGui::TextDisabled("%s", hint);
        ImGui::PopTextWrapPos();
        return;
    }
    ImGui::SetCursorScreenPos(ImVec2(o.x, std::max(below, below_maps + (stacked ? map_h + st.ItemSpacing.y : 0.f))));
    ImGui::Separator();
    if (math) {  // the math of the selected cell, under the maps
        draw_math(v, 0, 0);
        return;
    }
    ImGui::BeginChild("lnstats", ImVec2(0, 0));
    ImGui::Columns(2, nullptr, false);
    stats_panel(shown, slice2d(shown, 0), "", stats_, pr, key);
    ImGui::NextColumn();
    ImGui::PushTextWrapPos(0);
    ImGui::TextDisabled("%s", hint);
    ImGui::PopTextWrapPos();
    ImGui::Columns(1);
    ImGui::EndChild();
}

// The stage's title lines: back / next, its row, its title, shape and axes, its inputs' shapes, what it is, the
// PyTorch line, and which options the trace on screen was computed with while a newer pass runs.
void StageTab::draw_title(ViewCtx& v, const ShownStage& stage, const StageInfo& info, const Array& shown, bool showing_grad) {
    Session& s = v.s;
    UiState& ui = v.ui;
    Probe& pr = v.probe;
    const Trace* trace = s.trace();
    const ShownStage* e = &stage;
    const Array* t = &shown;
    const std::string& name = e->info->name;
    const std::string gname = name + ".grad";
    // the title lines flow: they wrap onto a new row when the view is narrow
    Flow flow;
    flow.next(2 * ImGui::GetFrameHeight() + ImGui::GetStyle().ItemSpacing.x);
    if (ImGui::ArrowButton("prev", ImGuiDir_Left)) select_row(ui, *trace, e->row ? e->row - 1 : 0);
    if (v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("previous stage (Left / Up)");
    ImGui::SameLine();
    if (ImGui::ArrowButton("next", ImGuiDir_Right)) select_row(ui, *trace, std::min(trace->size() - 1, e->row + 1));
    if (v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("next stage (Right / Down)");
    const std::string counter = std::to_string(e->row + 1) + "/" + std::to_string(trace->size());
    flow.next(Flow::text_w(counter.c_str()));
    ImGui::TextDisabled("%s", counter.c_str());
    if (e->info->id.kind == StageKind::Patches || e->info->id.kind == StageKind::Input) {  // the same numbers as pictures (tab_patches.cpp)
        flow.next(Flow::button_w("As pictures"));
        if (ImGui::SmallButton("As pictures")) ui.tab = Tab::Patches;
        if (v.hover && ImGui::IsItemHovered())
            ImGui::SetTooltip("the image cut into its tiles, and each row of patches beside its tile (key %s, --tab %d)",
                              tab_spec(Tab::Patches).key, int(Tab::Patches));
    }
    flow.next(Flow::text_w(info.title.c_str()));
    ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(255, 214, 120, 255));
    ImGui::TextUnformatted(info.title.c_str());
    ImGui::PopStyleColor();
    std::string ax;
    for (size_t i = 0; i < info.axes.size(); ++i) ax += (i ? " x " : "") + info.axes[i];
    const std::string shape_line = (showing_grad ? gname : name) + "  shape " + shape_text(*t) + " = " + ax;
    flow.next(std::min(Flow::text_w(shape_line.c_str()), ImGui::GetContentRegionAvail().x));
    ImGui::PushTextWrapPos(0);
    ImGui::TextDisabled("%s", shape_line.c_str());
    ImGui::PopTextWrapPos();
    pr.strings["stage.shape"] = shape_line;
    if (!info.from.empty()) {  // shapes in -> out
        std::string in;
        for (StageId f : info.from) {
            const int fr = trace->index(f);
            if (fr < 0) continue;
            // a row an on-demand pass did not keep has its table row's shape when computed: not recomputed for it
            const std::string fs = trace->on_demand() && !trace->kept(size_t(fr)) ? shape_str(trace->info(size_t(fr)).shape)
                                                                                 : shape_text(trace->at(size_t(fr)));
            in += (in.empty() ? "" : " + ") + trace->table().name(f) + " " + fs;
        }
        ImGui::PushTextWrapPos(0);
        if (!in.empty()) ImGui::TextDisabled("in: %s  ->  out: %s", in.c_str(), shape_text(*t).c_str());
        ImGui::PopTextWrapPos();
    }
    ImGui::PushTextWrapPos(0);
    ImGui::TextUnformatted(info.what.c_str());
    ImGui::PopTextWrapPos();
    ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(140, 220, 160, 255));
    ImGui::Text(">>> %s", info.torch.c_str());
    ImGui::PopStyleColor();
    pr.strings["stage.title"] = info.title;
    pr.strings["stage.what"] = info.what;
    pr.strings["stage.torch"] = info.torch;
    const Options& opt = trace->options();
    if (s.busy() && s.options() != opt) {
        // the toolbar shows the options just asked for; this view, until their pass is done, the trace's
        const std::string shown = opt.describe(), running = s.options().describe();
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "Shown: the trace computed with %s. A pass with %s is running; "
                           "this view changes when it is done.", shown.c_str(), running.c_str());
        ImGui::PopTextWrapPos();
        pr.strings["stage.options"] = shown;
        pr.strings["stage.running"] = running;
    }
}

void StageTab::draw_stage(ViewCtx& v) {
    Session& s = v.s;
    UiState& ui = v.ui;
    Probe& pr = v.probe;
    const Trace* trace = s.trace();
    const auto e = shown_stage(s, ui);
    if (!e) {
        std::string why = !s.has_image() ? "No image is loaded, so the model has not run: load one with the toolbar "
                                           "(or drop a file on the window)."
                        : s.loading() ? "Loading the model: the views fill in when its first pass is done."
                        : s.busy() ? "Running the model: the views fill in when its first pass is done." : "No trace yet.";
        ImGui::TextDisabled("%s", why.c_str());
        pr.strings["stage.message"] = why;
        DrawWorking(v);
        return;
    }
    select_row(ui, *trace, e->row);  // the selection names what is shown (a re-run may have moved it)
    const Config& c = s.shown_config();
    const std::string& name = e->info->name;
    const std::string rest = stage_local_name(e->info->id);
    const bool grad_ok = e->grad != nullptr;
    const bool showing_grad = ui.show_grad && grad_ok;
    const Array* t = showing_grad ? e->grad : e->value;
    // the trace's own table row: its texts are for the options it was computed with
    StageInfo info = *e->info;  // the value's description; a gradient has the value's axes
    const int pred = trace->has_grads() ? trace->grad_class() : -1;
    if (showing_grad && !c.has_logits()) {
        // an embedding model (DINO, DINOv2, MAE, CLIP, SigLIP): the target is one number of its output, its largest by
        // default; said as largest only where it is, from the trace's own embedding
        const Array* emb = trace->find(StageId{StageKind::Embedding});
        const bool largest = emb && emb->size() > size_t(std::max(pred, 0)) &&
                             int(std::max_element(emb->begin(), emb->end()) - emb->begin()) == pred;
        info.title = "Gradient: d embedding[" + std::to_string(pred) + "] / d " + rest;
        info.what = "How much number " + std::to_string(pred) + " of the model's output embedding (" +
                    (largest ? "its largest" : "the one chosen") + "; the model has no classifier, so no class to follow) "
                    "changes per unit change of each value of " + name +
                    ": one backward pass from that number. Positive (red) raises it, negative (blue) lowers it.";
        info.torch = "embedding[0, " + std::to_string(pred) + "].backward();  " + rest + ".grad   # after " + rest +
                     ".retain_grad()";
        info.signed_values = true;
        info.from.clear();
    } else if (showing_grad) {
        std::string cls = pred >= 0 ? class_labels(c, size_t(c.classes))[size_t(std::min(pred, c.classes - 1))] : "?";
        info.title = "Gradient: d logit[" + std::to_string(pred) + "] / d " + rest;
        info.what = "How much the predicted class's logit (" + std::to_string(pred) + ", " + cls +
                    ") changes per unit change of each value of " + name + ": one backward pass from that logit. "
                    "Positive (red) raises it, negative (blue) lowers it.";
        info.torch = "logits[0, " + std::to_string(pred) + "].backward();  " + rest + ".grad   # after " + rest + ".retain_grad()";
        info.signed_values = true;
        info.from.clear();
    }
    draw_title(v, *e, info, *t, showing_grad);
    // slice and scale controls, flowing onto a second row when the view is narrow
    Flow controls;
    // an RGB model's input: the picture first, its channels on request
    const bool picture_able = e->info->id.kind == StageKind::Input && !showing_grad && rank(*t) == 3 && extent(*t, 0) == 3;
    if (picture_able) {
        int mode = ui.input_channels ? 1 : 0;
        controls.next(Flow::text_w("show:") + 140);
        ImGui::TextUnformatted("show:");
        ImGui::SameLine();
        if (ImGui::RadioButton("picture", &mode, 0)) ui.input_channels = false;
        ImGui::SameLine();
        if (ImGui::RadioButton("channels", &mode, 1)) ui.input_channels = true;
    }
    if (rank(*t) == 3 && !(picture_able && !ui.input_channels)) {
        int S = int(extent(*t, 0));
        int& sel = info.per_head ? ui.head : ui.channel;
        sel = std::clamp(sel, 0, S - 1);
        const char* label = info.per_head ? "head (H / Shift+H)" : "channel";
        controls.next(Flow::labelled_w(160, label));
        ImGui::SetNextItemWidth(160);
        ImGui::SliderInt(label, &sel, 0, S - 1);
    }
    controls.next(Flow::labelled_w(130, "scale"));
    ImGui::SetNextItemWidth(130);
    const char* modes[] = {"per tensor", "per slice", "symmetric"};
    int mode = int(ui.scale_mode);
    if (ImGui::Combo("scale", &mode, modes, 3)) ui.scale_mode = ScaleMode(mode);
    controls.next(Flow::checkbox_w("gradient (G)"));
    ImGui::Checkbox("gradient (G)", &ui.show_grad);
    char zoom[96];
    std::snprintf(zoom, sizeof zoom, "zoom %.0f%%  (wheel; drag to pan; 0 resets)", ui.zoom * 100);
    controls.next(Flow::text_w(zoom));
    ImGui::TextDisabled("%s", zoom);
    ImGui::Separator();
    pr.numbers["stage.showing_grad"] = showing_grad;

    if (ui.show_grad && !grad_ok) {
        // Say why, in place; never touch data that is not there.
        if (!trace->has_grads()) {
            std::string why = s.result().no_grads_why.empty() ? s.grads_unavailable_reason() : s.result().no_grads_why;
            if (why.empty()) why = "the gradients of this model are being computed";
            draw_grads_missing(s, pr, why);
        } else {
            std::string why = "no gradient is recorded for this stage: " + no_grad_reason(*e->info);
            ImGui::PushTextWrapPos(0);
            ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s.", why.c_str());
            ImGui::PopTextWrapPos();
            pr.strings["stage.message"] = why;
        }
        if (ui.cell_r >= 0 && ui.cell_c >= 0) draw_math(v, 0, 0);  // it says why it explains no gradient
        return;
    }

    const bool is_ln = e->info->ln != LnSite::None && !showing_grad;
    const std::string key = std::to_string(s.version()) + name + (showing_grad ? "g" : "");
    if (is_ln) {
        draw_layernorm(v, *e, *t, key);
        return;
    }
    const bool math = ui.cell_r >= 0 && ui.cell_c >= 0;
    const float stats_w = math ? math_width(v) : std::clamp(ImGui::GetContentRegionAvail().x * 0.3f, 240.f, 300.f);
    ImGui::BeginChild("heat", ImVec2(ImGui::GetContentRegionAvail().x - stats_w, 0), false,
                      ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
    const bool classes_axis = rank(*t) == 1 && !info.axes.empty() && info.axes.back() == "classes" &&
                              int(t->size()) == c.classes;
    HeatmapArgs a;
    a.colorbar = true; a.rect_name = "stage"; a.zoomable = true; a.widen_cols = true;
    if (rank(*t) == 1) a.max_h = 120;
    if (classes_axis) a.col_names = class_labels(c, t->size());
    // A row of an attention pattern (or scores) is one query token: clicking it shows that token's
    // attention over the image (the Query overlay, vit::attention_from) for this layer and head.
    const StageKind kind = e->info->id.kind;
    const bool query_rows = (kind == StageKind::AttnPattern || kind == StageKind::AttnScores) && rank(*t) == 3;
    int clicked_row = -1, clicked_col = -1;
    if (query_rows) a.clicked_row = &clicked_row;
    const bool math_cells = !showing_grad && e->info->cell != CellRule::None;  // click a cell: its math (draw_over)
    if (math_cells) {
        a.clicked_row = &clicked_row; a.clicked_col = &clicked_col;
        a.mark_row = rank(*t) == 1 ? 0 : ui.cell_r; a.mark_col = ui.cell_c;
    }
    if (query_rows) {
        ImGui::PushTextWrapPos(0);
        ImGui::TextDisabled("click a row: that query token's attention over the image (overlay \"query\")");
        ImGui::PopTextWrapPos();
    }
    if (!(picture_able && !ui.input_channels && draw_input_picture(v, *trace)))
        tensor_heatmap(v, "stage", name, *t, info, stage_, a, showing_grad);
    if (math_cells && clicked_row >= 0 && clicked_col >= 0) { ui.cell_r = clicked_row; ui.cell_c = clicked_col; }
    if (query_rows && clicked_row >= 0) {
        ui.query = clicked_row;
        ui.overlay = Overlay::Query;
        ui.overlay_layer = e->info->layer;
        ui.overlay_head = ui.head;
    }
    if (classes_axis) {
        ImGui::Separator();
        class_bars(t->data(), t->size(), c, pr, !info.signed_values && !showing_grad);
    } else if (rank(*t) == 1) {  // also as bars
        value_bars(t->data(), t->size(), pr);
    }
    ImGui::EndChild();
    ImGui::SameLine();
    if (math) {
        draw_math(v, 0, 0);
        return;
    }
    ImGui::BeginChild("stats", ImVec2(0, 0), true);
    ImGui::TextDisabled("statistics");
    Slice2D sl = slice2d(*t, rank(*t) == 3 ? (info.per_head ? ui.head : ui.channel) : 0);
    std::string what = rank(*t) == 3 ? std::string(info.per_head ? "shown = head " : "shown = channel ") +
                                           std::to_string(sl.slice) + " of " + std::to_string(sl.slices)
                                     : "";
    if (picture_able && !ui.input_channels)  // the picture shows every channel: these numbers are one channel's
        what = "shown = channel " + std::to_string(sl.slice) + " (the picture: all " + std::to_string(sl.slices) + ")";
    stats_panel(*t, sl, what, stats_, pr, key + "#" + std::to_string(sl.slice));
    if (ui.patch >= 0) {  // its token in this stage's order: after cls, the registers (from with_registers on) and dist
        const StageTable& tab = trace->table();
        const int before = tab.dims().prefix - (before_registers(e->info->id.kind) ? tab.config().registers : 0);
        ImGui::TextColored(ImVec4(1, 0.3f, 0.8f, 1), "patch %d = token %d highlighted", ui.patch, ui.patch + before);
    }
    ImGui::EndChild();
}

bool StageTab::draw_input_picture(ViewCtx& v, const Trace& t) {
    if (picture_version_ != v.s.version()) {
        if (!upload_model_input(picture_, v.s)) return false;
        picture_version_ = v.s.version();
    }
    const Array* in = t.find(StageId{StageKind::Input});
    if (!in || rank(*in) != 3) return false;
    const float Ih = float(extent(*in, 1)), Iw = float(extent(*in, 2));
    ImGui::PushTextWrapPos(0);
    ImGui::TextDisabled("The input as the picture it is: each pixel's R, G and B, denormalized (value x std + mean) for "
                        "display. Choose 'channels' for the numbers the model reads, one channel at a time.");
    ImGui::PopTextWrapPos();
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float scale = std::max(1.f, std::min((avail.x - 8) / Iw, (avail.y - 8) / Ih));
    const ImVec2 p0 = ImGui::GetCursorScreenPos(), p1(p0.x + Iw * scale, p0.y + Ih * scale);
    ImGui::Dummy(ImVec2(p1.x - p0.x, p1.y - p0.y));
    ImGui::GetWindowDrawList()->AddImage(picture_.id(), p0, p1);
    v.probe.rects["stage.picture"] = Rect{p0.x, p0.y, p1.x - p0.x, p1.y - p0.y};
    return true;
}

float StageTab::math_width(ViewCtx& v) const {
    const float W = ImGui::GetContentRegionAvail().x;
    float need = 300;
    if (math_.math)
        for (const std::string& line : math_.math->lines) need = std::max(need, ImGui::CalcTextSize(line.c_str()).x);
    return std::clamp(need + 2 * ImGui::GetStyle().WindowPadding.x + 4, std::min(300.f, W * 0.45f), W * 0.5f);
}

// The math of the selected cell, in a panel beside the heatmap (never over it): the numbers that
// produced it, each line wrapped at spaces to the panel (never inside a number, nothing behind a sideways scroll).
void StageTab::draw_math(ViewCtx& v, float w, float h) {
    Session& s = v.s;
    UiState& ui = v.ui;
    Probe& pr = v.probe;
    const Trace* t = s.trace();
    const auto e = shown_stage(s, ui);
    if (!t || !e) return;
    // (no sideways scroll: every line wraps to the panel; with one allowed, ImGui wraps at the widest
    // content of the frame before, so a panel once too wide stayed so)
    ImGui::BeginChild("cellmath", ImVec2(w, h), true);
    {
        const ImVec2 p = ImGui::GetWindowPos(), z = ImGui::GetWindowSize();
        pr.rects["cellmath"] = Rect{p.x, p.y, z.x, z.y};
    }
    bool open = true;
    ImGui::TextDisabled("The math of one cell");
    ImGui::SameLine();
    if (ImGui::SmallButton("close (Esc)")) open = false;
    const std::string& name = e->info->name;
    std::string why;
    std::vector<size_t> idx;
    const Array& a = *e->value;
    const size_t R = rank(a);
    if (ui.show_grad) why = "The math panel explains values: turn off the gradient view (G) to see it.";
    else if (e->info->cell == CellRule::None)
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
        CachedMath* c = &math_;
        std::string it = join_index(idx);
        if (c->version != s.version() || c->stage != name || c->index_text != it) {
            c->version = s.version(); c->stage = name; c->index_text = it;
            c->math.reset(); c->error.clear();
            try {
                // the weights and options that produced this trace (not the ones a run in flight uses)
                c->math = cell_math(s.shown_model()->weights, *t, e->info->id, idx, 12);
            } catch (const std::exception& ex) {
                c->error = ex.what();
            }
        }
        cm = c;
        if (!c->math) why = c->error.empty() ? "no math for this cell" : c->error;
    }
    if (!why.empty()) {
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s", why.c_str());
        ImGui::PopTextWrapPos();
        pr.strings["cellmath.message"] = why;
    } else {
        const CellMath& m = *cm->math;
        ImGui::TextColored(ImVec4(1, 0.84f, 0.47f, 1), "%s[%s]", m.name.c_str(), cm->index_text.c_str());
        // every line wrapped at spaces to the panel's width (issue 36): nothing behind a sideways
        // scroll, and never a break inside a number
        ImGui::PushTextWrapPos(0);
        TextWrappedWords(pr, "cellmath.formula", m.formula, nullptr, true);
        ImGui::Separator();
        char buf[160];
        std::snprintf(buf, sizeof buf, "= %.9g   (recomputed in double from the numbers below)", m.value);
        TextWrappedWords(pr, "cellmath.value", buf);
        std::snprintf(buf, sizeof buf, "the trace holds %.9g", double(m.recorded));
        TextWrappedWords(pr, "cellmath.recorded", buf);
        double diff = std::fabs(m.value - double(m.recorded));
        double tol = 1e-6 * std::max(std::fabs(double(m.recorded)), m.scale);
        std::snprintf(buf, sizeof buf, "|difference| %.3g %s 1e-6 x %.3g (float rounding)", diff, diff <= tol ? "<=" : ">",
                      std::max(std::fabs(double(m.recorded)), m.scale));
        const ImVec4 check_col = diff <= tol ? ImVec4(0.5f, 0.9f, 0.5f, 1) : ImVec4(1, 0.4f, 0.4f, 1);
        TextWrappedWords(pr, "cellmath.check", buf, &check_col);
        ImGui::Separator();
        std::string all;
        for (const std::string& line : m.lines) {
            TextWrappedWords(pr, "cellmath.lines", line);
            all += line + "\n";
        }
        ImGui::PopTextWrapPos();
        pr.strings["cellmath.stage"] = m.name;
        pr.strings["cellmath.index"] = cm->index_text;
        pr.strings["cellmath.formula"] = m.formula;
        pr.strings["cellmath.lines"] = all;
        pr.numbers["cellmath.value"] = m.value;
        pr.numbers["cellmath.recorded"] = m.recorded;
        pr.numbers["cellmath.scale"] = m.scale;
        pr.numbers["cellmath.terms"] = double(m.terms.size());
        pr.numbers["cellmath.ok"] = diff <= tol;
    }
    ImGui::EndChild();
    if (!open) ui.cell_r = ui.cell_c = -1;
}


// The sweep: the math of one cell for every stage kind it explains, at the first and last layer
// (first, last, middle and one out-of-range cell), then on a stage it does not explain and on a gradient.
void StageTab::sweep_states(SweepPlan& plan) {
    const Trace& tr = *plan.trace;
    const int L = plan.L, H = plan.H;
    for (int i = 0; i < plan.T; ++i) {
        const StageInfo& e = tr.info(size_t(i));
        if (e.cell == CellRule::None || (e.layer > 0 && e.layer < L - 1)) continue;
        Slice2D sl = slice2d(tr.at(size_t(i)), 0);
        const int rows = sl.rows, cols = sl.cols;
        for (auto rc : {std::make_pair(0, 0), std::make_pair(rows - 1, cols - 1), std::make_pair(rows / 2, cols / 2),
                        std::make_pair(rows + 2, 0)}) {
            int head = (i + rc.first) % std::max(1, H);
            plan.add("cell math " + e.name + " [" + std::to_string(rc.first) + "," + std::to_string(rc.second) + "] head " +
                         std::to_string(head),
                     [id = e.id, rc, head](Session&, UiState& ui) {
                         ui.tab = Tab::Stage; ui.show_grad = false; ui.stage = id; ui.head = head;
                         ui.cell_r = rc.first; ui.cell_c = rc.second; ui.zoom = 1;
                     });
        }
    }
    plan.add("cell math on an unsupported stage", [](Session&, UiState& ui) {
        ui.tab = Tab::Stage; ui.stage = StageId{StageKind::Input}; ui.cell_r = 0; ui.cell_c = 0;
    });
    plan.add("cell math on a gradient view", [L](Session& s, UiState& ui) {
        ui.tab = Tab::Stage; ui.show_grad = true; ui.cell_r = 1; ui.cell_c = 1;
        if (const Trace* t = s.trace()) select_stage(ui, *t, StageId{StageKind::AttnPattern, std::max(0, L - 1)});
    });
    plan.add("cell math closed", [](Session&, UiState& ui) { ui.cell_r = ui.cell_c = -1; ui.show_grad = false; });
    // the input: the picture (an RGB model's default), then its channels on request
    for (bool channels : {false, true})
        plan.add(std::string("input as ") + (channels ? "channels" : "the picture"), [channels](Session&, UiState& ui) {
            ui.tab = Tab::Stage; ui.show_grad = false; ui.stage = StageId{StageKind::Input}; ui.input_channels = channels;
        });
    plan.add("input channels off", [](Session&, UiState& ui) { ui.input_channels = false; });
}

// On every frame of the Stage tab: a heatmap or the reason there is none, square cells, and the
// math of a selected cell equal to the trace's value (or the reason there is none).
void StageTab::sweep_check(const Session& s, const UiState& ui, const Probe& p, const SweepFail& fail) const {
    if (!s.trace()) return;
    const bool showing_grad = p.number("stage.showing_grad") != 0;
    const bool drew = p.rects.count("stage") != 0, picture = p.rects.count("stage.picture") != 0;
    const bool said = !p.string("stage.message").empty();
    if (ui.show_grad && !showing_grad && !said) fail("gradient view shows nothing and does not say why");
    if (!drew && !picture && !said) fail("stage view drew no heatmap and gave no reason");
    // an RGB model's input opens as the picture (issue 36 item 8), its channels on request
    const auto e = shown_stage(s, ui);
    if (e && e->info->id.kind == StageKind::Input && !ui.show_grad && rank(*e->value) == 3 && extent(*e->value, 0) == 3 &&
        picture == ui.input_channels)
        fail(ui.input_channels ? "the input's channels were asked for and the picture is shown"
                               : "an RGB model's input stage shows a channel on a colour scale, not the picture");
    if (drew) {
        const double rows = p.number("stage.rows"), cols = p.number("stage.cols");
        const double cw = p.number("stage.cell_w"), ch = p.number("stage.cell_h");
        // square, except a LayerNorm panel's rows raised to readable_height (few tokens, many dims)
        const bool ln_raised = p.numbers.count("ln.row_h") && ch > cw &&
                               std::abs(ch - p.number("ln.row_h")) < 0.01 && ch * rows <= readable_height(int(rows)) + 0.5;
        // or its columns widened to readable_height (many rows, few columns), said on its titles line
        const bool widened = !p.string("stage.cells").empty() && cw > ch && cw * cols <= readable_height(int(cols)) + 0.5;
        if (rows > 1 && cols > 1 && std::abs(cw - ch) > 0.01 && !ln_raised && !widened)
            fail("heatmap cells are not square: " + std::to_string(cw) + " x " + std::to_string(ch));
    }
    if (ui.cell_r >= 0 && ui.cell_c >= 0) {
        const bool has_math = p.numbers.count("cellmath.ok") != 0;
        const bool said_why = !p.string("cellmath.message").empty();
        if (!has_math && !said_why) fail("a cell is selected and the math panel shows nothing and does not say why");
        if (has_math && p.number("cellmath.ok") != 1)
            fail("math panel's result " + std::to_string(p.number("cellmath.value")) + " is not the trace's " +
                 std::to_string(p.number("cellmath.recorded")));
        if (e && !ui.show_grad && e->info->cell != CellRule::None && !has_math) {
            Slice2D sl = slice2d(*e->value, ui.head);
            if (ui.cell_r < sl.rows && ui.cell_c < sl.cols)
                fail("no math for an in-range cell of " + e->info->name + ": " + p.string("cellmath.message"));
        }
    }
}

}  // namespace

std::unique_ptr<TabView> make_stage_tab(JobQueue&) { return std::make_unique<StageTab>(); }

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_stage() {
    using K = ProbeKind;
    return {
        {K::Number, "stage.showing_grad", "1 when the gradient is drawn"},
        {K::Number, "ln.stacked", "1 when normalized and out are drawn one above the other"},
        {K::Number, "ln.row_h", "the LayerNorm panel's row height in px (cells taller than wide where it exceeds the cell width)"},
        {K::Number, "ln.cell_w", "the LayerNorm panel's cell width in px"},
        {K::Number, "ln.rows_room_bound", "1 when the rows are as tall as the panel's room allows, short of readable_height"},
        {K::String, "stage.message", "why the stage view shows no heatmap"},
        {K::String, "ln.cells", "the LayerNorm panel's note that its cells are not square, and why"},
        {K::String, "stage.cells", "the stage heatmap's note that its columns were widened (many rows, few columns)"},
        {K::String, "stage.title", "the stage's title"},
        {K::String, "stage.shape", "the line with the stage's name, shape and axes"},
        {K::String, "stage.what", "the stage's explanation"},
        {K::String, "stage.torch", "the stage's PyTorch line"},
        {K::String, "stage.options", "the options the trace on screen was computed with"},
        {K::String, "stage.running", "a pass with other options is running (said above the view)"},
        {K::Rect, "bar.<class>", "a logit's bar"},
        {K::Group, "bars.{names|values|axis}", "the bar chart's labels and its axis"},
        {K::Group, "vbars.axis", "a vector's bar chart's axis"},
        {K::Number, "bars.{zero_x|px_per_unit|shown}", "the bar chart's scale"},
        {K::Rect, "cellmath", "the math panel"},
        {K::Number, "cellmath.{ok|value|recorded|scale|terms}", "the math of one cell"},
        {K::String, "cellmath.{stage|index|formula|lines|message}", "the math panel's texts"},
    };
}

}  // namespace vit::app
