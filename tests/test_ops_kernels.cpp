// Every build of the elementwise kernels (AVX-512, AVX2, baseline; chosen at run
// time) against plain double-precision arithmetic, on sizes with vector tails.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <future>
#include <random>
#include <vector>

#include "core/kernels/governor.h"
#include "core/kernels/ops.h"
#include "core/kernels/ops_kernels.h"

using namespace vit::ops;

namespace {
std::vector<const kernels::Table*> runnable() {
    __builtin_cpu_init();
    std::vector<const kernels::Table*> v{&kernels::sse2};
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) v.push_back(&kernels::avx2);
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        v.push_back(&kernels::avx512);
    return v;
}
std::vector<float> randn(size_t n, unsigned seed, float scale = 3.f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
}
}  // namespace

TEST(OpsKernels, BestIsTheWidestThisCpuRuns) {
    EXPECT_STREQ(kernels::best().name, runnable().back()->name);
}

TEST(OpsKernels, GeluAddSoftmaxLayerNormMatchDoubleArithmetic) {
    const int R = 7, C = 203;  // 203 = 12*16 + 11: every width has a tail
    auto x = randn(size_t(R) * C, 1), y = randn(size_t(R) * C, 2), g = randn(C, 3, 1.f), b = randn(C, 4, 1.f);
    for (const kernels::Table* k : runnable()) {
        SCOPED_TRACE(k->name);
        std::vector<float> out(x.size()), norm(x.size()), mean(R), sd(R);
        k->gelu(out.data(), x.data(), 5, x.size());  // an unaligned start
        for (size_t i = 5; i < x.size(); ++i)
            ASSERT_NEAR(out[i], 0.5 * x[i] * (1 + std::erf(x[i] / std::sqrt(2.0))), 2e-6 * (1 + std::fabs(x[i])));
        k->add(out.data(), x.data(), y.data(), 0, x.size());
        for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i], x[i] + y[i]);
        k->softmax_rows(out.data(), x.data(), 0, R, C);
        for (int r = 0; r < R; ++r) {
            double m = -1e30, s = 0;
            for (int i = 0; i < C; ++i) m = std::max(m, double(x[r * C + i]));
            for (int i = 0; i < C; ++i) s += std::exp(x[r * C + i] - m);
            for (int i = 0; i < C; ++i) ASSERT_NEAR(out[r * C + i], std::exp(x[r * C + i] - m) / s, 1e-6);
        }
        for (bool unbiased : {false, true}) {
            k->layernorm_rows(out.data(), norm.data(), mean.data(), sd.data(), x.data(), g.data(), b.data(), 0, R, C,
                              1e-6f, unbiased, false);
            for (int r = 0; r < R; ++r) {
                double m = 0, v = 0;
                for (int i = 0; i < C; ++i) m += x[r * C + i];
                m /= C;
                for (int i = 0; i < C; ++i) v += (x[r * C + i] - m) * (x[r * C + i] - m);
                v /= unbiased ? C - 1 : C;
                ASSERT_NEAR(mean[r], m, 1e-5);
                ASSERT_NEAR(sd[r], std::sqrt(v), 1e-5);
                for (int i = 0; i < C; ++i) {
                    double n = (x[r * C + i] - m) / std::sqrt(v + 1e-6);
                    ASSERT_NEAR(norm[r * C + i], n, 1e-5);
                    ASSERT_NEAR(out[r * C + i], n * g[i] + b[i], 1e-4);
                }
            }
        }
    }
}

// GELU's result for a value does not depend on where it lies in the range (vector body or tail):
// the fused fc1 epilogue (ops::gelu_rows on a thread's column slice) and the pass over the whole
// array (ops::gelu) must give the same bits (tests/test_scale.cpp compares the two passes).
TEST(OpsKernels, GeluOfAValueDoesNotDependOnItsPlace) {
    const size_t n = 203;
    auto x = randn(n, 8);
    for (const kernels::Table* k : runnable()) {
        SCOPED_TRACE(k->name);
        std::vector<float> whole(n), one(n);
        k->gelu(whole.data(), x.data(), 0, n);
        for (size_t i = 0; i < n; ++i) k->gelu(one.data(), x.data(), i, i + 1);  // every value as a tail
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(whole[i], one[i]) << i;
    }
}

TEST(OpsKernels, ResultsDoNotDependOnTheThreadCount) {
    // The busy-machine fallback runs a region on one thread: bitwise the same.
    const int R = 197, I = 192, O = 768;
    auto in = randn(size_t(R) * I, 5, 1.f), W = randn(size_t(O) * I, 6, 0.1f), bias = randn(O, 7, 0.1f);
    std::vector<float> a(size_t(R) * O), b(a.size());
    const int before = threads();
    set_threads(2);
    linear(a.data(), in.data(), W.data(), bias.data(), R, I, O);
    gelu(a.data(), a.data(), a.size());
    set_threads(2);
    // Same parts, computed by the calling thread alone (what the fallback does).
    #pragma omp parallel num_threads(1)
    {
        linear(b.data(), in.data(), W.data(), bias.data(), R, I, O);
        gelu(b.data(), b.data(), b.size());
    }
    set_threads(before);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << i;
}

// The thread count is the calling thread's own (a job sets it for itself with a Budget): another
// thread's setting changes nothing here, and a Budget's count goes back when it ends.
TEST(OpsThreads, EachThreadHasItsOwnCount) {
    const int before = threads();
    const int fresh = std::async(std::launch::async, [] { return threads(); }).get();  // a thread that set nothing
    set_threads(fresh + 2);
    std::promise<void> inside, release;
    auto released = release.get_future().share();
    auto other = std::async(std::launch::async, [&] {
        std::vector<int> seen{threads()};  // not this thread's count: the default
        {
            Budget b(fresh + 5);
            seen.push_back(threads());
            inside.set_value();
            released.wait();  // the main thread checks its own count while this budget holds
            seen.push_back(threads());
        }
        seen.push_back(threads());
        return seen;
    });
    inside.get_future().wait();
    EXPECT_EQ(threads(), fresh + 2) << "another thread's Budget changed this thread's count";
    release.set_value();
    const std::vector<int> seen = other.get();
    EXPECT_EQ(seen, (std::vector<int>{fresh, fresh + 5, fresh + 5, fresh}));
    EXPECT_EQ(threads(), fresh + 2);
    set_threads(before);
}

// A Budget's cancel flag makes the kernels of its thread throw Cancelled (never inside a parallel
// region), and only on its thread; the budget ended, the kernels run again.
TEST(OpsThreads, CancelFlagStopsThisThreadsKernels) {
    const int R = 8, I = 16, O = 8;
    auto in = randn(size_t(R) * I, 1, 1.f), W = randn(size_t(O) * I, 2, 1.f);
    std::vector<float> out(size_t(R) * O);
    std::atomic<bool> flag{false};
    {
        Budget b(2, &flag);
        EXPECT_NO_THROW(linear(out.data(), in.data(), W.data(), nullptr, R, I, O));
        flag = true;
        EXPECT_THROW(linear(out.data(), in.data(), W.data(), nullptr, R, I, O), Cancelled);
        EXPECT_THROW(gelu(out.data(), out.data(), out.size()), Cancelled);
        EXPECT_THROW(softmax_rows(out.data(), out.data(), R, O), Cancelled);
        bool threw = false;
#pragma omp parallel num_threads(1)
        {
            try {
                linear(out.data(), in.data(), W.data(), nullptr, R, I, O);
            } catch (const Cancelled&) {
                threw = true;
            }
        }
        EXPECT_FALSE(threw) << "a kernel threw inside a parallel region";
        // another thread, without a budget, is not cancelled by this one's flag
        auto other = std::async(std::launch::async, [&] {
            std::vector<float> o2(out.size());
            linear(o2.data(), in.data(), W.data(), nullptr, R, I, O);
            return true;
        });
        EXPECT_TRUE(other.get());
    }
    EXPECT_NO_THROW(linear(out.data(), in.data(), W.data(), nullptr, R, I, O));
}

// Streaming copies (past the caches) write exactly the source, whatever the alignment of either end
// and the length (aligned whole vectors streamed, the ends stored plainly).
TEST(OpsKernels, CopyStreamWritesTheSource) {
    auto src = randn(1000, 9);
    for (const kernels::Table* k : runnable()) {
        SCOPED_TRACE(k->name);
        for (size_t off : {0, 1, 5, 16, 17})
            for (size_t n : {0, 1, 7, 16, 33, 197, 900}) {
                std::vector<float> dst(1000 + 32, -1.f);
                k->copy_stream(dst.data() + off, src.data() + 3, n);
                stream_fence();
                for (size_t i = 0; i < dst.size(); ++i)
                    ASSERT_EQ(dst[i], i >= off && i < off + n ? src[3 + i - off] : -1.f) << "off " << off << " n " << n << " i " << i;
            }
    }
}

// LayerNorm with `normalized` streamed past the caches gives the same bits as with plain stores, and
// the residual add fused into it (ops::add_layernorm) the same as the add, then the LayerNorm.
TEST(OpsKernels, StreamedAndFusedLayerNormGiveTheSameBits) {
    const int R = 113, C = 203;  // R * C over the size that splits LayerNorm across threads
    auto a = randn(size_t(R) * C, 10), c = randn(size_t(R) * C, 11), g = randn(C, 12, 1.f), b = randn(C, 13, 1.f);
    for (const kernels::Table* k : runnable()) {
        SCOPED_TRACE(k->name);
        std::vector<float> x(a.size()), out0(a.size()), norm0(a.size()), mean0(R), sd0(R);
        k->add(x.data(), a.data(), c.data(), 0, x.size());
        k->layernorm_rows(out0.data(), norm0.data(), mean0.data(), sd0.data(), x.data(), g.data(), b.data(), 0, R, C,
                          1e-6f, false, false);
        std::vector<float> out1(a.size()), norm1(a.size()), mean1(R), sd1(R);
        k->layernorm_rows(out1.data(), norm1.data(), mean1.data(), sd1.data(), x.data(), g.data(), b.data(), 0, R, C,
                          1e-6f, false, true);
        stream_fence();
        EXPECT_EQ(out0, out1);
        EXPECT_EQ(norm0, norm1);
        EXPECT_EQ(mean0, mean1);
        EXPECT_EQ(sd0, sd1);
    }
    for (int nt : {1, 2}) {
        SCOPED_TRACE(std::to_string(nt) + " threads");
        const int before = threads();
        set_threads(nt);
        std::vector<float> x(a.size()), out0(a.size()), norm0(a.size()), mean0(R), sd0(R);
        add(x.data(), a.data(), c.data(), x.size());
        layernorm(out0.data(), norm0.data(), mean0.data(), sd0.data(), x.data(), g.data(), b.data(), R, C, 1e-6f, true);
        std::vector<float> sum(a.size()), out1(a.size()), norm1(a.size()), mean1(R), sd1(R);
        add_layernorm(sum.data(), out1.data(), norm1.data(), mean1.data(), sd1.data(), a.data(), c.data(), g.data(),
                      b.data(), R, C, 1e-6f, true, true);
        set_threads(before);
        EXPECT_EQ(x, sum);
        EXPECT_EQ(out0, out1);
        EXPECT_EQ(norm0, norm1);
        EXPECT_EQ(mean0, mean1);
        EXPECT_EQ(sd0, sd1);
    }
}

// The busy-core rule on the patterns of regions measured on the 2-core Xeon (docs/kernels.md, "Busy
// cores"): ViT-Ti-sized regions (0.10 ms on two threads, 0.18 ms of work on one). A load's pattern
// runs through the rule as the kernels run it: on one thread a region costs its work and is not
// reported; on two it costs its wall time and is reported.
namespace {
struct Region { double wall, single; };
struct Replay {
    BusyGovernor g;
    double t = 0, on_one = 0;  // s: the clock, and the time spent on one thread
    // `load(t)`: the region at time t on two threads
    template <class Load>
    void run(double until, Load&& load) {
        while (t < until) {
            g.probe(t);
            const Region r = load(t);
            if (g.one()) { t += r.single; on_one += r.single; continue; }
            t += r.wall;
            g.report(t, r.wall, r.single, r.wall - r.single / 2 > BusyGovernor::kStall);
        }
    }
};
constexpr Region kIdle{0.10e-3, 0.18e-3};
}  // namespace

TEST(OpsThreads, BusyRuleRidesOutABurstOfStallsFromANiceProcess) {
    // `nice -n 19 yes`: a ~4 ms stall every quarter second, and a burst of a third of a second in
    // which every ~7 ms one region waits ~6.5 ms for the other thread (measured at a process's start
    // and after a thread slept). Over the burst two threads and one cost about the same; falling back
    // for half a second or more at each one made ViT-Ti 1.4-1.8x slower than riding it out.
    Replay r;
    double next_stall = 0.25;
    r.run(5.0, [&](double t) {
        const bool burst = t > 1.0 && t < 1.33;
        if (t >= next_stall) {
            next_stall = t + (burst ? 7e-3 : 0.25);
            return Region{burst ? 6.5e-3 : 4e-3, kIdle.single};
        }
        return kIdle;
    });
    EXPECT_EQ(r.g.fallbacks(), 0) << "fell back at a burst; on one thread for " << r.on_one << " s";
    EXPECT_GT(r.g.stalls(), 40);
}

TEST(OpsThreads, BusyRuleFallsBackWhileAnEqualProcessRuns) {
    // `nice -n 0 yes` from t = 1 s on: every region waits for a thread that shares its core (4x the
    // idle wall time; two threads ~2.2x slower than one). The rule falls back within ~2 s and keeps
    // to one thread for most of the time after (its probes back off).
    Replay r;
    r.run(12.0, [&](double t) { return t < 1.0 ? kIdle : Region{4 * kIdle.wall, kIdle.single}; });
    EXPECT_GE(r.g.fallbacks(), 1);
    EXPECT_GT(r.on_one, 0.75 * (12.0 - 1.0)) << "on one thread for " << r.on_one << " s of the 11 s under load";
    // idle again: back on all threads after the pause, and it stays there
    const long n = r.g.fallbacks();
    r.run(30.0, [&](double) { return kIdle; });
    EXPECT_FALSE(r.g.one());
    EXPECT_EQ(r.g.fallbacks(), n);
}

TEST(OpsThreads, BusyRuleNeverFallsBackOnAnIdleMachine) {
    Replay r;
    r.run(5.0, [&](double) { return kIdle; });
    EXPECT_EQ(r.g.fallbacks(), 0);
    EXPECT_EQ(r.g.stalls(), 0);
}
