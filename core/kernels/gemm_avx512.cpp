// The own packed kernel for AVX-512 (gemm_own.h): a tile of 6 rows x 64 columns in 24 registers (4
// weight vectors and a broadcast beside them). Built with AVX-512 flags whatever the build's
// (CMakeLists.txt); called only on CPUs that have AVX-512.
#include "core/kernels/gemm_own_kernel.h"

#include <immintrin.h>

namespace vit::gemm::own::avx512 {
namespace {

struct V {
    using reg = __m512;
    using batch = xsimd::batch<float>;
    static constexpr int W = 16, kTileCols = 64, kAlign = 64;
    static __m512 set1(float x) { return _mm512_set1_ps(x); }
    static __m512 fmadd(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
    static __m512 load(const float* p) { return _mm512_load_ps(p); }
    static __mmask16 first(int n) { return __mmask16((1u << n) - 1u); }
    static __m512 load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(first(n), p); }
    static void store_n(float* p, int n, __m512 x) { _mm512_mask_storeu_ps(p, first(n), x); }
    static void stream(float* p, __m512 x) { _mm512_stream_ps(p, x); }
};
static_assert(V::batch::size == V::W, "xsimd's batch<float> is not AVX-512's here: check the flags");

}  // namespace

void run(float* out, size_t ldo, const float* in, size_t ldi, int R, int K, const float* packed, int n,
         const float* bias, const void* next, size_t next_bytes, const Epilogue* epi) {
    run_impl<V>(out, ldo, in, ldi, R, K, packed, n, bias, next, next_bytes, epi);
}

}  // namespace vit::gemm::own::avx512
