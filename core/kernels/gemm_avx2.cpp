// The own packed kernel for AVX2 + FMA (gemm_own.h), for CPUs without AVX-512 (most laptops:
// Intel's since Alder Lake, AMD's before Zen 4): a tile of 6 rows x 16 columns in 12 of the 16 registers (2 weight vectors and a
// broadcast beside them), four such tiles across each 64-column block of the same packed layout
// as the AVX-512 kernel's. Built with AVX2 and FMA flags whatever the build's (CMakeLists.txt);
// called only on CPUs that have both.
#include "core/kernels/gemm_own_kernel.h"

#include <immintrin.h>

namespace vit::gemm::own::avx2 {
namespace {

struct V {
    using reg = __m256;
    using batch = xsimd::batch<float>;
    static constexpr int W = 8, kTileCols = 16, kAlign = 32;
    static __m256 set1(float x) { return _mm256_set1_ps(x); }
    static __m256 fmadd(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
    static __m256 load(const float* p) { return _mm256_load_ps(p); }
    static __m256i first(int n) {
        return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    }
    static __m256 load_n(const float* p, int n) {
        return n >= W ? _mm256_loadu_ps(p) : n > 0 ? _mm256_maskload_ps(p, first(n)) : _mm256_setzero_ps();
    }
    static void store_n(float* p, int n, __m256 x) {
        if (n >= W) _mm256_storeu_ps(p, x);
        else if (n > 0) _mm256_maskstore_ps(p, first(n), x);
    }
    static void stream(float* p, __m256 x) { _mm256_stream_ps(p, x); }
};
static_assert(V::batch::size == V::W, "xsimd's batch<float> is not AVX2's here: check the flags");

}  // namespace

void run(float* out, size_t ldo, const float* in, size_t ldi, int R, int K, const float* packed, int n,
         const float* bias, const void* next, size_t next_bytes, const Epilogue* epi) {
    run_impl<V>(out, ldo, in, ldi, R, K, packed, n, bias, next, next_bytes, epi);
}

}  // namespace vit::gemm::own::avx2
