// The random presets' LayerNorms (issue 35 item 5) and what the screen says when a switch changes
// nothing (issue 36 item 2): a preset's gamma and beta are random, so turning elementwise_affine off
// moves every LayerNorm's output; a model whose norms are still nn.LayerNorm's ones and zeros moves
// nowhere, and why_nothing_changed says why in those words.
#include <gtest/gtest.h>

#include <random>

#include "core/io/checkpoint.h"
#include "core/model/forward.h"
#include "core/teach/analysis.h"

using namespace vit;

namespace {
Tensor3 noise(const Config& c, unsigned seed) {
    Tensor3 x = Tensor3::from_shape({size_t(c.channels), size_t(c.image_size), size_t(c.image_size)});
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd;
    for (auto& v : x) v = nd(rng);
    return x;
}
template <class A, class B>
double max_abs_diff(const A& a, const B& b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a.data()[i] - b.data()[i])));
    return m;
}
}  // namespace

TEST(PresetNorms, RandomGammaAndBetaInEveryLayerNorm) {
    for (const char* name : {"toy-rgb8", "vit-ti16", "fmnist", "clip-b32"}) {
        SCOPED_TRACE(name);
        const LoadedModel m = load_model(name);
        const Weights& w = m.weights;
        EXPECT_FALSE(layernorms_are_identity(w));
        // every LayerNorm, not only the first: no gamma of 1, no beta of 0 left anywhere
        auto check = [](const LayerNormW& l) {
            for (float g : l.g) EXPECT_TRUE(g >= 0.5f && g <= 1.5f && g != 1.f) << g;
            for (float b : l.b) EXPECT_TRUE(b >= -0.5f && b <= 0.5f && b != 0.f) << b;
        };
        for (const BlockW& b : w.blocks) { check(b.ln1); check(b.ln2); }
        check(w.ln_f);
        if (w.ln_pre.g.size()) check(w.ln_pre);
        // the same seed gives the same weights (a preset is reproducible)
        const LoadedModel again = load_model(name);
        EXPECT_EQ(max_abs_diff(again.weights.blocks[0].ln1.g, w.blocks[0].ln1.g), 0);
    }
}

TEST(PresetNorms, AffineOffMovesAPresetsLayerNormOutputs) {
    const LoadedModel m = load_model("toy-rgb8");
    const Tensor3 x = noise(m.weights.cfg, 3);
    Options off;
    off.affine = false;
    const Trace a = run(m.weights, x), b = run(m.weights, x, off);
    const StageId out{StageKind::Ln1Out, 0}, normalized{StageKind::Ln1Normalized, 0};
    EXPECT_GT(max_abs_diff(a.get(out), b.get(out)), 0.05);
    EXPECT_GT(max_abs_diff(a.get(StageId{StageKind::Logits}), b.get(StageId{StageKind::Logits})), 0);
    EXPECT_EQ(max_abs_diff(b.get(out), b.get(normalized)), 0);  // off: out is normalized
    EXPECT_EQ(why_nothing_changed(m.weights, Options{}, Options{}), "");
}

TEST(PresetNorms, NothingChangedIsExplained) {
    // nn.LayerNorm's initial values (what init_weights keeps, what a preset had before issue 35): affine off changes nothing
    const Weights w = init_weights(preset("toy-rgb8"), 3);
    ASSERT_TRUE(layernorms_are_identity(w));
    const Tensor3 x = noise(w.cfg, 4);
    Options off;
    off.affine = false;
    const Trace a = run(w, x), b = run(w, x, off);
    for (const StageChange& c : trace_changes(a, b)) EXPECT_EQ(c.diff_norm, 0) << c.name;
    const std::string why = why_nothing_changed(w, off, Options{});
    EXPECT_NE(why.find("gamma = 1 and beta = 0"), std::string::npos) << why;
    // a pooling asked for that is the model's own
    Options cls;
    cls.pooling = w.cfg.pooling;
    EXPECT_NE(why_nothing_changed(w, cls, Options{}).find("this model's own"), std::string::npos);
}
