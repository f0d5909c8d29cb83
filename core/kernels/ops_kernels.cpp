// One instruction set's build of the elementwise kernels (see ops_kernels.h).
// CMake compiles this file three times with VITSCOPE_KERNEL_TABLE = avx512 /
// avx2 / sse2 and the matching -m flags; xsimd's batch<float> takes the widest
// registers those flags enable (16, 8 or 4 floats).
#include "core/kernels/ops_kernels.h"
#include "core/kernels/gelu_of.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include <immintrin.h>
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

// The last n < W floats at p as a batch, the other lanes `fill` (a reduction's identity);
// AVX-512 loads them under a mask, AVX2 blends a masked load.
inline batch load_tail(const float* p, size_t n, float fill) {
#if defined(__AVX512F__)
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), __mmask16((1u << n) - 1), p);
#elif defined(__AVX2__)
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 mask = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), lane));
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, _mm256_castps_si256(mask)), mask);
#else
    alignas(64) float t[W];
    for (size_t i = 0; i < W; ++i) t[i] = i < n ? p[i] : fill;
    return batch::load_aligned(t);
#endif
}
// The first n < W lanes of v stored at p.
inline void store_tail(float* p, const batch& v, size_t n) {
#if defined(__AVX512F__)
    _mm512_mask_storeu_ps(p, __mmask16((1u << n) - 1), v);
#else
    alignas(64) float t[W];
    v.store_aligned(t);
    std::memcpy(p, t, n * sizeof(float));
#endif
}
// v stored at p, which is aligned to a whole vector, past the caches (a streaming store).
inline void store_stream(float* p, const batch& v) {
#if defined(__AVX512F__)
    _mm512_stream_ps(p, v);
#elif defined(__AVX__)
    _mm256_stream_ps(p, v);
#else
    _mm_stream_ps(p, v);
#endif
}
inline bool aligned(const float* p) { return (reinterpret_cast<uintptr_t>(p) & (W * sizeof(float) - 1)) == 0; }
// The largest lane of v.
inline float hmax(const batch& v) {
#if defined(__AVX512F__)
    return _mm512_reduce_max_ps(v);
#else
    alignas(64) float t[W];
    v.store_aligned(t);
    for (size_t h = W / 2; h > 0; h /= 2)  // a tree: log2(W) dependent steps
        for (size_t i = 0; i < h; ++i) t[i] = std::max(t[i], t[i + h]);
    return t[0];
#endif
}
// The sum of v's lanes.
inline float hsum(const batch& v) {
#if defined(__AVX512F__)
    return _mm512_reduce_add_ps(v);
#else
    return xsimd::hadd(v);
#endif
}

void gelu(float* out, const float* x, size_t begin, size_t end) {
    auto f = [](const batch& v) { return gelu_of(v); };
    size_t i = begin;
    for (; i + W <= end; i += W) f(batch::load_unaligned(x + i)).store_unaligned(out + i);
    // the tail through the same vector code (padded), so that a value's result does not depend on
    // where it falls in the range: a GEMM slice's epilogue and a pass over the whole array agree
    if (i < end) store_tail(out + i, f(load_tail(x + i, end - i, 0.f)), end - i);
}

// Vector passes over each row (max, exp and sum, scale), the tail of a row padded to a whole
// vector with the reduction's identity: a row of 50 or 197 floats has a tail on every width,
// and a scalar tail (std::exp per float) cost as much as the vector part.
void softmax_rows(float* out, const float* x, int r0, int r1, int C) {
    const size_t n = size_t(C), full = n - n % W, rest = n - full;
    for (int r = r0; r < r1; ++r) {
        const float* xr = x + size_t(r) * n;
        float* o = out + size_t(r) * n;
        batch vm(-INFINITY);
        for (size_t i = 0; i < full; i += W) vm = xsimd::max(vm, batch::load_unaligned(xr + i));
        if (rest) vm = xsimd::max(vm, load_tail(xr + full, rest, -INFINITY));
        const batch bm(hmax(vm));
        batch acc(0.f);
        for (size_t i = 0; i < full; i += W) {
            const batch e = xsimd::exp(batch::load_unaligned(xr + i) - bm);
            e.store_unaligned(o + i);
            acc += e;
        }
        if (rest) {  // the padding lanes are -inf: exp gives 0 there
            const batch e = xsimd::exp(load_tail(xr + full, rest, -INFINITY) - bm);
            store_tail(o + full, e, rest);
            acc += e;
        }
        const float inv = 1.f / hsum(acc);
        const batch binv(inv);
        for (size_t i = 0; i < full; i += W) (batch::load_unaligned(o + i) * binv).store_unaligned(o + i);
        for (size_t i = full; i < n; ++i) o[i] *= inv;
    }
}

// Two vector passes over each row for the statistics (mean, then squared deviations: the
// two-pass form keeps float's error at ~1e-7 against PyTorch), a third writes norm and out.
void layernorm_rows(float* out, float* norm, float* mean, float* std, const float* x, const float* g,
                    const float* b, int r0, int r1, int D, float eps, bool unbiased, bool stream_norm) {
    const size_t n = size_t(D), full = n - n % W, rest = n - full;
    for (int r = r0; r < r1; ++r) {
        const float* xr = x + size_t(r) * n;
        batch s0(0.f), s1(0.f);
        size_t i = 0;
        for (; i + 2 * W <= full; i += 2 * W) {
            s0 += batch::load_unaligned(xr + i);
            s1 += batch::load_unaligned(xr + i + W);
        }
        if (i < full) s0 += batch::load_unaligned(xr + i);
        if (rest) s1 += load_tail(xr + full, rest, 0.f);
        const float m = hsum(s0 + s1) / float(D);
        const batch bm(m);
        batch q0(0.f), q1(0.f);
        for (i = 0; i + 2 * W <= full; i += 2 * W) {
            const batch t0 = batch::load_unaligned(xr + i) - bm, t1 = batch::load_unaligned(xr + i + W) - bm;
            q0 += t0 * t0;
            q1 += t1 * t1;
        }
        if (i < full) { const batch t = batch::load_unaligned(xr + i) - bm; q0 += t * t; }
        if (rest) { const batch t = load_tail(xr + full, rest, m) - bm; q1 += t * t; }
        const double var = double(hsum(q0 + q1)) / (unbiased ? std::max(D - 1, 1) : D);
        const float rstd = float(1.0 / std::sqrt(var + eps));
        if (mean) mean[r] = m;
        if (std) std[r] = float(std::sqrt(var));
        float* o = out + size_t(r) * n;
        float* nr = norm ? norm + size_t(r) * n : o;
        const batch br(rstd);
        const bool st = stream_norm && nr != o && aligned(nr);
        for (i = 0; i < full; i += W) {
            const batch v = (batch::load_unaligned(xr + i) - bm) * br;
            if (st) store_stream(nr + i, v);
            else v.store_unaligned(nr + i);
            if (g) (b ? v * batch::load_unaligned(g + i) + batch::load_unaligned(b + i) : v * batch::load_unaligned(g + i))
                       .store_unaligned(o + i);
            else if (nr != o) v.store_unaligned(o + i);
        }
        for (; i < n; ++i) {
            const float v = (xr[i] - m) * rstd;
            nr[i] = v;
            if (g) o[i] = v * g[i] + (b ? b[i] : 0.f);
            else if (nr != o) o[i] = v;
        }
    }
}

void add(float* out, const float* a, const float* b, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) out[i] = a[i] + b[i];
}

void copy_stream(float* dst, const float* src, size_t n) {
    size_t i = 0;
    for (; i < n && !aligned(dst + i); ++i) dst[i] = src[i];
    for (; i + W <= n; i += W) store_stream(dst + i, batch::load_unaligned(src + i));
    for (; i < n; ++i) dst[i] = src[i];
}

}  // namespace IMPL

#define VITSCOPE_STR2(x) #x
#define VITSCOPE_STR(x) VITSCOPE_STR2(x)
extern const Table VITSCOPE_KERNEL_TABLE;
const Table VITSCOPE_KERNEL_TABLE = {VITSCOPE_STR(VITSCOPE_KERNEL_TABLE), IMPL::gelu, IMPL::softmax_rows,
                                     IMPL::layernorm_rows, IMPL::add, IMPL::copy_stream};

}  // namespace vit::ops::kernels
