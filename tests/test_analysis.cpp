// Attention maps and statistics against hand arithmetic on tiny traces.
#include <gtest/gtest.h>

#include <cmath>

#include "core/teach/analysis.h"
#include "core/model/forward.h"

#include <xtensor/xbuilder.hpp>

using namespace vit;

namespace {
// A hand-made trace holding only blocks.{l}.attn.pattern of shape (H, T, T) with given values
// (and, with `grad`, the gradient of the last one): recorded through a real table's rows.
Trace patterns(const std::vector<std::vector<float>>& layers, size_t H, size_t T,
               const std::vector<float>* grad = nullptr, const std::vector<std::vector<float>>* grads = nullptr) {
    Config c = preset("toy-gray4");
    c.depth = int(layers.size());
    Options o;  // an input of one row of T - 1 patches, so the table's run has the trace's tokens
    o.image_h = c.patch;
    o.image_w = int(T - 1) * c.patch;
    auto table = StageTable::get(c, o);
    Trace t;
    t.begin(table, o, {"hand-made", ""});
    for (size_t l = 0; l < layers.size(); ++l) {
        Array& p = t.record(size_t(table->index({StageKind::AttnPattern, int(l)})), {H, T, T});
        std::copy(layers[l].begin(), layers[l].end(), p.begin());
    }
    t.end();
    if (grad) {
        Array& g = t.record_grad({StageKind::AttnPattern, int(layers.size()) - 1}, {H, T, T});
        std::copy(grad->begin(), grad->end(), g.begin());
    }
    for (size_t l = 0; grads && l < grads->size(); ++l) {  // one per layer
        Array& g = t.record_grad({StageKind::AttnPattern, int(l)}, {H, T, T});
        std::copy((*grads)[l].begin(), (*grads)[l].end(), g.begin());
    }
    return t;
}
}  // namespace

TEST(Analysis, ClsAttentionIsRowZeroWithoutTheClsColumn) {
    // H = 2, T = 3: head 0 cls row [.2 .3 .5], head 1 cls row [.6 .1 .3]
    Trace t = patterns({{.2f, .3f, .5f, 1, 0, 0, 0, 1, 0, .6f, .1f, .3f, 1, 0, 0, 0, 1, 0}}, 2, 3);
    auto h0 = cls_attention(t, 0, 0), mean = cls_attention(t, 0, -1);
    ASSERT_EQ(h0.size(), 2u);
    EXPECT_FLOAT_EQ(h0[0], .3f);
    EXPECT_FLOAT_EQ(h0[1], .5f);
    EXPECT_FLOAT_EQ(mean[0], .2f);  // (.3 + .1) / 2
    EXPECT_FLOAT_EQ(mean[1], .4f);  // (.5 + .3) / 2
}

TEST(Analysis, RolloutOfOneLayerIsHalfAttentionPlusHalfIdentity) {
    // One head, T = 3, cls row [.2 .3 .5]: (A + I) / 2 has cls row [.6 .15 .25] (rows still sum to 1).
    Trace t = patterns({{.2f, .3f, .5f, .1f, .8f, .1f, .3f, .3f, .4f}}, 1, 3);
    auto r = attention_rollout(t, 0, Fusion::Mean, 0.f);
    EXPECT_NEAR(r[0], .15, 1e-6);
    EXPECT_NEAR(r[1], .25, 1e-6);
}

TEST(Analysis, RolloutOfTwoLayersMultiplies) {
    // Identity attention in layer 0 leaves layer 1's result unchanged; hand product for two equal layers.
    std::vector<float> A = {.2f, .3f, .5f, .1f, .8f, .1f, .3f, .3f, .4f}, I = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    Trace t = patterns({I, A}, 1, 3);
    auto r = attention_rollout(t, 1, Fusion::Mean, 0.f);
    EXPECT_NEAR(r[0], .15, 1e-6);
    EXPECT_NEAR(r[1], .25, 1e-6);
    // B = (A+I)/2 = [[.6 .15 .25] [.05 .9 .05] [.15 .15 .7]]; (B B) row 0 = [.3825 .2625 .355]
    Trace t2 = patterns({A, A}, 1, 3);
    auto r2 = attention_rollout(t2, 1, Fusion::Mean, 0.f);
    EXPECT_NEAR(r2[0], .6 * .15 + .15 * .9 + .25 * .15, 1e-6);
    EXPECT_NEAR(r2[1], .6 * .25 + .15 * .05 + .25 * .7, 1e-6);
}

TEST(Analysis, RolloutMultipliesTheLaterLayerOnTheLeft) {
    // Two different layers: R = B1 B0 with B = (A + I) / 2 (layer 0: A, layer 1: C).
    // B1 row 0 = [.85 .1 .05]; B0 = [[.6 .15 .25] [.05 .9 .05] [.15 .15 .7]];
    // row 0 of B1 B0 = .85 B0[0] + .1 B0[1] + .05 B0[2] = [.5225 .225 .2525] (B0 B1 would give [.595 .18875 .21625]).
    std::vector<float> A = {.2f, .3f, .5f, .1f, .8f, .1f, .3f, .3f, .4f}, C = {.7f, .2f, .1f, .3f, .3f, .4f, .5f, .25f, .25f};
    auto r = attention_rollout(patterns({A, C}, 1, 3), 1, Fusion::Mean, 0.f);
    EXPECT_NEAR(r[0], .225, 1e-6);
    EXPECT_NEAR(r[1], .2525, 1e-6);
    // Up to layer 0 only: B0's row 0.
    auto r0 = attention_rollout(patterns({A, C}, 1, 3), 0, Fusion::Mean, 0.f);
    EXPECT_NEAR(r0[0], .15, 1e-6);
    EXPECT_NEAR(r0[1], .25, 1e-6);
}

TEST(Analysis, RolloutDiscardThinsEveryRowButNeverItsDiagonal) {
    // discard 0.34 of T = 3: the smallest weight of each row is dropped (k = 1), never the diagonal,
    // before (A + I) / 2 and the renormalisation. Layer 0 (A): row 0's smallest is its diagonal (.2),
    // so nothing goes: [.6 .15 .25]; row 1 [.1 .8 .1] loses its first .1: [0 .9 .05] / .95;
    // row 2 [.3 .3 .4] loses its first .3: [0 .15 .7] / .85. Layer 1 (C) row 0 [.7 .2 .1] loses .1:
    // [.85 .1 0] / .95. Row 0 of the product: 17/19 [.6 .15 .25] + 2/19 [0 18/19 1/19].
    std::vector<float> A = {.2f, .3f, .5f, .1f, .8f, .1f, .3f, .3f, .4f}, C = {.7f, .2f, .1f, .3f, .3f, .4f, .5f, .25f, .25f};
    auto r = attention_rollout(patterns({A, C}, 1, 3), 1, Fusion::Mean, 0.34f);
    EXPECT_NEAR(r[0], 17. / 19 * .15 + 2. / 19 * 18. / 19, 1e-6);
    EXPECT_NEAR(r[1], 17. / 19 * .25 + 2. / 19 * 1. / 19, 1e-6);
    // Without the discard the same layers give B1 B0's row 0 (the test above): the thinning changes it.
    auto r0 = attention_rollout(patterns({A, C}, 1, 3), 1, Fusion::Mean, 0.f);
    EXPECT_NEAR(r0[0], .225, 1e-6);
}

TEST(Analysis, GradRolloutOfTwoLayers) {
    // R = (I + relu(G1 * C)) (I + relu(G0 * A)): row 0 of M1 = [1 .6 .1], M0 = [[1.2 0 2] [.05 1 0] [0 0 1.4]],
    // row 0 of M1 M0 = [1.23 .6 2.14] (M0 M1 would give [3.2 .72 2.12]).
    std::vector<float> A = {.2f, .3f, .5f, .1f, .8f, .1f, .3f, .3f, .4f}, C = {.7f, .2f, .1f, .3f, .3f, .4f, .5f, .25f, .25f};
    std::vector<std::vector<float>> G = {{1, -2, 4, .5f, 0, 0, 0, 0, 1}, {0, 3, 1, 1, 1, -1, 2, 0, 0}};
    auto r = grad_rollout(patterns({A, C}, 1, 3, nullptr, &G), 1);
    EXPECT_NEAR(r[0], .6, 1e-6);
    EXPECT_NEAR(r[1], 2.14, 1e-6);
}

TEST(Analysis, RolloutHeadFusionMax) {
    // Two heads; max fusion takes the elementwise max before the (A + I) / 2 step and renormalises.
    std::vector<float> a = {.2f, .3f, .5f, 1, 0, 0, 0, 0, 1, .6f, .1f, .3f, 1, 0, 0, 0, 0, 1};
    Trace t = patterns({a}, 2, 3);
    auto r = attention_rollout(t, 0, Fusion::Max, 0.f);
    // max row 0 = [.6 .3 .5] -> /2 + I -> [.8 .15 .25] / 1.2
    EXPECT_NEAR(r[0], .15 / 1.2, 1e-6);
    EXPECT_NEAR(r[1], .25 / 1.2, 1e-6);
}

TEST(Analysis, GradRolloutUsesPositiveGradTimesAttention) {
    // One layer, one head: R = I + relu(g * A); cls row excluding the cls column.
    std::vector<float> A = {.2f, .3f, .5f, .1f, .8f, .1f, .3f, .3f, .4f};
    std::vector<float> G = {1, -2, 4, 0, 0, 0, 0, 0, 0};
    Trace t = patterns({A}, 1, 3, &G);
    auto r = grad_rollout(t, 0);
    EXPECT_THROW(grad_rollout(patterns({A}, 1, 3), 0), std::invalid_argument);  // no gradients in the trace
    EXPECT_NEAR(r[0], 0.0, 1e-7);      // relu(-2 * .3) = 0
    EXPECT_NEAR(r[1], 4 * .5, 1e-6);   // relu(4 * .5)
}

TEST(Analysis, StatsAndChanges) {
    float x[5] = {1, 2, 3, 4, 10};
    Stats s = stats(x, 5, 3);
    EXPECT_FLOAT_EQ(s.min, 1);
    EXPECT_FLOAT_EQ(s.max, 10);
    EXPECT_FLOAT_EQ(s.mean, 4);
    EXPECT_NEAR(s.std, std::sqrt(10.0), 1e-5);  // population std of 1,2,3,4,10
    EXPECT_EQ(s.argmax, 4u);
    EXPECT_FLOAT_EQ(s.hist[0] + s.hist[1] + s.hist[2], 5);
    // bins of width 3 over [1, 10]: [1, 4) holds 1, 2, 3; [4, 7) holds 4; [7, 10] holds 10
    EXPECT_FLOAT_EQ(s.hist[0], 3);
    EXPECT_FLOAT_EQ(s.hist[1], 1);
    EXPECT_FLOAT_EQ(s.hist[2], 1);
}


