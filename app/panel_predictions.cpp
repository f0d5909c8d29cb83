// The predictions panel: the top classes, and notes on images outside the model's domain.
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

std::string fit_text(const std::string& t, float w, bool& cut) {
    cut = false;
    if (ImGui::CalcTextSize(t.c_str()).x <= w) return t;
    cut = true;
    size_t lo = 0, hi = t.size();
    while (lo < hi) {  // the longest prefix that fits with the ellipsis
        size_t mid = (lo + hi + 1) / 2;
        if (ImGui::CalcTextSize((t.substr(0, mid) + "...").c_str()).x <= w) lo = mid; else hi = mid - 1;
    }
    while (lo > 0 && (static_cast<unsigned char>(t[lo]) & 0xC0) == 0x80) --lo;  // whole UTF-8 characters
    return t.substr(0, lo) + "...";
}

namespace {

// Whether a decoded image has colour (a channel differs from another somewhere), not just three
// equal channels.
bool has_colour(const Image& im) {
    // pixels.dimension(), not rank(): rank() takes an Array, and converting the image to one copied it
    // whole every frame (200 MB for a photo scaled to 25 megapixels: issue 37's 6.2 s to open one)
    if (im.channels < 3 || im.pixels.dimension() != 3) return false;
    const size_t plane = size_t(im.width) * size_t(im.height);
    const float* p = im.pixels.data();
    for (size_t i = 0; i < plane; ++i)
        if (std::fabs(p[i] - p[plane + i]) > 2.f / 255 || std::fabs(p[plane + i] - p[2 * plane + i]) > 2.f / 255) return true;
    return false;
}

// The notes above the predictions, from what is known: presets' random weights, a photo outside
// what the model was trained on (its metadata names the data set; its input is gray and small), and
// a prediction that is not a number.
std::vector<std::pair<std::string, std::string>> prediction_notes(const Session& s) {
    std::vector<std::pair<std::string, std::string>> v;  // (probe key, text)
    if (std::string note = weights_note(s); !note.empty())
        v.push_back({"predictions.note", "Top predictions (" + note + ": meaningless)"});
    if (std::string d = domain_note(s); !d.empty()) v.push_back({"predictions.domain", d});
    const Trace* t = s.trace();
    if (const Array* probs = t ? t->find(StageId{StageKind::Probs}) : nullptr) {
        const NonFinite nf = count_nonfinite(*probs);
        if (nf.any()) v.push_back({"predictions.nonfinite", "No prediction: probs holds " + nf.describe() + " (see the error panel)"});
    }
    return v;
}

}  // namespace

std::string domain_note(const Session& s) {
    if (!s.has_image()) return "";
    const auto m = s.shown_model();
    const Config& c = s.shown_config();
    const Image& im = s.image();
    const int fw = im.file_width > 0 ? im.file_width : im.width, fh = im.file_height > 0 ? im.file_height : im.height;
    auto it = m->metadata.find("dataset");
    const std::string dataset = it == m->metadata.end() ? "" : it->second;
    const bool colour_lost = c.channels == 1 && has_colour(im);
    const int shrink = std::max(fw, fh) / std::max(1, c.image_size);
    std::string what;
    if (colour_lost) what = "this colour photo was turned gray";
    if (shrink >= 4) what += (what.empty() ? "this " + std::to_string(fw) + "x" + std::to_string(fh) + " image was" : " and") +
                             std::string(" shrunk ") + std::to_string(shrink) + "x";
    if (what.empty()) return "";
    const std::string input = std::to_string(c.image_size) + "x" + std::to_string(c.image_size) + (c.channels == 1 ? " gray" : " RGB");
    if (dataset == "fashion-mnist")
        return "This model knows only " + input + " pictures of clothing (Fashion-MNIST, its training data): " + what +
               ", and the prediction is one of its " + std::to_string(c.classes) + " clothing classes whatever the photo shows.";
    if (!dataset.empty())
        return "This model was trained on " + dataset + " (" + input + "): " + what + "; a photo unlike its training data gets a guess.";
    return "This model takes " + input + " input: " + what + ".";
}

float predictions_height(ViewCtx& v) {
    const float w = ImGui::GetContentRegionAvail().x;
    float h = ImGui::GetTextLineHeightWithSpacing() + 5 * ImGui::GetFrameHeightWithSpacing() + ImGui::GetStyle().WindowPadding.y;
    for (auto& [key, text] : prediction_notes(v.s))
        h += ImGui::CalcTextSize(text.c_str(), nullptr, false, w).y + ImGui::GetStyle().ItemSpacing.y;
    return h;
}

void DrawPredictions(ViewCtx& v) {
    Session& s = v.s;
    Probe& pr = v.probe;
    const Trace* t = s.trace();
    const Array* probs = t ? t->find(StageId{StageKind::Probs}) : nullptr;
    if (t && !probs) {  // a model whose output is an embedding (DINO, DINOv2, CLIP, SigLIP, MAE): no classes to rank
        if (const Array* e = t->find(StageId{StageKind::Embedding})) {
            double sq = 0;
            for (size_t i = 0; i < e->size(); ++i) sq += double(e->data()[i]) * e->data()[i];
            char b[200];
            std::snprintf(b, sizeof b, "No classification head: the output is an embedding of %zu numbers (stage embedding), "
                          "norm %.4f. Nothing to rank.", e->size(), std::sqrt(sq));
            ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + ImGui::GetContentRegionAvail().x);
            ImGui::TextDisabled("%s", b);
            ImGui::PopTextWrapPos();
            pr.strings["predictions.embedding"] = b;
        }
        return;
    }
    if (!probs) return;
    const Array& pt = *probs;
    const float* pv = values(pt);
    auto p = [pv](size_t i) { return pv[i]; };
    const Config& c = s.shown_config();
    const std::vector<int> idx = top_k(pv, pt.size(), 5);  // the CLI's order too: ties by class index
    const auto notes = prediction_notes(s);
    bool titled = false;
    ImGui::PushTextWrapPos(0);
    for (auto& [key, text] : notes) {
        ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "%s", text.c_str());
        if (key == "predictions.note") { pr.strings[key] = weights_note(s); titled = true; }
        else pr.strings[key] = text;
    }
    ImGui::PopTextWrapPos();
    if (!titled) ImGui::TextDisabled("Top predictions");
    const float bar_w = std::min(120.f, ImGui::GetContentRegionAvail().x * 0.4f);
    for (int k = 0; k < std::min<int>(5, int(idx.size())); ++k) {
        int i = idx[size_t(k)];
        std::string name = c.class_names.size() == pt.size() ? c.class_names[size_t(i)] : "class " + std::to_string(i);
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.1f%%", 100 * p(size_t(i)));
        ImGui::ProgressBar(p(size_t(i)), ImVec2(bar_w, 0), buf);
        ImGui::SameLine();
        // a long ImageNet name is cut to the panel, in full in its tooltip
        bool cut = false;
        ImGui::TextUnformatted(fit_text(name, ImGui::GetContentRegionAvail().x, cut).c_str());
        if (cut && v.hover && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", name.c_str());
        if (k == 0) pr.strings["prediction"] = name;
        pr.strings["prediction." + std::to_string(k)] = std::to_string(i) + " " + name;
    }
}

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_predictions() {
    using K = ProbeKind;
    return {
        {K::String, "predictions.embedding", "what a model without a classifier outputs instead"},
        {K::String, "prediction", "the top-1 class name"},
        {K::Rect, "navigator.predictions", "the top predictions, under the stage list (issue 36: the image's column is the image's)"},
        {K::String, "predictions.note", "why the predictions mean nothing"},
        {K::String, "predictions.{domain|nonfinite}", "the image is outside what the model knows; the prediction is not a number"},
        {K::String, "prediction.<k>", "the k-th prediction: class index and name"},
    };
}

}  // namespace vit::app
