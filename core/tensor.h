// Plain tensor and trace types shared by the core, the app and the tests.
// Deliberately free of xtensor: this header is included everywhere, xtensor
// headers are slow to compile and live only in core/*.cpp.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace vit {

using Shape = std::vector<size_t>;

size_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "(197, 768)"

// A dense row-major float32 tensor. Storage is left uninitialised on
// allocation (the forward pass overwrites every element), which matters for
// the ~200 MB a ViT-B trace records.
struct Tensor {
    Shape shape;
    std::unique_ptr<float[]> buf;
    size_t n = 0;

    Tensor() = default;
    explicit Tensor(Shape s);
    static Tensor zeros(Shape s);
    Tensor(Tensor&&) noexcept = default;
    Tensor& operator=(Tensor&&) noexcept = default;
    Tensor clone() const;

    float* data() { return buf.get(); }
    const float* data() const { return buf.get(); }
    size_t size() const { return n; }
    size_t dim() const { return shape.size(); }
    size_t operator[](size_t axis) const { return shape.at(axis); }
    float& operator()(size_t i) { return buf[i]; }
    float operator()(size_t i) const { return buf[i]; }
    float& at2(size_t i, size_t j) { return buf[i * shape[1] + j]; }
    float at2(size_t i, size_t j) const { return buf[i * shape[1] + j]; }
};

// One recorded stage of a forward pass.
struct TraceEntry {
    std::string name;   // "blocks.3.attn.pattern"
    int layer = -1;     // block index, -1 outside the blocks
    Tensor tensor;
};

// The ordered record of a forward pass: the order is the step-through
// cursor, the name is the interface. Recording into an existing trace reuses
// its buffers when the sequence of names and shapes is unchanged (the common
// case when a toggle re-runs the same model), so repeated runs neither
// allocate nor page-fault.
class Trace {
public:
    void begin();                                    // start a new run
    float* record(const std::string& name, int layer, const Shape& shape);
    void end();                                      // drop stale entries

    const std::vector<TraceEntry>& entries() const { return entries_; }
    size_t size() const { return entries_.size(); }
    bool has(const std::string& name) const { return index_.count(name) != 0; }
    int index_of(const std::string& name) const;     // -1 if absent
    const Tensor& get(const std::string& name) const;  // throws if absent
    const TraceEntry& at(size_t i) const { return entries_.at(i); }
    size_t bytes() const;
    // Counts recorded stages while a run is in progress (for progress bars).
    void set_progress(std::atomic<int>* p) { progress_ = p; }

private:
    std::atomic<int>* progress_ = nullptr;
    std::vector<TraceEntry> entries_;
    std::unordered_map<std::string, size_t> index_;
    size_t cursor_ = 0;
};

}  // namespace vit
