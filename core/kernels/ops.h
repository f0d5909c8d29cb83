// Raw-pointer kernels shared by the traced forward pass and the trainer.
// Layout is row-major throughout; outputs come first, then inputs, then sizes
// (llm.c style). Each names the PyTorch line it equals.
#pragma once
#include <atomic>
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>

#include "core/kernels/gemm.h"  // gemm::Out (small: no oneDNN, no xtensor)

namespace vit::ops {

// Threads used by the kernels the calling thread runs (OpenMP; BLAS itself runs
// single-threaded). The count is the calling thread's own: a thread that never set
// one uses the process default (OMP_NUM_THREADS, else the cores), and setting it on
// one thread changes nothing for the others, so each job of the app sets its own
// (see Budget). While other processes hold the cores, a calling thread's regions
// fall back to one thread for a while (see ops.cpp); threads() is still the count
// asked for.
int threads();
void set_threads(int n);
// "2 threads" or "2 threads, 14 stalled regions; one thread was faster 3 times"
// (the calling thread's record).
std::string threading();

// Thrown by a kernel called on a thread whose cancel flag (Budget) is set: the
// kernels are the cancellation points of a long computation (a forward pass, an
// average over images), which unwinds to the job that runs it.
struct Cancelled : std::runtime_error {
    Cancelled() : std::runtime_error("cancelled") {}
};

// A job's budget on the thread that runs it, for the budget's lifetime: the threads
// its kernels use and the flag that cancels them. The previous count and flag come
// back when it ends. Kernels check the flag only outside parallel regions.
class Budget {
public:
    explicit Budget(int threads, const std::atomic<bool>* cancel = nullptr);
    ~Budget();
    Budget(const Budget&) = delete;
    Budget& operator=(const Budget&) = delete;

private:
    int threads_;
    const std::atomic<bool>* cancel_;
};
// Throws Cancelled when the calling thread's budget was cancelled (and it is not
// inside a parallel region); kernels call it, long loops outside the kernels may too.
void cancellation_point();

// Runs body(i) for i in [0, n), the range split evenly across the threads asked
// for (one thread when not `worth` or already inside a parallel region); on a busy
// machine the busy-core fallback runs every part on one thread.
void for_range(int n, bool worth, const std::function<void(int)>& body);

// The matrix-product engine: oneDNN (core/gemm.h), or OpenBLAS when
// VITSCOPE_GEMM=openblas is set (to compare the two in one binary).
bool use_openblas();
// "oneDNN 2.6.3, AVX-512 kernels (...), weights packed once" (then, where an own kernel runs the
// packed products, "; the packed products on ViTScope's own AVX-512 kernel", or "own AVX2 kernel")
// or the OpenBLAS line.
std::string gemm_engine();
// The same in a few words, for a status bar: "oneDNN 2.6.3 AVX-512 BF16" (+ " + own AVX-512" or " + own AVX2") or "OpenBLAS SkylakeX".
std::string gemm_engine_short();
// False only when the products run on OpenBLAS with a kernel below the CPU's instruction set.
bool gemm_engine_best();

// C(MxN) = alpha * op(A) op(B) + beta * C, op = transpose when the flag is set.
void gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc);

// out(R,O) = in(R,I) @ W(O,I).T + b(O)            F.linear(in, W, b)
// With packs (the Weights' own, see gemm.h), W is packed once for the kernel and
// reused; without, each call hands W to the GEMM as it is.
void linear(float* out, const float* in, const float* W, const float* b, int R, int I, int O,
            const gemm::Packs* packs = nullptr);

// The same with W held packed only (gemm::Matrix): its column slices split across the threads.
// `then`, if given, runs on the thread that computed each column slice [c0, c1), right after it,
// with the slice's values where they are warmest in cache: row r at y + r * ld (an epilogue
// fused into the product, such as the MLP's activation).
// `out_mode` says how the slices reach out (gemm::Out): Skipped only with `then`, and then out's
// columns hold the product only where the kernel computed a slice in place.
void linear_packed(float* out, const float* in, const gemm::Matrix& W, const float* b, int R,
                   const std::function<void(const float* y, size_t ld, int c0, int c1)>& then = nullptr,
                   gemm::Out out_mode = gemm::Out::Cached);
// The two products whose epilogue the own kernel fuses into its stores (gemm::run_gelu, run_heads),
// their column slices split across the threads as above. False (nothing done) where W's slices do
// not allow it (gemm::fusable): the caller runs linear_packed with `then`.
// pre = in @ W.T + b, post (row r at post + r * ldp) = GELU(pre); pre past the caches with `stream`.
bool linear_packed_gelu(float* pre, float* post, size_t ldp, const float* in, const gemm::Matrix& W, const float* b,
                        int R, bool stream);
// qkv = in @ W.T + b stored into q, k, v (heads[0..2], (H, R, head_cols) each: one image's rows).
bool linear_packed_heads(float* const* heads, int head_cols, const float* in, const gemm::Matrix& W, const float* b,
                         int R);

// LayerNorm over the last axis of x(R,D). mean(R), std(R) = sqrt(var) (without eps,
// as torch.std prints it), norm(R,D) = (x-mean)/sqrt(var+eps), out = norm*g + b.
// g/b null: elementwise_affine=False. unbiased: var divides by D-1.
// Any of mean/std/norm may be null.
// stream_norm: norm written past the caches (a recorded stage that the pass does not read again).
void layernorm(float* out, float* norm, float* mean, float* std, const float* x, const float* g,
               const float* b, int R, int D, float eps, bool unbiased, bool stream_norm = false);
// sum = a + c elementwise (R, D), then LayerNorm of sum as above, each row while it is in cache: one
// pass for a residual add and the LayerNorm that reads it (the same bits as add, then layernorm).
void add_layernorm(float* sum, float* out, float* norm, float* mean, float* std, const float* a, const float* c,
                   const float* g, const float* b, int R, int D, float eps, bool unbiased, bool stream_norm = false);

// out = 0.5 x (1 + erf(x / sqrt 2))                  F.gelu(x)  (exact, not tanh)
// Each value's result does not depend on n or on where it lies (gelu_rows gives the same bits).
void gelu(float* out, const float* x, size_t n);
// The same on R rows of n values (row r at x + r * ldx, out + r * ldo), on the calling thread.
void gelu_rows(float* out, size_t ldo, const float* x, size_t ldx, int R, int n);

// Row-wise softmax of x(R,C).                        x.softmax(-1)
void softmax_rows(float* out, const float* x, int R, int C);

// out = a + b elementwise.
void add(float* out, const float* a, const float* b, size_t n);

// dst = src (n floats) on the calling thread, written past the caches (streaming stores): for a
// recorded stage that the pass does not read again, so that writing it neither reads the
// destination's lines first nor pushes the pass's working data out of the caches. Such stores are
// weakly ordered: the thread calls stream_fence() after its last one, before its region ends.
void copy_stream(float* dst, const float* src, size_t n);
void stream_fence();

}  // namespace vit::ops
