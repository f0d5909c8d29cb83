// The packed matrix product's own kernels: one for AVX-512 (gemm_avx512.cpp) and one for AVX2 + FMA
// (gemm_avx2.cpp), each built with its instruction set's flags whatever the build's, and called
// only on CPUs that have it: gemm.cpp picks the widest (kernel()). Both read the same packed
// layout, written and read back by the layout functions below (gemm_own.cpp, no special flags).
//
// Why not oneDNN's: with a layer's weights coming from memory (as a pass meets them: ViT-B's
// 28 MB per block do not stay in any cache), oneDNN's kernel reads each 64-column block of the
// weights in a burst, on its first row tile, and waits for memory there; these prefetch the
// next block a little at a time while they compute the current one, so the weights arrive
// while they work (docs/kernels.md has the figures). They also write any column range of the
// output in place (oneDNN's blocked-weight kernel only a dense block, copied after).
//
// Their arithmetic, per output element: acc = bias (or 0), then acc = fma(in[r][k], W[c][k], acc)
// for k = 0, 1, ..., K-1, in fp32, the result acc. The same bits whatever the row count, the row
// or column range, the thread and the instruction set: a row's values never depend on the other
// rows or columns, and an AVX2 lane does what an AVX-512 lane does.
#pragma once
#include <cstddef>

namespace vit::gemm::own {

// Floats a slice of n output columns over K inputs takes packed (n rounded up to 16).
size_t packed_floats(int K, int n);
// Packs columns c of W(n, K) (row c at W + c * ldw: F.linear's weight rows) into dst.
void pack(float* dst, const float* W, size_t ldw, int K, int n);
// The inverse: W(n, K) back, bit for bit.
void unpack(float* W, size_t ldw, const float* src, int K, int n);
// What the kernel does with a final value (after the last K chunk) besides storing it in out.
struct Epilogue {
    // The q/k/v split of an attention's qkv product, stored where it goes instead of out: the
    // slice's column c (absolute column col0 + c of the product) of row r at
    // heads[a / part_cols] + ((a % part_cols) / head_cols) * rows * head_cols + r * head_cols + a % head_cols
    // (a = col0 + c: part q/k/v, head, element; (H, rows, head_cols) arrays of one image). Every
    // 64-column block must lie within one head: col0 and head_cols multiples of 64 (heads_fit).
    float* const* heads = nullptr;
    int part_cols = 0, head_cols = 0, col0 = 0;
    size_t rows = 0;
    // post(R, n) (row r at post + r * ldp) = GELU(out), by the elementwise kernel's arithmetic
    // (gelu_of.h), computed from the registers as out is stored.
    float* post = nullptr;
    size_t ldp = 0;
    // out's final values stored past the caches (a recorded stage that the pass does not read again)
    bool stream = false;
};
bool heads_fit(int col0, int n, int head_cols);
// Bytes of a packed slice's first block (what a caller prefetches of the weights it runs next).
size_t first_block_bytes(int K, int n);

// out(R, n) (row r at out + r * ldo) = in(R, K) (row r at in + r * ldi) @ packed + bias (n, may be
// null). While the last block computes, prefetches `next_bytes` of `next` (the weights the
// calling thread multiplies next; may be null) into the L2 cache, a little at a time. With `epi`,
// what it says (out is not written where epi->heads takes the values). packed is 64-byte aligned.
using Run = void (*)(float* out, size_t ldo, const float* in, size_t ldi, int R, int K, const float* packed, int n,
                     const float* bias, const void* next, size_t next_bytes, const Epilogue* epi);
namespace avx512 {
void run(float* out, size_t ldo, const float* in, size_t ldi, int R, int K, const float* packed, int n,
         const float* bias, const void* next = nullptr, size_t next_bytes = 0, const Epilogue* epi = nullptr);
}
namespace avx2 {
void run(float* out, size_t ldo, const float* in, size_t ldi, int R, int K, const float* packed, int n,
         const float* bias, const void* next = nullptr, size_t next_bytes = 0, const Epilogue* epi = nullptr);
}

}  // namespace vit::gemm::own
