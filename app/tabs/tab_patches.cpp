// The Patches tab (issue 10 item 1): the `patches` stage as pictures: the model input cut into its
// P x P tiles, then every row of the recorded patches matrix beside the tile it holds (paper Fig. 1).
#include "app/probe.h"
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/tabs/tab.h"

namespace vit::app {

namespace {

const ImVec4 kWarn(kWarnRGBA[0], kWarnRGBA[1], kWarnRGBA[2], kWarnRGBA[3]);

// The run's patch geometry and the two arrays the tab compares: the model input (C, Ih, Iw) and the patches (N, CPP).
struct PatchGeom {
    int C, P, Ih, Iw, gh, gw, N, CPP;
    const float* x;     // the input
    const float* rows;  // the patches matrix
    float row(int n, int ch, int yy, int xx) const { return rows[size_t(n) * CPP + size_t(ch) * P * P + yy * P + xx]; }
    float pixel(int n, int ch, int yy, int xx) const {
        return x[(size_t(ch) * Ih + size_t(n / gw * P + yy)) * Iw + size_t(n % gw * P + xx)];
    }
    // row n is its tile unfolded (channel-major, then row-major inside the tile); with `tol`, within it
    bool row_is_tile(int n, float tol = 0) const {
        for (int ch = 0; ch < C; ++ch)
            for (int yy = 0; yy < P; ++yy)
                for (int xx = 0; xx < P; ++xx)
                    if (tol == 0 ? row(n, ch, yy, xx) != pixel(n, ch, yy, xx) : std::fabs(row(n, ch, yy, xx) - pixel(n, ch, yy, xx)) >= tol)
                        return false;
        return true;
    }
};

class PatchesTab : public TabView {
public:
    void draw(ViewCtx& v) override {
        Session& s = v.s;
        UiState& ui = v.ui;
        Probe& pr = v.probe;
        const Trace* t = trace_or_why(v, "patches.message", "No image is loaded, so there are no patches.");
        if (!t) return;
        const Config& c = s.shown_config();
        // the run's input H x W and its patch grid gh x gw (another input size than the model's own included)
        const RunDims& rd = t->table().dims();
        const int C = c.channels, P = c.patch, Ih = rd.img_h, Iw = rd.img_w, gh = rd.gh, gw = rd.gw, N = rd.N, CPP = C * P * P;
        const StageId in_id{StageKind::Input}, pa_id{StageKind::Patches};
        const Array* in = t->find(in_id);
        const Array* pa = t->find(pa_id);
        std::string why;
        if (!in || !pa) why = "the trace has no " + stage_name(!in ? in_id : pa_id) + " stage";
        else if (in->dimension() != 3 || int(in->shape(0)) != C || int(in->shape(1)) != Ih || int(in->shape(2)) != Iw)
            why = "the trace's input has shape " + shape_str_of(*in) + ", not the run's (" + std::to_string(C) + ", " +
                  std::to_string(Ih) + ", " + std::to_string(Iw) + ")";
        else if (pa->dimension() != 2 || int(pa->shape(0)) != N || int(pa->shape(1)) != CPP)
            why = "the trace's patches has shape " + shape_str_of(*pa) + ", not (" + std::to_string(N) + ", " +
                  std::to_string(CPP) + ")";
        else if (C != 1 && C != 3)
            why = "the model takes " + std::to_string(C) + " channels: only gray and RGB tiles can be drawn";
        if (!why.empty()) {
            ImGui::TextColored(kWarn, "%s", why.c_str());
            pr.strings["patches.message"] = why;
            return;
        }
        const float* x = in->data();
        const float* rows = pa->data();
        auto denorm = [&](float val, int ch) {
            const float m = ch < int(c.pre.mean.size()) ? c.pre.mean[size_t(ch)] : 0.f;
            const float sd = ch < int(c.pre.std.size()) ? c.pre.std[size_t(ch)] : 1.f;
            return std::clamp(val * sd + m, 0.f, 1.f);
        };
        if (keys_.stale("tiles", s.version())) {
            // the model input as the model sees it (denormalized for display), and the same layout
            // rebuilt from the patches rows: tile n's texel (y, x, ch) is row n's entry ch*P*P + y*P + x
            const size_t plane = size_t(Ih) * size_t(Iw);
            std::vector<unsigned char> img(plane * 4, 255), fromrows(plane * 4, 255);
            input_ = Array::from_shape({size_t(C), size_t(Ih), size_t(Iw)});
            for (int ch = 0; ch < C; ++ch)
                for (size_t i = 0; i < plane; ++i) input_.data()[size_t(ch) * plane + i] = denorm(x[size_t(ch) * plane + i], ch);
            for (int py = 0; py < Ih; ++py)
                for (int px = 0; px < Iw; ++px)
                    for (int k = 0; k < 3; ++k) {
                        const int ch = C == 3 ? k : 0;
                        img[(size_t(py) * Iw + px) * 4 + k] = (unsigned char)std::lround(255.f * input_.data()[(size_t(ch) * Ih + py) * Iw + px]);
                        const int n = (py / P) * gw + px / P, yy = py % P, xx = px % P;
                        if (py < gh * P && px < gw * P)
                            fromrows[(size_t(py) * Iw + px) * 4 + k] =
                                (unsigned char)std::lround(255.f * denorm(rows[size_t(n) * CPP + size_t(ch) * P * P + yy * P + xx], ch));
                    }
            image_.upload_rgba(img.data(), Iw, Ih);
            rows_img_.upload_rgba(fromrows.data(), Iw, Ih);
            // the rows as strips in the tiles' colours: entry k is channel k / (P*P) as the model reads it
            // (gray, or that channel's colour alone for RGB)
            std::vector<unsigned char> strip(size_t(N) * CPP * 4, 255);
            for (int n = 0; n < N; ++n)
                for (int k = 0; k < CPP; ++k) {
                    const int ch = k / (P * P);
                    const auto u = (unsigned char)std::lround(255.f * denorm(rows[size_t(n) * CPP + k], ch));
                    unsigned char* q = &strip[(size_t(n) * CPP + k) * 4];
                    for (int j = 0; j < 3; ++j) q[j] = C == 1 || j == ch ? u : 0;
                }
            rows_tex_.upload_rgba(strip.data(), CPP, N);
        }
        const PatchGeom g{C, P, Ih, Iw, gh, gw, N, CPP, x, rows};
        // how many rows are their tile unfolded (channel-major, then row-major inside the tile)
        int equal = 0;
        for (int n = 0; n < N; ++n) equal += g.row_is_tile(n);
        pr.numbers["patches.rows_equal_tiles"] = equal;
        // the first row that visibly is not its tile (the reshape bug's: a value off by a quarter of the input's
        // range or more): the list opens there, not on rows of background that read the same with and without the
        // bug, nor on a row that differs by a shade (issue 36 item 11)
        float in_lo = x[0], in_hi = x[0];
        for (size_t i = 0; i < in->size(); ++i) { in_lo = std::min(in_lo, x[i]); in_hi = std::max(in_hi, x[i]); }
        const float visible = 0.25f * (in_hi - in_lo);
        int first_wrong = -1;
        for (int n = 0; n < N && first_wrong < 0 && visible > 0; ++n)
            if (!g.row_is_tile(n, visible)) first_wrong = n;
        pr.numbers["patches.first_wrong"] = first_wrong;
        const bool bug = s.shown_options().bug_reshape_patches;
        ImGui::PushTextWrapPos(0);
        ImGui::TextWrapped("Patches as pictures: the %dx%d model input cut into %d tiles of %dx%d (%d x %d, numbered in "
                           "row-major order), then the sequence the transformer reads: row n of `patches` (%d values: %s) "
                           "beside the tile it holds. Cutting tiles and flattening them is what a Conv2d with kernel = "
                           "stride = %d does to each position.", Ih, Iw, N, P, P, gh, gw, CPP,
                           C == 3 ? "R, then G, then B, each P x P row by row: channel-major" : "the tile's pixel rows, one after another",
                           P);
        ImGui::PopTextWrapPos();
        float lo = rows[0], hi = rows[0];
        for (size_t i = 0; i < pa->size(); ++i) { lo = std::min(lo, rows[i]); hi = std::max(hi, rows[i]); }
        const float vmax = std::max({std::fabs(lo), std::fabs(hi), 1e-6f});
        pr.numbers["patches.vmax"] = vmax;
        if (equal == N)
            ImGui::TextColored(ImVec4(0.5f, 0.9f, 0.5f, 1), "All %d rows are their tiles unfolded (the tile read back from each row is the image's tile).", N);
        else {
            char b[320];
            std::snprintf(b, sizeof b, "%s%d of %d rows are their tile (framed red: the others hold other pixels)%s.",
                          bug ? "BUG on (reshape patches): only " : "Only ", equal, N,
                          bug ? ": a plain reshape takes each run of C*P*P values of the (C, H, W) array, i.e. whole pixel rows" : "");
            ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1, 0.4f, 0.4f, 1));
            ImGui::PushTextWrapPos(0);
            ImGui::TextWrapped("%s", b);
            ImGui::PopTextWrapPos();
            ImGui::PopStyleColor();
            pr.strings["patches.mismatch"] = b;
        }
        ImVec2 avail = ImGui::GetContentRegionAvail();
        ImDrawList* dl = ImGui::GetWindowDrawList();
        // ---- the grid, with gaps
        // the tiles at the input's aspect, in a box at most 45% of the width wide and as tall as the view
        const float side = std::max(96.f, std::min(avail.x * 0.45f, avail.y - 8));
        const float gap = std::max(2.f, side * 0.012f);
        const float box_h = std::max(96.f, avail.y - 8);
        const float tile = std::max(1.f, std::min((side - gap * float(gw - 1)) / float(gw), (box_h - gap * float(gh - 1)) / float(gh)));
        const float grid_w = tile * float(gw) + gap * float(gw - 1), grid_h = tile * float(gh) + gap * float(gh - 1);
        ImGui::BeginGroup();
        ImVec2 g0 = ImGui::GetCursorScreenPos();
        ImGui::InvisibleButton("patchgrid", ImVec2(std::max(grid_w, side), grid_h));
        const bool hovered = v.hover && ImGui::IsItemHovered(), clicked = v.hover && ImGui::IsItemClicked(ImGuiMouseButton_Left);
        const Rect gclip{g0.x, g0.y, grid_w, grid_h};
        pr.rects["patches.grid"] = gclip;
        pr.numbers["patches.tile"] = tile;
        pr.numbers["patches.gap"] = gap;
        pr.numbers["patches.grid_n"] = gw;
        pr.numbers["patches.grid_rows"] = gh;
        const float th = ImGui::GetTextLineHeight();
        const float numw = ImGui::CalcTextSize(std::to_string(N - 1).c_str()).x;
        const bool all_numbers = numw + 2 <= tile && th <= tile;
        for (int n = 0; n < N; ++n) {
            const int gy = n / gw, gx = n % gw;
            ImVec2 a(g0.x + gx * (tile + gap), g0.y + gy * (tile + gap)), b(a.x + tile, a.y + tile);
            dl->AddImage(image_.id(), a, b, ImVec2(float(gx * P) / Iw, float(gy * P) / Ih),
                         ImVec2(float(gx * P + P) / Iw, float(gy * P + P) / Ih));
            if (all_numbers || gx == 0) {
                std::string lbl = std::to_string(n);
                ImVec2 sz = ImGui::CalcTextSize(lbl.c_str());
                if (sz.x + 2 <= tile + gap && sz.y <= tile) {
                    dl->AddRectFilled(ImVec2(a.x, a.y), ImVec2(a.x + sz.x + 2, a.y + sz.y), IM_COL32(0, 0, 0, 150));
                    DrawLabel(dl, pr, "patches.grid", ImVec2(a.x + 1, a.y), IM_COL32(255, 220, 90, 255), lbl, gclip);
                }
            }
        }
        const int sel = ui.patch >= 0 && ui.patch < N ? ui.patch : -1;
        if (sel >= 0) {
            ImVec2 a(g0.x + (sel % gw) * (tile + gap), g0.y + (sel / gw) * (tile + gap));
            dl->AddRect(ImVec2(a.x - 1, a.y - 1), ImVec2(a.x + tile + 1, a.y + tile + 1), IM_COL32(0, 230, 255, 255), 0, 0, 2);
        }
        if (hovered || clicked) {
            ImVec2 mp = ImGui::GetIO().MousePos;
            int gx = std::clamp(int((mp.x - g0.x) / (tile + gap)), 0, gw - 1), gy = std::clamp(int((mp.y - g0.y) / (tile + gap)), 0, gh - 1);
            if (hovered) ImGui::SetTooltip("patch %d (row %d, col %d): pixels [%d:%d, %d:%d] of the input; row %d of patches",
                                           gy * gw + gx, gy, gx, gy * P, gy * P + P, gx * P, gx * P + P, gy * gw + gx);
            if (clicked) ui.patch = gy * gw + gx;
        }
        if (!all_numbers) ImGui::TextDisabled("tiles too small to number: the first column is numbered; hover a tile");
        ImGui::EndGroup();
        ImGui::SameLine();
        ImGui::BeginGroup();
        // ---- the sequence: tile n (read back from row n) beside row n as a strip
        ImDrawList* hdl = ImGui::GetWindowDrawList();
        const float rh = std::clamp(tile, 22.f, 40.f);
        const float stripx = rh + 8 + numw + 10;
        const float sw = std::max(60.f, ImGui::GetContentRegionAvail().x - stripx - 12 - ImGui::GetStyle().ScrollbarSize);
        {
            ImVec2 h0 = ImGui::GetCursorScreenPos();
            std::string cap = "tile n, from row n | n | row n: " + std::to_string(CPP) + " values" +
                              (C == 3 ? ", in their channel's colour" : ", as the pixels they are");
            (void)h0;
            ImGui::PushTextWrapPos(0);
            ImGui::TextWrapped("%s", cap.c_str());
            ImGui::PopTextWrapPos();
            if (C == 3) {  // the channel blocks of a row
                ImVec2 h1 = ImGui::GetCursorScreenPos();
                const char* nm[] = {"R: entries 0..", "G: entries ", "B: entries "};
                for (int ch = 0; ch < 3; ++ch) {
                    std::string lbl = std::string(nm[ch]) + (ch ? std::to_string(ch * P * P) + ".." : "") + std::to_string((ch + 1) * P * P - 1);
                    if (ImGui::CalcTextSize(lbl.c_str()).x > sw / 3.f - 8) lbl = std::string(1, "RGB"[ch]);
                    DrawLabel(hdl, pr, "patches.channels", ImVec2(h1.x + stripx + sw * ch / 3.f + 3, h1.y),
                              ImGui::GetColorU32(ImGuiCol_Text), lbl, Rect{h1.x, h1.y, stripx + sw + 4, th});
                }
                ImGui::Dummy(ImVec2(10, th));
            }
        }
        draw_sequence(v, g, rh, stripx, sw, sel, first_wrong);
        ImGui::EndGroup();
        // the numbers behind the view: the patches matrix and the model input they were cut from
        numbers_.push_back({stage_name(pa_id), *pa});
        numbers_.push_back({stage_name(in_id), *in});
        numbers_.push_back({"input_image", input_});
    }

    // The sequence: tile n (read back from row n) beside row n as a strip, a row per patch, scrolled to the selected
    // patch (or, with none, to the first row that is not its tile).
    void draw_sequence(ViewCtx& v, const PatchGeom& g, float rh, float stripx, float sw, int sel, int first_wrong) {
        const Session& s = v.s;
        Probe& pr = v.probe;
        const int C = g.C, P = g.P, Ih = g.Ih, Iw = g.Iw, gw = g.gw, N = g.N, CPP = g.CPP;
        const float* rows = g.rows;
        const float th = ImGui::GetTextLineHeight();
        ImGui::BeginChild("patchseq", ImVec2(0, 0), false);
        // a newly selected patch scrolls its row into view
        if (keys_.stale("patches.scroll", uint64_t(int64_t(sel) + 1)) && sel >= 0)
            ImGui::SetScrollY(float(sel) * (rh + ImGui::GetStyle().ItemSpacing.y));
        // a new trace (or the selection cleared) with rows that are not their tiles and no patch selected: open on the first of them
        if (keys_.stale("patches.first_wrong", s.version() * 1000003ull + uint64_t(int64_t(sel) + 1)) && sel < 0 && first_wrong >= 0)
            ImGui::SetScrollY(float(std::max(0, first_wrong - 1)) * (rh + ImGui::GetStyle().ItemSpacing.y));
        ImGuiListClipper clip;
        clip.Begin(N, rh + ImGui::GetStyle().ItemSpacing.y);
        const Rect cclip{ImGui::GetWindowPos().x, ImGui::GetWindowPos().y, ImGui::GetWindowSize().x, ImGui::GetWindowSize().y};
        int first_shown = -1, last_shown = -1;
        while (clip.Step())
            for (int n = clip.DisplayStart; n < clip.DisplayEnd; ++n) {
                if (first_shown < 0) first_shown = n;
                // the last row wholly in view
                if (ImGui::GetCursorScreenPos().y + rh <= cclip.y + cclip.h + 0.5f) last_shown = n;
                ImVec2 p = ImGui::GetCursorScreenPos();
                ImGui::Dummy(ImVec2(stripx + sw, rh));
                const int gy = n / gw, gx = n % gw;
                ImDrawList* cdl = ImGui::GetWindowDrawList();
                cdl->AddImage(rows_img_.id(), p, ImVec2(p.x + rh, p.y + rh), ImVec2(float(gx * P) / Iw, float(gy * P) / Ih),
                              ImVec2(float(gx * P + P) / Iw, float(gy * P + P) / Ih));
                const bool same_tile = g.row_is_tile(n);
                if (!same_tile) cdl->AddRect(p, ImVec2(p.x + rh, p.y + rh), IM_COL32(255, 70, 70, 255), 0, 0, 2);
                if (n == sel) cdl->AddRect(ImVec2(p.x - 1, p.y - 1), ImVec2(p.x + rh + 1, p.y + rh + 1), IM_COL32(0, 230, 255, 255), 0, 0, 2);
                std::string lbl = std::to_string(n);
                const ImVec2 lp(p.x + rh + 6, p.y + (rh - th) / 2);
                if (lp.y >= cclip.y && lp.y + th <= cclip.y + cclip.h)  // a row cut by the scroll edge: drawn, not recorded
                    DrawLabel(cdl, pr, "patches.seq", lp, ImGui::GetColorU32(ImGuiCol_Text), lbl, cclip);
                else
                    cdl->AddText(lp, ImGui::GetColorU32(ImGuiCol_Text), lbl.c_str());
                ImVec2 s0(p.x + stripx, p.y), s1(p.x + stripx + sw, p.y + rh);
                cdl->AddImage(rows_tex_.id(), s0, s1, ImVec2(0, float(n) / N), ImVec2(1, float(n + 1) / N));
                // channel boundaries (RGB), and each pixel row of the tile when there is room to see them
                if (sw / float(C * P) >= 12)
                    for (int k = 1; k < C * P; ++k)
                        cdl->AddLine(ImVec2(s0.x + sw * k / float(C * P), s0.y), ImVec2(s0.x + sw * k / float(C * P), s1.y),
                                     IM_COL32(70, 110, 200, 200));
                for (int ch = 1; ch < C; ++ch)
                    cdl->AddLine(ImVec2(s0.x + sw * ch / float(C), s0.y - 1), ImVec2(s0.x + sw * ch / float(C), s1.y + 1),
                                 IM_COL32(255, 255, 255, 255), 2);
                if (v.hover && ImGui::IsMouseHoveringRect(s0, s1)) {
                    const int k = std::clamp(int((ImGui::GetIO().MousePos.x - s0.x) / sw * CPP), 0, CPP - 1);
                    const int ch = k / (P * P), yy = k % (P * P) / P, xx = k % P;
                    ImGui::SetTooltip("row %d, entry %d = channel %d, pixel (%d, %d) of the tile: %.6g (normalized input)%s", n, k, ch,
                                      yy, xx, double(rows[size_t(n) * CPP + k]),
                                      same_tile ? "" : "\nthis row is not its tile: it holds other pixels of the input");
                }
                pr.rects["patches.seq.tile." + std::to_string(n)] = Rect{p.x, p.y, rh, rh};
                pr.rects["patches.seq.strip." + std::to_string(n)] = Rect{s0.x, s0.y, sw, rh};
            }
        pr.numbers["patches.first_shown"] = first_shown;
        pr.numbers["patches.last_shown"] = last_shown;
        ImGui::EndChild();
    }

    void sweep_states(SweepPlan& plan) override {
        for (int p : {-1, 0, plan.N - 1})
            plan.add("patches, patch " + std::to_string(p), [p](Session&, UiState& ui) {
                ui.tab = Tab::Patches;
                ui.patch = p;
            });
        const int N = plan.N;
        const Options base = plan.base;
        plan.add("patches, BUG reshape", [N, base](Session& s, UiState& ui) {
            Options o = base;
            o.bug_reshape_patches = true;
            s.set_options(o);
            ui.tab = Tab::Patches;
            ui.patch = N / 2;
        });
        plan.add("patches, BUG reshape, no patch selected", [N, base](Session& s, UiState& ui) {
            Options o = base;
            o.bug_reshape_patches = true;
            s.set_options(o);
            ui.tab = Tab::Patches;
            ui.patch = -1;
        });
        plan.add("patches, options reset", [base](Session& s, UiState&) { s.set_options(base); });
    }
    // Tiles or the reason there are none; without the reshape bug every row is its tile.
    void sweep_check(const Session& s, const UiState& ui, const Probe& p, const SweepFail& fail) const override {
        if (!s.trace()) return;
        if (!p.rects.count("patches.grid")) {
            if (p.string("patches.message").empty()) fail("the patches tab drew no tiles and gave no reason");
            return;
        }
        const int N = s.trace()->table().dims().N;
        if (!s.shown_options().bug_reshape_patches && p.number("patches.rows_equal_tiles") != N)
            fail("without the reshape bug, only " + std::to_string(int(p.number("patches.rows_equal_tiles"))) + " of " +
                 std::to_string(N) + " patches rows are their tiles");
        // with rows that are not their tiles and no patch selected, one of them is in view (issue 36 item 11)
        const int wrong = int(p.number("patches.first_wrong", -1)), lo = int(p.number("patches.first_shown", -1)),
                  hi = int(p.number("patches.last_shown", -1));
        if (wrong >= 0 && ui.patch < 0 && !(lo <= wrong && wrong <= hi))
            fail("the patches list shows rows " + std::to_string(lo) + ".." + std::to_string(hi) + ", none visibly off its tile; the first "
                 "row that is (the bug's) is " + std::to_string(wrong));
    }

private:
    CacheKeys keys_;
    Texture image_, rows_img_, rows_tex_;  // the input; the same layout rebuilt from the rows; the rows as strips
    Array input_;                          // the trace's input (C, H, W), denormalized to 0..1
};

}  // namespace

std::unique_ptr<TabView> make_patches_tab(JobQueue&) { return std::make_unique<PatchesTab>(); }

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_patches() {
    using K = ProbeKind;
    return {
        {K::Rect, "patches.grid", "the tiles"},
        {K::Rect, "patches.seq.{tile|strip}.<n>", "row n of the sequence"},
        {K::Number, "patches.{rows_equal_tiles|vmax|tile|gap|grid_n|grid_rows|first_shown|last_shown|first_wrong}", "the Patches tab's numbers (rows in view; the first row that visibly is not its tile, -1: none)"},
        {K::String, "patches.{message|mismatch}", "the Patches tab's texts"},
        {K::Group, "patches.{grid|seq|channels}", "tile and row numbers"},
    };
}

}  // namespace vit::app
