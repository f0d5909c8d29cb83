// The ViT forward pass, batched, recording every stage through the stage table.
// Each stage is computed straight into its array (the trace's own, when
// tracing), reads like its PyTorch line, and names that line in a comment.
// GEMMs go to oneDNN on the containers' storage (ops::gemm / ops::linear);
// elementwise stages are xtensor expressions (vectorized with xsimd). Two
// stages stay loops over the storage because the reducer expressions are many
// times slower on the hot path (docs/kernels.md has the figures): LayerNorm
// (ops::layernorm) and the row softmax (ops::softmax_rows).
// tests/test_core_design.cpp checks both against the xtensor expressions they replace.
#include "core/model/forward.h"


#include <algorithm>
#include <cmath>
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

#include "core/kernels/ops.h"
#include "core/kernels/profile.h"

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
    Recorder(const StageTable& table, size_t B, Keep keep, Trace& t, Workspace& ws)
        : table_(table), B_(B), keep_(keep), t_(t), ws_(ws) {}

    Array& operator()(StageKind kind) {
        if (i_ >= table_.size() || table_[i_].id.kind != kind)
            throw std::logic_error(std::string("forward pass and stage table disagree: the pass computes ") +
                                   stage_kind_name(kind) + " where the table lists " +
                                   (i_ < table_.size() ? table_[i_].name : std::string("nothing more")));
        const size_t row = i_++;
        const StageInfo& s = table_[row];
        if (keep_ == Keep::All) return t_.record(row, s.shape);
        Shape shape = s.shape;
        shape.insert(shape.begin(), B_);
        if (s.kept) return t_.record(row, shape);
        Array& a = ws_.scratch[int(kind)];
        if (a.size() != shape_numel(shape) || a.dimension() != shape.size()) a = empty_array(shape);
        return a;
    }
    bool all() const { return keep_ == Keep::All; }
    void done() const {
        if (i_ != table_.size())
            throw std::logic_error("forward pass recorded fewer stages than the table lists (next: " +
                                   table_[i_].name + ")");
    }

private:
    const StageTable& table_;
    size_t i_ = 0, B_;
    Keep keep_;
    Trace& t_;
    Workspace& ws_;
};

// F.linear(in, W, b) through BLAS, reported to the profile as a GEMM of its shape.
void linear(const char* what, float* out, const float* in, const Tensor2& W, const Tensor1& b, size_t R,
            const gemm::Packs* packs) {
    const size_t O = W.shape(0), I = W.shape(1);
    profile::Scope s([&] { return "gemm " + std::string(what) + " " + std::to_string(R) + "x" + std::to_string(I) +
                                  " @ " + std::to_string(I) + "x" + std::to_string(O); },
                     2.0 * double(R) * double(I) * double(O));
    ops::linear(out, in, W.data(), b.data(), int(R), int(I), int(O), packs);
}

// LayerNorm with its internals recorded: mean (R), std (R), normalized (R, D), out (R, D).
// torch: F.layer_norm(x, (D,), weight, bias, eps) -- or, unbiased, var over D-1.
const float* layernorm_stage(Recorder& rec, LnSite site, const float* x, const LayerNormW& w, size_t R, size_t D,
                             float eps, const Options& opt) {
    float* mean = rec(ln_kind(site, LnPart::Mean)).data();
    float* sd = rec(ln_kind(site, LnPart::Std)).data();
    float* norm = rec(ln_kind(site, LnPart::Normalized)).data();
    float* out = rec(ln_kind(site, LnPart::Out)).data();
    profile::Scope prof([] { return std::string("layernorm"); }, 8.0 * double(R) * double(D));
    ops::layernorm(out, norm, mean, sd, x, opt.affine ? w.g.data() : nullptr, opt.affine ? w.b.data() : nullptr,
                   int(R), int(D), eps, opt.unbiased);
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

// out = 0.5 x (1 + erf(x / sqrt 2)) as an xtensor expression, split across the threads
// (through ops::for_range, so that the busy-core fallback applies here too).
// torch: F.gelu(x)  (the exact form, not the tanh approximation)
void gelu(float* out, const float* in, size_t n) {
    profile::Scope prof([] { return std::string("gelu"); }, 0);
    const size_t parts = size_t(std::max(1, ops::threads()));
    ops::for_range(int(parts), n > 50000, [&](int t) {
        const size_t b = n * size_t(t) / parts, e = n * size_t(t + 1) / parts;
        auto x = as(in + b, e - b, std::array<size_t, 1>{e - b});
        auto y = as(out + b, e - b, std::array<size_t, 1>{e - b});
        xt::noalias(y) = 0.5f * x * (1.f + xt::erf(x * float(M_SQRT1_2)));
    });
}

}  // namespace

const Array& forward_batch(const Weights& w, const Tensor4& x, const Options& opt, Trace& acts, Keep keep,
                           Workspace& ws, const ModelIdentity& model, const std::atomic<bool>* cancel) {
    const Config& c = w.cfg;
    const size_t B = x.shape(0), C = c.channels, S = c.image_size, P = c.patch, G = c.grid(), N = c.patches(),
                 T = c.tokens(), D = c.width, H = c.heads, d = c.head_dim(), M = c.mlp, K = c.classes;
    if (x.shape(1) != C || x.shape(2) != S || x.shape(3) != S)
        throw std::invalid_argument("input has shape " + shape_str_of(x) + " but model '" + c.name + "' takes " +
                                    shape_str({B, C, S, S}));
    if (w.blocks.size() != size_t(c.depth)) throw std::invalid_argument("weights do not match config depth");
    if (keep == Keep::All && B != 1) throw std::invalid_argument("a traced run records one image");
    const size_t R = B * T;  // rows of the residual stream: (b, t), b-major
    const Pooling pool = opt.pooling_for(c);
    // A traced run packs the weight matrices once for the GEMM kernel and reuses
    // them; training changes them every step, so it hands them over as they are.
    const gemm::Packs* packs = keep == Keep::All ? &w.packs : nullptr;

    std::optional<profile::Scope> table_prof;
    table_prof.emplace([] { return std::string("stage table (names, texts)"); }, 0);
    std::shared_ptr<const StageTable> table = StageTable::get(c, opt);
    acts.begin(table, opt, model.name.empty() ? ModelIdentity{c.name, model.source} : model);
    Recorder rec(*table, B, keep, acts, ws);
    table_prof.reset();
    auto check_cancel = [cancel] {
        if (cancel && cancel->load(std::memory_order_relaxed)) throw Cancelled();
    };

    // input: (C, S, S), normalized
    Array& in = rec(StageKind::Input);
    xt::noalias(as(in, std::array<size_t, 4>{B, C, S, S})) = x;

    // patches: (N, C*P*P). torch: x.unfold(1,P,P).unfold(2,P,P) is (C, G, G, P, P);
    // permuted to (G, G, C, P, P), each patch is channel-major, as the Conv2d weight.
    Array& patches = rec(StageKind::Patches);
    if (opt.bug_reshape_patches) {
        // BUG (on purpose, a teaching switch): x.reshape(N, C*P*P) keeps image rows, not patches.
        xt::noalias(as(patches, std::array<size_t, 4>{B, C, S, S})) = x;
    } else {
        auto grid = xt::reshape_view(x, std::array<size_t, 6>{B, C, G, P, G, P});
        xt::noalias(as(patches, std::array<size_t, 6>{B, G, G, C, P, P})) = xt::transpose(grid, {0, 2, 4, 1, 3, 5});
    }

    // patch_embed: (N, D) = patches @ W.T + b == Conv2d(C, D, P, stride=P)(x).flatten(2).transpose(1, 2)
    Array& pe = rec(StageKind::PatchEmbed);
    linear("patch_embed", pe.data(), patches.data(), w.patch_w, w.patch_b, B * N, packs);

    // tokens: (T, D) = torch.cat([cls_token, patch_embed])
    Array& tok = rec(StageKind::Tokens);
    auto tok3 = as(tok, std::array<size_t, 3>{B, T, D});
    xt::view(tok3, xt::all(), 0, xt::all()) = xt::broadcast(w.cls, {B, D});
    xt::view(tok3, xt::all(), xt::range(1, T), xt::all()) = as(pe, std::array<size_t, 3>{B, N, D});

    // pos_embed: (T, D), the learned position embeddings that are added
    Array& pos = rec(StageKind::PosEmbed);
    xt::noalias(as(pos, std::array<size_t, 3>{B, T, D})) = xt::broadcast(w.pos, {B, T, D});

    // embed: (T, D) = tokens + pos_embed
    Array& emb = rec(StageKind::Embed);
    xt::noalias(as(emb, std::array<size_t, 3>{B, T, D})) = tok3 + as(pos, std::array<size_t, 3>{B, T, D});

    const float scale = 1.f / std::sqrt(float(d));
    ws.qkv.resize({R, 3 * D});
    ws.zcat.resize(size_t(c.depth));
    const float* xres = emb.data();  // the residual stream (R, D)
    for (size_t l = 0; l < size_t(c.depth); ++l) {
        check_cancel();
        const BlockW& b = w.blocks[l];
        const float* h1 = layernorm_stage(rec, LnSite::Ln1, xres, b.ln1, R, D, c.eps, opt);

        // q, k, v: (H, T, d) each = ln1 @ Wqkv.T + b, rows of Wqkv [q; k; v], heads contiguous.
        // torch: qkv(x).reshape(T, 3, H, d).permute(1, 2, 0, 3)
        linear("qkv", ws.qkv.data(), h1, b.qkv_w, b.qkv_b, R, packs);
        float* qkv3[3] = {rec(StageKind::AttnQ).data(), rec(StageKind::AttnK).data(), rec(StageKind::AttnV).data()};
        {
            profile::Scope prof([] { return std::string("qkv split + head concat (copies)"); }, 0);
            // The permute as a loop of d-float runs: the strided xtensor assignment
            // xt::transpose(xt::reshape_view(qkv, {B, T, 3, H, d}), {2, 0, 3, 1, 4}) is ~30x
            // slower (docs/kernels.md); tests/test_core_design.cpp checks the two agree.
            ops::for_range(int(R), R * D > 50000, [&](int i) {
                const size_t bt = size_t(i);
                for (size_t s3 = 0; s3 < 3; ++s3)
                    for (size_t h = 0; h < H; ++h)
                        std::copy_n(ws.qkv.data() + bt * 3 * D + s3 * D + h * d, d,
                                    qkv3[s3] + (((bt / T) * H + h) * T + bt % T) * d);
            });
        }
        const float *q = qkv3[0], *k = qkv3[1], *v = qkv3[2];

        // Per image and head: scores (T, T) = q @ k.T / sqrt(d), the scale BEFORE the
        // softmax; pattern = scores.softmax(-1) (rows: queries, columns: keys); z = pattern @ v.
        float* sc = rec(StageKind::AttnScores).data();
        float* pa = rec(StageKind::AttnPattern).data();
        if (!rec.all()) sc = pa;  // training keeps only the pattern: softmax in place
        Tensor2& zcat = ws.zcat[l];
        zcat.resize({R, D});
        float* z = rec.all() ? rec(StageKind::AttnZ).data() : nullptr;
        if (!rec.all()) rec(StageKind::AttnZ);  // scratch: z goes straight into zcat below
        const float alpha = opt.bug_scale_after_softmax ? 1.f : scale;
        std::optional<profile::Scope> att_prof;
        att_prof.emplace([] { return std::string("attention: q k^T, softmax, attn v (per head)"); },
                         4.0 * double(B * H) * double(T) * double(T) * double(d));
        // Tasks of (image, head, block of query rows): when the heads do not divide
        // evenly among the threads (ViT-Ti: 3 heads on 2), each head's rows are split
        // so that every thread gets the same work (rows are independent: softmax is per row).
        const size_t nt = size_t(ops::threads()), split = (B * H) % nt ? nt : 1;
        ops::for_range(int(B * H * split), B * H * T * T * d > 1000000, [&](int task) {
            const size_t bh = size_t(task) / split, part = size_t(task) % split;
            const size_t img = bh / H, h = bh % H, o = bh * T * d, oo = bh * T * T;
            const size_t r0 = T * part / split, r1 = T * (part + 1) / split, n = r1 - r0;
            if (!n) return;
            float* srow = sc + oo + r0 * T;
            float* prow = pa + oo + r0 * T;
            ops::gemm(false, true, int(n), int(T), int(d), alpha, q + o + r0 * d, int(d), k + o, int(d), 0.f, srow, int(T));
            ops::softmax_rows(prow, srow, int(n), int(T));
            if (opt.bug_scale_after_softmax)  // BUG (teaching switch): attn = scores.softmax(-1) / sqrt(d)
                as(prow, n * T, std::array<size_t, 1>{n * T}) *= scale;
            // z = attn @ v: written as (H, T, d) when recording, else straight into the concat layout
            if (z) ops::gemm(false, false, int(n), int(d), int(T), 1.f, prow, int(T), v + o, int(d), 0.f,
                             z + o + r0 * d, int(d));
            else ops::gemm(false, false, int(n), int(d), int(T), 1.f, prow, int(T), v + o, int(d), 0.f,
                           zcat.data() + (img * T + r0) * D + h * d, int(D));
        });
        att_prof.reset();
        if (z) {  // heads concatenated: z.transpose(0, 1).reshape(T, D)
            profile::Scope prof([] { return std::string("qkv split + head concat (copies)"); }, 0);
            ops::for_range(int(R), R * D > 50000, [&](int i) {  // one row (b, t) of the concat
                const size_t img = size_t(i) / T, t = size_t(i) % T;
                for (size_t h = 0; h < H; ++h)
                    std::copy_n(z + ((img * H + h) * T + t) * d, d, zcat.data() + size_t(i) * D + h * d);
            });
        }

        // attn.out: (T, D) = proj(concat_heads(z))
        Array& ao = rec(StageKind::AttnOut);
        linear("attn.proj", ao.data(), zcat.data(), b.proj_w, b.proj_b, R, packs);

        // resid_mid = x + attn_out
        Array& rm = rec(StageKind::ResidMid);
        residual_add(rm.data(), xres, ao.data(), R, D);

        const float* h2 = layernorm_stage(rec, LnSite::Ln2, rm.data(), b.ln2, R, D, c.eps, opt);

        // mlp.pre = fc1(ln2); mlp.post = F.gelu(mlp.pre); mlp.out = fc2(mlp.post)
        Array& pre = rec(StageKind::MlpPre);
        linear("mlp.fc1", pre.data(), h2, b.fc1_w, b.fc1_b, R, packs);
        Array& post = rec(StageKind::MlpPost);
        gelu(post.data(), pre.data(), R * M);
        Array& mo = rec(StageKind::MlpOut);
        linear("mlp.fc2", mo.data(), post.data(), b.fc2_w, b.fc2_b, R, packs);

        // resid_post = resid_mid + mlp_out
        Array& rp = rec(StageKind::ResidPost);
        residual_add(rp.data(), rm.data(), mo.data(), R, D);
        xres = rp.data();
    }

    const float* feat;  // (B, D): what the head reads
    if (pool == Pooling::Cls) {
        // LayerNorm on every token (as the model does), then the cls token's row: x[:, 0]
        const float* lf = layernorm_stage(rec, LnSite::Final, xres, w.ln_f, R, D, c.eps, opt);
        Array& pooled = rec(StageKind::Pooled);
        xt::noalias(as(pooled, std::array<size_t, 2>{B, D})) =
            xt::view(as(lf, R * D, std::array<size_t, 3>{B, T, D}), xt::all(), 0, xt::all());
        feat = pooled.data();
    } else {
        // timm's global_pool='avg': x[:, 1:].mean(1), then LayerNorm (fc_norm)
        Array& pooled = rec(StageKind::Pooled);
        xt::noalias(as(pooled, std::array<size_t, 2>{B, D})) =
            xt::mean(xt::view(as(xres, R * D, std::array<size_t, 3>{B, T, D}), xt::all(), xt::range(1, T), xt::all()),
                     {1});
        feat = layernorm_stage(rec, LnSite::Final, pooled.data(), w.ln_f, B, D, c.eps, opt);
    }
    // logits = head(pooled); probs = logits.softmax(-1)
    Array& logits = rec(StageKind::Logits);
    linear("head", logits.data(), feat, w.head_w, w.head_b, B, packs);
    Array& probs = rec(StageKind::Probs);
    ops::softmax_rows(probs.data(), logits.data(), int(B), int(K));
    rec.done();
    acts.end();
    return logits;
}

}  // namespace vit
