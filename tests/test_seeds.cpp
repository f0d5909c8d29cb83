// The seed notebooks' toy examples and printed numbers, as tests. Expected
// values are the notebooks' own printed outputs or hand arithmetic.
#include <gtest/gtest.h>

#include <cmath>

#include "core/model/forward.h"
#include "core/model/model.h"
#include "core/kernels/ops.h"

#include <xtensor/xbuilder.hpp>

using namespace vit;

// Seed 000: nn.LayerNorm on [[0,4],[-1,7],[3,5]].
TEST(SeedLayerNorm, MeansStdsAndNormalized) {
    const float x[6] = {0, 4, -1, 7, 3, 5};
    float out[6], norm[6], mean[3], sd[3];
    ops::layernorm(out, norm, mean, sd, x, nullptr, nullptr, 3, 2, 1e-5f, false);
    const float want_mean[3] = {2, 3, 4}, want_std[3] = {2, 4, 1};  // printed by the seed
    for (int r = 0; r < 3; ++r) {
        EXPECT_FLOAT_EQ(mean[r], want_mean[r]);
        EXPECT_FLOAT_EQ(sd[r], want_std[r]);
        // normalized rows have mean 0 and (biased) std 1: here exactly -1, +1 up to eps
        float m = (out[2 * r] + out[2 * r + 1]) / 2;
        float s = std::sqrt(((out[2 * r] - m) * (out[2 * r] - m) + (out[2 * r + 1] - m) * (out[2 * r + 1] - m)) / 2);
        EXPECT_NEAR(m, 0.f, 1e-6);
        EXPECT_NEAR(s, 1.f, 1e-5);
        EXPECT_NEAR(out[2 * r], -1.f, 1e-5);
    }
}

TEST(SeedLayerNorm, UnbiasedStdUsesNMinusOne) {
    const float x[6] = {0, 4, -1, 7, 3, 5};
    float out[6], sd[3];
    ops::layernorm(out, nullptr, nullptr, sd, x, nullptr, nullptr, 3, 2, 1e-5f, true);
    // Hand arithmetic: with N-1 = 1, var = 2 * biased var, std = sqrt(2) * (2, 4, 1).
    EXPECT_NEAR(sd[0], 2 * std::sqrt(2.f), 1e-5);
    EXPECT_NEAR(sd[1], 4 * std::sqrt(2.f), 1e-5);
    EXPECT_NEAR(sd[2], 1 * std::sqrt(2.f), 1e-5);
    EXPECT_NEAR(out[0], -1.f / std::sqrt(2.f), 1e-5);
}

TEST(SeedLayerNorm, AffineParameterCount) {
    // The seed: nn.LayerNorm(2) has 4 trainable parameters with elementwise_affine (weight and
    // bias of size 2) and 0 without. Count a real LayerNorm of a width-2 model: its gamma and beta
    // hold 4 numbers, and with affine off they have no effect on anything (0 parameters in use).
    Config c = preset("toy-gray4");
    c.width = 2; c.heads = 1; c.mlp = 4;
    Weights w = init_weights(c, 1);
    EXPECT_EQ(w.blocks[0].ln1.g.size() + w.blocks[0].ln1.b.size(), 4u);
    Tensor3 img = Tensor3::from_shape({1, 4, 4});
    for (size_t i = 0; i < 16; ++i) img.flat(i) = std::cos(float(i));
    Options off;
    off.affine = false;
    Trace a = run(w, img, off);
    w.blocks[0].ln1.g = {5.f, -2.f};
    w.blocks[0].ln1.b = {1.f, 3.f};
    Trace b = run(w, img, off), on = run(w, img);
    EXPECT_EQ(a.get("logits"), b.get("logits"));      // gamma, beta unused without affine
    EXPECT_NE(on.get("logits"), b.get("logits"));     // ...and used with it
    // Every LayerNorm of the model holds 2*D of its parameters: 2 per block + the final one.
    size_t ln = 0;
    for_each_param([&](const std::string& n, const auto& t) { if (n.find("norm") != std::string::npos) ln += t.size(); }, w);
    EXPECT_EQ(ln, size_t((2 * c.depth + 1) * 2 * c.width));
}

// Seed 001: torch.arange(16).reshape(4,4) cut into 2x2 patches with unfold.
TEST(SeedPatches, ArangeImageUnfold) {
    Config c = preset("toy-gray4");
    Weights w = init_weights(c, 1);
    Tensor3 img = Tensor3::from_shape({1, 4, 4});
    for (int i = 0; i < 16; ++i) img.flat(i) = float(i);
    Trace t = run(w, img);
    const Array& p = t.get("patches");
    ASSERT_EQ(shape_of(p), (Shape{4, 4}));
    const float want[4][4] = {{0, 1, 4, 5}, {2, 3, 6, 7}, {8, 9, 12, 13}, {10, 11, 14, 15}};  // printed by the seed
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) EXPECT_EQ(p(i, j), want[i][j]) << i << "," << j;
}

TEST(SeedPatches, PlainReshapeWouldBeWrong) {
    // The bug worth teaching: img.reshape(4, 4) keeps image rows, not patches.
    // Row 0 of a plain reshape is [0,1,2,3]; the real first patch is [0,1,4,5].
    Config c = preset("toy-gray4");
    Tensor3 img = Tensor3::from_shape({1, 4, 4});
    for (int i = 0; i < 16; ++i) img.flat(i) = float(i);
    Trace t = run(init_weights(c, 1), img);
    EXPECT_NE(t.get("patches")(0, 2), img.flat(2));
}

// Seed 000: Conv2d(3, 6, 4, stride 4) on an 8x8 image -> (1, 6, 2, 2) -> (4, 6) tokens,
// the cls token makes it (5, 6).
TEST(SeedShapes, ToyRgbPatchEmbedAndClsToken) {
    Config c = preset("toy-rgb8");
    Weights w = init_weights(c, 2);
    Tensor3 img = xt::zeros<float>({3, 8, 8});
    Trace t = run(w, img);
    EXPECT_EQ(shape_of(t.get("patches")), (Shape{4, 48}));
    EXPECT_EQ(shape_of(t.get("patch_embed")), (Shape{4, 6}));
    EXPECT_EQ(shape_of(t.get("tokens")), (Shape{5, 6}));
    EXPECT_EQ(shape_of(t.get("embed")), (Shape{5, 6}));
}

TEST(SeedShapes, PatchEmbedEqualsConvolution) {
    // patch_embed(n, o) must equal Conv2d: sum over c, ky, kx of W[o,c,ky,kx] * x[c, gy*P+ky, gx*P+kx] + b[o].
    Config c = preset("toy-rgb8");
    Weights w = init_weights(c, 3);
    Tensor3 img = Tensor3::from_shape({3, 8, 8});
    for (size_t i = 0; i < img.size(); ++i) img.flat(i) = std::sin(0.37f * float(i));
    Trace t = run(w, img);
    const Array& pe = t.get("patch_embed");
    for (int gy = 0; gy < 2; ++gy)
        for (int gx = 0; gx < 2; ++gx)
            for (int o = 0; o < 6; ++o) {
                double s = w.patch_b(o);
                for (int ch = 0; ch < 3; ++ch)
                    for (int ky = 0; ky < 4; ++ky)
                        for (int kx = 0; kx < 4; ++kx)
                            s += double(w.patch_w.flat(o * 48 + ch * 16 + ky * 4 + kx)) * img.flat(ch * 64 + (gy * 4 + ky) * 8 + gx * 4 + kx);
                EXPECT_NEAR(pe(gy * 2 + gx, o), s, 1e-5);
            }
}

// Seed 002 / DESIGN.md: published parameter counts.
TEST(SeedParamCounts, PublishedVitSizes) {
    EXPECT_EQ(param_count(preset("vit-ti16")), 5717416);
    EXPECT_EQ(param_count(preset("vit-s16")), 22050664);
    EXPECT_EQ(param_count(preset("vit-b16")), 86567656);
    EXPECT_EQ(param_count(preset("vit-l16")), 304326632);
    EXPECT_EQ(param_count(preset("vit-h14")), 632045800);
}

TEST(SeedParamCounts, SeedsTwoFiftySixPixelVariants) {
    // The seed builds ViT-L and ViT-H at 256 pixels with its default patch 16 and prints these.
    Config l = preset("vit-l16");
    l.image_size = 256;
    EXPECT_EQ(param_count(l), 304388072);
    Config h = preset("vit-h14");
    h.image_size = 256;
    h.patch = 16;
    EXPECT_EQ(param_count(h), 632276200);
}

TEST(SeedParamCounts, InitialisedWeightsHoldExactlyThatMany) {
    for (auto name : {"toy-rgb8", "toy-gray4", "fmnist", "vit-ti16"}) {
        SCOPED_TRACE(name);
        Weights w = init_weights(preset(name), 0);
        EXPECT_EQ(int64_t(param_numel(w)), param_count(w.cfg));
    }
}

// Seed 001's single-head attention: scaling by sqrt(d_k) BEFORE the softmax.
TEST(SeedAttention, ScaleBeforeSoftmaxNotAfter) {
    Config c = preset("toy-gray4");
    Weights w = init_weights(c, 5);
    Tensor3 img = Tensor3::from_shape({1, 4, 4});
    for (int i = 0; i < 16; ++i) img.flat(i) = float(i);
    Trace t = run(w, img);
    const Array& q = t.get("blocks.0.attn.q");
    const Array& k = t.get("blocks.0.attn.k");
    const Array& s = t.get("blocks.0.attn.scores");
    const Array& p = t.get("blocks.0.attn.pattern");
    const size_t H = q.shape(0), T = q.shape(1), d = q.shape(2);
    for (size_t h = 0; h < H; ++h)
        for (size_t i = 0; i < T; ++i) {
            double rowsum = 0, denom = 0;
            for (size_t j = 0; j < T; ++j) {
                double dot = 0;
                for (size_t e = 0; e < d; ++e) dot += double(q(h, i, e)) * k(h, j, e);
                EXPECT_NEAR(s(h, i, j), dot / std::sqrt(double(d)), 1e-5);
                denom += std::exp(dot / std::sqrt(double(d)));
            }
            for (size_t j = 0; j < T; ++j) rowsum += p(h, i, j);
            EXPECT_NEAR(rowsum, 1.0, 1e-5);  // the seed's "softmax then scale" rows would sum to 1/sqrt(d)
        }
}
