// Trace structure and the teaching options.
#include <gtest/gtest.h>

#include <cmath>

#include "core/model/forward.h"

using namespace vit;

namespace {
Tensor3 wave(const Config& c) {
    Tensor3 x = Tensor3::from_shape({size_t(c.channels), size_t(c.image_size), size_t(c.image_size)});
    for (size_t i = 0; i < x.size(); ++i) x.flat(i) = std::sin(0.1f * float(i));
    return x;
}
}  // namespace

TEST(Trace, NamesInDesignOrderAndStageNamesAgree) {
    Config c = preset("fmnist");
    Weights w = init_weights(c, 3);
    Trace t = run(w, wave(c));
    auto names = stage_names(c);
    ASSERT_EQ(t.size(), names.size());
    for (size_t i = 0; i < names.size(); ++i) {
        SCOPED_TRACE(names[i]);
        EXPECT_EQ(t.at(i).name, names[i]);
    }
    EXPECT_EQ(t.at(t.index_of("blocks.5.attn.pattern")).layer, 5);
    EXPECT_EQ(shape_of(t.get("blocks.0.attn.pattern")), (Shape{4, 50, 50}));
    EXPECT_EQ(shape_of(t.get("blocks.0.mlp.pre")), (Shape{50, 128}));
    EXPECT_EQ(shape_of(t.get("probs")), (Shape{10}));
    EXPECT_THROW(t.get("blocks.6.attn.q"), std::out_of_range);
}

TEST(Trace, StageShapesWithoutWeightsMatchARealRun) {
    for (auto name : {"toy-rgb8", "toy-gray4", "fmnist"})
        for (std::optional<Pooling> pool : {std::optional<Pooling>(), std::optional<Pooling>(Pooling::Mean)}) {
            SCOPED_TRACE(name);
            Config c = preset(name);
            Options o;
            o.pooling = pool;
            Trace t = run(init_weights(c, 1), wave(c), o);
            auto sh = stage_shapes(c, o);
            ASSERT_EQ(sh.size(), t.size());
            for (size_t i = 0; i < sh.size(); ++i) {
                EXPECT_EQ(sh[i].first, t.at(i).name);
                EXPECT_EQ(sh[i].second, shape_of(t.at(i).tensor)) << sh[i].first;
            }
        }
}

TEST(Trace, RerunReusesBuffersAndResultsAreIdentical) {
    Config c = preset("toy-rgb8");
    Weights w = init_weights(c, 3);
    Trace t;
    forward(w, wave(c), {}, t);
    const float* before = t.get("blocks.0.attn.pattern").data();
    float l0 = t.get("logits").flat(0);
    forward(w, wave(c), {}, t);
    EXPECT_EQ(before, t.get("blocks.0.attn.pattern").data());
    EXPECT_EQ(l0, t.get("logits").flat(0));
    Options o;
    o.pooling = Pooling::Mean;  // different sequence of stages: rebuilt, index kept consistent
    forward(w, wave(c), o, t);
    EXPECT_EQ(t.index_of("pooled") + 1, t.index_of("ln_final.mean"));
    EXPECT_EQ(shape_of(t.get("ln_final.out")), (Shape{1, 6}));
}

TEST(Options, NoAffineIgnoresGammaAndBeta) {
    Config c = preset("toy-gray4");
    Weights w = init_weights(c, 3);
    for (size_t i = 0; i < 8; ++i) { w.blocks[0].ln1.g(i) = 3.f; w.blocks[0].ln1.b(i) = 1.f; }
    Options off;
    off.affine = false;
    Trace a = run(w, wave(c)), b = run(w, wave(c), off);
    const Array& n = a.get("blocks.0.ln1.normalized");
    for (size_t i = 0; i < n.size(); ++i) {
        EXPECT_NEAR(a.get("blocks.0.ln1.out").flat(i), 3.f * n.flat(i) + 1.f, 1e-5);
        EXPECT_EQ(b.get("blocks.0.ln1.out").flat(i), b.get("blocks.0.ln1.normalized").flat(i));
    }
    // ...and the effect reaches the logits.
    EXPECT_NE(a.get("logits").flat(0), b.get("logits").flat(0));
}

TEST(Options, UnbiasedShrinksNormalizedBySqrtNMinus1OverN) {
    Config c = preset("toy-gray4");
    Weights w = init_weights(c, 3);
    Options u;
    u.unbiased = true;
    Trace a = run(w, wave(c)), b = run(w, wave(c), u);
    // Same input to ln1 (D = 8). Biased: (x-m)/sqrt(s^2+eps); unbiased: (x-m)/sqrt(s^2*8/7+eps),
    // with s the biased std the trace records.
    const Array &na = a.get("blocks.0.ln1.normalized"), &nb = b.get("blocks.0.ln1.normalized");
    const Array& sd = a.get("blocks.0.ln1.std");
    const double eps = c.eps;
    for (size_t i = 0; i < na.size(); ++i) {
        double s2 = double(sd.flat(i / 8)) * sd.flat(i / 8);
        EXPECT_NEAR(nb.flat(i), na.flat(i) * std::sqrt((s2 + eps) / (s2 * 8.0 / 7.0 + eps)), 1e-5);
    }
    EXPECT_NEAR(b.get("blocks.0.ln1.std").flat(0), sd.flat(0) * std::sqrt(8.0 / 7.0), 1e-6);
}

// The forward pass holds the array record() returned while it records the next stages
// (patches is read after patch_embed is recorded): the reference must survive appends.
// A std::vector of entries broke this (found by the ASan build: heap-use-after-free).
TEST(Trace, ReferencesFromRecordSurviveLaterRecords) {
    Trace t;
    t.begin();
    Array& first = t.record("first", -1, {3});
    first.fill(7.f);
    for (int i = 0; i < 1000; ++i) t.record("stage" + std::to_string(i), -1, {2, 2});
    t.end();
    EXPECT_EQ(&first, &t.get("first"));
    EXPECT_EQ(first.flat(2), 7.f);
}
