// Rotary position embeddings (Config::rope): DINOv3's axial RoPE, the part attention uses and the
// teaching views read (core/model/parts/rope.cpp).
#pragma once
#include <cstddef>
#include <vector>

#include "core/model/model.h"

namespace vit {

// The cos and sin of every kept patch's d/2 angles: 2 pi * coord / period, the patch centre's row
// (the first d/4 angles) and column (the next d/4) scaled to [-1, 1] on each axis separately
// (normalize_coords="separate"), periods Weights::rope_periods. Throws when the periods are not d/4.
struct RopeAngles {
    size_t prefix = 0, half = 0;     // tokens before the patches; d/2
    std::vector<float> cos, sin;     // (kept patches, d/2)
};
RopeAngles rope_angles(const Config& c, const Tensor1& periods, const RunDims& rd);
// q or k (B*H, T, d) rotated: x * cos + rotate_half(x) * sin, each head's dims i and i + d/2 a pair
// turned by angle i; the prefix tokens (cls, storage) copied unturned.
void rope_rotate(float* out, const float* in, const RopeAngles& a, size_t BH, size_t T);
// Its backward, in place: the gradient of the rotated q or k (B*H, T, d) turned back by the same angles (the
// rotation's transpose: dx1 = dy1 cos + dy2 sin, dx2 = dy2 cos - dy1 sin); the prefix tokens' rows unchanged.
void rope_rotate_back(float* g, const RopeAngles& a, size_t BH, size_t T);

}  // namespace vit
