// The core's design promises: one forward pass for tracing and training, loop
// kernels equal to the xtensor expressions they stand in for, and a stage table
// whose texts say what was computed under the options in force.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <xtensor/xadapt.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xreducer.hpp>
#include <xtensor/xstrided_view.hpp>
#include <xtensor/xview.hpp>

#include "core/kernels/ops.h"
#include "core/model/stages.h"
#include "core/train/train.h"

using namespace vit;

namespace {
Tensor3 noise(const Config& c, unsigned seed) {
    Tensor3 x = Tensor3::from_shape({size_t(c.channels), size_t(c.image_size), size_t(c.image_size)});
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd;
    for (auto& v : x) v = nd(rng);
    return x;
}
std::vector<Options> all_options() {
    std::vector<Options> v;
    for (bool affine : {true, false})
        for (bool unbiased : {false, true})
            for (auto pool : {std::optional<Pooling>(), std::optional<Pooling>(Pooling::Mean)}) {
                Options o;
                o.affine = affine;
                o.unbiased = unbiased;
                o.pooling = pool;
                v.push_back(o);
            }
    return v;
}
}  // namespace

// A traced run is a batch of one of the same forward pass that training runs.
TEST(OneForward, TracedRunEqualsTrainingForwardInAnyBatchPosition) {
    Config c = preset("fmnist");
    Weights w = init_weights(c, 4);
    for (const Options& o : all_options()) {
        SCOPED_TRACE(o.describe());
        Tensor3 a = noise(c, 1), b = noise(c, 2), d = noise(c, 3);
        Trace t = run(w, b, o);
        Tensor4 x = Tensor4::from_shape({3, 1, 28, 28});
        xt::view(x, 0) = a;
        xt::view(x, 1) = b;  // the traced image in the middle of a batch
        xt::view(x, 2) = d;
        Batch batch;
        const Array& logits = batch.forward(w, x, o);
        ASSERT_EQ(shape_of(logits), (Shape{3, 10}));
        for (size_t k = 0; k < 10; ++k)
            EXPECT_NEAR(logits(1, k), t.get("logits")(k), 1e-5 * (1 + std::fabs(t.get("logits")(k))));
    }
}

// One run gives the stages and, when asked, the gradient of every stage the table says has one
// (the backward pass writing them all is what this checks: the table only declares them).
TEST(OneForward, RunWithGradsHasAGradientForEveryStageTheTableGivesOne) {
    for (const Options& o : all_options()) {
        SCOPED_TRACE(o.describe());
        Config c = preset("toy-rgb8");
        Weights w = init_weights(c, 2);
        RunRequest req;
        req.grads = true;
        Trace g = run(w, noise(c, 6), o, req);
        Trace plain = run(w, noise(c, 6), o);
        ASSERT_TRUE(g.has_grads());
        int with = 0;
        for (size_t i = 0; i < g.size(); ++i) {
            const StageInfo& s = g.info(i);
            SCOPED_TRACE(s.name);
            EXPECT_EQ(g.grad_at(i) != nullptr, s.has_grad);
            if (s.has_grad) {
                EXPECT_EQ(shape_of(*g.grad_at(i)), s.shape);
                ++with;
            }
            // the forward half is the plain run's, bit for bit
            EXPECT_TRUE(g.at(i) == plain.at(i));
        }
        EXPECT_GT(with, 10);
        const Array& lg = *g.grad(StageId{StageKind::Logits});  // d logit[k] / d logits is one-hot at k
        EXPECT_EQ(lg(size_t(g.grad_class())), 1.f);
        EXPECT_EQ(xt::sum(lg)(), 1.f);
    }
}

// ops::layernorm is a loop over the storage because the reducer expression is ~25x slower on
// ViT-B shapes; here is the expression it replaces, with ddof from the unbiased option.
TEST(XtensorReference, LayerNormKernelEqualsMeanVarianceExpression) {
    const size_t R = 7, D = 33;
    Tensor2 x = Tensor2::from_shape({R, D});
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.5f, 2.f);
    for (auto& v : x) v = nd(rng);
    Tensor1 g = Tensor1::from_shape({D}), b = Tensor1::from_shape({D});
    for (auto& v : g) v = nd(rng);
    for (auto& v : b) v = nd(rng);
    for (bool unbiased : {false, true}) {
        const float eps = 1e-6f;
        Tensor2 out = Tensor2::from_shape({R, D}), norm = Tensor2::from_shape({R, D});
        Tensor1 mean = Tensor1::from_shape({R}), sd = Tensor1::from_shape({R});
        ops::layernorm(out.data(), norm.data(), mean.data(), sd.data(), x.data(), g.data(), b.data(), int(R), int(D),
                       eps, unbiased);
        // torch: mu = x.mean(-1); var = x.var(-1, unbiased=...); (x - mu) / sqrt(var + eps) * g + b
        Tensor1 mu = xt::mean(x, {1});
        Tensor1 var = xt::variance(x, {1}, unbiased ? 1 : 0);
        Tensor2 want_norm = (x - xt::view(mu, xt::all(), xt::newaxis())) /
                            xt::sqrt(xt::view(var, xt::all(), xt::newaxis()) + eps);
        Tensor2 want_out = want_norm * g + b;
        EXPECT_TRUE(xt::allclose(mean, mu, 1e-5, 1e-6));
        EXPECT_TRUE(xt::allclose(sd, xt::sqrt(var), 1e-5, 1e-6));
        EXPECT_TRUE(xt::allclose(norm, want_norm, 1e-5, 1e-5));
        EXPECT_TRUE(xt::allclose(out, want_out, 1e-5, 1e-5));
    }
}

TEST(XtensorReference, SoftmaxKernelEqualsExpAmaxSumExpression) {
    const size_t R = 5, C = 50;
    Tensor2 s = Tensor2::from_shape({R, C}), p = Tensor2::from_shape({R, C});
    std::mt19937 rng(2);
    std::normal_distribution<float> nd(0.f, 4.f);
    for (auto& v : s) v = nd(rng);
    ops::softmax_rows(p.data(), s.data(), int(R), int(C));
    // torch: s.softmax(-1) == exp(s - s.amax(-1, keepdim=True)) / that.sum(-1, keepdim=True)
    Tensor2 e = xt::exp(s - xt::view(xt::amax(s, {1}), xt::all(), xt::newaxis()));
    Tensor2 want = e / xt::view(xt::sum(e, {1}), xt::all(), xt::newaxis());
    EXPECT_TRUE(xt::allclose(p, want, 1e-5, 1e-7));
}

// The q/k/v split is a copy loop (0.04 ms vs 1.15 ms as a strided xtensor assignment);
// the trace's q, k, v must equal the expression qkv.reshape(T, 3, H, d).permute(1, 2, 0, 3).
TEST(XtensorReference, QkvSplitEqualsReshapePermute) {
    Config c = preset("toy-rgb8");
    Weights w = init_weights(c, 3);
    Trace t = run(w, noise(c, 7));
    const size_t T = c.tokens(), H = c.heads, d = c.head_dim(), D = c.width;
    auto ln = xt::adapt(t.get("blocks.0.ln1.out").data(), T * D, xt::no_ownership(), std::array<size_t, 2>{T, D});
    // qkv = ln @ W.T + b, written with xtensor: sum over the input dim of the broadcast product
    Tensor2 qkv = xt::sum(xt::view(ln, xt::all(), xt::newaxis(), xt::all()) * w.blocks[0].qkv_w, {2}) +
                  w.blocks[0].qkv_b;
    Array split = xt::transpose(xt::reshape_view(qkv, std::vector<size_t>{T, 3, H, d}), {1, 2, 0, 3});
    const char* names[3] = {"blocks.0.attn.q", "blocks.0.attn.k", "blocks.0.attn.v"};
    for (size_t j = 0; j < 3; ++j) {
        Array want = xt::view(split, j);
        EXPECT_TRUE(xt::allclose(t.get(names[j]), want, 1e-4, 1e-6)) << names[j];
    }
}

TEST(XtensorReference, GeluIsTheExactErfForm) {
    Config c = preset("toy-gray4");
    Trace t = run(init_weights(c, 3), noise(c, 8));
    const Array& pre = t.get("blocks.0.mlp.pre");
    const Array& post = t.get("blocks.0.mlp.post");
    for (size_t i = 0; i < pre.size(); ++i) {
        double x = pre.flat(i);
        EXPECT_NEAR(post.flat(i), 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))), 1e-6);
    }
}

// What the screen says is generated from the options: every PyTorch line and explanation.
TEST(StageTable, TextsCarryTheOptionsInForce) {
    for (auto name : {"fmnist", "toy-rgb8"})
        for (const Options& o : all_options()) {
            Config c = preset(name);
            c.eps = name[0] == 'f' ? 1e-6f : 1e-12f;
            SCOPED_TRACE(std::string(name) + " " + o.describe());
            const std::string unb = std::string("unbiased=") + (o.unbiased ? "True" : "False");
            const std::string eps = c.eps == 1e-6f ? "1e-06" : "1e-12";
            for (auto& s : *StageTable::get(c, o)) {
                SCOPED_TRACE(s.name);
                EXPECT_FALSE(s.title.empty());
                EXPECT_FALSE(s.what.empty());
                EXPECT_FALSE(s.torch.empty());
                for (const std::string* text : {&s.what, &s.torch, &s.title}) {
                    EXPECT_EQ(text->find("seed"), std::string::npos);       // speaks of the project alone
                    EXPECT_EQ(text->find("notebook"), std::string::npos);
                    EXPECT_EQ(text->find("only nonlinearity"), std::string::npos);
                }
                const bool ln = s.ln != LnSite::None;
                const LnPart part = ln ? ln_part(s.id.kind) : LnPart::Mean;
                if (ln && (part == LnPart::Std || part == LnPart::Normalized))
                    EXPECT_NE(s.torch.find(unb), std::string::npos) << s.torch;
                if (ln && part == LnPart::Normalized) {
                    EXPECT_NE(s.torch.find(eps), std::string::npos) << s.torch;
                    EXPECT_NE(s.what.find(o.unbiased ? "D-1" : "D ="), std::string::npos) << s.what;
                }
                if (ln && part == LnPart::Out) {
                    if (o.affine) EXPECT_NE(s.torch.find("elementwise_affine=True"), std::string::npos) << s.torch;
                    if (!o.affine) EXPECT_NE(s.torch.find("elementwise_affine=False"), std::string::npos) << s.torch;
                    if (!o.unbiased) EXPECT_NE(s.torch.find(eps), std::string::npos) << s.torch;
                }
                if (s.id.kind == StageKind::Pooled)
                    EXPECT_NE(s.torch.find(o.pooling_for(c) == Pooling::Cls ? "x[:, 0]" : "mean(dim=1)"),
                              std::string::npos);
            }
        }
}

// The two teaching bugs do what they say, and their texts say BUG.
TEST(Pitfalls, ScaleAfterSoftmaxRowsSumToOneOverSqrtD) {
    Config c = preset("toy-gray4");
    Weights w = init_weights(c, 3);
    Options bug;
    bug.bug_scale_after_softmax = true;
    Trace good = run(w, noise(c, 9)), bad = run(w, noise(c, 9), bug);
    const Array& p = bad.get("blocks.0.attn.pattern");
    const size_t H = p.shape(0), T = p.shape(1), d = c.head_dim();
    for (size_t h = 0; h < H; ++h)
        for (size_t i = 0; i < T; ++i) {
            double row = 0;
            for (size_t j = 0; j < T; ++j) row += p(h, i, j);
            EXPECT_NEAR(row, 1.0 / std::sqrt(double(d)), 1e-5);
        }
    // the unscaled scores are sqrt(d) times the correct ones
    EXPECT_NEAR(bad.get("blocks.0.attn.scores").flat(3), good.get("blocks.0.attn.scores").flat(3) * std::sqrt(double(d)),
                1e-4);
    for (auto& s : *StageTable::get(c, bug))
        if (s.id.kind == StageKind::AttnPattern) EXPECT_NE(s.torch.find("BUG"), std::string::npos);
}

TEST(Pitfalls, ReshapePatchesIsAPlainReshape) {
    Config c = preset("toy-gray4");
    Options bug;
    bug.bug_reshape_patches = true;
    Tensor3 img = Tensor3::from_shape({1, 4, 4});
    for (size_t i = 0; i < 16; ++i) img.flat(i) = float(i);
    Trace t = run(init_weights(c, 1), img, bug);
    const Array& p = t.get("patches");
    for (size_t i = 0; i < 16; ++i) EXPECT_EQ(p.flat(i), float(i));  // rows are image rows: [0 1 2 3], ...
    EXPECT_NE(t.info(StageId{StageKind::Patches}).title.find("BUG"), std::string::npos);
}
