// Interventions in the core (issue 21): what reuses the stages of an earlier pass (forward_from,
// RunFrom, the sweeps) equals full passes bit for bit, passes that record nothing give the recorded
// passes' output, and the helpers refuse what does not fit. The values themselves are checked against
// a PyTorch reference with hooks (tests/parity/test_interventions.py).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>

#include "core/model/forward.h"
#include "tests/trace_compare.h"
#include "core/teach/analysis.h"
#include "core/teach/interventions.h"
#include "core/teach/teach.h"

using namespace vit;
using vit::test_util::expect_same_trace;
using vit::test_util::same_bits;
using vit::test_util::wave;

namespace {

// A DINOv2-like embedding model: registers, layer scale, no classifier.
Config dinov2_like() {
    Config c = preset("toy-rgb8");
    c.name = "toy-dinov2";
    c.image_size = 16;  // 4 x 4 patches of 4 px
    c.width = 48;
    c.depth = 3;
    c.heads = 4;
    c.mlp = 96;
    c.family = ModelFamily::Dinov2;
    c.registers = 2;
    c.layer_scale = true;
    c.head = Head::Identity;
    c.validate();
    return c;
}

Options with_heads(std::vector<HeadAblation> h) {
    Options o;
    o.iv.heads = std::move(h);
    return o;
}

}  // namespace

// An intervention at block L: the stages before L copied from the earlier pass, the rest computed
// from its residual stream, equal to the full pass, for every kind of intervention and start block.
TEST(Interventions, ForwardFromEqualsFullPass) {
    for (const Config& c : {preset("fmnist"), dinov2_like()}) {
        SCOPED_TRACE(c.name);
        const Weights w = init_weights(c, 7);
        const Tensor3 x = wave(c);
        const Trace clean = run(w, x, {});
        const Trace other = run(w, wave(c, 0.37f), {});
        std::vector<Options> cases;
        cases.push_back(with_heads({{1, 1, false}}));
        cases.push_back(with_heads({{c.depth - 1, 0, true}, {c.depth - 1, 2, false}}));
        Options sub;
        sub.iv.sublayers = {{c.depth - 1, true}};
        cases.push_back(sub);
        Options pz;  // attn.z patched (rows 0 and 3) with a head of the same block ablated
        pz.iv.heads = {{1, 0, false}};
        pz.iv.patch = ActivationPatch{{StageKind::AttnZ, 1}, {0, 3}, std::make_shared<const Array>(other.get(StageId{StageKind::AttnZ, 1})), "other"};
        cases.push_back(pz);
        Options pf;  // ln_final.out patched: only what follows the blocks changes
        pf.iv.patch = ActivationPatch{{StageKind::LnFinalOut, -1}, {}, std::make_shared<const Array>(other.get(StageId{StageKind::LnFinalOut})), "other"};
        cases.push_back(pf);
        Options pool;  // another pooling: also after the blocks
        if (c.head == Head::Classifier) {
            pool.pooling = Pooling::Mean;
            cases.push_back(pool);
        }
        for (const Options& o : cases) {
            const int L = first_changed_block(c, clean.options(), o);
            ASSERT_GE(L, 0) << o.describe();
            Trace full, from;
            forward(w, x, o, full);
            forward_from(w, clean, o, L, from);
            expect_same_trace(full, from, o.describe() + " from block " + std::to_string(L));
            EXPECT_EQ(from.options(), o);
            // and from every earlier block too
            for (int l = 0; l < L; ++l) {
                Trace f2;
                forward_from(w, clean, o, l, f2);
                expect_same_trace(full, f2, o.describe() + " from block " + std::to_string(l));
            }
        }
        // back to the clean options from an intervened pass (the app removing an intervention)
        Trace ablated;
        forward(w, x, with_heads({{2, 1, false}}), ablated);
        Trace back;
        forward_from(w, ablated, Options{}, first_changed_block(c, ablated.options(), Options{}), back);
        expect_same_trace(clean, back, "back to clean");
    }
}

TEST(Interventions, FirstChangedBlock) {
    const Config c = preset("fmnist");  // 6 blocks
    Options a, b;
    EXPECT_EQ(first_changed_block(c, a, b), 6);
    b.iv.heads = {{3, 1, false}};
    EXPECT_EQ(first_changed_block(c, a, b), 3);
    a.iv.heads = {{3, 1, true}};  // the same head, mean instead of zero
    EXPECT_EQ(first_changed_block(c, a, b), 3);
    a.iv.heads = {{3, 1, false}, {1, 0, false}};
    EXPECT_EQ(first_changed_block(c, a, b), 1);
    a = b;
    a.iv.sublayers = {{4, false}};
    EXPECT_EQ(first_changed_block(c, a, b), 4);
    a = b;
    a.iv.dropped = {2};
    EXPECT_EQ(first_changed_block(c, a, b), -1);
    a = b;
    a.affine = false;
    EXPECT_EQ(first_changed_block(c, a, b), -1);
    a = b;
    a.pooling = Pooling::Mean;
    EXPECT_EQ(first_changed_block(c, a, b), 6);
    a = b;
    auto v = std::make_shared<const Array>(Array::from_shape({50, 64}));
    a.iv.patch = ActivationPatch{{StageKind::ResidMid, 2}, {}, v, "x"};
    EXPECT_EQ(first_changed_block(c, a, b), 2);
    a.iv.patch = ActivationPatch{{StageKind::Embed, -1}, {}, v, "x"};
    EXPECT_EQ(first_changed_block(c, a, b), -1);
    // the same stage patched from another run is a change too
    Options p1 = b, p2 = b;
    p1.iv.patch = ActivationPatch{{StageKind::MlpOut, 5}, {}, v, "x"};
    p2.iv.patch = ActivationPatch{{StageKind::MlpOut, 5}, {}, std::make_shared<const Array>(*v), "x"};
    EXPECT_EQ(first_changed_block(c, p1, p2), 5);
    EXPECT_EQ(first_changed_block(c, p1, p1), 6);
}

// A pass that records nothing (the sweeps') gives the recorded pass's output, bit for bit, also when
// attn.z is patched (it then patches the heads' concatenation).
TEST(Interventions, OutputOnlyPassEqualsRecordedPass) {
    for (const Config& c : {preset("fmnist"), dinov2_like()}) {
        SCOPED_TRACE(c.name);
        const Weights w = init_weights(c, 5);
        const Tensor3 x = wave(c);
        const Trace other = run(w, wave(c, 0.21f), {});
        Options o;
        o.iv.heads = {{0, 1, true}};
        o.iv.sublayers = {{1, false}};
        o.iv.patch = ActivationPatch{{StageKind::AttnZ, 2}, {1, 2}, std::make_shared<const Array>(other.get(StageId{StageKind::AttnZ, 2})), "other"};
        for (const Options& opt : {o, with_heads({{1, 2, false}})}) {
            const Trace full = run(w, x, opt);
            const Array& want = full.get(StageId{c.has_logits() ? StageKind::Logits : StageKind::Embedding});
            Tensor4 xb = Tensor4::from_shape({1, size_t(c.channels), size_t(c.image_size), size_t(c.image_size)});
            std::copy(x.begin(), x.end(), xb.begin());
            WorkspacePtr ws = make_workspace();
            Trace scratch;
            const Array& got = forward_batch(w, xb, opt, scratch, Keep::Output, *ws);
            ASSERT_EQ(got.size(), want.size());
            EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << opt.describe();
            EXPECT_EQ(scratch.find(StageId{StageKind::AttnPattern, 0}), nullptr);  // nothing recorded
        }
    }
}

// The sweeps reuse the clean run's prefix; the numbers equal those of full passes (the naive way).
TEST(Interventions, SweepsWithReuseEqualFullPasses) {
    for (const Config& c : {preset("fmnist"), dinov2_like()}) {
        SCOPED_TRACE(c.name);
        const Weights w = init_weights(c, 11);
        const Tensor3 x = wave(c);
        SweepControl naive;
        naive.reuse = false;
        for (bool heads : {true, false}) {
            const SweepResult a = heads ? head_importance(w, x, {}) : occlusion(w, x, {});
            const SweepResult b = heads ? head_importance(w, x, {}, naive) : occlusion(w, x, {}, naive);
            ASSERT_EQ(shape_of(a.values), shape_of(b.values));
            EXPECT_TRUE(same_bits(a.values, b.values)) << (heads ? "head importance" : "occlusion");
            EXPECT_EQ(a.passes, b.passes);
            EXPECT_EQ(a.target.logits, c.has_logits());
            if (heads) {  // block l's ablations run depth - l blocks instead of depth
                EXPECT_EQ(shape_of(a.values), (Shape{size_t(c.depth), size_t(c.heads)}));
                EXPECT_DOUBLE_EQ(a.blocks, double(c.heads) * c.depth * (c.depth + 1) / 2);
                EXPECT_DOUBLE_EQ(b.blocks, double(c.heads) * c.depth * c.depth);
            } else {
                EXPECT_EQ(shape_of(a.values), (Shape{size_t(run_dims(c, {}).N)}));
            }
            // one entry by hand: that intervention's full pass against the clean one
            const Trace clean = run(w, x, {});
            Options o;
            if (heads) o.iv.heads = {{1, 2, false}};
            else o.iv.dropped = {5};
            const Trace t = run(w, x, o);
            const float got = heads ? a.values(1, 2) : a.values(5);
            if (c.has_logits()) {
                const int cls = top_k(clean.get("logits").data(), size_t(c.classes), 1)[0];
                EXPECT_EQ(got, float(double(clean.get("logits")(cls)) - double(t.get("logits")(cls))));
            } else {
                const Array& e0 = clean.get("embedding");
                const Array& e1 = t.get("embedding");
                double dot = 0, n0 = 0, n1 = 0;
                for (size_t i = 0; i < e0.size(); ++i) {
                    dot += double(e0(i)) * e1(i);
                    n0 += double(e0(i)) * e0(i);
                    n1 += double(e1(i)) * e1(i);
                }
                EXPECT_EQ(got, float(1 - dot / std::sqrt(n0 * n1)));
            }
        }
    }
}

// The sweeps start from the options without interventions, report progress, and stop when asked.
TEST(Interventions, SweepsStartCleanReportProgressAndCancel) {
    const Config c = preset("fmnist");
    const Weights w = init_weights(c, 2);
    const Tensor3 x = wave(c);
    Options with;
    with.iv.heads = {{0, 0, false}};
    with.iv.dropped = {1, 2};
    const SweepResult a = head_importance(w, x, with), b = head_importance(w, x, {});
    EXPECT_TRUE(same_bits(a.values, b.values));
    EXPECT_TRUE(a.options.iv.empty());
    std::vector<int> seen;
    SweepControl ctl;
    ctl.progress = [&](int done, int total) {
        seen.push_back(done);
        EXPECT_EQ(total, c.depth * c.heads);
        return done < 5;  // stop after the fifth pass
    };
    EXPECT_THROW(head_importance(w, x, {}, ctl), Cancelled);
    EXPECT_EQ(seen, (std::vector<int>{1, 2, 3, 4, 5}));
    std::atomic<bool> cancel{true};
    SweepControl stop;
    stop.cancel = &cancel;
    EXPECT_THROW(occlusion(w, x, {}, stop), Cancelled);
    // a clean trace given: it must be of the options without interventions
    const Trace t = run(w, x, with);
    EXPECT_THROW(occlusion(w, x, with, {}, &t), std::invalid_argument);
    const Trace t0 = run(w, x, {});
    EXPECT_TRUE(same_bits(occlusion(w, x, with, {}, &t0).values, occlusion(w, x, {}).values));
}

// With patches dropped, the maps over the grid keep the grid: NaN at a dropped patch, the kept
// tokens' values at theirs; the attention distance counts the kept patches only.
TEST(Interventions, MapsWithDroppedPatches) {
    const Config c = preset("fmnist");  // 7 x 7 patches of 4 px
    const Weights w = init_weights(c, 4);
    Options o;
    o.iv.dropped = {0, 10, 48};
    const Trace t = run(w, wave(c), o);
    const Array& p = t.get(StageId{StageKind::AttnPattern, 2});
    ASSERT_EQ(shape_of(p), (Shape{4, 47, 47}));
    const std::vector<float> a = cls_attention(t, 2, 1);
    ASSERT_EQ(a.size(), 49u);
    const std::vector<int> kept = run_dims(c, o).kept;
    for (int d : o.iv.dropped) EXPECT_TRUE(std::isnan(a[size_t(d)]));
    for (size_t i = 0; i < kept.size(); ++i) EXPECT_EQ(a[size_t(kept[i])], p(1, 0, 1 + i));
    const std::vector<float> r = attention_rollout(t, 5, Fusion::Mean, 0.f);
    EXPECT_TRUE(std::isnan(r[10]) && std::isfinite(r[11]));
    const Tensor1 q = attention_from(t, 1, -1, 3);  // token 3 is patch 3 (patch 0 dropped: tokens shift)
    ASSERT_EQ(q.size(), 49u);
    EXPECT_TRUE(std::isnan(q(0)));
    // distance: the kept patches only, by hand
    const Tensor2 dist = attn_distance(t);
    const Array& p0 = t.get(StageId{StageKind::AttnPattern, 0});
    double want = 0;
    for (size_t i = 0; i < kept.size(); ++i)
        for (size_t j = 0; j < kept.size(); ++j) {
            const double dr = kept[i] / 7 - kept[j] / 7, dc = kept[i] % 7 - kept[j] % 7;
            want += p0(3, 1 + i, 1 + j) * 4.0 * std::sqrt(dr * dr + dc * dc);
        }
    EXPECT_NEAR(dist(0, 3), want / double(kept.size()), 1e-4);
}

// A pack of the weights per row count is kept for at most two row counts: dropping patch after
// patch does not keep a copy of the weights for each sequence length.
TEST(Interventions, PackedWeightsBoundedOverRowCounts) {
    const Config c = preset("vit-ti16");  // large enough for its matrices to be packed
    const Weights w = init_weights(c, 1);
    const Tensor3 x = wave(c);
    run(w, x, {});
    const size_t one = w.packs.bytes();
    ASSERT_GT(one, 0u);
    for (int k = 1; k <= 5; ++k) {
        Options o;
        for (int i = 0; i < k; ++i) o.iv.dropped.push_back(i);
        run(w, x, o);
    }
    EXPECT_LE(w.packs.bytes(), 2 * one + one / 4);  // the head's (1 row) packs are small
}

TEST(Interventions, ParsersAndPatchSourceRefuseWhatDoesNotFit) {
    EXPECT_EQ(parse_index_list("3,1,3,0"), (std::vector<int>{0, 1, 3}));
    for (const char* bad : {"", "1,", ",1", "a", "1;2", "-1", "1 2"}) EXPECT_THROW(parse_index_list(bad), std::invalid_argument) << bad;
    const HeadAblation h = parse_head_ablation("11.3:mean");
    EXPECT_TRUE(h.layer == 11 && h.head == 3 && h.mean);
    EXPECT_FALSE(parse_head_ablation("2.0").mean);
    for (const char* bad : {"1", "1.", ".1", "1.2:max", "a.b", "1.2.3"}) EXPECT_THROW(parse_head_ablation(bad), std::invalid_argument) << bad;
    EXPECT_TRUE(parse_sublayer_ablation("blocks.4.mlp.out") == (SublayerAblation{4, true}));
    EXPECT_THROW(parse_sublayer_ablation("blocks.4.mlp.pre"), std::invalid_argument);
    const Config c = preset("fmnist");
    const Weights w = init_weights(c, 1);
    const Tensor3 x = wave(c);
    EXPECT_THROW(make_activation_patch(w, x, {}, {StageKind::AttnPattern, 0}, {}, "x"), std::invalid_argument);
    EXPECT_THROW(make_activation_patch(w, x, {}, {StageKind::ResidPost, 9}, {}, "x"), std::invalid_argument);
    EXPECT_THROW(make_activation_patch(w, x, {}, {StageKind::ResidPost, 1}, {50}, "x"), std::invalid_argument);
    Options dropped;
    dropped.iv.dropped = {3};
    EXPECT_THROW(make_activation_patch(w, x, dropped, {StageKind::ResidPost, 1}, {}, "x"), std::invalid_argument);
    const ActivationPatch p = make_activation_patch(w, x, dropped, {StageKind::Embed, -1}, {7, 2, 7}, "x");
    EXPECT_EQ(p.tokens, (std::vector<int>{2, 7}));
    EXPECT_EQ(shape_of(*p.values), (Shape{50, 64}));
    // run_dims refuses interventions outside the model, twice the same one, a stage without a patch point
    Options o;
    o.iv.heads = {{6, 0, false}};
    EXPECT_THROW(run_dims(c, o), std::invalid_argument);
    o.iv.heads = {{1, 0, false}, {1, 0, true}};
    EXPECT_THROW(run_dims(c, o), std::invalid_argument);
    o.iv.heads.clear();
    o.iv.dropped = {4, 2};
    EXPECT_THROW(run_dims(c, o), std::invalid_argument);
    o.iv.dropped.clear();
    o.iv.patch = ActivationPatch{{StageKind::AttnQ, 0}, {}, nullptr, "x"};
    EXPECT_THROW(run_dims(c, o), std::invalid_argument);
    // no gradients with an intervention
    Options g;
    g.iv.sublayers = {{0, true}};
    RunRequest req;
    req.grads = true;
    Trace t;
    EXPECT_THROW(forward(w, x, g, t, req), std::invalid_argument);
}
