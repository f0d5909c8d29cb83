#include "core/teach/interventions.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/io/checkpoint.h"
#include "core/io/image.h"
#include "core/io/io.h"
#include "core/model/forward.h"
#include "core/model/stages.h"

namespace vit {

double SweepTarget::effect(const float* out) const {
    if (logits) return double(clean[size_t(cls)]) - double(out[size_t(cls)]);
    double dot = 0, na = 0, nb = 0;
    for (size_t i = 0; i < clean.size(); ++i) {
        dot += double(clean[i]) * out[i];
        na += double(clean[i]) * clean[i];
        nb += double(out[i]) * out[i];
    }
    if (na == 0 || nb == 0) return na == nb ? 0.0 : 1.0;  // a zero vector: no direction to compare
    return 1.0 - dot / std::sqrt(na * nb);
}

std::string SweepTarget::measure() const {
    if (!logits) return "1 - cosine(clean embedding, intervened embedding)";
    const std::string c = std::to_string(cls);
    return "logit[" + c + "] (clean) - logit[" + c + "] (intervened)";
}

SweepTarget sweep_target(const Trace& clean) {
    SweepTarget t;
    const Array* logits = clean.find(StageId{StageKind::Logits});
    const Array* out = logits ? logits : clean.find(StageId{StageKind::Embedding});
    if (!out) throw std::invalid_argument("the clean trace has neither logits nor an embedding");
    t.logits = logits != nullptr;
    t.clean.assign(out->data(), out->data() + out->size());
    if (t.logits) t.cls = top_k(t.clean.data(), t.clean.size(), 1).at(0);
    return t;
}

namespace {

// The clean pass (the options without interventions), or the one given (checked).
const Trace& clean_trace(const Weights& w, const Tensor3& x, const Options& base, const Trace* given, Trace& own,
                         const SweepControl& ctl) {
    if (given) {
        if (given->empty() || given->options() != base || given->table().config().width != w.cfg.width ||
            given->table().config().depth != w.cfg.depth)
            throw std::invalid_argument("the clean trace given to the sweep is not a pass of these weights with " +
                                        base.describe());
        return *given;
    }
    RunRequest req;
    req.cancel = ctl.cancel;
    forward(w, x, base, own, req);
    return own;
}

// The output of a pass: its logits or embedding.
const Array& output_of(const Trace& t) {
    const Array* a = t.find(StageId{StageKind::Logits});
    return a ? *a : t.get(StageId{StageKind::Embedding});
}

void report(const SweepControl& ctl, int done, int total) {
    if (ctl.cancel && ctl.cancel->load()) throw Cancelled();
    if (ctl.progress && !ctl.progress(done, total)) throw Cancelled();
}

}  // namespace

SweepResult head_importance(const Weights& w, const Tensor3& x, const Options& opt, const SweepControl& ctl,
                            const Trace* given) {
    const Config& c = w.cfg;
    SweepResult r;
    r.options = opt.clean();
    Trace own;
    const Trace& clean = clean_trace(w, x, r.options, given, own, ctl);
    r.target = sweep_target(clean);
    const size_t L = size_t(c.depth), H = size_t(c.heads);
    r.values = Array::from_shape({L, H});
    const int total = int(L * H);
    WorkspacePtr ws = make_workspace();
    Trace scratch;
    Tensor4 none = Tensor4::from_shape({1, 1, 1, 1});  // a pass from a block reads no input
    for (size_t l = 0; l < L; ++l) {
        // the clean run's residual stream entering block l: every ablation in block l starts there
        const Array& stream = clean.get(stream_into(clean.table(), int(l)));
        for (size_t h = 0; h < H; ++h) {
            Options o = r.options;
            o.iv.heads = {HeadAblation{int(l), int(h), false}};
            if (ctl.reuse) {
                const RunFrom from{int(l), stream.data()};
                const Array& out = forward_batch(w, none, o, scratch, Keep::Output, *ws, {}, ctl.cancel, &from);
                r.values(l, h) = float(r.target.effect(out.data()));
                r.blocks += double(L - l);
            } else {
                RunRequest req;
                req.cancel = ctl.cancel;
                forward(w, x, o, scratch, req);
                r.values(l, h) = float(r.target.effect(output_of(scratch).data()));
                r.blocks += double(L);
            }
            ++r.passes;
            report(ctl, r.passes, total);
        }
    }
    return r;
}

SweepResult occlusion(const Weights& w, const Tensor3& x, const Options& opt, const SweepControl& ctl,
                      const Trace* given) {
    const Config& c = w.cfg;
    SweepResult r;
    r.options = opt.clean();
    const RunDims rd = run_dims(c, r.options);
    if (rd.N < 2) throw std::invalid_argument("occlusion drops one patch at a time, and this run has a single patch");
    Trace own;
    const Trace& clean = clean_trace(w, x, r.options, given, own, ctl);
    r.target = sweep_target(clean);
    const size_t N = size_t(rd.N), D = size_t(c.width), T = size_t(rd.T), pre = size_t(rd.prefix);
    r.values = Array::from_shape({N});
    // The clean stream entering block 0 (every stage before it works row by row): dropping patch p
    // leaves it with row pre + p removed.
    const Array& stream0 = clean.get(stream_into(clean.table(), 0));
    std::vector<float> stream((T - 1) * D);
    WorkspacePtr ws = make_workspace();
    Trace scratch;
    Tensor4 none = Tensor4::from_shape({1, 1, 1, 1});
    for (size_t p = 0; p < N; ++p) {
        Options o = r.options;
        o.iv.dropped = {int(p)};
        if (ctl.reuse) {
            const float* s0 = stream0.data();
            std::copy_n(s0, (pre + p) * D, stream.data());
            std::copy(s0 + (pre + p + 1) * D, s0 + T * D, stream.data() + (pre + p) * D);
            const RunFrom from{0, stream.data()};
            const Array& out = forward_batch(w, none, o, scratch, Keep::Output, *ws, {}, ctl.cancel, &from);
            r.values(p) = float(r.target.effect(out.data()));
        } else {
            RunRequest req;
            req.cancel = ctl.cancel;
            forward(w, x, o, scratch, req);
            r.values(p) = float(r.target.effect(output_of(scratch).data()));
        }
        r.blocks += double(c.depth);
        ++r.passes;
        report(ctl, r.passes, int(N));
    }
    return r;
}

ActivationPatch make_activation_patch(const Weights& w, const Tensor3& source, const Options& opt, StageId stage,
                                      std::vector<int> tokens, std::string source_name) {
    const Config& c = w.cfg;
    const std::string name = stage_name(stage);
    if (!stage_def(stage.kind).patchable || !StageTable::get(c, opt.clean())->has(stage)) {
        std::string points;
        for (const StageDef& d : stage_defs())
            if (d.patchable) points += (points.empty() ? "" : ", ") + std::string(d.pattern);
        throw std::invalid_argument("stage '" + name + "' cannot be patched in this model (the patch points are " + points +
                                    (c.depth ? ", {l} in 0.." + std::to_string(c.depth - 1) : "") + ")");
    }
    // the stage in the pass to patch (its options, the patch not yet there)
    Options target = opt;
    target.iv.patch.reset();
    const StageTable& tt = *StageTable::get(c, target);
    const StageInfo& ti = tt.info(stage);
    const bool per_head = ti.shape.size() == 3;
    const size_t T = per_head ? ti.shape[1] : ti.shape[0];
    std::sort(tokens.begin(), tokens.end());
    tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
    for (int t : tokens)
        if (t < 0 || size_t(t) >= T)
            throw std::invalid_argument("token " + std::to_string(t) + " is not a token of " + name + " (0.." +
                                        std::to_string(T - 1) + ": " + token_range_text(tt) + ")");
    ActivationPatch p;
    p.stage = stage;
    p.tokens = std::move(tokens);
    p.source = std::move(source_name);
    Trace src;
    forward(w, source, opt.clean(), src);
    const Array& v = src.get(stage);
    if (shape_of(v) != ti.shape)
        throw std::invalid_argument("patching " + name + ": the run on " + p.source + " gives shape " + shape_str_of(v) +
                                    ", the run to patch has " + shape_str(ti.shape) +
                                    (opt.iv.dropped.empty() ? "" : " (its dropped patches shorten every stage after embed: "
                                                                   "patch embed, before the drop)"));
    p.values = std::make_shared<const Array>(v);
    return p;
}

std::vector<int> parse_index_list(const std::string& text) {
    std::vector<int> out;
    size_t i = 0;
    if (text.empty()) throw std::invalid_argument("an empty list (expected i,j,...: indices 0 or more)");
    while (i <= text.size()) {
        const size_t comma = std::min(text.find(',', i), text.size());
        const std::string item = text.substr(i, comma - i);
        if (item.empty() || item.size() > 9 || item.find_first_not_of("0123456789") != std::string::npos)
            throw std::invalid_argument("'" + item + "' in '" + text + "' is not an index (expected i,j,...: integers 0 or more)");
        out.push_back(std::stoi(item));
        i = comma + 1;
        if (comma == text.size()) break;
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

HeadAblation parse_head_ablation(const std::string& text) {
    HeadAblation h;
    std::string t = text;
    const size_t colon = t.find(':');
    if (colon != std::string::npos) {
        const std::string kind = t.substr(colon + 1);
        if (kind != "mean" && kind != "zero")
            throw std::invalid_argument("'" + text + "': after ':' comes 'mean' (or 'zero', the default)");
        h.mean = kind == "mean";
        t = t.substr(0, colon);
    }
    const size_t dot = t.find('.');
    auto num = [&](const std::string& s) {
        if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos)
            throw std::invalid_argument("'" + text + "' is not L.H or L.H:mean (block and head, from 0)");
        return std::stoi(s);
    };
    if (dot == std::string::npos) num("");
    h.layer = num(t.substr(0, dot));
    h.head = num(t.substr(dot + 1));
    return h;
}

SublayerAblation parse_sublayer_ablation(const std::string& text) {
    const auto id = parse_stage_name(text);
    if (!id || (id->kind != StageKind::AttnOut && id->kind != StageKind::MlpOut))
        throw std::invalid_argument("'" + text + "' is not blocks.L.attn.out or blocks.L.mlp.out");
    return SublayerAblation{id->layer, id->kind == StageKind::MlpOut};
}

void interventions_from_flags(const InterventionFlags& f, const Weights& w, Options& opt, bool squash, bool run_source) {
    const Config& c = w.cfg;
    auto bad = [](const std::string& flag, const std::string& why) { throw UsageError(flag + ": " + why); };
    const std::string blocks = c.depth ? "blocks 0.." + std::to_string(c.depth - 1) : std::string("no blocks");
    Interventions iv;
    for (const std::string& t : f.ablate_heads) {
        HeadAblation h;
        try {
            h = parse_head_ablation(t);
        } catch (const std::invalid_argument& e) {
            bad("--ablate-head " + t, e.what());
        }
        if (h.layer >= c.depth || h.head >= c.heads)
            bad("--ablate-head " + t, "the model (" + c.name + ") has " + blocks + " and heads 0.." + std::to_string(c.heads - 1));
        for (const HeadAblation& o : iv.heads)
            if (o.layer == h.layer && o.head == h.head)
                bad("--ablate-head " + t, "head " + head_label(h.layer, h.head) + " is already ablated");
        iv.heads.push_back(h);
    }
    for (const std::string& t : f.ablate) {
        SublayerAblation sa;
        try {
            sa = parse_sublayer_ablation(t);
        } catch (const std::invalid_argument& e) {
            bad("--ablate " + t, e.what());
        }
        if (sa.layer >= c.depth) bad("--ablate " + t, "the model (" + c.name + ") has " + blocks);
        if (std::find(iv.sublayers.begin(), iv.sublayers.end(), sa) != iv.sublayers.end())
            bad("--ablate " + t, "given twice");
        iv.sublayers.push_back(sa);
    }
    Options sized = opt;
    sized.iv = {};
    const RunDims rd = run_dims(c, sized);
    if (!f.drop_patches.empty()) {
        try {
            iv.dropped = parse_index_list(f.drop_patches);
        } catch (const std::invalid_argument& e) {
            bad("--drop-patches " + f.drop_patches, e.what());
        }
        for (int p : iv.dropped)
            if (p >= rd.N)
                bad("--drop-patches " + f.drop_patches, "patch " + std::to_string(p) + " is outside the " +
                                                            std::to_string(rd.gh) + "x" + std::to_string(rd.gw) +
                                                            " grid (patches 0.." + std::to_string(rd.N - 1) + ")");
        if (int(iv.dropped.size()) == rd.N) bad("--drop-patches " + f.drop_patches, "every patch would be dropped");
    }
    if (f.patch_from.empty() != f.patch_stage.empty())
        bad(f.patch_from.empty() ? "--patch-stage" : "--patch-from",
            "activation patching needs both --patch-from (the other input) and --patch-stage (the stage to patch)");
    if (!f.patch_tokens.empty() && f.patch_stage.empty()) bad("--patch-tokens", "needs --patch-from and --patch-stage");
    opt.iv = iv;
    if (f.patch_stage.empty()) return;
    const auto id = parse_stage_name(f.patch_stage);
    Options target = opt;
    if (!id || !stage_def(id->kind).patchable || !StageTable::get(c, target)->has(*id)) {
        std::string points;
        for (const StageDef& d : stage_defs())
            if (d.patchable) points += (points.empty() ? "" : ", ") + std::string(d.pattern);
        bad("--patch-stage " + f.patch_stage, std::string(id ? "not a stage this model can patch" : "no such stage") +
                                                   " (the patch points are " + points + ", with " + blocks + ")");
    }
    std::vector<int> tokens;
    if (!f.patch_tokens.empty()) {
        try {
            tokens = parse_index_list(f.patch_tokens);
        } catch (const std::invalid_argument& e) {
            bad("--patch-tokens " + f.patch_tokens, e.what());
        }
        const StageTable& tt = *StageTable::get(c, target);
        const StageInfo& si = tt.info(*id);
        const size_t T = si.shape.size() == 3 ? si.shape[1] : si.shape[0];
        for (int t : tokens)
            if (size_t(t) >= T)
                bad("--patch-tokens " + f.patch_tokens, "token " + std::to_string(t) + " is not a token of " + si.name +
                                                            " (0.." + std::to_string(T - 1) + ": " + token_range_text(tt) + ")");
    }
    if (!run_source) {
        ActivationPatch p;
        p.stage = *id;
        p.tokens = tokens;
        p.source = f.patch_from;
        opt.iv.patch = p;
        return;
    }
    // the other input, prepared as this run's input (the same size)
    Tensor3 src;
    const std::string& path = f.patch_from;
    if (path.size() > 4 && path.substr(path.size() - 4) == ".npy") {
        src = input_from_array(read_npy(path), c, path);
        if (int(src.shape(1)) != rd.img_h || int(src.shape(2)) != rd.img_w)
            bad("--patch-from " + path, "it holds a " + std::to_string(src.shape(1)) + "x" + std::to_string(src.shape(2)) +
                                            " input and this run is " + std::to_string(rd.img_h) + "x" + std::to_string(rd.img_w));
    } else {
        Config pc = c;
        if (squash) pc.pre.squash = true;
        Image im;
        try {
            im = load_image(path);
        } catch (const FileError& e) {
            throw FileError(std::string("--patch-from: ") + e.what());
        }
        src = name_out_of_memory(path, "preprocessing the image", [&] { return preprocess_at(im, pc, rd.img_h, rd.img_w); });
    }
    try {
        opt.iv.patch = make_activation_patch(w, src, opt, *id, tokens, path);
    } catch (const std::invalid_argument& e) {
        bad("--patch-stage " + f.patch_stage, e.what());
    }
}

std::string interventions_json(const Interventions& iv) {
    nlohmann::json j;
    j["heads"] = nlohmann::json::array();
    for (const HeadAblation& h : iv.heads) j["heads"].push_back({{"layer", h.layer}, {"head", h.head}, {"mean", h.mean}});
    j["sublayers"] = nlohmann::json::array();
    for (const SublayerAblation& s : iv.sublayers)
        j["sublayers"].push_back(stage_name({s.mlp ? StageKind::MlpOut : StageKind::AttnOut, s.layer}));
    j["dropped"] = iv.dropped;
    if (iv.patch)
        j["patch"] = {{"stage", stage_name(iv.patch->stage)}, {"tokens", iv.patch->tokens}, {"source", iv.patch->source}};
    else
        j["patch"] = nullptr;
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace vit
