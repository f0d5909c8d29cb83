#include "core/model/trace.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <stdexcept>

namespace vit {

// The on-demand state: how to recompute a block, and the blocks materialized so far.
struct Trace::Lazy {
    BlockRecompute recompute;
    BlockGrads grads;  // null: the pass computed no gradients
    mutable std::mutex mu;
    std::vector<std::shared_ptr<const Array>> cache;  // per row: a materialized array (null: none)
    std::vector<char> used;                            // per row: read since the last trim()
    std::vector<std::shared_ptr<const Array>> gcache;  // per row: a materialized gradient
    std::vector<char> gused;                           // per row: its gradient read since the last trim()
    int last_block = -1, recomputes = 0, grad_recomputes = 0;
    bool last_grads = false;
    double last_ms = 0;

    Lazy() = default;
    Lazy(const Lazy& o) : recompute(o.recompute), grads(o.grads) {
        std::lock_guard<std::mutex> g(o.mu);
        cache = o.cache;
        used = o.used;
        gcache = o.gcache;
        gused = o.gused;
        last_block = o.last_block;
        recomputes = o.recomputes;
        grad_recomputes = o.grad_recomputes;
        last_grads = o.last_grads;
        last_ms = o.last_ms;
    }
    // Drops what was not read since the last trim() (stages and gradients), except block `keep`'s.
    void drop_unused(const StageTable& t, int keep) {
        for (size_t r = 0; r < cache.size(); ++r) {
            if (t[r].layer == keep) continue;
            if (cache[r] && !used[r]) cache[r].reset();
            if (gcache[r] && !gused[r]) gcache[r].reset();
        }
    }
};

Trace::Trace() = default;
Trace::~Trace() = default;
Trace::Trace(Trace&&) noexcept = default;
Trace& Trace::operator=(Trace&&) noexcept = default;
Trace::Trace(const Trace& o)
    : table_(o.table_), opt_(o.opt_), model_(o.model_), arrays_(o.arrays_), grads_(o.grads_), recorded_(o.recorded_),
      graded_(o.graded_), cursor_(o.cursor_), has_grads_(o.has_grads_), grad_class_(o.grad_class_), progress_(nullptr) {
    if (o.lazy_) lazy_ = std::make_unique<Lazy>(*o.lazy_);
}
Trace& Trace::operator=(const Trace& o) {
    if (this != &o) *this = Trace(o);
    return *this;
}

void Trace::begin(std::shared_ptr<const StageTable> table, const Options& opt, ModelIdentity model) {
    if (!table) throw std::invalid_argument("Trace::begin: no stage table");
    // The arrays of the last run are kept (another table too: a toggle's options, a model of the same
    // size): record() reshapes a row only when its shape differs, so a re-run writes into pages it has.
    recorded_.assign(table->size(), 0);
    graded_.assign(table->size(), 0);
    table_ = std::move(table);
    lazy_.reset();  // a new pass: nothing materialized, nothing to materialize from
    opt_ = opt;
    model_ = std::move(model);
    cursor_ = 0;
    has_grads_ = false;
    grad_class_ = -1;
    arrays_.resize(table_->size());
}

Array& Trace::record(size_t row, const Shape& shape) {
    if (row >= arrays_.size() || row < cursor_)
        throw std::logic_error("Trace::record: row " + std::to_string(row) + " out of order");
    if (progress_) progress_->fetch_add(int(row - cursor_) + 1, std::memory_order_relaxed);
    for (size_t i = cursor_; i < row; ++i) arrays_[i] = Array();  // skipped: not kept by this run
    cursor_ = row + 1;
    recorded_[row] = 1;
    Array& a = arrays_[row];
    if (a.dimension() != shape.size() || !std::equal(shape.begin(), shape.end(), a.shape().begin()))
        a = empty_array(shape);
    return a;
}

void Trace::end() {
    // Rows never recorded (training keeps only some) stay empty; the table lists them all.
    for (size_t i = cursor_; i < arrays_.size(); ++i) arrays_[i] = Array();
}

void Trace::adopt(size_t row, const Array& value) {
    if (row >= arrays_.size() || recorded_[row])
        throw std::logic_error("Trace::adopt: row " + std::to_string(row) + " is recorded or out of range");
    const StageInfo& s = table()[row];
    if (value.dimension() != s.shape.size() || !std::equal(s.shape.begin(), s.shape.end(), value.shape().begin()))
        throw std::logic_error("Trace::adopt: " + s.name + " has shape " + shape_str(s.shape) + ", not " + shape_str_of(value));
    arrays_[row] = value;
    recorded_[row] = 1;
}

Array& Trace::record_grad(StageId id, const Shape& want) {
    const int i = table().index(id);
    if (i < 0) throw std::logic_error("Trace::record_grad: no stage " + stage_name(id) + " in this table");
    const StageInfo& s = table()[size_t(i)];
    if (!s.has_grad) throw std::logic_error("Trace::record_grad: " + s.name + " has no gradient in the stage table");
    grads_.resize(arrays_.size());
    has_grads_ = true;
    graded_[size_t(i)] = 1;
    Array& g = grads_[size_t(i)];
    const Shape& shape = want.empty() ? s.shape : want;
    if (g.dimension() != shape.size() || !std::equal(shape.begin(), shape.end(), g.shape().begin()))
        g = empty_array(shape);
    return g;
}

void Trace::clear_grads() {
    grads_.clear();
    std::fill(graded_.begin(), graded_.end(), 0);
    has_grads_ = false;
    grad_class_ = -1;
}

const StageTable& Trace::table() const {
    if (!table_) throw std::logic_error("the trace is empty: no forward pass was recorded");
    return *table_;
}

int Trace::index(StageId id) const {
    if (!table_) return -1;
    const int i = table_->index(id);
    if (i < 0 || size_t(i) >= recorded_.size()) return -1;
    if (recorded_[size_t(i)]) return i;
    return lazy_ && (*table_)[size_t(i)].layer >= 0 ? i : -1;  // a block's row: materialized when read
}

const Array& Trace::at(size_t row) const {
    if (row < recorded_.size() && !recorded_[row] && lazy_ && (*table_)[row].layer >= 0) return *materialize(row);
    return arrays_.at(row);
}

const Array* Trace::find(StageId id) const {
    const int i = index(id);
    return i < 0 ? nullptr : &at(size_t(i));
}

const Array& Trace::get(StageId id) const {
    const Array* a = find(id);
    if (!a) throw std::out_of_range("the trace has no stage '" + (table_ ? table_->name(id) : stage_name(id)) + "'");
    return *a;
}

int Trace::index_of(const std::string& name) const {
    if (!table_) return -1;
    const StageInfo* s = table_->find(name);
    return s ? index(s->id) : -1;
}

const Array* Trace::find(const std::string& name) const {
    const int i = index_of(name);
    return i < 0 ? nullptr : &at(size_t(i));
}

const Array& Trace::get(const std::string& name) const {
    const Array* a = find(name);
    if (!a) throw std::out_of_range("no stage named '" + name + "' in the trace");
    return *a;
}

bool Trace::has_grad_at(size_t row) const {
    if (!has_grads_ || row >= graded_.size()) return false;
    if (graded_[row]) return true;
    const StageInfo& s = (*table_)[row];
    return lazy_ && lazy_->grads && s.layer >= 0 && s.has_grad;
}

const Array* Trace::grad_at(size_t row) const {
    if (!has_grads_ || row >= graded_.size()) return nullptr;
    if (graded_[row]) return &grads_[row];
    return has_grad_at(row) ? materialize_grad(row) : nullptr;
}

const Array* Trace::grad(StageId id) const {
    const int i = table_ ? table_->index(id) : -1;
    return i < 0 ? nullptr : grad_at(size_t(i));
}

size_t Trace::bytes() const {
    size_t b = 0;
    for (size_t i = 0; i < arrays_.size(); ++i) b += recorded_[i] ? arrays_[i].size() * sizeof(float) : 0;
    for (size_t i = 0; i < grads_.size(); ++i) b += graded_[i] ? grads_[i].size() * sizeof(float) : 0;
    return b + on_demand_stats().cache_bytes;
}

// ---- stages on demand

void Trace::set_on_demand(BlockRecompute recompute, BlockGrads grads) {
    if (!table_) throw std::logic_error("Trace::set_on_demand: no pass was recorded");
    if (!recompute) throw std::invalid_argument("Trace::set_on_demand: no way to recompute a block");
    if (grads && !has_grads_) throw std::logic_error("Trace::set_on_demand: gradients on demand without the pass's gradients");
    lazy_ = std::make_unique<Lazy>();
    lazy_->recompute = std::move(recompute);
    lazy_->grads = std::move(grads);
    lazy_->cache.assign(table_->size(), nullptr);
    lazy_->used.assign(table_->size(), 0);
    lazy_->gcache.assign(table_->size(), nullptr);
    lazy_->gused.assign(table_->size(), 0);
}

bool Trace::on_demand() const { return lazy_ != nullptr; }

void Trace::compute_block_locked(int l) const {
    Lazy& z = *lazy_;
    const StageTable& t = *table_;
    Trace out;
    z.recompute(*this, l, out);
    for (size_t r = 0; r < t.size(); ++r) {
        if (t[r].layer != l || recorded_[r]) continue;
        if (!out.kept(r)) throw std::logic_error("Trace: recomputing block " + std::to_string(l) + " gave no " + t[r].name);
        // a row still held (read since the last trim) keeps its array: a view may hold a reference
        // into it (the same numbers: the block is recomputed bit for bit)
        if (!z.cache[r]) z.cache[r] = std::make_shared<const Array>(std::move(out.arrays_[r]));
    }
    ++z.recomputes;
}

const Array* Trace::materialize(size_t row) const {
    Lazy& z = *lazy_;
    const StageTable& t = *table_;
    const int l = t[row].layer;
    std::lock_guard<std::mutex> g(z.mu);
    z.used[row] = 1;
    if (!z.cache[row]) {
        // Before a block is computed, the arrays not read since the last trim() go: no reference into
        // them is held (the trim contract), and a switch from block to block then holds one block, not two.
        z.drop_unused(t, -2);
        const auto t0 = std::chrono::steady_clock::now();
        compute_block_locked(l);
        z.last_block = l;
        z.last_grads = false;
        z.last_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    return z.cache[row].get();
}

const Array* Trace::materialize_grad(size_t row) const {
    Lazy& z = *lazy_;
    const StageTable& t = *table_;
    const int l = t[row].layer;
    std::lock_guard<std::mutex> g(z.mu);
    z.gused[row] = 1;
    if (!z.gcache[row]) {
        // as materialize(): what was not read since the last trim() goes first, but not the block's own
        // stages (a view that shows a gradient has usually just read the stage: they are reused)
        z.drop_unused(t, l);
        const auto t0 = std::chrono::steady_clock::now();
        bool missing = false;
        for (size_t r = 0; r < t.size(); ++r) missing = missing || (t[r].layer == l && !recorded_[r] && !z.cache[r]);
        if (missing) compute_block_locked(l);  // its stages stay in the cache, unread until a view reads them
        const StageRead stage = [&](size_t r) -> const Array& {
            if (r >= t.size() || t[r].layer != l) throw std::logic_error("Trace: block " + std::to_string(l) +
                                                                         "'s backward read another block's stage");
            return recorded_[r] ? arrays_[r] : *z.cache[r];
        };
        Trace out;
        out.begin(table_, opt_, model_);
        z.grads(*this, l, stage, out);
        for (size_t r = 0; r < t.size(); ++r) {
            if (t[r].layer != l || graded_[r] || !t[r].has_grad) continue;
            if (!out.grad_kept(r))
                throw std::logic_error("Trace: the backward pass of block " + std::to_string(l) + " gave no gradient of " + t[r].name);
            if (!z.gcache[r]) z.gcache[r] = std::make_shared<const Array>(std::move(out.grads_[r]));  // held ones stay
        }
        z.last_block = l;
        z.last_grads = true;
        z.last_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        ++z.grad_recomputes;
    }
    return z.gcache[row].get();
}

Trace Trace::block(int layer, bool with_grads) const {
    if (!table_ || layer < 0 || layer >= table_->depth())
        throw std::out_of_range("Trace::block: no block " + std::to_string(layer));
    Trace out;
    if (lazy_) {
        lazy_->recompute(*this, layer, out);  // reads only kept rows: no lock, no cache
        if (with_grads && lazy_->grads) {
            const StageRead stage = [&out](size_t r) -> const Array& { return out.at(r); };
            lazy_->grads(*this, layer, stage, out);  // reads only kept gradients
            out.grad_class_ = grad_class_;
        }
        return out;
    }
    out.begin(table_, opt_, model_);
    for (size_t r = 0; r < table_->size(); ++r)
        if ((*table_)[r].layer == layer && recorded_[r]) out.adopt(r, arrays_[r]);
    if (with_grads && has_grads_) {
        for (size_t r = 0; r < table_->size(); ++r)
            if ((*table_)[r].layer == layer && graded_[r]) out.record_grad((*table_)[r].id) = grads_[r];
        out.grad_class_ = grad_class_;
    }
    return out;
}

size_t Trace::trim() const {
    if (!lazy_) return 0;
    Lazy& z = *lazy_;
    std::lock_guard<std::mutex> g(z.mu);
    size_t freed = 0;
    for (size_t r = 0; r < z.cache.size(); ++r) {
        if (z.cache[r] && !z.used[r]) {
            freed += z.cache[r]->size() * sizeof(float);
            z.cache[r].reset();
        }
        if (z.gcache[r] && !z.gused[r]) {
            freed += z.gcache[r]->size() * sizeof(float);
            z.gcache[r].reset();
        }
    }
    std::fill(z.used.begin(), z.used.end(), 0);
    std::fill(z.gused.begin(), z.gused.end(), 0);
    return freed;
}

Trace::OnDemandStats Trace::on_demand_stats() const {
    OnDemandStats s;
    for (size_t i = 0; i < arrays_.size(); ++i) s.kept_bytes += recorded_[i] ? arrays_[i].size() * sizeof(float) : 0;
    for (size_t i = 0; i < grads_.size(); ++i) s.kept_grad_bytes += graded_[i] ? grads_[i].size() * sizeof(float) : 0;
    if (!lazy_) return s;
    {
        // the first block whose every row the pass recorded
        std::vector<char> whole(size_t(std::max(0, table_->depth())), 1);
        for (size_t r = 0; r < table_->size(); ++r)
            if ((*table_)[r].layer >= 0 && !kept(r)) whole[size_t((*table_)[r].layer)] = 0;
        const auto k = std::find(whole.begin(), whole.end(), 1);
        if (k != whole.end()) s.kept_block = int(k - whole.begin());
    }
    const Lazy& z = *lazy_;
    std::lock_guard<std::mutex> g(z.mu);
    std::vector<char> held(size_t(std::max(0, table_->depth())), 0);
    for (size_t r = 0; r < z.cache.size(); ++r)
        for (const auto* c : {&z.cache[r], &z.gcache[r]})
            if (*c) {
                s.cache_bytes += (*c)->size() * sizeof(float);
                held[size_t((*table_)[r].layer)] = 1;
            }
    s.blocks_held = int(std::count(held.begin(), held.end(), 1));
    s.last_block = z.last_block;
    s.last_ms = z.last_ms;
    s.last_grads = z.last_grads;
    s.recomputes = z.recomputes;
    s.grad_recomputes = z.grad_recomputes;
    return s;
}

}  // namespace vit
