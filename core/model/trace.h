// A trace: the record of one forward pass (and, when asked, its backward pass) that
// knows what it is. It holds the stage table it was recorded through, the options and
// the model it was computed with, and one array per row of the table (and a gradient
// per row that has one). Views, exports and explanations read a trace's own table and
// options, never the options requested since, so nothing on screen can describe a
// tensor with options it was not computed with. Look-ups by id are O(1).
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/model/stages.h"
#include "core/model/tensor.h"

namespace vit {

// Which model computed a trace: its config name and where its weights came from.
struct ModelIdentity {
    std::string name;    // the config's name: "vit-b16", "fmnist", ...
    std::string source;  // a file path, "preset:NAME", "embedded" ("" when not known)
};

class Trace {
public:
    Trace();
    ~Trace();
    Trace(Trace&&) noexcept;
    Trace& operator=(Trace&&) noexcept;
    Trace(const Trace&);  // a copy holds the same materialized arrays (shared, immutable) and its own lock
    Trace& operator=(const Trace&);

    // ---- recording (the forward and backward passes)
    // Starts a run recorded through `table`. The arrays of the last run are reused where a row's
    // shape is the same (a toggle re-running the same model): no allocation, no page faults.
    void begin(std::shared_ptr<const StageTable> table, const Options& opt, ModelIdentity model);
    // The array for the table's row `row`, of `shape` (the row's shape, or with a batch axis
    // when training). Rows are recorded in order; a row skipped stays empty.
    Array& record(size_t row, const Shape& shape);
    void end();
    // After a pass that started at a later block (RunFrom): a stage before it, as an earlier pass of
    // the same model, input and stages recorded it (forward_from copies them in).
    void adopt(size_t row, const Array& value);
    // The gradient of a stage (d logit[grad_class] / d stage), shaped as the stage (or as
    // `shape` when given: hand-made traces in tests).
    Array& record_grad(StageId id, const Shape& shape = {});
    void set_grad_class(int cls) { grad_class_ = cls; }
    void clear_grads();
    // Counts recorded stages while a run is in progress (for progress bars).
    void set_progress(std::atomic<int>* p) { progress_ = p; }
    // Counts n more units of work (the checkpointed backward pass: one per block).
    void add_progress(int n) {
        if (progress_) progress_->fetch_add(n, std::memory_order_relaxed);
    }

    // ---- what it is
    bool empty() const { return !table_; }
    const StageTable& table() const;                 // throws when empty
    const std::shared_ptr<const StageTable>& table_ptr() const { return table_; }
    const Options& options() const { return opt_; }  // exactly the options it was computed with
    const ModelIdentity& model() const { return model_; }
    int depth() const { return table_ ? table_->depth() : 0; }

    // ---- its arrays, by id (O(1)) or by row
    // On an on-demand trace (below), index/has answer for every block row without computing it, and
    // at/find/get of a row the pass did not keep materialize its block first.
    size_t size() const { return arrays_.size(); }   // rows of the table recorded
    const StageInfo& info(size_t row) const { return table()[row]; }
    const std::string& name(size_t row) const { return table()[row].name; }
    const Array& at(size_t row) const;
    int index(StageId id) const;                     // -1 when absent or not recorded
    bool has(StageId id) const { return index(id) >= 0; }
    const Array* find(StageId id) const;             // null when absent
    const Array& get(StageId id) const;              // throws std::out_of_range naming the stage
    const StageInfo& info(StageId id) const { return table().info(id); }

    // ---- by name: for the command line, exports and tests only
    int index_of(const std::string& name) const;
    const Array* find(const std::string& name) const;
    const Array& get(const std::string& name) const;  // throws std::out_of_range naming it

    // ---- gradients (present when the run asked for them; on an on-demand trace with gradients,
    // grad_at/grad of a block's row not kept by the pass compute that block's gradients, as at() does)
    bool has_grads() const { return has_grads_; }
    int grad_class() const { return grad_class_; }
    const Array* grad(StageId id) const;
    const Array* grad_at(size_t row) const;

    size_t bytes() const;  // the arrays held now: recorded, gradients and materialized

    // ---- stages on demand (issue 22)
    // A pass that recorded only some rows (forward with RunRequest::on_demand: the residual stream
    // and what the overview views read for every block) hands the trace a way to recompute one block
    // from the kept residual stream entering it: `recompute(kept, l, out)` runs block l alone and
    // records its rows into `out`, bit for bit as a full pass records them. Then every row of a block
    // is readable: index/has say so, at/find/get of a row not kept compute its block into a cache in
    // the trace (under a lock: jobs read traces too) and return it. A materialized array keeps its
    // address until trim(), which only the thread that owns the trace's readers calls, at a point
    // where none holds a reference (the window: the start of a frame). Jobs read with block(), which
    // computes into a trace of their own and never touches the cache.
    using BlockRecompute = std::function<void(const Trace& kept, int layer, Trace& out)>;
    // Gradients on demand, the same checkpointing (a pass with RunRequest::on_demand and grads): the
    // pass kept the gradients outside the blocks and of the rows it kept (the residual stream leaving
    // every block, the kept kinds); `grads(kept, l, stage, out)` runs block l's backward pass from the
    // kept gradient of the stream leaving it, reading the block's stages through `stage` (by row), and
    // records the gradient of each of its rows into `out` (record_grad; out begun on the same table),
    // bit for bit as the full backward records them. Then grad_at/grad of any block row that has a
    // gradient computes its block's gradients into the cache (its stages from the cache when they are
    // there, else recomputed), kept and trimmed like the stages.
    using StageRead = std::function<const Array&(size_t row)>;
    using BlockGrads = std::function<void(const Trace& kept, int layer, const StageRead& stage, Trace& out)>;
    // After the pass (end(), and its kept gradients); begin() clears it. `grads` may be null (no gradients).
    void set_on_demand(BlockRecompute recompute, BlockGrads grads = nullptr);
    bool on_demand() const;
    bool kept(size_t row) const { return row < recorded_.size() && recorded_[row]; }  // recorded by the pass itself
    bool grad_kept(size_t row) const { return has_grads_ && row < graded_.size() && graded_[row]; }  // by the pass
    // Whether grad_at(row) gives a gradient, without computing one.
    bool has_grad_at(size_t row) const;
    // Block `layer`'s rows as the pass would have recorded them, in a trace of the caller's own (the
    // kept rows of that block copied in too); with_grads, also the gradients of its rows (a trace with
    // gradients on demand). Any thread.
    Trace block(int layer, bool with_grads = false) const;
    // Drops the materialized arrays not read since the last trim() (a block is computed whole, and
    // what is not looked at of it goes); returns the bytes freed. A block materialized later drops
    // them too, before it is computed.
    size_t trim() const;
    struct OnDemandStats {
        int blocks_held = 0;     // blocks with arrays materialized now
        int last_block = -1;     // the block recomputed last (-1: none yet)
        double last_ms = 0;      // how long that took
        bool last_grads = false; // that recompute was of the block's gradients (its backward, and its stages when not held)
        int kept_block = -1;     // a block the pass recorded whole (the one in view: RunRequest::keep_block)
        int recomputes = 0;      // blocks recomputed since the pass (stages)
        int grad_recomputes = 0; // blocks whose gradients were recomputed since the pass
        size_t kept_bytes = 0;   // what the pass kept (stages)
        size_t kept_grad_bytes = 0;  // the gradients it kept (a pass with gradients)
        size_t cache_bytes = 0;  // what materialized blocks hold now
    };
    OnDemandStats on_demand_stats() const;

private:
    struct Lazy;
    std::unique_ptr<Lazy> lazy_;
    const Array* materialize(size_t row) const;
    const Array* materialize_grad(size_t row) const;
    void compute_block_locked(int layer) const;  // block `layer`'s stages into the cache (lock held)
    std::shared_ptr<const StageTable> table_;
    Options opt_;
    ModelIdentity model_;
    std::vector<Array> arrays_, grads_;
    std::vector<char> recorded_, graded_;  // which rows hold a value / a gradient (an empty xarray is 0-d, size 1)
    size_t cursor_ = 0;
    bool has_grads_ = false;
    int grad_class_ = -1;
    std::atomic<int>* progress_ = nullptr;
};

// token_label / token_range_text (stages.h) for the trace's own table.
inline std::string token_label(const Trace& t, int i, bool long_form = false) {
    return token_label(t.table(), i, long_form);
}
inline std::string token_range_text(const Trace& t) { return token_range_text(t.table()); }

}  // namespace vit
