// Tensors are xtensor containers: xt::xtensor<float, N> where the rank is
// fixed (weights, batches, images), xt::xarray<float> in the trace, where the
// rank varies from stage to stage. This header brings in only the two
// container headers (about 1 s of compile time per file); expressions,
// views and reducers are included by the core's .cpp files that use them.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>
#include <xtensor/xarray.hpp>
#include <xtensor/xtensor.hpp>

namespace vit {

using Shape = std::vector<size_t>;
using Array = xt::xarray<float>;          // any rank: a recorded stage, a file's tensor
using Tensor1 = xt::xtensor<float, 1>;    // (D), (K)
using Tensor2 = xt::xtensor<float, 2>;    // (T, D), (out, in)
using Tensor3 = xt::xtensor<float, 3>;    // (C, H, W), (H, T, d)
using Tensor4 = xt::xtensor<float, 4>;    // (B, C, H, W)

size_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "(197, 768)"
// The shape of any xtensor container as a Shape.
template <class E>
Shape shape_of(const E& e) {
    return Shape(e.shape().begin(), e.shape().end());
}
template <class E>
std::string shape_str_of(const E& e) {
    return shape_str(shape_of(e));
}
// An uninitialised array of this shape (the computation overwrites every element:
// no page faults for zeroing the ~200 MB a ViT-B trace records).
inline Array empty_array(const Shape& s) { return Array::from_shape(s); }

// One recorded stage of a forward pass.
struct TraceEntry {
    std::string name;   // "blocks.3.attn.pattern"
    int layer = -1;     // block index, -1 outside the blocks
    Array tensor;
};

// The ordered record of a forward pass: the order is the step-through
// cursor, the name is the interface. The computation writes each stage
// straight into the array record() returns (nothing is copied afterwards);
// that reference stays valid while later stages are recorded.
// Recording into an existing trace reuses its arrays when the sequence of
// names and shapes is unchanged (a toggle re-running the same model), so
// repeated runs neither allocate nor page-fault.
class Trace {
public:
    void begin();                                                    // start a new run
    Array& record(const std::string& name, int layer, const Shape& shape);
    void end();                                                      // drop stale entries

    const std::deque<TraceEntry>& entries() const { return entries_; }
    size_t size() const { return entries_.size(); }
    bool has(const std::string& name) const { return index_.count(name) != 0; }
    int index_of(const std::string& name) const;                      // -1 if absent
    const Array& get(const std::string& name) const;                  // throws if absent
    const Array* find(const std::string& name) const;                 // null if absent
    const TraceEntry& at(size_t i) const { return entries_.at(i); }
    size_t bytes() const;
    // Counts recorded stages while a run is in progress (for progress bars).
    void set_progress(std::atomic<int>* p) { progress_ = p; }

private:
    std::atomic<int>* progress_ = nullptr;
    // A deque: the computation holds the arrays record() returned while it records the
    // next stages, and appending to a deque never moves the existing entries.
    std::deque<TraceEntry> entries_;
    std::unordered_map<std::string, size_t> index_;
    size_t cursor_ = 0;
};

}  // namespace vit
