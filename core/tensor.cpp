#include "tensor.h"

#include <cstring>
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

Tensor::Tensor(Shape s) : shape(std::move(s)), n(shape_numel(shape)) {
    buf.reset(new float[n == 0 ? 1 : n]);
}

Tensor Tensor::zeros(Shape s) {
    Tensor t(std::move(s));
    std::memset(t.buf.get(), 0, t.n * sizeof(float));
    return t;
}

Tensor Tensor::clone() const {
    Tensor t(shape);
    if (n) std::memcpy(t.buf.get(), buf.get(), n * sizeof(float));
    return t;
}

void Trace::begin() { cursor_ = 0; }

float* Trace::record(const std::string& name, int layer, const Shape& shape) {
    if (progress_) progress_->fetch_add(1, std::memory_order_relaxed);
    if (cursor_ < entries_.size() && entries_[cursor_].name == name &&
        entries_[cursor_].tensor.shape == shape) {
        entries_[cursor_].layer = layer;
        return entries_[cursor_++].tensor.data();
    }
    // The sequence diverged (other model, other options): drop the rest.
    for (size_t i = cursor_; i < entries_.size(); ++i) index_.erase(entries_[i].name);
    entries_.resize(cursor_);
    if (index_.count(name)) throw std::logic_error("trace name recorded twice: " + name);
    entries_.push_back(TraceEntry{name, layer, Tensor(shape)});
    index_[name] = cursor_;
    return entries_[cursor_++].tensor.data();
}

void Trace::end() {
    for (size_t i = cursor_; i < entries_.size(); ++i) index_.erase(entries_[i].name);
    entries_.resize(cursor_);
}

int Trace::index_of(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? -1 : static_cast<int>(it->second);
}

const Tensor& Trace::get(const std::string& name) const {
    auto it = index_.find(name);
    if (it == index_.end()) throw std::out_of_range("no stage named '" + name + "' in the trace");
    return entries_[it->second].tensor;
}

size_t Trace::bytes() const {
    size_t b = 0;
    for (auto& e : entries_) b += e.tensor.size() * sizeof(float);
    return b;
}

}  // namespace vit
