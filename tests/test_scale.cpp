// Issue 22 (scale): the weights held once (the block matrices packed for the GEMM kernel and
// nothing else), checked against the row-major weights they came from, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <unistd.h>

#include "core/io/checkpoint.h"
#include "core/io/io.h"
#include "core/model/backward.h"
#include "core/model/forward.h"
#include "tests/trace_compare.h"
#include "core/kernels/gemm.h"
#include "core/kernels/ops.h"
#include "core/model/finite.h"
#include "core/teach/analysis.h"

using namespace vit;
using vit::test_util::expect_same_trace;
using vit::test_util::same_bits;
using vit::test_util::wave;

namespace {

// An on-demand pass (RunRequest::on_demand) of weights the caller keeps alive, with the block rows of
// the kinds in `also` kept too.
Trace on_demand_pass(const Weights& w, const Tensor3& x, const Options& opt, RunRequest req = {},
                     std::vector<StageKind> also = {}) {
    req.on_demand = borrowed(w);
    req.keep_kinds = std::move(also);
    Trace t;
    forward(w, x, opt, t, req);
    return t;
}

// Reads a trace's rows as `trace --out` does, one block held at a time: trim() whenever the reader
// reaches another block.
struct BlockReader {
    const Trace& t;
    int reading = -2;
    void at(size_t r) { if (t.info(r).layer != reading) t.trim(), reading = t.info(r).layer; }
};

// A family preset made small enough for a unit test and large enough for its matrices to be
// packed (rows x in x out >= 1e6): 2 blocks, a 7 x 7 grid.
Config small(const std::string& name) {
    Config c = preset(name);
    c.depth = 2;
    c.image_size = 7 * c.patch;
    c.pos_grid = 0;
    c.pre.resize = 0;
    c.classes = c.has_logits() ? 10 : c.classes;
    c.name = name + "-small";
    c.validate();
    return c;
}

std::vector<Config> models() {
    return {small("vit-ti16"), small("dinov2-s14-reg"), small("siglip-b16"), small("deit-ti16-distilled"),
            small("clip-b16")};
}

std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

}  // namespace

// Packed, the block matrices are held once: no row-major copy left, and the forward pass reads
// the packed ones and gives every stage bit for bit as the row-major weights do (the pass packs
// those itself, for the run's row count). Also with dropped patches (another row count than the
// one the layout was chosen for) and with gradients (the backward pass unpacks block by block).
TEST(WeightsOnce, PackedPassEqualsRowMajorPass) {
    for (const Config& c : models()) {
        SCOPED_TRACE(c.name);
        const Weights w = init_weights(c, 7);
        Weights p = w;
        pack_blocks(p);
        ASSERT_TRUE(blocks_packed(p));
        for (const BlockW& b : p.blocks) {
            EXPECT_EQ(b.qkv_w.size(), 0u);
            EXPECT_EQ(b.fc2_w.size(), 0u);
            ASSERT_TRUE(b.qkv_p && b.proj_p && b.fc1_p && b.fc2_p);
        }
        const Tensor3 x = wave(c);
        RunRequest g;
        g.grads = backward_unsupported(c, {}).empty();
        expect_same_trace(run(w, x, {}, g), run(p, x, {}, g), "plain vs packed");
        Options o;
        o.iv.dropped = {0, 3, 4};
        o.iv.heads = {{1, 1, false}};
        expect_same_trace(run(w, x, o), run(p, x, o), "dropped patches");
        // held once: the packed matrices plus the small tensors, and the passes packed nothing more
        // than the matrices outside the blocks (patch embedding, head)
        const size_t floats = param_numel(w) * sizeof(float);
        EXPECT_LE(weights_bytes(p) + p.packs.bytes(), floats + floats / 4) << "weights held twice";
        EXPECT_LE(weights_bytes(p), floats + floats / 50);
    }
}

// What reads the matrices row-major gets them back exactly: unpacking, a saved checkpoint,
// zeros_like's shapes, the parameter count; param_refs refuses packed weights rather than
// handing out empty tensors.
TEST(WeightsOnce, UnpackSaveAndShapesRoundTrip) {
    const Config c = small("dinov2-s14-reg");
    const Weights w = init_weights(c, 3);
    Weights p = w;
    pack_blocks(p);
    EXPECT_EQ(param_numel(p), param_numel(w));
    EXPECT_THROW(param_refs(p), std::logic_error);
    const Weights u = unpacked_copy(p);
    EXPECT_FALSE(blocks_packed(u));
    EXPECT_TRUE(blocks_packed(p));  // the copy unpacked, not the original
    const auto a = param_refs(w), b = param_refs(u);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        SCOPED_TRACE(a[i].name);
        ASSERT_EQ(a[i].shape, b[i].shape);
        EXPECT_EQ(std::memcmp(a[i].data, b[i].data, shape_numel(a[i].shape) * sizeof(float)), 0);
    }
    const Weights z = zeros_like(p);
    EXPECT_FALSE(blocks_packed(z));
    EXPECT_EQ(shape_of(z.blocks[1].fc1_w), shape_of(w.blocks[1].fc1_w));
    char dir[] = "/tmp/vitscope-scale-XXXXXX";
    ASSERT_TRUE(mkdtemp(dir));
    const std::string f1 = std::string(dir) + "/plain.safetensors", f2 = std::string(dir) + "/packed.safetensors";
    save_model(f1, w);
    save_model(f2, p);
    const std::string s1 = slurp(f1), s2 = slurp(f2);
    EXPECT_TRUE(s1 == s2) << "the checkpoint saved from packed weights differs (" << s1.size() << " vs " << s2.size()
                          << " bytes)";
    std::remove(f1.c_str());
    std::remove(f2.c_str());
    rmdir(dir);
}

// Every stage on demand: a pass that keeps the stages outside the blocks and the residual
// stream, and recomputes a block's stages from the stream entering it when they are asked for,
// gives every stage of the table bit for bit as the full trace records it: on five families, with
// interventions of each kind, in table order and out of order.
TEST(OnDemand, EveryStageEqualsTheFullTrace) {
    for (const Config& c : models()) {
        const Weights w = [&] { Weights p = init_weights(c, 11); pack_blocks(p); return p; }();
        const Tensor3 x = wave(c, 0.07f);
        std::vector<std::pair<std::string, Options>> cases{{"clean", {}}};
        Options iv;
        iv.iv.heads = {{1, 2, true}};
        iv.iv.sublayers = {{0, true}};
        iv.iv.dropped = {1, 5};
        cases.emplace_back("ablations, dropped patches", iv);
        Options pt;
        const Trace other = run(w, wave(c, 0.31f), {});
        pt.iv.patch = ActivationPatch{{StageKind::ResidMid, 1}, {0, 2},
                                      std::make_shared<const Array>(other.get(StageId{StageKind::ResidMid, 1})), "other"};
        cases.emplace_back("activation patch", pt);
        for (const auto& [what, opt] : cases) {
            SCOPED_TRACE(c.name + ", " + what);
            const Trace full = run(w, x, opt);
            const Trace od = on_demand_pass(w, x, opt, {}, {StageKind::AttnPattern});
            ASSERT_EQ(od.size(), full.size());
            EXPECT_LT(od.bytes(), full.bytes() / 2) << "the on-demand pass kept most of the trace";
            // the rows it keeps, and those it does not
            for (size_t r = 0; r < full.size(); ++r) {
                const StageInfo& s = full.info(r);
                const bool want = s.layer < 0 || s.id.kind == StageKind::ResidPost || s.id.kind == StageKind::AttnPattern;
                EXPECT_EQ(od.kept(r), want) << full.name(r);
            }
            BlockReader reader{od};
            auto check = [&](size_t r) {
                SCOPED_TRACE(full.name(r));
                reader.at(r);
                EXPECT_TRUE(same_bits(od.at(r), full.at(r)));
                EXPECT_LE(od.on_demand_stats().blocks_held, 1) << "read block by block, more than one block held";
            };
            for (size_t r = 0; r < full.size(); ++r) check(r);
            for (size_t r = full.size(); r-- > 0;) check(r);  // blocks recomputed in reverse order
            EXPECT_EQ(od.on_demand_stats().blocks_held, 1);
            od.trim(), od.trim();  // the last block read, then not read since: dropped
            EXPECT_EQ(od.on_demand_stats().blocks_held, 0);
        }
    }
}

// The window's traces on demand (Trace::set_on_demand through RunRequest::on_demand): every row of
// the table reads as the full trace's, bit for bit, whether kept or materialized from its block, in
// any order; a materialized array keeps its address until trim(), which drops only the blocks not
// read since the last trim; the Changes comparison, a pass reusing an on-demand pass's prefix
// (forward_from) and the NaN report agree with the full traces'.
TEST(OnDemand, TraceMaterializesEveryStageBitForBit) {
    for (const Config& c : models()) {
        const auto w = std::make_shared<const Weights>([&] { Weights p = init_weights(c, 5); pack_blocks(p); return p; }());
        const Tensor3 x = wave(c, 0.11f);
        RunRequest od;
        od.on_demand = w;
        od.keep_kinds = {StageKind::AttnPattern};
        Options iv;
        iv.iv.heads = {{1, 0, true}};
        iv.iv.dropped = {2};
        for (const auto& [what, opt] : std::vector<std::pair<std::string, Options>>{{"clean", {}}, {"interventions", iv}}) {
            SCOPED_TRACE(c.name + ", " + what);
            const Trace full = run(*w, x, opt);
            Trace t;
            forward(*w, x, opt, t, od);
            ASSERT_TRUE(t.on_demand());
            ASSERT_EQ(t.size(), full.size());
            EXPECT_LT(t.bytes(), full.bytes() / 2) << "the on-demand pass kept most of the trace";
            EXPECT_EQ(t.on_demand_stats().kept_block, -1) << "no block kept whole when none was asked for";
            for (size_t r = 0; r < full.size(); ++r) {
                const StageInfo& s = full.info(r);
                EXPECT_EQ(t.kept(r), s.layer < 0 || s.id.kind == StageKind::ResidPost || s.id.kind == StageKind::AttnPattern)
                    << s.name;
                EXPECT_TRUE(t.has(s.id)) << s.name;
            }
            EXPECT_EQ(t.on_demand_stats().recomputes, 0) << "has() or index() recomputed a block";
            for (int pass = 0; pass < 2; ++pass)  // forward, then backward through the blocks
                for (size_t k = 0; k < full.size(); ++k) {
                    const size_t r = pass ? full.size() - 1 - k : k;
                    SCOPED_TRACE(full.name(r));
                    EXPECT_TRUE(same_bits(t.at(r), full.at(r)));
                    EXPECT_TRUE(same_bits(t.get(full.info(r).id), full.at(r)));
                }
            EXPECT_EQ(t.on_demand_stats().recomputes, c.depth) << "a block recomputed twice before a trim";
            // addresses stay until trim(); trim keeps the blocks read since the last one
            const StageId q{StageKind::AttnQ, 0}, m{StageKind::MlpPre, 1};
            const Array* q0 = t.find(q);
            const size_t all = t.on_demand_stats().cache_bytes;
            t.trim();  // everything was read since the pass: nothing dropped
            EXPECT_EQ(t.on_demand_stats().blocks_held, c.depth);
            EXPECT_EQ(t.on_demand_stats().cache_bytes, all);
            EXPECT_EQ(t.find(q), q0);
            t.trim();  // only q read since the last trim: it stays, the rest goes
            EXPECT_EQ(t.on_demand_stats().blocks_held, 1);
            EXPECT_EQ(t.on_demand_stats().cache_bytes, q0->size() * sizeof(float));
            EXPECT_EQ(t.find(q), q0);
            t.trim();
            EXPECT_TRUE(same_bits(t.get(m), full.get(m)));
            EXPECT_EQ(t.on_demand_stats().blocks_held, 1) << "block 0, not read since the trim, stayed";
            t.trim();
            const Array* m0 = t.find(m);  // block 1 read since the trim: it stays while block 0 is computed
            EXPECT_TRUE(same_bits(*t.find(q), full.get(q)));
            EXPECT_EQ(t.on_demand_stats().blocks_held, 2);
            EXPECT_EQ(t.find(m), m0);
            // a row read in a frame, then another row of its block that was dropped: recomputing the
            // block leaves the row read (and perhaps referenced) at its address
            t.trim();
            EXPECT_EQ(t.find(m), m0);
            t.trim();  // block 1's other rows go, m stays
            const Array* m1 = t.find(m);  // the next frame reads m, then another row of its block
            EXPECT_EQ(m1, m0);
            const StageId k1{StageKind::AttnK, 1};
            EXPECT_TRUE(same_bits(t.get(k1), full.get(k1)));  // block 1 recomputed
            EXPECT_EQ(t.find(m), m1) << "recomputing a block moved a row that was held";
            EXPECT_TRUE(same_bits(*m1, full.get(m)));
            t.trim();
            t.trim();
            EXPECT_EQ(t.on_demand_stats().blocks_held, 0);
            EXPECT_EQ(t.on_demand_stats().cache_bytes, 0u);
            // a block into a trace of the caller's own leaves the cache alone
            const int recomputes = t.on_demand_stats().recomputes;
            const Trace b1 = t.block(1);
            EXPECT_TRUE(same_bits(b1.get(m), full.get(m)));
            EXPECT_EQ(t.on_demand_stats().recomputes, recomputes);
            EXPECT_EQ(t.on_demand_stats().blocks_held, 0);
            // the Changes comparison, stage by stage, as between the full traces
            const Trace base_full = run(*w, x, Options{});
            Trace base;
            forward(*w, x, Options{}, base, od);
            const auto want = trace_changes(base_full, full), got = trace_changes(base, t);
            ASSERT_EQ(got.size(), want.size());
            for (size_t i = 0; i < want.size(); ++i) {
                EXPECT_EQ(got[i].name, want[i].name);
                EXPECT_EQ(got[i].diff_norm, want[i].diff_norm) << want[i].name;
                EXPECT_EQ(got[i].base_norm, want[i].base_norm) << want[i].name;
            }
            EXPECT_EQ(t.on_demand_stats().blocks_held, 0) << "the comparison filled the cache";
            EXPECT_FALSE(first_nonfinite_stage(t).has_value());
        }
        // a pass reusing an on-demand pass's blocks before the one an ablation changes
        Options ab;
        ab.iv.heads = {{1, 1, true}};
        Trace prev, next;
        forward(*w, x, {}, prev, od);
        forward_from(*w, prev, ab, 1, next, od);
        ASSERT_TRUE(next.on_demand());
        const Trace full = run(*w, x, ab);
        for (size_t r = 0; r < full.size(); ++r) {
            SCOPED_TRACE(c.name + ", forward_from: " + full.name(r));
            EXPECT_TRUE(same_bits(next.at(r), full.at(r)));
        }
        EXPECT_EQ(prev.on_demand_stats().recomputes, 0) << "forward_from filled the earlier trace's cache";
    }
}

// The block the window looks at (RunRequest::keep_block) is recorded whole by the on-demand pass, so
// its picture needs no recompute after a toggle; its rows equal the full trace's, and so do they when
// a pass reuses an earlier one's blocks (forward_from) before or after that block.
TEST(OnDemand, BlockInViewKeptByThePass) {
    for (const Config& c : models()) {
        const auto w = std::make_shared<const Weights>([&] { Weights p = init_weights(c, 7); pack_blocks(p); return p; }());
        const Tensor3 x = wave(c, 0.23f);
        const int view = c.depth - 1;
        RunRequest od;
        od.on_demand = w;
        od.keep_kinds = {StageKind::AttnPattern};
        od.keep_block = view;
        const Trace full = run(*w, x, {});
        Trace t;
        forward(*w, x, {}, t, od);
        for (size_t r = 0; r < full.size(); ++r) {
            const StageInfo& s = full.info(r);
            SCOPED_TRACE(c.name + ": " + s.name);
            EXPECT_EQ(t.kept(r), s.layer < 0 || s.layer == view || s.id.kind == StageKind::ResidPost ||
                                     s.id.kind == StageKind::AttnPattern);
            if (s.layer == view) EXPECT_TRUE(same_bits(t.at(r), full.at(r)));
        }
        EXPECT_EQ(t.on_demand_stats().recomputes, 0) << "a row of the block in view was recomputed";
        EXPECT_EQ(t.on_demand_stats().kept_block, view) << "the stats (the status bar) name the block kept whole";
        // an ablation in block 0 and in the last block: forward_from reuses the prefix, the view block kept
        for (int from : {0, view}) {
            Options ab;
            ab.iv.heads = {{from, 0, true}};
            Trace next;
            forward_from(*w, t, ab, from, next, od);
            const Trace want = run(*w, x, ab);
            for (size_t r = 0; r < want.size(); ++r) {
                if (want.info(r).layer != view) continue;
                SCOPED_TRACE(c.name + ", forward_from block " + std::to_string(from) + ": " + want.name(r));
                EXPECT_TRUE(next.kept(r));
                EXPECT_TRUE(same_bits(next.at(r), want.at(r)));
            }
            EXPECT_EQ(next.on_demand_stats().recomputes, 0);
        }
    }
}

// NaN from an on-demand pass: found from its kept rows, then named exactly as in the full trace.
TEST(OnDemand, NonFiniteStageAsTheFullTrace) {
    const Config c = small("vit-ti16");
    auto wp = std::make_shared<Weights>(init_weights(c, 3));
    wp->blocks[1].fc1_b(0) = std::numeric_limits<float>::quiet_NaN();  // blocks.1.mlp.pre: the first stage with NaN
    pack_blocks(*wp);
    const std::shared_ptr<const Weights> w = wp;
    const Tensor3 x = wave(c);
    RunRequest od;
    od.on_demand = w;
    Trace t;
    forward(*w, x, {}, t, od);
    const auto a = first_nonfinite_stage(run(*w, x)), b = first_nonfinite_stage(t);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->stage, "blocks.1.mlp.pre");
    EXPECT_EQ(b->describe(t.size()), a->describe(t.size()));
}

// The size limit applies to what a pass holds: ViT-L/16 at 512 px is refused as a full trace
// (5.7 GB, with a message that points to the stages on demand) but its run fits on demand.
TEST(OnDemand, FullTraceLimitPointsToOnDemand) {
    Weights w;  // shapes only: the limit is checked before any weight is read
    w.cfg = preset("vit-l16");
    w.blocks.resize(size_t(w.cfg.depth));
    Options o;
    o.image_h = o.image_w = 512;
    EXPECT_NO_THROW(run_dims(w.cfg, o));
    const Tensor3 x = Tensor3::from_shape({3, 512, 512});
    try {
        run(w, x, o);
        ADD_FAILURE() << "a 5.7 GB full trace ran";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("on demand"), std::string::npos) << e.what();
    }
    o.image_h = o.image_w = 4096;  // 65 k tokens: even one block's attention is too much
    EXPECT_THROW(run_dims(w.cfg, o), std::invalid_argument);
}

// Gradients on demand (the same checkpointing): the backward pass that keeps only the gradient of
// the residual stream between blocks and recomputes a block's stages and gradients when asked gives
// every stage's gradient bit for bit as the full traced backward records it: the default model, a
// ViT-Ti/16-shaped model with random weights (three blocks, with options that change the backward:
// mean pooling, another input size, the unbiased variance without affine, the scale after the
// softmax; with block stages kept), a toy model, DINOv3 and AIMv2; in table order, in reverse, and with stages of other blocks read between.
TEST(OnDemand, EveryGradientEqualsTheFullBackward) {
    struct Case { std::string what; Weights w; Options opt; int cls; std::vector<StageKind> also = {}; };
    std::vector<Case> cases;
    cases.push_back({"default", load_model("default").weights, {}, -1});
    Config ti = small("vit-ti16");
    ti.depth = 3;
    const Weights wti = [&] { Weights p = init_weights(ti, 13); pack_blocks(p); return p; }();
    cases.push_back({"vit-ti16 clean", wti, {}, -1});
    cases.push_back({"vit-ti16, attention patterns and mlp.pre kept", wti, {}, -1, {StageKind::AttnPattern, StageKind::MlpPre}});
    Options mean;
    mean.pooling = Pooling::Mean;
    cases.push_back({"vit-ti16 mean pooling, class 4", wti, mean, 4});
    Options odd;
    odd.image_h = 9 * ti.patch;
    odd.image_w = 6 * ti.patch;
    odd.unbiased = true;
    odd.affine = false;
    odd.bug_scale_after_softmax = true;
    cases.push_back({"vit-ti16 9x6 grid, unbiased, no affine, scale after softmax", wti, odd, -1});
    cases.push_back({"toy-rgb8", init_weights(preset("toy-rgb8"), 5), {}, -1});
    // the 2025 families' parts: RoPE with storage tokens and no position table (DINOv3, q_rot and k_rot kept), RMSNorm
    // at every site and on the patch embeddings (AIMv2, cls-less, mean pooling), each read back on demand
    cases.push_back({"dinov3-s16, rotated q and k kept", init_weights(small("dinov3-s16"), 3), {}, -1,
                     {StageKind::AttnQRot, StageKind::AttnKRot}});
    cases.push_back({"aimv2-l14 (RMSNorm)", init_weights(small("aimv2-l14"), 3), {}, -1});
    for (const Case& k : cases) {
        SCOPED_TRACE(k.what);
        const Config& c = k.w.cfg;
        const RunDims rd = run_dims(c, k.opt);
        Tensor3 x = Tensor3::from_shape({size_t(c.channels), size_t(rd.img_h), size_t(rd.img_w)});
        for (size_t i = 0; i < x.size(); ++i) x.flat(i) = std::sin(0.05f * float(i)) + 0.3f * std::cos(0.011f * float(i));
        RunRequest req;
        req.grads = true;
        req.grad_class = k.cls;
        const Trace full = run(k.w, x, k.opt, req);
        ASSERT_TRUE(full.has_grads());
        const Trace od = on_demand_pass(k.w, x, k.opt, req, k.also);
        ASSERT_TRUE(od.has_grads());
        EXPECT_EQ(od.grad_class(), full.grad_class());
        if (k.cls >= 0) EXPECT_EQ(od.grad_class(), k.cls);
        EXPECT_EQ(od.on_demand_stats().blocks_held, 0);
        // what the checkpointed pass keeps: the gradients outside the blocks, of the stream between them
        // and of the kinds kept
        size_t graded = 0;
        for (size_t r = 0; r < full.size(); ++r) {
            const StageInfo& s = full.info(r);
            const bool kept_kind = std::find(k.also.begin(), k.also.end(), s.id.kind) != k.also.end();
            const bool want = full.grad_at(r) && (s.layer < 0 || s.id.kind == StageKind::ResidPost || kept_kind);
            EXPECT_EQ(od.grad_kept(r), want) << full.name(r);
            graded += full.grad_at(r) != nullptr;
        }
        EXPECT_GE(graded, size_t(16 * c.depth));
        const size_t kept = od.bytes();
        BlockReader reader{od};
        auto check = [&](size_t r) {
            SCOPED_TRACE(full.name(r));
            reader.at(r);
            const Array* a = od.grad_at(r);
            const Array* b = full.grad_at(r);
            ASSERT_EQ(a != nullptr, b != nullptr);
            if (a) EXPECT_TRUE(same_bits(*a, *b));
        };
        for (size_t r = 0; r < full.size(); ++r) check(r);
        const Trace::OnDemandStats st = od.on_demand_stats();
        EXPECT_TRUE(st.last_block == c.depth - 1 && st.last_grads) << "the last block's gradients computed last";
        // held: what it keeps and one block's stages and gradients (the last one asked for)
        size_t block = 0;
        for (size_t r = 0; r < full.size(); ++r)
            if (full.info(r).layer == c.depth - 1)
                block += full.at(r).size() * 4 + (full.grad_at(r) ? full.grad_at(r)->size() * 4 : 0);
        EXPECT_LE(od.bytes(), kept + block) << "the on-demand pass held more than one block";
        if (c.depth >= 3) EXPECT_LT(od.bytes(), full.bytes() * 2 / 3);
        for (size_t r = full.size(); r-- > 0;) check(r);
        // a stage of another block read between two gradients of one block: both stay right
        const StageTable& t = od.table();
        const int l1 = std::min(1, c.depth - 1);
        const size_t g1 = size_t(t.index({StageKind::AttnScores, l1})), g1b = size_t(t.index({StageKind::MlpPre, l1}));
        const size_t s0 = size_t(t.index({StageKind::MlpPost, 0}));
        check(g1);
        EXPECT_TRUE(same_bits(od.at(s0), full.at(s0)));
        check(g1b);
        EXPECT_TRUE(same_bits(od.at(s0), full.at(s0)));
        EXPECT_TRUE(same_bits(*od.grad({StageKind::Ln1Out, 0}), *full.grad({StageKind::Ln1Out, 0})));
    }
}

// Gradients on demand in the window's trace (forward with RunRequest::on_demand and grads): the
// pass keeps the gradients outside the blocks and of the rows it keeps (the stream leaving every
// block, the attention patterns that the gradient-weighted rollout reads for every block); any other
// gradient is computed when read, its block's stages reused when they are held, kept and trimmed like
// the stages; every gradient, read in order, in reverse, after a trim and from a block of the caller's
// own, equals the full traced backward's bit for bit. Also on another thread with another thread count.
TEST(OnDemand, TraceGradientsEqualTheFullBackward) {
    Config ti = small("vit-ti16");
    ti.depth = 3;
    const auto w = std::make_shared<const Weights>([&] { Weights p = init_weights(ti, 17); pack_blocks(p); return p; }());
    Options mean;
    mean.pooling = Pooling::Mean;
    mean.unbiased = true;
    for (const auto& [what, opt, cls] : std::vector<std::tuple<std::string, Options, int>>{{"clean", {}, -1},
                                                                                          {"mean pooling, class 3", mean, 3}}) {
        SCOPED_TRACE(what);
        const Tensor3 x = wave(ti, 0.07f);
        RunRequest req;
        req.grads = true;
        req.grad_class = cls;
        const Trace full = run(*w, x, opt, req);
        ASSERT_TRUE(full.has_grads());
        RunRequest od = req;
        od.on_demand = w;
        od.keep_kinds = {StageKind::AttnPattern};
        Trace t;
        forward(*w, x, opt, t, od);
        ASSERT_TRUE(t.on_demand());
        ASSERT_TRUE(t.has_grads());
        EXPECT_EQ(t.grad_class(), full.grad_class());
        EXPECT_EQ(t.on_demand_stats().recomputes, 0) << "the backward pass filled the cache";
        EXPECT_EQ(t.on_demand_stats().grad_recomputes, 0);
        size_t graded = 0;
        for (size_t r = 0; r < full.size(); ++r) {
            const StageInfo& s = full.info(r);
            SCOPED_TRACE(s.name);
            const bool has = full.grad_at(r) != nullptr;
            graded += has;
            EXPECT_EQ(t.has_grad_at(r), has);
            EXPECT_EQ(t.grad_kept(r), has && (s.layer < 0 || s.id.kind == StageKind::ResidPost ||
                                              s.id.kind == StageKind::AttnPattern));
        }
        EXPECT_GE(graded, size_t(16 * ti.depth));
        EXPECT_EQ(t.on_demand_stats().grad_recomputes, 0) << "has_grad_at computed a gradient";
        // the gradient-weighted rollout reads only kept gradients
        EXPECT_EQ(grad_rollout(t, ti.depth - 1), grad_rollout(full, ti.depth - 1));
        EXPECT_EQ(t.on_demand_stats().grad_recomputes, 0);
        for (int pass = 0; pass < 2; ++pass)
            for (size_t k = 0; k < full.size(); ++k) {
                const size_t r = pass ? full.size() - 1 - k : k;
                SCOPED_TRACE(full.name(r));
                const Array* a = t.grad_at(r);
                const Array* b = full.grad_at(r);
                ASSERT_EQ(a != nullptr, b != nullptr);
                if (a) EXPECT_TRUE(same_bits(*a, *b));
            }
        EXPECT_EQ(t.on_demand_stats().grad_recomputes, ti.depth) << "a block's gradients computed twice before a trim";
        EXPECT_EQ(t.on_demand_stats().recomputes, ti.depth) << "each block's stages computed once, for its backward";
        EXPECT_TRUE(t.on_demand_stats().last_grads);
        // trimmed like the stages: a stage read, then its gradient, holds one block (its stages reused)
        t.trim();
        t.trim();
        EXPECT_EQ(t.on_demand_stats().blocks_held, 0);
        EXPECT_EQ(t.on_demand_stats().cache_bytes, 0u);
        const StageId q{StageKind::AttnQ, 1};
        const int rc = t.on_demand_stats().recomputes;
        EXPECT_TRUE(same_bits(t.get(q), full.get(q)));
        EXPECT_FALSE(t.on_demand_stats().last_grads);
        EXPECT_TRUE(same_bits(*t.grad(q), *full.grad(q)));
        EXPECT_EQ(t.on_demand_stats().recomputes, rc + 1) << "the gradient recomputed the stages a view had just read";
        EXPECT_TRUE(t.on_demand_stats().last_grads);
        EXPECT_EQ(t.on_demand_stats().last_block, 1);
        EXPECT_EQ(t.on_demand_stats().blocks_held, 1);
        const Array* gq = t.grad(q);
        const Array* vq = t.find(q);
        t.trim();  // q and its gradient read: they stay, the block's other arrays go
        EXPECT_EQ(t.grad(q), gq);
        EXPECT_EQ(t.find(q), vq);
        EXPECT_EQ(t.on_demand_stats().cache_bytes, 2 * gq->size() * sizeof(float));
        // another stage and gradient of that block, recomputed: the arrays held keep their addresses
        // (a view read them earlier in the frame)
        const StageId k{StageKind::AttnK, 1};
        EXPECT_TRUE(same_bits(t.get(k), full.get(k)));
        EXPECT_TRUE(same_bits(*t.grad(k), *full.grad(k)));
        EXPECT_EQ(t.find(q), vq);
        EXPECT_EQ(t.grad(q), gq);
        EXPECT_TRUE(same_bits(*vq, full.get(q)));
        EXPECT_TRUE(same_bits(*gq, *full.grad(q)));
        t.trim();
        t.trim();
        EXPECT_EQ(t.on_demand_stats().cache_bytes, 0u);
        // a block with its gradients into a trace of the caller's own: the cache untouched
        const int gr = t.on_demand_stats().grad_recomputes;
        const Trace b0 = t.block(0, true);
        for (size_t r = 0; r < full.size(); ++r) {
            if (full.info(r).layer != 0) continue;
            SCOPED_TRACE("block(0, true): " + full.name(r));
            EXPECT_TRUE(same_bits(b0.at(r), full.at(r)));
            ASSERT_EQ(b0.grad_at(r) != nullptr, full.grad_at(r) != nullptr);
            if (full.grad_at(r)) EXPECT_TRUE(same_bits(*b0.grad_at(r), *full.grad_at(r)));
        }
        EXPECT_EQ(t.on_demand_stats().grad_recomputes, gr);
        EXPECT_EQ(t.on_demand_stats().blocks_held, 0);
        // read from another thread with another thread count: the pass's count is used, the same bits
        const StageId m{StageKind::MlpPre, 2};
        std::thread([&] {
            ops::Budget b(1);
            EXPECT_TRUE(same_bits(*t.grad(m), *full.grad(m)));
        }).join();
    }
    // a pass with gradients that the backward cannot run is refused with its reason, before it runs
    RunRequest od;
    od.on_demand = w;
    od.grads = true;
    Options iv;
    iv.iv.heads = {{1, 0, true}};
    Trace t;
    try {
        forward(*w, wave(ti), iv, t, od);
        ADD_FAILURE() << "gradients on demand ran with an intervention";
    } catch (const std::invalid_argument& e) {
        EXPECT_EQ(std::string(e.what()), backward_unsupported(ti, iv));
    }
}

// The backward pass gives the same bits on one thread and on two: its products are split by the
// shapes, not by the thread count (a BLAS product's row can depend on the call's row count, as
// oneDNN's AVX2 sgemm's does), so a gradient recomputed on demand under another job's budget or the
// busy-core fallback equals the full backward's. Also GELU's backward (its chunks fixed by size).
TEST(OnDemand, GradientsSameBitsOnOneAndTwoThreads) {
    Config ti = small("vit-ti16");
    ti.image_size = 14 * ti.patch;  // 197 tokens: rows that two threads split unevenly
    ti.validate();
    const Weights w = init_weights(ti, 5);
    const Tensor3 x = wave(ti, 0.13f);
    RunRequest req;
    req.grads = true;
    auto on = [&](int threads) {
        ops::Budget b(threads);
        return run(w, x, {}, req);
    };
    const Trace one = on(1), two = on(2);
    ASSERT_TRUE(one.has_grads() && two.has_grads());
    size_t compared = 0;
    for (size_t r = 0; r < one.size(); ++r) {
        SCOPED_TRACE(one.name(r));
        const Array *a = one.grad_at(r), *b = two.grad_at(r);
        ASSERT_EQ(a != nullptr, b != nullptr);
        if (!a) continue;
        ++compared;
        EXPECT_TRUE(same_bits(*a, *b));
    }
    EXPECT_GE(compared, size_t(16 * ti.depth));
}

// The gradients on demand refuse what the backward pass refuses, with its message: a run with interventions.
TEST(OnDemand, GradientsRefuseWhatTheBackwardRefuses) {
    RunRequest req;
    req.grads = true;
    const Config v = small("vit-ti16");
    const Weights wv = init_weights(v, 2);
    Options o;
    o.iv.dropped = {2};
    try {
        on_demand_pass(wv, wave(v), o, req);
        ADD_FAILURE() << "on-demand gradients ran with dropped patches";
    } catch (const std::invalid_argument& e) {
        EXPECT_EQ(std::string(e.what()), backward_unsupported(v, o));
    }
    const Trace plain = on_demand_pass(wv, wave(v), {});
    EXPECT_FALSE(plain.has_grads());
    EXPECT_EQ(plain.grad_at(3), nullptr);
}

// The traced pass's fused and buffered parts against plain arithmetic on its own recorded stages:
// the residual adds computed inside the next LayerNorm (resid_mid, resid_post: exact float sums),
// the LayerNorms, and the attention computed per head in thread buffers, in blocks of query rows,
// and copied out with streaming stores (scores, pattern, z and the heads' concatenation that
// attn.out reads). A ViT-Ti at 368 px has 530 tokens: more query rows per task than a block holds.
TEST(FusedPass, StagesEqualPlainArithmeticOnTheRecordedInputs) {
    const Config c = test_util::vit_ti_530_config();
    Weights w = init_weights(c, 5);
    pack_blocks(w);
    const Trace t = run(w, wave(c, 0.05f), {});
    const size_t T = 530, D = size_t(c.width), H = size_t(c.heads), d = D / H;
    const double scale = 1.0 / std::sqrt(double(d));
    for (int l = 0; l < c.depth; ++l) {
        SCOPED_TRACE("block " + std::to_string(l));
        auto get = [&](StageKind k) -> const Array& { return t.get(StageId{k, l}); };
        const Array& x = l == 0 ? t.get(StageId{StageKind::Embed}) : t.get(StageId{StageKind::ResidPost, l - 1});
        const Array &ao = get(StageKind::AttnOut), &rm = get(StageKind::ResidMid), &mo = get(StageKind::MlpOut),
                    &rp = get(StageKind::ResidPost);
        ASSERT_EQ(rm.size(), T * D);
        for (size_t i = 0; i < T * D; ++i) {
            ASSERT_EQ(rm.data()[i], x.data()[i] + ao.data()[i]) << i;
            ASSERT_EQ(rp.data()[i], rm.data()[i] + mo.data()[i]) << i;
        }
        // ln1 reads the stream into the block, ln2 resid_mid: (x - mean) / sqrt(var + eps) * g + b
        for (auto [site, in] : {std::pair<LnSite, const Array*>{LnSite::Ln1, &x}, {LnSite::Ln2, &rm}}) {
            const Array& out = get(ln_kind(site, LnPart::Out));
            const Array& norm = get(ln_kind(site, LnPart::Normalized));
            const LayerNormW& lw = site == LnSite::Ln1 ? w.blocks[size_t(l)].ln1 : w.blocks[size_t(l)].ln2;
            for (size_t r = 0; r < T; ++r) {
                double m = 0, v = 0;
                for (size_t i = 0; i < D; ++i) m += in->data()[r * D + i];
                m /= double(D);
                for (size_t i = 0; i < D; ++i) v += std::pow(in->data()[r * D + i] - m, 2);
                v /= double(D);
                for (size_t i = 0; i < D; ++i) {
                    const double n = (in->data()[r * D + i] - m) / std::sqrt(v + c.eps);
                    ASSERT_NEAR(norm.data()[r * D + i], n, 1e-4) << r << " " << i;
                    ASSERT_NEAR(out.data()[r * D + i], n * lw.g(i) + lw.b(i), 1e-4 * (1 + std::fabs(lw.g(i))));
                }
            }
        }
        const Array &q = get(StageKind::AttnQ), &k = get(StageKind::AttnK), &v = get(StageKind::AttnV),
                    &sc = get(StageKind::AttnScores), &pa = get(StageKind::AttnPattern), &z = get(StageKind::AttnZ);
        std::vector<double> s(T), p(T);
        for (size_t h = 0; h < H; ++h)
            for (size_t i = 0; i < T; ++i) {
                double mx = -1e300, sum = 0;
                for (size_t j = 0; j < T; ++j) {
                    double a = 0;
                    for (size_t e = 0; e < d; ++e) a += double(q.data()[(h * T + i) * d + e]) * k.data()[(h * T + j) * d + e];
                    s[j] = a * scale;
                    mx = std::max(mx, s[j]);
                }
                for (size_t j = 0; j < T; ++j) sum += p[j] = std::exp(s[j] - mx);
                for (size_t j = 0; j < T; ++j) {
                    p[j] /= sum;
                    ASSERT_NEAR(sc.data()[(h * T + i) * T + j], s[j], 1e-4 * (1 + std::fabs(s[j]))) << h << " " << i << " " << j;
                    ASSERT_NEAR(pa.data()[(h * T + i) * T + j], p[j], 1e-6) << h << " " << i << " " << j;
                }
                for (size_t e = 0; e < d; ++e) {
                    double a = 0;
                    for (size_t j = 0; j < T; ++j) a += double(pa.data()[(h * T + i) * T + j]) * v.data()[(h * T + j) * d + e];
                    ASSERT_NEAR(z.data()[(h * T + i) * d + e], a, 1e-5 * (1 + std::fabs(a))) << h << " " << i << " " << e;
                }
            }
    }
    // attn.out = proj(concat of the heads' z): the concatenation each head's task wrote, against the
    // one copied from z after the attention, which a pass with a head ablation makes (in every
    // block; the ablation is in block 1, so block 0's stages must not change)
    Options ab;
    ab.iv.heads = {{1, 0, false}};
    const Trace u = run(w, wave(c, 0.05f), ab);
    EXPECT_TRUE(same_bits(u.get(StageId{StageKind::AttnOut, 0}), t.get(StageId{StageKind::AttnOut, 0})));
    EXPECT_TRUE(same_bits(u.get(StageId{StageKind::ResidPost, 0}), t.get(StageId{StageKind::ResidPost, 0})));
}
