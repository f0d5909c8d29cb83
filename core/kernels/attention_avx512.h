// The attention's two products on an own AVX-512 kernel (core/kernels/attention_avx512.cpp, built
// with AVX-512 flags whatever the build's, called only where the CPU has AVX-512: available()).
// attention() in core/model/parts/attention.cpp runs them per (image, head, block of query rows):
//   scores(n, Tk) = alpha * q(n, d) @ k^T     (k^T packed once per head: pack_k)
//   z(n, d)       = pattern(n, Tk) @ v(Tk, d) (v read as it is: row-major, d columns)
// with the row softmax (ops::softmax_rows) between them.
//
// Why not oneDNN's sgemm: its values for a row change with the call's row count (a head's rows split
// between two threads, or recomputed on demand in other blocks, would get other bits; here every
// element's sum is the same whatever the rows around it), and the kernel can do a pass's other work
// on the side of its arithmetic: write the scores and pattern out to the trace with streaming stores
// while it computes z (weighted's `copies`), and fetch the next head's q, k and v while it computes
// the scores (scores' `fetch`). On its own it is about as fast as sgemm; k^T is
// packed once per head and reused by every block of rows (docs/kernels.md has the figures).
//
// Arithmetic, per output element: acc = 0, then acc = fma(a[k], b[k], acc) for k = 0, 1, ..., K-1
// in fp32 (K = d for the scores, Tk for z), the result acc * alpha (scores) or acc (z). The same bits
// whatever the row count, the block of rows, the thread or the output's stride: an element never
// depends on the other rows or columns.
#pragma once
#include <cstddef>

namespace vit::attn::avx512 {

// True when the CPU runs the AVX-512 elementwise kernels (ops::kernels::best(): VITSCOPE_KERNELS=avx2
// narrows both) and VITSCOPE_ATTENTION is not "onednn" (which keeps oneDNN's sgemm, to compare the
// two in one binary). Decided once. Defined in a file built with the build's own flags.
bool available();

// dst[i] = src[i], i in [0, n): a copy to run on the side of a product (dst null: src's lines
// fetched into the L2 cache instead).
struct Copy {
    const float* src;
    float* dst;
    size_t n;
};

// Floats that k^T of Tk keys over d dimensions takes packed.
size_t packed_k_floats(int Tk, int d);
// Packs k(Tk, d) (row t at k + t * d) for scores().
void pack_k(float* dst, const float* k, int Tk, int d);
// s(n, Tk) (row i at s + i * lds) = alpha * q(n, d) (row i at q + i * ldq) @ k^T, k packed by pack_k.
// Meanwhile, the lines of the `fetch` ranges (at most 4, dst null) are fetched into the L2 cache, a
// line per step of the product (what the caller reads next).
void scores(float* s, size_t lds, const float* q, size_t ldq, int n, int d, const float* kp, int Tk, float alpha,
            const Copy* fetch = nullptr, int nfetch = 0);
// z(n, d) (row i at z + i * ldz) = p(n, Tk) (row i at p + i * ldp) @ v(Tk, d) (row t at v + t * d).
// Meanwhile, the `copies` (at most 4, none overlapping z, p or v) are written with streaming stores
// spread over the product's steps (recorded stages that the pass does not read again: their writes
// to memory overlap the arithmetic). Streaming stores are weakly ordered: the caller fences
// (ops::stream_fence) before anything reads the copies.
// With z2, z is also written there (row i at z2 + i * ldz2: the heads' concatenation), the same values.
void weighted(float* z, size_t ldz, const float* p, size_t ldp, int n, int Tk, const float* v, int d,
              const Copy* copies = nullptr, int ncopies = 0, float* z2 = nullptr, size_t ldz2 = 0);

}  // namespace vit::attn::avx512
