// The packed matrix product's own AVX-512 kernel (core/kernels/gemm_avx512.cpp, built with
// AVX-512 flags whatever the build's, used only where the CPU has AVX-512: gemm.cpp decides).
//
// Why not oneDNN's: with a layer's weights coming from memory (as a pass meets them: ViT-B's
// 28 MB per block do not stay in any cache), oneDNN's kernel reads each 64-column block of the
// weights in a burst, on its first row tile, and waits for memory there; this one prefetches
// the next block a little at a time while it computes the current one, so the weights arrive
// while it works (docs/kernels.md has the figures). It also writes any column range of the
// output in place (oneDNN's blocked-weight kernel only a dense block, copied after).
//
// Its arithmetic, per output element: acc = bias (or 0), then acc = fma(in[r][k], W[c][k], acc)
// for k = 0, 1, ..., K-1, in fp32, the result acc. The same bits whatever the row count, the row
// or column range and the thread: a row's values never depend on the other rows or columns.
#pragma once
#include <cstddef>

namespace vit::gemm::avx512 {

// Floats a slice of n output columns over K inputs takes packed (n rounded up to 16).
size_t packed_floats(int K, int n);
// Packs columns c of W(n, K) (row c at W + c * ldw: F.linear's weight rows) into dst.
void pack(float* dst, const float* W, size_t ldw, int K, int n);
// The inverse: W(n, K) back, bit for bit.
void unpack(float* W, size_t ldw, const float* src, int K, int n);
// out(R, n) (row r at out + r * ldo) = in(R, K) (row r at in + r * ldi) @ packed + bias (n, may be
// null). While the last block computes, prefetches `next_bytes` of `next` (the weights the
// calling thread multiplies next; may be null) into the L2 cache, a little at a time.
void run(float* out, size_t ldo, const float* in, size_t ldi, int R, int K, const float* packed, int n,
         const float* bias, const void* next = nullptr, size_t next_bytes = 0);
// Bytes of a packed slice's first block (what a caller prefetches of the weights it runs next).
size_t first_block_bytes(int K, int n);

}  // namespace vit::gemm::avx512
