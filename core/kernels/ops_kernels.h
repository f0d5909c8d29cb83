// The elementwise kernels of ops.cpp, compiled once per instruction set
// (core/ops_kernels.cpp built three times: AVX-512, AVX2+FMA, baseline x86-64)
// and chosen at run time from the CPU's flags, so that a build without
// -march=native (a package) runs the same vector code as a native one.
// Each works on a range so that ops.cpp can split it across threads.
#pragma once
#include <cstddef>

namespace vit::ops::kernels {

struct Table {
    const char* name;  // "avx512", "avx2", "sse2"
    // out[i] = 0.5 x (1 + erf(x / sqrt 2)), i in [begin, end)
    void (*gelu)(float* out, const float* x, size_t begin, size_t end);
    // rows [r0, r1) of x(R, C): out = softmax(x, -1)
    void (*softmax_rows)(float* out, const float* x, int r0, int r1, int C);
    // rows [r0, r1) of LayerNorm (see ops.h); norm (when not null) written with streaming stores,
    // past the caches, when `stream_norm` (a recorded stage the pass does not read again; the
    // caller fences, as for copy_stream)
    void (*layernorm_rows)(float* out, float* norm, float* mean, float* std, const float* x, const float* g,
                           const float* b, int r0, int r1, int D, float eps, bool unbiased, bool stream_norm);
    // out[i] = a[i] + b[i], i in [begin, end)
    void (*add)(float* out, const float* a, const float* b, size_t begin, size_t end);
    // dst[i] = src[i], i in [0, n), the aligned whole vectors with streaming stores (past the caches:
    // a recorded stage that the pass does not read again). Streaming stores are weakly ordered: the
    // caller ends its writes with a store fence (_mm_sfence) before anything else reads them.
    void (*copy_stream)(float* dst, const float* src, size_t n);
};

extern const Table avx512, avx2, sse2;

// The best table this CPU runs (decided once).
const Table& best();

}  // namespace vit::ops::kernels
