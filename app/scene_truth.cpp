#include "probe.h"
#include "scene_truth.h"

#include <algorithm>
#include <iterator>
#include <cmath>
#include <string>

#include "core/io/image.h"
#include "core/teach/scenes_eval.h"

namespace vit::app {

namespace {
// A box of the image file mapped through this run's preprocessing (resize, crop) to the model input's pixels;
// false when the crop left none of it.
bool to_input(const std::array<int, 4>& b, const PreprocessPlan& pl, int Ih, int Iw, float out[4]) {
    const float sx = pl.resize_w > 0 && pl.file_w > 0 ? float(pl.resize_w) / float(pl.file_w) : 1.f;
    const float sy = pl.resize_h > 0 && pl.file_h > 0 ? float(pl.resize_h) / float(pl.file_h) : 1.f;
    out[0] = std::clamp(b[0] * sx - float(pl.crop_left), 0.f, float(Iw));
    out[1] = std::clamp(b[1] * sy - float(pl.crop_top), 0.f, float(Ih));
    out[2] = std::clamp(b[2] * sx - float(pl.crop_left), 0.f, float(Iw));
    out[3] = std::clamp(b[3] * sy - float(pl.crop_top), 0.f, float(Ih));
    return out[2] > out[0] && out[3] > out[1];
}
bool inside(const float b[4], float x, float y) { return x >= b[0] && x < b[2] && y >= b[1] && y < b[3]; }
// The truth's boxes in the model input's pixels for the run on screen (the one mapping every view uses).
struct InputTruth {
    bool object = false;                        // false: the crop left none of the object
    float box[4] = {0, 0, 0, 0};
    std::vector<std::array<float, 4>> clutter;
};
InputTruth input_truth(const Session& s, const SceneTruth& truth, const RunDims& rd) {
    const PreprocessPlan pl = plan_preprocess_at(s.image(), s.preprocess_config(), rd.img_h, rd.img_w);
    InputTruth it;
    it.object = to_input(truth.box, pl, rd.img_h, rd.img_w, it.box);
    for (const auto& c : truth.clutter) {
        float b[4];
        if (to_input(c, pl, rd.img_h, rd.img_w, b)) it.clutter.push_back({b[0], b[1], b[2], b[3]});
    }
    return it;
}
}  // namespace

void DrawSceneTruth(ViewCtx& v, ImDrawList* dl, ImVec2 p0, float img_w, float img_h) {
    Session& s = v.s;
    Probe& pr = v.probe;
    if (!s.scene_truth_note().empty()) {
        ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "the object's box is not shown: %s", s.scene_truth_note().c_str());
        pr.strings["truth.note"] = s.scene_truth_note();
    }
    const auto& truth = s.scene_truth();
    const Trace* t = s.trace();
    if (!truth || !t) return;
    const RunDims& rd = t->table().dims();
    const int Ih = rd.img_h, Iw = rd.img_w;
    const InputTruth it = input_truth(s, *truth, rd);
    const float* box = it.box;
    const std::string cls = truth->cls.empty() ? "class " + std::to_string(truth->label) : truth->cls;
    pr.strings["truth.class"] = cls;
    if (!it.object) {
        ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "the object (%s) was cropped out by the model's preprocessing", cls.c_str());
        pr.strings["truth.peak"] = "cropped out";
        return;
    }
    const float kx = img_w / float(Iw), ky = img_h / float(Ih);
    const auto screen = [&](const float b[4]) {
        return std::pair<ImVec2, ImVec2>{ImVec2(p0.x + b[0] * kx, p0.y + b[1] * ky), ImVec2(p0.x + b[2] * kx, p0.y + b[3] * ky)};
    };
    const std::vector<std::array<float, 4>>& clutter = it.clutter;
    ImGui::Checkbox("object box (X)", &v.ui.show_box);
    if (v.hover && ImGui::IsItemHovered())
        ImGui::SetTooltip("the box labels.json gives for this scene (the generator knows where it put the object), "
                          "mapped to the model input");
    if (v.ui.show_box) {
        const auto [a, b] = screen(box);
        dl->AddRect(ImVec2(a.x - 1, a.y - 1), ImVec2(b.x + 1, b.y + 1), IM_COL32(0, 0, 0, 200), 0, 0, 4);
        dl->AddRect(a, b, IM_COL32(90, 255, 90, 255), 0, 0, 2);
        for (const auto& c : clutter) {
            const auto [ca, cb] = screen(c.data());
            dl->AddRect(ca, cb, IM_COL32(255, 170, 40, 220), 0, 0, 1);
        }
        pr.rects["truth.box"] = Rect{a.x, a.y, b.x - a.x, b.y - a.y};
        ImGui::TextColored(ImVec4(0.35f, 1, 0.35f, 1), "green: the %s", cls.c_str());
        if (!clutter.empty()) {
            ImGui::TextColored(ImVec4(1, 0.67f, 0.16f, 1), "orange: %zu distractor%s", clutter.size(), clutter.size() == 1 ? "" : "s");
        }
    }
    pr.numbers["truth.clutter"] = double(clutter.size());
}

void DrawScenePeak(ViewCtx& v, const std::vector<float>& ov, const char* what) {
    Session& s = v.s;
    Probe& pr = v.probe;
    const auto& truth = s.scene_truth();
    const Trace* t = s.trace();
    if (!truth || !t || ov.empty()) return;
    const RunDims& rd = t->table().dims();
    const int P = t->table().config().patch;
    const InputTruth it = input_truth(s, *truth, rd);
    if (!it.object) return;  // said by DrawSceneTruth
    const float* box = it.box;
    const std::vector<std::array<float, 4>>& clutter = it.clutter;
    const int peak = peak_patch(ov);
    if (peak < 0) return;
    const float cx = (float(peak % rd.gw) + 0.5f) * float(P), cy = (float(peak / rd.gw) + 0.5f) * float(P);
    const bool on = inside(box, cx, cy);
    const bool on_clutter = !on && std::any_of(clutter.begin(), clutter.end(), [&](const auto& c) { return inside(c.data(), cx, cy); });
    const std::string where = on ? "on the object" : on_clutter ? "off the object, on a distractor" : "off the object, on the background";
    const std::string line = std::string("peak of the ") + what + ": patch " + std::to_string(peak) + ", " + where;
    // one short line on screen (its room is kept above the thumbnails); the whole sentence under the mouse
    const std::string shown = "peak: patch " + std::to_string(peak) + (on ? ", on the object" : on_clutter ? ", on a distractor" : ", on the background");
    ImGui::TextColored(on ? ImVec4(0.35f, 1, 0.35f, 1) : ImVec4(1, 0.67f, 0.16f, 1), "%s", shown.c_str());
    if (v.hover && ImGui::IsItemHovered())
        ImGui::SetTooltip("%s (the peak patch's centre %s the object's box from labels.json)", line.c_str(), on ? "lies inside" : "lies outside");
    pr.strings["truth.peak"] = line;
    pr.numbers["truth.peak_patch"] = peak;
    pr.numbers["truth.peak_on_object"] = on ? 1 : 0;
}

std::optional<ScenePatches> scene_patches(const Session& s, const Trace& t) {
    const auto& truth = s.scene_truth();
    if (!truth) return std::nullopt;
    const RunDims& rd = t.table().dims();
    const int P = t.table().config().patch;
    const InputTruth it = input_truth(s, *truth, rd);
    // the patches a box touches (any of its pixels inside the patch)
    const auto touched = [&](const float m[4], std::vector<int>& out) {
        for (int n = 0; n < rd.gh * rd.gw; ++n) {
            const float x0 = float(n % rd.gw * P), y0 = float(n / rd.gw * P);
            if (x0 < m[2] && x0 + float(P) > m[0] && y0 < m[3] && y0 + float(P) > m[1]) out.push_back(n);
        }
    };
    ScenePatches sp;
    std::vector<int> clutter;
    if (it.object) touched(it.box, sp.object);
    for (const auto& c : it.clutter) touched(c.data(), clutter);
    std::sort(clutter.begin(), clutter.end());
    clutter.erase(std::unique(clutter.begin(), clutter.end()), clutter.end());
    // a patch shared with the object counts as the object's
    std::set_difference(clutter.begin(), clutter.end(), sp.object.begin(), sp.object.end(), std::back_inserter(sp.clutter));
    return sp;
}

void DrawSceneDrops(ViewCtx& v) {
    Session& s = v.s;
    const Trace* t = s.trace();
    const auto sp = t ? scene_patches(s, *t) : std::nullopt;
    if (!sp) return;
    const std::vector<int>& object = sp->object;
    const std::vector<int>& only_clutter = sp->clutter;
    v.probe.numbers["truth.object_patches"] = double(object.size());
    v.probe.numbers["truth.clutter_patches"] = double(only_clutter.size());
    const auto drop = [&](const std::vector<int>& ps, const char* what) {
        Options o = s.options();
        o.iv.dropped = ps;
        try {
            run_dims(s.config(), o);  // never every patch
            s.set_options(o);
        } catch (const std::exception& e) {
            s.add_error(std::string("The ") + what + " patches were not dropped", e.what());
        }
    };
    ImGui::TextUnformatted("This is a generated scene:");
    ImGui::SameLine();
    char label[64];
    std::snprintf(label, sizeof label, "drop the object's %zu patches", object.size());
    if (!object.empty() && ImGui::SmallButton(label)) drop(object, "object's");
    ImGui::SameLine();
    std::snprintf(label, sizeof label, "drop the distractors' %zu patches", only_clutter.size());
    if (!only_clutter.empty() && ImGui::SmallButton(label)) drop(only_clutter, "distractors'");
    if (!s.options().iv.dropped.empty()) {
        ImGui::SameLine();
        if (ImGui::SmallButton("put every patch back")) drop({}, "dropped");
    }
}

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_scene_truth() {
    using K = ProbeKind;
    return {
        {K::String, "truth.{class|peak|note}", "a generated scene's truth: its class, where the overlay's peak lies, why labels.json was not read"},
        {K::Rect, "truth.box", "the object's box over the model input"},
        {K::Number, "truth.{clutter|peak_patch|peak_on_object}", "the distractors drawn, the overlay's peak patch, 1 when it is on the object"},
        {K::Number, "truth.{object_patches|clutter_patches}", "the patches the object's box touches, the distractors' other ones"},
    };
}

}  // namespace vit::app
