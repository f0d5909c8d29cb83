// Tensors are xtensor containers: xt::xtensor<float, N> where the rank is
// fixed (weights, batches, images), xt::xarray<float> in the trace, where the
// rank varies from stage to stage. This header brings in only the two
// container headers (about 1 s of compile time per file); expressions,
// views and reducers are included by the core's .cpp files that use them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
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

}  // namespace vit
