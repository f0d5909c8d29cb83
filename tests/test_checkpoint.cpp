// Checkpoint loading: family detection, config inference, and one clear error
// for checkpoints that do not fit.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "core/io/checkpoint.h"
#include "core/io/layouts.h"
#include "core/model/forward.h"
#include "core/io/io.h"

#include <xtensor/xbuilder.hpp>
#include <xtensor/xview.hpp>

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

// Issue 39 item 4: a vanilla-looking ViT (family vit, cls token, classifier head, GELU) whose position table
// resizes by another family's rule (a converted Hugging Face ViT: PosRule::Hf) keeps that rule through
// vitscope.config; the family fields were written only when another of them differed, so it reloaded with
// timm's rule. Each field on its own, against the field read back.
TEST(Checkpoint, ConfigRoundTripsEachFamilyFieldAlone) {
    const Config base = preset("vit-ti16");
    for (PosRule r : {PosRule::Dino, PosRule::Dinov2, PosRule::Dinov2Reg, PosRule::Hf, PosRule::HfAntialias, PosRule::OpenClip, PosRule::Mae}) {
        Config c = base;
        c.pos_rule = r;
        EXPECT_EQ(int(config_from_json(config_to_json(c), "m.safetensors").pos_rule), int(r)) << pos_rule_label(r);
    }
    Config d = base;
    d.dist_token = true;
    EXPECT_TRUE(config_from_json(config_to_json(d), "m.safetensors").dist_token);
}

// AIMv2's fields (issue 39): the norm, the blocks' biases and the patch norm round-trip each on its own and together
// (the preset); a norm ViTScope does not know is refused naming the field; the combinations no model has (an RMSNorm
// with ln_pre or SigLIP's pooling head, a LayerNorm on the patch embeddings) are refused by Config::validate, naming them.
TEST(Checkpoint, Aimv2FieldsRoundTripAndImpossibleNormsAreRefused) {
    const Config base = preset("vit-ti16");
    Config a = base;
    a.qkv_bias = false;
    EXPECT_FALSE(config_from_json(config_to_json(a), "m.safetensors").qkv_bias);
    Config b = base;
    b.proj_bias = false;
    EXPECT_FALSE(config_from_json(config_to_json(b), "m.safetensors").proj_bias);
    const Config aim = preset("aimv2-l14");
    const Config back = config_from_json(config_to_json(aim), "m.safetensors");
    EXPECT_EQ(back.norm, Norm::RmsNorm);
    EXPECT_TRUE(back.patch_norm);
    EXPECT_FALSE(back.qkv_bias || back.proj_bias || back.cls_token);
    EXPECT_EQ(back.family, ModelFamily::Aimv2);
    EXPECT_EQ(config_to_json(back), config_to_json(aim));
    EXPECT_EQ(param_count(aim), 309197824);  // timm's aimv2_large_patch14_224: no biases in the blocks, RMSNorm's gamma alone
    std::string j = config_to_json(aim);
    const size_t at = j.find("\"rms_norm\"");
    ASSERT_NE(at, std::string::npos);
    j.replace(at, 10, "\"group_norm\"");
    try {
        config_from_json(j, "m.safetensors");
        ADD_FAILURE() << "an unknown norm was accepted";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("norm"), std::string::npos) << e.what();
    }
    auto refused = [](Config c, const char* word) {
        try {
            c.validate();
            ADD_FAILURE() << "accepted a config that should name " << word;
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
        }
    };
    Config pre = aim;
    pre.ln_pre = true;
    refused(pre, "ln_pre");
    Config map = aim;
    map.pooling = Pooling::Map;
    refused(map, "pooling map");
    Config ln_patch = base;
    ln_patch.patch_norm = true;
    refused(ln_patch, "patch_norm");
}

// An AIMv2 state dict as timm saves it (aimv2_*: no bias but the patch conv's, fc1 split into fc1_g and fc1_x, the
// patch norm's weight alone): it loads as AIMv2, and a file with what AIMv2 has not (an attention bias, a bias on
// the final norm, a head) is refused naming the tensor (layouts_aimv2.cpp).
TEST(CheckpointBad, Aimv2RefusesWhatItHasNot) {
    Config c = preset("aimv2-l14");
    c.image_size = 28; c.width = 64; c.depth = 2; c.heads = 4; c.mlp = 96; c.pre.resize = 0;
    const Weights w = init_weights(c, 3);
    auto aimv2 = [&]() {
        std::map<std::string, Array> m;
        const size_t M = size_t(c.mlp);
        for_each_param([&](const std::string& n, const auto& t) {
            const bool bias = n.size() > 5 && n.compare(n.size() - 5, 5, ".bias") == 0;
            if (bias && n != "patch_embed.proj.bias") return;
            if (n.find("mlp.fc1.weight") != std::string::npos) {
                const std::string b = n.substr(0, n.size() - 10);  // "blocks.i.mlp."
                const Array a(t);
                m.emplace(b + "fc1_g.weight", Array(xt::view(a, xt::range(0, M), xt::all())));
                m.emplace(b + "fc1_x.weight", Array(xt::view(a, xt::range(M, 2 * M), xt::all())));
                return;
            }
            m.emplace(n, Array(t));
        }, w);
        m["patch_embed.proj.weight"].reshape({size_t(c.width), size_t(c.channels), size_t(c.patch), size_t(c.patch)});
        m["pos_embed"].reshape({1, size_t(c.patches()), size_t(c.width)});
        return m;
    };
    LoadOverrides ov;
    ov.heads = 4;
    const LoadedModel lm = weights_from_tensors(aimv2(), {}, "aim.safetensors", ov);
    EXPECT_EQ(lm.weights.cfg.family, ModelFamily::Aimv2);
    EXPECT_EQ(lm.weights.cfg.norm, Norm::RmsNorm);
    EXPECT_TRUE(lm.weights.cfg.patch_norm);
    for (const char* extra : {"blocks.0.attn.qkv.bias", "blocks.0.attn.proj.bias", "norm.bias", "head.weight"}) {
        auto m = aimv2();
        m.emplace(extra, Array(xt::zeros<float>({size_t(extra[0] == 'h' ? 10 : c.width)})));
        const std::string msg = message_of(std::move(m), ov);
        EXPECT_NE(msg.find("ckpt.safetensors"), std::string::npos) << extra << ": " << msg;
        EXPECT_NE(msg.find(extra[0] == 'h' ? "head" : extra), std::string::npos) << extra << ": " << msg;
    }
}

// vitscope.config's resize interpolation: the two it knows round-trip; any other spelling is refused
// by name (it was read as bilinear, silently resizing differently from what the file said).
TEST(Checkpoint, ConfigInterpIsOneItKnows) {
    Config c = preset("vit-ti16");
    c.pre.interp = Interp::Bicubic;
    EXPECT_EQ(config_from_json(config_to_json(c), "m.safetensors").pre.interp, Interp::Bicubic);
    c.pre.interp = Interp::Bilinear;
    std::string j = config_to_json(c);
    EXPECT_EQ(config_from_json(j, "m.safetensors").pre.interp, Interp::Bilinear);
    const size_t at = j.find("\"bilinear\"");
    ASSERT_NE(at, std::string::npos);
    j.replace(at, 10, "\"lanczos\"");
    try {
        config_from_json(j, "m.safetensors");
        ADD_FAILURE() << "an unknown interp was accepted";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("m.safetensors"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("interp"), std::string::npos) << e.what();
    }
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

// --heads is for a file that does not say: one that contradicts the count the file states is
// refused naming the flag, the file and where it states it; the same count is taken; a count the
// shapes only suggest (a published ViT's) gives way to the flag.
TEST(Checkpoint, HeadsFlagNeverOverridesWhatTheFileStates) {
    Config c = preset("vit-ti16");
    c.image_size = 64; c.depth = 2; c.classes = 5;
    LoadOverrides ov;
    ov.heads = 6;
    try {
        weights_from_tensors(timm_tensors(init_weights(c, 1)), {{"num_heads", "3"}}, "m.safetensors", ov);
        FAIL() << "--heads 6 overrode the file's 3";
    } catch (const UsageError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("--heads 6 contradicts m.safetensors, which states 3 heads (__metadata__ num_heads)"),
                  std::string::npos) << m;
    }
    ov.heads = 3;
    LoadedModel lm = weights_from_tensors(timm_tensors(init_weights(c, 1)), {{"num_heads", "3"}}, "m.safetensors", ov);
    EXPECT_EQ(lm.weights.cfg.heads, 3);
    EXPECT_EQ(lm.heads_from, "__metadata__ num_heads");
    c.depth = 12;  // ViT-Ti's shapes: 3 heads by the published model, which --heads may say otherwise
    ov.heads = 6;
    lm = weights_from_tensors(timm_tensors(init_weights(c, 1)), {}, "m.safetensors", ov);
    EXPECT_EQ(lm.weights.cfg.heads, 6);
    EXPECT_EQ(lm.heads_from, "--heads");
    // the embedded model states its own
    ov.heads = 2;
    EXPECT_THROW(load_model("default", ov), UsageError);
    ov.heads = 4;
    EXPECT_EQ(load_model("default", ov).weights.cfg.heads, 4);
}

// A ViTScope file's vitscope.config (a vanilla ViT's, read with the timm names) describes the model its
// tensors hold: a size it states that the tensors contradict, or class names of another count (in the
// config or in __metadata__ class_names), is refused naming the file and the field; they were silently
// replaced by the shapes, or dropped.
TEST(CheckpointBad, OwnConfigThatDescribesAnotherModel) {
    Config c = preset("toy-gray4");
    c.classes = 3;
    c.class_names = {"a", "b", "c"};
    const Weights w = init_weights(c, 1);
    auto load = [&](const Config& said, std::map<std::string, std::string> meta) {
        meta["vitscope.config"] = config_to_json(said);
        return weights_from_tensors(timm_tensors(w), meta, "m.safetensors", {});
    };
    ASSERT_EQ(config_to_json(c).find("\"family\""), std::string::npos) << "not the vanilla ViT's config";
    EXPECT_EQ(load(c, {}).weights.cfg.class_names, c.class_names);
    for (const auto& [field, change] : std::vector<std::pair<std::string, std::function<void(Config&)>>>{
             {"depth", [](Config& x) { x.depth += 2; }},
             {"image_size", [](Config& x) { x.image_size *= 2; }},
             {"mlp", [](Config& x) { x.mlp += 8; }},
             {"classes", [](Config& x) { x.classes = 5; x.class_names = {"a", "b", "c", "d", "e"}; }}}) {
        Config said = c;
        change(said);
        try {
            load(said, {});
            ADD_FAILURE() << "a vitscope.config with another " << field << " was taken";
        } catch (const FileError& e) {
            const std::string m = e.what();
            EXPECT_NE(m.find("m.safetensors: __metadata__ vitscope.config says " + field), std::string::npos) << m;
        }
    }
    Config names = c;
    names.class_names = {"a", "b"};
    EXPECT_THROW(load(names, {}), FileError);
    try {
        load(c, {{"class_names", "[\"x\", \"y\", \"z\", \"w\"]"}});
        ADD_FAILURE() << "__metadata__ class_names of 4 names for 3 classes was taken";
    } catch (const FileError& e) {
        EXPECT_NE(std::string(e.what()).find("__metadata__ class_names names 4 classes but the checkpoint's head has 3"),
                  std::string::npos) << e.what();
    }
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

// The first MLP layer is where the loader reads the MLP width; without it the width comes from the
// second, so the message still lists every missing tensor rather than stopping at that one.
TEST(CheckpointBad, MissingFirstMlpLayerListedWithTheRest) {
    auto m = timm_tensors(init_weights(preset("toy-gray4"), 1));
    m.erase("blocks.0.mlp.fc1.weight");
    m.erase("head.bias");
    LoadOverrides ov;
    ov.heads = 2;
    std::string msg = message_of(std::move(m), ov);
    EXPECT_NE(msg.find("missing (2)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("blocks.0.mlp.fc1.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("head.bias"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("wrong shape"), std::string::npos) << msg;  // fc1.bias and fc2 fit the width read from fc2
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

// The loader's shapes of each canonical parameter (core/io/layouts.h param_shape) are the ones
// the model allocates (shaped_weights), for every family's parts.
TEST(Layouts, ParamShapeIsTheModelsShape) {
    std::vector<Config> cs;
    for (const char* n : {"toy-rgb8", "deit-ti16-distilled", "dinov2-s14-reg", "clip-b32", "siglip-b16", "mae-b16", "vit-betwixt16-reg4-gap"})
        cs.push_back(preset(n));
    Config sw = preset("dinov2-s14");
    sw.act = Act::SwiGlu;
    sw.mlp = 1024;
    cs.push_back(sw);
    for (const Config& c : cs) {
        SCOPED_TRACE(c.name);
        const Weights w = shaped_weights(c);
        size_t n = 0;
        for_each_param([&](const std::string& name, const auto& t) {
            ++n;
            EXPECT_EQ(param_shape(c, name), shape_of(t)) << name;
        }, w);
        EXPECT_GT(n, 10u);
    }
}

TEST(Layouts, PublishedShapesOfTheFamilies) {
    EXPECT_EQ(known_heads(1536, 40, 4096), 24);  // DINOv2 ViT-g/14 (SwiGLU hidden 4096)
    EXPECT_EQ(known_heads(1408, 40, 6144), 16);  // open_clip ViT-g-14
    EXPECT_EQ(known_heads(1664, 48, 8192), 16);  // open_clip ViT-bigG-14
    EXPECT_EQ(known_heads(1152, 27, 4304), 16);  // SigLIP So400m
    EXPECT_EQ(known_heads(1536, 40, 6144), 0);   // no such model: asked, not guessed
}

namespace {
namespace fs = std::filesystem;
void write_text(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }

// A DINOv2 ViT-S/14 of one block under Hugging Face's names, its table learned at 518 px (37 x 37).
std::map<std::string, Array> hf_dinov2(const Weights& w) {
    std::map<std::string, Array> m;
    const size_t D = w.cfg.width;
    auto put = [&](const std::string& k, const Array& a) { m.emplace(k, a); };
    put("embeddings.cls_token", Array(w.cls));
    put("embeddings.mask_token", Array(xt::zeros<float>({size_t(1), D})));
    put("embeddings.position_embeddings", Array(w.pos));
    Array pw = w.patch_w;
    pw.reshape({D, size_t(3), size_t(14), size_t(14)});
    put("embeddings.patch_embeddings.projection.weight", pw);
    put("embeddings.patch_embeddings.projection.bias", Array(w.patch_b));
    const BlockW& b = w.blocks[0];
    const std::string p = "encoder.layer.0.";
    put(p + "norm1.weight", Array(b.ln1.g)); put(p + "norm1.bias", Array(b.ln1.b));
    put(p + "norm2.weight", Array(b.ln2.g)); put(p + "norm2.bias", Array(b.ln2.b));
    const char* qkv[] = {"query", "key", "value"};
    for (size_t s = 0; s < 3; ++s) {
        put(p + "attention.attention." + qkv[s] + ".weight", Array(xt::view(b.qkv_w, xt::range(s * D, (s + 1) * D), xt::all())));
        put(p + "attention.attention." + qkv[s] + ".bias", Array(xt::view(b.qkv_b, xt::range(s * D, (s + 1) * D))));
    }
    put(p + "attention.output.dense.weight", Array(b.proj_w)); put(p + "attention.output.dense.bias", Array(b.proj_b));
    put(p + "layer_scale1.lambda1", Array(b.ls1)); put(p + "layer_scale2.lambda1", Array(b.ls2));
    put(p + "mlp.fc1.weight", Array(b.fc1_w)); put(p + "mlp.fc1.bias", Array(b.fc1_b));
    put(p + "mlp.fc2.weight", Array(b.fc2_w)); put(p + "mlp.fc2.bias", Array(b.fc2_b));
    put("layernorm.weight", Array(w.ln_f.g)); put("layernorm.bias", Array(w.ln_f.b));
    return m;
}
}  // namespace

// Hugging Face's Dinov2 runs at its processor's crop (224) with the 37 x 37 table learned at 518
// resized: the size the fixtures (crop = native) never exercise.
TEST(Layouts, HuggingFaceDinov2RunsAtItsProcessorsCrop) {
    Config c = preset("dinov2-s14");  // 224 px, pos_grid 37
    c.depth = 1;
    const Weights w = init_weights(c, 3);
    const fs::path d = fs::temp_directory_path() / "vitscope_hf_dinov2";
    fs::remove_all(d);
    fs::create_directories(d);
    std::vector<ArrayRef> refs;
    const auto tensors = hf_dinov2(w);
    for (auto& [k, a] : tensors) refs.push_back(array_ref(k, a));
    write_safetensors((d / "model.safetensors").string(), refs, {{"format", "pt"}});
    write_text(d / "config.json", R"({"model_type": "dinov2", "architectures": ["Dinov2Model"], "hidden_size": 384,
        "num_hidden_layers": 1, "num_attention_heads": 6, "image_size": 518, "patch_size": 14, "mlp_ratio": 4,
        "layer_norm_eps": 1e-06, "hidden_act": "gelu"})");
    write_text(d / "preprocessor_config.json", R"({"image_processor_type": "BitImageProcessor", "do_resize": true,
        "size": {"shortest_edge": 256}, "do_center_crop": true, "crop_size": {"height": 224, "width": 224},
        "resample": 3, "image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225]})");
    LoadedModel lm = load_model((d / "model.safetensors").string());
    const Config& g = lm.weights.cfg;
    EXPECT_EQ(g.family, ModelFamily::Dinov2);
    EXPECT_EQ(lm.family, Family::HuggingFace);
    EXPECT_EQ(g.image_size, 224);
    EXPECT_EQ(g.pos_grid, 37);
    EXPECT_EQ(g.pos_rule, PosRule::Hf);
    EXPECT_EQ(g.heads, 6);
    EXPECT_EQ(g.pre.resize, 256);
    EXPECT_FALSE(g.pre.squash);
    EXPECT_EQ(g.pre.interp, Interp::Bicubic);
    EXPECT_EQ(lm.metadata.count("vitscope.preprocess_note"), 0u);
    bool said = false;
    for (auto& n : lm.notes) said |= n.find("runs at 224x224") != std::string::npos && n.find("37x37") != std::string::npos;
    EXPECT_TRUE(said) << lm.metadata["vitscope.load_note"];
    // the same weights, equal to the preset's at its 224 px (the table resized the same way)
    Tensor3 x = Tensor3::from_shape({3, 224, 224});
    for (size_t i = 0; i < x.size(); ++i) x.flat(i) = float(int(i % 13) - 6) / 6.f;
    Weights ref = w;
    ref.cfg.pos_rule = PosRule::Hf;
    ref.cfg.heads = 6;
    const Trace a = run(lm.weights, x), b = run(ref, x);
    EXPECT_EQ(a.get("embedding"), b.get("embedding"));
    fs::remove_all(d);
}

// A config.json beside a checkpoint is read by core/io/hf_config: a timm config gives its
// model_args heads and label_names; a broken one is an error naming the file and the field.
TEST(Layouts, SideConfigReadsTimmConfigs) {
    SideConfig sc = parse_side_config(R"({"architecture": "vit_small_patch16_224", "num_classes": 2,
        "label_names": ["cat", "dog"], "model_args": {"embed_dim": 384, "num_heads": 6, "depth": 12}})", "t/config.json");
    EXPECT_EQ(sc.heads, 6);
    EXPECT_EQ(sc.width, 384);
    EXPECT_EQ(sc.class_names, (std::vector<std::string>{"cat", "dog"}));
    ASSERT_TRUE(sc.config.has_value());
    EXPECT_EQ(sc.config->model.kind, ConfigKind::Timm);
    try {
        parse_side_config(R"({"architecture": "x", "model_args": {"num_heads": "six"}})", "t/config.json");
        ADD_FAILURE() << "accepted a string head count";
    } catch (const FileError& e) {
        EXPECT_NE(std::string(e.what()).find("t/config.json: field 'model_args.num_heads'"), std::string::npos) << e.what();
    }
}

// timm's ViTs without a cls token are told apart by where their final norm sits: vit_*_gap_* with
// fc_norm=False keep it as norm.* (every token normed, then the average: NormMean), vit_*_reg4_gap_*
// as fc_norm.* (the average, then the norm: Mean). The same tensors under the two names must load as the
// two poolings (the forwards themselves are checked against PyTorch in tests/parity).
TEST(Layouts, TimmGapPoolingFollowsWhereTheNormIs) {
    Config c = preset("vit-betwixt16-reg4-gap");
    c.depth = 1;
    c.registers = 0;
    c.layer_scale = false;
    const Weights w = init_weights(c, 5);
    const fs::path d = fs::temp_directory_path() / "vitscope_timm_gap";
    fs::remove_all(d);
    fs::create_directories(d);
    auto load_as = [&](bool fc_norm) {
        // timm's names (no cls_token), the patch embedding as its Conv2d (D, C, P, P)
        std::vector<ArrayRef> v = param_refs(w);
        for (ArrayRef& r : v) {
            if (r.name == "patch_embed.proj.weight") r.shape = {640, 3, 16, 16};
            if (fc_norm && r.name.rfind("norm.", 0) == 0) r.name = "fc_" + r.name;
        }
        write_safetensors((d / "model.safetensors").string(), v, {{"format", "pt"}});
        LoadOverrides ov;
        ov.heads = 10;  // no config beside the file, and no published shape at depth 1
        return load_model((d / "model.safetensors").string(), ov);
    };
    const LoadedModel gap = load_as(false), fc = load_as(true);
    EXPECT_EQ(gap.weights.cfg.pooling, Pooling::NormMean) << gap.layout;
    EXPECT_EQ(fc.weights.cfg.pooling, Pooling::Mean) << fc.layout;
    for (const LoadedModel* lm : {&gap, &fc}) {
        EXPECT_FALSE(lm->weights.cfg.cls_token);
        EXPECT_EQ(lm->weights.cfg.family, ModelFamily::ViT);
        EXPECT_NE(lm->layout.find("without a cls token"), std::string::npos) << lm->layout;
    }
    // the pooled vectors differ as the order of norm and mean says: norm(mean(x)) against mean(norm(x))
    Tensor3 x = Tensor3::from_shape({3, 256, 256});
    for (size_t i = 0; i < x.size(); ++i) x.flat(i) = float(int(i % 17) - 8) / 8.f;
    const Trace a = run(gap.weights, x), b = run(fc.weights, x);
    const Array& r = a.get({StageKind::ResidPost, 0});
    const size_t T = 256, D = 640;
    Tensor1 mean_of_normed = xt::zeros<float>({D});
    for (size_t t = 0; t < T; ++t) {
        double m = 0, v = 0;
        for (size_t j = 0; j < D; ++j) m += r.data()[t * D + j];
        m /= D;
        for (size_t j = 0; j < D; ++j) v += (r.data()[t * D + j] - m) * (r.data()[t * D + j] - m);
        const double sd = std::sqrt(v / D + double(c.eps));
        for (size_t j = 0; j < D; ++j)
            mean_of_normed(j) += float(((r.data()[t * D + j] - m) / sd * w.ln_f.g(j) + w.ln_f.b(j)) / double(T));
    }
    const Array& pa = a.get({StageKind::Pooled, -1});
    for (size_t j = 0; j < D; j += 37) EXPECT_NEAR(pa.data()[j], mean_of_normed(j), 2e-4) << j;
    EXPECT_GT(std::abs(b.get({StageKind::LnFinalOut, -1}).data()[0] - pa.data()[0]), 1e-3);
    fs::remove_all(d);
}

// DINOv3's torch.hub keys (issue 39): the head count from RoPE's periods, the K bias masked, the storage
// tokens as registers; then what a broken file gets: a name, never a crash or a silent run.
TEST(Layouts, Dinov3HubKeysHeadsFromPeriodsAndTheKBiasMasked) {
    Config c = preset("dinov3-s16");
    c.depth = 1;
    const Weights w = init_weights(c, 7);
    const fs::path d = fs::temp_directory_path() / "vitscope_dinov3";
    fs::remove_all(d);
    fs::create_directories(d);
    const size_t D = 384;
    // a bias with a non-zero K third in the file, and its mask (1, 0, 1 by thirds)
    Tensor1 bias = Tensor1::from_shape({3 * D}), mask = xt::ones<float>({3 * D});
    for (size_t i = 0; i < 3 * D; ++i) bias(i) = float(int(i % 7) - 3) * 0.1f;
    for (size_t i = D; i < 2 * D; ++i) mask(i) = 0.f;
    auto write = [&](const std::string& name, const std::function<void(std::vector<ArrayRef>&)>& edit) {
        std::vector<ArrayRef> v = param_refs(w);
        for (ArrayRef& r : v) {
            if (r.name == "patch_embed.proj.weight") r.shape = {D, 3, 16, 16};
            if (r.name == "reg_token") r.name = "storage_tokens";
            if (r.name == "blocks.0.attn.qkv.bias") r.data = bias.data();
        }
        v.push_back(array_ref("blocks.0.attn.qkv.bias_mask", mask));
        edit(v);
        write_safetensors((d / name).string(), v, {{"format", "pt"}});
        return (d / name).string();
    };
    const LoadedModel lm = load_model(write("ok.safetensors", [](std::vector<ArrayRef>&) {}));
    const Config& g = lm.weights.cfg;
    EXPECT_EQ(g.family, ModelFamily::Dinov3);
    EXPECT_EQ(g.heads, 6);  // 16 periods: head width 64
    EXPECT_NE(lm.heads_from.find("rope_embed.periods"), std::string::npos) << lm.heads_from;
    EXPECT_TRUE(g.rope);
    EXPECT_FALSE(g.pos_table);
    EXPECT_EQ(g.registers, 4);
    EXPECT_FLOAT_EQ(g.eps, 1e-5f);
    EXPECT_EQ(g.image_size, 224);
    for (size_t i = 0; i < 3 * D; ++i) ASSERT_EQ(lm.weights.blocks[0].qkv_b(i), bias(i) * mask(i)) << i;
    EXPECT_TRUE(xt::allclose(lm.weights.rope_periods, w.rope_periods));
    // periods that do not divide the width into heads: named
    Tensor1 p5 = xt::ones<float>({5});
    try {
        load_model(write("p5.safetensors", [&](std::vector<ArrayRef>& v) {
            for (ArrayRef& r : v) if (r.name == "rope_embed.periods") r = array_ref("rope_embed.periods", p5);
        }));
        ADD_FAILURE() << "5 periods for width 384 loaded";
    } catch (const FileError& e) {
        EXPECT_NE(std::string(e.what()).find("rope_embed.periods"), std::string::npos) << e.what();
    }
    // a mask that is not 0s and 1s (its NaN before initialisation): named
    Tensor1 nanmask = mask;
    nanmask(5) = std::nanf("");
    try {
        load_model(write("nan.safetensors", [&](std::vector<ArrayRef>& v) {
            for (ArrayRef& r : v) if (r.name == "blocks.0.attn.qkv.bias_mask") r.data = nanmask.data();
        }));
        ADD_FAILURE() << "a NaN bias mask loaded";
    } catch (const FileError& e) {
        EXPECT_NE(std::string(e.what()).find("bias_mask"), std::string::npos) << e.what();
    }
    // storage tokens without the periods: named
    try {
        load_model(write("noper.safetensors", [&](std::vector<ArrayRef>& v) {
            v.erase(std::remove_if(v.begin(), v.end(), [](const ArrayRef& r) { return r.name == "rope_embed.periods"; }), v.end());
        }));
        ADD_FAILURE() << "DINOv3 without its periods loaded";
    } catch (const FileError& e) {
        EXPECT_NE(std::string(e.what()).find("rope_embed.periods"), std::string::npos) << e.what();
    }
    // ViTScope's own file of it round-trips: config (rope, no table) and the periods
    save_model((d / "own.safetensors").string(), lm.weights);
    const LoadedModel back = load_model((d / "own.safetensors").string());
    EXPECT_TRUE(back.weights.cfg.rope);
    EXPECT_FALSE(back.weights.cfg.pos_table);
    EXPECT_EQ(back.weights.cfg.family, ModelFamily::Dinov3);
    EXPECT_TRUE(xt::allclose(back.weights.rope_periods, w.rope_periods));
    EXPECT_EQ(back.weights.pos.size(), 0u);
    fs::remove_all(d);
}

// transformers' DINOv3ViTModel layout: the periods from config.json's rope_theta (not in the file), the
// missing k_proj bias as zeros; a config of another model and a gated MLP with another activation refused.
TEST(Layouts, Dinov3HuggingFacePeriodsFromRopeThetaAndRefusals) {
    Config c = preset("dinov3-s16");
    c.depth = 1;
    c.rope_base = 50.f;
    const Weights w = init_weights(c, 9);
    const fs::path d = fs::temp_directory_path() / "vitscope_dinov3_hf";
    fs::remove_all(d);
    fs::create_directories(d);
    const size_t D = 384;
    const auto& b = w.blocks[0];
    auto rows = [&](const Tensor2& m, size_t r0, size_t n, const std::string& name) {
        return ArrayRef{name, m.data() + r0 * m.shape(1), Shape{n, m.shape(1)}};
    };
    auto write = [&](const std::string& config, bool gated) {
        std::vector<ArrayRef> v = {
            ArrayRef{"embeddings.cls_token", w.cls.data(), Shape{1, 1, D}},
            ArrayRef{"embeddings.register_tokens", w.reg.data(), Shape{1, 4, D}},
            ArrayRef{"embeddings.patch_embeddings.weight", w.patch_w.data(), Shape{D, 3, 16, 16}},
            array_ref("embeddings.patch_embeddings.bias", w.patch_b),
            array_ref("layer.0.norm1.weight", b.ln1.g), array_ref("layer.0.norm1.bias", b.ln1.b),
            rows(b.qkv_w, 0, D, "layer.0.attention.q_proj.weight"), rows(b.qkv_w, D, D, "layer.0.attention.k_proj.weight"),
            rows(b.qkv_w, 2 * D, D, "layer.0.attention.v_proj.weight"),
            ArrayRef{"layer.0.attention.q_proj.bias", b.qkv_b.data(), Shape{D}},
            ArrayRef{"layer.0.attention.v_proj.bias", b.qkv_b.data() + 2 * D, Shape{D}},
            array_ref("layer.0.attention.o_proj.weight", b.proj_w), array_ref("layer.0.attention.o_proj.bias", b.proj_b),
            array_ref("layer.0.layer_scale1.lambda1", b.ls1), array_ref("layer.0.layer_scale2.lambda1", b.ls2),
            array_ref("layer.0.norm2.weight", b.ln2.g), array_ref("layer.0.norm2.bias", b.ln2.b),
            array_ref(gated ? "layer.0.mlp.gate_proj.weight" : "layer.0.mlp.up_proj.weight", b.fc1_w),
            array_ref(gated ? "layer.0.mlp.gate_proj.bias" : "layer.0.mlp.up_proj.bias", b.fc1_b),
            array_ref("layer.0.mlp.down_proj.weight", b.fc2_w), array_ref("layer.0.mlp.down_proj.bias", b.fc2_b),
            array_ref("norm.weight", w.ln_f.g), array_ref("norm.bias", w.ln_f.b)};
        if (gated) {
            v.push_back(array_ref("layer.0.mlp.up_proj.weight", b.fc1_w));
            v.push_back(array_ref("layer.0.mlp.up_proj.bias", b.fc1_b));
        }
        write_safetensors((d / "model.safetensors").string(), v, {{"format", "pt"}});
        std::ofstream(d / "config.json") << config;
        return (d / "model.safetensors").string();
    };
    const LoadedModel lm = load_model(write(R"({"model_type": "dinov3_vit", "num_attention_heads": 6, "hidden_size": 384,
        "num_hidden_layers": 1, "rope_theta": 50.0, "image_size": 224, "patch_size": 16, "layer_norm_eps": 1e-5})", false));
    const Config& g = lm.weights.cfg;
    EXPECT_EQ(g.family, ModelFamily::Dinov3);
    EXPECT_TRUE(g.rope && !g.pos_table);
    EXPECT_FLOAT_EQ(g.rope_base, 50.f);
    EXPECT_TRUE(xt::allclose(lm.weights.rope_periods, w.rope_periods)) << "periods from rope_theta 50";
    for (size_t i = 0; i < 3 * D; ++i)
        ASSERT_EQ(lm.weights.blocks[0].qkv_b(i), i >= D && i < 2 * D ? 0.f : b.qkv_b(i)) << i;
    // a config that is another model's
    try {
        load_model(write(R"({"model_type": "dinov2", "num_attention_heads": 6})", false));
        ADD_FAILURE() << "a dinov2 config.json beside DINOv3ViTModel keys loaded";
    } catch (const FileError& e) {
        EXPECT_NE(std::string(e.what()).find("model_type 'dinov2'"), std::string::npos) << e.what();
    }
    // a gated MLP whose activation is not silu
    try {
        load_model(write(R"({"model_type": "dinov3_vit", "num_attention_heads": 6, "hidden_act": "gelu"})", true));
        ADD_FAILURE() << "a gated MLP with gelu loaded";
    } catch (const FileError& e) {
        EXPECT_NE(std::string(e.what()).find("hidden_act 'gelu'"), std::string::npos) << e.what();
    }
    fs::remove_all(d);
}
