// Multi-head attention: q, k, v from the block's first LayerNorm, scores, the softmax, the heads'
// outputs, their concatenation and the output projection; the head interventions (ablation,
// activation patching of z) where they apply.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/kernels/attention_avx512.h"
#include "core/kernels/ops.h"
#include "core/kernels/profile.h"
#include "core/model/pass.h"

namespace vit {

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

namespace {

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

}  // namespace

bool sublayer_ablated(const Options& opt, int layer, bool mlp) {
    for (const SublayerAblation& s : opt.iv.sublayers)
        if (s.layer == layer && s.mlp == mlp) return true;
    return false;
}


void attention_part(Pass& p, const BlockW& b, const float* h1) {
    const Options& opt = p.opt;
    const int li = p.layer;
    const size_t B = p.B, T = p.T, R = p.R, D = p.D, H = p.H, d = p.d;
    // q, k, v: (H, T, d) each = ln1 @ Wqkv.T + b, rows of Wqkv [q; k; v], heads contiguous.
    // torch: qkv(x).reshape(T, 3, H, d).permute(1, 2, 0, 3)
    float* qkv3[3] = {p.rec(StageKind::AttnQ, {H, T, d}).data(), p.rec(StageKind::AttnK, {H, T, d}).data(),
                      p.rec(StageKind::AttnV, {H, T, d}).data()};
    // RoPE (DINOv3): q_rot, k_rot (H, T, d): the patch tokens' q and k rotated by their position
    float* rot[2] = {nullptr, nullptr};
    if (p.c.rope) {
        rot[0] = p.rec(StageKind::AttnQRot, {H, T, d}).data();
        rot[1] = p.rec(StageKind::AttnKRot, {H, T, d}).data();
    }
    // Per image and head: scores (T, T) = q @ k.T / sqrt(d), the scale BEFORE the
    // softmax; pattern = scores.softmax(-1) (rows: queries, columns: keys); z = pattern @ v.
    float* sc = p.rec(StageKind::AttnScores, {H, T, T}).data();
    float* pa = p.rec(StageKind::AttnPattern, {H, T, T}).data();
    Array& za = p.rec(StageKind::AttnZ, {H, T, d});  // scratch when not recorded: z goes straight into zcat
    // attn.out: (T, D) = proj(concat_heads(z))   (an ablation sets it to 0)
    Array& ao = p.rec(StageKind::AttnOut, {T, D});
    if (p.dry) return;
    Workspace& ws = p.ws;

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
        linear("qkv", ws.qkv.data(), h1, b.qkv_w, b.qkv_b, R, p.packs, b.qkv_p);
        profile::Scope prof([] { return std::string("qkv split + head concat (copies)"); }, 0);
        ops::for_range(int(R), R * D > 50000,
                       [&](int i) { split(ws.qkv.data(), 3 * D, size_t(i), size_t(i) + 1, 0, 3 * D); });
    }
    const float *q = qkv3[0], *k = qkv3[1], *v = qkv3[2];
    if (p.c.rope) {
        profile::Scope prof([] { return std::string("RoPE: q and k rotated"); }, 0);
        const RopeAngles ang = rope_angles(p.c, p.w.rope_periods, p.rd);
        for (int j = 0; j < 2; ++j) rope_rotate(rot[j], qkv3[j], ang, B * H, T);
        q = rot[0];
        k = rot[1];
    }

    if (!p.rec.all()) sc = pa;  // training keeps only the pattern: softmax in place
    Tensor2& zcat = ws.zcat[p.one_zcat ? 0 : size_t(li)];
    zcat.resize({R, D});
    float* z = p.rec.all() ? za.data() : nullptr;
    const float scale = 1.f / std::sqrt(float(d));
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
                  p.rec.stream());
    }
    if (z && opt.iv.patch) p.patch(StageKind::AttnZ, li, za);
    if (!z && opt.iv.patch) patch_zcat(opt, p.rec.info({StageKind::AttnZ, li}), zcat.data(), B);
    if (!opt.iv.heads.empty()) ablate_heads(opt, li, z ? z : zcat.data(), !z, B, H, T, d);
    if (z && !concat_in_task) {  // heads concatenated: z.transpose(0, 1).reshape(T, D)
        profile::Scope prof([] { return std::string("qkv split + head concat (copies)"); }, 0);
        ops::for_range(int(R), R * D > 50000, [&](int i) {  // one row (b, t) of the concat
            const size_t img = size_t(i) / T, t = size_t(i) % T;
            for (size_t h = 0; h < H; ++h)
                std::copy_n(z + ((img * H + h) * T + t) * d, d, zcat.data() + size_t(i) * D + h * d);
        });
    }

    if (sublayer_ablated(opt, li, false)) std::fill_n(ao.data(), ao.size(), 0.f);
    else linear("attn.proj", ao.data(), zcat.data(), b.proj_w, b.proj_b, R, p.packs, b.proj_p);
    p.patch(StageKind::AttnOut, li, ao);
}

}  // namespace vit
