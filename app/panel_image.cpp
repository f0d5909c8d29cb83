// The image panel: the original image, the model input, the patch grid and the overlays over it.
#include "probe.h"
#include <GLFW/glfw3.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>

#include "core/kernels/blas.h"
#include "core/kernels/ops.h"
#include "core/io/hub.h"
#include "core/io/io.h"
#include "tensor_access.h"
#include "paths.h"
#include "settings_app.h"
#include "views.h"
#include "scene_truth.h"
#include "jobs.h"
#include "tabs/tab.h"
#include "model_map.h"
#include "core/teach/teach.h"
#include "core/model/finite.h"
#include "interventions_ui.h"
#include "panel_image_internal.h"

namespace fs = std::filesystem;

namespace vit::app {

namespace {

std::string fixed(float v, int prec = 3) {
    char b[32];
    std::snprintf(b, sizeof b, "%.*f", prec, double(v));
    return b;
}

std::string list_of(const std::vector<float>& v, int prec = 3) {
    std::string s = v.size() > 1 ? "(" : "";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + fixed(v[i], prec);
    return s + (v.size() > 1 ? ")" : "");
}

// The preprocessing written out, step by step, from the plan preprocess_at() follows for an h x w input.
std::vector<std::string> preprocessing_lines(const Image& im, const Config& c, int h, int w) {
    std::vector<std::string> v;
    const char* ch = im.channels == 1 ? "gray" : "RGB";
    PreprocessPlan p = plan_preprocess_at(im, c, h, w);  // file_w x file_h: the size in the file, before any scaling on load
    v.push_back("original " + std::to_string(p.file_w) + "x" + std::to_string(p.file_h) + " " + ch +
                (im.file_channels == 2 || im.file_channels == 4 ? " (alpha dropped)" : "") +
                (im.sixteen_bit ? ", 16-bit" : ""));
    if (!im.note.empty()) v.push_back("-> " + im.note);  // "the first of 12 frames of an animated GIF"
    if (!p.scaled_on_load.empty()) v.push_back("-> " + p.scaled_on_load);
    if (im.channels == 3 && c.channels == 1) v.push_back("-> gray: 0.299 R + 0.587 G + 0.114 B");
    if (im.channels == 1 && c.channels == 3) v.push_back("-> RGB: gray copied to 3 channels");
    const char* interp = c.pre.interp == Interp::Bicubic ? "bicubic" : "bilinear";
    std::string rs = std::to_string(p.resize_w) + "x" + std::to_string(p.resize_h);
    if (p.squash) v.push_back("-> squash to " + rs + " (" + interp + ", aspect not kept)");
    else if (p.resize_w != im.width || p.resize_h != im.height)
        v.push_back("-> shorter side to " + std::to_string(std::min(p.resize_w, p.resize_h)) + ": " + rs + " (" + interp + ")");
    else v.push_back("-> no resize (shorter side is already " + std::to_string(std::min(p.resize_w, p.resize_h)) + ")");
    if (p.resize_w != p.crop_w || p.resize_h != p.crop_h)
        v.push_back("-> centre crop " + std::to_string(p.crop_w) + "x" + std::to_string(p.crop_h) + " at (" +
                    std::to_string(p.crop_left) + ", " + std::to_string(p.crop_top) + ")");
    // one mean and std for every channel: written once
    const auto same = [](const std::vector<float>& x) { return std::all_of(x.begin(), x.end(), [&](float y) { return y == x[0]; }); };
    if (c.pre.mean.size() > 1 && same(c.pre.mean) && same(c.pre.std))
        v.push_back("-> (x - " + fixed(c.pre.mean[0]) + ") / " + fixed(c.pre.std[0]) + " in every channel");
    else
        v.push_back("-> (x - " + list_of(c.pre.mean) + ") / " + list_of(c.pre.std));
    return v;
}

void upload_rgb(Texture& tex, const float* chw, int C, int H, int W, bool clamp01) {
    std::vector<unsigned char> rgba(size_t(H) * W * 4);
    size_t plane = size_t(H) * W;
    for (size_t i = 0; i < plane; ++i) {
        for (int k = 0; k < 3; ++k) {
            float v = chw[(C == 3 ? k : 0) * plane + i];
            if (clamp01) v = std::clamp(v, 0.f, 1.f);
            rgba[i * 4 + k] = (unsigned char)(std::lround(v * 255));
        }
        rgba[i * 4 + 3] = 255;
    }
    tex.upload_rgba(rgba.data(), W, H);
}

// The original image (aspect kept) with the region the model sees outlined, and the steps beside it.
void draw_original(ViewCtx& v, ImagePanel& panel) {
    Session& s = v.s;
    Probe& pr = v.probe;
    const Image& im = s.image();
    if (im.width <= 0 || rank(im.pixels) != 3) return;
    const Config c = s.preprocess_config();
    // the input size of the run on screen (else the one asked for): the steps preprocess_at takes for it
    int in_h = c.image_size, in_w = c.image_size;
    if (const Trace* t = s.trace()) {
        in_h = t->table().dims().img_h;
        in_w = t->table().dims().img_w;
    } else {
        try {
            const RunDims rd = run_dims(s.config(), s.options());
            in_h = rd.img_h;
            in_w = rd.img_w;
        } catch (const std::exception&) {
        }
    }
    uint64_t key = std::hash<std::string>{}(s.image_path()) ^ (uint64_t(im.width) << 32) ^ uint64_t(im.height);
    if (panel.keys.stale("original", key)) {
        // a thumbnail-sized copy: a 4000-pixel photo is not uploaded whole
        int tw = im.width, th = im.height;
        float f = std::min(1.f, 256.f / float(std::max(tw, th)));
        tw = std::max(1, int(tw * f)); th = std::max(1, int(th * f));
        Tensor3 small = (tw == im.width && th == im.height) ? im.pixels : resize(im.pixels, th, tw, Interp::Bilinear);
        upload_rgb(panel.original, small.data(), int(extent(small, 0)), th, tw, true);
    }
    // the original beside its first preprocessing steps (four lines; the others go under it): no taller
    // than they are when the panel is short, so that the model input below gets the room (issue 36)
    const float box = ImGui::GetContentRegionAvail().y < 760 ? std::max(64.f, 4 * ImGui::GetTextLineHeightWithSpacing()) : 120.f;
    float f = box / float(std::max(im.width, im.height));
    float w = im.width * f, h = im.height * f;
    ImVec2 p0 = ImGui::GetCursorScreenPos();
    ImGui::BeginGroup();
    ImGui::Dummy(ImVec2(box, box));
    ImDrawList* dl = ImGui::GetWindowDrawList();
    ImVec2 q0(p0.x + (box - w) / 2, p0.y + (box - h) / 2);
    dl->AddImage(panel.original.id(), q0, ImVec2(q0.x + w, q0.y + h));
    pr.rects["original"] = Rect{q0.x, q0.y, w, h};
    PreprocessPlan p = plan_preprocess_at(im, c, in_h, in_w);
    if (p.resize_w > 0 && p.resize_h > 0) {
        float sx = w / p.resize_w, sy = h / p.resize_h;
        ImVec2 a(q0.x + p.crop_left * sx, q0.y + p.crop_top * sy);
        ImVec2 b(a.x + std::min(p.crop_w, p.resize_w) * sx, a.y + std::min(p.crop_h, p.resize_h) * sy);
        dl->AddRect(a, b, IM_COL32(255, 214, 120, 255), 0, 0, 2);
        pr.rects["original.crop"] = Rect{a.x, a.y, b.x - a.x, b.y - a.y};
    }
    ImGui::EndGroup();
    ImGui::SameLine();
    ImGui::BeginGroup();
    std::string all, drawn;
    const float room = ImGui::GetContentRegionAvail().x, full = room + box + ImGui::GetStyle().ItemSpacing.x;
    const float lh = ImGui::GetTextLineHeightWithSpacing();
    // the steps beside the original while they fit its height; the rest under it across the panel's width,
    // where they wrap less (a narrow panel's steps beside the picture took nine lines, and pushed the
    // attention thumbnails below the fold at 1366x768)
    const std::vector<std::string> lines = preprocessing_lines(im, c, in_h, in_w);
    size_t i = 0;
    float used = 0;
    for (; i < lines.size(); ++i) {
        const std::vector<std::string> parts = wrap_at_spaces(lines[i], room);
        if (i > 0 && used + float(parts.size()) * lh > box + 0.5f * lh) break;
        for (const std::string& part : parts) {
            ImGui::TextDisabled("%s", part.c_str());
            drawn += part + "\n";
        }
        used += float(parts.size()) * lh;
        all += lines[i] + "\n";
    }
    ImGui::EndGroup();
    for (; i < lines.size(); ++i) {
        for (const std::string& part : wrap_at_spaces(lines[i], full)) {
            ImGui::TextDisabled("%s", part.c_str());
            drawn += part + "\n";
        }
        all += lines[i] + "\n";
    }
    pr.strings["preprocess.drawn"] = drawn;
    pr.strings["preprocess"] = all;
    bool squash = c.pre.squash;
    if (ImGui::Checkbox("squash (aspect lost)", &squash)) s.set_squash(squash);
    if (v.hover && ImGui::IsItemHovered())
        ImGui::SetTooltip("off: shorter side resized, then a centre crop (torchvision's Resize + CenterCrop)\n"
                          "on: straight resize to a square, as Hugging Face's ViTImageProcessor does");
}

void draw_no_grads(Session& s, Probe& pr, const char* what) {
    std::string why = s.result().no_grads_why.empty() ? s.grads_unavailable_reason() : s.result().no_grads_why;
    if (why.empty()) why = "the gradients are being computed";
    // the reason in full where it takes at most two lines; else one line and the reason under the mouse (DINOv2's
    // five lines pushed the thumbnails below the image panel at 1366x768)
    const std::string full = std::string(what) + " needs gradients: " + why + ".";
    const float wrap_w = ImGui::GetContentRegionAvail().x;
    if (ImGui::CalcTextSize(full.c_str(), nullptr, false, wrap_w).y > 2.5f * ImGui::GetTextLineHeight()) {
        ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + wrap_w);
        ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s needs gradients: there are none (hover: why)", what);
        ImGui::PopTextWrapPos();
        if (ImGui::IsItemHovered()) {
            ImGui::BeginTooltip();
            ImGui::PushTextWrapPos(420);
            ImGui::TextUnformatted(full.c_str());
            ImGui::PopTextWrapPos();
            ImGui::EndTooltip();
        }
    } else {
        ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + wrap_w);
        ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s", full.c_str());
        ImGui::PopTextWrapPos();
    }
    pr.strings["overlay.message"] = why;
    if (s.can_compute_grads() && ImGui::SmallButton("compute gradients")) s.set_grad_mode(GradMode::On);
}

}  // namespace

namespace {

const char* summary_overlay_name(const Config& c, bool short_form = false) {
    if (c.cls_token) return short_form ? "cls" : "cls attention";
    if (c.pooling == Pooling::Map) return short_form ? "probe" : "probe attention";
    return short_form ? "cls" : "cls attention (none)";
}

// The uniform value an overlay is compared with in its note: uniform attention (1/keys) for a row of a pattern,
// else the values' mean.
float overlay_reference(const Trace& t, const UiState& ui, bool probe, const std::vector<float>& ov) {
    const bool attn_row = ui.overlay == Overlay::Cls || ui.overlay == Overlay::Query;
    const StageId src = probe && ui.overlay == Overlay::Cls ? StageId{StageKind::HeadAttnPattern} : StageId{StageKind::AttnPattern, 0};
    const Array* pat = attn_row && t.depth() > 0 ? t.find(src) : nullptr;
    if (pat && pat->dimension() > 0 && pat->shape().back() > 0) return 1.f / float(pat->shape().back());
    double sum = 0;
    int n = 0;
    for (float x : ov)
        if (std::isfinite(x)) sum += x, ++n;
    return n ? float(sum / n) : 0.f;
}

// Under a flat overlay's key: that it is flat, by how much, and why it is drawn faint (issue 36 item 9); "" when
// the overlay is not flat.
std::string flat_overlay_text(const std::vector<float>& ov, bool attention, float ref) {
    if (ov.empty()) return "";
    const GridRange mm = grid_range(ov);
    if (!flat_overlay(mm.vmin, mm.vmax)) return "";
    char b[300];
    if (attention && ref > 0)
        std::snprintf(b, sizeof b, "Flat: every patch gets %s .. %s, within %.1f%% of each other (uniform attention: %s): the "
                      "attention is about uniform and singles out no patch; drawn faint so the picture shows.",
                      fmt(mm.vmin).c_str(), fmt(mm.vmax).c_str(), 100.0 * relative_spread(mm.vmin, mm.vmax), fmt(ref).c_str());
    else
        std::snprintf(b, sizeof b, "Flat: every patch gets %s .. %s, within %.1f%% of each other: it singles out no patch; drawn "
                      "faint so the picture shows.", fmt(mm.vmin).c_str(), fmt(mm.vmax).c_str(),
                      100.0 * relative_spread(mm.vmin, mm.vmax));
    return b;
}
// The note on screen in one short line (the key beside it gives the values); the whole
// sentence under the mouse and in the probe (merged with the layout work: the three lines it took pushed the
// thumbnails below the fold at 1366x768 on vit-ti16 and clip-b32, Gui.SweepSizes*). With random weights the
// line says that too, and stands for the note under the thumbnails (one warning line, not two: at 1366x768
// the second was cut below the fold on vit-ti16).
std::string flat_overlay_shown(const std::string& text, const std::string& random_note) {
    if (text.rfind("Flat:", 0) != 0) return text;
    return random_note.empty() ? "Flat: no patch stands out (hover)" : random_note + ": no patch stands out (hover)";
}
void FlatOverlayNote(ViewCtx& v, const std::string& text, const std::string& random_note) {
    if (text.empty()) return;
    const std::string shown = flat_overlay_shown(text, random_note);
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s", shown.c_str());
    ImGui::PopTextWrapPos();
    if (v.hover && ImGui::IsItemHovered())
        ImGui::SetTooltip("%s%s", text.c_str(), random_note.empty() ? "" : ("\n" + random_note + ": these attention maps mean nothing.").c_str());
    v.probe.strings["overlay.flat"] = text;
    if (!random_note.empty()) {
        const ImVec2 n0 = ImGui::GetItemRectMin(), n1 = ImGui::GetItemRectMax();
        v.probe.rects["thumbs.note"] = Rect{n0.x, n0.y, n1.x - n0.x, n1.y - n0.y};
    }
}

// The overlay's values over the patches for the trace on screen (the core's numbers), or why there are none.
std::vector<float> overlay_values(const Trace& t, const UiState& ui, int layer, std::string& why) {
    const Config& c = t.table().config();
    const int L = t.depth(), T = t.table().dims().T;
    std::vector<float> ov;
    why.clear();
    try {
        if (L == 0 && ui.overlay != Overlay::None) why = "the model has no attention layers";
        else if (ui.overlay == Overlay::Cls) ov = c.cls_token ? cls_attention(t, layer, ui.overlay_head) : probe_attention(t, ui.overlay_head);
        else if (ui.overlay == Overlay::Rollout) ov = attention_rollout(t, layer, Fusion(ui.fusion), ui.discard);
        else if (ui.overlay == Overlay::GradRollout && t.has_grads()) ov = grad_rollout(t, layer);
        else if (ui.overlay == Overlay::Query) {
            if (ui.query < 0 || ui.query >= T)
                why = "query token " + std::to_string(ui.query) + " is out of range: " + token_range_text(t);
            else {
                Tensor1 row = attention_from(t, layer, ui.overlay_head, ui.query);  // the core's numbers, not recomputed
                ov.assign(row.data(), row.data() + row.size());
            }
        }
    } catch (const std::exception& e) {
        ov.clear();
        why = e.what();
    }
    if (ov.size() != size_t(t.table().dims().N)) ov.clear();
    return ov;
}

}  // namespace

bool upload_model_input(Texture& tex, const Session& s) {
    const Trace* t = s.trace();
    const Array* in = t ? t->find(StageId{StageKind::Input}) : nullptr;
    if (!in || rank(*in) != 3) return false;
    const int C = int(extent(*in, 0)), Ih = int(extent(*in, 1)), Iw = int(extent(*in, 2));
    Tensor3 img = denormalize(Tensor3(*in), s.shown_config());
    upload_rgb(tex, img.data(), C, Ih, Iw, true);
    return true;
}

void DrawImagePanelArea(ViewCtx& v, ImagePanel& panel, float height) {
    // the line is kept while the row is below the part shown: measured as drawn (the child's
    // scrolling and the row's place are known only then), so the line's room is taken from the
    // frame after the row first falls below (taking it keeps the row below: no flicker)
    const float line = ImGui::GetTextLineHeightWithSpacing();
    const float hint_h = panel.thumbs_below ? line : 0.f;
    ImGui::BeginChild("imgpanel", ImVec2(0, height - hint_h));
    ImGui::PushTextWrapPos(0);  // its lines wrap at the panel's edge, whatever its width
    DrawImagePanel(v, panel);
    // a generated scene's truth (issue 35): its box over the input drawn above, its lines under the thumbnails
    if (const auto r = v.probe.rects.find("image"); r != v.probe.rects.end() && v.s.trace())
        DrawSceneTruth(v, ImGui::GetWindowDrawList(), ImVec2(r->second.x, r->second.y), r->second.w, r->second.h);
    ImGui::PopTextWrapPos();
    const ImVec2 wp = ImGui::GetWindowPos(), ws = ImGui::GetWindowSize();
    const bool below = panel.thumbs_bottom > wp.y + ws.y + 0.5f;
    v.probe.rects["image.panel"] = Rect{wp.x, wp.y, ws.x, ws.y};
    ImGui::EndChild();
    if (below && hint_h > 0) {
        const std::string hint = "scroll down for the attention thumbnails";
        bool cut = false;
        const std::string shown = fit_text(hint, ImGui::GetContentRegionAvail().x, cut);
        const ImVec2 at = ImGui::GetCursorScreenPos();
        ImGui::TextUnformatted(shown.c_str());
        if (cut && v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", hint.c_str());
        v.probe.strings["image.more_below"] = hint;
        v.probe.rects["image.more_below"] = Rect{at.x, at.y, ImGui::GetItemRectSize().x, ImGui::GetItemRectSize().y};
    } else if (hint_h > 0) {
        ImGui::Dummy(ImVec2(1, hint_h - ImGui::GetStyle().ItemSpacing.y));  // the row came into view: the room goes next frame
    }
    // kept while the row would still be below with the line's room given back; dropped as soon as it would fit (the
    // layout grows into at most that room), so that one crowded state (an overlay with more controls) does not keep
    // the line, and the row under it, below the fold for every state after it (DINOv2 at 1366x768, Gui sweeps)
    panel.thumbs_below = hint_h > 0 ? panel.thumbs_bottom > wp.y + ws.y + hint_h + 0.5f : below;
}

namespace {
// The three maps side by side for the same layer (cls or probe attention, rollout, gradient-weighted rollout),
// each from 0 to its own largest value, printed under it: click one to put it over the image.
// A model with no cls token and no probe (AIMv2, timm's gap ViTs): none of the three summary maps exists (cls
// attention and both rollouts read the cls row). One line says so where three crossed-out squares and their
// 'why?' took the room the image needs (their random-weights note was cut at 1280x800 on AIMv2). "" otherwise.
std::string summary_none_line(const Trace& t, int L) {
    const bool none = L > 0 && !t.table().config().cls_token && !t.find(StageId{StageKind::HeadAttnPattern});
    return none ? "No cls attention, rollout or gradient maps: this model has no cls token or probe, so no one token sums "
                  "up the image ('attention from a token' shows any token's)."
                : "";
}

void draw_thumbnails(ViewCtx& v, ImagePanel& panel, const Trace& tr, ImDrawList* dl, bool grads, int ol, float tw);

// Under the image: the three summary maps (or the line saying why there are none), then the random-weights note.
void draw_summary_row(ViewCtx& v, ImagePanel& panel, const Trace& t, ImDrawList* dl, bool grads, int ol, float tw,
                      const std::string& none_line, const std::string& random_line) {
    Probe& pr = v.probe;
    if (!none_line.empty()) {
        ImGui::PushTextWrapPos(0);
        ImGui::TextDisabled("%s", none_line.c_str());
        ImGui::PopTextWrapPos();
        pr.strings["thumbs.none"] = none_line;
    } else {
        draw_thumbnails(v, panel, t, dl, grads, ol, tw);
    }
    if (!random_line.empty()) {
        ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s", random_line.c_str());
        const ImVec2 n0 = ImGui::GetItemRectMin(), n1 = ImGui::GetItemRectMax();
        pr.rects["thumbs.note"] = Rect{n0.x, n0.y, n1.x - n0.x, n1.y - n0.y};
    }
}

void draw_thumbnails(ViewCtx& v, ImagePanel& panel, const Trace& tr, ImDrawList* dl, bool grads, int ol, float tw) {
    Session& s = v.s;
    UiState& ui = v.ui;
    Probe& pr = v.probe;
    const Trace* t = &tr;
    const Config& c = tr.table().config();
    const RunDims& rd = tr.table().dims();
    const int gh = rd.gh, gw = rd.gw, N = rd.N;
    const char* names[3] = {summary_overlay_name(c), "rollout", "grad-weighted"};
    const float tiw = gw >= gh ? tw : tw * float(gw) / float(gh), tih = gh >= gw ? tw : tw * float(gh) / float(gw);
    pr.numbers["thumbs.size"] = tw;
    if (panel.thumbs.size() != 3) { panel.thumbs.resize(3); panel.thumb_range.resize(3); panel.thumb_why.resize(3); }
    ImVec2 row0;  // the row's top left
    for (int k3 = 0; k3 < 3; ++k3) {
        uint64_t key = s.version() * 131 + uint64_t(ol + 1) * 1009 + uint64_t(ui.overlay_head + 1) * 7 + uint64_t(ui.fusion) * 3 +
                       uint64_t(ui.discard * 1000) * 100003;
        if (panel.keys.stale("thumb" + std::to_string(k3), key)) {
            UiState as = ui;
            as.overlay = Overlay(k3 + 1);
            std::string& why = panel.thumb_why[size_t(k3)];
            std::vector<float> m = k3 == 2 && !grads ? std::vector<float>() : overlay_values(*t, as, ol, why);
            if (k3 == 2 && !grads) why = "no\ngradients";
            else if (m.empty() && !c.cls_token) why = "no cls\ntoken";
            else if (m.empty()) why = "not\navailable";
            if (m.size() == size_t(N)) {
                const GridRange r = upload_grid(panel.thumbs[size_t(k3)], m, gw, gh);
                panel.thumb_range[size_t(k3)] = {r.vmin, r.vmax};
                why.clear();
            }
        }
        if (k3) ImGui::SameLine();
        ImGui::BeginGroup();
        ImVec2 q = ImGui::GetCursorScreenPos();
        ImGui::PushID(k3);
        if (ImGui::InvisibleButton("t", ImVec2(tw, tw))) ui.overlay = Overlay(k3 + 1);
        std::string why_line = panel.thumb_why[size_t(k3)];  // why it is empty, on one line
        std::replace(why_line.begin(), why_line.end(), '\n', ' ');
        if (k3 == 2 && !grads) {  // the session's reason, as the overlay says it when chosen
            std::string r = s.result().no_grads_why.empty() ? s.grads_unavailable_reason() : s.result().no_grads_why;
            if (r.rfind("no gradients: ", 0) == 0) r = r.substr(14);
            if (!r.empty()) why_line += ": " + r;
        }
        if (v.hover && ImGui::IsItemHovered())
            ImGui::SetTooltip("%s up to layer %d: %s", names[k3], ol, why_line.empty() ? "click to show it over the image" : why_line.c_str());
        ImGui::PopID();
        const ImVec2 q0(q.x + (tw - tiw) / 2, q.y + (tw - tih) / 2), q1(q0.x + tiw, q0.y + tih);
        const std::string& why = panel.thumb_why[size_t(k3)];
        Colormap cm;
        const bool drawn = why.empty() && panel.thumbs[size_t(k3)].valid();
        if (drawn) {
            // each map from 0 to its own largest value (three different quantities), printed under it
            cm.vmin = std::min(0.f, panel.thumb_range[size_t(k3)].first);
            cm.vmax = std::max(panel.thumb_range[size_t(k3)].second, cm.vmin + 1e-9f);
            v.gfx.draw(dl, panel.thumbs[size_t(k3)], q0, q1, cm);
            DrawDropped(dl, *t, q0, tiw / float(gw), tih / float(gh));
        } else if (tw >= 64) {
            dl->AddText(ImVec2(q.x + 6, q.y + tw / 2 - 16), ImGui::GetColorU32(ImGuiCol_TextDisabled), why.c_str());
        } else {  // too small for the words: a cross (the reason in the tooltip)
            dl->AddLine(q0, q1, ImGui::GetColorU32(ImGuiCol_TextDisabled));
            dl->AddLine(ImVec2(q0.x, q1.y), ImVec2(q1.x, q0.y), ImGui::GetColorU32(ImGuiCol_TextDisabled));
        }
        bool sel = int(ui.overlay) == k3 + 1;
        dl->AddRect(q0, q1, sel ? IM_COL32(255, 80, 200, 255) : IM_COL32(80, 80, 80, 255), 0, 0, sel ? 2.f : 1.f);
        // its name, the short one when the long one is wider than the map (it was wrapped inside the word:
        // 'grad-weighte' / 'd'); the tooltip says it in full
        const char* short_names[3] = {summary_overlay_name(c, true), "rollout", "gradient"};
        ImGui::TextDisabled("%s", ImGui::CalcTextSize(names[k3]).x <= tw ? names[k3] : short_names[k3]);
        if (drawn) {
            // its range, as the key of a thumbnail: dark is 0, yellow this number
            const std::string range = "0 .. " + fmt(cm.vmax);
            const ImVec2 at = ImGui::GetCursorScreenPos();
            const ImVec2 sz = ImGui::CalcTextSize(range.c_str());
            ImGui::Dummy(ImVec2(std::max(tw, sz.x), ImGui::GetTextLineHeight()));  // the next map starts after it
            // drawn where the panel shows it (scrolled out of view at small sizes: scroll to read it)
            const Rect clip = clip_rect(dl);
            if (at.x >= clip.x && at.y >= clip.y && at.x + sz.x <= clip.x + clip.w && at.y + sz.y <= clip.y + clip.h)
                DrawLabel(dl, pr, "thumbs.range", at, ImGui::GetColorU32(ImGuiCol_TextDisabled), range, clip);
            pr.numbers[std::string("thumbs.") + std::to_string(k3) + ".vmax"] = cm.vmax;
        } else if (k3 == 2 && !grads && s.can_compute_grads()) {
            // gradients this session can compute: asked for here (as G does)
            ImGui::PushID(k3);
            if (ImGui::SmallButton("compute (G)")) s.set_grad_mode(GradMode::On);
            ImGui::PopID();
            pr.strings[std::string("thumbs.") + std::to_string(k3) + ".why"] = why_line;
        } else {
            // under its name: where the reason is (a sentence, too long for the thumbnail's width)
            ImGui::TextDisabled("why? (hover)");
            if (v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", why_line.c_str());
            pr.strings[std::string("thumbs.") + std::to_string(k3) + ".why"] = why_line;
        }
        ImGui::EndGroup();
        const ImVec2 g0 = ImGui::GetItemRectMin(), g1 = ImGui::GetItemRectMax();
        if (k3 == 0) row0 = g0;
        panel.thumbs_bottom = std::max(panel.thumbs_bottom, g1.y);
        pr.rects["thumbs"] = Rect{row0.x, row0.y, g1.x - row0.x, panel.thumbs_bottom - row0.y};
    }
}
}  // namespace

namespace {
// The overlay's sliders: its layer (or the pooling probe's note), its head and query token, or rollout's head
// fusion and discard ratio. `ol` is the layer shown, set by the slider.
void draw_overlay_sliders(ViewCtx& v, const StageTable& table, int& ol, bool one_layer) {
    UiState& ui = v.ui;
    const Config& c = table.config();
    const int L = c.depth, H = c.heads, T = table.dims().T;
    const bool probe = !c.cls_token;
    if (L > 0 && !(probe && ui.overlay == Overlay::Cls)) {
        ImGui::SetNextItemWidth(190);
        if (ImGui::SliderInt(one_layer ? "layer" : "up to layer", &ol, 0, L - 1)) ui.overlay_layer = ol;
    } else if (probe && ui.overlay == Overlay::Cls) {
        ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + ImGui::GetContentRegionAvail().x);
        // (a model with neither a cls token nor a probe: the overlay's message says why nothing is drawn)
        if (c.pooling == Pooling::Map)
            ImGui::TextDisabled("the pooling head's probe, after block %d (head.attn.pattern)", L - 1);
        ImGui::PopTextWrapPos();
    }
    if (one_layer && L > 0) {
        ImGui::SetNextItemWidth(190);
        int hh = ui.overlay_head + 1;
        char label[32];
        if (hh == 0) std::snprintf(label, sizeof label, "mean of heads");
        else std::snprintf(label, sizeof label, "head %d", hh - 1);
        if (ImGui::SliderInt("head", &hh, 0, H, label)) ui.overlay_head = hh - 1;
        if (ui.overlay == Overlay::Query) {
            // the query token in the run's order: cls, registers, dist, then the patches
            int q = std::clamp(ui.query, 0, T - 1);
            const std::string ql = token_label(table, q, true);
            ImGui::SetNextItemWidth(190);
            // its label cut with an ellipsis to the slider's width (the line under the image says it whole)
            bool cut = false;
            std::string qf = fit_text("token " + std::to_string(q) + ": " + ql, 190 - 2 * ImGui::GetStyle().FramePadding.x, cut);
            for (size_t i = qf.find('%'); i != std::string::npos; i = qf.find('%', i + 2)) qf.insert(i, "%");
            if (ImGui::SliderInt("query", &q, 0, T - 1, qf.c_str())) ui.query = q;
            if (c.cls_token) {
                ImGui::SameLine();
                if (ImGui::SmallButton("cls")) ui.query = 0;
            }
        }
    } else if (ui.overlay == Overlay::Rollout) {
        const char* fu[] = {"mean", "max", "min"};
        ImGui::SetNextItemWidth(90);
        ImGui::Combo("head fusion", &ui.fusion, fu, 3);
        if (v.hover && ImGui::IsItemHovered())
            ImGui::SetTooltip("how each layer's %d heads become one matrix before the rollout: their mean, or the "
                              "largest or smallest weight of each query-key pair", H);
        // the discard ratio beside it when it fits the panel, on its own line when not (a narrow panel)
        const ImGuiStyle& st = ImGui::GetStyle();
        const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
        if (ImGui::GetItemRectMax().x + st.ItemSpacing.x + 90 + st.ItemInnerSpacing.x + ImGui::CalcTextSize("discard").x <= right)
            ImGui::SameLine();
        ImGui::SetNextItemWidth(90);
        ImGui::SliderFloat("discard", &ui.discard, 0.f, 0.95f, "%.2f");
        if (v.hover && ImGui::IsItemHovered())
            ImGui::SetTooltip("in every row of each layer's fused matrix, set the smallest %.0f%% of the weights to 0 "
                              "(never the diagonal: with it among them, fewer go), then (A + I) / 2 with rows "
                              "renormalised to sum to 1", double(ui.discard) * 100);
    }
}

// The overlay's values over the patch grid, recomputed only when what they depend on changes (rollout reads
// every layer's attention pattern: not something to redo every frame); why there are none, said in place.
const std::vector<float>& overlay_for(ViewCtx& v, ImagePanel& panel, const Trace& tr, int ol, bool grads) {
    Session& s = v.s;
    UiState& ui = v.ui;
    Probe& pr = v.probe;
    const Trace* t = &tr;
    const int gh = tr.table().dims().gh, gw = tr.table().dims().gw;
    uint64_t okey = s.version() * 131 + uint64_t(ui.overlay) * 17 + uint64_t(ol + 1) * 1009 + uint64_t(ui.overlay_head + 1) * 7 +
                    uint64_t(ui.fusion) * 3 + uint64_t(ui.discard * 1000) * 100003 + uint64_t(ui.query + 1) * 10000019;
    if (panel.keys.stale("overlay", okey)) {
        panel.overlay_vals = overlay_values(*t, ui, ol, panel.overlay_why);
        if (!panel.overlay_vals.empty()) upload_grid(panel.overlay, panel.overlay_vals, gw, gh);  // dropped patches (NaN) are hatched below
    }
    const std::vector<float>& ov = panel.overlay_vals;
    if (ov.empty() && !panel.overlay_why.empty() && !(ui.overlay == Overlay::GradRollout && !grads)) {
        // nothing to draw for this model or selection: said in place (the core's words)
        ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + ImGui::GetContentRegionAvail().x);
        ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s", panel.overlay_why.c_str());
        ImGui::PopTextWrapPos();
        pr.strings["overlay.message"] = panel.overlay_why;
    }
    if (!ov.empty()) {
        std::string vals;
        char b[32];
        for (size_t i = 0; i < ov.size(); ++i) {
            std::snprintf(b, sizeof b, "%s%.9g", i ? "," : "", double(ov[i]));
            vals += b;
        }
        pr.strings["overlay.values"] = vals;
        if (ui.overlay == Overlay::Query) pr.numbers["overlay.query"] = ui.query;
    }
    return ov;
}
}  // namespace

namespace {
// The original image, or what the panel says instead while a model loads (nothing of the model before it is
// shown) or before its first pass; true when there is no trace to draw the rest from.
bool draw_original_or_why(ViewCtx& v, ImagePanel& panel) {
    Session& s = v.s;
    Probe& pr = v.probe;
    if (s.loading()) {
        const std::string why = "loading " + s.loading_spec() + ": the image panel fills in when it has run";
        TextWrappedWords(pr, "image.message", why);
        pr.strings["image.message"] = why;
        return true;
    }
    if (s.has_image()) draw_original(v, panel);
    if (s.trace()) return false;
    const std::string why = s.has_image() ? "Running the model..." : "No image is loaded: load one with the toolbar or drop a file here.";
    ImGui::TextWrapped("%s", why.c_str());
    pr.strings["image.message"] = why;
    return true;
}
}  // namespace

void DrawImagePanel(ViewCtx& v, ImagePanel& panel) {
    Session& s = v.s;
    UiState& ui = v.ui;
    Probe& pr = v.probe;
    panel.thumbs_bottom = 0;
    if (draw_original_or_why(v, panel)) return;
    const Trace* t = s.trace();
    // the run's own sizes: input H x W, the patch grid gh x gw, the tokens before the patches
    const StageTable& table = t->table();
    const Config& c = table.config();
    const RunDims& rd = table.dims();
    const int Ih = rd.img_h, Iw = rd.img_w, gh = rd.gh, gw = rd.gw, N = rd.N, pre = rd.prefix, T = rd.T;
    const int L = c.depth, H = c.heads;
    const Array* in = t->find(StageId{StageKind::Input});
    if (!in || rank(*in) != 3 || int(extent(*in, 1)) != Ih || int(extent(*in, 2)) != Iw) {
        ImGui::TextWrapped("The trace has no %dx%d input to show.", Ih, Iw);
        return;
    }
    if (panel.keys.stale("image", s.version())) {
        Tensor3 img = denormalize(Tensor3(*in), s.shown_config());
        upload_rgb(panel.image, img.data(), c.channels, Ih, Iw, true);
    }
    ImGui::TextDisabled("model input %dx%d %s (H x W)", Ih, Iw, c.channels == 1 ? "gray" : "RGB");
    if (v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("the image as the model sees it: resized, cropped and normalized (shown denormalized)");
    pr.numbers["image.h"] = Ih;
    pr.numbers["image.w"] = Iw;
    draw_input_size(v, panel, *t);
    // overlay controls: a model without a cls token summarises the image by its pooling probe (SigLIP)
    const bool probe = !c.cls_token;
    const char* kinds[] = {"none", summary_overlay_name(c), "attention rollout", "gradient-weighted rollout",
                           "attention from a token"};
    pr.strings["overlay.name"] = kinds[int(ui.overlay)];
    int ok = int(ui.overlay);
    ImGui::SetNextItemWidth(190);
    if (ImGui::Combo("overlay", &ok, kinds, kOverlayCount)) ui.overlay = Overlay(ok);
    const bool one_layer = ui.overlay == Overlay::Cls || ui.overlay == Overlay::Query;
    int ol = ui.overlay_layer < 0 ? L - 1 : std::min(ui.overlay_layer, L - 1);
    ui.overlay_head = std::clamp(ui.overlay_head, -1, H - 1);
    draw_overlay_sliders(v, table, ol, one_layer);
    const bool grads = t->has_grads();
    if (ui.overlay == Overlay::GradRollout && !grads) draw_no_grads(s, pr, "the gradient-weighted rollout");
    ImGui::SetNextItemWidth(190);
    ImGui::SliderFloat("opacity", &ui.opacity, 0.f, 1.f, "%.2f");
    const std::vector<float>& ov = overlay_for(v, panel, *t, ol, grads);
    const std::string none_line = summary_none_line(*t, L);
    const bool no_summary = !none_line.empty(), thumbs = L > 0 && !no_summary;
    const float th = ImGui::GetTextLineHeightWithSpacing();
    // the height left for the image and the thumbnails after the lines around them (the thumbnails'
    // names and ranges, the random-weights note, the overlay's key): shared so that the image stays
    // about twice the thumbnails' size when the panel is short
    // (the key's room is kept whether or not an overlay is on: the image does not move when it is switched)
    const float key_h = L > 0 ? color_key_height() : 0.f;
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    // the line under the image (the query token, or the patches) and the random-weights note under the
    // thumbnails, as tall as they are drawn: each may wrap onto two lines in a narrow panel (the panel's
    // lines wrap at its edge), and a line counted once pushed the note below the fold at 1366x768 (vit-ti16)
    const std::string under_line =
        ui.overlay == Overlay::Query ? "query: " + token_label(table, std::clamp(ui.query, 0, T - 1), true) + " (click: move)"
                                     : std::to_string(gh) + "x" + std::to_string(gw) + " patches of " + std::to_string(c.patch) +
                                           " px (click: follow one)";
    // a flat overlay's note under its key (issue 36 item 9): its room is kept too; with random weights it
    // also stands for the note under the thumbnails
    const std::string random_note = weights_note(s);
    const float oref = ov.empty() ? 0.f : overlay_reference(*t, ui, probe, ov);
    const std::string flat_text = flat_overlay_text(ov, ui.overlay == Overlay::Cls || ui.overlay == Overlay::Query, oref);
    const std::string random_line = random_note.empty() || !flat_text.empty() ? "" : random_note + ": these maps mean nothing";
    auto wrapped_h = [&](const std::string& text) {
        return ImGui::CalcTextSize(text.c_str(), nullptr, false, std::max(1.f, avail.x)).y + ImGui::GetStyle().ItemSpacing.y;
    };
    const float lines_h = thumbs       ? 22.f + wrapped_h(under_line) + (random_line.empty() ? 0.f : wrapped_h(random_line))
                          : no_summary ? wrapped_h(under_line) + wrapped_h(none_line) + (random_line.empty() ? 0.f : wrapped_h(random_line))
                                       : 0.f;
    const float flat_h = flat_text.empty() ? 0.f : wrapped_h(flat_overlay_shown(flat_text, random_note));
    const float peak_h = s.scene_truth() && !ov.empty() ? th : 0.f;  // DrawScenePeak's line
    const float room = avail.y - 40 - lines_h - key_h - flat_h - peak_h;
    const float tw = thumbs ? std::min({96.f, (avail.x - 16) / 3, std::max(56.f, room / 3)}) : 0.f;
    // the image at the run's aspect, as large as the room left allows, and never under 128 px on its
    // long side (issue 36: what a learner clicks and looks at most; the panel scrolls below that)
    const float scale = std::max(std::min((avail.x - 8) / float(Iw), (room - tw) / float(Ih)), 128.f / float(std::max(Ih, Iw)));
    const float img_w = float(Iw) * scale, img_h = float(Ih) * scale;
    ImVec2 p0 = ImGui::GetCursorScreenPos(), p1(p0.x + img_w, p0.y + img_h);
    ImGui::InvisibleButton("img", ImVec2(img_w, img_h));
    bool hovered = v.hover && ImGui::IsItemHovered();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    dl->AddImage(panel.image.id(), p0, p1);
    pr.rects["image"] = Rect{p0.x, p0.y, img_w, img_h};
    // the overlay's colours: from 0 (attention, rollout and its gradient-weighted form are not
    // negative) to the map's largest value, as every attention picture; its key goes under the image
    Colormap ocm;
    if (!ov.empty()) {
        const GridRange mm = grid_range(ov);  // the finite values (a dropped patch has none)
        ocm.mode = Colormap::Overlay;
        ocm.vmin = std::min(0.f, mm.vmin);
        ocm.vmax = std::max(mm.vmax, ocm.vmin + 1e-9f);
        ocm.opacity = ui.opacity;
        // a flat overlay (every patch within a few percent of the others: random weights' attention) would be one
        // wash of its top colour over the photo: drawn faint, and said under its key, which stays true (issue 36 item 9)
        if (!flat_text.empty()) ocm.opacity = std::min(ui.opacity, 0.2f);
        pr.numbers["overlay.ref"] = oref;
        pr.numbers["overlay.opacity"] = ocm.opacity;
        v.gfx.draw(dl, panel.overlay, p0, p1, ocm);
        pr.numbers["overlay.argmax"] = mm.argmax;
        pr.numbers["overlay.argmin"] = mm.argmin;
        pr.numbers["overlay.lo"] = mm.vmin;
        pr.numbers["overlay.hi"] = mm.vmax;
    }
    // patch grid and indices (every k-th patch when the numbers would not fit their cells)
    const float cell = img_w / float(gw);  // = img_h / gh: square patches
    pr.numbers["image.gh"] = gh;
    pr.numbers["image.gw"] = gw;
    ImU32 gc = IM_COL32(255, 255, 255, 60);
    for (int i = 1; i < gw; ++i) dl->AddLine(ImVec2(p0.x + i * cell, p0.y), ImVec2(p0.x + i * cell, p1.y), gc);
    for (int i = 1; i < gh; ++i) dl->AddLine(ImVec2(p0.x, p0.y + i * cell), ImVec2(p1.x, p0.y + i * cell), gc);
    const float numw = ImGui::CalcTextSize(std::to_string(N - 1).c_str()).x + 4, numh = ImGui::GetTextLineHeight();
    int k = std::max(1, int(std::ceil(std::max(numw, numh) / cell)));
    if (cell * k >= numw && k <= std::max(gh, gw) / 2 + 1) {
        Rect clip{p0.x, p0.y, img_w, img_h};
        for (int n = 0; n < N; ++n) {
            int r = n / gw, col = n % gw;
            if (r % k || col % k) continue;
            ImVec2 at(p0.x + col * cell + 2, p0.y + r * cell + 1);
            if (at.x + numw - 4 > p1.x || at.y + numh > p1.y) continue;
            DrawLabel(dl, pr, "image.patches", at, IM_COL32(255, 255, 255, 150), std::to_string(n), clip);
        }
        pr.numbers["image.patch_label_step"] = k;
    }
    if (const int n = DrawDropped(dl, *t, p0, cell, cell)) pr.numbers["image.dropped"] = n;  // absent: hatched
    if (ui.patch >= 0 && ui.patch < N) {
        ImVec2 a(p0.x + (ui.patch % gw) * cell, p0.y + (ui.patch / gw) * cell);
        dl->AddRect(a, ImVec2(a.x + cell, a.y + cell), IM_COL32(255, 80, 200, 255), 0, 0, 3);
    }
    if (ui.overlay == Overlay::Query && ui.query >= pre && ui.query < T) {  // the query patch: a cyan frame
        const int qp = rd.kept[size_t(ui.query - pre)];  // the patch the query token holds (some may be dropped)
        ImVec2 a(p0.x + (qp % gw) * cell, p0.y + (qp / gw) * cell);
        dl->AddRect(a, ImVec2(a.x + cell, a.y + cell), IM_COL32(0, 230, 255, 255), 0, 0, 3);
        pr.rects["image.query"] = Rect{a.x, a.y, cell, cell};
    }
    if (hovered) {
        ImVec2 m = ImGui::GetIO().MousePos;
        int gx = std::clamp(int((m.x - p0.x) / cell), 0, gw - 1), gy = std::clamp(int((m.y - p0.y) / cell), 0, gh - 1);
        int n = gy * gw + gx;
        // the patch's token in the run's sequence (with patches dropped, the kept ones follow each other)
        int tok = n + pre;
        if (rd.dropped()) {
            const auto it = std::find(rd.kept.begin(), rd.kept.end(), n);
            tok = it == rd.kept.end() ? -1 : pre + int(it - rd.kept.begin());
        }
        if (tok < 0)
            ImGui::SetTooltip("patch %d (row %d, col %d): dropped (an intervention), no token", n, gy, gx);
        else
            ImGui::SetTooltip("patch %d (row %d, col %d) = token %d%s%s", n, gy, gx, tok, ov.empty() ? "" : "\noverlay value: ",
                              ov.empty() ? "" : std::to_string(ov[size_t(n)]).c_str());
        if (ui.paint_drop) {
            // painting: the first patch of a stroke decides (drop, or put back); every patch the stroke enters follows
            const bool is_dropped = std::binary_search(s.options().iv.dropped.begin(), s.options().iv.dropped.end(), n);
            if (ImGui::IsMouseClicked(0)) {
                panel.paint_drop = !is_dropped;
                panel.painted = -1;
            }
            if (ImGui::IsMouseDown(0) && n != panel.painted) {
                panel.painted = n;
                if (is_dropped != panel.paint_drop) toggle_dropped(s, n);
            }
        } else if (ImGui::IsMouseClicked(0)) {
            if (ui.overlay == Overlay::Query) { if (tok >= 0) ui.query = tok; }  // that patch becomes the query
            else ui.patch = ui.patch == n ? -1 : n;
        }
    }
    ImGui::TextDisabled("%s", under_line.c_str());
    if (v.hover && ImGui::IsItemHovered())
        ImGui::SetTooltip("%s", ui.overlay == Overlay::Query ? "click a patch on the image: attention from that patch's token"
                                                             : "click a patch on the image: it is highlighted in every view");
    DroppedLegend(v, *t, "image.dropped");
    DrawScenePeak(v, ov, kinds[int(ui.overlay)]);  // a generated scene: is the overlay's peak on the object (issue 35)
    if (!ov.empty()) {
        // the overlay's key: its values, uniform attention (1/T over the pattern's keys) marked where the
        // overlay is one row of a pattern (the probe's for a model without a cls token)
        const bool attn_row = ui.overlay == Overlay::Cls || ui.overlay == Overlay::Query;
        const StageId row_src = probe && ui.overlay == Overlay::Cls ? StageId{StageKind::HeadAttnPattern} : StageId{StageKind::AttnPattern, 0};
        const Array* pat = attn_row && L > 0 ? t->find(row_src) : nullptr;
        const int keys_n = pat ? int(pat->shape().back()) : 0;
        ColorKey(v, "overlay", ocm, std::max(img_w, ImGui::GetContentRegionAvail().x - 8),
                 keys_n > 0 ? attention_marks(keys_n) : std::vector<KeyMark>{});
        FlatOverlayNote(v, flat_text, random_note);
        if (std::string note = weights_note(s); !note.empty()) pr.strings["overlay.random"] = note;
    }
    if (thumbs || no_summary) draw_summary_row(v, panel, *t, dl, grads, ol, tw, none_line, random_line);
}

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_image() {
    using K = ProbeKind;
    return {
        {K::Rect, "original", "the image file as decoded"},
        {K::Rect, "original.crop", "the region the model sees, on the original"},
        {K::Rect, "image", "the model input"},
        {K::String, "thumbs.none", "why there are no attention thumbnails (no cls token or probe), in their place"},
        {K::Rect, "image.query", "the query patch's frame"},
        {K::Rect, "compute_grads", "the 'Compute gradients' button"},
        {K::Number, "image.patch_label_step", "every k-th patch is numbered"},
        {K::Number, "image.{h|w|gh|gw}", "the run's input size and patch grid, as drawn"},
        {K::Rect, "image.size.{h|w}", "the input-size control's height and width fields (with their - + buttons)"},
        {K::String, "image.size.message", "why the size typed was not applied"},
        {K::String, "image.pos", "what happened to the position embeddings at this size"},
        {K::String, "overlay.name", "the overlay shown, as the menu names it for this model"},
        {K::Group, "image.patches", "patch numbers on the model input"},
        {K::Number, "overlay.argmax", "the overlay's hottest patch"},
        {K::Number, "overlay.argmin", "the overlay's coldest patch"},
        {K::Number, "overlay.{lo|hi|ref|opacity}", "the overlay's smallest and largest value (its key runs from 0 to hi); uniform (1/keys, or the values' mean); the opacity drawn"},
        {K::String, "overlay.flat", "the note under an overlay whose values are within a few percent of each other"},
        {K::Number, "overlay.query", "the query token drawn"},
        {K::String, "preprocess", "the preprocessing steps"},
        {K::String, "preprocess.drawn", "the preprocessing steps as drawn, one line per screen line (wrapped at spaces only)"},
        {K::String, "image.message", "why the image panel shows no input"},
        {K::String, "overlay.message", "why the overlay shows nothing"},
        {K::String, "overlay.error", "the overlay's computation failed"},
        {K::String, "overlay.values", "the overlay's values, comma-separated"},
        {K::Group, "thumbs.range", "the range under each thumbnail (0 .. its max)"},
        {K::Rect, "thumbs", "the thumbnails' row, their names and ranges included (where drawn: it may be scrolled out of view)"},
        {K::Rect, "thumbs.note", "the random-weights note: under the thumbnails, or the flat overlay's line under the key that stands for it"},
        {K::Rect, "image.panel", "the part of the image panel shown (it scrolls; the predictions are under it)"},
        {K::Rect, "image.more_below", "the line under the image panel saying the thumbnails continue below"},
        {K::String, "image.more_below", "what that line says (only while the thumbnails' row is below the part shown)"},
        {K::Number, "thumbs.size", "the side of each attention thumbnail (px)"},
        {K::Number, "thumbs.{0|1|2}.vmax", "the largest value of the cls attention, rollout and grad-weighted thumbnails"},
        {K::String, "thumbs.{0|1|2}.why", "why a thumbnail is empty: under its name, with the session's reason for missing gradients"},
    };
}

}  // namespace vit::app
