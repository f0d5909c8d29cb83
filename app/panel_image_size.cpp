// The image panel's input-size control (issue 20 item 2), moved out of panel_image.cpp (over 900 lines).
#include "probe.h"

#include <algorithm>
#include <string>

#include "core/model/pos_embed.h"
#include "panel_image_internal.h"
#include "views.h"

namespace vit::app {

// The input-size control (issue 20 item 2): the run's H x W in multiples of the patch, applied on
// Enter or a step button; a size the model cannot run is said in place and not applied. Below it,
// what happened to the position embeddings (learned grid, resized grid, the family's rule).
void draw_input_size(ViewCtx& v, ImagePanel& panel, const Trace& t) {
    Session& s = v.s;
    Probe& pr = v.probe;
    const Config& mc = s.config();  // the model loaded: its patch and native size (the request is for it)
    const Options& req = s.options();
    const int P = mc.patch;
    const int want_h = req.image_h > 0 ? req.image_h : mc.image_size, want_w = req.image_w > 0 ? req.image_w : mc.image_size;
    if (panel.size_for != s.model_spec()) {  // another model: what was typed for the last one is dropped
        panel.size_for = s.model_spec();
        panel.size_error.clear();
    }
    if (panel.size_error.empty()) {  // follows the request (the command line, Reset options) unless refused
        panel.size_h = want_h;
        panel.size_w = want_w;
    }
    // the two fields and "native" wrap onto another row when the panel is narrow
    Flow flow;
    const float field_w = 84.f;  // the value and its - + buttons (the row fits a 320-px panel)
    flow.next(Flow::text_w("size"));
    ImGui::AlignTextToFramePadding();
    ImGui::TextDisabled("size");
    if (v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("the input size the model runs at, H x W pixels (multiples of the patch, %d)", P);
    bool apply = false;
    flow.next(field_w);
    ImGui::SetNextItemWidth(field_w);
    if (ImGui::InputInt("##size_h", &panel.size_h, P, 4 * P, ImGuiInputTextFlags_EnterReturnsTrue)) apply = true;
    {
        ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
        pr.rects["image.size.h"] = Rect{a.x, a.y, b.x - a.x, b.y - a.y};
    }
    flow.next(Flow::text_w("x") + field_w + ImGui::GetStyle().ItemSpacing.x);
    ImGui::TextDisabled("x");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(field_w);
    if (ImGui::InputInt("##size_w", &panel.size_w, P, 4 * P, ImGuiInputTextFlags_EnterReturnsTrue)) apply = true;
    {
        ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
        pr.rects["image.size.w"] = Rect{a.x, a.y, b.x - a.x, b.y - a.y};
    }
    flow.next(Flow::button_w("native"));
    if (ImGui::SmallButton("native")) {
        panel.size_h = panel.size_w = mc.image_size;
        apply = true;
    }
    if (v.hover && ImGui::IsItemHovered())
        ImGui::SetTooltip("the model's own input size, %dx%d (--image-size on the command line)", mc.image_size, mc.image_size);
    if (apply) {
        Options o = req;
        o.image_h = panel.size_h == mc.image_size && panel.size_w == mc.image_size ? 0 : panel.size_h;
        o.image_w = o.image_h ? panel.size_w : 0;
        try {
            if (panel.size_h < 1 || panel.size_w < 1)  // 0 would mean "the model's own size" to Options: said, not run
                throw std::invalid_argument("input size " + std::to_string(panel.size_h) + "x" + std::to_string(panel.size_w) +
                                            " is outside " + std::to_string(P) + ".." + std::to_string(kMaxImageSize) + " per side");
            run_dims(mc, o);  // the model's own checks: multiples of the patch, the limits, the trace's size
            panel.size_error.clear();
            s.set_options(o);
        } catch (const std::exception& e) {
            panel.size_error = std::string("not applied: ") + e.what();
        }
    }
    if (!panel.size_error.empty()) {
        ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + ImGui::GetContentRegionAvail().x);
        ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s", panel.size_error.c_str());
        ImGui::PopTextWrapPos();
        pr.strings["image.size.message"] = panel.size_error;
    }
    // the position embeddings of the run on screen
    const StageTable& tab = t.table();
    const RunDims& rd = tab.dims();
    const Config& c = tab.config();
    const int sg = c.stored_grid();
    // one line (the panel's height is the image's): the grids, the rule in the tooltip, the stages a click away
    std::string pos, brief;
    const std::string learned = std::to_string(sg) + "x" + std::to_string(sg);
    if (!c.pos_table) {
        pos = "no position table: positions are rotations of each patch's q and k in every block (RoPE), by its row and "
              "column in this run's " + std::to_string(rd.gh) + "x" + std::to_string(rd.gw) + " grid";
        brief = "pos: RoPE " + std::to_string(rd.gh) + "x" + std::to_string(rd.gw);
    } else if (rd.resized) {
        pos = "position embeddings: learned for " + learned + " patches, resized to " + std::to_string(rd.gh) + "x" +
              std::to_string(rd.gw) + " by " + pos_rule_label(c.pos_rule);
        brief = "pos " + learned + " -> " + std::to_string(rd.gh) + "x" + std::to_string(rd.gw);
    } else {
        pos = "position embeddings: the learned " + learned + " grid as it is";
        brief = "pos " + learned + " learned";
    }
    if (c.pos_table && c.rope) {  // EVA-02: the table, and RoPE in every block
        pos += "; and in every block each patch's q and k are turned by its row and column (RoPE, counted on the " +
               std::to_string(c.rope_ref_grid > 0 ? c.rope_ref_grid : rd.gh) + "x" +
               std::to_string(c.rope_ref_grid > 0 ? c.rope_ref_grid : rd.gw) + " grid the model was trained at)";
        brief += " + RoPE";
    }
    Flow pflow;  // the line and its buttons wrap in a narrow panel
    pflow.next(Flow::text_w(brief.c_str()));
    ImGui::TextDisabled("%s", brief.c_str());
    if (v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", pos.c_str());
    pr.strings["image.pos"] = pos;
    if (rd.resized && tab.has(StageId{StageKind::PosEmbedLearned})) {
        pflow.next(Flow::button_w("learned"));
        if (ImGui::SmallButton("learned")) { select_stage(v.ui, t, StageId{StageKind::PosEmbedLearned}); v.ui.tab = Tab::Stage; }
        if (v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("the stage pos_embed.learned: the table as stored");
    }
    if (tab.has(StageId{StageKind::PosEmbed})) {
        const std::string pe = stage_name(StageId{StageKind::PosEmbed});
        const char* label = rd.resized ? "resized" : pe.c_str();
        pflow.next(Flow::button_w(label));
        if (ImGui::SmallButton(label)) { select_stage(v.ui, t, StageId{StageKind::PosEmbed}); v.ui.tab = Tab::Stage; }
        if (v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("the stage %s: what is added to the tokens in this run", pe.c_str());
    }
    pflow.next(Flow::button_w("similarity"));
    if (ImGui::SmallButton("similarity")) v.ui.tab = Tab::Positions;
    if (v.hover && ImGui::IsItemHovered())
        ImGui::SetTooltip("%s", c.pos_table ? "the Positions tab: how alike the positions are, learned and as run"
                                            : "the Positions tab: how alike the rotations of two patches are (RoPE)");
}

// The overlay that reads one token's attention over the image: the cls token's (most ViTs), the pooling
// probe's (SigLIP), or none (timm's cls-less ViTs that average the patches): its name in the combo and
// under its thumbnail, true to the model shown.

}  // namespace vit::app
