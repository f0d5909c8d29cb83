// The own kernels' packed layout (gemm_own.h), built with the build's own flags: the packing runs on
// every CPU, the kernels (gemm_avx512.cpp, gemm_avx2.cpp) only on theirs.
//
// A packed slice of n columns over K inputs (np = n rounded up to 16): K in chunks of kKc rows;
// chunk k0 starts at k0 * np and holds the slice's 64-column blocks one after another, block j
// (width pj = min(64, np - 64 j)) as kc rows of pj floats: W[64 j + c][k0 + k] at [k * pj + c];
// the columns past n are zeros.
#include "core/kernels/gemm_own.h"
#include "core/kernels/gemm_own_layout.h"

#include <algorithm>

namespace vit::gemm::own {

size_t packed_floats(int K, int n) { return size_t(K) * size_t(round16(n)); }

void pack(float* dst, const float* W, size_t ldw, int K, int n) {
    const int np = round16(n);
    for (int k0 = 0; k0 < K; k0 += kKc) {
        const int kc = std::min(kKc, K - k0);
        float* chunk = dst + size_t(k0) * size_t(np);
        for (int j0 = 0; j0 < np; j0 += kNb) {
            const int pj = std::min(kNb, np - j0);
            float* blk = chunk + size_t(kc) * size_t(j0);
            for (int k = 0; k < kc; ++k)
                for (int c = 0; c < pj; ++c)
                    blk[size_t(k) * size_t(pj) + size_t(c)] = j0 + c < n ? W[size_t(j0 + c) * ldw + size_t(k0 + k)] : 0.f;
        }
    }
}

size_t first_block_bytes(int K, int n) { return size_t(std::min(kKc, K)) * size_t(std::min(kNb, round16(n))) * sizeof(float); }

void unpack(float* W, size_t ldw, const float* src, int K, int n) {
    const int np = round16(n);
    for (int k0 = 0; k0 < K; k0 += kKc) {
        const int kc = std::min(kKc, K - k0);
        const float* chunk = src + size_t(k0) * size_t(np);
        for (int j0 = 0; j0 < np; j0 += kNb) {
            const int pj = std::min(kNb, np - j0);
            const float* blk = chunk + size_t(kc) * size_t(j0);
            for (int k = 0; k < kc; ++k)
                for (int c = 0; c < pj && j0 + c < n; ++c)
                    W[size_t(j0 + c) * ldw + size_t(k0 + k)] = blk[size_t(k) * size_t(pj) + size_t(c)];
        }
    }
}

bool heads_fit(int col0, int n, int head_cols) {
    return head_cols > 0 && head_cols % kNb == 0 && col0 % kNb == 0 && n > 0;
}

}  // namespace vit::gemm::own
