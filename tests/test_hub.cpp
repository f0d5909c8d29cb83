// hf: specs, the folders the environment names, and what a checkpoint is from its tensor names and
// shapes (core/io/hub.h); the configs handed to the loader (core/io/checkpoint.h). The downloads
// themselves are tested end to end against a local server in test_hub.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/io/checkpoint.h"
#include "core/io/hub.h"
#include "core/io/io.h"

namespace {

using Shapes = std::map<std::string, std::vector<size_t>>;

// Sets environment variables for one test and puts the old values back.
class Env {
public:
    void set(const char* k, const char* v) {
        if (!saved_.count(k)) {
            const char* old = std::getenv(k);
            saved_[k] = old ? std::optional<std::string>(old) : std::nullopt;
        }
        if (v) ::setenv(k, v, 1);
        else ::unsetenv(k);
    }
    ~Env() {
        for (auto& [k, v] : saved_) {
            if (v) ::setenv(k.c_str(), v->c_str(), 1);
            else ::unsetenv(k.c_str());
        }
    }

private:
    std::map<std::string, std::optional<std::string>> saved_;
};

TEST(Hub, SpecsParseAsHuggingfaceHubValidatesThem) {
    vit::hub::Ref r = vit::hub::parse_spec("hf:google/vit-base-patch16-224");
    EXPECT_EQ(r.repo_id, "google/vit-base-patch16-224");
    EXPECT_EQ(r.revision, "main");
    r = vit::hub::parse_spec("hf:facebook/dinov2-small@refs/pr/1");
    EXPECT_EQ(r.revision, "refs/pr/1");
    r = vit::hub::parse_spec("hf:gpt2");  // the hub's old top-level names
    EXPECT_EQ(r.repo_id, "gpt2");
    EXPECT_EQ(vit::hub::repo_folder("google/vit-base-patch16-224"), "models--google--vit-base-patch16-224");
    for (const char* bad : {"hf:", "hf:/x", "hf:a/", "hf:a/b/c", "hf:a--b/c", "hf:a/b..c", "hf:-a/b", "hf:a/b.git",
                            "hf:a/b@", "hf:a/b@../../x", "hf:a/b@x/./y", "hf:a/b@/x", "hf:a/b c", "hf:a/b@x y"}) {
        SCOPED_TRACE(bad);
        try {
            vit::hub::parse_spec(bad);
            ADD_FAILURE() << "accepted";
        } catch (const vit::FileError& e) {
            EXPECT_NE(std::string(e.what()).find("hf:ORG/NAME"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
        }
    }
    EXPECT_FALSE(vit::hub::is_spec("vit_b_16"));
    EXPECT_TRUE(vit::hub::is_spec("hf:x/y"));
}

TEST(Hub, FoldersFromTheEnvironmentInHuggingfaceHubsOrder) {
    Env env;
    for (const char* k : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "TORCH_HOME", "HF_ENDPOINT",
                          "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"})
        env.set(k, nullptr);
    env.set("HOME", "/home/u");
    EXPECT_EQ(vit::hub::cache_dir(), "/home/u/.cache/huggingface/hub");
    EXPECT_EQ(vit::hub::torch_checkpoints_dir(), "/home/u/.cache/torch/hub/checkpoints");
    env.set("XDG_CACHE_HOME", "/x");
    EXPECT_EQ(vit::hub::cache_dir(), "/x/huggingface/hub");
    EXPECT_EQ(vit::hub::torch_checkpoints_dir(), "/x/torch/hub/checkpoints");
    env.set("HF_HOME", "~/hf");
    EXPECT_EQ(vit::hub::cache_dir(), "/home/u/hf/hub");
    env.set("HUGGINGFACE_HUB_CACHE", "/legacy");
    EXPECT_EQ(vit::hub::cache_dir(), "/legacy");
    env.set("HF_HUB_CACHE", "/c");
    EXPECT_EQ(vit::hub::cache_dir(), "/c");
    env.set("TORCH_HOME", "/t");
    EXPECT_EQ(vit::hub::torch_checkpoints_dir(), "/t/hub/checkpoints");
    EXPECT_EQ(vit::hub::endpoint(), "https://huggingface.co");
    env.set("HF_ENDPOINT", "http://127.0.0.1:8080/");
    EXPECT_EQ(vit::hub::endpoint(), "http://127.0.0.1:8080");
    EXPECT_FALSE(vit::hub::offline_env());
    for (const char* v : {"1", "true", "ON", "yes"}) {
        env.set("HF_HUB_OFFLINE", v);
        EXPECT_TRUE(vit::hub::offline_env()) << v;
    }
    env.set("HF_HUB_OFFLINE", "0");
    EXPECT_FALSE(vit::hub::offline_env());
    env.set("TRANSFORMERS_OFFLINE", "1");
    EXPECT_TRUE(vit::hub::offline_env());
}

// The key names of each family as their own code writes them (DESIGN.md's tables), small shapes.
Shapes timm_vit(size_t D, int L, size_t P, size_t tokens, size_t classes) {
    Shapes s{{"cls_token", {1, 1, D}}, {"pos_embed", {1, tokens, D}}, {"patch_embed.proj.weight", {D, 3, P, P}},
             {"patch_embed.proj.bias", {D}}, {"norm.weight", {D}}, {"norm.bias", {D}}};
    for (int i = 0; i < L; ++i) s["blocks." + std::to_string(i) + ".attn.qkv.weight"] = {3 * D, D};
    if (classes) s["head.weight"] = {classes, D}, s["head.bias"] = {classes};
    return s;
}

TEST(Hub, IdentifiesEachFamilyByItsKeyNames) {
    struct Case { std::string name; Shapes shapes; std::string config, family, size; bool vit; };
    std::vector<Case> cases;
    cases.push_back({"timm ViT-B/16", timm_vit(768, 12, 16, 197, 1000), "", "ViT (timm)", "ViT-B/16, 224 px, 1000 classes", true});
    Shapes deit = timm_vit(192, 12, 16, 198, 1000);
    deit["dist_token"] = {1, 1, 192};
    deit["head_dist.weight"] = {1000, 192};
    cases.push_back({"DeiT distilled", deit, "", "DeiT distilled (timm)", "ViT-Ti/16, 224 px, 1000 classes", true});
    Shapes dino;
    for (auto& [k, v] : timm_vit(384, 12, 8, 785, 0)) dino["teacher.backbone." + k] = v;
    dino["teacher.head.mlp.0.weight"] = {2048, 384};
    cases.push_back({"DINO v1 teacher", dino, "", "DINO (timm layout) under 'teacher.backbone.'",
                     "ViT-S/8, 224 px, no classification head", true});
    Shapes mae = timm_vit(1024, 24, 16, 197, 0);
    mae["mask_token"] = {1, 1, 512};
    mae["decoder_embed.weight"] = {512, 1024};
    mae["decoder_blocks.0.attn.qkv.weight"] = {1536, 512};
    cases.push_back({"MAE with decoder", mae, "", "MAE (encoder and decoder)", "ViT-L/16, 224 px, no classification head", true});
    Shapes treg = timm_vit(384, 12, 14, 1369, 0);
    treg["reg_token"] = {1, 4, 384};
    for (int i = 0; i < 12; ++i) treg["blocks." + std::to_string(i) + ".ls1.gamma"] = {384};
    cases.push_back({"timm DINOv2 reg4", treg, R"({"architecture": "vit_small_patch14_reg4_dinov2.lvd142m"})",
                     "DINOv2 with 4 registers (timm), vit_small_patch14_reg4_dinov2.lvd142m", "ViT-S/14, 518 px, no classification head",
                     true});
    // timm's class_token=False ViT with registers: 256 patch rows (16x16 of 16 px: 256 px), no prefix row,
    // not DINOv2 (it was misread as DINOv2 with registers)
    Shapes gap = timm_vit(640, 12, 16, 256, 1000);
    gap.erase("cls_token");
    gap.erase("norm.weight");
    gap.erase("norm.bias");
    gap["fc_norm.weight"] = {640};
    gap["reg_token"] = {1, 4, 640};
    cases.push_back({"timm reg4 gap", gap, R"({"architecture": "vit_betwixt_patch16_reg4_gap_256"})",
                     "ViT without a cls token, 4 registers (timm, mean pooling), vit_betwixt_patch16_reg4_gap_256",
                     "width 640, depth 12, patch 16, 256 px, 1000 classes", true});
    Shapes swin{{"patch_embed.proj.weight", {96, 3, 4, 4}}, {"layers.0.blocks.0.attn.relative_position_bias_table", {169, 3}}};
    cases.push_back({"Swin", swin, "", "Swin (windowed attention, not a plain ViT)", "width 96, patch 4", false});
    Shapes tv{{"class_token", {1, 1, 768}}, {"conv_proj.weight", {768, 3, 32, 32}}, {"encoder.pos_embedding", {1, 50, 768}},
              {"heads.head.weight", {1000, 768}}};
    for (int i = 0; i < 12; ++i) tv["encoder.layers.encoder_layer_" + std::to_string(i) + ".ln_1.weight"] = {768};
    cases.push_back({"torchvision vit_b_32", tv, "", "ViT (torchvision)", "ViT-B/32, 224 px, 1000 classes", true});
    Shapes oc{{"visual.conv1.weight", {768, 3, 16, 16}}, {"visual.class_embedding", {768}},
              {"visual.positional_embedding", {197, 768}}, {"visual.proj", {768, 512}},
              {"transformer.resblocks.0.attn.in_proj_weight", {1536, 512}}};
    for (int i = 0; i < 12; ++i) oc["visual.transformer.resblocks." + std::to_string(i) + ".attn.in_proj_weight"] = {2304, 768};
    cases.push_back({"OpenAI CLIP ViT-B/16", oc, "", "CLIP (OpenAI / open_clip, image and text towers)",
                     "ViT-B/16, 224 px, embedding 512", true});
    Shapes sig{{"vision_model.embeddings.patch_embedding.weight", {768, 3, 16, 16}},
               {"vision_model.embeddings.position_embedding.weight", {196, 768}}, {"vision_model.head.probe", {1, 1, 768}}};
    for (int i = 0; i < 12; ++i) sig["vision_model.encoder.layers." + std::to_string(i) + ".self_attn.q_proj.weight"] = {768, 768};
    cases.push_back({"SigLIP vision", sig, R"({"model_type": "siglip_vision_model"})", "SigLIP vision tower (Hugging Face)",
                     "ViT-B/16, 224 px", true});
    Shapes hfdeit{{"deit.embeddings.cls_token", {1, 1, 192}}, {"deit.embeddings.distillation_token", {1, 1, 192}},
                  {"deit.embeddings.position_embeddings", {1, 198, 192}},
                  {"deit.embeddings.patch_embeddings.projection.weight", {192, 3, 16, 16}},
                  {"cls_classifier.weight", {1000, 192}}, {"distillation_classifier.weight", {1000, 192}}};
    for (int i = 0; i < 12; ++i) hfdeit["deit.encoder.layer." + std::to_string(i) + ".attention.attention.query.weight"] = {192, 192};
    cases.push_back({"Hugging Face DeiT distilled", hfdeit, "", "DeiT distilled (Hugging Face)",
                     "ViT-Ti/16, 224 px, 1000 classes", true});
    Shapes resnet{{"conv1.weight", {64, 3, 7, 7}}, {"layer1.0.conv1.weight", {64, 64, 1, 1}}, {"fc.weight", {1000, 2048}}};
    cases.push_back({"ResNet", resnet, "", "not a ViT (a ResNet-style CNN)", "", false});
    cases.push_back({"BERT with config", Shapes{{"bert.embeddings.word_embeddings.weight", {30522, 768}}},
                     R"({"model_type": "bert"})", "not a ViT (config.json: model_type 'bert')", "", false});
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        vit::hub::Identity id = vit::hub::identify(c.shapes, c.config);
        EXPECT_EQ(id.family, c.family);
        EXPECT_EQ(id.size, c.size);
        EXPECT_EQ(id.vit, c.vit);
        int64_t n = 0;
        for (auto& [k, s] : c.shapes) {
            int64_t e = 1;
            for (size_t d : s) e *= int64_t(d);
            n += e;
        }
        EXPECT_EQ(id.params, n);
    }
}

// A temporary folder, removed with what it holds when the test ends.
struct TempDir {
    std::string path;
    TempDir() {
        char tmpl[] = "/tmp/vitscope_hub_XXXXXX";
        const char* d = ::mkdtemp(tmpl);
        if (!d) throw std::runtime_error("mkdtemp failed");
        path = d;
    }
    ~TempDir() { std::filesystem::remove_all(path); }
};

void write_text(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
}

// A random timm-layout ViT saved by vitscope, then re-saved without its vitscope.config so the
// Hugging Face configs decide (as for a file from the hub).
std::string hf_like_file(const std::string& dir) {
    vit::Config c = vit::preset("toy-rgb8");
    vit::Weights w = vit::init_weights(c, 1);
    const std::string p = dir + "/model.safetensors";
    vit::save_model(p, w);
    vit::SafeTensors st = vit::read_safetensors(p);
    std::vector<vit::ArrayRef> refs;
    for (auto& [k, t] : st.tensors) refs.push_back(vit::array_ref(k, t));
    vit::write_safetensors(p, refs, {{"format", "pt"}});
    return p;
}

TEST(Hub, ConfigsBesideTheWeightsGiveWhatTheShapesCannot) {
    TempDir tmp;
    const std::string dir = tmp.path, weights = hf_like_file(dir);
    const vit::Config toy = vit::preset("toy-rgb8");
    write_text(dir + "/config.json", R"({"model_type": "vit", "num_attention_heads": )" + std::to_string(toy.heads) +
                                         R"(, "layer_norm_eps": 1e-05, "id2label": {"1": "b", "0": "a")" +
                                         [&] {
                                             std::string s;
                                             for (int i = 2; i < toy.classes; ++i)
                                                 s += ", \"" + std::to_string(i) + "\": \"c" + std::to_string(i) + "\"";
                                             return s;
                                         }() + "}}");
    // Resize the shorter side to 10, crop 8 (toy-rgb8 is 8 px), bicubic, ImageNet mean and std.
    write_text(dir + "/preprocessor_config.json",
               R"({"do_resize": true, "size": {"shortest_edge": 10}, "do_center_crop": true, "crop_size": {"height": 8, "width": 8},
                   "resample": 3, "image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225]})");
    vit::LoadedModel lm = vit::load_model(weights);  // a snapshot's file by its path reads the configs beside it
    const vit::Config& c = lm.weights.cfg;
    EXPECT_EQ(c.heads, toy.heads);
    EXPECT_EQ(lm.heads_from.find("config.json") != std::string::npos || lm.heads_from.find("metadata") != std::string::npos, true) << lm.heads_from;
    EXPECT_FLOAT_EQ(c.eps, 1e-5f);
    ASSERT_EQ(c.class_names.size(), size_t(toy.classes));
    EXPECT_EQ(c.class_names[0], "a");
    EXPECT_EQ(c.class_names[1], "b");
    EXPECT_EQ(c.pre.resize, 10);
    EXPECT_FALSE(c.pre.squash);
    EXPECT_EQ(c.pre.interp, vit::Interp::Bicubic);
    EXPECT_FLOAT_EQ(c.pre.mean[0], 0.485f);
    EXPECT_FLOAT_EQ(c.pre.std[2], 0.225f);
    EXPECT_EQ(lm.metadata.at("hf.config"), dir + "/config.json");
    EXPECT_EQ(lm.metadata.count("vitscope.preprocess_note"), 0u);
    // What cannot be followed is said, not dropped.
    write_text(dir + "/preprocessor_config.json", R"({"resample": 1, "size": {"height": 8, "width": 8}, "image_mean": [0.5]})");
    lm = vit::load_model(weights);
    const std::string note = lm.metadata.at("vitscope.preprocess_note");
    EXPECT_NE(note.find("resample 1 (PIL lanczos) is not available"), std::string::npos) << note;
    EXPECT_NE(note.find("image_mean is not 3 numbers"), std::string::npos) << note;
    EXPECT_TRUE(lm.weights.cfg.pre.squash);
    // transformers' placeholder labels are not class names; a file's own metadata wins over config.json.
    write_text(dir + "/config.json", R"({"num_attention_heads": 1, "id2label": {"0": "LABEL_0", "1": "LABEL_1"}})");
    ::unlink((dir + "/preprocessor_config.json").c_str());
    lm = vit::load_checkpoint_files(weights, dir + "/config.json", "", {});
    EXPECT_EQ(lm.weights.cfg.heads, 1);
    EXPECT_TRUE(lm.weights.cfg.class_names.empty());
    write_text(dir + "/config.json", "{not json");
    try {
        vit::load_model(weights);
        ADD_FAILURE() << "accepted a broken config.json";
    } catch (const vit::FileError& e) {
        EXPECT_NE(std::string(e.what()).find(dir + "/config.json: not valid JSON"), std::string::npos) << e.what();
    }
}

TEST(Hub, HeaderIndexReadsNamesAndShapesOnly) {
    TempDir tmp;
    const std::string dir = tmp.path, weights = hf_like_file(dir);
    vit::TensorIndex ix = vit::index_checkpoint(weights);
    vit::SafeTensors st = vit::read_safetensors(weights);
    ASSERT_EQ(ix.tensors.size(), st.tensors.size());
    for (auto& [k, t] : st.tensors) {
        SCOPED_TRACE(k);
        ASSERT_TRUE(ix.tensors.count(k));
        EXPECT_EQ(ix.tensors.at(k).first, "F32");
        EXPECT_EQ(ix.tensors.at(k).second, vit::shape_of(t));
    }
    // A file cut short: the header still names tensors past the end, and the index says so.
    std::string bytes = vit::read_file(weights);
    vit::write_file_atomic(dir + "/cut.safetensors", bytes.substr(0, bytes.size() - 4));
    EXPECT_THROW(vit::index_checkpoint(dir + "/cut.safetensors"), vit::FileError);
}

}  // namespace
