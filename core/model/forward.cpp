// The ViT forward pass, batched: the driver that runs the parts (core/model/parts/, pass.h) in
// order, recording every stage through the stage table, and the same parts run dry (shape only),
// which is where the stage table's order and shapes come from (forward_stages).
// Each stage is computed straight into its array (the trace's own, when tracing), reads like its
// PyTorch line, and names that line in a comment.
#include "core/model/forward.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <stdexcept>

#include "core/kernels/profile.h"
#include "core/model/pass.h"

namespace vit {

namespace profile {
Profile*& active() {
    thread_local Profile* p = nullptr;
    return p;
}
}  // namespace profile

void WorkspaceDeleter::operator()(Workspace* w) const { delete w; }
WorkspacePtr make_workspace() { return WorkspacePtr(new Workspace); }
const Tensor2& workspace_zcat(const Workspace& ws, int l) { return ws.zcat.at(size_t(l)); }

// ---------------------------------------------------------------- the recorder

Array& Recorder::operator()(StageKind kind, std::initializer_list<size_t> shape) {
    Array& a = hand_out(kind, shape);
    last_ = &a;
    last_by_kind_[size_t(kind)] = &a;
    return a;
}

Array& Recorder::hand_out(StageKind kind, std::initializer_list<size_t> shape) {
    if (listed_) {  // dry: list the stage
        listed_->push_back({StageId{kind, stage_def(kind).block ? layer_ : -1}, Shape(shape)});
        static Array none;
        return none;
    }
    const StageTable& table = *table_;
    if (i_ >= table.size() || table[i_].id.kind != kind)
        throw std::logic_error(std::string("forward pass and stage table disagree: the pass computes ") +
                               stage_kind_name(kind) + " where the table lists " +
                               (i_ < table.size() ? table[i_].name : std::string("nothing more")));
    const size_t row = i_++;
    const StageInfo& s = table[row];
    if (!std::equal(shape.begin(), shape.end(), s.shape.begin(), s.shape.end()))
        throw std::logic_error("forward pass and stage table disagree: the pass computes " + s.name + " with shape " +
                               shape_str(Shape(shape)) + ", the table has " + shape_str(s.shape));
    if (keep_ == Keep::All && (!rows_ || (*rows_)[row])) return t_->record(row, s.shape);
    Shape full = s.shape;
    if (keep_ != Keep::All) full.insert(full.begin(), B_);
    if (keep_ == Keep::ForBackward && s.kept) return t_->record(row, full);
    Array& a = ws_->scratch[int(kind)];
    if (a.size() != shape_numel(full) || a.dimension() != full.size()) a = empty_array(full);
    return a;
}

void Recorder::skip_to_block(int layer) {
    const StageTable& table = *table_;
    size_t r = i_;
    if (layer < table.depth())
        while (r < table.size() && table[r].layer != layer) ++r;
    else  // after the blocks: the first row outside a block that follows one
        while (r < table.size() && !(table[r].layer < 0 && r > 0 && table[r - 1].layer >= 0)) ++r;
    if (r == table.size()) throw std::logic_error("Recorder::skip_to_block: no block " + std::to_string(layer));
    i_ = r;
}

void Recorder::done() const {
    if (table_ && i_ != table_->size())
        throw std::logic_error("forward pass recorded fewer stages than the table lists (next: " + (*table_)[i_].name +
                               ")");
}

// ---------------------------------------------------------------- the pass

// Activation patching (an intervention): the rows of the patched stage (every row, or the given
// token rows; for per-head stages the token rows of every head) replaced by the other run's values.
void patch_stage(const Options& opt, const StageInfo& s, Array& a, size_t B) {
    const auto& p = opt.iv.patch;
    if (!p || p->stage != s.id) return;
    if (!p->values) throw std::invalid_argument("patching " + s.name + ": no values from the other run");
    const Array& v = *p->values;
    const size_t per = shape_numel(s.shape);
    if (v.size() != per || v.dimension() != s.shape.size() || !std::equal(s.shape.begin(), s.shape.end(), v.shape().begin()))
        throw std::invalid_argument("patching " + s.name + ": the run on " + p->source + " gives shape " + shape_str_of(v) +
                                    ", this run's stage is " + shape_str(s.shape) +
                                    " (dropped patches or another input size change the token count)");
    const bool per_head = s.shape.size() == 3;                     // (H, T, d): tokens on axis 1
    const size_t Hs = per_head ? s.shape[0] : 1, T = per_head ? s.shape[1] : s.shape[0], row = per / (Hs * T);
    for (int t : p->tokens)
        if (t < 0 || size_t(t) >= T)
            throw std::invalid_argument("patching " + s.name + ": token " + std::to_string(t) + " is outside 0.." +
                                        std::to_string(T - 1));
    for (size_t img = 0; img < B; ++img) {
        float* dst = a.data() + img * per;
        if (p->tokens.empty()) {
            std::copy_n(v.data(), per, dst);
            continue;
        }
        for (size_t h = 0; h < Hs; ++h)
            for (int t : p->tokens) std::copy_n(v.data() + (h * T + size_t(t)) * row, row, dst + (h * T + size_t(t)) * row);
    }
}

Pass::Pass(const Weights& w_, const Config& c_, const Options& opt_, const RunDims& rd_, Recorder& rec_, Workspace& ws_,
           bool dry_, size_t B_)
    : w(w_), c(c_), opt(opt_), rd(rd_), rec(rec_), ws(ws_), dry(dry_), B(B_), T(size_t(rd_.T)), R(B_ * size_t(rd_.T)),
      D(size_t(c_.width)), H(size_t(c_.heads)), d(size_t(c_.head_dim())), M(size_t(c_.mlp)), pool(opt_.pooling_for(c_)) {}

void Pass::patch(StageKind k, int l, Array& a) const {
    if (opt.iv.patch) patch_stage(opt, rec.info({k, l}), a, B);
}

void Pass::check_cancel() const {
    if (cancel && cancel->load(std::memory_order_relaxed)) throw Cancelled();
}

std::vector<std::pair<StageId, Shape>> forward_stages(const Config& c, const Options& opt) {
    std::vector<std::pair<StageId, Shape>> listed;
    const RunDims rd = run_dims(c, opt);
    Recorder rec(&listed);
    static const Weights none;
    Workspace ws;
    Pass p(none, c, opt, rd, rec, ws, true, 1);
    embed_part(p, Tensor4());
    for (int l = 0; l < c.depth; ++l) block_part(p, l, l + 1 == c.depth);
    head_part(p);
    return listed;
}

namespace {

// The size of a full trace from which on recorded stages that a pass does not read again are written
// past the caches (Recorder::stream): 16 MB, well over a core's L2. The default model's trace (under
// 2 MB) stays in cache between passes, where plain stores cost less (docs/kernels.md); ViT-Ti's and
// ViT-B's do not.
constexpr double kStreamFloats = 4 << 20;

// The options whose table gives the stages' order and shapes for a pass that records nothing: the
// interventions that change no shape removed, the dropped patches replaced by as many first ones.
Options shape_options(const Options& opt) {
    Options o = opt;
    const size_t dropped = opt.iv.dropped.size();
    o.iv = {};
    for (size_t i = 0; i < dropped; ++i) o.iv.dropped.push_back(int(i));
    return o;
}

}  // namespace

const Array& forward_batch(const Weights& w, const Tensor4& x, const Options& opt, Trace& acts, Keep keep,
                           Workspace& ws, const ModelIdentity& model, const std::atomic<bool>* cancel,
                           const RunFrom* from, const std::vector<char>* record_rows) {
    const Config& c = w.cfg;
    const RunDims rd = run_dims(c, opt);
    const size_t B = x.shape(0), C = size_t(c.channels), Hi = size_t(rd.img_h), Wi = size_t(rd.img_w),
                 T = size_t(rd.T), D = size_t(c.width);
    if (!opt.iv.empty() && keep == Keep::ForBackward)
        throw std::invalid_argument("training runs without interventions");
    if (from && (from->layer < 0 || from->layer > c.depth || !from->stream))
        throw std::invalid_argument("RunFrom: no block " + std::to_string(from ? from->layer : -1) + " to start at (0.." +
                                    std::to_string(c.depth) + ", " + std::to_string(c.depth) + ": after the last block)");
    if (!from && (x.shape(1) != C || x.shape(2) != Hi || x.shape(3) != Wi))
        throw std::invalid_argument("input has shape " + shape_str_of(x) + " but model '" + c.name + "' takes " +
                                    shape_str({B, C, Hi, Wi}) + " in this run");
    if (w.blocks.size() != size_t(c.depth)) throw std::invalid_argument("weights do not match config depth");
    if (keep == Keep::All && B != 1) throw std::invalid_argument("a traced run records one image");
    const size_t R = B * T;  // rows of the residual stream: (b, t), b-major
    // A traced run (and a sweep's pass) packs the weight matrices once for the GEMM kernel and
    // reuses them; training changes them every step, so it hands them over as they are.
    const gemm::Packs* packs = keep == Keep::ForBackward ? nullptr : &w.packs;

    std::optional<profile::Scope> table_prof;
    table_prof.emplace([] { return std::string("stage table (names, texts)"); }, 0);
    // A pass that records nothing reads the table only for the order and shapes of the stages, which
    // interventions do not change except through how many patches are dropped (not which): the
    // sweeps' passes (one ablated head, one dropped patch each) share one table instead of filling the
    // cache with a table per pass.
    std::shared_ptr<const StageTable> table = StageTable::get(c, keep == Keep::Output ? shape_options(opt) : opt);
    acts.begin(table, opt, model.name.empty() ? ModelIdentity{c.name, model.source} : model);
    if (keep == Keep::All && !record_rows && !(from && from->until >= 0) && rd.full_floats > kMaxTraceFloats) {
        char m[240];
        std::snprintf(m, sizeof m,
                      "a full trace at %dx%d records %.3g GB, over the limit of %.3g GB (its stages can be computed on "
                      "demand instead: `trace --out` without --record-all)",
                      rd.img_h, rd.img_w, rd.full_floats * 4 / 1e9, kMaxTraceFloats * 4 / 1e9);
        throw std::invalid_argument(m);
    }
    if (record_rows && (keep != Keep::All || record_rows->size() != table->size()))
        throw std::logic_error("forward_batch: record_rows is for a traced pass, one entry per row of its table");
    Recorder rec(*table, B, keep, acts, ws, record_rows);
    rec.set_stream(keep == Keep::All && rd.full_floats > kStreamFloats);
    table_prof.reset();
    Pass p(w, c, opt, rd, rec, ws, false, B);
    p.packs = packs;
    p.cancel = cancel;
    // The heads concatenated are kept per block for the backward pass; a pass that no backward
    // follows (on demand, output only) reuses one (R, D) array for every block.
    p.one_zcat = keep == Keep::Output || record_rows || (from && from->until >= 0);
    const size_t first_block = from ? size_t(from->layer) : 0;
    const size_t end_block = from && from->until >= 0 ? size_t(std::min(from->until, c.depth)) : size_t(c.depth);
    if (from) {
        rec.skip_to_block(from->layer);
        p.x = from->stream;
    } else {
        embed_part(p, x);
    }
    ws.qkv.resize({R, 3 * D});
    ws.zcat.resize(size_t(c.depth));
    for (size_t l = first_block; l < end_block; ++l) {
        p.check_cancel();
        block_part(p, int(l), l + 1 == end_block);
    }
    if (end_block < size_t(c.depth)) {  // a part of the pass (a block materialized on demand)
        acts.end();
        static const Array none;
        return none;
    }
    const Array& out = head_part(p);
    rec.done();
    acts.end();
    return out;
}

}  // namespace vit
