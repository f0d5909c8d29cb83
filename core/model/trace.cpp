#include "core/model/trace.h"

#include <algorithm>
#include <stdexcept>

namespace vit {

void Trace::begin(std::shared_ptr<const StageTable> table, const Options& opt, ModelIdentity model) {
    if (!table) throw std::invalid_argument("Trace::begin: no stage table");
    // The arrays of the last run are kept (another table too: a toggle's options, a model of the same
    // size): record() reshapes a row only when its shape differs, so a re-run writes into pages it has.
    recorded_.assign(table->size(), 0);
    graded_.assign(table->size(), 0);
    table_ = std::move(table);
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
    return i >= 0 && size_t(i) < recorded_.size() && recorded_[size_t(i)] ? i : -1;
}

const Array* Trace::find(StageId id) const {
    const int i = index(id);
    return i < 0 ? nullptr : &arrays_[size_t(i)];
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
    return i < 0 ? nullptr : &arrays_[size_t(i)];
}

const Array& Trace::get(const std::string& name) const {
    const Array* a = find(name);
    if (!a) throw std::out_of_range("no stage named '" + name + "' in the trace");
    return *a;
}

const Array* Trace::grad_at(size_t row) const {
    return has_grads_ && row < graded_.size() && graded_[row] ? &grads_[row] : nullptr;
}

const Array* Trace::grad(StageId id) const {
    const int i = table_ ? table_->index(id) : -1;
    return i < 0 ? nullptr : grad_at(size_t(i));
}

size_t Trace::bytes() const {
    size_t b = 0;
    for (size_t i = 0; i < arrays_.size(); ++i) b += recorded_[i] ? arrays_[i].size() * sizeof(float) : 0;
    for (size_t i = 0; i < grads_.size(); ++i) b += graded_[i] ? grads_[i].size() * sizeof(float) : 0;
    return b;
}

}  // namespace vit
