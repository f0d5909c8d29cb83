#include "lessons.h"

#include "learn.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/model/forward.h"
#include "core/teach/analysis.h"
#include "paths.h"
#include "scene_truth.h"

namespace vit::app {

namespace {
std::string itos(long long v) { return std::to_string(v); }
}  // namespace

// ---------------------------------------------------------------- the file

namespace {
const char* const kFacts[] = {"cls-peak", "score-peak", "patch-is-square", "pos-vs-patches", "ln-normalized-mean-zero", "ln-out-mean-zero",
                              "softmax-sums-one", "weights-top3-half", "attn-small-change", "gelu-negative", "depth-norm", "top-class",
                              "drop-object", "drop-clutter", "affine-off"};
std::string trim(const std::string& s) {
    const size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}
}  // namespace

std::vector<Lesson> parse_lessons(const std::string& text, const std::string& path) {
    std::vector<Lesson> out;
    std::istringstream in(text);
    std::string line;
    int n = 0;
    auto bad = [&](int at, const std::string& why) { throw std::runtime_error(path + ":" + itos(at) + ": " + why); };
    auto finish = [&] {
        if (out.empty()) return;
        const Lesson& L = out.back();
        for (auto [k, v] : {std::pair<const char*, const std::string*>{"title", &L.title}, {"step", &L.step}, {"ask", &L.ask},
                            {"answer", &L.fact}, {"why", &L.why}})
            if (v->empty()) bad(L.line, std::string("the lesson has no '") + k + "'");
    };
    while (std::getline(in, line)) {
        ++n;
        const std::string l = trim(line);
        if (l.empty() || l[0] == '#') continue;
        if (l == "[lesson]") {
            finish();
            out.push_back(Lesson{});
            out.back().line = n;
            continue;
        }
        const size_t eq = l.find('=');
        if (eq == std::string::npos) bad(n, "expected '[lesson]' or 'key = value', got '" + l.substr(0, 60) + "'");
        if (out.empty()) bad(n, "'" + trim(l.substr(0, eq)) + "' before the first [lesson]");
        const std::string k = trim(l.substr(0, eq)), v = trim(l.substr(eq + 1));
        Lesson& L = out.back();
        if (k == "title") L.title = v;
        else if (k == "ask") L.ask = v;
        else if (k == "why") L.why = v;
        else if (k == "step") {
            const std::vector<std::string> ids = learn_step_ids();
            if (std::find(ids.begin(), ids.end(), v) == ids.end()) {
                std::string all;
                for (const std::string& id : ids) all += (all.empty() ? "" : ", ") + id;
                bad(n, "no Learn step '" + v + "' (the steps: " + all + ")");
            }
            L.step = v;
        } else if (k == "answer") {
            std::istringstream w(v);
            std::string kind, a, b;
            w >> kind >> a >> b;
            if (kind == "choice") {
                if (b.empty()) bad(n, "'choice' takes the buttons (a|b) and a fact: 'choice yes|no ln-out-mean-zero'");
                for (size_t s0 = 0;;) {
                    const size_t s1 = a.find('|', s0);
                    L.choices.push_back(a.substr(s0, s1 - s0));
                    if (s1 == std::string::npos) break;
                    s0 = s1 + 1;
                }
                if (L.choices.size() < 2) bad(n, "a choice needs at least two buttons (a|b)");
                L.fact = b;
            } else if (kind == "click-patch" || kind == "click-key" || kind == "choice-classes") {
                if (a.empty()) bad(n, "'" + kind + "' takes a fact");
                L.fact = a;
            } else {
                bad(n, "unknown answer '" + kind + "' (click-patch, click-key, choice, choice-classes)");
            }
            L.kind = kind;
            if (std::find_if(std::begin(kFacts), std::end(kFacts), [&](const char* f) { return L.fact == f; }) == std::end(kFacts))
                bad(n, "unknown fact '" + L.fact + "' (see the list at the top of assets/lessons/scenes.txt)");
        } else {
            bad(n, "unknown key '" + k + "' (title, step, ask, answer, why)");
        }
    }
    finish();
    if (out.empty()) throw std::runtime_error(path + ": no [lesson] in it");
    return out;
}

std::string default_lessons_path() {
    const std::string root = data_paths().root;
    return root.empty() ? "" : root + "/lessons/scenes.txt";
}

std::vector<Lesson> load_lessons(const std::string& path) {
    std::error_code ec;
    if (path.empty() || !std::filesystem::is_regular_file(path, ec)) throw std::runtime_error(path + ": no such lessons file");
    if (std::filesystem::file_size(path, ec) > (1u << 20)) throw std::runtime_error(path + ": over 1 MiB: not a lessons file");
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    if (!f) throw std::runtime_error(path + ": cannot be read");
    return parse_lessons(ss.str(), path);
}


// ---------------------------------------------------------------- the tour

std::vector<int> tour_lessons(const std::vector<Lesson>& lessons, const std::vector<LearnStepInfo>& steps) {
    std::vector<int> out;
    for (size_t i = 0; i < lessons.size(); ++i)
        if (std::any_of(steps.begin(), steps.end(), [&](const LearnStepInfo& s) { return s.id == lessons[i].step; })) out.push_back(int(i));
    return out;
}

int tour_size(const Session& s, const std::vector<Lesson>& lessons) {
    std::vector<LearnStepInfo> steps = learn_steps(s);
    if (steps.empty() && s.shown_model()) {
        try {
            steps = learn_steps(*StageTable::get(s.shown_config(), s.shown_options()), s.shown_config());
        } catch (const std::exception&) {
            return 0;
        }
    }
    return int(tour_lessons(lessons, steps).size());
}

// ---------------------------------------------------------------- what if

bool is_what_if(const std::string& fact) { return fact == "drop-object" || fact == "drop-clutter" || fact == "affine-off"; }

namespace {
std::string pct(double p) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f%%", 100 * p);
    return b;
}
}  // namespace

WhatIfPass prepare_what_if(const Session& s, const Trace& t, const std::string& fact) {
    WhatIfPass w;
    const Array* probs = t.find(StageId{StageKind::Probs, -1});
    const Array* logits = t.find(StageId{StageKind::Logits, -1});
    const Array* input = t.find(StageId{StageKind::Input, -1});
    const auto model = s.shown_model();
    if (!probs || !logits || !input || !model || input->dimension() != 3) {
        w.unanswerable = "This model has no classes to predict, so there is no prediction to change.";
        return w;
    }
    w.fact = fact;
    w.base = w.opt = t.options();
    if (fact == "affine-off") {
        w.opt.affine = !w.opt.affine;
        w.what = w.opt.affine ? "with elementwise_affine on (gamma and beta applied)" : "with elementwise_affine off (no gamma and beta)";
    } else {
        const auto sp = scene_patches(s, t);
        const bool object = fact == "drop-object";
        if (!sp) {
            w.unanswerable = "This image has no known object (only a generated scene has one: image menu, New test scene).";
            return w;
        }
        const std::vector<int>& ps = object ? sp->object : sp->clutter;
        if (ps.empty()) {
            w.unanswerable = object ? "The object covers no patch of this run." : "No distractor covers a patch of its own in this scene.";
            return w;
        }
        std::vector<int>& d = w.opt.iv.dropped;
        d.insert(d.end(), ps.begin(), ps.end());
        std::sort(d.begin(), d.end());
        d.erase(std::unique(d.begin(), d.end()), d.end());
        w.what = "without the " + std::string(object ? "object's " : "distractors' ") + itos(long(ps.size())) + " patches";
    }
    w.model = model;
    w.x = Tensor4::from_shape({1, input->shape(0), input->shape(1), input->shape(2)});
    std::copy(input->data(), input->data() + input->size(), w.x.data());
    w.clean_logits.assign(logits->data(), logits->data() + logits->size());
    w.clean_probs.assign(probs->data(), probs->data() + probs->size());
    return w;
}

WhatIf run_what_if(const WhatIfPass& w, const std::atomic<bool>* cancel) {
    WhatIf r;
    if (!w.model) {
        r.detail = w.unanswerable;
        return r;
    }
    const Config& c = w.model->weights.cfg;
    std::vector<float> p(w.clean_probs.size());
    bool same_logits = false;  // the second pass's logits are the trace's, bit for bit
    try {
        run_dims(c, w.opt);  // never every patch dropped
        WorkspacePtr ws = make_workspace();
        Trace scratch;
        const Array& logits = forward_batch(w.model->weights, w.x, w.opt, scratch, Keep::Output, *ws, {}, cancel);
        if (logits.size() != p.size()) throw std::runtime_error("the second pass gave " + itos(long(logits.size())) + " logits");
        same_logits = std::equal(logits.data(), logits.data() + logits.size(), w.clean_logits.begin());
        const float mx = *std::max_element(logits.data(), logits.data() + logits.size());
        double z = 0;
        for (size_t i = 0; i < p.size(); ++i) z += (p[i] = std::exp(logits.data()[i] - mx));
        for (float& v : p) v = float(v / z);
    } catch (const Cancelled&) {
        throw;
    } catch (const std::exception& e) {
        r.detail = std::string("The second pass could not run: ") + e.what();
        return r;
    }
    const std::vector<std::string> names = class_labels(c, p.size());
    const std::vector<float>& p0 = w.clean_probs;
    const int before = int(std::max_element(p0.begin(), p0.end()) - p0.begin());
    const int after = int(std::max_element(p.begin(), p.end()) - p.begin());
    r.answer = after == before ? "stays" : "changes";
    // a switch that cannot change anything in this model says why (its LayerNorms' gamma = 1 and beta = 0)
    const std::string nothing = w.fact == "affine-off" && same_logits ? why_nothing_changed(w.model->weights, w.opt, w.base) : "";
    const std::string was = names[size_t(before)] + " (" + pct(p0[size_t(before)]) + ")";
    r.detail = after == before ? "It stays: " + w.what + " the model still says " + names[size_t(before)] + ", now " + pct(p[size_t(before)]) +
                                     " (was " + pct(p0[size_t(before)]) + ")."
                               : "It changes: " + w.what + " the model says " + names[size_t(after)] + " (" + pct(p[size_t(after)]) + ") instead of " + was + ".";
    if (!nothing.empty()) r.detail += " Nothing in the model changed at all: " + nothing + ".";
    return r;
}

}  // namespace vit::app
