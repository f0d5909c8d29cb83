// The app's direct use of the core's tensors (xt::xarray<float> stages): rank, extents and
// 2-D slices, in one place.
#pragma once
#include <cstddef>
#include <string>

#include "core/model/tensor.h"

namespace vit::app {

inline size_t rank(const Array& t) { return t.dimension(); }
inline size_t extent(const Array& t, size_t axis) { return axis < t.dimension() ? t.shape(axis) : 0; }
inline std::string shape_text(const Array& t) { return shape_str_of(t); }
inline bool same_shape(const Array& a, const Array& b) { return a.shape() == b.shape(); }
inline Array make_tensor(std::initializer_list<size_t> shape) { return empty_array(Shape(shape)); }
inline const float* values(const Array& t) { return t.data(); }  // contiguous, row-major
// a - b, element by element (same shapes: check with same_shape first)
inline Array difference(const Array& a, const Array& b) { return a - b; }

// A 2-D view of what a heatmap shows: a vector is one row, a matrix itself, a rank-3 tensor one
// slice along its first axis. `slices` is the first axis' extent (1 below rank 3).
struct Slice2D {
    const float* data = nullptr;
    int rows = 0, cols = 0, slice = 0, slices = 1;
    size_t size() const { return size_t(rows) * size_t(cols); }
};
inline Slice2D slice2d(const Array& t, int slice) {
    Slice2D s;
    if (t.size() == 0) return s;
    const size_t r = t.dimension();
    if (r == 1) { s.data = t.data(); s.rows = 1; s.cols = int(t.shape(0)); }
    else if (r == 2) { s.data = t.data(); s.rows = int(t.shape(0)); s.cols = int(t.shape(1)); }
    else if (r == 3) {
        s.slices = int(t.shape(0));
        s.slice = slice < 0 ? 0 : (slice >= s.slices ? s.slices - 1 : slice);
        s.rows = int(t.shape(1)); s.cols = int(t.shape(2));
        s.data = t.data() + size_t(s.slice) * s.size();
    } else { s.data = t.data(); s.rows = 1; s.cols = int(t.size()); }  // any other rank: flat
    return s;
}

}  // namespace vit::app
