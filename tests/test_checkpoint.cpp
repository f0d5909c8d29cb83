// Checkpoint loading: family detection, config inference, and one clear error
// for checkpoints that do not fit.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/io/checkpoint.h"
#include "core/model/forward.h"
#include "core/io/io.h"

#include <xtensor/xbuilder.hpp>

using namespace vit;

namespace {
// As a timm state dict stores them: conv OIHW, cls (1,1,D), pos (1,T,D).
std::map<std::string, Array> timm_tensors(const Weights& w) {
    std::map<std::string, Array> m;
    const Config& c = w.cfg;
    for_each_param([&](const std::string& n, const auto& t) { m.emplace(n, Array(t)); }, w);
    m["patch_embed.proj.weight"].reshape({size_t(c.width), size_t(c.channels), size_t(c.patch), size_t(c.patch)});
    m["cls_token"].reshape({1, 1, size_t(c.width)});
    m["pos_embed"].reshape({1, size_t(c.tokens()), size_t(c.width)});
    return m;
}
std::string message_of(std::map<std::string, Array> m, const LoadOverrides& ov = {}) {
    try {
        weights_from_tensors(std::move(m), {}, "ckpt.safetensors", ov);
    } catch (const FileError& e) {
        return e.what();
    }
    return "";
}
}  // namespace

TEST(Checkpoint, SaveLoadRoundTripKeepsConfigAndOutputs) {
    Config c = preset("fmnist");
    Weights w = init_weights(c, 11);
    auto p = (std::filesystem::temp_directory_path() / "vitscope_rt_model.safetensors").string();
    save_model(p, w, {{"command", "test"}});
    LoadedModel lm = load_model(p);
    EXPECT_EQ(lm.family, Family::Timm);
    EXPECT_EQ(lm.weights.cfg.heads, 4);
    EXPECT_EQ(lm.weights.cfg.class_names.size(), 10u);
    EXPECT_FLOAT_EQ(lm.weights.cfg.pre.mean[0], c.pre.mean[0]);
    EXPECT_EQ(lm.metadata.at("command"), "test");
    Tensor3 x = Tensor3::from_shape({1, 28, 28});
    for (size_t i = 0; i < x.size(); ++i) x.flat(i) = float(i % 7) - 3.f;
    Trace a = run(w, x), b = run(lm.weights, x);
    EXPECT_EQ(a.get("logits"), b.get("logits"));
}

TEST(Checkpoint, InfersConfigFromShapes) {
    Config c = preset("vit-ti16");
    c.image_size = 64; c.depth = 2; c.classes = 5;  // 4x4 grid, width 192 -> 3 heads of 64
    auto m = timm_tensors(init_weights(c, 1));
    LoadedModel lm = weights_from_tensors(std::move(m), {}, "x", {});
    const Config& g = lm.weights.cfg;
    EXPECT_EQ(g.image_size, 64); EXPECT_EQ(g.patch, 16); EXPECT_EQ(g.width, 192);
    EXPECT_EQ(g.depth, 2); EXPECT_EQ(g.heads, 3); EXPECT_EQ(g.mlp, 768); EXPECT_EQ(g.classes, 5);
    EXPECT_FLOAT_EQ(g.eps, 1e-6f);
}

TEST(CheckpointBad, HeadsCannotBeGuessedWithoutMetadataOrFlag) {
    Config c = preset("toy-rgb8");  // width 6: not a multiple of 64
    auto m = timm_tensors(init_weights(c, 1));
    std::string msg = message_of(timm_tensors(init_weights(c, 1)));
    EXPECT_NE(msg.find("--heads"), std::string::npos) << msg;
    LoadOverrides ov;
    ov.heads = 2;
    EXPECT_NO_THROW(weights_from_tensors(std::move(m), {}, "x", ov));
    ov.heads = 4;  // 6 is not divisible by 4
    EXPECT_NE(message_of(timm_tensors(init_weights(c, 1)), ov).find("not divisible"), std::string::npos);
}

TEST(CheckpointBad, MissingUnexpectedAndMisshapedListedTogether) {
    Config c = preset("toy-gray4");
    auto m = timm_tensors(init_weights(c, 1));
    m.erase("blocks.0.attn.proj.bias");
    m.emplace("blocks.0.attn.extra", Array(xt::zeros<float>({3})));
    m["blocks.0.mlp.fc1.weight"] = xt::zeros<float>({31, 8});
    LoadOverrides ov;
    ov.heads = 2;
    std::string msg = message_of(std::move(m), ov);
    EXPECT_NE(msg.find("ckpt.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("missing (1)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("blocks.0.attn.proj.bias"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unexpected (1)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("blocks.0.attn.extra"), std::string::npos) << msg;
    EXPECT_NE(msg.find("wrong shape"), std::string::npos) << msg;
    EXPECT_NE(msg.find("blocks.0.mlp.fc1.bias"), std::string::npos) << msg;  // (32) vs inferred mlp 31
}

TEST(CheckpointBad, NotAViTAndNonSquareGrid) {
    std::map<std::string, Array> m;
    m.emplace("model.fc.weight", Array(xt::zeros<float>({2, 2})));
    EXPECT_NE(message_of(std::move(m)).find("not a ViT checkpoint"), std::string::npos);
    auto t = timm_tensors(init_weights(preset("fmnist"), 1));
    t["pos_embed"] = xt::zeros<float>({1, 49, 64});  // 48 patches: not a square grid
    EXPECT_NE(message_of(std::move(t)).find("square grid"), std::string::npos);
}

TEST(CheckpointBad, InputThatDoesNotFitTheModel) {
    Weights w = init_weights(preset("fmnist"), 1);
    Tensor3 x = xt::zeros<float>({3, 28, 28});
    try {
        run(w, x);
        FAIL();
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("(1, 28, 28)"), std::string::npos) << e.what();
    }
}

TEST(Checkpoint, PresetsAndUnknownNames) {
    EXPECT_TRUE(is_preset("vit-b16"));
    try {
        preset("vit-z99");
        FAIL();
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("vit-b16"), std::string::npos);
    }
}
