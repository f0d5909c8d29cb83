// The ViT forward pass, batched, recording every stage through the stage table.
// Each stage is computed straight into its array (the trace's own, when
// tracing), reads like its PyTorch line, and names that line in a comment.
// GEMMs go to oneDNN on the containers' storage (ops::gemm / ops::linear);
// elementwise stages are xtensor expressions (vectorized with xsimd). Three
// stages are vector kernels over the storage instead: LayerNorm (ops::layernorm)
// and the row softmax (ops::softmax_rows), whose reducer expressions are many
// times slower on the hot path (docs/kernels.md has the figures), and GELU
// (ops::gelu), which the fc1 product applies to each thread's slice while it is
// in cache (linear_act).
// tests/test_core_design.cpp checks both against the xtensor expressions they replace.
#include "core/model/forward.h"


#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <xtensor/xadapt.hpp>
#include <xtensor/xbroadcast.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xstrided_view.hpp>
#include <xtensor/xview.hpp>

#include "core/kernels/attention_avx512.h"
#include "core/kernels/ops.h"
#include "core/kernels/profile.h"
#include "core/model/pos_embed.h"

namespace vit {

namespace profile {
Profile*& active() {
    thread_local Profile* p = nullptr;
    return p;
}
}  // namespace profile

struct Workspace {
    Array qkv;                           // (B*T, 3D): the fused q/k/v projection
    std::vector<Tensor2> zcat;           // per block (B*T, D): heads concatenated
    std::map<int, Array> scratch;        // stages not kept, one array per kind
};
void WorkspaceDeleter::operator()(Workspace* w) const { delete w; }
WorkspacePtr make_workspace() { return WorkspacePtr(new Workspace); }
const Tensor2& workspace_zcat(const Workspace& ws, int l) { return ws.zcat.at(size_t(l)); }

namespace {

// The size of a full trace from which on recorded stages that a pass does not read again are written
// past the caches (Recorder::stream): 16 MB, well over a core's L2. The default model's trace (under
// 2 MB) stays in cache between passes, where plain stores cost less (docs/kernels.md); ViT-Ti's and
// ViT-B's do not.
constexpr double kStreamFloats = 4 << 20;

// A view of an array's storage with the shape the computation wants (no copy).
template <size_t N>
auto as(Array& a, const std::array<size_t, N>& shape) {
    return xt::adapt(a.data(), a.size(), xt::no_ownership(), shape);
}
template <size_t N>
auto as(const float* p, size_t n, const std::array<size_t, N>& shape) {
    return xt::adapt(const_cast<float*>(p), n, xt::no_ownership(), shape);
}

// Hands out each stage's array in the table's order: the trace's row (Keep::All)
// or, for training, a kept row (B, ...) or a reused scratch array. It checks that the
// computation records exactly the table's stages, in the table's order.
class Recorder {
public:
    Recorder(const StageTable& table, size_t B, Keep keep, Trace& t, Workspace& ws, const std::vector<char>* rows)
        : table_(table), B_(B), keep_(keep), t_(t), ws_(ws), rows_(rows) {}

    Array& operator()(StageKind kind) {
        Array& a = hand_out(kind);
        last_ = &a;
        last_by_kind_[size_t(kind)] = &a;
        return a;
    }
    // The array of the stage handed out last, and of the last stage of a kind (patch points).
    Array& last() const { return *last_; }
    Array& last_of(StageKind k) const { return *last_by_kind_[size_t(k)]; }

    Array& hand_out(StageKind kind) {
        if (i_ >= table_.size() || table_[i_].id.kind != kind)
            throw std::logic_error(std::string("forward pass and stage table disagree: the pass computes ") +
                                   stage_kind_name(kind) + " where the table lists " +
                                   (i_ < table_.size() ? table_[i_].name : std::string("nothing more")));
        const size_t row = i_++;
        const StageInfo& s = table_[row];
        if (keep_ == Keep::All && (!rows_ || (*rows_)[row])) return t_.record(row, s.shape);
        Shape shape = s.shape;
        if (keep_ != Keep::All) shape.insert(shape.begin(), B_);
        if (keep_ == Keep::ForBackward && s.kept) return t_.record(row, shape);
        Array& a = ws_.scratch[int(kind)];
        if (a.size() != shape_numel(shape) || a.dimension() != shape.size()) a = empty_array(shape);
        return a;
    }
    bool all() const { return keep_ == Keep::All; }  // every stage computed in full (recorded or not)
    // Recorded stages that the pass does not read again are written with streaming stores (past the
    // caches) when the trace is larger than caches hold anyway; a small model's trace stays in
    // cache from one pass to the next, where plain stores cost less.
    bool stream() const { return stream_; }
    void set_stream(bool s) { stream_ = s; }
    // Skips the rows before block `layer` (a pass that starts at a later block; layer == depth:
    // at the first stage after the blocks).
    void skip_to_block(int layer) {
        size_t r = i_;
        if (layer < table_.depth())
            while (r < table_.size() && table_[r].layer != layer) ++r;
        else  // after the blocks: the first row outside a block that follows one
            while (r < table_.size() && !(table_[r].layer < 0 && r > 0 && table_[r - 1].layer >= 0)) ++r;
        if (r == table_.size()) throw std::logic_error("Recorder::skip_to_block: no block " + std::to_string(layer));
        i_ = r;
    }
    const StageInfo& info(StageId id) const { return table_.info(id); }
    void done() const {
        if (i_ != table_.size())
            throw std::logic_error("forward pass recorded fewer stages than the table lists (next: " +
                                   table_[i_].name + ")");
    }

private:
    const StageTable& table_;
    Array* last_ = nullptr;
    std::array<Array*, kStageKinds> last_by_kind_{};
    size_t i_ = 0, B_;
    bool stream_ = false;
    Keep keep_;
    Trace& t_;
    Workspace& ws_;
    const std::vector<char>* rows_;
};

// F.linear(in, W, b) through BLAS, reported to the profile as a GEMM of its shape. With P (a block
// matrix held packed only, pack_blocks), W is empty and the packed matrix is used.
void linear(const char* what, float* out, const float* in, const Tensor2& W, const Tensor1& b, size_t R,
            const gemm::Packs* packs, const std::shared_ptr<const gemm::Matrix>& P = nullptr) {
    const size_t O = P ? size_t(gemm::rows(*P)) : W.shape(0), I = P ? size_t(gemm::cols(*P)) : W.shape(1);
    profile::Scope s([&] { return "gemm " + std::string(what) + " " + std::to_string(R) + "x" + std::to_string(I) +
                                  " @ " + std::to_string(I) + "x" + std::to_string(O); },
                     2.0 * double(R) * double(I) * double(O));
    if (P) ops::linear_packed(out, in, *P, b.data(), int(R));
    else ops::linear(out, in, W.data(), b.data(), int(R), int(I), int(O), packs);
}

// A residual add whose sum the next LayerNorm reads: out = a + b, computed by the LayerNorm's pass.
struct PendingAdd {
    float* out;
    const float* a;
    const float* b;
};

// LayerNorm with its internals recorded: mean (R), std (R), normalized (R, D), out (R, D).
// torch: F.layer_norm(x, (D,), weight, bias, eps) -- or, unbiased, var over D-1.
// With `add`, x is add->out and the residual add that makes it runs in the same pass, a few rows
// at a time (ops::add_layernorm: the same bits as the add, then the LayerNorm).
// A pass that streams (Recorder::stream) writes `normalized`, which it does not read again, past the caches.
const float* layernorm_stage(Recorder& rec, LnSite site, const float* x, const LayerNormW& w, size_t R, size_t D,
                             float eps, const Options& opt, const PendingAdd* add = nullptr) {
    float* mean = rec(ln_kind(site, LnPart::Mean)).data();
    float* sd = rec(ln_kind(site, LnPart::Std)).data();
    float* norm = rec(ln_kind(site, LnPart::Normalized)).data();
    float* out = rec(ln_kind(site, LnPart::Out)).data();
    const float *g = opt.affine ? w.g.data() : nullptr, *bb = opt.affine ? w.b.data() : nullptr;
    if (add) {
        if (add->out != x) throw std::logic_error("layernorm_stage: the pending add is not this LayerNorm's input");
        profile::Scope prof([] { return std::string("residual add + layernorm"); }, 9.0 * double(R) * double(D));
        ops::add_layernorm(add->out, out, norm, mean, sd, add->a, add->b, g, bb, int(R), int(D), eps, opt.unbiased,
                           rec.stream());
        return out;
    }
    profile::Scope prof([] { return std::string("layernorm"); }, 8.0 * double(R) * double(D));
    ops::layernorm(out, norm, mean, sd, x, g, bb, int(R), int(D), eps, opt.unbiased, rec.stream());
    return out;
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
void gelu(float* out, const float* in, size_t n) {
    profile::Scope prof([] { return std::string("gelu"); }, 0);
    ops::gelu(out, in, n);
}

// The family's rule for resizing its position embeddings (core/model/pos_embed.h).
PosEmbedRule pos_rule_of(PosRule r) {
    switch (r) {
        case PosRule::Timm: return pos_rule_timm();
        case PosRule::Dino: return pos_rule_dino();
        case PosRule::Dinov2: return pos_rule_dinov2(false);
        case PosRule::Dinov2Reg: return pos_rule_dinov2(true);
        case PosRule::Hf: return pos_rule_hf(false);
        case PosRule::HfAntialias: return pos_rule_hf(true);
        case PosRule::OpenClip: return pos_rule_open_clip();
        case PosRule::Mae: return pos_rule_mae();
    }
    throw std::invalid_argument("unknown position-embedding rule");
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

// Multi-head attention of B images' queries q (B, H, Tq, d) over keys and values k, v (B, H, Tk, d):
// scores = q k^T * alpha, pattern = softmax(scores) (then * post when the BUG is on), z = pattern v,
// written as (B, H, Tq, d) into z and/or with the heads concatenated (B, Tq, ldz) into zcat (each
// when not null). scores == pattern (training) computes the softmax in place.
// Tasks of (image, head, block of query rows): when the heads do not divide evenly among the
// threads (ViT-Ti: 3 heads on 2), each head's rows are split so every thread gets the same work
// (rows are independent: softmax is per row). That holds for the own kernel's bits too, but not for
// oneDNN's sgemm, whose values for a row change with the call's row count: on its path each head's
// rows are split into blocks of at most 128 whatever the thread count, so that a row's values do not
// depend on how many threads a pass (or an on-demand recomputation) runs on.
// With `stream` (a traced pass whose trace is larger than the caches: Recorder::stream), the
// recorded scores, pattern and z, which nothing in the pass reads again, are computed in the
// thread's buffers, where the softmax and the product with v read them from cache, and copied out
// with streaming stores (ops::copy_stream), so that recording them neither reads the trace's lines
// first nor evicts the pass's data; the own kernel writes the scores and pattern out while it
// computes z. The arithmetic is the same either way: only where the values are stored differs.
// On CPUs with AVX-512 both products run on the own kernel (core/kernels/attention_avx512.h, k^T
// packed once per task), elsewhere on oneDNN's sgemm.
void attention(float* scores, float* pattern, float* z, float* zcat, size_t ldz, const float* q, const float* k,
               const float* v, size_t B, size_t H, size_t Tq, size_t Tk, size_t d, float alpha, float post, bool stream) {
    const bool own = attn::avx512::available();
    const size_t nt = size_t(ops::threads()), split = own ? ((B * H) % nt ? nt : 1) : (Tq + 127) / 128;
    const bool buffered = stream && scores != pattern;
    // each thread's tasks run in turn in one part, so that it fences its streaming stores once, at the
    // end of its share, instead of waiting at every task for the last one's stores to drain
    const size_t tasks = B * H * split, parts = std::max<size_t>(1, std::min(tasks, nt));
    auto run_task = [&](size_t task, bool more) {
        const size_t bh = task / split, part = task % split, img = bh / H, h = bh % H;
        const size_t t0 = Tq * part / split, t1 = Tq * (part + 1) / split;
        const float *qh = q + bh * Tq * d, *kh = k + bh * Tk * d, *vh = v + bh * Tk * d;
        // query rows in blocks of at most kRows, so that a long sequence's buffers stay in cache too
        constexpr size_t kRows = 256;
        thread_local std::vector<float> buf, kbuf;
        // the own kernel's k^T, packed once per task for every block of rows (64-byte aligned)
        float* kp = nullptr;
        if (own && t1 > t0) {
            const size_t need = attn::avx512::packed_k_floats(int(Tk), int(d)) + 16;
            if (kbuf.size() < need) kbuf.resize(need);
            kp = kbuf.data() + (16 - (reinterpret_cast<uintptr_t>(kbuf.data()) / sizeof(float)) % 16) % 16;
            attn::avx512::pack_k(kp, kh, int(Tk), int(d));
        }
        // the two products: the own AVX-512 kernel, or oneDNN's sgemm (the same sums, other bits)
        auto qk = [&](float* s, const float* qr, size_t n) {
            if (own) {
                // the q, k and v of the head this part's next task reads, fetched into the L2 cache
                // while this product computes (the qkv product left half of them in the other core's)
                const size_t nb = bh + 1;
                const attn::avx512::Copy next[3] = {{q + nb * Tq * d, nullptr, Tq * d},
                                                    {k + nb * Tk * d, nullptr, Tk * d},
                                                    {v + nb * Tk * d, nullptr, Tk * d}};
                const bool fetch = more && part + 1 == split;
                attn::avx512::scores(s, Tk, qr, d, int(n), int(d), kp, int(Tk), alpha, fetch ? next : nullptr,
                                     fetch ? 3 : 0);
            }
            else ops::gemm(false, true, int(n), int(Tk), int(d), alpha, qr, int(d), kh, int(d), 0.f, s, int(Tk));
        };
        // z = p v, and the streamed copies of the block's scores and pattern (buffered), which the own
        // kernel writes while it computes (the stores overlap the arithmetic), oneDNN's path after it
        const attn::avx512::Copy* side = nullptr;
        int sides = 0;
        auto pv = [&](float* zr, size_t ldzr, const float* p, size_t n, float* z2 = nullptr, size_t ldz2 = 0) {
            if (own) attn::avx512::weighted(zr, ldzr, p, Tk, int(n), int(Tk), vh, int(d), side, sides, z2, ldz2);
            else ops::gemm(false, false, int(n), int(d), int(Tk), 1.f, p, int(Tk), vh, int(d), 0.f, zr, int(ldzr));
            if (!own)
                for (int i = 0; i < sides; ++i) ops::copy_stream(side[i].dst, side[i].src, side[i].n);
            sides = 0;
        };
        for (size_t r0 = t0; r0 < t1; r0 += kRows) {
            const size_t n = std::min(kRows, t1 - r0);
            float* srow = scores + (bh * Tq + r0) * Tk;
            float* prow = pattern + (bh * Tq + r0) * Tk;
            float* zrow = z ? z + (bh * Tq + r0) * d : nullptr;
            if (buffered) {
                if (buf.size() < n * (2 * Tk + d)) buf.resize(n * (2 * Tk + d));
                srow = buf.data(), prow = srow + n * Tk;
                if (z) zrow = prow + n * Tk;
            }
            qk(srow, qh + r0 * d, n);
            ops::softmax_rows(prow, srow, int(n), int(Tk));
            if (post != 1.f) as(prow, n * Tk, std::array<size_t, 1>{n * Tk}) *= post;
            const attn::avx512::Copy copies[2] = {{srow, scores + (bh * Tq + r0) * Tk, n * Tk},
                                                  {prow, pattern + (bh * Tq + r0) * Tk, n * Tk}};
            if (buffered) side = copies, sides = 2;
            float* zc = zcat ? zcat + (img * Tq + r0) * ldz + h * d : nullptr;
            if (zrow && own) pv(zrow, d, prow, n, zc, ldz);  // the concatenation from the kernel's registers
            else if (zrow) {
                pv(zrow, d, prow, n);
                if (zc)
                    for (size_t i = 0; i < n; ++i) std::copy_n(zrow + i * d, d, zc + i * ldz);
            } else if (zc)
                pv(zc, ldz, prow, n);
            if (buffered) {
                // copies no product carried (neither z nor the concatenation asked for)
                for (int i = 0; i < sides; ++i) ops::copy_stream(side[i].dst, side[i].src, side[i].n);
                sides = 0;
                if (z) ops::copy_stream(z + (bh * Tq + r0) * d, zrow, n * d);
            }
        }
    };
    ops::for_range(int(parts), B * H * Tq * Tk * d > 1000000, [&](int p) {
        const size_t a = tasks * size_t(p) / parts, b = tasks * size_t(p + 1) / parts;
        for (size_t task = a; task < b; ++task) run_task(task, task + 1 < b);
        if (buffered && b > a) ops::stream_fence();
    });
}

// Activation patching (an intervention): the rows of the patched stage (every row, or the given
// token rows; for per-head stages the token rows of every head) replaced by the other run's values.
void patch_stage(const Options& opt, const StageInfo& s, Array& a, size_t B) {
    const auto& p = opt.iv.patch;
    if (!p || p->stage != s.id) return;
    if (!p->values) throw std::invalid_argument("patching " + s.name + ": no values from the other run");
    const Array& v = *p->values;
    const size_t per = shape_numel(s.shape);
    if (v.size() != per || v.dimension() != s.shape.size() || !std::equal(s.shape.begin(), s.shape.end(), v.shape().begin()))
        throw std::invalid_argument("patching " + s.name + ": the run on " + p->source + " gives shape " + shape_str_of(v) +
                                    ", this run's stage is " + shape_str(s.shape) +
                                    " (dropped patches or another input size change the token count)");
    const bool per_head = s.shape.size() == 3;                     // (H, T, d): tokens on axis 1
    const size_t Hs = per_head ? s.shape[0] : 1, T = per_head ? s.shape[1] : s.shape[0], row = per / (Hs * T);
    for (int t : p->tokens)
        if (t < 0 || size_t(t) >= T)
            throw std::invalid_argument("patching " + s.name + ": token " + std::to_string(t) + " is outside 0.." +
                                        std::to_string(T - 1));
    for (size_t img = 0; img < B; ++img) {
        float* dst = a.data() + img * per;
        if (p->tokens.empty()) {
            std::copy_n(v.data(), per, dst);
            continue;
        }
        for (size_t h = 0; h < Hs; ++h)
            for (int t : p->tokens) std::copy_n(v.data() + (h * T + size_t(t)) * row, row, dst + (h * T + size_t(t)) * row);
    }
}

// The same for attn.z when a pass that records nothing writes the heads straight into their
// concatenation zcat (B, T, H*d): head h of token t is columns h*d .. (h+1)*d of row t.
void patch_zcat(const Options& opt, const StageInfo& s, float* zcat, size_t B) {
    const auto& p = opt.iv.patch;
    if (!p || p->stage != s.id) return;
    const size_t H = s.shape[0], T = s.shape[1], d = s.shape[2];
    Array rows = empty_array({B, H, T, d});  // z as the recorded pass has it, patched there, then put back
    for (size_t img = 0; img < B; ++img)
        for (size_t h = 0; h < H; ++h)
            for (size_t t = 0; t < T; ++t)
                std::copy_n(zcat + (img * T + t) * H * d + h * d, d, rows.data() + ((img * H + h) * T + t) * d);
    patch_stage(opt, s, rows, B);
    for (size_t img = 0; img < B; ++img)
        for (size_t h = 0; h < H; ++h)
            for (size_t t = 0; t < T; ++t)
                std::copy_n(rows.data() + ((img * H + h) * T + t) * d, d, zcat + (img * T + t) * H * d + h * d);
}

// Head ablation (an intervention): head h's slice of the heads' outputs set to 0, or to its mean
// over the tokens. z is (B, H, T, d) when recorded, else the concatenation (B, T, D) with head h in
// columns h*d .. (h+1)*d.
void ablate_heads(const Options& opt, int layer, float* z, bool concat, size_t B, size_t H, size_t T, size_t d) {
    for (const HeadAblation& ab : opt.iv.heads) {
        if (ab.layer != layer) continue;
        const size_t h = size_t(ab.head);
        for (size_t img = 0; img < B; ++img) {
            // element (t, u) of head h of image img
            auto at = [&](size_t t, size_t u) -> float& {
                return concat ? z[(img * T + t) * H * d + h * d + u] : z[((img * H + h) * T + t) * d + u];
            };
            for (size_t u = 0; u < d; ++u) {
                double m = 0;
                if (ab.mean)
                    for (size_t t = 0; t < T; ++t) m += at(t, u);
                const float val = ab.mean ? float(m / double(T)) : 0.f;
                for (size_t t = 0; t < T; ++t) at(t, u) = val;
            }
        }
    }
}

bool sublayer_ablated(const Options& opt, int layer, bool mlp) {
    for (const SublayerAblation& s : opt.iv.sublayers)
        if (s.layer == layer && s.mlp == mlp) return true;
    return false;
}

// The options whose table gives the stages' order and shapes for a pass that records nothing: the
// interventions that change no shape removed, the dropped patches replaced by as many first ones.
Options shape_options(const Options& opt) {
    Options o = opt;
    const size_t dropped = opt.iv.dropped.size();
    o.iv = {};
    for (size_t i = 0; i < dropped; ++i) o.iv.dropped.push_back(int(i));
    return o;
}

}  // namespace

const Array& forward_batch(const Weights& w, const Tensor4& x, const Options& opt, Trace& acts, Keep keep,
                           Workspace& ws, const ModelIdentity& model, const std::atomic<bool>* cancel,
                           const RunFrom* from, const std::vector<char>* record_rows) {
    const Config& c = w.cfg;
    const RunDims rd = run_dims(c, opt);
    const size_t B = x.shape(0), C = c.channels, Hi = rd.img_h, Wi = rd.img_w, P = c.patch, gh = rd.gh, gw = rd.gw,
                 N = rd.N, T = rd.T, T0 = size_t(rd.T0), Tk = T - size_t(c.registers), Rg = c.registers, D = c.width,
                 H = c.heads, d = c.head_dim(), M = c.mlp, Mi = c.mlp_in(), K = c.classes;
    if (!opt.iv.empty() && keep == Keep::ForBackward)
        throw std::invalid_argument("training runs without interventions");
    if (from && (from->layer < 0 || from->layer > c.depth || !from->stream))
        throw std::invalid_argument("RunFrom: no block " + std::to_string(from ? from->layer : -1) + " to start at (0.." +
                                    std::to_string(c.depth) + ", " + std::to_string(c.depth) + ": after the last block)");
    if (!from && (x.shape(1) != C || x.shape(2) != Hi || x.shape(3) != Wi))
        throw std::invalid_argument("input has shape " + shape_str_of(x) + " but model '" + c.name + "' takes " +
                                    shape_str({B, C, Hi, Wi}) + " in this run");
    if (w.blocks.size() != size_t(c.depth)) throw std::invalid_argument("weights do not match config depth");
    if (keep == Keep::All && B != 1) throw std::invalid_argument("a traced run records one image");
    const size_t R = B * T;  // rows of the residual stream: (b, t), b-major
    const Pooling pool = opt.pooling_for(c);
    // A traced run (and a sweep's pass) packs the weight matrices once for the GEMM kernel and
    // reuses them; training changes them every step, so it hands them over as they are.
    const gemm::Packs* packs = keep == Keep::ForBackward ? nullptr : &w.packs;

    std::optional<profile::Scope> table_prof;
    table_prof.emplace([] { return std::string("stage table (names, texts)"); }, 0);
    // A pass that records nothing reads the table only for the order and shapes of the stages, which
    // interventions do not change except through how many patches are dropped (not which): the
    // sweeps' passes (one ablated head, one dropped patch each) share one table instead of filling the
    // cache with a table per pass.
    std::shared_ptr<const StageTable> table = StageTable::get(c, keep == Keep::Output ? shape_options(opt) : opt);
    acts.begin(table, opt, model.name.empty() ? ModelIdentity{c.name, model.source} : model);
    if (keep == Keep::All && !record_rows && !(from && from->until >= 0) && rd.full_floats > kMaxTraceFloats) {
        char m[240];
        std::snprintf(m, sizeof m,
                      "a full trace at %dx%d records %.3g GB, over the limit of %.3g GB (its stages can be computed on "
                      "demand instead: `trace --out` without --record-all)",
                      rd.img_h, rd.img_w, rd.full_floats * 4 / 1e9, kMaxTraceFloats * 4 / 1e9);
        throw std::invalid_argument(m);
    }
    if (record_rows && (keep != Keep::All || record_rows->size() != table->size()))
        throw std::logic_error("forward_batch: record_rows is for a traced pass, one entry per row of its table");
    Recorder rec(*table, B, keep, acts, ws, record_rows);
    rec.set_stream(keep == Keep::All && rd.full_floats > kStreamFloats);
    table_prof.reset();
    auto check_cancel = [cancel] {
        if (cancel && cancel->load(std::memory_order_relaxed)) throw Cancelled();
    };
    auto patch = [&](StageKind k, int l, Array& a) { if (opt.iv.patch) patch_stage(opt, rec.info({k, l}), a, B); };
    const float* xres = nullptr;  // the residual stream (B*T, D)
    const size_t first_block = from ? size_t(from->layer) : 0;
    const size_t end_block = from && from->until >= 0 ? size_t(std::min(from->until, c.depth)) : size_t(c.depth);
    if (from) {
        rec.skip_to_block(from->layer);
        xres = from->stream;
    } else {

    // input: (C, Hi, Wi), normalized
    Array& in = rec(StageKind::Input);
    xt::noalias(as(in, std::array<size_t, 4>{B, C, Hi, Wi})) = x;

    // patches: (N, C*P*P). torch: x.unfold(1,P,P).unfold(2,P,P) is (C, gh, gw, P, P);
    // permuted to (gh, gw, C, P, P), each patch is channel-major, as the Conv2d weight.
    Array& patches = rec(StageKind::Patches);
    if (opt.bug_reshape_patches) {
        // BUG (on purpose, a teaching switch): x.reshape(N, C*P*P) keeps image rows, not patches.
        xt::noalias(as(patches, std::array<size_t, 4>{B, C, Hi, Wi})) = x;
    } else {
        auto grid = xt::reshape_view(x, std::array<size_t, 6>{B, C, gh, P, gw, P});
        xt::noalias(as(patches, std::array<size_t, 6>{B, gh, gw, C, P, P})) = xt::transpose(grid, {0, 2, 4, 1, 3, 5});
    }

    // patch_embed: (N, D) = patches @ W.T + b == Conv2d(C, D, P, stride=P)(x).flatten(2).transpose(1, 2)
    Array& pe = rec(StageKind::PatchEmbed);
    linear("patch_embed.proj", pe.data(), patches.data(), w.patch_w, w.patch_b, B * N, packs);

    // tokens: (T0, D) = torch.cat([cls_token, (dist_token,) patch_embed])
    const size_t pre0 = size_t(c.cls_token) + size_t(c.dist_token);
    Array& tok = rec(StageKind::Tokens);
    auto tok3 = as(tok, std::array<size_t, 3>{B, T0, D});
    if (c.cls_token) xt::view(tok3, xt::all(), 0, xt::all()) = xt::broadcast(w.cls, {B, D});
    if (c.dist_token) xt::view(tok3, xt::all(), 1, xt::all()) = xt::broadcast(w.dist, {B, D});
    xt::view(tok3, xt::all(), xt::range(pre0, T0), xt::all()) = as(pe, std::array<size_t, 3>{B, N, D});

    // pos_embed.learned: the stored table, when this run's grid is another size
    const size_t G0 = size_t(c.stored_grid()), prow = size_t(c.pos_prefix());
    if (rd.resized) {
        Array& pl = rec(StageKind::PosEmbedLearned);
        xt::noalias(as(pl, std::array<size_t, 3>{B, prow + G0 * G0, D})) = xt::broadcast(w.pos, {B, prow + G0 * G0, D});
    }
    // pos_embed: (T0, D), what is added: the stored rows, the grid resized by the family's rule;
    // tokens without a stored position (timm no_embed_class's cls) get 0.
    Array& pos = rec(StageKind::PosEmbed);
    {
        std::vector<float> table_rows;
        const float* src = w.pos.data();
        if (rd.resized) {
            profile::Scope prof([] { return std::string("position embeddings resized"); }, 0);
            table_rows = resize_pos_embed(w.pos.data(), int(w.pos.shape(0)), int(D), int(prow), int(G0), int(G0),
                                          int(gh), int(gw), pos_rule_of(c.pos_rule));
            src = table_rows.data();
        }
        // pos[b, :zero_rows] = 0; pos[b, zero_rows:] = table, for every image b of the batch (whole rows,
        // copied as such: a broadcast view assignment walks them element by element)
        const size_t zero_rows = pre0 - prow;  // tokens the table has no row for
        for (size_t b = 0; b < B; ++b) {
            float* dst = pos.data() + b * T0 * D;
            std::fill(dst, dst + zero_rows * D, 0.f);
            std::copy(src, src + (T0 - zero_rows) * D, dst + zero_rows * D);
        }
    }

    // embed: (T0, D) = tokens + pos_embed
    Array& emb = rec(StageKind::Embed);
    xt::noalias(as(emb, std::array<size_t, 3>{B, T0, D})) = tok3 + as(pos, std::array<size_t, 3>{B, T0, D});
    patch(StageKind::Embed, -1, emb);
    xres = emb.data();
    const float* seq = emb.data();  // the tokens without registers: (B, Tk, D)

    // embed.kept: (Tk, D) = x[:, keep], the dropped patches removed (an intervention)
    if (rd.dropped()) {
        Array& kept = rec(StageKind::EmbedKept);
        auto k3 = as(kept, std::array<size_t, 3>{B, Tk, D});
        auto e3 = as(emb, std::array<size_t, 3>{B, T0, D});
        xt::view(k3, xt::all(), xt::range(0, pre0), xt::all()) = xt::view(e3, xt::all(), xt::range(0, pre0), xt::all());
        for (size_t i = 0; i < rd.kept.size(); ++i)
            xt::view(k3, xt::all(), pre0 + i, xt::all()) = xt::view(e3, xt::all(), pre0 + size_t(rd.kept[i]), xt::all());
        xres = seq = kept.data();
    }

    // with_registers: (T, D) = torch.cat([x[:, :1], register_tokens, x[:, 1:]], dim=1)
    if (Rg) {
        Array& wr = rec(StageKind::WithRegisters);
        auto wr3 = as(wr, std::array<size_t, 3>{B, T, D});
        auto e3 = as(seq, B * Tk * D, std::array<size_t, 3>{B, Tk, D});
        xt::view(wr3, xt::all(), 0, xt::all()) = xt::view(e3, xt::all(), 0, xt::all());
        xt::view(wr3, xt::all(), xt::range(1, 1 + Rg), xt::all()) = xt::broadcast(w.reg, {B, Rg, D});
        xt::view(wr3, xt::all(), xt::range(1 + Rg, T), xt::all()) = xt::view(e3, xt::all(), xt::range(1, Tk), xt::all());
        xres = wr.data();
    }
    // ln_pre (CLIP): x = ln_pre(x)
    if (c.ln_pre) xres = layernorm_stage(rec, LnSite::Pre, xres, w.ln_pre, R, D, c.eps, opt);
    }  // the embedding (skipped when the pass starts at a later block)

    const float scale = 1.f / std::sqrt(float(d));
    ws.qkv.resize({R, 3 * D});
    ws.zcat.resize(size_t(c.depth));
    // The heads concatenated are kept per block for the backward pass; a pass that no backward
    // follows (on demand, output only) reuses one (R, D) array for every block.
    const bool one_zcat = keep == Keep::Output || record_rows || (from && from->until >= 0);
    // The residual adds run inside the LayerNorm that reads their sum (one pass over the rows instead
    // of two) unless an intervention patches a stage between them; resid_post's add waits for the
    // next block's ln1 (the last block's runs on its own).
    std::optional<PendingAdd> pending;
    for (size_t l = first_block; l < end_block; ++l) {
        check_cancel();
        const int li = int(l);
        const BlockW& b = w.blocks[l];
        const float* h1 = layernorm_stage(rec, LnSite::Ln1, xres, b.ln1, R, D, c.eps, opt, pending ? &*pending : nullptr);
        pending.reset();
        if (opt.iv.patch) patch(ln_kind(LnSite::Ln1, LnPart::Out), li, const_cast<Array&>(rec.last()));

        // q, k, v: (H, T, d) each = ln1 @ Wqkv.T + b, rows of Wqkv [q; k; v], heads contiguous.
        // torch: qkv(x).reshape(T, 3, H, d).permute(1, 2, 0, 3)
        float* qkv3[3] = {rec(StageKind::AttnQ).data(), rec(StageKind::AttnK).data(), rec(StageKind::AttnV).data()};
        // Columns [c0, c1) of the qkv rows y (row (b, t) at y + (b*T + t) * ld) into q, k, v: column
        // c is part c / D, head (c % D) / d, element c % d. The permute as a loop of runs within a
        // head: the strided xtensor assignment xt::transpose(xt::reshape_view(qkv, {B, T, 3, H, d}),
        // {2, 0, 3, 1, 4}) is ~30x slower (docs/kernels.md); tests/test_core_design.cpp checks the
        // two agree.
        auto split = [&](const float* y, size_t ld, size_t r0, size_t r1, size_t c0, size_t c1) {
            for (size_t bt = r0; bt < r1; ++bt)
                for (size_t c = c0; c < c1;) {
                    const size_t s3 = c / D, h = (c % D) / d, j = c % d, run = std::min(d - j, c1 - c);
                    std::copy_n(y + bt * ld + (c - c0), run, qkv3[s3] + (((bt / T) * H + h) * T + bt % T) * d + j);
                    c += run;
                }
        };
        // One image (a traced or on-demand pass) on the own kernel: its stores do the split. Otherwise
        // each thread splits its column slice while it is in cache.
        if (b.qkv_p && B == 1 && gemm::fusable(*b.qkv_p, int(d))) {
            const profile::Scope s = gemm_then_scope("qkv", "split", *b.qkv_p, R);
            ops::linear_packed_heads(qkv3, int(d), h1, *b.qkv_p, b.qkv_b.data(), int(R));
        } else if (b.qkv_p) {
            linear_then("qkv", "split", ws.qkv.data(), h1, *b.qkv_p, b.qkv_b, R,
                        [&](const float* y, size_t ld, int c0, int c1) { split(y, ld, 0, R, size_t(c0), size_t(c1)); },
                        gemm::Out::Skipped);
        } else {
            linear("qkv", ws.qkv.data(), h1, b.qkv_w, b.qkv_b, R, packs, b.qkv_p);
            profile::Scope prof([] { return std::string("qkv split + head concat (copies)"); }, 0);
            ops::for_range(int(R), R * D > 50000,
                           [&](int i) { split(ws.qkv.data(), 3 * D, size_t(i), size_t(i) + 1, 0, 3 * D); });
        }
        const float *q = qkv3[0], *k = qkv3[1], *v = qkv3[2];

        // Per image and head: scores (T, T) = q @ k.T / sqrt(d), the scale BEFORE the
        // softmax; pattern = scores.softmax(-1) (rows: queries, columns: keys); z = pattern @ v.
        float* sc = rec(StageKind::AttnScores).data();
        float* pa = rec(StageKind::AttnPattern).data();
        if (!rec.all()) sc = pa;  // training keeps only the pattern: softmax in place
        Tensor2& zcat = ws.zcat[one_zcat ? 0 : l];
        zcat.resize({R, D});
        float* z = rec.all() ? rec(StageKind::AttnZ).data() : nullptr;
        if (!rec.all()) rec(StageKind::AttnZ);  // scratch: z goes straight into zcat below
        const float alpha = opt.bug_scale_after_softmax ? 1.f : scale;
        // BUG (teaching switch): attn = scores.softmax(-1) / sqrt(d)
        const float post = opt.bug_scale_after_softmax ? scale : 1.f;
        const bool concat_in_task = z && !opt.iv.patch && opt.iv.heads.empty();
        {
            profile::Scope att_prof([] { return std::string("attention: q k^T, softmax, attn v (per head)"); },
                                    4.0 * double(B * H) * double(T) * double(T) * double(d));
            // the heads' concatenation written by each head's task while its z is in cache, unless an
            // intervention changes z first (then the copy below, after it)
            attention(sc, pa, z, !z || concat_in_task ? zcat.data() : nullptr, D, q, k, v, B, H, T, T, d, alpha, post,
                      rec.stream());
        }
        if (z && opt.iv.patch) patch(StageKind::AttnZ, li, rec.last_of(StageKind::AttnZ));
        if (!z && opt.iv.patch) patch_zcat(opt, rec.info({StageKind::AttnZ, li}), zcat.data(), B);
        if (!opt.iv.heads.empty()) ablate_heads(opt, li, z ? z : zcat.data(), !z, B, H, T, d);
        if (z && !concat_in_task) {  // heads concatenated: z.transpose(0, 1).reshape(T, D)
            profile::Scope prof([] { return std::string("qkv split + head concat (copies)"); }, 0);
            ops::for_range(int(R), R * D > 50000, [&](int i) {  // one row (b, t) of the concat
                const size_t img = size_t(i) / T, t = size_t(i) % T;
                for (size_t h = 0; h < H; ++h)
                    std::copy_n(z + ((img * H + h) * T + t) * d, d, zcat.data() + size_t(i) * D + h * d);
            });
        }

        // attn.out: (T, D) = proj(concat_heads(z))   (an ablation sets it to 0)
        Array& ao = rec(StageKind::AttnOut);
        if (sublayer_ablated(opt, li, false)) std::fill_n(ao.data(), ao.size(), 0.f);
        else linear("attn.proj", ao.data(), zcat.data(), b.proj_w, b.proj_b, R, packs, b.proj_p);
        patch(StageKind::AttnOut, li, ao);
        const float* attn_branch = ao.data();
        // ls1: (T, D) = ls1.gamma * attn_out (layer scale)
        if (c.layer_scale) {
            Array& ls = rec(StageKind::Ls1);
            xt::noalias(as(ls, std::array<size_t, 2>{R, D})) = as(ao, std::array<size_t, 2>{R, D}) * b.ls1;
            attn_branch = ls.data();
        }

        // resid_mid = x + attn_out
        Array& rm = rec(StageKind::ResidMid);
        const PendingAdd mid{rm.data(), xres, attn_branch};
        if (opt.iv.patch) {
            residual_add(rm.data(), xres, attn_branch, R, D);
            patch(StageKind::ResidMid, li, rm);
        }
        const float* h2 = layernorm_stage(rec, LnSite::Ln2, rm.data(), b.ln2, R, D, c.eps, opt, opt.iv.patch ? nullptr : &mid);
        if (opt.iv.patch) patch(ln_kind(LnSite::Ln2, LnPart::Out), li, const_cast<Array&>(rec.last()));

        // mlp.pre = fc1(ln2); mlp.post = act(mlp.pre); mlp.out = fc2(mlp.post)
        Array& pre = rec(StageKind::MlpPre);
        Array& mpost = rec(StageKind::MlpPost);
        linear_act("mlp.fc1", c.act, pre.data(), mpost.data(), h2, b.fc1_w, b.fc1_b, R, M, packs, b.fc1_p, rec.stream());
        patch(StageKind::MlpPost, li, mpost);
        Array& mo = rec(StageKind::MlpOut);
        if (sublayer_ablated(opt, li, true)) std::fill_n(mo.data(), mo.size(), 0.f);
        else linear("mlp.fc2", mo.data(), mpost.data(), b.fc2_w, b.fc2_b, R, packs, b.fc2_p);
        patch(StageKind::MlpOut, li, mo);
        const float* mlp_branch = mo.data();
        if (c.layer_scale) {
            Array& ls = rec(StageKind::Ls2);
            xt::noalias(as(ls, std::array<size_t, 2>{R, D})) = as(mo, std::array<size_t, 2>{R, D}) * b.ls2;
            mlp_branch = ls.data();
        }

        // resid_post = resid_mid + mlp_out
        Array& rp = rec(StageKind::ResidPost);
        if (!opt.iv.patch && l + 1 < end_block) {
            pending = PendingAdd{rp.data(), rm.data(), mlp_branch};
        } else {
            residual_add(rp.data(), rm.data(), mlp_branch, R, D);
            patch(StageKind::ResidPost, li, rp);
        }
        xres = rp.data();
    }
    (void)Mi;
    if (end_block < size_t(c.depth)) {  // a part of the pass (a block materialized on demand)
        acts.end();
        static const Array none;
        return none;
    }

    const float* feat = nullptr;  // (B, D): what the classifier or the projection reads
    const float* lf = nullptr;    // the final norm's output
    auto row_of = [&](const float* src, size_t rows, size_t r) {  // (B, rows, D)[:, r] as (B, D)
        return xt::view(as(src, B * rows * D, std::array<size_t, 3>{B, rows, D}), xt::all(), r, xt::all());
    };
    switch (pool) {
        case Pooling::Cls: {
            // LayerNorm on every token (as the model does), then the cls token's row: x[:, 0]
            lf = layernorm_stage(rec, LnSite::Final, xres, w.ln_f, R, D, c.eps, opt);
            if (opt.iv.patch) patch(StageKind::LnFinalOut, -1, const_cast<Array&>(rec.last()));
            if (c.head != Head::Identity) {
                Array& pooled = rec(StageKind::Pooled);
                xt::noalias(as(pooled, std::array<size_t, 2>{B, D})) = row_of(lf, T, 0);
                feat = pooled.data();
            }
            break;
        }
        case Pooling::Mean: {
            // timm's global_pool='avg': x[:, prefix:].mean(1), then LayerNorm (fc_norm)
            Array& pooled = rec(StageKind::Pooled);
            const size_t pf = size_t(rd.prefix);
            xt::noalias(as(pooled, std::array<size_t, 2>{B, D})) = xt::mean(
                xt::view(as(xres, R * D, std::array<size_t, 3>{B, T, D}), xt::all(), xt::range(pf, T), xt::all()), {1});
            lf = feat = layernorm_stage(rec, LnSite::Final, pooled.data(), w.ln_f, B, D, c.eps, opt);
            if (opt.iv.patch) patch(StageKind::LnFinalOut, -1, const_cast<Array&>(rec.last()));
            break;
        }
        case Pooling::ClsThenNorm: {
            // CLIP: pooled = x[:, 0]; ln_post(pooled)
            Array& pooled = rec(StageKind::Pooled);
            xt::noalias(as(pooled, std::array<size_t, 2>{B, D})) = row_of(xres, T, 0);
            lf = feat = layernorm_stage(rec, LnSite::Final, pooled.data(), w.ln_f, B, D, c.eps, opt);
            if (opt.iv.patch) patch(StageKind::LnFinalOut, -1, const_cast<Array&>(rec.last()));
            break;
        }
        case Pooling::Map: {
            // SigLIP: post_layernorm on every token, then h = MHA(probe, x, x); h = h + mlp(layernorm(h))
            lf = layernorm_stage(rec, LnSite::Final, xres, w.ln_f, R, D, c.eps, opt);
            if (opt.iv.patch) patch(StageKind::LnFinalOut, -1, const_cast<Array&>(rec.last()));
            const MapHeadW& m = w.map;
            Array& probe = rec(StageKind::HeadProbe);
            xt::noalias(as(probe, std::array<size_t, 2>{B, D})) = xt::broadcast(m.probe, {B, D});
            Tensor2 qp = Tensor2::from_shape({B, D}), kv = Tensor2::from_shape({R, 2 * D});
            const Tensor2 wq = xt::view(m.in_w, xt::range(0, D), xt::all()), wkv = xt::view(m.in_w, xt::range(D, 3 * D), xt::all());
            const Tensor1 bq = xt::view(m.in_b, xt::range(0, D)), bkv = xt::view(m.in_b, xt::range(D, 3 * D));
            linear("head.q", qp.data(), probe.data(), wq, bq, B, nullptr);
            linear("head.kv", kv.data(), lf, wkv, bkv, R, nullptr);
            float* hq = rec(StageKind::HeadAttnQ).data();
            float* hk = rec(StageKind::HeadAttnK).data();
            float* hv = rec(StageKind::HeadAttnV).data();
            for (size_t img = 0; img < B; ++img)
                for (size_t h = 0; h < H; ++h) {
                    std::copy_n(qp.data() + img * D + h * d, d, hq + (img * H + h) * d);
                    for (size_t t = 0; t < T; ++t) {
                        std::copy_n(kv.data() + (img * T + t) * 2 * D + h * d, d, hk + ((img * H + h) * T + t) * d);
                        std::copy_n(kv.data() + (img * T + t) * 2 * D + D + h * d, d, hv + ((img * H + h) * T + t) * d);
                    }
                }
            float* hs = rec(StageKind::HeadAttnScores).data();
            float* hp = rec(StageKind::HeadAttnPattern).data();
            float* hz = rec(StageKind::HeadAttnZ).data();
            Tensor2 zc = Tensor2::from_shape({B, D});
            attention(hs, hp, hz, nullptr, D, hq, hk, hv, B, H, 1, T, d, scale, 1.f, rec.stream());
            for (size_t img = 0; img < B; ++img)
                for (size_t h = 0; h < H; ++h) std::copy_n(hz + (img * H + h) * d, d, zc.data() + img * D + h * d);
            Array& hao = rec(StageKind::HeadAttnOut);
            linear("head.out_proj", hao.data(), zc.data(), m.out_w, m.out_b, B, nullptr);
            const float* hl = layernorm_stage(rec, LnSite::Head, hao.data(), m.ln, B, D, c.eps, opt);
            Array& hpre = rec(StageKind::HeadMlpPre);
            linear("head.fc1", hpre.data(), hl, m.fc1_w, m.fc1_b, B, nullptr);
            Array& hpost = rec(StageKind::HeadMlpPost);
            activation(c.act == Act::SwiGlu ? Act::Gelu : c.act, hpost.data(), hpre.data(), B, M);
            Array& hmo = rec(StageKind::HeadMlpOut);
            linear("head.fc2", hmo.data(), hpost.data(), m.fc2_w, m.fc2_b, B, nullptr);
            Array& hres = rec(StageKind::HeadResidPost);
            residual_add(hres.data(), hao.data(), hmo.data(), B, D);
            feat = hres.data();
            break;
        }
    }
    if (c.head == Head::Distilled) {
        // DeiT: pooled_dist = x[:, 1]; logits = (head(pooled) + head_dist(pooled_dist)) / 2
        Array& pd = rec(StageKind::PooledDist);
        xt::noalias(as(pd, std::array<size_t, 2>{B, D})) = row_of(lf, T, 1 + Rg);
        Array& lc = rec(StageKind::LogitsCls);
        linear("head", lc.data(), feat, w.head_w, w.head_b, B, packs);
        Array& ld = rec(StageKind::LogitsDist);
        linear("head_dist", ld.data(), pd.data(), w.head_dist_w, w.head_dist_b, B, packs);
        Array& logits = rec(StageKind::Logits);
        xt::noalias(as(logits, std::array<size_t, 2>{B, K})) =
            (as(lc, std::array<size_t, 2>{B, K}) + as(ld, std::array<size_t, 2>{B, K})) / 2.f;
        Array& probs = rec(StageKind::Probs);
        ops::softmax_rows(probs.data(), logits.data(), int(B), int(K));
        rec.done();
        acts.end();
        return logits;
    }
    if (c.has_logits()) {
        // logits = head(pooled); probs = logits.softmax(-1)
        Array& logits = rec(StageKind::Logits);
        linear("head", logits.data(), feat, w.head_w, w.head_b, B, packs);
        Array& probs = rec(StageKind::Probs);
        ops::softmax_rows(probs.data(), logits.data(), int(B), int(K));
        rec.done();
        acts.end();
        return logits;
    }
    // embedding: the model's output without a classifier
    Array& emb_out = rec(StageKind::Embedding);
    const size_t E = size_t(c.out_dim());
    if (pool == Pooling::Map) {
        std::copy_n(feat, B * D, emb_out.data());
    } else {
        const float* f = feat;  // Cls + Projection: pooled; Cls + Identity: ln_final.out[0]
        Tensor2 first;
        if (!f) {
            first = row_of(lf, T, 0);
            f = first.data();
        }
        if (c.head == Head::Projection)  // embedding = f @ proj, proj (D, E)
            ops::gemm(false, false, int(B), int(E), int(D), 1.f, f, int(D), w.proj.data(), int(E), 0.f,
                      emb_out.data(), int(E));
        else
            std::copy_n(f, B * D, emb_out.data());
    }
    rec.done();
    acts.end();
    return emb_out;
}

}  // namespace vit
