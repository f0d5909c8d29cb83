// The products and elementwise kernels the parts share. GEMMs go to oneDNN or the own packed kernel
// on the containers' storage (ops::gemm / ops::linear); elementwise stages are xtensor expressions
// (vectorized with xsimd) or vector kernels over the storage (ops::gelu, ops::layernorm,
// ops::softmax_rows), whose figures are in docs/kernels.md.
#include <algorithm>
#include <cmath>
#include <string>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xview.hpp>

#include "core/kernels/ops.h"
#include "core/kernels/profile.h"
#include "core/model/pass.h"

namespace vit {

// F.linear(in, W, b) through BLAS, reported to the profile as a GEMM of its shape. With P (a block
// matrix held packed only, pack_blocks), W is empty and the packed matrix is used.
void linear(const char* what, float* out, const float* in, const Tensor2& W, const Tensor1& b, size_t R,
            const gemm::Packs* packs, const std::shared_ptr<const gemm::Matrix>& P) {
    const size_t O = P ? size_t(gemm::rows(*P)) : W.shape(0), I = P ? size_t(gemm::cols(*P)) : W.shape(1);
    profile::Scope s([&] { return "gemm " + std::string(what) + " " + std::to_string(R) + "x" + std::to_string(I) +
                                  " @ " + std::to_string(I) + "x" + std::to_string(O); },
                     2.0 * double(R) * double(I) * double(O));
    if (P) ops::linear_packed(out, in, *P, b.data(), int(R));
    else ops::linear(out, in, W.data(), b.data(), int(R), int(I), int(O), packs);
}

// out = a + b over (R, D), the xtensor expression run on blocks of rows across the threads.
// torch: x + sublayer(x)
void residual_add(float* out, const float* a, const float* b, size_t R, size_t D) {
    profile::Scope prof([] { return std::string("residual adds"); }, 0);
    const int blocks = int(std::min<size_t>(R, 8));
    ops::for_range(blocks, R * D > 50000, [&](int i) {
        const size_t r0 = R * size_t(i) / size_t(blocks), r1 = R * size_t(i + 1) / size_t(blocks);
        const std::array<size_t, 2> shape{r1 - r0, D};
        xt::noalias(as(out + r0 * D, (r1 - r0) * D, shape)) =
            as(a + r0 * D, (r1 - r0) * D, shape) + as(b + r0 * D, (r1 - r0) * D, shape);
    });
}

// out = 0.5 x (1 + erf(x / sqrt 2)) by the vector kernel (ops::gelu, split across the threads, with
// the busy-core fallback), whose result per value is the one the fused fc1 epilogue gives (linear_act).
// torch: F.gelu(x)  (the exact form, not the tanh approximation)
static void gelu(float* out, const float* in, size_t n) {
    profile::Scope prof([] { return std::string("gelu"); }, 0);
    ops::gelu(out, in, n);
}

// The MLP's nonlinearity on n values (SwiGLU: R rows of 2M in, R rows of M out), split across the threads.
// torch: F.gelu(x) | x * torch.sigmoid(1.702 * x) | F.gelu(x, approximate='tanh') | F.silu(x1) * x2
void activation(Act act, float* out, const float* in, size_t R, size_t M) {
    if (act == Act::Gelu) return gelu(out, in, R * M);
    profile::Scope prof([] { return std::string("activation"); }, 0);
    const size_t parts = size_t(std::max(1, ops::threads()));
    ops::for_range(int(parts), R * M > 50000, [&](int t) {
        const size_t r0 = R * size_t(t) / parts, r1 = R * size_t(t + 1) / parts, n = (r1 - r0) * M;
        if (!n) return;
        auto y = as(out + r0 * M, n, std::array<size_t, 1>{n});
        if (act == Act::SwiGlu) {  // pre rows are [x1 | x2], M each
            auto pre = as(in + r0 * 2 * M, 2 * n, std::array<size_t, 2>{r1 - r0, 2 * M});
            auto x1 = xt::view(pre, xt::all(), xt::range(0, M));
            auto x2 = xt::view(pre, xt::all(), xt::range(M, 2 * M));
            xt::noalias(as(out + r0 * M, n, std::array<size_t, 2>{r1 - r0, M})) = x1 / (1.f + xt::exp(-x1)) * x2;
            return;
        }
        auto x = as(in + r0 * M, n, std::array<size_t, 1>{n});
        if (act == Act::QuickGelu) xt::noalias(y) = x / (1.f + xt::exp(-1.702f * x));
        else xt::noalias(y) = 0.5f * x * (1.f + xt::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    });
}

// F.linear(in, P, b) with the matrix held packed and an epilogue on each thread's column slice
// (ops::linear_packed's `then`), reported to the profile as the GEMM "+ plus".
profile::Scope gemm_then_scope(const char* what, const char* plus, const gemm::Matrix& P, size_t R) {
    const size_t O = size_t(gemm::rows(P)), I = size_t(gemm::cols(P));
    return profile::Scope([=] { return "gemm " + std::string(what) + " + " + plus + " " + std::to_string(R) + "x" +
                                       std::to_string(I) + " @ " + std::to_string(I) + "x" + std::to_string(O); },
                          2.0 * double(R) * double(I) * double(O));
}

void linear_then(const char* what, const char* plus, float* out, const float* in, const gemm::Matrix& P,
                 const Tensor1& b, size_t R, const std::function<void(const float*, size_t, int, int)>& then,
                 gemm::Out out_mode) {
    const profile::Scope s = gemm_then_scope(what, plus, P, R);
    ops::linear_packed(out, in, P, b.data(), int(R), then, out_mode);
}

// pre = F.linear(in, W, b) and post = act(pre) (M columns). With the matrix held packed and GELU,
// the own kernel computes GELU from its registers as it stores pre (ops::linear_packed_gelu); other
// kernels have each thread apply it to its column slice of pre right after computing it, while the
// slice is in cache. Either way the same bits as the separate pass (the vector arithmetic of
// gelu_of.h: ops::gelu, ops::gelu_rows and the kernel's agree value by value).
void linear_act(const char* what, Act act, float* pre, float* post, const float* in, const Tensor2& W,
                const Tensor1& b, size_t R, size_t M, const gemm::Packs* packs,
                const std::shared_ptr<const gemm::Matrix>& P, bool stream) {
    if (!P || act != Act::Gelu) {
        linear(what, pre, in, W, b, R, packs, P);
        return activation(act, post, pre, R, M);
    }
    if (gemm::fusable(*P)) {
        const profile::Scope s = gemm_then_scope(what, "gelu", *P, R);
        if (ops::linear_packed_gelu(pre, post, M, in, *P, b.data(), int(R), stream)) return;
    }
    linear_then(what, "gelu", pre, in, *P, b, R, [&](const float* y, size_t ld, int c0, int c1) {
        ops::gelu_rows(post + c0, M, y, ld, int(R), c1 - c0);
    }, stream ? gemm::Out::Streamed : gemm::Out::Cached);  // pre is not read again (GELU reads the thread's block)
}

}  // namespace vit
