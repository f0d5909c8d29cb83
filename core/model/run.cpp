// A traced run: the forward pass recording every stage and, when asked, the backward
// pass writing every stage's gradient into the same trace (one call, one forward).
#include <algorithm>
#include <optional>
#include <xtensor/xbuilder.hpp>

#include "core/kernels/ops.h"
#include "core/model/backward.h"
#include "core/model/forward.h"

namespace vit {

namespace {
// The image as a batch of one (the same values seen as (1, C, S, S)).
Tensor4 batch_of_one(const Weights& w, const Tensor3& input) {  // the size is checked by forward_batch
    const Config& c = w.cfg;
    const size_t C = c.channels, Hi = input.shape(1), Wi = input.shape(2);
    if (input.shape(0) != C)
        throw std::invalid_argument("input has shape " + shape_str_of(input) + " but model '" + c.name + "' takes " +
                                    shape_str({C, size_t(c.image_size), size_t(c.image_size)}) +
                                    " (or another size that is a multiple of " + std::to_string(c.patch) + ")");
    Tensor4 x = Tensor4::from_shape({1, C, Hi, Wi});
    std::copy(input.begin(), input.end(), x.begin());
    return x;
}

// How an on-demand trace recomputes block l: the block alone (RunFrom with until = l + 1) from the
// kept residual stream entering it, with the trace's own options (interventions included), the same
// code on the same numbers as the pass that kept it.
// The recompute runs with the thread count the pass ran with (ops::threads() of the thread that ran
// it): the kernels split their sums by it, so a block recomputed on another thread (the window's UI
// thread, a job) with another count could differ in the last bits.
Trace::BlockRecompute block_recompute(std::shared_ptr<const Weights> w) {
    const int threads = ops::threads();
    return [w, threads](const Trace& kept, int l, Trace& out) {
        ops::Budget budget(threads);
        const StageTable& t = kept.table();
        const int sr = t.index(stream_into(t, l));
        if (sr < 0 || !kept.kept(size_t(sr)))
            throw std::logic_error("stages on demand: the trace kept no residual stream into block " + std::to_string(l));
        RunFrom from{l, kept.at(size_t(sr)).data(), l + 1};
        Tensor4 none = Tensor4::from_shape({1, 1, 1, 1});  // not read: the pass starts at block l
        // A workspace of this call's own: a block's scratch arrays are not kept between recomputes
        // (held per thread they would stay for the session; allocating them costs far less than the block).
        WorkspacePtr ws = make_workspace();
        forward_batch(*w, none, kept.options(), out, Keep::All, *ws, kept.model(), nullptr, &from);
    };
}

void check_on_demand(const Weights& w, const RunRequest& req) {
    if (req.on_demand.get() != &w) throw std::invalid_argument("stages on demand: the weights held are not the pass's");
}
}  // namespace

std::vector<char> on_demand_rows(const StageTable& t, const std::vector<StageKind>& also, int block) {
    std::vector<char> rows(t.size(), 0);
    for (size_t r = 0; r < rows.size(); ++r) {
        const StageInfo& s = t[r];
        rows[r] = s.layer < 0 || s.layer == block || s.id.kind == StageKind::ResidPost ||
                  std::find(also.begin(), also.end(), s.id.kind) != also.end();
    }
    return rows;
}

void forward(const Weights& w, const Tensor3& input, const Options& opt, Trace& trace, const RunRequest& req) {
    const Tensor4 x = batch_of_one(w, input);
    if (req.on_demand) {
        check_on_demand(w, req);
        const std::vector<char> rows = on_demand_rows(*StageTable::get(w.cfg, opt), req.keep_kinds, req.keep_block);
        WorkspacePtr ws = make_workspace();  // freed after the pass: a big model's scratch is not held between passes
        if (req.grads)  // refused before the forward pass, with the backward's own reason
            if (const std::string why = backward_unsupported(w.cfg, opt); !why.empty()) throw std::invalid_argument(why);
        forward_batch(w, x, opt, trace, Keep::All, *ws, req.model, req.cancel, nullptr, &rows);
        ws.reset();
        trace.set_on_demand(block_recompute(req.on_demand));
        if (req.grads) {  // the checkpointed backward pass: the gradients kept, any other on demand
            Trace::BlockGrads grads = backward_on_demand(req.on_demand, trace, req);
            trace.set_on_demand(block_recompute(req.on_demand), std::move(grads));
        }
        return;
    }
    if (!req.grads) {
        thread_local WorkspacePtr ws = make_workspace();
        forward_batch(w, x, opt, trace, Keep::All, *ws, req.model, req.cancel);
        return;
    }
    const Config& c = w.cfg;
    Batch b;
    const Array& logits = b.forward(w, x, opt, &trace, req.model, req.cancel);
    int cls = req.grad_class;
    const Tensor2 dl = d_logit(c, logits, cls);
    b.backward(w, dl, nullptr, &trace);  // the stages' gradients: the weights' are not computed
    trace.set_grad_class(cls);
}

Trace run(const Weights& w, const Tensor3& input, const Options& opt, const RunRequest& req) {
    Trace t;
    forward(w, input, opt, t, req);
    return t;
}

int first_changed_block(const Config& c, const Options& a, const Options& b) {
    const int L = c.depth;
    Options a0 = a, b0 = b;
    a0.iv = b0.iv = {};
    a0.pooling = b0.pooling = std::nullopt;
    if (a0 != b0 || a.iv.dropped != b.iv.dropped) return -1;
    int first = L;  // the pooling acts after the blocks
    // a head or sub-layer ablation in one and not the other: from its block on
    auto heads_in = [](const Options& x, const HeadAblation& h) {
        return std::find(x.iv.heads.begin(), x.iv.heads.end(), h) != x.iv.heads.end();
    };
    for (const HeadAblation& h : a.iv.heads) if (!heads_in(b, h)) first = std::min(first, h.layer);
    for (const HeadAblation& h : b.iv.heads) if (!heads_in(a, h)) first = std::min(first, h.layer);
    auto sub_in = [](const Options& x, const SublayerAblation& s) {
        return std::find(x.iv.sublayers.begin(), x.iv.sublayers.end(), s) != x.iv.sublayers.end();
    };
    for (const SublayerAblation& s : a.iv.sublayers) if (!sub_in(b, s)) first = std::min(first, s.layer);
    for (const SublayerAblation& s : b.iv.sublayers) if (!sub_in(a, s)) first = std::min(first, s.layer);
    // a patch added, removed or changed: from its stage's block (the embedding: everything; ln_final: after the blocks)
    if (!(a.iv.patch == b.iv.patch)) {
        for (const Options* o : {&a, &b}) {
            if (!o->iv.patch) continue;
            const StageId st = o->iv.patch->stage;
            if (st.layer >= 0) first = std::min(first, st.layer);
            else if (st.kind != StageKind::LnFinalOut) return -1;
        }
    }
    return first;
}

StageId stream_into(const StageTable& t, int layer) {
    if (layer > 0) return {StageKind::ResidPost, layer - 1};
    for (StageKind k : {StageKind::LnPreOut, StageKind::WithRegisters, StageKind::EmbedKept})
        if (t.has({k, -1})) return {k, -1};
    return {StageKind::Embed, -1};
}

void forward_from(const Weights& w, const Trace& prev, const Options& opt, int layer, Trace& out, const RunRequest& req) {
    const Config& c = w.cfg;
    if (layer < 0 || layer > c.depth)
        throw std::invalid_argument("forward_from: block " + std::to_string(layer) + " is outside 0.." + std::to_string(c.depth));
    if (prev.empty() || first_changed_block(c, prev.options(), opt) < layer)
        throw std::invalid_argument("forward_from: the earlier pass's stages before block " + std::to_string(layer) +
                                    " are not those of these options (" + opt.describe() + ")");
    const StageTable& pt = prev.table();
    const StageTable& nt = *StageTable::get(c, opt);
    if (pt.config().width != c.width || pt.config().depth != c.depth || pt.dims().T != nt.dims().T)
        throw std::invalid_argument("forward_from: the earlier pass is of another model or size");
    const StageId sid = stream_into(nt, layer);
    const Array* stream = prev.find(sid);
    if (!stream) throw std::invalid_argument("forward_from: the earlier pass has no " + pt.name(sid));
    const Array keep_stream = *stream;  // prev may be `out` itself
    RunFrom from{layer, keep_stream.data()};
    Tensor4 none = Tensor4::from_shape({1, 1, 1, 1});  // not read: the pass starts at block `layer`
    // The earlier pass's rows before that block, by id (the new table lists the same stages there).
    // On demand: only the rows the new trace keeps, read from prev without filling its cache (prev may
    // be on screen, and its cache is the window's): a row prev did not keep comes from its block
    // computed into a trace of this job's own.
    if (req.grads) throw std::invalid_argument("forward_from: no gradients (the backward pass runs from a whole pass)");
    std::vector<char> rows;
    if (req.on_demand) {
        check_on_demand(w, req);
        rows = on_demand_rows(nt, req.keep_kinds, req.keep_block);
    }
    std::vector<std::pair<size_t, Array>> early;
    std::optional<Trace> prev_block;
    for (size_t r = 0; r < nt.size() && !(nt[r].layer >= layer || (layer == c.depth && nt[r].layer < 0 && r > 0 &&
                                                                   nt[r - 1].layer >= 0));
         ++r) {
        if (!rows.empty() && !rows[r]) continue;
        const int pr = pt.index(nt[r].id);
        if (pr < 0) throw std::invalid_argument("forward_from: the earlier pass has no " + nt[r].name);
        if (prev.kept(size_t(pr)) || !prev.on_demand()) {
            early.emplace_back(r, prev.at(size_t(pr)));
            continue;
        }
        const int l = nt[r].layer;
        if (!prev_block || prev_block->table().index(nt[r].id) < 0 || !prev_block->kept(size_t(pr)))
            prev_block = prev.block(l);
        early.emplace_back(r, prev_block->at(size_t(pr)));
    }
    prev_block.reset();
    thread_local WorkspacePtr ws_kept = make_workspace();
    WorkspacePtr ws_own = req.on_demand ? make_workspace() : nullptr;  // on demand: freed after the pass
    forward_batch(w, none, opt, out, Keep::All, ws_own ? *ws_own : *ws_kept,
                  req.model.name.empty() ? prev.model() : req.model, req.cancel, &from, rows.empty() ? nullptr : &rows);
    for (auto& [r, a] : early) out.adopt(r, a);
    if (req.on_demand) out.set_on_demand(block_recompute(req.on_demand));
}

}  // namespace vit
