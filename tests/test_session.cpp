// The window's session (app/session.h, no GL): when it computes gradients and why not (grad_plan,
// grad_bytes), and a pass on demand with gradients, checkpointed, against the full backward.
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "app/jobs.h"
#include "app/session.h"
#include "core/model/backward.h"
#include "core/model/forward.h"
#include "tests/trace_compare.h"

using namespace vit;
using namespace vit::app;
using vit::test_util::same_bits;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

Options at_size(int px) {
    Options o;
    o.image_h = o.image_w = px;
    return o;
}

// A three-block ViT-Ti/16 with random weights and a 224-px ramp input (values (i % period) / period - off).
struct SmallVit {
    Config c;
    std::shared_ptr<const Weights> w;
    Tensor3 x;
};
SmallVit small_vit(uint64_t seed, size_t period, float off) {
    SmallVit m{preset("vit-ti16"), nullptr, Tensor3::from_shape({3, 224, 224})};
    m.c.depth = 3;
    m.w = std::make_shared<const Weights>(init_weights(m.c, seed));
    for (size_t i = 0; i < m.x.size(); ++i) m.x.flat(i) = float(i % period) / float(period) - off;
    return m;
}

// Runs the session's pass to its end (the job's own signal: poll takes the result once it finished).
void settle(Session& s) {
    s.poll(0);
    while (s.busy()) s.poll(50);
}

}  // namespace

// The estimate is of what a pass holds: a full pass with gradients records exactly `kept`, and an
// on-demand pass keeps exactly its `kept` (stages and gradients of the kept rows), then holds at most
// `block` more while a block's stages and gradients are computed.
TEST(GradPlan, BytesAreWhatThePassHolds) {
    const auto [c, w, x] = small_vit(4, 97, 0.5f);
    EXPECT_EQ(grad_bytes(c, {}, false).weights, double(param_count(c)) * 4);
    RunRequest req;
    req.grads = true;
    const Trace full = run(*w, x, {}, req);
    EXPECT_EQ(grad_bytes(c, {}, false).kept, double(full.bytes()));
    RunRequest od = req;
    od.on_demand = w;
    od.keep_kinds = on_demand_keep_kinds();
    Trace t;
    forward(*w, x, {}, t, od);
    const GradBytes b = grad_bytes(c, {}, true);
    EXPECT_EQ(b.kept, double(t.on_demand_stats().kept_bytes + t.on_demand_stats().kept_grad_bytes));
    for (size_t r = 0; r < t.size(); ++r)
        if (t.info(r).layer == 1) {
            t.at(r);
            t.grad_at(r);
        }
    EXPECT_GT(double(t.on_demand_stats().cache_bytes), b.block / 4) << "a block is most of the estimate's margin";
    EXPECT_LE(double(t.on_demand_stats().cache_bytes), b.block);
    EXPECT_LT(b.total(), grad_bytes(c, {}, false).total());
}

// Which models get gradients, and every reason said when they do not: small models automatically;
// ViT-B, ViT-L/16 and ViT-H/14 on request (on demand, checkpointed); a full trace of ViT-L/16 with its
// gradients and ViT-L/16 at 512 px (its kept attention patterns and their gradients) over the limit.
TEST(GradPlan, RulesAndReasons) {
    const Config def = load_model("default").weights.cfg, b16 = preset("vit-b16"), l16 = preset("vit-l16"),
                 h14 = preset("vit-h14");
    GradPlan p = grad_plan(GradMode::Auto, StagesMode::Auto, def, {});
    EXPECT_TRUE(p.run);
    EXPECT_FALSE(p.on_demand);
    EXPECT_EQ(p.why, "");
    p = grad_plan(GradMode::Auto, StagesMode::OnDemand, def, {});
    EXPECT_TRUE(p.run && p.on_demand) << "a small model forced on demand keeps its gradients, checkpointed";
    p = grad_plan(GradMode::Off, StagesMode::Auto, def, {});
    EXPECT_FALSE(p.run);
    EXPECT_TRUE(p.can_request);
    EXPECT_TRUE(has(p.why, "--no-grads")) << p.why;

    p = grad_plan(GradMode::Auto, StagesMode::Auto, b16, {});
    EXPECT_FALSE(p.run);
    EXPECT_TRUE(p.can_request);
    EXPECT_TRUE(has(p.why, "86.6M parameters") && has(p.why, "automatic only under 30M")) << p.why;
    for (const Config* c : {&b16, &l16, &h14}) {
        SCOPED_TRACE(c->name);
        p = grad_plan(GradMode::On, StagesMode::Auto, *c, {});
        EXPECT_TRUE(p.run && p.on_demand && p.why.empty()) << p.why;
        const GradBytes b = grad_bytes(*c, {}, true);
        EXPECT_LE(b.total(), b.limit());
        EXPECT_EQ(b.limit(), 1.25 * double(param_count(*c)) * 4 + 0.5e9);
    }
    // every stage of ViT-L/16 and its gradient recorded: over the limit, and the way it would fit said
    p = grad_plan(GradMode::On, StagesMode::All, l16, {});
    EXPECT_FALSE(p.run || p.can_request);
    EXPECT_TRUE(has(p.why, "over the window's limit of 1.25 x the weights + 0.5 GB = 2.02 GB")) << p.why;
    EXPECT_TRUE(has(p.why, "every one recorded") && has(p.why, "--stages on-demand")) << p.why;
    EXPECT_GT(grad_bytes(l16, {}, false).total(), grad_bytes(l16, {}, false).limit());
    // ViT-B/16's full trace with gradients fits
    EXPECT_TRUE(grad_plan(GradMode::On, StagesMode::All, b16, {}).run);
    // ViT-L/16 at 512 px: the attention patterns of 1,025 tokens kept with their gradients do not fit
    p = grad_plan(GradMode::On, StagesMode::Auto, l16, at_size(512));
    EXPECT_FALSE(p.run || p.can_request);
    EXPECT_TRUE(p.on_demand);
    EXPECT_TRUE(has(p.why, "gradients are not computed for this model") && has(p.why, "on demand") &&
                !has(p.why, "--stages on-demand"))
        << p.why;
    p = grad_plan(GradMode::Off, StagesMode::Auto, l16, at_size(512));
    EXPECT_TRUE(has(p.why, "--no-grads") && has(p.why, "over the window's limit")) << p.why;
    // every family has its backward (DINOv3's RoPE, AIMv2's RMSNorm): the plan runs them as any other
    p = grad_plan(GradMode::On, StagesMode::Auto, preset("dinov3-s16"), {});
    EXPECT_TRUE(p.run && p.why.empty()) << p.why;
    // what the backward cannot run (an intervention): its own reason, nothing to request
    Options iv;
    iv.iv.heads = {{0, 0, true}};
    p = grad_plan(GradMode::Auto, StagesMode::Auto, def, iv);
    EXPECT_FALSE(p.run || p.can_request);
    EXPECT_TRUE(has(p.why, "interventions")) << p.why;
}

// The session's pass on demand with gradients: checkpointed (the trace on demand, with gradients),
// every gradient equal to the full backward's bit for bit; "compute gradients" on a model over the
// automatic size turns them on, on demand.
TEST(GradPlan, SessionPassOnDemandWithGradients) {
    JobQueue jobs;
    Session s(jobs);
    ASSERT_TRUE(s.load_image(std::string(VITSCOPE_SOURCE_DIR) + "/assets/samples/9_ankle_boot_test0.png"));
    s.set_stages_mode(StagesMode::OnDemand);
    settle(s);
    ASSERT_TRUE(s.trace()) << s.error();
    const Trace& t = *s.trace();
    EXPECT_TRUE(t.on_demand());
    ASSERT_TRUE(t.has_grads()) << s.grads_unavailable_reason();
    EXPECT_EQ(s.result().no_grads_why, "");
    RunRequest req;
    req.grads = true;
    const Trace full = run(s.weights(), s.input(), {}, req);
    EXPECT_EQ(t.grad_class(), full.grad_class());
    for (size_t r = 0; r < full.size(); ++r) {
        SCOPED_TRACE(full.name(r));
        ASSERT_EQ(t.grad_at(r) != nullptr, full.grad_at(r) != nullptr);
        if (full.grad_at(r)) EXPECT_TRUE(same_bits(*t.grad_at(r), *full.grad_at(r)));
    }
    s.trim_stages();
    // --no-grads, then the button
    Session n(jobs);
    ASSERT_TRUE(n.load_image(std::string(VITSCOPE_SOURCE_DIR) + "/assets/samples/9_ankle_boot_test0.png"));
    n.set_stages_mode(StagesMode::OnDemand);
    n.set_grad_mode(GradMode::Off);
    settle(n);
    ASSERT_TRUE(n.trace());
    EXPECT_FALSE(n.trace()->has_grads());
    EXPECT_TRUE(has(n.result().no_grads_why, "--no-grads"));
    EXPECT_TRUE(n.can_compute_grads());
    n.set_grad_mode(GradMode::On);
    settle(n);
    ASSERT_TRUE(n.trace());
    EXPECT_TRUE(n.trace()->has_grads() && n.trace()->on_demand());
    EXPECT_EQ(n.result().no_grads_why, "");
    EXPECT_FALSE(n.can_compute_grads()) << "the button is offered with the gradients there";
}

// The progress of a pass with the checkpointed backward: the forward's rows, a unit per block of the
// backward from the last block down, then the Changes baseline's rows.
TEST(GradPlan, StepTextThroughTheBackward) {
    const Config c = preset("vit-b16");
    const auto t = StageTable::get(c, {});
    const int rows = int(t->size()), L = c.depth;
    EXPECT_EQ(run_step_text(*t, rows - 1, false, L), "running the head");
    EXPECT_EQ(run_step_text(*t, rows, false, L), "the backward pass (checkpointed): block 12 of 12, its stages recomputed");
    EXPECT_EQ(run_step_text(*t, rows + L - 1, false, L), "the backward pass (checkpointed): block 1 of 12, its stages recomputed");
    EXPECT_EQ(run_step_text(*t, rows + L, false, L), run_step_text(*t, rows, false, 0));
    EXPECT_TRUE(has(run_step_text(*t, rows + L, false, L), "the baseline for Changes")) << run_step_text(*t, rows + L, false, L);
    EXPECT_EQ(run_step_text(*t, 5, true, L), run_step_text(*t, 5, true, 0));
}

// The pass reports a unit per block of its checkpointed backward (what the progress bar counts).
TEST(GradPlan, BackwardCountsItsBlocks) {
    const auto [c, w, x] = small_vit(2, 13, 0.4f);
    std::atomic<int> units{0};
    RunRequest req;
    req.on_demand = w;
    req.keep_kinds = on_demand_keep_kinds();
    Trace fwd;
    fwd.set_progress(&units);
    forward(*w, x, {}, fwd, req);
    const int forward_units = units.load();
    EXPECT_EQ(forward_units, int(fwd.size()));
    units = 0;
    req.grads = true;
    Trace t;
    t.set_progress(&units);
    forward(*w, x, {}, t, req);
    EXPECT_EQ(units.load(), forward_units + c.depth);
}
