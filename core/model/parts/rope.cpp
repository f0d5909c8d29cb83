// Rotary position embeddings (DINOv3's RopePositionEmbedding and rope_apply): the angles of every kept
// patch and the rotation of q or k by them. attention_part records the rotated q and k (attn.q_rot,
// attn.k_rot); the Positions tab draws what the angles make of two patches (rope_similarity).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/model/rope.h"

namespace vit {

RopeAngles rope_angles(const Config& c, const Tensor1& periods, const RunDims& rd) {
    RopeAngles a;
    a.prefix = size_t(rd.prefix);
    a.half = size_t(c.head_dim() / 2);
    const size_t q = a.half / 2, n = rd.kept.size();
    if (periods.size() != q)
        throw std::invalid_argument("RoPE needs " + std::to_string(q) + " periods (head dim " +
                                    std::to_string(c.head_dim()) + " / 4); the weights hold " +
                                    std::to_string(periods.size()));
    a.cos.resize(n * a.half);
    a.sin.resize(n * a.half);
    for (size_t i = 0; i < n; ++i) {
        // dinov3 RopePositionEmbedding.forward (normalize_coords="separate"): the patch centre
        // (arange(0.5, H) / H, the same for W) moved from [0, 1] to [-1, 1], in float32
        const int patch = rd.kept[i], r = patch / rd.gw, col = patch % rd.gw;
        const float cy = 2.f * ((float(r) + 0.5f) / float(rd.gh)) - 1.f;
        const float cx = 2.f * ((float(col) + 0.5f) / float(rd.gw)) - 1.f;
        for (size_t j = 0; j < a.half; ++j) {
            // angles = 2 pi * coords[:, :, None] / periods: the row's d/4 angles, then the column's
            const double coord = j < q ? cy : cx, period = periods(j % q);
            const double ang = double(float(2.0 * M_PI * coord) / float(period));
            a.cos[i * a.half + j] = float(std::cos(ang));
            a.sin[i * a.half + j] = float(std::sin(ang));
        }
    }
    return a;
}

void rope_rotate(float* out, const float* in, const RopeAngles& a, size_t BH, size_t T) {
    const size_t h2 = a.half, d = 2 * h2;
    for (size_t bh = 0; bh < BH; ++bh)
        for (size_t t = 0; t < T; ++t) {
            const float* x = in + (bh * T + t) * d;
            float* y = out + (bh * T + t) * d;
            if (t < a.prefix) {  // cls and storage tokens: not rotated
                std::copy_n(x, d, y);
                continue;
            }
            const float* cs = a.cos.data() + (t - a.prefix) * h2;
            const float* sn = a.sin.data() + (t - a.prefix) * h2;
            // x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1] (the halves of the head's dims)
            for (size_t j = 0; j < h2; ++j) {
                y[j] = x[j] * cs[j] - x[j + h2] * sn[j];
                y[j + h2] = x[j + h2] * cs[j] + x[j] * sn[j];
            }
        }
}

void rope_rotate_back(float* g, const RopeAngles& a, size_t BH, size_t T) {
    const size_t h2 = a.half, d = 2 * h2;
    for (size_t bh = 0; bh < BH; ++bh)
        for (size_t t = a.prefix; t < T; ++t) {
            float* y = g + (bh * T + t) * d;
            const float* cs = a.cos.data() + (t - a.prefix) * h2;
            const float* sn = a.sin.data() + (t - a.prefix) * h2;
            for (size_t j = 0; j < h2; ++j) {
                const float y1 = y[j], y2 = y[j + h2];
                y[j] = y1 * cs[j] + y2 * sn[j];
                y[j + h2] = y2 * cs[j] - y1 * sn[j];
            }
        }
}

}  // namespace vit
