// A trace: the record of one forward pass (and, when asked, its backward pass) that
// knows what it is. It holds the stage table it was recorded through, the options and
// the model it was computed with, and one array per row of the table (and a gradient
// per row that has one). Views, exports and explanations read a trace's own table and
// options, never the options requested since, so nothing on screen can describe a
// tensor with options it was not computed with. Look-ups by id are O(1).
#pragma once
#include <atomic>
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

    // ---- what it is
    bool empty() const { return !table_; }
    const StageTable& table() const;                 // throws when empty
    const std::shared_ptr<const StageTable>& table_ptr() const { return table_; }
    const Options& options() const { return opt_; }  // exactly the options it was computed with
    const ModelIdentity& model() const { return model_; }
    int depth() const { return table_ ? table_->depth() : 0; }

    // ---- its arrays, by id (O(1)) or by row
    size_t size() const { return arrays_.size(); }   // rows of the table recorded
    const StageInfo& info(size_t row) const { return table()[row]; }
    const std::string& name(size_t row) const { return table()[row].name; }
    const Array& at(size_t row) const { return arrays_.at(row); }
    int index(StageId id) const;                     // -1 when absent or not recorded
    bool has(StageId id) const { return index(id) >= 0; }
    const Array* find(StageId id) const;             // null when absent
    const Array& get(StageId id) const;              // throws std::out_of_range naming the stage
    const StageInfo& info(StageId id) const { return table().info(id); }

    // ---- by name: for the command line, exports and tests only
    int index_of(const std::string& name) const;
    const Array* find(const std::string& name) const;
    const Array& get(const std::string& name) const;  // throws std::out_of_range naming it

    // ---- gradients (present when the run asked for them)
    bool has_grads() const { return has_grads_; }
    int grad_class() const { return grad_class_; }
    const Array* grad(StageId id) const;
    const Array* grad_at(size_t row) const;

    size_t bytes() const;

private:
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
