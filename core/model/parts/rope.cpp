// Rotary position embeddings (DINOv3's RopePositionEmbedding and rope_apply; timm's RotaryEmbeddingCat for EVA-02 and PE): the angles of every kept
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
    a.interleaved = c.rope_kind != RopeKind::Dinov3;
    const bool pe = c.rope_kind == RopeKind::Pe;
    const size_t q = a.half / 2, n = rd.kept.size();
    if (c.rope_kind == RopeKind::Dinov3 && periods.size() != q)
        throw std::invalid_argument("RoPE needs " + std::to_string(q) + " periods (head dim " +
                                    std::to_string(c.head_dim()) + " / 4); the weights hold " +
                                    std::to_string(periods.size()));
    a.cos.resize(n * a.half);
    a.sin.resize(n * a.half);
    // EVA-02 (timm build_fourier_pos_embed, in_pixels=False): t = index / grid * ref_feat_shape per axis, bands
    // 1 / 10000^(j / (d/4)) (freq_bands, step 1); the angle is t * band (computed here in double, the reference's).
    // PE (grid_offset 1, grid_indexing 'xy'): t = (index + 1) / grid * ref, and the meshgrid's first axis is the column
    const double off = pe ? 1.0 : 0.0;
    const double ref_h = c.rope_ref_grid > 0 ? c.rope_ref_grid : rd.gh, ref_w = c.rope_ref_grid > 0 ? c.rope_ref_grid : rd.gw;
    for (size_t i = 0; i < n; ++i) {
        const int patch = rd.kept[i], r = patch / rd.gw, col = patch % rd.gw;
        // dinov3 RopePositionEmbedding.forward (normalize_coords="separate"): the patch centre
        // (arange(0.5, H) / H, the same for W) moved from [0, 1] to [-1, 1], in float32
        const float cy = 2.f * ((float(r) + 0.5f) / float(rd.gh)) - 1.f;
        const float cx = 2.f * ((float(col) + 0.5f) / float(rd.gw)) - 1.f;
        const double ty = (double(r) + off) / rd.gh * ref_h, tx = (double(col) + off) / rd.gw * ref_w;
        const double t1 = pe ? tx : ty, t2 = pe ? ty : tx;
        for (size_t j = 0; j < a.half; ++j) {
            double ang;
            if (a.interleaved) {  // the row's d/4 angles, then the column's (PE: the column's, then the row's)
                ang = (j < q ? t1 : t2) / std::pow(10000.0, double(j % q) / double(q));
            } else {  // angles = 2 pi * coords[:, :, None] / periods: the row's d/4 angles, then the column's
                const double coord = j < q ? cy : cx, period = periods(j % q);
                ang = double(float(2.0 * M_PI * coord) / float(period));
            }
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
            // x * cos + rotate(x) * sin, the pair (i1, i2) of angle j turned: DINOv3's rotate_half pairs the halves
            // of the head's dims (j, j + d/2), EVA-02's rot the neighbours (2j, 2j + 1)
            for (size_t j = 0; j < h2; ++j) {
                const size_t i1 = a.pair1(j), i2 = a.pair2(j);
                const float x1 = x[i1], x2 = x[i2];
                y[i1] = x1 * cs[j] - x2 * sn[j];
                y[i2] = x2 * cs[j] + x1 * sn[j];
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
                const size_t i1 = a.pair1(j), i2 = a.pair2(j);
                const float y1 = y[i1], y2 = y[i2];
                y[i1] = y1 * cs[j] + y2 * sn[j];
                y[i2] = y2 * cs[j] - y1 * sn[j];
            }
        }
}

}  // namespace vit
