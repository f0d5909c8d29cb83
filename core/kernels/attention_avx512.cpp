// The attention's products on AVX-512 (see attention_avx512.h). Built with AVX-512 flags whatever
// the build's own (CMakeLists.txt); called only on CPUs that have AVX-512 (available(), which lives
// in core/kernels/ops.cpp's dispatch so that it runs on any CPU).
//
// Both products are c(n, N) = a(n, K) @ b(K, N), b read in blocks of up to 64 columns (4 vectors):
//   scores:   a = q (K = d), b = k^T packed by pack_k: block j (keys 64 j ..) as d rows of its
//             width pj (64, or the last block's keys rounded up to 16, zeros past Tk) one after
//             another, so that a block's rows are contiguous and aligned;
//   weighted: a = pattern (K = Tk), b = v as it is (rows of d floats; d = 64 is one block).
// Order of work: K in chunks of at most kKc rows (v's rows of one chunk, 32 KB for d = 64, stay in
// L1 while every tile of rows passes), for each block, for each tile of rows: the tile's sums in
// registers over the chunk's rows of the block; a tile that continues an earlier chunk's sums
// reloads them from c (the same fp32 values: the chain of fmas per element is unchanged).
#include "core/kernels/attention_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

namespace vit::attn::avx512 {
namespace {

constexpr int kNb = 64;   // columns per block (4 vectors)
constexpr int kKc = 128;  // K rows per chunk, at most

inline int round16(int n) { return (n + 15) / 16 * 16; }

// Rows per tile for a block of NV vectors: MR x NV accumulators, NV vectors of b and a broadcast
// in the 32 registers, with enough independent sums to keep both FMA ports busy.
template <int NV>
constexpr int rows_per_tile() { return NV == 4 ? 6 : NV == 3 ? 8 : 12; }

// A tile of MR rows x NV vectors: c(MR, 16 NV) = (first ? 0 : c) + a(MR, kc) @ b(kc, 16 NV), then
// times *scale when `scale` is not null (the last chunk of a scaled product). `last` masks the last
// vector's columns (the product's edge): b is read and c written under it (and c2 when not null:
// a second destination of the last chunk's values, row r at c2 + r * ldc2). During its first `sn`
// steps the tile also writes a vector from ss to sd with a streaming store (sd null: fetches the
// line at ss into the L2 cache instead). The loops walk a and b by pointer, the rows of a at fixed
// offsets from one pointer, so that the accumulators, b's vectors and the broadcast keep the
// vector registers and the addresses few general ones (the compiler spilled both otherwise).
template <int MR, int NV>
inline void tile(float* c, size_t ldc, const float* a, size_t lda, const float* b, size_t ldb, int kc, bool first,
                 __mmask16 last, const float* scale, const float* ss, float* sd, int sn, float* c2, size_t ldc2) {
    __m512 acc[MR][NV];
    if (first) {
        #pragma GCC unroll 16
        for (int r = 0; r < MR; ++r)
            #pragma GCC unroll 16
            for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
    } else {
        #pragma GCC unroll 16
        for (int r = 0; r < MR; ++r)
            #pragma GCC unroll 16
            for (int v = 0; v < NV; ++v)
                acc[r][v] = _mm512_maskz_loadu_ps(v == NV - 1 ? last : __mmask16(0xFFFF), c + size_t(r) * ldc + 16 * v);
    }
    const float* ak = a;
    const float* bk = b;
    auto step = [&]() __attribute__((always_inline)) {
        __m512 w[NV];
        #pragma GCC unroll 16
        for (int v = 0; v < NV - 1; ++v) w[v] = _mm512_loadu_ps(bk + 16 * v);
        w[NV - 1] = _mm512_maskz_loadu_ps(last, bk + 16 * (NV - 1));
        #pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
            const __m512 x = _mm512_set1_ps(ak[size_t(r) * lda]);
            #pragma GCC unroll 16
            for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(x, w[v], acc[r][v]);
        }
        ++ak;
        bk += ldb;
    };
    int k = 0;
    if (sd)
        for (; k < sn; ++k) {
            step();
            _mm512_stream_ps(sd + 16 * size_t(k), _mm512_loadu_ps(ss + 16 * size_t(k)));
        }
    else
        for (; k < sn; ++k) {
            step();
            _mm_prefetch(reinterpret_cast<const char*>(ss + 16 * size_t(k)), _MM_HINT_T1);
        }
    for (; k < kc; ++k) step();
    if (scale) {
        const __m512 s = _mm512_set1_ps(*scale);
        #pragma GCC unroll 16
        for (int r = 0; r < MR; ++r)
            #pragma GCC unroll 16
            for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_mul_ps(acc[r][v], s);
    }
    #pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
        #pragma GCC unroll 16
        for (int v = 0; v < NV; ++v)
            _mm512_mask_storeu_ps(c + size_t(r) * ldc + 16 * v, v == NV - 1 ? last : __mmask16(0xFFFF), acc[r][v]);
    if (c2)
        #pragma GCC unroll 16
        for (int r = 0; r < MR; ++r)
            #pragma GCC unroll 16
            for (int v = 0; v < NV; ++v)
                _mm512_mask_storeu_ps(c2 + size_t(r) * ldc2 + 16 * v, v == NV - 1 ? last : __mmask16(0xFFFF), acc[r][v]);
}

// tile<rows, NV> for rows in [1, MR].
template <int NV, int MR>
inline void tile_rows(int rows, float* c, size_t ldc, const float* a, size_t lda, const float* b, size_t ldb, int kc,
                      bool first, __mmask16 last, const float* scale, const float* ss, float* sd, int sn, float* c2,
                      size_t ldc2) {
    if (rows == MR) return tile<MR, NV>(c, ldc, a, lda, b, ldb, kc, first, last, scale, ss, sd, sn, c2, ldc2);
    if constexpr (MR > 1)
        tile_rows<NV, MR - 1>(rows, c, ldc, a, lda, b, ldb, kc, first, last, scale, ss, sd, sn, c2, ldc2);
}

// Copies that a product carries out on the side: the aligned whole vectors of each, a vector per
// step of its tiles' loops, with streaming stores (the stores and the FMAs use different ports, so
// that writing a recorded stage to memory overlaps the arithmetic instead of following it).
struct Side {
    const Copy* copies;
    int count;
    int i = 0;          // the copy under way
    size_t done = 0;    // its vectors written
    // src, dst and the vector count of the next contiguous run, at most `most` vectors
    int take(int most, const float*& src, float*& dst) {
        while (i < count) {
            const Copy& c = copies[i];
            const size_t vecs = c.n / 16;
            if (done < vecs) {
                const int n = int(std::min<size_t>(size_t(most), vecs - done));
                src = c.src + 16 * done;
                dst = c.dst ? c.dst + 16 * done : nullptr;
                done += size_t(n);
                return n;
            }
            ++i, done = 0;
        }
        return 0;
    }
};

// One block of NV vectors (`valid` columns of it real) over rows [0, n) and K rows [k0, k0 + kc).
template <int NV>
void block(float* c, size_t ldc, const float* a, size_t lda, int n, int k0, int kc, const float* b, size_t ldb,
           int valid, bool first, const float* scale, Side* side, float* c2, size_t ldc2) {
    constexpr int MR = rows_per_tile<NV>();
    const __mmask16 last = __mmask16((1u << (valid - 16 * (NV - 1))) - 1u);
    for (int r0 = 0; r0 < n; r0 += MR) {
        const float* ss = nullptr;
        float* sd = nullptr;
        const int sn = side ? side->take(kc, ss, sd) : 0;
        tile_rows<NV, MR>(std::min(MR, n - r0), c + size_t(r0) * ldc, ldc, a + size_t(r0) * lda + size_t(k0), lda,
                          b, ldb, kc, first, last, scale, ss, sd, sn, c2 ? c2 + size_t(r0) * ldc2 : nullptr, ldc2);
    }
}

// c(n, N) = a(n, K) @ b (times `scale` when `scaled`); block j of b starts at b + j * block_stride,
// its K rows ld_of(j) apart.
template <class LdOf>
void product(float* c, size_t ldc, const float* a, size_t lda, int n, int K, const float* b, size_t block_stride,
             LdOf ld_of, int N, bool scaled, float scale, Side* side, float* c2 = nullptr, size_t ldc2 = 0) {
    if (n <= 0 || N <= 0) return;
    if (K <= 0) {  // an empty sum
        for (int r = 0; r < n; ++r) std::fill_n(c + size_t(r) * ldc, size_t(N), 0.f);
        return;
    }
    const int chunks = (K + kKc - 1) / kKc, per = (K + chunks - 1) / chunks;
    for (int k0 = 0; k0 < K; k0 += per) {
        const int kc = std::min(per, K - k0);
        const bool first = k0 == 0, last_chunk = k0 + kc == K;
        for (int j0 = 0, j = 0; j0 < N; j0 += kNb, ++j) {
            const int valid = std::min(kNb, N - j0), nv = (valid + 15) / 16;
            const size_t ldb = ld_of(j);
            const float* bj = b + size_t(j) * block_stride + size_t(k0) * ldb;
            float* cj = c + size_t(j0);
            switch (nv) {
                case 4: block<4>(cj, ldc, a, lda, n, k0, kc, bj, ldb, valid, first, scaled && last_chunk ? &scale : nullptr, side, c2 && last_chunk ? c2 + j0 : nullptr, ldc2); break;
                case 3: block<3>(cj, ldc, a, lda, n, k0, kc, bj, ldb, valid, first, scaled && last_chunk ? &scale : nullptr, side, c2 && last_chunk ? c2 + j0 : nullptr, ldc2); break;
                case 2: block<2>(cj, ldc, a, lda, n, k0, kc, bj, ldb, valid, first, scaled && last_chunk ? &scale : nullptr, side, c2 && last_chunk ? c2 + j0 : nullptr, ldc2); break;
                default: block<1>(cj, ldc, a, lda, n, k0, kc, bj, ldb, valid, first, scaled && last_chunk ? &scale : nullptr, side, c2 && last_chunk ? c2 + j0 : nullptr, ldc2); break;
            }
        }
    }
}

// r[i] = row i of a 16 x 16 block; afterwards r[j] = its column j.
inline void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {
        const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]),
                      c = _mm512_castps_pd(t[4 * i + 2]), e = _mm512_castps_pd(t[4 * i + 3]);
        r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, e));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, e));
    }
    for (int i = 0; i < 4; ++i) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0x88);
        t[4 + i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0xdd);
        t[8 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0x88);
        t[12 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0xdd);
    }
    for (int i = 0; i < 4; ++i) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
        r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xdd);
        r[4 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0x88);
        r[12 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0xdd);
    }
}

}  // namespace

size_t packed_k_floats(int Tk, int d) { return size_t(std::max(d, 0)) * size_t(round16(std::max(Tk, 0))); }

void pack_k(float* dst, const float* k, int Tk, int d) {
    const int np = round16(Tk);
    // 16 keys x 16 dimensions at a time: their rows loaded (zeros past Tk and d), transposed, and
    // stored as 16 rows of 16 keys
    for (int j0 = 0; j0 < np; j0 += kNb) {
        const int pj = std::min(kNb, np - j0);
        float* blk = dst + size_t(d) * size_t(j0);
        for (int t0 = j0; t0 < j0 + pj; t0 += 16)
            for (int e0 = 0; e0 < d; e0 += 16) {
                const int de = std::min(16, d - e0);
                const __mmask16 m = __mmask16((1u << de) - 1u);
                __m512 r[16];
                for (int i = 0; i < 16; ++i)
                    r[i] = t0 + i < Tk ? _mm512_maskz_loadu_ps(m, k + size_t(t0 + i) * size_t(d) + size_t(e0))
                                       : _mm512_setzero_ps();
                transpose16(r);
                for (int e = 0; e < de; ++e)
                    _mm512_storeu_ps(blk + size_t(e0 + e) * size_t(pj) + size_t(t0 - j0), r[e]);
            }
    }
}

void scores(float* s, size_t lds, const float* q, size_t ldq, int n, int d, const float* kp, int Tk, float alpha,
            const Copy* fetch, int nfetch) {
    const int np = round16(Tk);
    // the ranges to fetch, from their first whole line on, a line per step
    Copy mid[4];
    int nm = 0;
    for (int i = 0; i < nfetch && nm < 4; ++i) {
        const Copy& c = fetch[i];
        const float* a = reinterpret_cast<const float*>((reinterpret_cast<uintptr_t>(c.src) + 63) & ~uintptr_t(63));
        const size_t skip = size_t(a - c.src);
        if (c.n > skip + 16) mid[nm++] = {a, nullptr, (c.n - skip) / 16 * 16};
    }
    Side side{mid, nm};
    product(s, lds, q, ldq, n, d, kp, size_t(d) * kNb, [&](int j) { return size_t(std::min(kNb, np - kNb * j)); }, Tk,
            true, alpha, nm ? &side : nullptr);
}

void weighted(float* z, size_t ldz, const float* p, size_t ldp, int n, int Tk, const float* v, int d,
              const Copy* copies, int ncopies, float* z2, size_t ldz2) {
    // each copy's floats before its destination's first 64-byte boundary and after its last whole
    // vector are copied here; the vectors between go out on the side of the product, and what the
    // product's steps do not cover, after it
    Copy mid[4];
    int nm = 0;
    for (int i = 0; i < ncopies; ++i) {
        const Copy& c = copies[i];
        size_t h = 0;
        while (h < c.n && (reinterpret_cast<uintptr_t>(c.dst + h) & 63)) c.dst[h] = c.src[h], ++h;
        const size_t vecs = (c.n - h) / 16;
        for (size_t t = h + 16 * vecs; t < c.n; ++t) c.dst[t] = c.src[t];
        if (vecs) {
            if (nm == 4) throw std::invalid_argument("attention weighted(): at most 4 copies on the side");
            mid[nm++] = {c.src + h, c.dst + h, 16 * vecs};
        }
    }
    Side side{mid, nm};
    product(z, ldz, p, ldp, n, Tk, v, kNb, [&](int) { return size_t(d); }, d, false, 1.f, nm ? &side : nullptr, z2,
            ldz2);
    const float* src;
    float* dst;
    for (int r; (r = side.take(1 << 20, src, dst)) > 0;)
        for (int k = 0; k < r; ++k) _mm512_stream_ps(dst + 16 * k, _mm512_loadu_ps(src + 16 * k));
}

}  // namespace vit::attn::avx512
