#include "core/model/pos_embed.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "core/model/model.h"

namespace vit {

namespace {

[[noreturn]] void bad(const std::string& m) { throw std::invalid_argument("position-embedding interpolation: " + m); }

void check_size(const char* what, int v) {
    if (v < 1 || v > kMaxImageSize) bad(std::string(what) + " is " + std::to_string(v) + ", outside 1.." + std::to_string(kMaxImageSize));
}

// area_pixel_compute_scale (align_corners=False): 1/scale when a scale factor was
// given, else in/out (also for an output of one pixel).
double pixel_scale(int in, int out, double given) { return given > 0 ? 1.0 / given : double(in) / double(out); }

// Keys' cubic convolution kernel as torch writes it (A = -0.75 without antialias).
double cubic1(double x, double A) { return ((A + 2) * x - (A + 3)) * x * x + 1; }
double cubic2(double x, double A) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; }

// PIL's filters, used by torch's antialiased kernels.
double aa_linear(double x) {
    x = std::fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}
double aa_cubic(double x) {
    const double a = -0.5;
    x = std::fabs(x);
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

// Taps of one output pixel along one axis: input indices and weights.
struct Taps {
    std::vector<int> index;
    std::vector<double> weight;
};

// The 1-D resampling along one axis, as a list of taps per output index.
std::vector<Taps> axis_taps(int in, int out, double given_scale, InterpMode mode, bool antialias) {
    std::vector<Taps> taps(static_cast<size_t>(out));
    const double scale = pixel_scale(in, out, given_scale);
    if (antialias) {
        // HelperInterpBase::_compute_weights_aa (align_corners=False).
        const double interp = mode == InterpMode::Bicubic ? 4.0 : 2.0;
        const double support = scale >= 1.0 ? interp * 0.5 * scale : interp * 0.5;
        const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
        for (int i = 0; i < out; ++i) {
            const double center = scale * (i + 0.5);
            const int64_t xmin = std::max<int64_t>(int64_t(center - support + 0.5), 0);
            const int64_t xsize = std::min<int64_t>(int64_t(center + support + 0.5), in) - xmin;
            Taps& t = taps[size_t(i)];
            double total = 0;
            for (int64_t j = 0; j < xsize; ++j) {
                const double x = (double(j + xmin) - center + 0.5) * invscale;
                const double w = mode == InterpMode::Bicubic ? aa_cubic(x) : aa_linear(x);
                t.index.push_back(int(j + xmin));
                t.weight.push_back(w);
                total += w;
            }
            if (total != 0.0)
                for (double& w : t.weight) w /= total;
        }
        return taps;
    }
    if (mode == InterpMode::Bicubic) {
        // upsample_bicubic2d: real = scale * (i + 0.5) - 0.5 (negative allowed), four taps
        // at floor(real) - 1 .. + 2 clamped to the border.
        for (int i = 0; i < out; ++i) {
            const double real = scale * (i + 0.5) - 0.5;
            const double fl = std::floor(real);
            const double t = real - fl;
            const int64_t i0 = int64_t(fl);
            const double A = -0.75;
            const double c[4] = {cubic2(t + 1.0, A), cubic1(t, A), cubic1(1.0 - t, A), cubic2(2.0 - t, A)};
            Taps& tp = taps[size_t(i)];
            for (int k = 0; k < 4; ++k) {
                const int64_t idx = std::min<int64_t>(std::max<int64_t>(i0 - 1 + k, 0), in - 1);
                tp.index.push_back(int(idx));
                tp.weight.push_back(c[k]);
            }
        }
        return taps;
    }
    // Bilinear (compute_source_index_and_lambda): a plain copy when the size is kept.
    for (int i = 0; i < out; ++i) {
        Taps& tp = taps[size_t(i)];
        if (in == out) {
            tp.index = {i};
            tp.weight = {1.0};
            continue;
        }
        double real = scale * (i + 0.5) - 0.5;
        if (real < 0) real = 0;
        const int64_t i0 = int64_t(real);
        const int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
        const double l1 = real - double(i0);
        tp.index = {int(i0), int(i1)};
        tp.weight = {1.0 - l1, l1};
    }
    return taps;
}

}  // namespace

int interp_scaled_size(int in, double scale) {
    if (!(scale > 0) || !std::isfinite(scale)) bad("scale factor " + std::to_string(scale) + " is not a positive number");
    const double v = std::floor(double(in) * scale);
    if (!(v >= 1) || v > kMaxImageSize)
        bad("scale factor " + std::to_string(scale) + " on " + std::to_string(in) + " gives an output size of " +
            std::to_string(v) + ", outside 1.." + std::to_string(kMaxImageSize));
    return int(v);
}

std::vector<float> interpolate_grid(const float* grid, int in_h, int in_w, int dim, int out_h, int out_w,
                                    const InterpSpec& spec) {
    check_size("input height", in_h);
    check_size("input width", in_w);
    check_size("output height", out_h);
    check_size("output width", out_w);
    if (dim < 1 || dim > kMaxWidth) bad("embedding width " + std::to_string(dim) + " outside 1.." + std::to_string(kMaxWidth));
    if (double(out_h) * out_w * dim > kMaxTraceFloats || double(in_h) * in_w * dim > kMaxTraceFloats)
        bad("grid of " + std::to_string(out_h) + " x " + std::to_string(out_w) + " x " + std::to_string(dim) + " is too large");
    if (spec.scale_h < 0 || spec.scale_w < 0) bad("negative scale factor");
    if (spec.scale_h > 0 && interp_scaled_size(in_h, spec.scale_h) != out_h)
        bad("scale factor " + std::to_string(spec.scale_h) + " gives a height of " +
            std::to_string(interp_scaled_size(in_h, spec.scale_h)) + ", not " + std::to_string(out_h));
    if (spec.scale_w > 0 && interp_scaled_size(in_w, spec.scale_w) != out_w)
        bad("scale factor " + std::to_string(spec.scale_w) + " gives a width of " +
            std::to_string(interp_scaled_size(in_w, spec.scale_w)) + ", not " + std::to_string(out_w));

    const std::vector<Taps> th = axis_taps(in_h, out_h, spec.scale_h, spec.mode, spec.antialias);
    const std::vector<Taps> tw = axis_taps(in_w, out_w, spec.scale_w, spec.mode, spec.antialias);
    const size_t D = size_t(dim);
    std::vector<float> out(size_t(out_h) * size_t(out_w) * D);
    if (spec.antialias) {
        // Separable, width first then height, each pass rounded to float as torch's
        // float kernels store their intermediate.
        std::vector<float> mid(size_t(in_h) * size_t(out_w) * D);
        std::vector<double> acc(D);
        for (int y = 0; y < in_h; ++y)
            for (int x = 0; x < out_w; ++x) {
                std::fill(acc.begin(), acc.end(), 0.0);
                const Taps& t = tw[size_t(x)];
                for (size_t k = 0; k < t.index.size(); ++k) {
                    const float* src = grid + (size_t(y) * size_t(in_w) + size_t(t.index[k])) * D;
                    for (size_t c = 0; c < D; ++c) acc[c] += t.weight[k] * src[c];
                }
                float* dst = mid.data() + (size_t(y) * size_t(out_w) + size_t(x)) * D;
                for (size_t c = 0; c < D; ++c) dst[c] = float(acc[c]);
            }
        for (int y = 0; y < out_h; ++y)
            for (int x = 0; x < out_w; ++x) {
                std::fill(acc.begin(), acc.end(), 0.0);
                const Taps& t = th[size_t(y)];
                for (size_t k = 0; k < t.index.size(); ++k) {
                    const float* src = mid.data() + (size_t(t.index[k]) * size_t(out_w) + size_t(x)) * D;
                    for (size_t c = 0; c < D; ++c) acc[c] += t.weight[k] * src[c];
                }
                float* dst = out.data() + (size_t(y) * size_t(out_w) + size_t(x)) * D;
                for (size_t c = 0; c < D; ++c) dst[c] = float(acc[c]);
            }
        return out;
    }
    // Without antialias torch combines the taps of both axes in one pass.
    std::vector<double> acc(D);
    for (int y = 0; y < out_h; ++y)
        for (int x = 0; x < out_w; ++x) {
            std::fill(acc.begin(), acc.end(), 0.0);
            const Taps& a = th[size_t(y)];
            const Taps& b = tw[size_t(x)];
            for (size_t i = 0; i < a.index.size(); ++i)
                for (size_t j = 0; j < b.index.size(); ++j) {
                    const double w = a.weight[i] * b.weight[j];
                    const float* src = grid + (size_t(a.index[i]) * size_t(in_w) + size_t(b.index[j])) * D;
                    for (size_t c = 0; c < D; ++c) acc[c] += w * src[c];
                }
            float* dst = out.data() + (size_t(y) * size_t(out_w) + size_t(x)) * D;
            for (size_t c = 0; c < D; ++c) dst[c] = float(acc[c]);
        }
    return out;
}

PosEmbedRule pos_rule_timm() { return {"timm resample_abs_pos_embed (bicubic, antialias, by size)", InterpMode::Bicubic, true, 0}; }
PosEmbedRule pos_rule_dino() {
    return {"DINO interpolate_pos_encoding (bicubic, scale factor (new + 0.1) / old)", InterpMode::Bicubic, false, 0.1};
}
PosEmbedRule pos_rule_dinov2(bool registers) {
    if (registers) return {"DINOv2 interpolate_pos_encoding (bicubic, antialias, by size)", InterpMode::Bicubic, true, 0};
    return {"DINOv2 interpolate_pos_encoding (bicubic, scale factor (new + 0.1) / old)", InterpMode::Bicubic, false, 0.1};
}
PosEmbedRule pos_rule_hf(bool antialias) {
    if (antialias) return {"Hugging Face interpolate_pos_encoding (bicubic, antialias, by size)", InterpMode::Bicubic, true, 0};
    return {"Hugging Face interpolate_pos_encoding (bicubic, by size)", InterpMode::Bicubic, false, 0};
}
PosEmbedRule pos_rule_open_clip() { return {"open_clip resize_pos_embed (bicubic, antialias, by size)", InterpMode::Bicubic, true, 0}; }
PosEmbedRule pos_rule_mae() { return {"MAE interpolate_pos_embed (bicubic, by size)", InterpMode::Bicubic, false, 0}; }

int square_side(long long n) {
    if (n < 1) return 0;
    long long s = (long long)std::llround(std::sqrt(double(n)));
    while (s * s > n) --s;
    while ((s + 1) * (s + 1) <= n) ++s;
    return s * s == n && s <= kMaxImageSize ? int(s) : 0;
}

std::vector<float> resize_pos_embed(const float* table, int rows, int dim, int prefix, int old_h, int old_w,
                                    int new_h, int new_w, const PosEmbedRule& rule) {
    check_size("learned grid height", old_h);
    check_size("learned grid width", old_w);
    check_size("new grid height", new_h);
    check_size("new grid width", new_w);
    if (dim < 1 || dim > kMaxWidth) bad("embedding width " + std::to_string(dim) + " outside 1.." + std::to_string(kMaxWidth));
    if (prefix < 0 || prefix > 64) bad(std::to_string(prefix) + " rows before the patch grid (0..64 expected)");
    if (rows < 0 || (long long)rows != (long long)prefix + (long long)old_h * old_w)
        bad("the table has " + std::to_string(rows) + " rows, but " + std::to_string(prefix) + " + " + std::to_string(old_h) +
            " x " + std::to_string(old_w) + " were expected");
    const size_t D = size_t(dim);
    std::vector<float> out;
    if (old_h == new_h && old_w == new_w) return std::vector<float>(table, table + size_t(rows) * D);
    InterpSpec spec;
    spec.mode = rule.mode;
    spec.antialias = rule.antialias;
    if (rule.offset > 0) {
        spec.scale_h = (double(new_h) + rule.offset) / double(old_h);
        spec.scale_w = (double(new_w) + rule.offset) / double(old_w);
    }
    std::vector<float> grid = interpolate_grid(table + size_t(prefix) * D, old_h, old_w, dim, new_h, new_w, spec);
    out.reserve(size_t(prefix) * D + grid.size());
    out.insert(out.end(), table, table + size_t(prefix) * D);
    out.insert(out.end(), grid.begin(), grid.end());
    return out;
}

}  // namespace vit
