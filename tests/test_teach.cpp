// The teaching computations (core/teach/teach.h): the math of one cell against the trace's
// values on random cells of every supported stage under every option, the logit lens
// against `probs`, and hand-computed cases for the attention distance, the PCA of the
// embedding filters and the position similarity. (Parity with numpy/PyTorch on random
// models: tests/parity/test_teach.py.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <xtensor/xmath.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xsort.hpp>
#include <xtensor/xview.hpp>

#include "core/teach/analysis.h"
#include "core/io/dataset.h"
#include "core/io/image.h"
#include "core/model/forward.h"
#include "core/teach/teach.h"

using namespace vit;

namespace {

Config small(Pooling pool = Pooling::Cls) {
    Config c;
    c.name = "teach-test";
    c.image_size = 16; c.channels = 3; c.patch = 4; c.width = 32; c.depth = 2; c.heads = 4; c.mlp = 64;
    c.classes = 7; c.pooling = pool;
    return c;
}

// Random non-trivial values for every parameter (LayerNorm gamma around 1, biases too).
Weights random_weights(const Config& c, uint64_t seed) {
    Weights w = init_weights(c, seed);
    std::mt19937_64 rng(seed + 1);
    std::normal_distribution<float> nd(0.f, 1.f);
    for_each_param([&](const std::string& name, auto& p) {
        const bool ln_gamma = p.dimension() == 1 && name.find("norm") != std::string::npos &&
                              name.find("weight") != std::string::npos;
        const float s = p.dimension() == 2 ? 1.f / std::sqrt(float(p.shape(1))) : 0.2f;
        for (auto& v : p) v = (ln_gamma ? 1.f : 0.f) + s * nd(rng);
    }, w);
    return w;
}

Tensor3 random_input(const Config& c, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    Tensor3 x = Tensor3::from_shape({size_t(c.channels), size_t(c.image_size), size_t(c.image_size)});
    for (auto& v : x) v = nd(rng);
    return x;
}

struct Variant { const char* name; Options opt; };
std::vector<Variant> variants() {
    std::vector<Variant> v;
    v.push_back({"default", {}});
    Options o;
    o.affine = false; v.push_back({"no-affine", o});
    o = {}; o.unbiased = true; v.push_back({"unbiased", o});
    o = {}; o.affine = false; o.unbiased = true; v.push_back({"no-affine+unbiased", o});
    o = {}; o.pooling = Pooling::Mean; v.push_back({"mean pooling", o});
    o = {}; o.bug_scale_after_softmax = true; v.push_back({"bug scale after softmax", o});
    o = {}; o.bug_reshape_patches = true; v.push_back({"bug reshape patches", o});
    return v;
}

bool within(const CellMath& m) {
    return std::fabs(m.value - double(m.recorded)) <= 1e-6 * std::max(std::fabs(double(m.recorded)), m.scale);
}

}  // namespace

TEST(CellMath, RandomCellsOfEverySupportedStageEqualTheTrace) {
    std::mt19937_64 rng(42);
    for (const Variant& var : variants()) {
        const Weights w = random_weights(small(), 7);
        const Trace t = run(w, random_input(w.cfg, 3), var.opt);
        int checked = 0, stages = 0;
        std::vector<double> plain_rel;
        double worst = 0;
        for (size_t r = 0; r < t.size(); ++r) {
            const StageInfo& e = t.info(r);
            const Array& tensor = t.at(r);
            if (e.cell == CellRule::None) continue;
            ++stages;
            for (int trial = 0; trial < 25; ++trial) {
                std::vector<size_t> ix;
                for (size_t a = 0; a < tensor.dimension(); ++a) ix.push_back(rng() % tensor.shape(a));
                const CellMath m = cell_math(w, t, e.id, ix);
                ASSERT_FLOAT_EQ(m.recorded, tensor.element(ix.begin(), ix.end()));
                EXPECT_TRUE(within(m)) << var.name << ": " << e.name << " at " << ix[0] << ".. : value " << m.value
                                       << " vs recorded " << m.recorded << " (scale " << m.scale << ")";
                worst = std::max(worst, std::fabs(m.value - double(m.recorded)) /
                                            std::max(std::fabs(double(m.recorded)), m.scale));
                EXPECT_FALSE(m.lines.empty());
                EXPECT_FALSE(m.formula.empty());
                if (std::fabs(m.recorded) > 1e-3)
                    plain_rel.push_back(std::fabs(m.value - m.recorded) / std::fabs(double(m.recorded)));
                ++checked;
            }
        }
        // scores, pattern, z, ln1/ln2 (out, normalized), mlp.post per block; ln_final x2, logits
        EXPECT_EQ(stages, 2 * 8 + 3) << var.name;
        std::sort(plain_rel.begin(), plain_rel.end());
        std::printf("  %-24s %d cells of %d stages: worst error / max(|value|, scale) %.2e, median relative %.2e\n",
                    var.name, checked, stages, worst, plain_rel[plain_rel.size() / 2]);
        // Most cells agree to 1e-6 of their own value too (the scale only covers cancellation).
        EXPECT_LT(plain_rel[plain_rel.size() / 2], 1e-6) << var.name;
        EXPECT_GT(checked, 400);
    }
}

// RMSNorm (AIMv2): every normalized and out cell of every site (the patch embeddings' norm included) explained
// from the recorded input and rms, equal to the trace, with elementwise_affine on and off; and the recorded rms is
// the input row's root mean square computed here (no mean removed).
TEST(CellMath, RmsNormCellsEqualTheTraceAndItsRmsIsTheRows) {
    Config c = small(Pooling::NormMean);
    c.cls_token = false; c.pos_no_cls = true; c.norm = Norm::RmsNorm; c.patch_norm = true; c.eps = 1e-5f;
    for (bool affine : {true, false}) {
        const Weights w = random_weights(c, 11);
        Options o;
        o.affine = affine;
        const Trace t = run(w, random_input(c, 4), o);
        int sites = 0, cells = 0;
        for (size_t r = 0; r < t.size(); ++r) {
            const StageInfo& e = t.info(r);
            EXPECT_FALSE(ln_part(e.id.kind) == LnPart::Mean && e.ln != LnSite::None) << e.name << ": an RMSNorm has no mean";
            if (e.ln == LnSite::None || ln_part(e.id.kind) != LnPart::Rms) continue;
            ++sites;
            const Array& in = t.get(e.from.at(0));
            const Array& rms = t.at(r);
            const size_t D = size_t(c.width), rows = in.size() / D;
            for (size_t i = 0; i < rows; ++i) {
                double ss = 0;
                for (size_t j = 0; j < D; ++j) ss += double(in.data()[i * D + j]) * double(in.data()[i * D + j]);
                EXPECT_NEAR(rms(i), std::sqrt(ss / double(D)), 1e-5 * std::sqrt(ss / double(D))) << e.name << " row " << i;
            }
            for (LnPart part : {LnPart::Normalized, LnPart::Out}) {
                const StageId id{ln_kind(e.ln, part), e.layer};
                const Array& a = t.get(id);
                for (size_t i = 0; i < rows; i += 3)
                    for (size_t j = 0; j < D; j += 5) {
                        const CellMath m = cell_math(w, t, id, {i, j});
                        ASSERT_EQ(m.recorded, a(i, j));
                        EXPECT_NEAR(m.value, double(a(i, j)), 1e-5 * std::max(1.0, std::fabs(double(a(i, j)))))
                            << t.table().name(id) << " [" << i << ", " << j << "] affine " << affine;
                        ++cells;
                    }
            }
        }
        EXPECT_EQ(sites, 2 * 2 + 2);  // ln1 and ln2 of two blocks, the final norm, the patch embeddings' norm
        EXPECT_GT(cells, 200);
    }
}

TEST(CellMath, ExplainingWithTheWrongWeightsOrATraceOfOtherOptionsFails) {
    // The check can fail: the math with weights other than the trace's disagrees...
    const Weights w = random_weights(small(), 8);
    const Trace t = run(w, random_input(w.cfg, 4));
    Weights other = w;
    other.blocks[1].ln2.g *= 1.5f;
    EXPECT_FALSE(within(cell_math(other, t, *parse_stage_name("blocks.1.ln2.out"), {3, 5})));
    // ...and the options are the trace's own: a trace of the BUG switch is explained with it, so a
    // cell of the bugged trace holds a value that the correct formula would not give.
    Options bug;
    bug.bug_scale_after_softmax = true;
    const Trace tb = run(w, random_input(w.cfg, 4), bug);
    const CellMath mb = cell_math(w, tb, *parse_stage_name("blocks.0.attn.scores"), {1, 2, 3});
    EXPECT_TRUE(within(mb));
    EXPECT_NE(mb.formula.find("BUG on"), std::string::npos);
    const CellMath mg = cell_math(w, t, *parse_stage_name("blocks.0.attn.scores"), {1, 2, 3});
    EXPECT_NEAR(mb.value, mg.value * std::sqrt(double(w.cfg.head_dim())), 1e-6 * std::fabs(mb.value) + 1e-9);
}

TEST(CellMath, ScoresWriteOutEveryTermAndTheScale) {
    const Weights w = random_weights(small(), 9);
    const Trace t = run(w, random_input(w.cfg, 5));
    const size_t d = size_t(w.cfg.head_dim());  // 8
    const CellMath m = cell_math(w, t, *parse_stage_name("blocks.1.attn.scores"), {2, 0, 5});
    ASSERT_EQ(m.terms.size(), d);
    const Array& q = t.get("blocks.1.attn.q");
    const Array& k = t.get("blocks.1.attn.k");
    // Against the trace, not against the math's own terms (issue 39 item 4: the test summed m.terms and
    // compared m.value with that sum, restating the code): each term is q[u] * k[u] of the recorded q and k,
    // the value is their dot product over sqrt(d) computed here, and it is the recorded score's.
    double dot = 0;
    for (size_t u = 0; u < d; ++u) {
        EXPECT_EQ(m.terms[u].a, double(q(2, 0, u)));
        EXPECT_EQ(m.terms[u].b, double(k(2, 5, u)));
        EXPECT_EQ(m.terms[u].value, double(q(2, 0, u)) * double(k(2, 5, u)));
        dot += double(q(2, 0, u)) * double(k(2, 5, u));
    }
    EXPECT_NEAR(m.value, dot / std::sqrt(double(d)), 1e-12);
    const float recorded = t.get("blocks.1.attn.scores")(2, 0, 5);
    EXPECT_EQ(m.recorded, recorded);
    EXPECT_NEAR(m.value, double(recorded), 1e-6 * std::max(1.0, std::fabs(double(recorded))));
    // every term on its own line (d <= max_terms), then the sum, the scale, the result
    EXPECT_EQ(m.lines.size(), 2 + d + 3);
    // With fewer lines allowed, the largest terms are shown and the rest summed.
    const CellMath few = cell_math(w, t, *parse_stage_name("blocks.1.attn.scores"), {2, 0, 5}, 3);
    EXPECT_EQ(few.lines.size(), 2 + 3 + 1 + 3);
    EXPECT_EQ(few.value, m.value);
    const CellMath none = cell_math(w, t, *parse_stage_name("blocks.1.attn.scores"), {2, 0, 5}, 0);  // only the remainder line
    EXPECT_EQ(none.lines.size(), 2 + 1 + 3);
    EXPECT_EQ(cell_math(w, t, *parse_stage_name("blocks.1.attn.scores"), {2, 0, 5}, -4).lines.size(), none.lines.size());
    // The pattern cell's terms are the row's exp(score - max): they sum to the row's Z.
    const CellMath p = cell_math(w, t, *parse_stage_name("blocks.1.attn.pattern"), {2, 0, 5});
    EXPECT_EQ(p.terms.size(), size_t(w.cfg.tokens()));
    EXPECT_NEAR(p.value, p.terms[5].value / [&] { double z = 0; for (auto& x : p.terms) z += x.value; return z; }(),
                1e-15);
}

TEST(CellMath, BadStageOrIndexIsAClearError) {
    const Weights w = random_weights(small(), 10);
    const Trace t = run(w, random_input(w.cfg, 6));
    auto msg = [&](const std::string& stage, std::vector<size_t> ix) {
        try {
            const auto id = parse_stage_name(stage);
            if (!id) return std::string("unknown stage name");
            cell_math(w, t, *id, ix);
        } catch (const std::invalid_argument& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(msg("blocks.0.attn.q", {0, 0, 0}).find("blocks.0.attn.q"), std::string::npos);
    EXPECT_NE(msg("blocks.9.attn.scores", {0, 0, 0}).find("no stage 'blocks.9.attn.scores'"), std::string::npos);
    EXPECT_NE(msg("blocks.0.attn.scores", {0, 0}).find("needs 3 numbers"), std::string::npos);
    EXPECT_NE(msg("blocks.0.attn.scores", {0, 17, 0}).find("out of range on axis 1"), std::string::npos);
    EXPECT_NE(msg("logits", {7}).find("out of range"), std::string::npos);
}

TEST(LogitLens, LastRowIsProbsExactly) {
    for (const Variant& var : variants()) {
        const Weights w = random_weights(small(), 11);
        const Trace t = run(w, random_input(w.cfg, 7), var.opt);
        const Tensor2 lens = logit_lens(w, t);
        ASSERT_EQ(shape_of(lens), (Shape{2, 7}));
        const Array& probs = t.get("probs");
        for (size_t k = 0; k < 7; ++k) EXPECT_EQ(lens(1, k), probs(k)) << var.name << " class " << k;
        // every row is a distribution
        for (size_t l = 0; l < 2; ++l) EXPECT_NEAR(xt::sum(xt::view(lens, l, xt::all()))(), 1.0, 1e-5);
        // layer 0 differs from the last (the lens does read each layer's residual)
        EXPECT_GT(xt::amax(xt::abs(xt::view(lens, 0, xt::all()) - xt::view(lens, 1, xt::all())))(), 1e-4);
    }
}

TEST(AttentionFrom, ClsRowIsClsAttentionAndPatchRowsAreThePattern) {
    const Weights w = random_weights(small(), 12);
    const Trace t = run(w, random_input(w.cfg, 8));
    for (int head = -1; head < 4; ++head) {
        const Tensor1 a = attention_from(t, 1, head, 0);
        const std::vector<float> ref = cls_attention(t, 1, head);
        ASSERT_EQ(a.size(), ref.size());
        for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(a(i), ref[i], 1e-7);
    }
    const Array& p = t.get("blocks.0.attn.pattern");
    const Tensor1 a = attention_from(t, 0, 2, 9);
    for (size_t j = 0; j < 16; ++j) EXPECT_EQ(a(j), p(2, 9, j + 1));
    EXPECT_THROW(attention_from(t, 2, 0, 0), std::invalid_argument);
    EXPECT_THROW(attention_from(t, 0, 4, 0), std::invalid_argument);
    EXPECT_THROW(attention_from(t, 0, 0, 17), std::invalid_argument);
}

TEST(AttnDistance, HandComputedGridOfFour) {
    // G = 2, P = 4, one head: every patch query puts all its weight on the bottom-right patch 3.
    // Distances to it: 4*sqrt(2), 4, 4, 0 -> mean (8 + 4 sqrt 2) / 4 = 2 + sqrt 2.
    Config c;
    c.image_size = 8; c.patch = 4; c.channels = 1; c.width = 4; c.depth = 1; c.heads = 1; c.mlp = 4; c.classes = 2;
    const auto table = StageTable::get(c);
    Trace t;  // hand-made: only the pattern of the one block
    t.begin(table, {}, {});
    Array& p = t.record(size_t(table->index({StageKind::AttnPattern, 0})), {1, 5, 5});
    p.fill(0.f);
    for (size_t q = 0; q < 5; ++q) p(0, q, 4) = 1.f;
    p(0, 1, 0) = 0.5f;  // weight on cls is dropped, not renormalised
    t.end();
    const Tensor2 d = attn_distance(t);
    ASSERT_EQ(shape_of(d), (Shape{1, 1}));
    EXPECT_NEAR(d(0, 0), 2 + std::sqrt(2.0), 1e-6);
}

TEST(AttnDistance, MeanOverImagesIsTheMeanOfEach) {
    const Weights w = random_weights(small(), 13);
    std::vector<Tensor3> xs{random_input(w.cfg, 1), random_input(w.cfg, 2), random_input(w.cfg, 3)};
    Tensor2 sum = xt::zeros<float>({2, 4});
    for (auto& x : xs) sum += attn_distance(run(w, x));
    std::vector<int> seen;
    int done = 0;
    const Tensor2 m = attn_distance_mean(w, xs, {}, [&](int i, int n) { seen.push_back(i); return n == 3; }, &done);
    EXPECT_EQ(seen, (std::vector<int>{1, 2, 3}));
    EXPECT_EQ(done, 3);
    EXPECT_LT(xt::amax(xt::abs(m - sum / 3.f))(), 1e-5);
    // Stopping after the first image gives that image's distances.
    const Tensor2 first = attn_distance_mean(w, xs, {}, [](int, int) { return false; }, &done);
    EXPECT_EQ(done, 1);
    EXPECT_LT(xt::amax(xt::abs(first - attn_distance(run(w, xs[0]))))(), 1e-6);
    EXPECT_THROW(attn_distance_mean(w, {}, {}), std::invalid_argument);
}

TEST(AttnDistance, UniformAttentionIsTheMeanPatchDistance) {
    // G = 2, P = 4: distances 0, 4, 4, 4 sqrt 2 from each patch -> (8 + 4 sqrt 2) / 4 = 2 + sqrt 2.
    Config c;
    c.image_size = 8; c.patch = 4; c.channels = 1;
    EXPECT_NEAR(uniform_attn_distance(c), 2 + std::sqrt(2.0), 1e-6);
    // and it is what attn_distance gives for a pattern spread evenly over the patches
    c.width = 4; c.depth = 1; c.heads = 1; c.mlp = 4; c.classes = 2; c.image_size = 12;  // G = 3
    const auto table = StageTable::get(c);
    Trace t;
    t.begin(table, {}, {});
    t.record(size_t(table->index({StageKind::AttnPattern, 0})), {1, 10, 10}).fill(1.f / 9.f);
    t.end();
    // the cls column also holds 1/9 here, and is dropped: 9 patch keys of 1/9 each remain
    EXPECT_NEAR(attn_distance(t)(0, 0), uniform_attn_distance(c), 1e-5);
}

TEST(AttnDistance, DatasetInputsGoThroughTheModelsPreprocessing) {
    // Two 4x4 gray images: a 1-channel 4x4 model gets (x/255 - mean)/std; a 3-channel 8x8 model
    // gets the plane repeated to RGB and resized to 8x8, as preprocess() does for a gray image file.
    Dataset d;
    d.n = 2; d.rows = 4; d.cols = 4;
    for (int i = 0; i < 32; ++i) d.images.push_back(uint8_t(i * 7));
    d.labels = {0, 1};
    Config g;
    g.image_size = 4; g.patch = 2; g.channels = 1; g.pre.mean = {0.25f}; g.pre.std = {0.5f};
    const std::vector<Tensor3> a = dataset_inputs(d, 0, g);
    ASSERT_EQ(a.size(), 2u);
    EXPECT_NEAR(a[1](0, 2, 3), ((16 + 2 * 4 + 3) * 7 / 255.0 - 0.25) / 0.5, 1e-6);
    Config c;
    c.image_size = 8; c.patch = 4; c.channels = 3;
    const std::vector<Tensor3> b = dataset_inputs(d, 1, c);
    ASSERT_EQ(b.size(), 1u);
    ASSERT_EQ(shape_of(b[0]), (Shape{3, 8, 8}));
    Image im;
    im.pixels = Tensor3::from_shape({1, 4, 4});
    for (int i = 0; i < 16; ++i) im.pixels.data()[i] = float(i * 7) / 255.f;
    im.width = im.height = 4; im.channels = 1;
    EXPECT_LT(xt::amax(xt::abs(b[0] - preprocess(im, c)))(), 1e-7);
    EXPECT_EQ(xt::amax(xt::abs(xt::view(b[0], 0) - xt::view(b[0], 2)))(), 0.f);  // gray: the channels are equal
    c.channels = 2;
    EXPECT_THROW(dataset_inputs(d, 1, c), std::invalid_argument);
}

TEST(EmbedFilters, RankOneFiltersGiveTheirDirectionWithAllTheVariance) {
    Config c = small();
    Weights w = init_weights(c, 1);
    const size_t D = 32, CPP = 48;
    // rows = t_i * u + m: one direction u (with its largest entry negative), a common offset m
    Tensor1 u = xt::zeros<float>({CPP}), m = xt::zeros<float>({CPP});
    for (size_t j = 0; j < CPP; ++j) { u(j) = std::sin(float(j)); m(j) = 0.3f * float(j % 5); }
    u(7) = -3.f;
    for (size_t i = 0; i < D; ++i) xt::view(w.patch_w, i, xt::all()) = float(i % 7) * u + m;
    const EmbedFilters ef = embed_filters(w);
    ASSERT_EQ(shape_of(ef.filters), (Shape{28, 3, 4, 4}));
    ASSERT_EQ(ef.variance.size(), 28u);
    EXPECT_NEAR(ef.variance(0), 1.0, 1e-6);
    EXPECT_NEAR(ef.variance(1), 0.0, 1e-6);
    const Tensor1 un = u / std::sqrt(xt::sum(u * u)());
    auto f0 = xt::view(xt::reshape_view(ef.filters, {size_t(28), CPP}), 0, xt::all());
    // sign convention: the largest-magnitude entry (u's entry 7, negative) is made positive
    EXPECT_LT(xt::amax(xt::abs(f0 + un))(), 1e-5);
}

TEST(EmbedFilters, ComponentsAreOrthonormalAndVariancesDescend) {
    const Weights w = random_weights(small(), 14);
    const EmbedFilters ef = embed_filters(w, 10);
    ASSERT_EQ(shape_of(ef.filters), (Shape{10, 3, 4, 4}));
    auto F = xt::reshape_view(ef.filters, {size_t(10), size_t(48)});
    for (size_t a = 0; a < 10; ++a) {
        for (size_t b = 0; b < 10; ++b)
            EXPECT_NEAR(xt::sum(xt::view(F, a, xt::all()) * xt::view(F, b, xt::all()))(), a == b ? 1.0 : 0.0, 1e-5);
        const auto row = xt::eval(xt::view(F, a, xt::all()));
        const size_t big = size_t(xt::argmax(xt::abs(row))());
        EXPECT_GT(row(big), 0.f);
        if (a) EXPECT_LE(ef.variance(a), ef.variance(a - 1));
    }
    EXPECT_LE(xt::sum(ef.variance)(), 1.0 + 1e-6);
    EXPECT_GT(ef.variance(0), 0.f);
}

TEST(PosSimilarity, HandValues) {
    Config c = small();
    c.image_size = 8;  // 2 x 2 grid: N = 4
    Weights w = init_weights(c, 1);
    w.pos = xt::zeros<float>({size_t(5), size_t(32)});
    w.pos(0, 0) = 5.f;  // cls: excluded
    w.pos(1, 0) = 1.f;
    w.pos(2, 0) = 2.f;                   // parallel to patch 0: 1
    w.pos(3, 0) = 1.f; w.pos(3, 1) = 1.f;  // 45 degrees: 1/sqrt 2
    w.pos(4, 1) = -3.f;                  // orthogonal to patch 0, -1/sqrt 2 to patch 2
    const Tensor2 s = pos_similarity(w);
    ASSERT_EQ(shape_of(s), (Shape{4, 4}));
    EXPECT_NEAR(s(0, 0), 1.0, 1e-6);
    EXPECT_NEAR(s(0, 1), 1.0, 1e-6);
    EXPECT_NEAR(s(0, 2), 1 / std::sqrt(2.0), 1e-6);
    EXPECT_NEAR(s(0, 3), 0.0, 1e-6);
    EXPECT_NEAR(s(3, 2), -1 / std::sqrt(2.0), 1e-6);
    EXPECT_NEAR(s(2, 3), -1 / std::sqrt(2.0), 1e-6);
}

TEST(Teach, OptionsJson) {
    Options o;
    EXPECT_EQ(options_json(o, small()),
              "{\"elementwise_affine\": true, \"unbiased\": false, \"pooling\": \"cls\", "
              "\"bug_scale_after_softmax\": false, \"bug_reshape_patches\": false, "
              "\"interventions\": {\"dropped\":[],\"heads\":[],\"patch\":null,\"sublayers\":[]}}");
    o.affine = false; o.unbiased = true; o.pooling = Pooling::Mean; o.bug_scale_after_softmax = true;
    o.bug_reshape_patches = true;
    EXPECT_EQ(options_json(o, small()),
              "{\"elementwise_affine\": false, \"unbiased\": true, \"pooling\": \"mean\", "
              "\"bug_scale_after_softmax\": true, \"bug_reshape_patches\": true, "
              "\"interventions\": {\"dropped\":[],\"heads\":[],\"patch\":null,\"sublayers\":[]}}");
}

TEST(CellMath, ViTTinyShapesD64And197Tokens) {
    // Real sizes: d = 64 terms per score, 197 keys per pattern row and z, D = 192 per LayerNorm and logit.
    Config c = preset("vit-ti16");
    c.classes = 10;
    const Weights w = random_weights(c, 15);
    const Trace t = run(w, random_input(c, 9));
    std::mt19937_64 rng(7);
    int n = 0;
    double worst = 0;
    for (size_t r = 0; r < t.size(); ++r) {
        const StageInfo& e = t.info(r);
        if (e.cell == CellRule::None) continue;
        for (int trial = 0; trial < 4; ++trial) {
            std::vector<size_t> ix;
            for (size_t a = 0; a < t.at(r).dimension(); ++a) ix.push_back(rng() % t.at(r).shape(a));
            const CellMath m = cell_math(w, t, e.id, ix);
            EXPECT_TRUE(within(m)) << e.name << ": " << m.value << " vs " << m.recorded << " (scale " << m.scale << ")";
            worst = std::max(worst, std::fabs(m.value - double(m.recorded)) /
                                        std::max(std::fabs(double(m.recorded)), m.scale));
            EXPECT_LE(m.lines.size(), 24u) << e.name;  // at most 16 terms written out
            ++n;
        }
    }
    std::printf("  vit-ti16: %d cells, worst error / max(|value|, scale) %.2e\n", n, worst);
    EXPECT_EQ(n, 4 * (12 * 8 + 3));
}
