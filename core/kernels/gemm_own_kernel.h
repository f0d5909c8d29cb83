// The own packed kernel's body (gemm_own.h), written once over a vector type V and included by one
// translation unit per instruction set: gemm_avx512.cpp (V = 16 floats, a tile of 6 rows x 64
// columns in 24 registers) and gemm_avx2.cpp (V = 8 floats, 6 rows x 16 columns in 12 of its 16
// registers, four such tiles across a 64-column block). Everything here has internal linkage:
// each includer's copy is built with its own instruction set.
//
// Order of work: for each K chunk, for each 64-column block, for each tile of 6 rows: the tile's
// sums in registers over the chunk's rows of the block, which the tile streams from the L2 cache (a
// block chunk is 192 KB) while the chunk's rows of `in` (6 x 768 floats) stay in L1. Every tile also
// prefetches its share of the next block (or of `next`), so that a block's weights reach the L2
// cache from memory during the block before it.
//
// V provides: reg, W (floats per vector), kTileCols (columns one register tile covers), set1, fmadd,
// load (aligned), load_n / store_n (the first n of W lanes; zeros past them on loads), stream
// (aligned whole vector past the caches), kAlign (stream's alignment in bytes) and batch (xsimd's
// batch<float> of this instruction set, for GELU).
#pragma once
#include "core/kernels/gelu_of.h"
#include "core/kernels/gemm_own.h"
#include "core/kernels/gemm_own_layout.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

namespace vit::gemm::own {
namespace {

// A tile's prefetches: `lines` cache lines from p, one every `step` k steps; `countdown` k steps
// to the next. Carried from one register tile to the next across a block (AVX2's four).
struct Prefetch {
    const char* p;
    int lines, step, countdown;
};
constexpr int kNever = 1 << 30;

// A tile of MR rows x NV vectors: c(MR, W NV) = (first ? bias : c) + a(MR, kc) @ b(kc, W NV), of
// which the first `valid` columns are stored (and bias read). With GELU (the last K chunk of fc1),
// post's tile gets GELU of the sums as they are stored; `stream` stores c's whole aligned vectors
// past the caches.
template <class V, int MR, int NV, bool GELU>
inline void tile(float* c, size_t ldc, const float* a, size_t lda, const float* b, int ldb, int kc, const float* bias,
                 bool first, int valid, Prefetch& pf, float* post, size_t ldp, bool stream) {
    constexpr int W = V::W;
    typename V::reg acc[MR][NV];
    int nvalid[NV];
    for (int v = 0; v < NV; ++v) nvalid[v] = std::clamp(valid - W * v, 0, W);
    for (int v = 0; v < NV; ++v) {
        if (first) {
            const typename V::reg x = bias ? V::load_n(bias + W * v, nvalid[v]) : V::set1(0.f);
            for (int r = 0; r < MR; ++r) acc[r][v] = x;
        } else {
            for (int r = 0; r < MR; ++r) acc[r][v] = V::load_n(c + size_t(r) * ldc + W * v, nvalid[v]);
        }
    }
    const char* p = pf.p;
    int lines = pf.lines, countdown = pf.countdown;
    const int step = pf.step;
    // Four k steps per trip: ViT-B's four products 400-425 -> 450 GFLOP/s hot on 2 cores of a Xeon
    // (Sapphire Rapids, FMA peak ~480), the pass 97 -> 90.5 ms, in alternating runs; 2 and 8 did less
    // (docs/kernels.md). The sums' order is the same: the same bits.
#pragma GCC unroll 4
    for (int k = 0; k < kc; ++k) {
        typename V::reg w[NV];
        for (int v = 0; v < NV; ++v) w[v] = V::load(b + size_t(k) * size_t(ldb) + W * v);
        for (int r = 0; r < MR; ++r) {
            const typename V::reg x = V::set1(a[size_t(r) * lda + size_t(k)]);
            for (int v = 0; v < NV; ++v) acc[r][v] = V::fmadd(x, w[v], acc[r][v]);
        }
        if (--countdown == 0) {
            _mm_prefetch(p, _MM_HINT_T1);
            p += 64;
            countdown = --lines > 0 ? step : kNever;
        }
    }
    pf.p = p, pf.lines = lines, pf.countdown = countdown;
    for (int v = 0; v < NV; ++v) {
        for (int r = 0; r < MR; ++r) {
            float* q = c + size_t(r) * ldc + W * v;
            if (stream && nvalid[v] == W && (reinterpret_cast<uintptr_t>(q) & (V::kAlign - 1)) == 0) V::stream(q, acc[r][v]);
            else V::store_n(q, nvalid[v], acc[r][v]);
            if constexpr (GELU) {
                const typename V::reg g = vit::ops::kernels::gelu_of(typename V::batch(acc[r][v]));
                V::store_n(post + size_t(r) * ldp + W * v, nvalid[v], g);
            }
        }
    }
}

template <class V, int NV, bool GELU>
void tile_rows(int rows, float* c, size_t ldc, const float* a, size_t lda, const float* b, int ldb, int kc,
               const float* bias, bool first, int valid, Prefetch& pf, float* post, size_t ldp, bool stream) {
#define VITSCOPE_TILE(MR) tile<V, MR, NV, GELU>(c, ldc, a, lda, b, ldb, kc, bias, first, valid, pf, post, ldp, stream)
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

// Rows r0.. of one block (pj columns, the first `valid` of them stored) in register tiles of
// V::kTileCols columns, left to right.
template <class V, bool GELU>
void block_rows(int rows, float* c, size_t ldc, const float* a, size_t lda, const float* b, int pj, int kc,
                const float* bias, bool first, int valid, Prefetch& pf, float* post, size_t ldp, bool stream) {
    for (int g = 0; g < pj && g < valid; g += V::kTileCols) {
        const int nv = std::min(V::kTileCols, pj - g) / V::W;
        const float* bg = bias ? bias + g : nullptr;
        float* pg = GELU ? post + g : nullptr;
        switch (nv) {
            case 4: if constexpr (V::kTileCols >= 4 * V::W) { tile_rows<V, 4, GELU>(rows, c + g, ldc, a, lda, b + g, pj, kc, bg, first, valid - g, pf, pg, ldp, stream); break; } [[fallthrough]];
            case 3: if constexpr (V::kTileCols >= 3 * V::W) { tile_rows<V, 3, GELU>(rows, c + g, ldc, a, lda, b + g, pj, kc, bg, first, valid - g, pf, pg, ldp, stream); break; } [[fallthrough]];
            case 2: tile_rows<V, 2, GELU>(rows, c + g, ldc, a, lda, b + g, pj, kc, bg, first, valid - g, pf, pg, ldp, stream); break;
            default: tile_rows<V, 1, GELU>(rows, c + g, ldc, a, lda, b + g, pj, kc, bg, first, valid - g, pf, pg, ldp, stream); break;
        }
    }
}

template <class V>
void run_impl(float* out, size_t ldo, const float* in, size_t ldi, int R, int K, const float* packed, int n,
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
            const int pj = std::min(kNb, np - j0);
            const int valid = std::min(pj, n - j0);
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
            // a block's register tiles (one on AVX-512, up to four on AVX2) share its row tile's
            // prefetches: one every step k steps of all of them, at the same rate in time
            const int tiles_across = (std::min(pj, valid) + V::kTileCols - 1) / V::kTileCols;
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
                Prefetch p{pf ? pf + size_t(issued) * 64 : nullptr, cnt, step * tiles_across, cnt > 0 ? 1 : kNever};
                if (gelu)
                    block_rows<V, true>(rows, c, ldc, a, ldi, b, pj, kc, bj, first, valid, p,
                                        epi->post + size_t(r0) * epi->ldp + size_t(j0), epi->ldp, stream);
                else
                    block_rows<V, false>(rows, c, ldc, a, ldi, b, pj, kc, bj, first, valid, p, nullptr, 0, stream);
                issued += cnt;
            }
        }
    }
    }
}

}  // namespace
}  // namespace vit::gemm::own
