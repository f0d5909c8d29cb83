// The packed product's AVX-512 kernel (see gemm_avx512.h). Built with AVX-512 flags whatever the
// build's own (CMakeLists.txt); called only on CPUs that have AVX-512.
//
// Layout of a packed slice of n columns over K inputs (np = n rounded up to 16): K in chunks of
// kKc rows; chunk k0 starts at k0 * np and holds the slice's 64-column blocks one after another,
// block j (width pj = min(64, np - 64 j)) as kc rows of pj floats: W[64 j + c][k0 + k] at
// [k * pj + c]; the columns past n are zeros.
//
// Order of work: for each K chunk, for each block, for each tile of 6 rows: the tile's 6 x 64
// sums in 24 registers over the chunk's rows of the block, which the tile streams from the L2
// cache (a block chunk is 192 KB) while the chunk's rows of `in` (6 x 768 floats) stay in L1.
// Every tile also prefetches its share of the next block (or of `next`), so that a block's
// weights reach the L2 cache from memory during the block before it.
#include "core/kernels/gemm_avx512.h"

#include "core/kernels/gelu_of.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

namespace vit::gemm::avx512 {
namespace {

constexpr int kKc = 768;   // K rows per chunk
constexpr int kNb = 64;    // columns per block (4 vectors)
constexpr int kMc = 240;   // rows per row chunk, about
constexpr int kMr = 6;     // rows per tile: 6 x 4 accumulators + 4 weight vectors + 1 broadcast

inline int round16(int n) { return (n + 15) / 16 * 16; }

// A tile of MR rows x NV vectors: c(MR, 16 NV) = (first ? bias : c) + a(MR, kc) @ b(kc, 16 NV).
// `last` masks the last vector's columns (the slice's edge). Prefetches `pf_lines` lines from pf,
// one every `pf_step` rows of b.
// With GELU (the last K chunk of fc1), post's tile gets GELU of the sums as they are stored;
// `stream` stores c's whole aligned vectors past the caches.
template <int MR, int NV, bool GELU = false>
inline void tile(float* c, size_t ldc, const float* a, size_t lda, const float* b, int ldb, int kc, const float* bias,
                 bool first, __mmask16 last, const char* pf, int pf_lines, int pf_step, float* post = nullptr,
                 size_t ldp = 0, bool stream = false) {
    __m512 acc[MR][NV];
    for (int v = 0; v < NV; ++v) {
        const __mmask16 m = v == NV - 1 ? last : __mmask16(0xFFFF);
        if (first) {
            const __m512 x = bias ? _mm512_maskz_loadu_ps(m, bias + 16 * v) : _mm512_setzero_ps();
            for (int r = 0; r < MR; ++r) acc[r][v] = x;
        } else {
            for (int r = 0; r < MR; ++r) acc[r][v] = _mm512_maskz_loadu_ps(m, c + size_t(r) * ldc + 16 * v);
        }
    }
    int countdown = pf_lines > 0 ? 1 : kc + 1;
    // Four k steps per trip: ViT-B's four products 400-425 -> 450 GFLOP/s hot on 2 cores of a Xeon
    // (Sapphire Rapids, FMA peak ~480), the pass 97 -> 90.5 ms, in alternating runs; 2 and 8 did less
    // (docs/kernels.md). The sums' order is the same: the same bits.
#pragma GCC unroll 4
    for (int k = 0; k < kc; ++k) {
        __m512 w[NV];
        for (int v = 0; v < NV; ++v) w[v] = _mm512_load_ps(b + size_t(k) * size_t(ldb) + 16 * v);
        for (int r = 0; r < MR; ++r) {
            const __m512 x = _mm512_set1_ps(a[size_t(r) * lda + size_t(k)]);
            for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(x, w[v], acc[r][v]);
        }
        if (--countdown == 0) {
            _mm_prefetch(pf, _MM_HINT_T1);
            pf += 64;
            countdown = --pf_lines > 0 ? pf_step : kc + 1;
        }
    }
    for (int v = 0; v < NV; ++v) {
        const __mmask16 m = v == NV - 1 ? last : __mmask16(0xFFFF);
        for (int r = 0; r < MR; ++r) {
            float* p = c + size_t(r) * ldc + 16 * v;
            if (stream && m == 0xFFFF && (reinterpret_cast<uintptr_t>(p) & 63) == 0) _mm512_stream_ps(p, acc[r][v]);
            else _mm512_mask_storeu_ps(p, m, acc[r][v]);
            if constexpr (GELU) {
                const __m512 g = vit::ops::kernels::gelu_of(xsimd::batch<float>(acc[r][v]));
                _mm512_mask_storeu_ps(post + size_t(r) * ldp + 16 * v, m, g);
            }
        }
    }
}

template <int NV, bool GELU>
void tile_rows(int rows, float* c, size_t ldc, const float* a, size_t lda, const float* b, int kc, const float* bias,
               bool first, __mmask16 last, const char* pf, int pf_lines, int pf_step, float* post, size_t ldp,
               bool stream) {
#define VITSCOPE_TILE(MR) \
    tile<MR, NV, GELU>(c, ldc, a, lda, b, 16 * NV, kc, bias, first, last, pf, pf_lines, pf_step, post, ldp, stream)
    switch (rows) {
        case 6: return VITSCOPE_TILE(6);
        case 5: return VITSCOPE_TILE(5);
        case 4: return VITSCOPE_TILE(4);
        case 3: return VITSCOPE_TILE(3);
        case 2: return VITSCOPE_TILE(2);
        case 1: return VITSCOPE_TILE(1);
        default: return;
    }
#undef VITSCOPE_TILE
}

template <bool GELU>
void tile_any(int nv, int rows, float* c, size_t ldc, const float* a, size_t lda, const float* b, int kc,
              const float* bias, bool first, __mmask16 last, const char* pf, int pf_lines, int pf_step, float* post,
              size_t ldp, bool stream) {
    switch (nv) {
        case 4: return tile_rows<4, GELU>(rows, c, ldc, a, lda, b, kc, bias, first, last, pf, pf_lines, pf_step, post, ldp, stream);
        case 3: return tile_rows<3, GELU>(rows, c, ldc, a, lda, b, kc, bias, first, last, pf, pf_lines, pf_step, post, ldp, stream);
        case 2: return tile_rows<2, GELU>(rows, c, ldc, a, lda, b, kc, bias, first, last, pf, pf_lines, pf_step, post, ldp, stream);
        default: return tile_rows<1, GELU>(rows, c, ldc, a, lda, b, kc, bias, first, last, pf, pf_lines, pf_step, post, ldp, stream);
    }
}

}  // namespace

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

void run(float* out, size_t ldo, const float* in, size_t ldi, int R, int K, const float* packed, int n,
         const float* bias, const void* next, size_t next_bytes, const Epilogue* epi) {
    if (R <= 0 || n <= 0) return;
    const int np = round16(n);
    if (K <= 0) {  // no inputs: the bias alone
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < n; ++c) out[size_t(r) * ldo + size_t(c)] = bias ? bias[c] : 0.f;
        return;
    }
    // rows in chunks of about kMc (whole tiles), so that a chunk's rows of `in` stay in the L2 cache
    // while every block of the weights passes (ViT-B's 197 rows are one chunk)
    const int row_chunks = (R + kMc - 1) / kMc;
    const int chunk_rows = ((R + row_chunks - 1) / row_chunks + kMr - 1) / kMr * kMr;
    for (int m0 = 0; m0 < R; m0 += chunk_rows) {
    const int Rm = std::min(chunk_rows, R - m0), tiles = (Rm + kMr - 1) / kMr;
    for (int k0 = 0; k0 < K; k0 += kKc) {
        const int kc = std::min(kKc, K - k0);
        const float* chunk = packed + size_t(k0) * size_t(np);
        const bool first = k0 == 0;
        for (int j0 = 0; j0 < np; j0 += kNb) {
            const int pj = std::min(kNb, np - j0), nv = pj / 16;
            const int valid = std::min(pj, n - j0);
            const __mmask16 last = __mmask16((1u << (valid - 16 * (nv - 1))) - 1u);
            const float* b = chunk + size_t(kc) * size_t(j0);
            // what to prefetch during this block: the next block of this chunk, the next chunk's
            // first, the first again for the next rows, or after the last the caller's next weights
            const char* pf;
            size_t pf_bytes;
            if (j0 + kNb < np) {
                pf = reinterpret_cast<const char*>(b + size_t(kc) * size_t(pj));
                pf_bytes = size_t(kc) * size_t(std::min(kNb, np - j0 - kNb)) * sizeof(float);
            } else if (k0 + kKc < K) {
                const int kc2 = std::min(kKc, K - k0 - kKc);
                pf = reinterpret_cast<const char*>(chunk + size_t(kc) * size_t(np));
                pf_bytes = size_t(kc2) * size_t(std::min(kNb, np)) * sizeof(float);
            } else if (m0 + chunk_rows < R) {
                pf = reinterpret_cast<const char*>(packed);
                pf_bytes = first_block_bytes(K, n);
            } else {
                pf = static_cast<const char*>(next);
                pf_bytes = next ? next_bytes : 0;
            }
            const int lines = int(std::min<size_t>(pf_bytes / 64, size_t(1) << 20));
            const int per_tile = (lines + tiles - 1) / tiles;
            const int step = per_tile > 0 ? std::max(1, kc / per_tile) : kc + 1;
            // a tile issues at most kc / step prefetches: the rest of its share goes to later tiles
            const int per = per_tile > 0 ? std::min(per_tile, kc / step) : 0;
            int issued = 0;
            const float* bj = bias && first ? bias + j0 : nullptr;
            // where this block's values go: out's columns, or (the q/k/v split) one head's
            float* cb = out + size_t(j0);
            size_t ldc = ldo;
            if (epi && epi->heads) {
                const int a = epi->col0 + j0, hd = epi->head_cols, part = a / epi->part_cols, e = a % epi->part_cols;
                cb = epi->heads[part] + size_t(e / hd) * epi->rows * size_t(hd) + size_t(e % hd);
                ldc = size_t(hd);
            }
            const bool final = k0 + kc >= K;
            const bool gelu = final && epi && epi->post, stream = final && epi && epi->stream;
            for (int r0 = m0; r0 < m0 + Rm; r0 += kMr) {
                const int rows = std::min(kMr, m0 + Rm - r0), cnt = std::max(0, std::min(per, lines - issued));
                float* c = cb + size_t(r0) * ldc;
                const float* a = in + size_t(r0) * ldi + size_t(k0);
                const char* p = pf ? pf + size_t(issued) * 64 : nullptr;
                if (gelu)
                    tile_any<true>(nv, rows, c, ldc, a, ldi, b, kc, bj, first, last, p, cnt, step,
                                   epi->post + size_t(r0) * epi->ldp + size_t(j0), epi->ldp, stream);
                else
                    tile_any<false>(nv, rows, c, ldc, a, ldi, b, kc, bj, first, last, p, cnt, step, nullptr, 0, stream);
                issued += cnt;
            }
        }
    }
    }
}

}  // namespace vit::gemm::avx512
