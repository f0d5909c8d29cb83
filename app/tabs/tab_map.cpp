// The Map tab (issue 10 item 7): the map of the loaded model; and, generated from the same map, the
// strip of boxes above the Stage tab. Both are
// generated from stage_table(config, options) for the model and options that produced the trace on
// screen, and the shapes on the arrows are the trace's tensors' shapes (the table's, said so, when
// there is no trace). Nothing here names a shape or a layer count.
#include "app/probe.h"
#include "app/model_map.h"

#include <GLFW/glfw3.h>
#include <imgui.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "app/tabs/tab.h"
#include "app/tensor_access.h"

namespace vit::app {

namespace {

const ImU32 kBoxFill = IM_COL32(40, 52, 70, 255), kBoxBorder = IM_COL32(110, 130, 160, 255);
const ImU32 kCurFill = IM_COL32(235, 175, 50, 255);  // the current stage's box (tests look for this colour)
const ImU32 kBugFill = IM_COL32(150, 30, 30, 255), kBugBorder = IM_COL32(255, 80, 80, 255);
const ImU32 kText = IM_COL32(232, 232, 232, 255), kSub = IM_COL32(165, 175, 190, 255), kDark = IM_COL32(20, 20, 20, 255);
const ImU32 kArrow = IM_COL32(170, 180, 195, 255), kShape = IM_COL32(140, 215, 255, 255);

// The options that produced what is on screen: the trace's, else the requested ones (no trace).
const Options& shown_options(const Session& s) { return s.shown_options(); }


// The recorded array's shape. A row that an on-demand pass did not keep is recorded, when its block is
// computed, through the same table with the row's shape: its block is not recomputed to draw the map.
std::string shape_of_stage(const Session& s, const StageInfo& st) {
    if (const Trace* t = s.trace()) {
        const int r = t->index(st.id);
        if (r >= 0 && t->on_demand() && !t->kept(size_t(r))) return shape_str(t->info(size_t(r)).shape);
        if (const Array* a = t->find(st.id)) return shape_text(*a);
    }
    return shape_str(st.shape);
}

// The table of what is on screen: the trace's own, else the one the model and options would record
// (null when the options do not fit the model: the map says why).
std::shared_ptr<const StageTable> shown_table(const Session& s, std::string* why) {
    if (const Trace* t = s.trace()) return t->table_ptr();
    try {
        return StageTable::get(s.shown_config(), s.shown_options());
    } catch (const std::exception& e) {
        if (why) *why = e.what();
        return nullptr;
    }
}

float text_w(const std::string& s, float size) {
    return ImGui::GetFont()->CalcTextSizeA(size, FLT_MAX, 0, s.c_str()).x;
}

// A label drawn and recorded (probe.h DrawnText), at a given font size.
void label(ImDrawList* dl, Probe& pr, const std::string& group, ImVec2 pos, ImU32 col, const std::string& text,
           float size, const Rect& clip) {
    ImVec2 sz = ImGui::GetFont()->CalcTextSizeA(size, FLT_MAX, 0, text.c_str());
    dl->AddText(ImGui::GetFont(), size, pos, col, text.c_str());
    pr.text(group, text, Rect{pos.x, pos.y, sz.x, sz.y}, clip);
}

void arrow_head(ImDrawList* dl, ImVec2 tip, ImVec2 dir, ImU32 col, float s = 6) {
    ImVec2 n(-dir.y, dir.x);
    dl->AddTriangleFilled(tip, ImVec2(tip.x - dir.x * s + n.x * s * 0.6f, tip.y - dir.y * s + n.y * s * 0.6f),
                          ImVec2(tip.x - dir.x * s - n.x * s * 0.6f, tip.y - dir.y * s - n.y * s * 0.6f), col);
}

int current_box(const ModelMap& m, const std::optional<ShownStage>& e) {
    if (!e) return -1;
    for (size_t i = 0; i < m.boxes.size(); ++i)
        for (StageId id : m.boxes[i].ids)
            if (id == e->info->id) return int(i);
    return -1;
}

// Goes to a box's first stage (in the layer the map shows).
void go_to_box(const Session& s, UiState& ui, const MapBox& b) {
    const Trace* t = s.trace();
    if (!t || b.ids.empty()) return;
    select_stage(ui, *t, b.ids.front());
}

// The layer the map shows: the current stage's when it is in a block, else the last one chosen.
int map_layer(const Session& s, UiState& ui) {
    const int L = s.shown_config().depth;
    if (const auto e = shown_stage(s, ui); e && e->info->layer >= 0) ui.map_layer = e->info->layer;
    ui.map_layer = std::clamp(ui.map_layer, 0, std::max(0, L - 1));
    return ui.map_layer;
}

std::string missing_reason(const Session& s) {
    if (s.trace()) return "";
    if (!s.has_image()) return "No image is loaded, so the model has not run: the shapes are the config's (stage table); "
                               "there is no current stage to highlight.";
    if (s.busy() || s.loading()) return "The model is running: the shapes are the config's (stage table) until it is done.";
    return "No trace yet: the shapes are the config's (stage table).";
}

// A horizontal strip of the boxes (names only), the current one highlighted; clicking goes there.
void draw_strip(ViewCtx& v, const ModelMap& m, int cur, float width, const std::string& group) {
    Session& s = v.s;
    UiState& ui = v.ui;
    Probe& pr = v.probe;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float pad = 5, gap = 9;
    float text = 0;  // the labels' width at 15 px; padding and arrows do not scale with the font
    for (auto& b : m.boxes) text += text_w(b.label, 15);
    const float fixed = float(m.boxes.size()) * (2 * pad + gap);
    const float size = std::clamp(15.f * (width - 2 - fixed) / std::max(text, 1.f), 8.f, 15.f);
    const float h = size + 8;
    ImVec2 o = ImGui::GetCursorScreenPos();
    ImGui::Dummy(ImVec2(width, h + 4));
    pr.numbers[group + ".dropped"] = 0;
    const Rect clip{o.x, o.y, width, h + 4};
    float x = o.x;
    const int L = m.depth;
    for (size_t i = 0; i < m.boxes.size(); ++i) {
        const MapBox& b = m.boxes[i];
        const float w = text_w(b.label, size) + 2 * pad;
        if (x + w > o.x + width + 0.5f) {  // never drawn outside the panel: the rest is said to be missing
            pr.numbers[group + ".dropped"] = double(m.boxes.size() - i);
            const std::string more = "+" + std::to_string(m.boxes.size() - i);
            if (x + text_w(more, size) <= o.x + width) label(dl, pr, group, ImVec2(x, o.y + 6), kSub, more, size, clip);
            break;
        }
        ImVec2 p0(x, o.y + 2), p1(x + w, o.y + 2 + h);
        const bool is_cur = int(i) == cur;
        ImU32 fill = is_cur ? kCurFill : b.bug ? kBugFill : b.row == 1 ? IM_COL32(48, 62, 48, 255) : kBoxFill;
        dl->AddRectFilled(p0, p1, fill, 3);
        dl->AddRect(p0, p1, b.bug ? kBugBorder : kBoxBorder, 3, 0, b.bug ? 2.f : 1.f);
        label(dl, pr, group, ImVec2(x + pad, o.y + 6), is_cur ? kDark : kText, b.label, size, clip);
        pr.rects[group + "." + b.id] = Rect{p0.x, p0.y, w, h};
        ImGui::SetCursorScreenPos(p0);
        ImGui::PushID(int(i) + 5000);
        if (ImGui::InvisibleButton("sb", ImVec2(w, h))) go_to_box(s, ui, b);
        if (v.hover && ImGui::IsItemHovered())
            ImGui::SetTooltip("%s%s: %s", b.label.c_str(), b.layer >= 0 ? (" (block " + std::to_string(b.layer) + " of " + std::to_string(L) + ")").c_str() : "",
                              b.stages.front().c_str());
        ImGui::PopID();
        x += w;
        if (i + 1 < m.boxes.size()) {
            dl->AddLine(ImVec2(x + 1, o.y + 2 + h / 2), ImVec2(x + gap - 2, o.y + 2 + h / 2), kArrow, 1.5f);
            arrow_head(dl, ImVec2(x + gap - 1, o.y + 2 + h / 2), ImVec2(1, 0), kArrow, 4);
        }
        x += gap;
    }
    // which block the green boxes are, when there is room
    if (L > 0) {
        const std::string bl = "block " + std::to_string(m.layer) + " of " + std::to_string(L);
        const float bw = text_w(bl, size);
        if (x + 4 + bw <= o.x + width) label(dl, pr, group, ImVec2(x + 4, o.y + 6), IM_COL32(150, 230, 150, 255), bl, size, clip);
    }
    ImGui::SetCursorScreenPos(ImVec2(o.x, o.y + h + 6));
}

}  // namespace

ModelMap build_model_map(const Session& s, int layer) {
    ModelMap m;
    const Config& c = s.shown_config();
    m.depth = c.depth;
    m.layer = std::clamp(layer, 0, std::max(0, c.depth - 1));
    m.from_trace = s.trace() != nullptr;
    m.missing = missing_reason(s);
    std::string why;
    const auto table = shown_table(s, &why);
    if (!table) {
        m.missing = "No map: " + why;
        return m;
    }
    // the boxes are the table's: each stage names its box (core/model/stages.cpp)
    for (const StageInfo& st : *table) {
        if (st.layer >= 0 && st.layer != m.layer) continue;
        if (m.boxes.empty() || m.boxes.back().id != st.box.id) {
            MapBox b;
            b.id = st.box.id; b.label = st.box.label; b.row = st.box.row; b.layer = st.layer;
            b.sub = st.box.sub; b.bug = st.box.bug;
            m.boxes.push_back(std::move(b));
        }
        MapBox& b = m.boxes.back();
        b.ids.push_back(st.id);
        b.stages.push_back(st.name);
        b.out_id = st.id;
        b.out_stage = st.name;
        b.out_shape = shape_of_stage(s, st);
    }
    return m;
}

namespace {

void draw_model_map(ViewCtx& v) {
    Session& s = v.s;
    UiState& ui = v.ui;
    Probe& pr = v.probe;
    const Config& c = s.shown_config();
    const Options& o = shown_options(s);
    const int layer = map_layer(s, ui);
    ModelMap m = build_model_map(s, layer);
    const auto e = shown_stage(s, ui);
    const int cur = current_box(m, e);
    const int L = m.depth;
    ImGui::PushTextWrapPos(0);
    ImGui::TextDisabled("The model as it ran, shapes on the arrows (%s). Click a box to go to its stage.",
                        m.from_trace ? "the trace's" : "the config's: no trace");
    if (!m.missing.empty()) {
        ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s", m.missing.c_str());
        pr.strings["map.message"] = m.missing;
    }
    ImGui::PopTextWrapPos();

    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const float th = ImGui::GetTextLineHeight();
    const size_t n = m.boxes.size();
    // the column: as wide as its widest box text (label + subtitle) and shape label, at most half the view
    float need = 0, shape_need = 0;
    for (auto& b : m.boxes) {
        need = std::max(need, text_w(b.label, 15) + 10 + text_w(b.sub, 13) + 20);
        shape_need = std::max(shape_need, text_w(b.out_shape, 15));
    }
    const bool has_block = L > 0;
    const float skip_w = has_block ? 22.f : 6.f;       // room on the left for the residual lines
    const float loop_w = has_block ? 56.f : 10.f;      // room on the right for the "x L" loop
    float col_w = std::max({need, 2 * shape_need + 24, 120.f});
    col_w = std::min(col_w, std::max(120.f, avail.x * 0.55f - skip_w - loop_w));
    const float pads = has_block ? 2 * (th + 8) : 0;   // the block frame's header and bottom
    // an arrow (its shape label beside it) and a box per step, as tall as the view allows
    const float gap = std::clamp((avail.y - 8 - pads) / float(std::max<size_t>(n, 1)) * 0.45f, th + 1, th + 6);
    float box_h = (avail.y - 8 - pads - float(n) * gap) / float(std::max<size_t>(n, 1));
    box_h = std::clamp(box_h, th + 2, 40.f);
    const float x0 = origin.x + skip_w, cx = x0 + col_w / 2;
    const float total_h = float(n) * (box_h + gap) + pads;
    ImGui::Dummy(ImVec2(skip_w + col_w + loop_w, total_h + 4));
    pr.rects["map"] = Rect{origin.x, origin.y, skip_w + col_w + loop_w, total_h + 4};
    // labels must stay inside the column and the window's width (the sweep checks both); a map taller
    // than the view scrolls (the centre panel's scroll bar), so its height is the map's own
    const ImVec2 wc = dl->GetClipRectMax();
    const Rect clip{origin.x, origin.y, std::min(skip_w + col_w + loop_w, wc.x - origin.x), total_h + 4};
    float y = origin.y;
    float block_top = 0, block_bottom = 0, ln1_entry = 0, resid_in_y = 0;
    std::string order;
    for (size_t i = 0; i < n; ++i) {
        const MapBox& b = m.boxes[i];
        const bool first_in_block = b.row == 1 && (i == 0 || m.boxes[i - 1].row != 1);
        const bool last_in_block = b.row == 1 && (i + 1 == n || m.boxes[i + 1].row != 1);
        if (first_in_block) {
            block_top = y;
            label(dl, pr, "map.block", ImVec2(cx + 8, y + 3), kSub,
                  "block " + std::to_string(m.layer) + " of 0.." + std::to_string(L - 1), 13, clip);
            y += th + 8;
            ln1_entry = y - 4;  // below the header: where the block's input (and the loop back) enters
        }
        ImVec2 p0(x0, y), p1(x0 + col_w, y + box_h);
        const bool is_cur = int(i) == cur;
        dl->AddRectFilled(p0, p1, is_cur ? kCurFill : b.bug ? kBugFill : kBoxFill, 4);
        dl->AddRect(p0, p1, b.bug ? kBugBorder : is_cur ? IM_COL32(255, 230, 150, 255) : kBoxBorder, 4, 0,
                    b.bug || is_cur ? 2.5f : 1.f);
        const float lw = text_w(b.label, 15);
        label(dl, pr, "map.boxes", ImVec2(x0 + 8, y + box_h / 2 - th / 2), is_cur ? kDark : kText, b.label, 15, clip);
        if (!b.sub.empty() && 8 + lw + 10 + text_w(b.sub, 13) + 6 <= col_w)
            label(dl, pr, "map.boxes", ImVec2(x0 + 8 + lw + 10, y + box_h / 2 - 13.f / 2 - 1),
                  is_cur ? IM_COL32(60, 40, 0, 255) : b.bug ? IM_COL32(255, 200, 200, 255) : kSub, b.sub, 13, clip);
        pr.rects["map.box." + b.id] = Rect{p0.x, p0.y, col_w, box_h};
        pr.strings["map.box." + b.id + ".stages"] = [&] {
            std::string v;
            for (auto& st : b.stages) v += (v.empty() ? "" : ",") + st;
            return v;
        }();
        order += (order.empty() ? "" : ",") + b.id;
        ImGui::SetCursorScreenPos(p0);
        ImGui::PushID(int(i));
        if (ImGui::InvisibleButton("box", ImVec2(col_w, box_h))) go_to_box(s, ui, b);
        if (v.hover && ImGui::IsItemHovered()) {
            ImGui::BeginTooltip();
            ImGui::Text("%s%s: click to go to %s", b.label.c_str(), b.sub.empty() ? "" : (" (" + b.sub + ")").c_str(), b.stages.front().c_str());
            for (auto& st : b.stages) ImGui::TextDisabled("%s", st.c_str());
            ImGui::EndTooltip();
        }
        ImGui::PopID();
        const bool resid_mid = b.out_id.kind == StageKind::ResidMid, resid_post = b.out_id.kind == StageKind::ResidPost;
        if (resid_mid || resid_post) {
            // the skip connection: from the block's (or the residual's) input, around the sub-layer, into this "+"
            const float sx = x0 - skip_w / 2 - 2, yin = resid_mid ? ln1_entry : resid_in_y, ym = y + box_h / 2;
            dl->AddLine(ImVec2(cx, yin), ImVec2(sx, yin), IM_COL32(120, 200, 120, 255), 1.5f);
            dl->AddLine(ImVec2(sx, yin), ImVec2(sx, ym), IM_COL32(120, 200, 120, 255), 1.5f);
            dl->AddLine(ImVec2(sx, ym), ImVec2(x0 - 1, ym), IM_COL32(120, 200, 120, 255), 1.5f);
            arrow_head(dl, ImVec2(x0, ym), ImVec2(1, 0), IM_COL32(120, 200, 120, 255), 5);
        }
        y += box_h;
        // the arrow leaving the box, with the shape of what it carries
        const float a0 = y, a1 = y + gap;
        if (resid_mid) resid_in_y = (a0 + a1) / 2;
        float end = a1 - 1;
        if (last_in_block) end = a1 + th + 8 - 1;  // through the frame's bottom
        dl->AddLine(ImVec2(cx, a0 + 1), ImVec2(cx, end - 2), kArrow, 1.5f);
        if (i + 1 < n || true) arrow_head(dl, ImVec2(cx, end), ImVec2(0, 1), kArrow, 6);
        const ImVec2 lp(cx + 8, (a0 + a1) / 2 - th / 2);
        label(dl, pr, "map.shapes", lp, kShape, b.out_shape, 15, clip);
        pr.strings["map.shape." + b.out_stage] = b.out_shape;
        pr.rects["map.shape." + b.out_stage] = Rect{lp.x, lp.y, text_w(b.out_shape, 15), th};
        y = a1;
        if (last_in_block) {
            y += th + 8;
            block_bottom = a1 + 2;
            // the frame of the block, and the loop back: this block runs L times
            const float fx0 = x0 - skip_w + 1, fx1 = x0 + col_w + loop_w - 2;
            dl->AddRect(ImVec2(fx0, block_top), ImVec2(fx1, block_bottom), IM_COL32(120, 200, 120, 200), 6, 0, 1.5f);
            const float lx = x0 + col_w + 14, ly0 = p1.y - box_h / 2;
            dl->AddLine(ImVec2(x0 + col_w + 1, ly0), ImVec2(lx, ly0), IM_COL32(120, 200, 120, 255), 1.5f);
            dl->AddLine(ImVec2(lx, ly0), ImVec2(lx, ln1_entry), IM_COL32(120, 200, 120, 255), 1.5f);
            dl->AddLine(ImVec2(lx, ln1_entry), ImVec2(cx + 2, ln1_entry), IM_COL32(120, 200, 120, 255), 1.5f);
            arrow_head(dl, ImVec2(cx + 1, ln1_entry), ImVec2(-1, 0), IM_COL32(120, 200, 120, 255), 5);
            const std::string xl = "x " + std::to_string(L);
            label(dl, pr, "map.block", ImVec2(lx + 4, (ly0 + ln1_entry) / 2 - th / 2), IM_COL32(150, 230, 150, 255), xl, 15, clip);
            pr.strings["map.repeat"] = xl;
        }
    }
    pr.strings["map.order"] = order;
    pr.numbers["map.layer"] = m.layer;
    pr.numbers["map.depth"] = L;
    pr.numbers["map.from_trace"] = m.from_trace;
    pr.numbers["map.current"] = cur;
    if (cur >= 0) pr.strings["map.current"] = m.boxes[size_t(cur)].id;

    // beside the map: where you are, the stages of the current box, the layer, the options, the tour
    ImGui::SetCursorScreenPos(ImVec2(origin.x + skip_w + col_w + loop_w + 16, origin.y));
    ImGui::BeginChild("mapside", ImVec2(0, std::max(60.f, avail.y)), false);
    const Trace* t = s.trace();
    if (e && cur >= 0) {
        const StageInfo& info = *e->info;
        ImGui::TextColored(ImVec4(1, 0.84f, 0.47f, 1), "%s", info.title.c_str());
        ImGui::TextDisabled("%s  %s", info.name.c_str(), shape_text(*e->value).c_str());
        ImGui::PushTextWrapPos(0);
        ImGui::TextUnformatted(info.what.c_str());
        ImGui::PopTextWrapPos();
        ImGui::Separator();
        const MapBox& b = m.boxes[size_t(cur)];
        ImGui::TextDisabled("stages of %s%s (click one):", b.label.c_str(),
                            b.layer >= 0 ? (" in block " + std::to_string(b.layer)).c_str() : "");
        for (size_t k = 0; k < b.ids.size(); ++k) {
            const Array* a = t ? t->find(b.ids[k]) : nullptr;
            std::string txt = b.stages[k] + "  " + (a ? shape_text(*a) : std::string());
            if (ImGui::Selectable(txt.c_str(), b.ids[k] == e->info->id) && a) select_stage(ui, *t, b.ids[k]);
        }
    } else if (t) {
        ImGui::TextDisabled("The current stage is not on the map.");
    }
    if (L > 0) {
        ImGui::Separator();
        int l = m.layer;
        ImGui::SetNextItemWidth(std::min(260.f, ImGui::GetContentRegionAvail().x));
        if (ImGui::SliderInt("##block", &l, 0, L - 1, "block layer %d (PageUp/PageDown)")) {
            ui.map_layer = l;
            if (e && e->info->layer >= 0 && t) select_stage(ui, *t, StageId{e->info->id.kind, l});
        }
    }
    ImGui::Separator();
    ImGui::PushTextWrapPos(0);
    ImGui::TextDisabled("model: %s", c.describe().c_str());
    ImGui::TextDisabled("options in force: %s", o.describe().c_str());
    if (const Trace* tr = s.trace()) {  // the run's own sizes (another input size than the model's included)
        const RunDims& rd = tr->table().dims();
        const std::string run = "this run: " + std::to_string(rd.img_h) + "x" + std::to_string(rd.img_w) + " input, " +
                                std::to_string(rd.gh) + "x" + std::to_string(rd.gw) + " = " + std::to_string(rd.N) +
                                " patches, " + std::to_string(rd.T) + " tokens (" + token_range_text(tr->table()) + ")";
        ImGui::TextDisabled("%s", run.c_str());
        pr.strings["map.run"] = run;
    }
    if (o.bug_reshape_patches) ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "BUG on: patches are a plain reshape, not P x P tiles (R)");
    if (o.bug_scale_after_softmax) ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "BUG on: attention scaled after the softmax (B)");
    ImGui::PopTextWrapPos();
    pr.strings["map.options"] = o.describe();
    ImGui::Spacing();
    if (ImGui::Button("The lessons: predict, then check (T)")) {  // the tour, in Learn mode (lessons.h)
        ui.learn = true;
        ui.lesson = std::max(ui.lesson, 0);
        ui.lesson_go = true;
    }
    ImGui::EndChild();
}

class MapTab : public TabView {
public:
    void draw(ViewCtx& v) override { draw_model_map(v); }
    void sweep_states(SweepPlan& plan) override {
        for (int i : {0, plan.T / 2, plan.T - 1})
            plan.add("map, stage#" + std::to_string(i), [i](Session& s, UiState& ui) {
                ui.tab = Tab::Map;
                if (s.trace()) select_row(ui, *s.trace(), size_t(std::max(0, i)));
            });
    }
    // Every box's shape is its stage's tensor's in the trace, the current stage's box is highlighted.
    void sweep_check(const Session& s, const UiState&, const Probe& p, const SweepFail& fail) const override {
        const Trace* t = s.trace();
        if (!t) return;
        if (!p.rects.count("map")) fail("the map tab drew no map");
        if (p.number("map.current", -1) < 0) fail("the map highlights no box for the current stage");
        ModelMap m = build_model_map(s, int(p.number("map.layer")));
        for (const MapBox& b : m.boxes) {
            const Array* a = t->find(b.out_id);
            std::string want = a ? shape_text(*a) : "(not in the trace)";
            if (p.string("map.shape." + b.out_stage) != want)
                fail("map arrow after " + b.id + " says " + p.string("map.shape." + b.out_stage) + ", the trace's " +
                     b.out_stage + " is " + want);
            if (!p.rects.count("map.box." + b.id)) fail("map box " + b.id + " not drawn");
        }
        check_one_name(m, *t, fail);
    }
    // One name per thing (issue 36 item 6): a box labelled with a stage's name holds that stage (the strip's
    // "embed" box was the stage patch_embed, while the stage embed sat under "+pos").
    static void check_one_name(const ModelMap& m, const Trace& t, const SweepFail& fail) {
        for (const MapBox& b : m.boxes)
            for (size_t row = 0; row < t.size(); ++row) {
                const std::string& name = t.name(row);
                if (name != b.label) continue;
                if (std::find(b.stages.begin(), b.stages.end(), name) == b.stages.end())
                    fail("the map's box '" + b.label + "' is named after the stage " + name + ", which is in another box");
            }
    }
};

}  // namespace

std::unique_ptr<TabView> make_map_tab(JobQueue&) { return std::make_unique<MapTab>(); }

void DrawMapStrip(ViewCtx& v) {
    Session& s = v.s;
    UiState& ui = v.ui;
    Probe& pr = v.probe;
    ModelMap m = build_model_map(s, map_layer(s, ui));
    const int cur = current_box(m, shown_stage(s, ui));
    ImGui::PushID("mapstrip");
    draw_strip(v, m, cur, ImGui::GetContentRegionAvail().x, "strip");
    ImGui::PopID();
    pr.numbers["strip.current"] = cur;
}

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_map() {
    using K = ProbeKind;
    return {
        {K::Rect, "map", "the map"},
        {K::Rect, "map.box." + kProbeBoxes, "a box of the map"},
        {K::Rect, "map.shape.<stage>", "the shape on the arrow after a stage"},
        {K::Number, "map.{layer|depth|from_trace|current}", "the map's block layer and current box"},
        {K::String, "map.{message|order|repeat|current|options|run}", "the map's texts (run: the run's sizes and tokens)"},
        {K::String, "map.box." + kProbeBoxes + ".stages", "a box's stages"},
        {K::String, "map.shape.<stage>", "the shape on the arrow after a stage"},
        {K::Group, "map.{block|boxes|shapes}", "the map's labels"},
        {K::Rect, "strip." + kProbeBoxes, "a box of the map strip"},
        {K::Number, "strip.dropped", "boxes the strip left out"},
        {K::Number, "strip.current", "the current box on the strip"},
        {K::Group, "strip", "the strip's labels"},
    };
}

}  // namespace vit::app
