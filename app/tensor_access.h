// The app's only direct use of the core's tensor type: rank, extents and 2-D slices. The core's
// Tensor is becoming an xtensor container; porting the app means changing these few lines.
#pragma once
#include <cstddef>
#include <string>

#include "core/tensor.h"

namespace vit::app {

inline size_t rank(const Tensor& t) { return t.dim(); }
inline size_t extent(const Tensor& t, size_t axis) { return axis < t.dim() ? t[axis] : 0; }
inline std::string shape_text(const Tensor& t) { return shape_str(t.shape); }
inline bool same_shape(const Tensor& a, const Tensor& b) { return a.shape == b.shape; }
inline Tensor make_tensor(std::initializer_list<size_t> shape) { return Tensor(Shape(shape)); }
inline const float* values(const Tensor& t) { return t.data(); }  // contiguous, row-major
// a - b, element by element (same shapes: check with same_shape first)
inline Tensor difference(const Tensor& a, const Tensor& b) {
    Tensor d(a.shape);
    for (size_t i = 0; i < d.size(); ++i) d.data()[i] = a.data()[i] - b.data()[i];
    return d;
}

// A 2-D view of what a heatmap shows: a vector is one row, a matrix itself, a rank-3 tensor one
// slice along its first axis. `slices` is the first axis' extent (1 below rank 3).
struct Slice2D {
    const float* data = nullptr;
    int rows = 0, cols = 0, slice = 0, slices = 1;
    size_t size() const { return size_t(rows) * size_t(cols); }
};
inline Slice2D slice2d(const Tensor& t, int slice) {
    Slice2D s;
    if (t.size() == 0) return s;
    if (t.dim() == 1) { s.data = t.data(); s.rows = 1; s.cols = int(t[0]); }
    else if (t.dim() == 2) { s.data = t.data(); s.rows = int(t[0]); s.cols = int(t[1]); }
    else if (t.dim() == 3) {
        s.slices = int(t[0]);
        s.slice = slice < 0 ? 0 : (slice >= s.slices ? s.slices - 1 : slice);
        s.rows = int(t[1]); s.cols = int(t[2]);
        s.data = t.data() + size_t(s.slice) * s.size();
    } else { s.data = t.data(); s.rows = 1; s.cols = int(t.size()); }  // any other rank: flat
    return s;
}

}  // namespace vit::app
