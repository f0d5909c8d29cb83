// The status bar, the working panel of a long job and the error panel.
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

namespace fs = std::filesystem;

namespace vit::app {

std::string stages_text(const Trace& t) {
    char b[160];
    const double full = run_dims(t.table().config(), t.options()).full_floats * 4 / 1e6;
    if (!t.on_demand()) {
        std::snprintf(b, sizeof b, "every stage recorded (%.0f MB)", double(t.bytes()) / 1e6);
        return b;
    }
    const Trace::OnDemandStats od = t.on_demand_stats();
    std::snprintf(b, sizeof b, "stages on demand: %.0f MB kept of %.0f MB", double(od.kept_bytes) / 1e6, full);
    std::string out = b;
    if (t.has_grads()) {
        std::snprintf(b, sizeof b, ", gradients checkpointed (%.0f MB kept)", double(od.kept_grad_bytes) / 1e6);
        out += b;
    }
    if (od.kept_block >= 0 && od.kept_block != od.last_block) {
        std::snprintf(b, sizeof b, ", block %d kept whole by the pass", od.kept_block);
        out += b;
    }
    if (od.last_block >= 0) {
        std::snprintf(b, sizeof b, ", block %d%s recomputed (%.0f ms), %d held (%.0f MB)", od.last_block,
                      od.last_grads ? "'s gradients" : "", od.last_ms, od.blocks_held, double(od.cache_bytes) / 1e6);
        out += b;
    }
    return out;
}

std::string status_line(const Session& s, const std::string& notice) {
    if (s.loading() && !s.trace()) {  // nothing on screen is of the model before: its description would be
        std::string line = "loading " + s.loading_spec() + ": the views fill in when its first pass is done";
        line += s.has_image() ? " | image " + fs::path(s.image_path()).filename().string() : " | no image";
        return notice.empty() ? line : line + " | " + notice;
    }
    Config c = s.shown_config();  // the model of the trace on screen, with the pooling it ran with
    if (s.shown_options().pooling) c.pooling = *s.shown_options().pooling;
    std::string line = c.describe();
    if (s.shown_options().pooling) line += " (pooling chosen in the toolbar)";
    line += " | " + s.shown_model()->source;
    if (s.has_image()) line += " | image " + fs::path(s.image_path()).filename().string();
    else line += " | no image";
    if (s.trace()) {
        line += std::string(" | ") + (s.trace()->has_grads() ? "forward+backward" : "forward only");
        if (s.result().reused_base) {
            line += ", the default options' pass kept for Changes (no new pass)";
        } else {
            char b[64];
            std::snprintf(b, sizeof b, " %.1f ms", s.result().ms);
            line += b;
        }
        line += " | " + stages_text(*s.trace());
    }
    if (!notice.empty()) line += " | " + notice;
    return line;
}

namespace {

// What the matrix products run on, in full (as vitscope-cli info's gemm: and blas: lines say it).
std::string gemm_text() {
    std::string t = "matrix products: " + ops::gemm_engine();
    if (!ops::gemm_engine_best()) t += " (not the best kernel for this CPU: see vitscope-cli info)";
    return t + "; LAPACK: " + blas::describe();
}

}  // namespace

// A progress bar with its label inside, recorded as a label (group) of the bar's rectangle.
void ProgressBarLabelled(ViewCtx& v, const char* group, float fraction, float w, const std::string& label) {
    ImGui::ProgressBar(fraction, ImVec2(w, 0), "");
    const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
    const float pad = ImGui::GetStyle().FramePadding.x;
    bool cut = false;
    const std::string shown = fit_text(label, b.x - a.x - 2 * pad, cut);
    const float th = ImGui::GetTextLineHeight();
    DrawLabel(ImGui::GetWindowDrawList(), v.probe, group, ImVec2(a.x + pad, (a.y + b.y - th) / 2), ImGui::GetColorU32(ImGuiCol_Text),
              shown, Rect{a.x, a.y, b.x - a.x, b.y - a.y});
}

bool DrawWorking(ViewCtx& v) {
    if (!v.jobs) return false;
    const auto active = v.jobs->active();
    if (active.empty()) return false;
    std::string all;
    ImGui::Spacing();
    for (const auto& j : active) {
        const std::string step = j->step();
        const float p = j->progress();
        ImGui::TextColored(ImVec4(1, 0.84f, 0.47f, 1), "%s", j->name().c_str());
        // a job that cannot count its work (a file being read, weights being made) says so by moving
        const float shown = p >= 0 ? p : float(std::fmod(ImGui::GetTime() * 0.4, 1.0));
        char pct[32] = "working...";
        if (p >= 0) std::snprintf(pct, sizeof pct, "%.0f%%", 100.0 * p);
        ImGui::ProgressBar(shown, ImVec2(std::min(420.f, ImGui::GetContentRegionAvail().x), 0), pct);
        ImGui::PushTextWrapPos(0);
        if (!step.empty()) ImGui::TextUnformatted(step.c_str());
        ImGui::PopTextWrapPos();
        ImGui::Spacing();
        all += j->name() + (step.empty() ? "" : ": " + step) + "\n";
    }
    v.probe.strings["working"] = all;
    return true;
}

float status_bar_height() { return std::max(ImGui::GetFrameHeight() + 12, ImGui::GetStyle().WindowMinSize.y); }

void DrawStatusWindow(ViewCtx& v, float W, float H) {
    const float h = status_bar_height();
    ImGui::SetNextWindowPos(ImVec2(0, H - h));
    ImGui::SetNextWindowSize(ImVec2(W, h));
    ImGui::Begin("status", nullptr, ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse |
                                        ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoBringToFrontOnFocus);
    DrawStatusBar(v);
    ImGui::End();
}

void DrawStatusBar(ViewCtx& v) {
    Session& s = v.s;
    Probe& pr = v.probe;
    // every job in flight (jobs.h): its name, the step it is at and its progress
    std::string jobs;
    if (v.jobs)
        for (const auto& j : v.jobs->active()) {
            std::string label = j->name();
            if (const std::string step = j->step(); !step.empty()) label += ": " + step;
            if (j->state() == Job::State::Queued) label += " (waiting)";
            if (j->cancelled()) label += " (cancelling)";
            const float p = j->progress();
            char pct[16] = "";
            if (p >= 0) std::snprintf(pct, sizeof pct, " %.0f%%", 100.0 * p);
            ProgressBarLabelled(v, "status.jobs", std::max(0.f, p), 200, label);
            if (v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("%s%s", label.c_str(), pct);
            ImGui::SameLine();
            jobs += label + pct + "\n";
        }
    pr.strings["status.jobs"] = jobs;
    if (!s.errors().empty()) {
        ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%zu error%s (see the error panel)", s.errors().size(),
                           s.errors().size() == 1 ? "" : "s");
        ImGui::SameLine();
    }
    DrawSettingsError(v.settings);
    if (!v.gfx.error().empty()) {
        ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "shader: %s", v.gfx.error().c_str());
        ImGui::SameLine();
    }
    std::string line = status_line(s, v.notice);
    if (s.trace()) pr.strings["status.stages"] = stages_text(*s.trace());
    const Options& shown = s.shown_options();  // the trace on screen's (the toolbar shows the ones asked for)
    if (shown.has_bug()) {
        std::string bug = "BUG on:";
        if (shown.bug_scale_after_softmax) bug += " scale after softmax";
        if (shown.bug_reshape_patches) bug += std::string(shown.bug_scale_after_softmax ? "," : "") + " reshape patches";
        ImGui::TextColored(ImVec4(1, 0.35f, 0.35f, 1), "%s", bug.c_str());
        ImGui::SameLine();
        line = bug + " | " + line;
    }
    // The matrix-product engine has its own field at the right edge ("GEMM: oneDNN 2.6.3 AVX-512",
    // the full text in a tooltip); the line before it is cut with "..." when it does not fit (the
    // whole line in a tooltip).
    const bool best = ops::gemm_engine_best();
    const std::string full_gemm = gemm_text();
    const std::string field = "GEMM: " + ops::gemm_engine_short() + (best ? "" : " (not best)");
    const float spacing = ImGui::GetStyle().ItemSpacing.x;
    const float field_w = ImGui::CalcTextSize(field.c_str()).x;
    // Stages on demand have their own field too, before the GEMM's (the line may be cut): which block
    // was recomputed last; the memory kept and held in its tooltip.
    std::string od_field, od_full;
    if (s.trace() && s.trace()->on_demand()) {
        const Trace::OnDemandStats od = s.trace()->on_demand_stats();
        od_field = "stages on demand" + (od.last_block >= 0 ? ": block " + std::to_string(od.last_block) +
                                                                  (od.last_grads ? "'s gradients" : "") + " recomputed"
                                                            : "");
        od_full = stages_text(*s.trace()) + "\n(the residual stream and the attention patterns are kept; a stage of a block "
                                           "is recomputed from the stream entering it when it is shown, bit for bit)";
        if (s.trace()->has_grads())
            od_full += "\n(gradients: those of the stream and of the attention patterns are kept; a block's others are "
                       "recomputed when shown, by its backward pass from the kept gradient of the stream leaving it, "
                       "bit for bit)";
    }
    const float od_w = od_field.empty() ? 0.f : ImGui::CalcTextSize(od_field.c_str()).x + 2 * spacing + 9;
    const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    const float x_line = ImGui::GetCursorScreenPos().x;
    const float room = std::max(0.f, right - field_w - od_w - 2 * spacing - 9 - x_line);
    std::string shown_line = line.substr(shown.has_bug() ? line.find(" | ") + 3 : 0);
    bool cut = false;
    const std::string fitted = fit_text(shown_line, room, cut);
    ImGui::TextDisabled("%s", fitted.c_str());
    {
        ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
        pr.rects["status.line"] = Rect{a.x, a.y, b.x - a.x, b.y - a.y};
    }
    if (cut && v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", line.c_str());
    if (!od_field.empty()) {
        const float x = right - field_w - od_w;
        ImGui::SameLine(x - ImGui::GetWindowPos().x);
        ImGui::GetWindowDrawList()->AddLine(ImVec2(x - spacing - 4, ImGui::GetCursorScreenPos().y + 2),
                                            ImVec2(x - spacing - 4, ImGui::GetCursorScreenPos().y + ImGui::GetTextLineHeight() - 2),
                                            ImGui::GetColorU32(ImGuiCol_Separator));
        ImGui::TextColored(ImVec4(0.55f, 0.8f, 1.f, 1), "%s", od_field.c_str());
        ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
        pr.rects["status.stages"] = Rect{a.x, a.y, b.x - a.x, b.y - a.y};
        if (v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", od_full.c_str());
    }
    ImGui::SameLine(right - field_w - ImGui::GetWindowPos().x);
    ImGui::GetWindowDrawList()->AddLine(ImVec2(right - field_w - spacing - 4, ImGui::GetCursorScreenPos().y + 2),
                                        ImVec2(right - field_w - spacing - 4, ImGui::GetCursorScreenPos().y + ImGui::GetTextLineHeight() - 2),
                                        ImGui::GetColorU32(ImGuiCol_Separator));
    if (best) ImGui::TextDisabled("%s", field.c_str());
    else ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s", field.c_str());
    {
        ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
        pr.rects["status.gemm"] = Rect{a.x, a.y, b.x - a.x, b.y - a.y};
    }
    if (v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", full_gemm.c_str());
    pr.strings["status.gemm"] = field;
    pr.strings["status.gemm_full"] = full_gemm;
    pr.numbers["status.cut"] = cut;
    pr.strings["status"] = line + " | " + full_gemm;  // everything the bar says, in full
}

void DrawErrorPanel(ViewCtx& v) {
    Session& s = v.s;
    Probe& pr = v.probe;
    if (s.errors().empty()) return;
    ImGuiIO& io = ImGui::GetIO();
    ImGui::SetNextWindowPos(ImVec2(io.DisplaySize.x * 0.5f, 90), ImGuiCond_Appearing, ImVec2(0.5f, 0));
    ImGui::SetNextWindowSize(ImVec2(std::min(760.f, io.DisplaySize.x - 40), 0), ImGuiCond_Appearing);
    ImGui::PushStyleColor(ImGuiCol_WindowBg, IM_COL32(60, 24, 24, 250));
    ImGui::PushStyleColor(ImGuiCol_TitleBgActive, IM_COL32(150, 40, 40, 255));
    ImGui::PushStyleColor(ImGuiCol_TitleBg, IM_COL32(150, 40, 40, 255));
    std::string title = std::to_string(s.errors().size()) + (s.errors().size() == 1 ? " error" : " errors") + "###errors";
    ImGui::Begin(title.c_str(), nullptr, ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoSavedSettings);
    ImGui::SetWindowFocus();
    std::string all;
    size_t dismiss = SIZE_MAX;
    for (size_t i = 0; i < s.errors().size(); ++i) {
        const ErrorItem& e = s.errors()[i];
        ImGui::PushID(int(i));
        ImGui::TextColored(ImVec4(1, 0.7f, 0.6f, 1), "%s", e.title.c_str());
        // read-only text: selectable with the mouse, Ctrl+A / Ctrl+C copy, scrolls when long
        std::vector<char> buf(e.detail.begin(), e.detail.end());
        buf.push_back('\0');
        int lines = 1 + int(std::count(e.detail.begin(), e.detail.end(), '\n'));
        float h = std::min(12, std::max(2, lines + 1)) * ImGui::GetTextLineHeight() + 8;
        ImGui::InputTextMultiline("##detail", buf.data(), buf.size(), ImVec2(-1, h), ImGuiInputTextFlags_ReadOnly);
        if (ImGui::SmallButton("Copy")) ImGui::SetClipboardText((e.title + "\n" + e.detail).c_str());
        ImGui::SameLine();
        if (ImGui::SmallButton("Dismiss")) dismiss = i;
        ImGui::Separator();
        ImGui::PopID();
        all += e.title + "\n" + e.detail + "\n";
    }
    if (s.errors().size() > 1 && ImGui::Button("Dismiss all")) { s.dismiss_errors(); dismiss = SIZE_MAX; }
    ImVec2 pos = ImGui::GetWindowPos(), sz = ImGui::GetWindowSize();
    pr.rects["errors"] = Rect{pos.x, pos.y, sz.x, sz.y};
    pr.strings["errors"] = all;
    ImGui::End();
    ImGui::PopStyleColor(3);
    if (dismiss != SIZE_MAX) s.dismiss_error(dismiss);
}

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_status() {
    using K = ProbeKind;
    return {
        {K::Rect, "status.line", "the status bar's line"},
        {K::Rect, "status.gemm", "the status bar's GEMM field"},
        {K::Rect, "status.stages", "the status bar's stages-on-demand field (only for a trace on demand)"},
        {K::Rect, "errors", "the error panel"},
        {K::Number, "status.cut", "1 when the status line was cut to fit"},
        {K::Group, "status.jobs", "the label of each job's progress bar in the status bar (cut at its end to fit)"},
        {K::String, "status", "everything the status bar says, in full"},
        {K::String, "status.gemm", "the GEMM field"},
        {K::String, "status.gemm_full", "the GEMM field's tooltip"},
        {K::String, "status.jobs", "the jobs running: name and progress, one per line"},
        {K::String, "status.stages", "how the trace on screen holds its stages: every one recorded, or on demand (kept, recomputed)"},
        {K::String, "working", "the work in flight shown in the centre while there is no trace: name and step, one per line"},
        {K::String, "errors", "the error panel's text"},
    };
}

}  // namespace vit::app
