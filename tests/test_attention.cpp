// The attention's own AVX-512 kernel (core/kernels/attention_avx512.h): its two products against a
// scalar std::fma loop in the order the header promises (bit for bit), against oneDNN's sgemm (the
// path it replaced, to float rounding) and a double-precision sum; the copies it carries out on
// the side of z = p v; and its use in the traced pass, whose attention stages must not depend on
// the thread count (ViT-Ti's 3 heads on 2 threads split each head's query rows, on 1 they do not).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/kernels/attention_avx512.h"
#include "core/kernels/ops.h"
#include "core/model/forward.h"
#include "tests/trace_compare.h"

using namespace vit;
using vit::test_util::expect_same_trace;
using vit::test_util::wave;

namespace {

using test_util::randn;

// A 64-byte aligned span of n floats inside v (the packed k^T's alignment).
float* aligned(std::vector<float>& v, size_t n) {
    v.assign(n + 16, 0.f);
    return v.data() + (16 - (reinterpret_cast<uintptr_t>(v.data()) / sizeof(float)) % 16) % 16;
}

struct Sizes { int n, Tk, d; };
// ViT-B's head (197 x 197 x 64), SigLIP's d = 72, ViT-H's d = 80, a long sequence (more rows of v
// than one K chunk holds), one query row (the MAP head), and edges of every tile size.
const Sizes kShapes[] = {{197, 197, 64}, {50, 50, 16}, {13, 197, 72}, {7, 257, 80}, {1, 197, 64}, {6, 1, 64},
                         {25, 530, 64}, {12, 17, 1}, {5, 64, 130}, {33, 65, 48}};

}  // namespace

// Every element of scores and z equals the scalar chain the header promises: acc = 0, then
// acc = fma(a[k], b[k], acc) for k in order, times alpha for the scores. Rows are written with a
// stride past their end, which must stay untouched.
TEST(Attention, OwnKernelEqualsScalarFmaLoopBitForBit) {
    if (!attn::avx512::available()) GTEST_SKIP() << "no AVX-512 on this CPU (or VITSCOPE_ATTENTION=onednn)";
    for (const Sizes& s : kShapes) {
        SCOPED_TRACE(std::to_string(s.n) + " queries, " + std::to_string(s.Tk) + " keys, d " + std::to_string(s.d));
        const size_t n = size_t(s.n), Tk = size_t(s.Tk), d = size_t(s.d), ldq = d + 3, lds = Tk + 5, ldz = d + 7;
        const auto q = randn(n * ldq, 1), k = randn(Tk * d, 2), v = randn(Tk * d, 3);
        std::vector<float> kbuf;
        float* kp = aligned(kbuf, attn::avx512::packed_k_floats(s.Tk, s.d));
        attn::avx512::pack_k(kp, k.data(), s.Tk, s.d);
        const float alpha = 0.37f;
        std::vector<float> sc(n * lds, -7.f), z(n * ldz, -7.f);
        attn::avx512::scores(sc.data(), lds, q.data(), ldq, s.n, s.d, kp, s.Tk, alpha);
        // z also written as a second output (the heads' concatenation), stride of its own
        const size_t ldz2 = 3 * d + 1;
        std::vector<float> z2(n * ldz2, -7.f);
        attn::avx512::weighted(z.data(), ldz, sc.data(), lds, s.n, s.Tk, v.data(), s.d, nullptr, 0, z2.data() + d, ldz2);
        size_t wrong_s = 0, wrong_z = 0, wrong_z2 = 0, kept = 0;
        for (size_t i = 0; i < n; ++i) {
            for (size_t j = 0; j < Tk; ++j) {
                float acc = 0.f;
                for (size_t e = 0; e < d; ++e) acc = std::fma(q[i * ldq + e], k[j * d + e], acc);
                wrong_s += sc[i * lds + j] != acc * alpha;
            }
            for (size_t e = 0; e < d; ++e) {
                float acc = 0.f;
                for (size_t j = 0; j < Tk; ++j) acc = std::fma(sc[i * lds + j], v[j * d + e], acc);
                wrong_z += z[i * ldz + e] != acc;
                wrong_z2 += z2[i * ldz2 + d + e] != acc;
            }
            for (size_t e = 0; e < ldz2; ++e) kept += (e < d || e >= 2 * d) && z2[i * ldz2 + e] == -7.f;
            for (size_t j = Tk; j < lds; ++j) kept += sc[i * lds + j] == -7.f;
            for (size_t e = d; e < ldz; ++e) kept += z[i * ldz + e] == -7.f;
        }
        EXPECT_EQ(wrong_s, 0u) << "scores";
        EXPECT_EQ(wrong_z, 0u) << "z";
        EXPECT_EQ(wrong_z2, 0u) << "z's second output";
        EXPECT_EQ(kept, n * (lds - Tk + ldz - d + ldz2 - d)) << "written past a row's end";
    }
}

// The same values as oneDNN's sgemm (the path other CPUs take) to float rounding, and as a
// double-precision sum to the rounding of a float sum of that many terms.
TEST(Attention, OwnKernelAgreesWithSgemmAndDoubleSums) {
    if (!attn::avx512::available()) GTEST_SKIP() << "no AVX-512 on this CPU (or VITSCOPE_ATTENTION=onednn)";
    for (const Sizes& s : kShapes) {
        SCOPED_TRACE(std::to_string(s.n) + " queries, " + std::to_string(s.Tk) + " keys, d " + std::to_string(s.d));
        const int n = s.n, Tk = s.Tk, d = s.d;
        const auto q = randn(size_t(n) * d, 4), k = randn(size_t(Tk) * d, 5), v = randn(size_t(Tk) * d, 6);
        const float alpha = float(1.0 / std::sqrt(double(d)));
        std::vector<float> kbuf;
        float* kp = aligned(kbuf, attn::avx512::packed_k_floats(Tk, d));
        attn::avx512::pack_k(kp, k.data(), Tk, d);
        std::vector<float> own_s(size_t(n) * Tk), ref_s(own_s.size()), own_z(size_t(n) * d), ref_z(own_z.size());
        attn::avx512::scores(own_s.data(), size_t(Tk), q.data(), size_t(d), n, d, kp, Tk, alpha);
        ops::gemm(false, true, n, Tk, d, alpha, q.data(), d, k.data(), d, 0.f, ref_s.data(), Tk);
        attn::avx512::weighted(own_z.data(), size_t(d), own_s.data(), size_t(Tk), n, Tk, v.data(), d);
        ops::gemm(false, false, n, d, Tk, 1.f, own_s.data(), Tk, v.data(), d, 0.f, ref_z.data(), d);
        double worst_s = 0, worst_z = 0, worst_ds = 0, worst_dz = 0;
        for (int i = 0; i < n; ++i) {
            for (int j = 0; j < Tk; ++j) {
                double acc = 0, mag = 0;
                for (int e = 0; e < d; ++e) {
                    const double t = double(q[size_t(i) * d + e]) * k[size_t(j) * d + e];
                    acc += t, mag += std::fabs(t);
                }
                const size_t o = size_t(i) * Tk + j;
                worst_s = std::max(worst_s, std::fabs(double(own_s[o]) - ref_s[o]) / (alpha * mag + 1e-30));
                worst_ds = std::max(worst_ds, std::fabs(double(own_s[o]) - alpha * acc) / (alpha * mag + 1e-30));
            }
            for (int e = 0; e < d; ++e) {
                double acc = 0, mag = 0;
                for (int j = 0; j < Tk; ++j) {
                    const double t = double(own_s[size_t(i) * Tk + j]) * v[size_t(j) * d + e];
                    acc += t, mag += std::fabs(t);
                }
                const size_t o = size_t(i) * d + e;
                worst_z = std::max(worst_z, std::fabs(double(own_z[o]) - ref_z[o]) / (mag + 1e-30));
                worst_dz = std::max(worst_dz, std::fabs(double(own_z[o]) - acc) / (mag + 1e-30));
            }
        }
        // float rounding of a sum of K terms: at most ~K * 2^-24 of their magnitudes (far less in practice)
        EXPECT_LT(worst_s, 1e-5) << "scores against sgemm";
        EXPECT_LT(worst_z, 1e-5) << "z against sgemm";
        EXPECT_LT(worst_ds, 1e-5) << "scores against double sums";
        EXPECT_LT(worst_dz, 1e-5) << "z against double sums";
    }
}

// The copies carried on the side of z = p v arrive whole and exact, whatever their alignment and
// length (the unaligned heads and tails, lengths below a vector, more vectors than the product
// has steps), and do not change z.
TEST(Attention, SideCopiesArriveExactAndLeaveZAlone) {
    if (!attn::avx512::available()) GTEST_SKIP() << "no AVX-512 on this CPU (or VITSCOPE_ATTENTION=onednn)";
    const int n = 20, Tk = 70, d = 64;
    const auto p = randn(size_t(n) * Tk, 7), v = randn(size_t(Tk) * d, 8);
    std::vector<float> plain(size_t(n) * d), z(plain.size());
    attn::avx512::weighted(plain.data(), size_t(d), p.data(), size_t(Tk), n, Tk, v.data(), d);
    for (size_t len : {size_t(0), size_t(5), size_t(16), size_t(200), size_t(n) * Tk, size_t(100000)})
        for (size_t off : {size_t(0), size_t(3), size_t(15)}) {
            SCOPED_TRACE("length " + std::to_string(len) + ", offset " + std::to_string(off));
            const auto a = randn(len, 9), b = randn(len + 1, 10);
            std::vector<float> dbuf, ebuf;
            float* da = aligned(dbuf, len + 32) + off;
            float* db = aligned(ebuf, len + 32) + 16 - off % 16;
            const attn::avx512::Copy copies[2] = {{a.data(), da, len}, {b.data() + 1, db, len}};
            attn::avx512::weighted(z.data(), size_t(d), p.data(), size_t(Tk), n, Tk, v.data(), d, copies, 2);
            ops::stream_fence();
            EXPECT_TRUE(std::equal(a.begin(), a.end(), da));
            EXPECT_TRUE(std::equal(b.begin() + 1, b.end(), db));
            EXPECT_EQ(dbuf[size_t(da - dbuf.data()) + len], 0.f) << "written past the copy";
            EXPECT_EQ(z, plain);
        }
}

// The traced pass's attention stages do not depend on the thread count: ViT-Ti at 368 px (530
// tokens: two blocks of query rows per head; a trace large enough to be streamed) on one thread
// (a task per head) and on two (3 heads on 2 threads: each head's rows split), every stage bit
// for bit.
TEST(Attention, TracedPassSameBitsOnOneAndTwoThreads) {
    const Config c = test_util::vit_ti_530_config();
    Weights w = init_weights(c, 5);
    pack_blocks(w);
    const Tensor3 x = wave(c, 0.05f);
    auto pass = [&](int threads) {
        ops::Budget b(threads);
        return run(w, x, {});
    };
    expect_same_trace(pass(1), pass(2), "one thread vs two");
}
