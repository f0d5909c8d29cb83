// Trace structure and the teaching options.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/model/forward.h"

using namespace vit;

namespace {
Tensor3 wave(const Config& c) {
    Tensor3 x = Tensor3::from_shape({size_t(c.channels), size_t(c.image_size), size_t(c.image_size)});
    for (size_t i = 0; i < x.size(); ++i) x.flat(i) = std::sin(0.1f * float(i));
    return x;
}
}  // namespace

TEST(Trace, NamesInDesignOrder) {
    Config c = preset("fmnist");
    Weights w = init_weights(c, 3);
    Trace t = run(w, wave(c));
    // The order of DESIGN.md's trace names, written out here (not read from the table).
    const std::vector<std::string> head{"input", "patches", "patch_embed", "tokens", "pos_embed", "embed",
                                        "blocks.0.ln1.mean", "blocks.0.ln1.std", "blocks.0.ln1.normalized",
                                        "blocks.0.ln1.out", "blocks.0.attn.q", "blocks.0.attn.k", "blocks.0.attn.v",
                                        "blocks.0.attn.scores", "blocks.0.attn.pattern", "blocks.0.attn.z",
                                        "blocks.0.attn.out", "blocks.0.resid_mid", "blocks.0.ln2.mean",
                                        "blocks.0.ln2.std", "blocks.0.ln2.normalized", "blocks.0.ln2.out",
                                        "blocks.0.mlp.pre", "blocks.0.mlp.post", "blocks.0.mlp.out",
                                        "blocks.0.resid_post", "blocks.1.ln1.mean"};
    const std::vector<std::string> tail{"blocks.5.resid_post", "ln_final.mean", "ln_final.std",
                                        "ln_final.normalized", "ln_final.out", "pooled", "logits", "probs"};
    ASSERT_EQ(t.size(), 6 + 6 * 20 + 4 + 3);
    for (size_t i = 0; i < head.size(); ++i) EXPECT_EQ(t.name(i), head[i]);
    for (size_t i = 0; i < tail.size(); ++i) EXPECT_EQ(t.name(t.size() - tail.size() + i), tail[i]);
    EXPECT_EQ(t.info(size_t(t.index_of("blocks.5.attn.pattern"))).layer, 5);
    EXPECT_EQ(shape_of(t.get("blocks.0.attn.pattern")), (Shape{4, 50, 50}));
    EXPECT_EQ(shape_of(t.get("blocks.0.mlp.pre")), (Shape{50, 128}));
    EXPECT_EQ(shape_of(t.get("probs")), (Shape{10}));
    EXPECT_EQ(shape_of(t.get("pos_embed")), (Shape{50, 64}));
    EXPECT_THROW(t.get("blocks.6.attn.q"), std::out_of_range);
    EXPECT_EQ(t.find(StageId{StageKind::AttnQ, 6}), nullptr);
}

// The trace knows what it is: the options and model it was computed with, and its table.
TEST(Trace, CarriesItsOptionsModelAndTable) {
    Config c = preset("toy-gray4");
    Weights w = init_weights(c, 3);
    Options o;
    o.affine = false;
    o.pooling = Pooling::Mean;
    RunRequest req;
    req.model = {"toy", "preset:toy-gray4"};
    Trace t = run(w, wave(c), o, req);
    EXPECT_EQ(t.options(), o);
    EXPECT_EQ(t.model().source, "preset:toy-gray4");
    EXPECT_EQ(t.table_ptr(), StageTable::get(c, o));  // shared, not rebuilt
    EXPECT_NE(t.info(StageId{StageKind::Ln1Out, 0}).what.find("elementwise_affine is off"), std::string::npos);
    EXPECT_NE(t.info(StageId{StageKind::Pooled}).torch.find("mean"), std::string::npos);
    EXPECT_FALSE(t.has_grads());
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
    o.pooling = Pooling::Mean;  // a different sequence of stages: another table, index kept consistent
    forward(w, wave(c), o, t);
    EXPECT_EQ(t.index_of("pooled") + 1, t.index_of("ln_final.mean"));
    EXPECT_EQ(shape_of(t.get("ln_final.out")), (Shape{1, 6}));
    EXPECT_EQ(t.options(), o);
}

TEST(Trace, ReusedAcrossOptionsEqualsAFreshTrace) {
    // The window records a toggle's pass into the arrays of the trace before last (another table: other
    // options). Every row must be this run's, bit for bit as a fresh trace: nothing left of the last run,
    // where the rows are laid out differently (mean pooling moves the head's rows; no-affine drops a row).
    Config c = preset("toy-rgb8");
    Weights w = init_weights(c, 3);
    Options a, b;
    a.pooling = Pooling::Mean;
    b.affine = false;
    b.unbiased = true;
    for (const auto& [first, then] : {std::pair{a, b}, std::pair{b, a}, std::pair{Options{}, b}}) {
        Trace reused, fresh;
        forward(w, wave(c), first, reused);
        const float* kept = reused.at(0).data();
        forward(w, wave(c), then, reused);
        forward(w, wave(c), then, fresh);
        EXPECT_EQ(kept, reused.at(0).data());  // the input's array was written in place
        ASSERT_EQ(reused.size(), fresh.size());
        for (size_t r = 0; r < fresh.size(); ++r) {
            SCOPED_TRACE(fresh.name(r));
            ASSERT_EQ(reused.name(r), fresh.name(r));
            ASSERT_EQ(reused.index(reused.info(r).id), fresh.index(fresh.info(r).id));
            if (fresh.index(fresh.info(r).id) < 0) continue;
            ASSERT_EQ(shape_of(reused.at(r)), shape_of(fresh.at(r)));
            EXPECT_EQ(0, std::memcmp(reused.at(r).data(), fresh.at(r).data(), fresh.at(r).size() * sizeof(float)));
        }
    }
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
// (patches is read after patch_embed is recorded): the reference must survive them.
// (Entries in a growing std::vector broke this once: heap-use-after-free under ASan.)
TEST(Trace, ReferencesFromRecordSurviveLaterRecords) {
    Config c = preset("vit-ti16");
    auto table = StageTable::get(c);
    Trace t;
    t.begin(table, {}, {});
    Array& first = t.record(0, {3});
    first.fill(7.f);
    for (size_t i = 1; i < table->size(); ++i) t.record(i, {2, 2});
    t.end();
    EXPECT_EQ(&first, &t.at(0));
    EXPECT_EQ(first.flat(2), 7.f);
    EXPECT_THROW(t.record(5, {1}), std::logic_error);  // rows are recorded in order, once
}
