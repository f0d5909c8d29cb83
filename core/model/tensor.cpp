#include "core/model/tensor.h"

#include <sstream>
#include <stdexcept>

namespace vit {

size_t shape_numel(const Shape& s) {
    size_t n = 1;
    for (size_t d : s) n *= d;
    return n;
}

std::string shape_str(const Shape& s) {
    std::ostringstream o;
    o << "(";
    for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
    if (s.size() == 1) o << ",";
    o << ")";
    return o.str();
}

void Trace::begin() { cursor_ = 0; }

Array& Trace::record(const std::string& name, int layer, const Shape& shape) {
    if (progress_) progress_->fetch_add(1, std::memory_order_relaxed);
    if (cursor_ < entries_.size() && entries_[cursor_].name == name &&
        std::equal(shape.begin(), shape.end(), entries_[cursor_].tensor.shape().begin(),
                   entries_[cursor_].tensor.shape().end())) {
        entries_[cursor_].layer = layer;
        return entries_[cursor_++].tensor;
    }
    // The sequence diverged (other model, other options): drop the rest.
    for (size_t i = cursor_; i < entries_.size(); ++i) index_.erase(entries_[i].name);
    entries_.resize(cursor_);
    if (index_.count(name)) throw std::logic_error("trace name recorded twice: " + name);
    entries_.push_back(TraceEntry{name, layer, empty_array(shape)});
    index_[name] = cursor_;
    return entries_[cursor_++].tensor;
}

void Trace::end() {
    for (size_t i = cursor_; i < entries_.size(); ++i) index_.erase(entries_[i].name);
    entries_.resize(cursor_);
}

int Trace::index_of(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? -1 : static_cast<int>(it->second);
}

const Array& Trace::get(const std::string& name) const {
    auto it = index_.find(name);
    if (it == index_.end()) throw std::out_of_range("no stage named '" + name + "' in the trace");
    return entries_[it->second].tensor;
}

const Array* Trace::find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &entries_[it->second].tensor;
}

size_t Trace::bytes() const {
    size_t b = 0;
    for (auto& e : entries_) b += e.tensor.size() * sizeof(float);
    return b;
}

}  // namespace vit
