// The guided tour (issue 19 item 5): a few steps through the model, each showing a stage, a tab or an
// overlay, saying what to notice in the picture on screen (computed from the trace on screen: which
// token a row's largest weight goes to, how far a switch moved the prediction) and asking the learner
// to do one thing (click a patch, press A, open a tab, turn on a BUG switch), which it checks. The
// panel takes the place of the stage list on the left, so it never covers the view it talks about.
#include <GLFW/glfw3.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/model_map.h"
#include "app/tabs/tab.h"
#include "app/tensor_access.h"

namespace vit::app {

namespace {

const Array* find(const Trace& t, StageKind k, int layer = -1) { return t.find(StageId{k, layer}); }

std::string pct(double p) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f%%", 100 * p);
    return b;
}

std::string tok(const Trace& t, int i, StageKind k) { return token_label(t.table(), i, false, before_registers(k)); }

// The predicted class and its probability, from the probs of a trace.
std::pair<std::string, float> prediction(const Session& s, const Trace& t) {
    const Array* p = find(t, StageKind::Probs);
    if (!p || p->size() == 0) return {"(none)", 0.f};
    const int k = top_k(p->data(), p->size(), 1).front();
    return {class_labels(s.shown_config(), p->size())[size_t(k)], p->data()[k]};
}

// Options shown: the trace's (a pass with newer ones may be running).
const Options& shown(const Session& s) { return s.shown_options(); }

// The first stage that changed from the baseline, and the logits' relative change.
std::string change_summary(const Session& s) {
    const Result& r = s.result();
    if (!r.trace || !r.base || r.base == r.trace) return "";
    std::string first;
    double logits = 0;
    const ChangesState cs = s.changes();
    if (!cs.list) return cs.pending ? "comparing every stage with the baseline (the Changes tab shows its progress)"
                                    : "the comparison with the baseline failed: " + cs.error;
    for (const StageChange& c : *cs.list) {
        if (first.empty() && c.diff_norm > 0) first = c.name;
        if (c.id.kind == StageKind::Logits && c.base_norm > 0) logits = c.diff_norm / c.base_norm;
    }
    if (first.empty()) {  // and why (issue 36 item 2): never an effect that did not happen
        const auto m = s.shown_model();
        const std::string why = m ? why_nothing_changed(m->weights, shown(s), base_options(shown(s))) : "";
        return "nothing changed: every stage equals the default run's" + (why.empty() ? std::string() : " (" + why + ")");
    }
    const auto now = prediction(s, *r.trace), before = prediction(s, *r.base);
    return "the first stage that changed is " + first + "; the logits moved by " + fmt(float(logits)) +
           " of their size; the prediction is " + now.first + " (" + pct(now.second) + ") against " + before.first + " (" +
           pct(before.second) + ") with the default options";
}

using Notice = std::string (*)(const Session&, const UiState&);
using Done = bool (*)(const Session&, const UiState&);

struct StepDef {
    const char* id;
    StageKind kind;        // the stage it shows (StageKind::Input with show_stage false: none)
    int layer;             // -1 outside the blocks
    bool show_stage;
    Tab tab;
    bool set_overlay;      // it puts the cls attention of block 0 over the image
    const char* title;
    const char* task;      // what to do, one thing
    Notice notice;
    Done done;
};

// ---- what to notice, computed from the trace on screen

std::string n_input(const Session& s, const UiState&) {
    const Trace& t = *s.trace();
    const Array* x = find(t, StageKind::Input);
    if (!x || rank(*x) != 3) return "";
    const Stats st = stats(x->data(), x->size(), 2);
    const Config& c = s.shown_config();
    return "The image as the model sees it: " + std::to_string(extent(*x, 0)) + " channel" + (extent(*x, 0) == 1 ? "" : "s") +
           " of " + std::to_string(extent(*x, 1)) + "x" + std::to_string(extent(*x, 2)) +
           ", normalized as (x - mean) / std, so 0 (white here) is the training data's mean (" + fmt(c.pre.mean.empty() ? 0.f : c.pre.mean[0]) +
           "), red is brighter and blue darker. The values run from " + fmt(st.min) + " to " + fmt(st.max) + ".";
}

std::string n_patches(const Session& s, const UiState& ui) {
    const Trace& t = *s.trace();
    const Array* p = find(t, StageKind::Patches);
    if (!p || rank(*p) != 2) return "";
    const RunDims& d = t.table().dims();
    const int P = s.shown_config().patch, C = s.shown_config().channels;
    std::string n = "Each of the " + std::to_string(extent(*p, 0)) + " rows is one " + std::to_string(P) + "x" + std::to_string(P) +
                    " tile of the input (" + std::to_string(d.gh) + " x " + std::to_string(d.gw) + " tiles, numbered row by row), "
                    "flattened to " + std::to_string(extent(*p, 1)) + " numbers" + (C > 1 ? ", one channel after the other" : "") + ".";
    if (ui.patch >= 0) n += " Your patch p" + std::to_string(ui.patch) + " is row " + std::to_string(ui.patch) + ", outlined.";
    return n;
}

std::string n_patch_embed(const Session& s, const UiState&) {
    const Trace& t = *s.trace();
    const Array* e = find(t, StageKind::PatchEmbed);
    const Array* p = find(t, StageKind::Patches);
    if (!e || !p || rank(*e) != 2) return "";
    const Stats st = stats(e->data(), e->size(), 2);
    const size_t D = extent(*e, 1);
    return "One matrix (" + std::to_string(extent(*p, 1)) + " x " + std::to_string(D) + ") turns every tile into " + std::to_string(D) +
           " numbers; row k is still patch k. The largest value here, " + fmt(st.max) + ", is patch p" + std::to_string(st.argmax / D) +
           "'s dim " + std::to_string(st.argmax % D) + ".";
}

std::string n_tokens(const Session& s, const UiState&) {
    const Trace& t = *s.trace();
    const Array* x = find(t, StageKind::Tokens);
    if (!x || rank(*x) != 2) return "";
    const Config& c = s.shown_config();
    const int prefix = int(c.cls_token) + int(c.dist_token);
    std::string added = c.cls_token ? (c.dist_token ? "a cls and a dist token were" : "a learned cls token was") : "no token was";
    return "Before the patches, " + added + " put in front: there are now " + std::to_string(extent(*x, 0)) + " rows (tokens). Token 0 is " +
           tok(t, 0, StageKind::Tokens) + ", token " + std::to_string(prefix) + " is " + tok(t, prefix, StageKind::Tokens) +
           ": patch n is token n + " + std::to_string(prefix) + ". The row names on the left say which is which.";
}

std::string n_embed(const Session& s, const UiState&) {
    const Trace& t = *s.trace();
    const Array* a = find(t, StageKind::Tokens);
    const Array* b = find(t, StageKind::Embed);
    if (!a || !b || !same_shape(*a, *b) || rank(*a) != 2) return "";
    const size_t T = extent(*a, 0), D = extent(*a, 1);
    size_t best = 0;
    double bn = -1, rn = 0;
    for (size_t i = 0; i < T; ++i) {
        double d2 = 0, r2 = 0;
        for (size_t j = 0; j < D; ++j) {
            const double d = double(b->data()[i * D + j]) - a->data()[i * D + j];
            d2 += d * d;
            r2 += double(a->data()[i * D + j]) * a->data()[i * D + j];
        }
        if (d2 > bn) { bn = d2; best = i; rn = r2; }
    }
    return "Position embeddings were added (embed = tokens + pos_embed): the same patch at another place would now differ. "
           "They moved token " + tok(t, int(best), StageKind::Embed) + " the most: by " + fmt(float(std::sqrt(bn))) + " (its row's size was " +
           fmt(float(std::sqrt(rn))) + ").";
}

std::string n_layernorm(const Session& s, const UiState&) {
    const Trace& t = *s.trace();
    const Array* m = find(t, StageKind::Ln1Mean, 0);
    const Array* sd = find(t, StageKind::Ln1Std, 0);
    const Array* nz = find(t, StageKind::Ln1Normalized, 0);
    if (!m || !sd || !nz || rank(*nz) != 2) return "";
    const Stats ss = stats(sd->data(), sd->size(), 2);
    const size_t D = extent(*nz, 1);
    double mean = 0, var = 0;
    for (size_t j = 0; j < D; ++j) mean += nz->data()[j];
    mean /= double(D);
    for (size_t j = 0; j < D; ++j) var += (nz->data()[j] - mean) * (nz->data()[j] - mean);
    // what turning elementwise_affine off would do, on this model: nothing where gamma = 1 and beta = 0
    const auto mw = s.shown_model();
    const bool identity = mw && layernorms_are_identity(mw->weights);
    const std::string aff = !shown(s).affine ? "elementwise_affine is off: out equals normalized"
                            : identity ? "out = normalized x gamma + beta, column by column; in this model every gamma is 1 and every "
                                         "beta 0 (nn.LayerNorm's initial values), so out already equals normalized and turning "
                                         "elementwise_affine off will change nothing"
                                       : "out = normalized x gamma + beta, column by column";
    return "LayerNorm works row by row: token " + tok(t, 0, StageKind::Ln1Mean) + " had mean " + fmt(m->data()[0]) + " and std " +
           fmt(sd->data()[0]) + "; normalized, its row has mean " + fmt(float(mean)) + " and std " + fmt(float(std::sqrt(var / double(D)))) +
           ", like every row. The widest row before was token " + tok(t, int(ss.argmax), StageKind::Ln1Std) + " (std " + fmt(ss.max) +
           "). " + aff + ".";
}

std::string n_changes(const Session& s, const UiState&) {
    if (shown(s) == base_options(shown(s)))
        return "The options are at their defaults, so there is nothing to compare: press A (the step before) to turn off "
               "elementwise_affine and come back.";
    return "With " + shown(s).describe() + ": " + change_summary(s) + ".";
}

std::string n_scores(const Session& s, const UiState& ui) {
    const Trace& t = *s.trace();
    const Array* a = find(t, StageKind::AttnScores, 0);
    if (!a || rank(*a) != 3) return "";
    const Slice2D sl = slice2d(*a, ui.head);
    const Stats st = stats(sl.data, size_t(sl.cols), 2);
    const Array* q = find(t, StageKind::AttnQ, 0);
    const std::string d = q && rank(*q) == 3 ? std::to_string(extent(*q, 2)) : "d";
    return "Head " + std::to_string(sl.slice) + ": scores = q . k / sqrt(" + d + "). Row 0 is what the " + tok(t, 0, StageKind::AttnScores) +
           " token asks of every token; its largest score, " + fmt(st.max) + ", is for " + tok(t, int(st.argmax), StageKind::AttnScores) +
           ", its smallest (" + fmt(st.min) + ") for " + tok(t, int(st.argmin), StageKind::AttnScores) + ".";
}

std::string n_pattern(const Session& s, const UiState& ui) {
    const Trace& t = *s.trace();
    const Array* a = find(t, StageKind::AttnPattern, 0);
    if (!a || rank(*a) != 3) return "";
    const Slice2D sl = slice2d(*a, ui.head);
    const Stats st = stats(sl.data, size_t(sl.cols), 2);
    double sum = 0;
    for (int j = 0; j < sl.cols; ++j) sum += sl.data[j];
    return "The softmax of each row of the scores: every row sums to 1 (row 0 sums to " + fmt(float(sum)) + "). Token 0 is " +
           tok(t, 0, StageKind::AttnPattern) + "; in head " + std::to_string(sl.slice) + " the largest weight in its row goes to " +
           tok(t, int(st.argmax), StageKind::AttnPattern) + " (" + fmt(st.max) + "; even attention would give each of the " +
           std::to_string(sl.cols) + " tokens 1/" + std::to_string(sl.cols) + " = " + fmt(1.f / float(sl.cols)) + ").";
}

std::string n_overlay(const Session& s, const UiState&) {
    const Trace& t = *s.trace();
    std::vector<float> a;
    try {
        a = cls_attention(t, 0, -1);
    } catch (const std::exception& e) {
        return std::string("This model has no cls attention to lay over the image: ") + e.what();
    }
    if (a.empty()) return "";
    const auto mx = std::max_element(a.begin(), a.end());
    const Array* p = find(t, StageKind::AttnPattern, 0);
    const int T = p && rank(*p) == 3 ? int(extent(*p, 2)) : int(a.size()) + 1;
    return "Over the image on the right: the cls token's attention in block 0, the mean of the heads (overlay 'cls attention'). "
           "Its hottest patch is p" + std::to_string(mx - a.begin()) + " (" + fmt(*mx) + "; even attention would be 1/" +
           std::to_string(T) + " = " + fmt(1.f / float(T)) + ").";
}

std::string n_grid(const Session& s, const UiState&) {
    const Trace& t = *s.trace();
    const int L = t.depth(), H = s.shown_config().heads;
    float best = -1;
    int bl = 0, bh = 0;
    try {
        for (int l = 0; l < L; ++l)
            for (int h = 0; h < H; ++h) {
                const std::vector<float> a = cls_attention(t, l, h);
                const float m = a.empty() ? 0.f : *std::max_element(a.begin(), a.end());
                if (m > best) { best = m; bl = l; bh = h; }
            }
    } catch (const std::exception& e) {
        return std::string("No cls attention to show: ") + e.what();
    }
    const Array* p = find(t, StageKind::AttnPattern, 0);
    const int T = p && rank(*p) == 3 ? int(extent(*p, 2)) : 1;
    return "The cls token's attention for every layer (rows) and head (columns), on one scale from 0; even attention (1/" +
           std::to_string(T) + ") is marked on the key. The most concentrated map is layer " + std::to_string(bl) + ", head " +
           std::to_string(bh) + ": its largest weight, " + fmt(best) + ", is " + fmt_short(best * float(T)) + " times even." +
           (weights_note(s).empty() ? "" : " (Random weights: the pattern means nothing.)");
}

std::string n_mlp(const Session& s, const UiState&) {
    const Trace& t = *s.trace();
    const Array* pre = find(t, StageKind::MlpPre, 0);
    const Array* post = find(t, StageKind::MlpPost, 0);
    if (!pre || !post) return "";
    size_t neg = 0;
    for (size_t i = 0; i < pre->size(); ++i) neg += pre->data()[i] < 0;
    const Stats st = stats(post->data(), post->size(), 2);
    return "GELU, value by value: " + pct(double(neg) / double(pre->size())) + " of mlp.pre was negative, and GELU squashed those toward "
           "0 (its smallest output here is " + fmt(st.min) + "; GELU never goes below -0.17), while the positive ones pass almost unchanged.";
}

std::string n_bug(const Session& s, const UiState& ui) {
    const Trace& t = *s.trace();
    const Array* a = find(t, StageKind::AttnPattern, 0);
    if (!a || rank(*a) != 3) return "";
    const Slice2D sl = slice2d(*a, ui.head);
    double sum = 0;
    for (int j = 0; j < sl.cols; ++j) sum += sl.data[j];
    const Array* q = find(t, StageKind::AttnQ, 0);
    const int d = q && rank(*q) == 3 ? int(extent(*q, 2)) : 1;
    if (shown(s).bug_scale_after_softmax)
        return "BUG on: the pattern was divided by sqrt(" + std::to_string(d) + ") after the softmax, so row 0 of head " +
               std::to_string(sl.slice) + " now sums to " + fmt(float(sum)) + " (1 / sqrt(" + std::to_string(d) + ") = " +
               fmt(1.f / std::sqrt(float(d))) + "), not 1: the weights are no longer an average.";
    return "A classic bug: dividing by sqrt(d) after the softmax instead of before. Right now row 0 of head " + std::to_string(sl.slice) +
           " sums to " + fmt(float(sum)) + ", as a softmax's row must.";
}

std::string n_bug_changes(const Session& s, const UiState&) {
    if (!shown(s).bug_scale_after_softmax) return "The BUG switch is off: press B (the step before) to see what it does downstream.";
    return "What the bug does downstream: " + change_summary(s) + ".";
}

std::string n_logits(const Session& s, const UiState&) {
    const Trace& t = *s.trace();
    const Array* l = find(t, StageKind::Logits);
    if (!l || l->size() == 0) return "";
    const auto p = prediction(s, t);
    const int k = top_k(l->data(), l->size(), 1).front();
    return "The prediction: " + p.first + ", logit " + fmt(l->data()[k]) + " (the longest red bar); probs = softmax(logits) gives it " +
           pct(p.second) + "." + (weights_note(s).empty() ? "" : " (Random weights: this prediction means nothing.)");
}

std::string n_map(const Session& s, const UiState&) {
    const Trace& t = *s.trace();
    return "The whole model on one page: " + std::to_string(t.depth()) + " blocks of LayerNorm, attention, +, LayerNorm, MLP, +, "
           "drawn once with 'x " + std::to_string(t.depth()) + "'; the shapes on the arrows are this trace's.";
}

// ---- whether the learner did it (against what was on screen when the step began)

bool d_patch(const Session&, const UiState& ui) { return ui.patch >= 0 && ui.patch != ui.tour_entry.patch; }
bool d_visited(const Session&, const UiState& ui) { return ui.tour_entry.visited; }
bool d_grad(const Session& s, const UiState& ui) { return s.trace()->has_grads() ? ui.show_grad : ui.zoom > 1; }
// a switch's task is done when the learner flipped it during the step (not when it already was so)
bool d_affine_off(const Session& s, const UiState& ui) { return !shown(s).affine && ui.tour_entry.affine; }
bool d_affine_on(const Session& s, const UiState& ui) { return shown(s).affine && !ui.tour_entry.affine; }
bool d_head(const Session&, const UiState& ui) { return ui.head != ui.tour_entry.head; }
bool d_cell(const Session&, const UiState& ui) { return ui.cell_r >= 0 && ui.cell_c >= 0; }
bool d_query(const Session&, const UiState& ui) { return ui.overlay == Overlay::Query && ui.query > 0; }
bool d_map_click(const Session&, const UiState& ui) {
    return ui.overlay == Overlay::Cls && (ui.overlay_layer != ui.tour_entry.overlay_layer || ui.overlay_head != ui.tour_entry.overlay_head);
}
bool d_pagedown(const Session& s, const UiState& ui) {
    const auto e = shown_stage(s, ui);
    return e && e->info->id.kind == StageKind::MlpPost && e->info->layer > 0;
}
bool d_bug_on(const Session& s, const UiState& ui) { return shown(s).bug_scale_after_softmax && !ui.tour_entry.bug; }
bool d_bug_off(const Session& s, const UiState& ui) { return !shown(s).bug_scale_after_softmax && ui.tour_entry.bug; }
bool d_stage_moved(const Session& s, const UiState& ui) { return !(ui.stage == ui.tour_entry.stage); }

const StepDef kSteps[] = {
    {"input", StageKind::Input, -1, true, Tab::Stage, false, "The image, as numbers",
     "Click a patch of the image on the right (the model input): it is followed in every view.", n_input, d_patch},
    {"patches", StageKind::Patches, -1, true, Tab::Stage, false, "An image becomes a sequence",
     "Open the Patches tab (key 9): every row beside the tile it came from.", n_patches, d_visited},
    {"patch_embed", StageKind::PatchEmbed, -1, true, Tab::Stage, false, "Each tile becomes a vector",
     "Press G for the gradient view: red values raise the predicted class's logit, blue lower it (no gradients: zoom with the wheel).",
     n_patch_embed, d_grad},
    {"tokens", StageKind::Tokens, -1, true, Tab::Stage, false, "A cls token in front",
     "Click another patch of the image: its row here moves with it.", n_tokens, d_patch},
    {"embed", StageKind::Embed, -1, true, Tab::Stage, false, "Where each patch is",
     "Open the Positions tab (key 6): which patches learned similar position embeddings.", n_embed, d_visited},
    {"layernorm", StageKind::Ln1Mean, 0, true, Tab::Stage, false, "LayerNorm, row by row",
     "Press A to turn off elementwise_affine (out = normalized, gamma and beta skipped), then see what moved.", n_layernorm, d_affine_off},
    {"changes", StageKind::Input, -1, false, Tab::Changes, false, "What a switch changes",
     "Press A again to turn elementwise_affine back on.", n_changes, d_affine_on},
    {"scores", StageKind::AttnScores, 0, true, Tab::Stage, false, "Attention scores",
     "Press H for the next head: each head scores differently.", n_scores, d_head},
    {"pattern", StageKind::AttnPattern, 0, true, Tab::Stage, false, "The attention pattern",
     "Click a cell of the pattern: the math of that cell is written out beside it.", n_pattern, d_cell},
    {"overlay", StageKind::AttnPattern, 0, true, Tab::Stage, true, "Attention over the image",
     "Choose 'attention from a token' in the overlay menu (or press Q), then click a patch: the overlay shows where it looks.",
     n_overlay, d_query},
    {"grid", StageKind::Input, -1, false, Tab::AttentionMaps, false, "Every layer and head",
     "Click a map: it goes over the image and opens its pattern.", n_grid, d_map_click},
    {"mlp", StageKind::MlpPost, 0, true, Tab::Stage, false, "The MLP's GELU",
     "Press PageDown: the same stage one block later, with its own weights.", n_mlp, d_pagedown},
    {"bug", StageKind::AttnPattern, 0, true, Tab::Stage, false, "Break it on purpose",
     "Press B to turn on 'BUG: scale after softmax' and read the row sums again.", n_bug, d_bug_on},
    {"bug_changes", StageKind::Input, -1, false, Tab::Changes, false, "What the bug does",
     "Press B again to fix it.", n_bug_changes, d_bug_off},
    {"logits", StageKind::Logits, -1, true, Tab::Stage, false, "The prediction",
     "Open the Logit lens (key 5): the prediction after every block.", n_logits, d_visited},
    {"map", StageKind::Input, -1, false, Tab::Map, false, "The whole model",
     "Click a box of the map to go to its stage; press T to leave the tour.", n_map, d_stage_moved},
};

// The tab a "visit" task asks for (its done check reads TourEntry::visited).
std::optional<Tab> visit_tab(const StepDef& d) {
    if (d.done != d_visited) return std::nullopt;
    switch (d.kind) {  // the tab that shows the step's stage another way
    case StageKind::Patches: return Tab::Patches;
    case StageKind::Embed: return Tab::Positions;
    case StageKind::Logits: return Tab::LogitLens;
    default: return std::nullopt;
    }
}

// The steps this model has: a step whose stage the trace (or the table) lacks is left out.
std::vector<const StepDef*> steps_of(const Session& s) {
    std::vector<const StepDef*> v;
    std::shared_ptr<const StageTable> table;
    if (const Trace* t = s.trace()) table = t->table_ptr();
    else {
        try {
            table = StageTable::get(s.shown_config(), s.shown_options());
        } catch (const std::exception&) {
            return v;
        }
    }
    const int depth = table->depth();
    for (const StepDef& d : kSteps) {
        if (d.show_stage && !table->has(StageId{d.kind, d.layer})) continue;
        if ((d.tab == Tab::AttentionMaps || d.set_overlay || d.kind == StageKind::MlpPost) && depth == 0) continue;
        v.push_back(&d);
    }
    return v;
}

// Puts the step on screen: its stage, tab and overlay; what is on screen now is what its task is checked against.
void apply_step(const Session& s, UiState& ui, const StepDef& d) {
    const Trace* t = s.trace();
    if (d.show_stage && t) select_stage(ui, *t, StageId{d.kind, d.layer});
    ui.tab = d.tab;
    ui.show_grad = false;
    ui.cell_r = ui.cell_c = -1;
    if (d.set_overlay) { ui.overlay = Overlay::Cls; ui.overlay_layer = 0; ui.overlay_head = -1; }
    ui.tour_entry = UiState::TourEntry{};
    ui.tour_entry.patch = ui.patch;
    ui.tour_entry.head = ui.head;
    ui.tour_entry.overlay_layer = ui.overlay_layer;
    ui.tour_entry.overlay_head = ui.overlay_head;
    ui.tour_entry.stage = ui.stage;
    if (t) {
        ui.tour_entry.affine = shown(s).affine;
        ui.tour_entry.bug = shown(s).bug_scale_after_softmax;
    }
}

}  // namespace

int tour_size(const Session& s) { return int(steps_of(s).size()); }

std::vector<std::string> tour_step_ids(const Session& s) {
    std::vector<std::string> v;
    for (const StepDef* d : steps_of(s)) v.push_back(d->id);
    return v;
}

void DrawTour(ViewCtx& v) {
    Session& s = v.s;
    UiState& ui = v.ui;
    Probe& pr = v.probe;
    if (ui.tour_step < 0) return;
    const std::vector<const StepDef*> steps = steps_of(s);
    const int n = int(steps.size());
    if (n == 0) return;
    ui.tour_step = std::clamp(ui.tour_step, 0, n - 1);
    const StepDef& d = *steps[size_t(ui.tour_step)];
    ImGui::BeginChild("tour", ImVec2(0, 0), true);
    {
        const ImVec2 p = ImGui::GetWindowPos(), z = ImGui::GetWindowSize();
        pr.rects["tour"] = Rect{p.x, p.y, z.x, z.y};
    }
    ImGui::TextDisabled("Guided tour: step %d of %d", ui.tour_step + 1, n);
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(ImVec4(1, 0.84f, 0.47f, 1), "%s", d.title);
    std::string notice;
    if (s.trace()) notice = d.notice(s, ui);
    else notice = s.has_image() ? "The model is running..." : "No image is loaded: load one to start the tour.";
    ImGui::Separator();
    ImGui::TextDisabled("Notice");
    TextWrappedWords(pr, "tour.notice", notice);  // at spaces: never "0." / "1095"
    // what to do, and whether it was done
    const bool done = s.trace() && ui.tour_applied == ui.tour_step && (ui.tour_entry.done = ui.tour_entry.done || d.done(s, ui));
    ImGui::Spacing();
    ImGui::TextDisabled("Your turn");
    const ImVec4 done_col(0.5f, 0.9f, 0.5f, 1), task_col(0.55f, 0.8f, 1, 1);
    TextWrappedWords(pr, "tour.task", done ? std::string("Done: ") + d.task : std::string(d.task), done ? &done_col : &task_col);
    if (d.show_stage && s.trace() && !done)
        if (const auto e = shown_stage(s, ui); e && !(e->info->id == StageId{d.kind, d.layer}) && ui.tour_applied == ui.tour_step) {
            // the user stepped off the tour's path (arrows, PageDown, a click): said, not hidden
            ImGui::TextColored(ImVec4(1, 0.75f, 0.4f, 1), "You are at %s, off the tour's path: Back / Next continue.", e->info->name.c_str());
            pr.strings["tour.off"] = e->info->name;
        }
    ImGui::PopTextWrapPos();
    ImGui::Spacing();
    ImGui::BeginDisabled(ui.tour_step == 0);
    if (ImGui::Button("< Back (P)")) ui.tour_step = std::max(0, ui.tour_step - 1);
    ImGui::EndDisabled();
    ImGui::SameLine();
    ImGui::BeginDisabled(ui.tour_step + 1 >= n);
    if (ImGui::Button(done ? "Next (N) >" : "Skip (N) >")) ui.tour_step = std::min(n - 1, ui.tour_step + 1);
    ImGui::EndDisabled();
    if (ImGui::Button("Leave the tour (T)")) { ui.tour_step = -1; ui.tour_applied = -1; }
    pr.strings["tour.id"] = d.id;
    pr.strings["tour.title"] = d.title;
    pr.strings["tour.notice"] = notice;
    pr.strings["tour.task"] = d.task;
    if (d.show_stage && s.trace()) pr.strings["tour.stage"] = s.trace()->table().name(StageId{d.kind, d.layer});
    pr.strings["tour.tab"] = tab_name(d.tab);
    pr.numbers["tour.step"] = ui.tour_step;
    pr.numbers["tour.steps"] = n;
    pr.numbers["tour.done"] = done;
    ImGui::EndChild();
}

void HandleTourKeys(ViewCtx& v) {
    Session& s = v.s;
    UiState& ui = v.ui;
    if (!ImGui::GetIO().WantTextInput) {
        auto pressed = [](int key) { return ImGui::IsKeyPressed(key); };
        if (pressed(GLFW_KEY_T)) {
            if (ui.tour_step >= 0) {
                ui.tour_step = -1;
            } else {
                // start where the user is when a step shows this stage, else at the beginning
                ui.tour_step = 0;
                const std::vector<const StepDef*> steps = steps_of(s);
                if (const auto e = shown_stage(s, ui))
                    for (size_t i = 0; i < steps.size(); ++i)
                        if (steps[i]->show_stage && StageId{steps[i]->kind, steps[i]->layer} == e->info->id) {
                            ui.tour_step = int(i);
                            break;
                        }
            }
            ui.tour_applied = -1;
        }
        if (ui.tour_step >= 0) {
            if (pressed(GLFW_KEY_N)) ++ui.tour_step;
            if (pressed(GLFW_KEY_P)) ui.tour_step = std::max(0, ui.tour_step - 1);
            if (pressed(GLFW_KEY_ESCAPE)) { ui.tour_step = -1; ui.tour_applied = -1; }
        }
    }
    // a new step puts its stage, tab and overlay on screen (once: then the learner drives)
    if (ui.tour_step < 0 || !s.trace()) return;
    const std::vector<const StepDef*> steps = steps_of(s);
    if (steps.empty()) return;
    ui.tour_step = std::clamp(ui.tour_step, 0, int(steps.size()) - 1);
    const StepDef& d = *steps[size_t(ui.tour_step)];
    if (ui.tour_applied != ui.tour_step) {
        apply_step(s, ui, d);
        ui.tour_applied = ui.tour_step;
    }
    if (const auto t = visit_tab(d); t && ui.tab == *t) ui.tour_entry.visited = true;
}

}  // namespace vit::app
