// The matrix products (core/kernels/gemm.h): oneDNN's sgemm and the packed F.linear
// against a double-precision loop, on ViT shapes and awkward ones, with one to
// three threads; and the packs' promise that a traced run never uses a stale
// packed copy of weights changed since (AdamW in place, an edit without notice,
// a copy).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/model/forward.h"
#include "core/kernels/gemm.h"
#include "core/kernels/gemm_own.h"
#include "core/kernels/ops.h"
#include "core/kernels/ops_kernels.h"
#include "core/train/optimizer.h"

using namespace vit;

namespace {
std::vector<float> randn(size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd;
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
}

// The worst error of F.linear's output against a double-precision loop, relative
// to the sum of the magnitudes of the terms (what float rounding scales with).
double linear_error(const std::vector<float>& out, const std::vector<float>& in, const std::vector<float>& W,
                    const float* b, int R, int I, int O) {
    double worst = 0;
    for (int r = 0; r < R; ++r)
        for (int o = 0; o < O; ++o) {
            double acc = b ? double(b[o]) : 0.0, mag = b ? std::abs(double(b[o])) : 0.0;
            for (int i = 0; i < I; ++i) {
                const double t = double(in[size_t(r) * I + i]) * double(W[size_t(o) * I + i]);
                acc += t, mag += std::abs(t);
            }
            worst = std::max(worst, std::abs(double(out[size_t(r) * O + o]) - acc) / std::max(1e-30, mag));
        }
    return worst;
}

struct Threads {  // restores the thread count a test changed
    int saved = ops::threads();
    ~Threads() { ops::set_threads(saved); }
};

Tensor3 image(const Config& c, unsigned seed) {
    Tensor3 x = Tensor3::from_shape({size_t(c.channels), size_t(c.image_size), size_t(c.image_size)});
    auto v = randn(x.size(), seed);
    std::copy(v.begin(), v.end(), x.begin());
    return x;
}

// A model whose linears are above the packing threshold (R*I*O >= 1e6).
Config packed_config() {
    Config c = preset("toy-rgb8");
    c.image_size = 32, c.patch = 4, c.width = 128, c.heads = 4, c.mlp = 512, c.depth = 2, c.classes = 10;
    return c;
}
}  // namespace

TEST(Gemm, PackedLinearEqualsDoubleLoop) {
    Threads keep;
    struct Shape { int R, I, O; };
    // ViT-B's qkv; the default model's; a head of one row; sizes that are no
    // multiple of the kernel's 16-column blocks; more slices than blocks.
    for (Shape s : {Shape{197, 768, 2304}, Shape{50, 64, 192}, Shape{1, 768, 1000}, Shape{65, 129, 383},
                    Shape{197, 192, 577}, Shape{3, 40, 33}})
        for (int threads : {1, 2, 3})
            for (bool bias : {true, false}) {
                ops::set_threads(threads);
                const auto in = randn(size_t(s.R) * s.I, 1), W = randn(size_t(s.O) * s.I, 2), b = randn(size_t(s.O), 3);
                gemm::Packs packs;
                std::vector<float> out(size_t(s.R) * s.O, NAN);
                ops::linear(out.data(), in.data(), W.data(), bias ? b.data() : nullptr, s.R, s.I, s.O, &packs);
                const double err = linear_error(out, in, W, bias ? b.data() : nullptr, s.R, s.I, s.O);
                EXPECT_LT(err, 1e-6) << s.R << "x" << s.I << " @ " << s.I << "x" << s.O << ", " << threads
                                     << " threads, bias " << bias;
                // Again from the cache: the same numbers.
                std::vector<float> again(out.size(), NAN);
                ops::linear(again.data(), in.data(), W.data(), bias ? b.data() : nullptr, s.R, s.I, s.O, &packs);
                EXPECT_EQ(out, again);
                if (double(s.R) * s.I * s.O >= 1e6) EXPECT_GE(packs.bytes(), size_t(s.O) * s.I * sizeof(float));
            }
}

// The own kernels (gemm_own.h) promise their arithmetic exactly: per output element, acc = bias,
// then acc = fma(in[r][k], W[c][k], acc) for k in order. So a scalar loop of std::fma must give the
// same bits, from the AVX-512 kernel and from the AVX2 one (whichever this CPU has), for every row
// count (tiles of 6 and the tails), column count (blocks of 64, narrower ones, AVX2's tiles of 16
// across a block, a last vector under a mask; rows in chunks of ~240), K (chunks of 768 and a short
// last one), with the output in place among other columns (whose values must stay), and from
// inside a wider input.
TEST(Gemm, OwnKernelsEqualScalarFmaLoopBitForBit) {
    __builtin_cpu_init();
    struct Kernel { const char* name; gemm::own::Run run; bool here; };
    const Kernel kernels[] = {
        {"avx512", gemm::own::avx512::run, __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")},
        {"avx2", gemm::own::avx2::run, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")}};
    int ran = 0;
    for (const Kernel& kern : kernels) {
        if (!kern.here) continue;
        ++ran;
        SCOPED_TRACE(kern.name);
        struct Shape { int R, K, n; };
        for (Shape s : {Shape{197, 768, 1152}, Shape{13, 3072, 96}, Shape{7, 5, 33}, Shape{1, 385, 64}, Shape{6, 800, 130},
                        Shape{25, 1, 17}, Shape{12, 384, 200}, Shape{500, 40, 70}, Shape{1025, 20, 64}, Shape{9, 70, 8},
                        Shape{5, 64, 41}})
            for (bool bias : {true, false}) {
                const size_t ldi = size_t(s.K) + 3, ldo = size_t(s.n) + 5, ldw = size_t(s.K) + 2;
                const auto in = randn(size_t(s.R) * ldi, 21), W = randn(size_t(s.n) * ldw, 22), b = randn(size_t(s.n), 23);
                std::vector<float> packed(gemm::own::packed_floats(s.K, s.n) + 16);
                float* pk = packed.data() + (16 - (reinterpret_cast<uintptr_t>(packed.data()) / 4) % 16) % 16;  // 64-byte aligned
                gemm::own::pack(pk, W.data(), ldw, s.K, s.n);
                std::vector<float> out(size_t(s.R) * ldo, -7.f);
                kern.run(out.data(), ldo, in.data(), ldi, s.R, s.K, pk, s.n, bias ? b.data() : nullptr, W.data(),
                         W.size() * sizeof(float), nullptr);
                size_t wrong = 0, kept = 0;
                for (int r = 0; r < s.R; ++r) {
                    for (int c = 0; c < s.n; ++c) {
                        float acc = bias ? b[size_t(c)] : 0.f;
                        for (int k = 0; k < s.K; ++k) acc = std::fma(in[size_t(r) * ldi + size_t(k)], W[size_t(c) * ldw + size_t(k)], acc);
                        wrong += out[size_t(r) * ldo + size_t(c)] != acc;
                    }
                    for (size_t c = size_t(s.n); c < ldo; ++c) kept += out[size_t(r) * ldo + c] == -7.f;
                }
                EXPECT_EQ(wrong, 0u) << s.R << "x" << s.K << " @ " << s.K << "x" << s.n << ", bias " << bias;
                EXPECT_EQ(kept, size_t(s.R) * (ldo - size_t(s.n))) << "columns past the slice written";
                std::vector<float> back(size_t(s.n) * ldw, 0.f);
                gemm::own::unpack(back.data(), ldw, pk, s.K, s.n);
                for (int c = 0; c < s.n; ++c)
                    for (int k = 0; k < s.K; ++k) ASSERT_EQ(back[size_t(c) * ldw + size_t(k)], W[size_t(c) * ldw + size_t(k)]);
            }
    }
    if (ran == 0) GTEST_SKIP() << "neither AVX-512 nor AVX2 + FMA on this CPU";
}

// A matrix held packed (pack_matrix) gives the same bits in every output mode (in place, a dense
// block copied or streamed out, skipped) and with any row count, and unpacks to what was packed.
TEST(Gemm, PackedMatrixModesAgree) {
    const int I = 200, O = 300;
    const auto W = randn(size_t(O) * I, 31), b = randn(size_t(O), 32), in = randn(size_t(197) * I, 33);
    const auto m = gemm::pack_matrix(W.data(), I, O, 2, 197);
    std::vector<float> back(W.size());
    gemm::unpack(*m, back.data());
    EXPECT_EQ(back, W);
    for (int R : {197, 50, 1}) {
        std::vector<float> ref(size_t(R) * O, NAN);
        for (int p = 0; p < gemm::parts(*m); ++p) gemm::run(*m, p, ref.data(), in.data(), b.data(), R, gemm::Out::Cached);
        EXPECT_LT(linear_error(ref, std::vector<float>(in.begin(), in.begin() + size_t(R) * I), W, b.data(), R, I, O), 1e-6);
        for (gemm::Out mode : {gemm::Out::Streamed, gemm::Out::Skipped}) {
            std::vector<float> out(size_t(R) * O, NAN);
            for (int p = 0; p < gemm::parts(*m); ++p) {
                const gemm::Block y = gemm::run(*m, p, out.data(), in.data(), b.data(), R, mode);
                const int c0 = gemm::first_column(*m, p), c1 = gemm::end_column(*m, p);
                for (int r = 0; r < R; ++r)
                    for (int c = c0; c < c1; ++c) {
                        ASSERT_EQ(y.p[size_t(r) * y.ld + size_t(c - c0)], ref[size_t(r) * O + size_t(c)]);
                        if (mode == gemm::Out::Streamed) ASSERT_EQ(out[size_t(r) * O + size_t(c)], ref[size_t(r) * O + size_t(c)]);
                    }
            }
        }
    }
}

// The own kernel's fused epilogues give what the product followed by its separate pass gives, bit
// for bit: GELU from the registers (linear_packed_gelu) against ops::gelu over the product, in and
// out of stream mode, over one and two K chunks and one and two row chunks; the q/k/v split by the
// stores (linear_packed_heads) against the split by index of the product. A GELU far from the exact
// one (erf in double) or a value stored to the wrong head fails too.
TEST(Gemm, FusedEpiloguesEqualTheProductThenItsPass) {
    if (!gemm::own_kernel()) GTEST_SKIP() << "the packed products run on oneDNN here (no AVX-512 or AVX2 + FMA)";
    struct Shape { int R, I, O; };
    for (Shape s : {Shape{197, 768, 320}, Shape{7, 1000, 96}, Shape{250, 64, 1200}})
        for (bool stream : {false, true}) {
            const auto W = randn(size_t(s.O) * s.I, 41), b = randn(size_t(s.O), 42), in = randn(size_t(s.R) * s.I, 43);
            const auto m = gemm::pack_matrix(W.data(), s.I, s.O, 2, s.R);
            ASSERT_TRUE(gemm::fusable(*m));
            std::vector<float> ref(size_t(s.R) * s.O), ref_post(ref.size());
            for (int p = 0; p < gemm::parts(*m); ++p) gemm::run(*m, p, ref.data(), in.data(), b.data(), s.R);
            ops::gelu(ref_post.data(), ref.data(), ref.size());
            const size_t ldp = size_t(s.O) + 8;
            std::vector<float> pre(ref.size(), NAN), post(size_t(s.R) * ldp, -5.f);
            ASSERT_TRUE(ops::linear_packed_gelu(pre.data(), post.data(), ldp, in.data(), *m, b.data(), s.R, stream));
            size_t wrong_pre = 0, wrong_post = 0, far = 0, kept = 0;
            for (int r = 0; r < s.R; ++r) {
                for (int c = 0; c < s.O; ++c) {
                    const size_t i = size_t(r) * s.O + size_t(c);
                    const float g = post[size_t(r) * ldp + size_t(c)];
                    wrong_pre += std::memcmp(&pre[i], &ref[i], 4) != 0;
                    wrong_post += std::memcmp(&g, &ref_post[i], 4) != 0;
                    const double x = ref[i], exact = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
                    far += std::fabs(g - exact) > 1e-6 * std::max(1.0, std::fabs(exact));
                }
                for (size_t c = size_t(s.O); c < ldp; ++c) kept += post[size_t(r) * ldp + c] == -5.f;
            }
            EXPECT_EQ(wrong_pre, 0u) << s.R << "x" << s.I << " @ " << s.I << "x" << s.O << ", stream " << stream;
            EXPECT_EQ(wrong_post, 0u) << s.R << "x" << s.I << " @ " << s.I << "x" << s.O << ", stream " << stream;
            EXPECT_EQ(far, 0u) << "GELU against erf in double";
            EXPECT_EQ(kept, size_t(s.R) * (ldp - size_t(s.O))) << "post written past its columns";
        }
    struct Heads { int R, I, H, d; };
    for (Heads s : {Heads{197, 768, 4, 64}, Heads{250, 1024, 3, 128}, Heads{1, 64, 2, 64}}) {
        const int O = 3 * s.H * s.d;
        const auto W = randn(size_t(O) * s.I, 51), b = randn(size_t(O), 52), in = randn(size_t(s.R) * s.I, 53);
        const auto m = gemm::pack_matrix(W.data(), s.I, O, 2, s.R);
        ASSERT_TRUE(gemm::fusable(*m, s.d));
        std::vector<float> ref(size_t(s.R) * O);
        for (int p = 0; p < gemm::parts(*m); ++p) gemm::run(*m, p, ref.data(), in.data(), b.data(), s.R);
        const size_t per = size_t(s.H) * s.R * s.d;
        std::vector<float> q(per, NAN), k(per, NAN), v(per, NAN);
        float* heads[3] = {q.data(), k.data(), v.data()};
        ASSERT_TRUE(ops::linear_packed_heads(heads, s.d, in.data(), *m, b.data(), s.R));
        size_t wrong = 0;
        for (int part = 0; part < 3; ++part)  // torch: qkv.reshape(R, 3, H, d).permute(1, 2, 0, 3)
            for (int h = 0; h < s.H; ++h)
                for (int r = 0; r < s.R; ++r)
                    for (int j = 0; j < s.d; ++j) {
                        const float x = heads[part][(size_t(h) * s.R + size_t(r)) * s.d + size_t(j)];
                        const float y = ref[size_t(r) * O + size_t(part) * s.H * s.d + size_t(h) * s.d + size_t(j)];
                        wrong += std::memcmp(&x, &y, 4) != 0;
                    }
        EXPECT_EQ(wrong, 0u) << s.R << " rows, " << s.H << " heads of " << s.d;
    }
    // heads of 80 (ViT-H/14): a 64-column block would straddle two heads, so the caller splits
    const auto W = randn(size_t(480) * 64, 61);
    const auto m = gemm::pack_matrix(W.data(), 64, 480, 2, 10);
    EXPECT_FALSE(gemm::fusable(*m, 80));
    std::vector<float> q(480), k(480), v(480);
    float* heads[3] = {q.data(), k.data(), v.data()};
    EXPECT_FALSE(ops::linear_packed_heads(heads, 80, W.data(), *m, nullptr, 1));
}

TEST(Gemm, SgemmEveryTransposeEqualsDoubleLoop) {
    const int M = 37, N = 29, K = 51;
    const auto A = randn(size_t(M) * K, 4), B = randn(size_t(K) * N, 5), C0 = randn(size_t(M) * N, 6);
    for (bool ta : {false, true})
        for (bool tb : {false, true}) {
            std::vector<float> C = C0;
            // A is (M,K) or stored transposed (K,M); B is (K,N) or (N,K).
            gemm::sgemm(ta, tb, M, N, K, 0.5f, A.data(), ta ? M : K, B.data(), tb ? K : N, 2.f, C.data(), N);
            double worst = 0;
            for (int m = 0; m < M; ++m)
                for (int n = 0; n < N; ++n) {
                    double acc = 0;
                    for (int k = 0; k < K; ++k)
                        acc += double(ta ? A[size_t(k) * M + m] : A[size_t(m) * K + k]) *
                               double(tb ? B[size_t(n) * K + k] : B[size_t(k) * N + n]);
                    const double want = 0.5 * acc + 2.0 * C0[size_t(m) * N + n];
                    worst = std::max(worst, std::abs(C[size_t(m) * N + n] - want) / std::max(1.0, std::abs(want)));
                }
            EXPECT_LT(worst, 1e-5) << "ta " << ta << " tb " << tb;
        }
}

// A traced run after the weights changed must equal a run of a fresh copy of
// them (whose packs start empty): never the old packed matrices.
TEST(Gemm, TracedRunNeverUsesStalePacks) {
    Threads keep;
    ops::set_threads(2);
    const Config c = packed_config();
    Weights w = init_weights(c, 7);
    const Tensor3 x = image(c, 8);
    auto logits = [&](const Weights& ww) { return Array(run(ww, x).get("logits")); };

    const Array before = logits(w);
    EXPECT_GT(w.packs.bytes(), 0u) << "the traced run packed nothing: the test would not test the packs";

    // 1. AdamW in place (it clears the packs).
    Weights g = zeros_like(w);
    for_each_param([](const std::string&, auto& p) { p.fill(0.01f); }, g);
    AdamW adam;
    adam.init(w);
    adam.update(w, g, 1e-2f);
    const Array after_step = logits(w);
    EXPECT_EQ(after_step, logits(Weights(w)));
    EXPECT_NE(after_step, before);

    // 2. An edit nobody announced: every element of one matrix scaled (as loading
    // new weights into the same buffers would); caught by the sampled values.
    w.blocks[1].fc1_w *= 1.5f;
    const Array after_edit = logits(w);
    EXPECT_EQ(after_edit, logits(Weights(w)));
    EXPECT_NE(after_edit, after_step);

    // 3. A copy has its own packs: changing the copy leaves the original's run alone.
    Weights copy = w;
    copy.blocks[0].qkv_w *= -1.f;
    EXPECT_NE(logits(copy), after_edit);
    EXPECT_EQ(logits(w), after_edit);

    // 4. Moved weights keep working (the matrices move with their buffers).
    Weights moved = std::move(copy);
    EXPECT_EQ(logits(moved), logits(Weights(moved)));

    w.packs.clear();
    EXPECT_EQ(w.packs.bytes(), 0u);
}

TEST(Gemm, DescribeNamesTheEngine) {
    const std::string d = gemm::describe();
    EXPECT_NE(d.find("oneDNN "), std::string::npos) << d;
    EXPECT_NE(d.find("kernels"), std::string::npos) << d;
}

// Two threads split the work differently (packed column slices; a head's query
// rows in halves when 3 heads meet 2 threads): every recorded stage must agree
// with the one-thread run.
TEST(Gemm, TwoThreadsRecordWhatOneThreadDoes) {
    Threads keep;
    Config c = packed_config();
    c.width = 96;  // 3 heads of 32 or 4 of 24
    for (int heads : {3, 4}) {
        c.heads = heads;
        const Weights w = init_weights(c, 11);
        const Tensor3 x = image(c, 12);
        ops::set_threads(1);
        const Trace one = run(w, x);
        ops::set_threads(2);
        const Trace two = run(w, x);
        ASSERT_EQ(one.size(), two.size());
        for (size_t i = 0; i < one.size(); ++i) {
            const Array &a = one.at(i), &b = two.at(i);
            ASSERT_EQ(a.shape(), b.shape()) << one.name(i);
            double worst = 0, scale = 1e-6;
            for (size_t j = 0; j < a.size(); ++j) scale = std::max(scale, double(std::abs(a.flat(j))));
            for (size_t j = 0; j < a.size(); ++j) worst = std::max(worst, double(std::abs(a.flat(j) - b.flat(j))));
            EXPECT_LT(worst / scale, 1e-5) << one.name(i) << " with " << heads << " heads";
        }
    }
}
