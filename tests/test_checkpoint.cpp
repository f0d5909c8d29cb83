// Checkpoint loading: family detection, config inference, and one clear error
// for checkpoints that do not fit.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

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
    // width 192 at depth 2 is no published ViT: the head count is asked for, never guessed
    try {
        weights_from_tensors(timm_tensors(init_weights(c, 1)), {}, "x", {});
        FAIL() << "loaded without a head count";
    } catch (const HeadsNeeded& e) {
        EXPECT_EQ(e.width, 192);
        EXPECT_EQ(e.choices, head_choices(192));
        EXPECT_NE(std::string(e.what()).find("--heads N"), std::string::npos) << e.what();
    }
    LoadedModel lm = weights_from_tensors(std::move(m), {{"num_heads", "3"}}, "x", {});
    EXPECT_EQ(lm.heads_from, "__metadata__ num_heads");
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
    ov.heads = 4;  // 6 is not divisible by 4: the flag is bad usage, not the file
    try {
        weights_from_tensors(timm_tensors(init_weights(c, 1)), {}, "x", ov);
        FAIL() << "--heads 4 taken for width 6";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("--heads 4 does not divide the width 6"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("1, 2, 3 or 6"), std::string::npos) << e.what();
    }
}

TEST(Checkpoint, PublishedShapesGiveTheirHeadCount) {
    Config c = preset("vit-ti16");  // width 192, depth 12, mlp 768: ViT-Ti, 3 heads (not 192 / 64 by chance: see H/14)
    c.image_size = 32; c.classes = 5;
    LoadedModel lm = weights_from_tensors(timm_tensors(init_weights(c, 1)), {}, "x", {});
    EXPECT_EQ(lm.weights.cfg.heads, 3);
    EXPECT_EQ(lm.heads_from, "the published ViT with these shapes");
    EXPECT_EQ(known_heads(1280, 32, 5120), 16);  // ViT-H/14: 16 heads of 80, where width / 64 would say 20
    EXPECT_EQ(head_choices(12), (std::vector<int>{1, 2, 3, 4, 6, 12}));
    EXPECT_EQ(head_choices_text(6), "1, 2, 3 or 6");
}

TEST(Checkpoint, TopKLargestFirstTiesByIndexNaNLast) {
    const float nan = std::nanf("");
    const std::vector<float> p{0.1f, 0.3f, nan, 0.3f, 0.05f, 0.3f, 0.2f};
    EXPECT_EQ(top_k(p.data(), p.size(), 5), (std::vector<int>{1, 3, 5, 6, 0}));
    EXPECT_EQ(top_k(p.data(), p.size(), 100), (std::vector<int>{1, 3, 5, 6, 0, 4, 2}));
    std::vector<float> flat(1000, 0.001f);  // all tied (zero head weights): the first classes, in order
    EXPECT_EQ(top_k(flat.data(), flat.size(), 3), (std::vector<int>{0, 1, 2}));
    EXPECT_TRUE(top_k(flat.data(), 0, 5).empty());
}

TEST(Checkpoint, ImageNetNamesForThousandClassHeads) {
    const auto& names = imagenet1k_class_names();
    ASSERT_EQ(names.size(), 1000u);
    EXPECT_EQ(names[0], "tench");
    EXPECT_EQ(names[999], "toilet tissue");
    Config c = preset("toy-gray4");
    c.classes = 1000;
    LoadOverrides ov;
    ov.heads = 2;
    LoadedModel lm = weights_from_tensors(timm_tensors(init_weights(c, 1)), {}, "x", ov);
    EXPECT_EQ(lm.weights.cfg.class_names, names);
    EXPECT_NE(lm.labels_from.find("ImageNet-1k"), std::string::npos);
    // the file's own names win
    std::string own = "[";
    for (int i = 0; i < 1000; ++i) own += std::string(i ? "," : "") + "\"c" + std::to_string(i) + "\"";
    lm = weights_from_tensors(timm_tensors(init_weights(c, 1)), {{"class_names", own + "]"}}, "x", ov);
    EXPECT_EQ(lm.weights.cfg.class_names[7], "c7");
    EXPECT_EQ(lm.labels_from, "__metadata__ class_names");
    // other class counts get no invented names
    c.classes = 10;
    lm = weights_from_tensors(timm_tensors(init_weights(c, 1)), {}, "x", ov);
    EXPECT_TRUE(lm.weights.cfg.class_names.empty());
    EXPECT_EQ(load_model("vit-ti16").weights.cfg.class_names, names);
}

TEST(Checkpoint, SideConfigJson) {
    namespace fs = std::filesystem;
    const fs::path d = fs::temp_directory_path() / "vitscope_side_config";
    fs::remove_all(d);
    fs::create_directories(d);
    auto write = [&](const std::string& text) { std::ofstream(d / "config.json") << text; };
    EXPECT_TRUE(read_side_config(d.string()).path.empty());  // none: nothing read, no error
    write(R"({"hidden_size": 64, "num_attention_heads": 4, "id2label": {"1": "b", "0": "a"}})");
    SideConfig sc = read_side_config(d.string());
    EXPECT_EQ(sc.heads, 4); EXPECT_EQ(sc.width, 64);
    EXPECT_EQ(sc.class_names, (std::vector<std::string>{"a", "b"}));
    write(R"({"text_config": {"num_attention_heads": 8}, "vision_config": {"hidden_size": 768, "num_attention_heads": 12}})");
    sc = read_side_config(d.string());
    EXPECT_EQ(sc.heads, 12); EXPECT_EQ(sc.width, 768);
    write(R"({"num_attention_heads": 2, "id2label": {"0": "LABEL_0", "1": "LABEL_1"}})");
    EXPECT_TRUE(read_side_config(d.string()).class_names.empty());  // transformers' placeholders
    for (const char* bad : {"{", "[1]", R"({"num_attention_heads": "4"})", R"({"num_attention_heads": 0})",
                            R"({"num_attention_heads": 1e9})", R"({"id2label": {"0": "a", "2": "c"}})",
                            R"({"id2label": {"0": 5}})", R"({"vision_config": 3})"}) {
        write(bad);
        try {
            read_side_config(d.string());
            ADD_FAILURE() << "accepted " << bad;
        } catch (const FileError& e) {
            EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
        }
    }
    fs::remove_all(d);
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
