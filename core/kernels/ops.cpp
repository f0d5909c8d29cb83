#include "core/kernels/ops.h"

#include "core/kernels/attention_avx512.h"
#include "core/kernels/blas.h"
#include "core/kernels/gemm.h"
#include "core/kernels/governor.h"
#include "core/kernels/ops_kernels.h"

#include <cblas.h>

#include <algorithm>
#include <utility>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <omp.h>
#include <immintrin.h>


extern "C" void openblas_set_num_threads(int);

namespace vit::ops {


// ---------------------------------------------------------------- threads on a busy machine
// Every parallel region ends at a barrier that waits for all of its threads. When
// another process wants a core (a browser, a compiler, even `nice -n 19 yes`),
// the scheduler can hold one of our threads off its core for a slice
// (milliseconds) while the other waits -- and a forward pass has hundreds of
// regions: on a loaded machine a ViT-Ti/16 pass became ~10x slower than on one
// thread (docs/kernels.md). So each region measures itself: the fastest thread's
// time per part tells what the region would have cost on one thread (parts x
// that), the wall time what it cost on all of them. Both are summed over the last
// second (exponentially decaying sums, started afresh after the warm-up and after
// each probe, judged once they hold kJudge of regions). When the regions' wall
// time is clearly over what one thread would have taken (by kLoss, and by
// kEvidence in all), the calling thread runs its regions on one thread for a while
// (OpenMP's thread count of that thread goes to 1, so the caller's own regions
// follow), then tries all threads again; the pause starts at half a second,
// doubles while parallel keeps losing (up to 8 s) and is forgotten after a quiet
// spell. A `nice -n 19` process takes its share in slices of ~4-7 ms, and now and
// then (after a thread of ours slept, at a process's start) in bursts of a few
// tenths of a second with a stall every few milliseconds: those are ridden out
// (the rule before, a quarter-second sum judged at once, fell back at such bursts
// and left ViT-Ti 1.4-1.8x slower than riding them out, docs/kernels.md). With a
// competing process at the same priority (`nice -n 0 yes`, parallel 2-4x slower
// than one thread for as long as it runs) falling back is what wins. On an idle
// machine parallel always gains and nothing changes. Per calling thread (OpenMP's
// thread count is per thread too).
namespace {
using Clock = std::chrono::steady_clock;
constexpr double kStall = BusyGovernor::kStall;
thread_local int t_requested = 0;       // set_threads() on this thread; 0: OpenMP's default (g_default)
thread_local const std::atomic<bool>* t_cancel = nullptr;  // this thread's job's cancel flag (Budget)
int g_default = 1;                      // omp_get_max_threads() at start (OMP_NUM_THREADS or the cores)
bool g_fallback = true;                 // VITSCOPE_THREAD_FALLBACK=0 turns it off (to measure without it)
thread_local BusyGovernor t_gov;

int requested() { return t_requested > 0 ? t_requested : g_default; }
double seconds(Clock::time_point t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); }

// Threads for a region started now by this thread.
int team() {
    if (omp_in_parallel()) return 1;
    if (t_gov.probe(seconds(Clock::now()))) omp_set_num_threads(requested());  // all threads again
    return t_gov.one() ? 1 : omp_get_max_threads();
}

// wall: the region's time on its threads; single: what it would have taken on one.
void report(double wall, double single, bool stall) {
    if (g_fallback && t_gov.report(seconds(Clock::now()), wall, single, stall)) omp_set_num_threads(1);
}

// Splits the work in `parts` = the threads asked for (1 when not `worth`, the
// work being too small to split, or when called inside a parallel region, as the
// trainer's data-parallel loop does), runs body(part, parts) for each, on team()
// threads, and reports stalls. The parts do not depend on how many threads run
// them: results are bitwise the same whether a region ran on all threads or fell
// back to one.
template <class F>
void parallel_parts(int parts, F&& body) {
    cancellation_point();
    const int nt = parts > 1 ? std::min(team(), parts) : 1;
    if (nt <= 1) {
        for (int p = 0; p < parts; ++p) body(p, parts);
        return;
    }
    constexpr int kMax = 256;
    double work[kMax] = {}, per_part[kMax] = {};
    int ran = 0;
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(std::min(nt, kMax))
    {
        const auto s = Clock::now();
        const int t = omp_get_thread_num(), n = omp_get_num_threads();
        for (int p = parts * t / n; p < parts * (t + 1) / n; ++p) body(p, parts);
        work[t] = std::chrono::duration<double>(Clock::now() - s).count();
        const int mine = parts * (t + 1) / n - parts * t / n;
        per_part[t] = mine > 0 ? work[t] / mine : 1e30;
        if (t == 0) ran = n;
    }
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    ran = std::max(1, std::min(ran, kMax));
    const double slowest = *std::max_element(work, work + ran);
    // a thread started or finished late: more than kStall of waiting on top of the work
    const bool stall = wall - slowest > kStall && wall > 1.5 * slowest;
    report(wall, parts * std::min(wall, *std::min_element(per_part, per_part + ran)), stall);
}

template <class F>
void parallel(bool worth, F&& body) {
    parallel_parts((worth && !omp_in_parallel()) ? requested() : 1, std::forward<F>(body));
}

// [begin, end) of thread t of n over `count` items (contiguous, as schedule(static)).
inline int64_t split(int64_t count, int t, int n) { return count * t / n; }
}  // namespace

// One thread pool at a time: OpenMP splits rows and heads across the cores and
// every BLAS call runs single-threaded inside it. (OpenBLAS's own threads plus
// OpenMP's would oversubscribe; OpenBLAS's hand-offs alone cost ~20% on
// ViT-Ti-sized matrices.)
namespace {
struct PoolInit {
    PoolInit() {
        blas::init();  // also for binaries whose main() does not call it (tests, tools)
        openblas_set_num_threads(1);
        g_default = std::max(1, omp_get_max_threads());
        const char* f = std::getenv("VITSCOPE_THREAD_FALLBACK");
        g_fallback = !(f && std::strcmp(f, "0") == 0);
    }
} pool_init;
}  // namespace

int threads() { return requested(); }
void set_threads(int n) {
    t_requested = n > 0 ? n : 1;
    if (!t_gov.one()) omp_set_num_threads(t_requested);
}

Budget::Budget(int threads, const std::atomic<bool>* cancel) : threads_(t_requested), cancel_(t_cancel) {
    set_threads(threads);
    t_cancel = cancel;
}

Budget::~Budget() {
    t_cancel = cancel_;
    t_requested = threads_;
    if (!t_gov.one()) omp_set_num_threads(requested());
}

void cancellation_point() {
    // omp_get_level counts inactive regions too: never throw out of any parallel region
    if (t_cancel && t_cancel->load(std::memory_order_relaxed) && omp_get_level() == 0) throw Cancelled();
}

std::string threading() {
    const BusyGovernor& g = t_gov;
    std::string s = std::to_string(requested()) + (requested() == 1 ? " thread" : " threads");
    if (g.fallbacks())
        s += ", " + std::to_string(g.stalls()) + " stalled regions; one thread was faster " +
             std::to_string(g.fallbacks()) + (g.fallbacks() == 1 ? " time" : " times");
    if (g.one()) s += " (one thread now)";
    return s;
}

void gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc) {
    cancellation_point();
    if (!use_openblas()) return gemm::sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
                K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void for_range(int n, bool worth, const std::function<void(int)>& body) {
    parallel(worth && n > 1, [&](int t, int parts) {
        for (int i = int(split(n, t, parts)); i < int(split(n, t + 1, parts)); ++i) body(i);
    });
}

bool use_openblas() {
    static const bool v = [] {
        const char* e = std::getenv("VITSCOPE_GEMM");
        return e && std::strcmp(e, "openblas") == 0;
    }();
    return v;
}

std::string gemm_engine() {
    if (use_openblas()) return blas::describe() + " (VITSCOPE_GEMM=openblas)";
    return gemm::describe() + ", weights packed once" +
           (gemm::own_kernel() ? "; the packed products on ViTScope's own " + gemm::own_kernel_isa() + " kernel" : "");
}

std::string gemm_engine_short() {
    if (use_openblas()) return "OpenBLAS " + blas::info().kernel;
    return gemm::version() + " " + gemm::isa() + (gemm::own_kernel() ? " + own " + gemm::own_kernel_isa() : "");
}

bool gemm_engine_best() { return !use_openblas() || blas::info().best; }

void linear(float* out, const float* in, const float* Wt, const float* b, int R, int I, int O,
            const gemm::Packs* packs) {
    cancellation_point();
    const double size = double(R) * I * O;
    // Two threads pay from ~2e6 multiply-adds: below, the fork/join and two half-size oneDNN calls cost
    // more than they save (docs/kernels.md).
    const bool worth = size >= 2e6;
    // Packing pays from about 1e6 multiply-adds on: below it (the Fashion-MNIST
    // model's 50x64 @ 64x192) a matmul primitive's call costs more than it saves.
    if (packs && !use_openblas() && size >= 1e6) {
        // Column slices of the packed weight, one per thread asked for (fixed: the
        // result does not depend on how many threads end up running them).
        const auto p = gemm::packed(*packs, Wt, b, R, I, O, (worth && !omp_in_parallel()) ? requested() : 1);
        parallel_parts(gemm::parts(*p), [&](int t, int) { gemm::run(*p, t, out, in); });
        return;
    }
    if (b) {
        for (int r = 0; r < R; ++r) std::memcpy(out + size_t(r) * O, b, sizeof(float) * O);
    }
    // Split the larger of rows and output columns across the threads.
    parallel(worth, [&](int t, int n) {
        if (n == 1) { gemm(false, true, R, O, I, 1.f, in, I, Wt, I, b ? 1.f : 0.f, out, O); return; }
        if (R >= 8 * n && R >= O / 4) {
            int r0 = int(int64_t(R) * t / n), r1 = int(int64_t(R) * (t + 1) / n);
            if (r1 > r0) gemm(false, true, r1 - r0, O, I, 1.f, in + size_t(r0) * I, I, Wt, I, b ? 1.f : 0.f,
                              out + size_t(r0) * O, O);
        } else {
            int c0 = int(int64_t(O) * t / n), c1 = int(int64_t(O) * (t + 1) / n);
            if (c1 > c0) gemm(false, true, R, c1 - c0, I, 1.f, in, I, Wt + size_t(c0) * I, I, b ? 1.f : 0.f,
                              out + c0, O);
        }
    });
}

namespace {
// slice(p) for each column slice p of W, a slice per thread; inside a parallel region (the
// trainer's data-parallel loop) the calling thread runs every slice.
template <class F>
void each_slice(const gemm::Matrix& W, F&& slice) {
    const int parts = gemm::parts(W);
    parallel_parts(omp_in_parallel() ? 1 : parts, [&](int t, int n) {
        if (n == 1) for (int p = 0; p < parts; ++p) slice(p);
        else slice(t);
    });
}
}  // namespace

void linear_packed(float* out, const float* in, const gemm::Matrix& W, const float* b, int R,
                   const std::function<void(const float* y, size_t ld, int c0, int c1)>& then, gemm::Out out_mode) {
    cancellation_point();
    if (!then && out_mode == gemm::Out::Skipped) throw std::logic_error("linear_packed: Skipped needs an epilogue");
    each_slice(W, [&](int p) {
        const gemm::Block y = gemm::run(W, p, out, in, b, R, out_mode);
        if (then) then(y.p, y.ld, gemm::first_column(W, p), gemm::end_column(W, p));
    });
}

bool linear_packed_gelu(float* pre, float* post, size_t ldp, const float* in, const gemm::Matrix& W, const float* b,
                        int R, bool stream) {
    if (!gemm::fusable(W)) return false;
    cancellation_point();
    each_slice(W, [&](int p) {
        gemm::run_gelu(W, p, pre, post, ldp, in, b, R, stream);
        if (stream) stream_fence();  // this thread's streaming stores, before the others read after the join
    });
    return true;
}

bool linear_packed_heads(float* const* heads, int head_cols, const float* in, const gemm::Matrix& W, const float* b,
                         int R) {
    if (!gemm::fusable(W, head_cols)) return false;
    cancellation_point();
    each_slice(W, [&](int p) { gemm::run_heads(W, p, heads, head_cols, in, b, R); });
    return true;
}

void layernorm(float* out, float* norm, float* mean, float* std, const float* x, const float* g,
               const float* b, int R, int D, float eps, bool unbiased, bool stream_norm) {
    const auto& k = kernels::best();
    parallel(int64_t(R) * D > 20000, [&](int t, int n) {
        k.layernorm_rows(out, norm, mean, std, x, g, b, int(split(R, t, n)), int(split(R, t + 1, n)), D, eps, unbiased,
                         stream_norm);
        if (stream_norm) stream_fence();
    });
}

void add_layernorm(float* sum, float* out, float* norm, float* mean, float* std, const float* a, const float* c,
                   const float* g, const float* b, int R, int D, float eps, bool unbiased, bool stream_norm) {
    const auto& k = kernels::best();
    parallel(int64_t(R) * D > 20000, [&](int t, int n) {
        const int r0 = int(split(R, t, n)), r1 = int(split(R, t + 1, n));
        // a few rows at a time: the sum is still in L1 when LayerNorm reads it
        for (int q0 = r0; q0 < r1; q0 += 4) {
            const int q1 = std::min(r1, q0 + 4);
            const size_t o = size_t(q0) * size_t(D);
            k.add(sum + o, a + o, c + o, 0, size_t(q1 - q0) * size_t(D));
            k.layernorm_rows(out, norm, mean, std, sum, g, b, q0, q1, D, eps, unbiased, stream_norm);
        }
        if (stream_norm) stream_fence();
    });
}

void gelu(float* out, const float* x, size_t n) {
    const auto& k = kernels::best();
    // Split on 64-float boundaries so that every thread's range is whole vectors.
    const int64_t blocks = int64_t((n + 63) / 64);
    parallel(n > 50000, [&](int t, int nt) {
        k.gelu(out, x, std::min(n, size_t(split(blocks, t, nt)) * 64), std::min(n, size_t(split(blocks, t + 1, nt)) * 64));
    });
}

void gelu_rows(float* out, size_t ldo, const float* x, size_t ldx, int R, int n) {
    const auto& k = kernels::best();
    for (int r = 0; r < R; ++r) k.gelu(out + size_t(r) * ldo, x + size_t(r) * ldx, 0, size_t(n));
}

void softmax_rows(float* out, const float* x, int R, int C) {
    const auto& k = kernels::best();
    parallel(int64_t(R) * C > 20000, [&](int t, int n) {
        k.softmax_rows(out, x, int(split(R, t, n)), int(split(R, t + 1, n)), C);
    });
}

void add(float* out, const float* a, const float* b, size_t n) {
    const auto& k = kernels::best();
    parallel(n > 100000, [&](int t, int nt) {
        k.add(out, a, b, size_t(split(int64_t(n), t, nt)), size_t(split(int64_t(n), t + 1, nt)));
    });
}

void copy_stream(float* dst, const float* src, size_t n) { kernels::best().copy_stream(dst, src, n); }
void stream_fence() { _mm_sfence(); }

namespace kernels {
// GCC's __builtin_cpu_supports checks that the OS saves the wide registers too.
const Table& best() {
    // VITSCOPE_KERNELS=avx2|sse2 picks a narrower one (to measure what a build
    // without dispatch would run); never a wider one than the CPU has.
    static const Table& t = [] () -> const Table& {
        const char* want = std::getenv("VITSCOPE_KERNELS");
        const std::string w = want ? want : "";
#if defined(__x86_64__)
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") && w != "avx2" && w != "sse2")
            return avx512;
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && w != "sse2") return avx2;
#endif
        return sse2;
    }();
    return t;
}
}  // namespace kernels

}  // namespace vit::ops

namespace vit::attn::avx512 {
bool available() {
    static const bool v = [] {
        const char* e = std::getenv("VITSCOPE_ATTENTION");
        return std::string(ops::kernels::best().name) == "avx512" && !(e && std::strcmp(e, "onednn") == 0);
    }();
    return v;
}
}  // namespace vit::attn::avx512
