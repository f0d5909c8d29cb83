// GELU's arithmetic for one vector of floats, shared by the elementwise kernels (ops_kernels.cpp,
// one build per instruction set) and the packed product's AVX-512 kernel, which applies it to fc1's
// values while they are still in registers (gemm_own_kernel.h): both include this, so a value's GELU
// is the same bits whichever of them computed it (Gemm.FusedGeluEqualsTheElementwiseKernel).
#pragma once
#include <cmath>

#include <xsimd/xsimd.hpp>

namespace vit::ops::kernels {

// 0.5 x (1 + erf(x / sqrt 2)) with erf by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7, the form
// PyTorch's vectorized CPU erf uses): erf(u) = 1 - t (p1 + p2 t + ... + p5 t^4) exp(-u^2) for u >= 0,
// t = 1 / (1 + p u). One exp and one division per value: ~2x faster than xsimd::erf, which evaluates
// two approximations (small and large |u|) and selects. 1 + erf(u) is taken as 2 - q for u >= 0 and
// q for u < 0 (q = t P(t) exp(-u^2)), so the negative tail keeps its relative precision.
template <class batch>
inline batch gelu_of(const batch& v) {
    const batch half(0.5f), one(1.f), two(2.f), rs2(float(M_SQRT1_2)), p(0.3275911f);
    const batch p1(0.254829592f), p2(-0.284496736f), p3(1.421413741f), p4(-1.453152027f), p5(1.061405429f);
    const batch u = v * rs2, au = xsimd::abs(u);
    const batch t = one / xsimd::fma(p, au, one);
    const batch poly = xsimd::fma(xsimd::fma(xsimd::fma(xsimd::fma(p5, t, p4), t, p3), t, p2), t, p1);
    const batch q = t * poly * xsimd::exp(-(u * u));
    return half * v * xsimd::select(u < batch(0.f), q, two - q);
}

}  // namespace vit::ops::kernels
