// One instruction set's build of the elementwise kernels (see ops_kernels.h).
// CMake compiles this file three times with VITSCOPE_KERNEL_TABLE = avx512 /
// avx2 / sse2 and the matching -m flags; xsimd's batch<float> takes the widest
// registers those flags enable (16, 8 or 4 floats).
#include "core/kernels/ops_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <xsimd/xsimd.hpp>

#ifndef VITSCOPE_KERNEL_TABLE
#error "build with -DVITSCOPE_KERNEL_TABLE=avx512|avx2|sse2"
#endif

#define VITSCOPE_CAT2(a, b) a##b
#define VITSCOPE_CAT(a, b) VITSCOPE_CAT2(a, b)
#define IMPL VITSCOPE_CAT(impl_, VITSCOPE_KERNEL_TABLE)

namespace vit::ops::kernels {
namespace IMPL {

using batch = xsimd::batch<float>;
constexpr size_t W = batch::size;

void gelu(float* out, const float* x, size_t begin, size_t end) {
    const batch half(0.5f), one(1.f), rs2(float(M_SQRT1_2));
    size_t i = begin;
    for (; i + W <= end; i += W) {
        batch v = batch::load_unaligned(x + i);
        (half * v * (one + xsimd::erf(v * rs2))).store_unaligned(out + i);
    }
    for (; i < end; ++i) out[i] = 0.5f * x[i] * (1.f + std::erf(x[i] * float(M_SQRT1_2)));
}

void softmax_rows(float* out, const float* x, int r0, int r1, int C) {
    for (int r = r0; r < r1; ++r) {
        const float* xr = x + size_t(r) * C;
        float* o = out + size_t(r) * C;
        float m = xr[0];
        for (int i = 1; i < C; ++i) m = std::max(m, xr[i]);
        const batch bm(m);
        batch acc(0.f);
        int i = 0;
        for (; i + int(W) <= C; i += W) {
            batch e = xsimd::exp(batch::load_unaligned(xr + i) - bm);
            e.store_unaligned(o + i);
            acc += e;
        }
        float s = xsimd::hadd(acc);
        for (; i < C; ++i) { o[i] = std::exp(xr[i] - m); s += o[i]; }
        const batch inv(1.f / s);
        i = 0;
        for (; i + int(W) <= C; i += W) (batch::load_unaligned(o + i) * inv).store_unaligned(o + i);
        for (; i < C; ++i) o[i] *= 1.f / s;
    }
}

void layernorm_rows(float* out, float* norm, float* mean, float* std, const float* x, const float* g,
                    const float* b, int r0, int r1, int D, float eps, bool unbiased) {
    for (int r = r0; r < r1; ++r) {
        const float* xr = x + size_t(r) * D;
        // Two passes (mean, then squared deviations) in float: vectorizes, and
        // the parity tests show ~1e-7 relative error against PyTorch.
        float s = 0;
        for (int i = 0; i < D; ++i) s += xr[i];
        float m = s / float(D);
        float ss = 0;
        for (int i = 0; i < D; ++i) { float t = xr[i] - m; ss += t * t; }
        double var = double(ss) / (unbiased ? std::max(D - 1, 1) : D);
        float rstd = float(1.0 / std::sqrt(var + eps));
        if (mean) mean[r] = m;
        if (std) std[r] = float(std::sqrt(var));
        float* o = out + size_t(r) * D;
        float* nr = norm ? norm + size_t(r) * D : o;
        for (int i = 0; i < D; ++i) nr[i] = (xr[i] - m) * rstd;
        if (g) {
            for (int i = 0; i < D; ++i) o[i] = nr[i] * g[i] + (b ? b[i] : 0.f);
        } else if (nr != o) {
            std::memcpy(o, nr, sizeof(float) * D);
        }
    }
}

void add(float* out, const float* a, const float* b, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) out[i] = a[i] + b[i];
}

}  // namespace IMPL

#define VITSCOPE_STR2(x) #x
#define VITSCOPE_STR(x) VITSCOPE_STR2(x)
extern const Table VITSCOPE_KERNEL_TABLE;
const Table VITSCOPE_KERNEL_TABLE = {VITSCOPE_STR(VITSCOPE_KERNEL_TABLE), IMPL::gelu, IMPL::softmax_rows,
                                     IMPL::layernorm_rows, IMPL::add};

}  // namespace vit::ops::kernels
