#include "ops.h"

#include "blas.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <omp.h>

#include <xsimd/xsimd.hpp>

extern "C" void openblas_set_num_threads(int);

namespace vit::ops {

// One thread pool at a time: OpenMP splits rows and heads across the cores and
// every BLAS call runs single-threaded inside it. (OpenBLAS's own threads plus
// OpenMP's would oversubscribe; OpenBLAS's hand-offs alone cost ~20% on
// ViT-Ti-sized matrices.)
namespace {
struct PoolInit {
    PoolInit() {
        blas::init();  // also for binaries whose main() does not call it (tests, tools)
        openblas_set_num_threads(1);
    }
} pool_init;
}  // namespace

int threads() { return omp_get_max_threads(); }
void set_threads(int n) { omp_set_num_threads(n > 0 ? n : 1); }

using batch = xsimd::batch<float>;
constexpr size_t W = batch::size;

void gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
                K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void linear(float* out, const float* in, const float* Wt, const float* b, int R, int I, int O) {
    if (b) {
        for (int r = 0; r < R; ++r) std::memcpy(out + size_t(r) * O, b, sizeof(float) * O);
    }
    const int nt = (double(R) * I * O < 2e5) ? 1 : omp_get_max_threads();
    if (nt <= 1) { gemm(false, true, R, O, I, 1.f, in, I, Wt, I, b ? 1.f : 0.f, out, O); return; }
    // Split the larger of rows and output columns across the threads.
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), n = omp_get_num_threads();
        if (R >= 8 * n && R >= O / 4) {
            int r0 = int(int64_t(R) * t / n), r1 = int(int64_t(R) * (t + 1) / n);
            if (r1 > r0) gemm(false, true, r1 - r0, O, I, 1.f, in + size_t(r0) * I, I, Wt, I, b ? 1.f : 0.f,
                              out + size_t(r0) * O, O);
        } else {
            int c0 = int(int64_t(O) * t / n), c1 = int(int64_t(O) * (t + 1) / n);
            if (c1 > c0) gemm(false, true, R, c1 - c0, I, 1.f, in, I, Wt + size_t(c0) * I, I, b ? 1.f : 0.f,
                              out + c0, O);
        }
    }
}

void layernorm(float* out, float* norm, float* mean, float* std, const float* x, const float* g,
               const float* b, int R, int D, float eps, bool unbiased) {
#pragma omp parallel for schedule(static) if (R * D > 20000)
    for (int r = 0; r < R; ++r) {
        const float* xr = x + size_t(r) * D;
        // Two passes (mean, then squared deviations) in float: vectorizes, and
        // the parity tests show ~1e-7 relative error against PyTorch.
        float s = 0;
        for (int i = 0; i < D; ++i) s += xr[i];
        float m = s / float(D);
        float ss = 0;
        for (int i = 0; i < D; ++i) { float t = xr[i] - m; ss += t * t; }
        double var = double(ss) / (unbiased ? std::max(D - 1, 1) : D);
        float rstd = float(1.0 / std::sqrt(var + eps));
        if (mean) mean[r] = m;
        if (std) std[r] = float(std::sqrt(var));
        float* o = out + size_t(r) * D;
        float* nr = norm ? norm + size_t(r) * D : o;
        for (int i = 0; i < D; ++i) nr[i] = (xr[i] - m) * rstd;
        if (g) {
            for (int i = 0; i < D; ++i) o[i] = nr[i] * g[i] + (b ? b[i] : 0.f);
        } else if (nr != o) {
            std::memcpy(o, nr, sizeof(float) * D);
        }
    }
}

void gelu(float* out, const float* x, size_t n) {
    const batch half(0.5f), one(1.f), rs2(float(M_SQRT1_2));
    const int64_t nb = int64_t(n / W);
#pragma omp parallel for schedule(static) if (n > 50000)
    for (int64_t bi = 0; bi < nb; ++bi) {
        size_t i = size_t(bi) * W;
        batch v = batch::load_unaligned(x + i);
        batch r = half * v * (one + xsimd::erf(v * rs2));
        r.store_unaligned(out + i);
    }
    for (size_t i = size_t(nb) * W; i < n; ++i) out[i] = 0.5f * x[i] * (1.f + std::erf(x[i] * float(M_SQRT1_2)));
}

void softmax_rows(float* out, const float* x, int R, int C) {
#pragma omp parallel for schedule(static) if (int64_t(R) * C > 20000)
    for (int r = 0; r < R; ++r) {
        const float* xr = x + size_t(r) * C;
        float* o = out + size_t(r) * C;
        float m = xr[0];
        for (int i = 1; i < C; ++i) m = std::max(m, xr[i]);
        const batch bm(m);
        batch acc(0.f);
        int i = 0;
        for (; i + int(W) <= C; i += W) {
            batch e = xsimd::exp(batch::load_unaligned(xr + i) - bm);
            e.store_unaligned(o + i);
            acc += e;
        }
        float s = xsimd::hadd(acc);
        for (; i < C; ++i) { o[i] = std::exp(xr[i] - m); s += o[i]; }
        const batch inv(1.f / s);
        i = 0;
        for (; i + int(W) <= C; i += W) (batch::load_unaligned(o + i) * inv).store_unaligned(o + i);
        for (; i < C; ++i) o[i] *= 1.f / s;
    }
}

void add(float* out, const float* a, const float* b, size_t n) {
#pragma omp parallel for schedule(static) if (n > 100000)
    for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

}  // namespace vit::ops
