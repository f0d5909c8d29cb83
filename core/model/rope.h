// Rotary position embeddings (Config::rope): DINOv3's axial RoPE, the part attention uses and the
// teaching views read (core/model/parts/rope.cpp).
#pragma once
#include <cstddef>
#include <vector>

#include "core/model/model.h"

namespace vit {

// The cos and sin of every kept patch's d/2 angles (Config::rope_kind): DINOv3's 2 pi * coord / period, the patch
// centre's row (the first d/4 angles) and column (the next d/4) scaled to [-1, 1] on each axis separately
// (normalize_coords="separate"), periods Weights::rope_periods (throws when they are not d/4); EVA-02's t / 10000^(j /
// (d/4)), t the patch's row (first d/4) and column index times rope_ref_grid / grid; PE's the same with t = (index + 1)
// * rope_ref_grid / grid and the column's d/4 angles first.
struct RopeAngles {
    size_t prefix = 0, half = 0;     // tokens before the patches; d/2
    bool interleaved = false;        // angle j turns dims (2j, 2j + 1) (EVA-02, PE), else (j, j + d/2) (DINOv3)
    std::vector<float> cos, sin;     // (kept patches, d/2)
    size_t pair1(size_t j) const { return interleaved ? 2 * j : j; }
    size_t pair2(size_t j) const { return interleaved ? 2 * j + 1 : j + half; }
};
RopeAngles rope_angles(const Config& c, const Tensor1& periods, const RunDims& rd);
// q or k (B*H, T, d) rotated: each pair of a head's dims (pair1(j), pair2(j)) turned by angle j; the prefix tokens
// (cls, storage) copied unturned.
void rope_rotate(float* out, const float* in, const RopeAngles& a, size_t BH, size_t T);
// Its backward, in place: the gradient of the rotated q or k (B*H, T, d) turned back by the same angles (the
// rotation's transpose: dx1 = dy1 cos + dy2 sin, dx2 = dy2 cos - dy1 sin); the prefix tokens' rows unchanged.
void rope_rotate_back(float* g, const RopeAngles& a, size_t BH, size_t T);

}  // namespace vit
