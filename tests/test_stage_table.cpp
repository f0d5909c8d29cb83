// The stage table: one definition per kind, tables shared and looked up in O(1), names
// derived from ids, and the checks that make a forgotten part of a new stage fail here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/model/forward.h"
#include "core/model/stages.h"

using namespace vit;

namespace {
std::vector<Options> some_options() {
    std::vector<Options> v(1);
    Options o;
    o.affine = false;
    o.unbiased = true;
    v.push_back(o);
    o = {};
    o.pooling = Pooling::Mean;
    v.push_back(o);
    o = {};
    o.bug_reshape_patches = o.bug_scale_after_softmax = true;
    v.push_back(o);
    return v;
}
bool mentions(const std::vector<std::string>& problems, const std::string& what) {
    return std::any_of(problems.begin(), problems.end(),
                       [&](const std::string& p) { return p.find(what) != std::string::npos; });
}
}  // namespace

TEST(StageTable, EveryKindIsDefinedCompletely) {
    const auto problems = check_stage_definitions();
    for (auto& p : problems) ADD_FAILURE() << p;
    EXPECT_EQ(stage_defs().size(), size_t(kStageKinds));
}

// The checks catch what a new stage kind could forget: they are run on doctored copies.
TEST(StageTable, AForgottenPartOfANewStageFailsTheChecks) {
    const std::vector<StageDef> good = stage_defs();
    const std::vector<StageKind> grads = backward_grad_kinds();
    ASSERT_TRUE(check_stage_definitions(good, grads).empty());

    auto no_box = good;
    no_box[size_t(StageKind::PosEmbed)].box = "";
    EXPECT_TRUE(mentions(check_stage_definitions(no_box, grads), "PosEmbed: no box on the map"));

    auto no_backward = grads;  // declared with a gradient, but the backward pass does not write it
    no_backward.erase(std::find(no_backward.begin(), no_backward.end(), StageKind::PosEmbed));
    EXPECT_TRUE(mentions(check_stage_definitions(good, no_backward),
                         "PosEmbed: has_grad, but the backward pass does not write its gradient"));

    auto undeclared = good;  // the backward pass writes a gradient the table does not declare
    undeclared[size_t(StageKind::MlpOut)].has_grad = false;
    EXPECT_TRUE(mentions(check_stage_definitions(undeclared, grads), "MlpOut: the backward pass writes a gradient"));

    auto missing = good;  // a kind without a definition
    missing.pop_back();
    EXPECT_TRUE(mentions(check_stage_definitions(missing, grads), "one definition per kind"));

    auto no_hook = good;
    no_hook[size_t(StageKind::AttnZ)].hook = "";
    EXPECT_TRUE(mentions(check_stage_definitions(no_hook, grads), "AttnZ: no PyTorch hook"));

    auto no_layer = good;  // a block stage whose name does not say its block
    no_layer[size_t(StageKind::AttnZ)].pattern = "attn.z";
    EXPECT_TRUE(mentions(check_stage_definitions(no_layer, grads), "AttnZ: a block stage's pattern needs {l}"));
}

TEST(StageTable, EveryTableChecksOut) {
    for (auto name : {"toy-rgb8", "toy-gray4", "fmnist", "vit-ti16"})
        for (const Options& o : some_options()) {
            SCOPED_TRACE(std::string(name) + " " + o.describe());
            const auto t = StageTable::get(preset(name), o);
            for (auto& p : check_table(*t)) ADD_FAILURE() << p;
        }
}

TEST(StageTable, SharedAndLookedUpById) {
    const Config c = preset("fmnist");
    Options mean;
    mean.pooling = Pooling::Mean;
    const auto a = StageTable::get(c), b = StageTable::get(c), m = StageTable::get(c, mean);
    EXPECT_EQ(a, b);  // built once
    EXPECT_NE(a, m);
    Options explicit_cls;
    explicit_cls.pooling = Pooling::Cls;  // the model's own pooling said out loud: the same table
    EXPECT_EQ(a, StageTable::get(c, explicit_cls));
    Config renamed = c;
    renamed.class_names.assign(size_t(c.classes), "x");  // names of classes do not change stages
    EXPECT_EQ(a, StageTable::get(renamed));
    for (size_t i = 0; i < a->size(); ++i) {
        const StageInfo& s = (*a)[i];
        EXPECT_EQ(a->index(s.id), int(i));
        EXPECT_EQ(a->find(s.name), &s);
        EXPECT_EQ(&a->info(s.id), &s);
        EXPECT_EQ(stage_name(s.id), s.name);
    }
    EXPECT_EQ(a->index({StageKind::AttnQ, c.depth}), -1);  // past the last block
    EXPECT_EQ(a->index({StageKind::AttnQ, -1}), -1);       // a block stage outside the blocks
    EXPECT_EQ(a->index({StageKind::Input, 0}), -1);        // a model stage inside a block
    EXPECT_THROW(a->info({StageKind::AttnQ, 99}), std::out_of_range);
    // The pooling decides the order of the head's stages.
    EXPECT_LT(a->index({StageKind::LnFinalOut}), a->index({StageKind::Pooled}));
    EXPECT_GT(m->index({StageKind::LnFinalOut}), m->index({StageKind::Pooled}));
}

TEST(StageNames, ParseBackToTheirIdsAndNothingElseParses) {
    const auto t = StageTable::get(preset("fmnist"));
    for (const StageInfo& s : *t) {
        auto id = parse_stage_name(s.name);
        ASSERT_TRUE(id) << s.name;
        EXPECT_EQ(*id, s.id) << s.name;
    }
    for (auto bad : {"", "blocks", "blocks.", "blocks.1", "blocks.x.attn.q", "blocks.01.attn.q", "blocks.-1.attn.q",
                     "attn.q", "blocks.1.input", "input.grad", "logits ", "blocks.1.attn.pattern.grad"})
        EXPECT_FALSE(parse_stage_name(bad)) << bad;
    EXPECT_EQ(*parse_stage_name("blocks.11.attn.pattern"), (StageId{StageKind::AttnPattern, 11}));
}

// The one stage this issue added as the example: pos_embed, the position embeddings that are added.
TEST(StageTable, PosEmbedIsWhatEmbedAdds) {
    const Config c = preset("toy-gray4");
    Weights w = init_weights(c, 5);
    Tensor3 x = Tensor3::from_shape({1, 4, 4});
    for (size_t i = 0; i < x.size(); ++i) x.flat(i) = float(i % 5) - 2.f;
    RunRequest req;
    req.grads = true;
    const Trace t = run(w, x, {}, req);
    const Array& pos = t.get(StageId{StageKind::PosEmbed});
    EXPECT_TRUE(pos == Array(w.pos));
    EXPECT_TRUE(t.get(StageId{StageKind::Embed}) == t.get(StageId{StageKind::Tokens}) + pos);
    // embed = tokens + pos_embed: both get embed's gradient
    EXPECT_TRUE(*t.grad(StageId{StageKind::PosEmbed}) == *t.grad(StageId{StageKind::Embed}));
    const StageInfo& info = t.info(StageId{StageKind::PosEmbed});
    EXPECT_EQ(info.box.id, "embed");
    EXPECT_EQ(t.info(StageId{StageKind::Embed}).from.back(), info.id);
}

// Every family's preset builds a table that checks out and runs (one block, random weights):
// the stages the table lists are the ones the forward pass records, in its order.
TEST(Families, EveryPresetRunsThroughItsTable) {
    for (const std::string n : {"deit-ti16-distilled", "dino-s16", "dinov2-s14", "dinov2-s14-reg", "clip-b32",
                                "siglip-b16", "mae-b16", "vit-betwixt16-reg4-gap"}) {
        SCOPED_TRACE(n);
        Config c = preset(n);
        c.depth = 1;
        const auto table = StageTable::get(c);
        for (auto& p : check_table(*table)) ADD_FAILURE() << p;
        const Weights w = init_weights(c, 3);
        Tensor3 x = Tensor3::from_shape({3, size_t(c.image_size), size_t(c.image_size)});
        for (size_t i = 0; i < x.size(); ++i) x.flat(i) = float((i * 37) % 101) / 50.f - 1.f;
        const Trace t = run(w, x);
        EXPECT_EQ(t.size(), table->size());
        const Array& last = t.at(t.size() - 1);
        for (float v : last) ASSERT_TRUE(std::isfinite(v));
        EXPECT_EQ(t.info(t.size() - 1).id.kind, c.has_logits() ? StageKind::Probs : StageKind::Embedding);
    }
}

TEST(Families, RunSizesAreCheckedAndResizeThePositions) {
    Config c = preset("dinov2-s14");
    c.depth = 1;
    Options o;
    o.image_h = 100;  // not a multiple of 14
    o.image_w = 98;
    EXPECT_THROW(run_dims(c, o), std::invalid_argument);
    o.image_h = 98;
    o.image_w = 140;
    const RunDims r = run_dims(c, o);
    EXPECT_EQ(r.gh, 7);
    EXPECT_EQ(r.gw, 10);
    EXPECT_TRUE(r.resized);  // the stored table is 37 x 37
    const auto t = StageTable::get(c, o);
    ASSERT_TRUE(t->has({StageKind::PosEmbedLearned}));
    EXPECT_EQ(t->info({StageKind::PosEmbedLearned}).shape, (Shape{1 + 37 * 37, 384}));
    EXPECT_EQ(t->info({StageKind::PosEmbed}).shape, (Shape{1 + 70, 384}));
    // the pooling switch is for ViT classifiers: refused on CLIP, named
    Config clip = preset("clip-b32");
    Options mean;
    mean.pooling = Pooling::Mean;
    try {
        run_dims(clip, mean);
        ADD_FAILURE() << "no error";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("pooling mean does not apply"), std::string::npos) << e.what();
    }
}

// The map draws one "pool" box and one "head" box from the table's notes: for DeiT distilled they
// must say that both the cls and the dist token are pooled and that two heads are averaged (the map
// of the model that ran, not of a plain ViT).
TEST(StageTable, DistilledBoxesSayBothTokensAndBothHeads) {
    const auto t = StageTable::get(preset("deit-ti16-distilled"));
    EXPECT_EQ(t->info({StageKind::Pooled, -1}).box.sub, "cls and dist tokens");
    EXPECT_EQ(t->info({StageKind::PooledDist, -1}).box.sub, "cls and dist tokens");
    EXPECT_EQ(t->info({StageKind::LogitsCls, -1}).box.sub, "2 heads averaged, 1000 classes");
    const auto plain = StageTable::get(preset("vit-ti16"));
    EXPECT_EQ(plain->info({StageKind::Pooled, -1}).box.sub, "cls token");
    EXPECT_EQ(plain->info({StageKind::Logits, -1}).box.sub, "1000 classes");
}

// The table's order and shapes come from the forward pass's own parts run dry (forward_stages):
// checked here against hand arithmetic, not against the code that computes them. ViT-B/16 at 224:
// 14x14 = 196 patches of 3*16*16 = 768 values, 197 tokens, 12 heads of 64, an MLP of 3072;
// 6 stages before the blocks, 20 per block, 7 after: 253.
TEST(StageTable, ShapesFromTheDryRunMatchHandArithmetic) {
    auto shape = [](const StageTable& t, const std::string& name) {
        const StageInfo* s = t.find(name);
        return s ? s->shape : Shape{};
    };
    const auto b16 = StageTable::get(preset("vit-b16"));
    EXPECT_EQ(b16->size(), 6u + 12u * 20u + 7u);
    EXPECT_EQ(shape(*b16, "input"), (Shape{3, 224, 224}));
    EXPECT_EQ(shape(*b16, "patches"), (Shape{196, 768}));
    EXPECT_EQ(shape(*b16, "tokens"), (Shape{197, 768}));
    EXPECT_EQ(shape(*b16, "blocks.11.ln1.mean"), (Shape{197}));
    EXPECT_EQ(shape(*b16, "blocks.3.attn.q"), (Shape{12, 197, 64}));
    EXPECT_EQ(shape(*b16, "blocks.3.attn.pattern"), (Shape{12, 197, 197}));
    EXPECT_EQ(shape(*b16, "blocks.3.mlp.pre"), (Shape{197, 3072}));
    EXPECT_EQ(shape(*b16, "pooled"), (Shape{768}));
    EXPECT_EQ(shape(*b16, "probs"), (Shape{1000}));
    EXPECT_EQ(b16->rows().back().name, "probs");

    // DINOv2 with registers on a 98x140 input (a 7x10 grid of 14-pixel patches = 70), two patches
    // dropped: tokens before the drop 1 + 70, after it 69; then cls, 4 registers, 68 patches = 73.
    Options o;
    o.image_h = 98;
    o.image_w = 140;
    o.iv.dropped = {3, 40};
    const auto reg = StageTable::get(preset("dinov2-s14-reg"), o);
    EXPECT_EQ(shape(*reg, "pos_embed.learned"), (Shape{1 + 37 * 37, 384}));
    EXPECT_EQ(shape(*reg, "embed"), (Shape{71, 384}));
    EXPECT_EQ(shape(*reg, "embed.kept"), (Shape{69, 384}));
    EXPECT_EQ(shape(*reg, "with_registers"), (Shape{73, 384}));
    EXPECT_EQ(shape(*reg, "blocks.0.attn.scores"), (Shape{6, 73, 73}));
    EXPECT_EQ(shape(*reg, "blocks.0.ls1"), (Shape{73, 384}));

    // SigLIP: no cls token (196 tokens), the attention-pooling head's one query over them.
    const auto sig = StageTable::get(preset("siglip-b16"));
    EXPECT_EQ(shape(*sig, "tokens"), (Shape{196, 768}));
    EXPECT_EQ(shape(*sig, "head.attn.pattern"), (Shape{12, 1, 196}));
    EXPECT_EQ(shape(*sig, "head.ln.out"), (Shape{1, 768}));
    EXPECT_EQ(shape(*sig, "embedding"), (Shape{768}));

    // DeiT distilled: cls and dist, two heads of 1000; CLIP: ln_pre on 50 tokens, ln_post on one row,
    // a 512-wide projection.
    const auto deit = StageTable::get(preset("deit-ti16-distilled"));
    EXPECT_EQ(shape(*deit, "tokens"), (Shape{198, 192}));
    EXPECT_EQ(shape(*deit, "pooled_dist"), (Shape{192}));
    EXPECT_EQ(shape(*deit, "logits_dist"), (Shape{1000}));
    const auto clip = StageTable::get(preset("clip-b32"));
    EXPECT_EQ(shape(*clip, "ln_pre.out"), (Shape{50, 768}));
    EXPECT_EQ(shape(*clip, "ln_final.mean"), (Shape{1}));
    EXPECT_EQ(shape(*clip, "embedding"), (Shape{512}));

    // SwiGLU: fc1 gives both halves (2 * 512), the gate leaves 512.
    Config sw = preset("vit-ti16");
    sw.act = Act::SwiGlu;
    sw.mlp = 512;
    const auto swt = StageTable::get(sw);
    EXPECT_EQ(shape(*swt, "blocks.0.mlp.pre"), (Shape{197, 1024}));
    EXPECT_EQ(shape(*swt, "blocks.0.mlp.post"), (Shape{197, 512}));

    // DINOv3 (RoPE, no table) at 160x224: a 10x14 grid = 140 patches; tokens cls + 140, then cls, 4 storage
    // tokens, 140 patches = 145; no pos_embed rows; q_rot and k_rot beside q and k, (6, 145, 64); 5 + 1 +
    // 12 * (20 + 2 layer scales + 2 rotations) + 4 + 2 rows
    Options o3;
    o3.image_h = 160;
    o3.image_w = 224;
    const auto d3 = StageTable::get(preset("dinov3-s16"), o3);
    EXPECT_EQ(d3->find("pos_embed"), nullptr);
    EXPECT_EQ(d3->find("pos_embed.learned"), nullptr);
    EXPECT_EQ(shape(*d3, "tokens"), (Shape{141, 384}));
    EXPECT_EQ(shape(*d3, "embed"), (Shape{141, 384}));
    EXPECT_EQ(shape(*d3, "with_registers"), (Shape{145, 384}));
    EXPECT_EQ(shape(*d3, "blocks.5.attn.q_rot"), (Shape{6, 145, 64}));
    EXPECT_EQ(shape(*d3, "blocks.5.attn.k_rot"), (Shape{6, 145, 64}));
    EXPECT_EQ(shape(*d3, "blocks.5.attn.scores"), (Shape{6, 145, 145}));
    EXPECT_EQ(shape(*d3, "embedding"), (Shape{384}));
    EXPECT_EQ(d3->size(), 6u + 12u * 24u + 5u);
    // the rotations sit between v and the scores
    const StageInfo* k_rot = d3->find("blocks.0.attn.k_rot");
    ASSERT_NE(k_rot, nullptr);
    EXPECT_EQ(d3->rows()[d3->index(k_rot->id) + 1].name, "blocks.0.attn.scores");
    EXPECT_EQ(d3->rows()[d3->index(k_rot->id) - 2].name, "blocks.0.attn.v");
}
