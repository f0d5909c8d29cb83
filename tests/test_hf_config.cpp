// core/io/hf_config: the config files beside a checkpoint, as the real repositories ship
// them (Hugging Face config.json / preprocessor_config.json of DINOv2, CLIP, SigLIP, DeiT;
// timm's config.json; open_clip_config.json), and hostile ones, each refused with a
// message naming the file and the field.
#include <gtest/gtest.h>

#include <string>

#include "core/io/hf_config.h"
#include "core/io/io.h"

using namespace vit;

namespace {

// Expects parse to throw FileError whose message holds every one of `parts`.
template <class F>
void expect_refused(F&& parse, std::initializer_list<const char*> parts) {
    try {
        parse();
        ADD_FAILURE() << "accepted, expected a refusal mentioning " << *parts.begin();
    } catch (const FileError& e) {
        std::string m = e.what();
        for (const char* p : parts) EXPECT_NE(m.find(p), std::string::npos) << "message: " << m << "\nmissing: " << p;
    }
}

ConfigFile cfg(const std::string& text) { return parse_config_json(text, "models--x/config.json"); }
PreprocessConfig pre(const std::string& text) { return parse_preprocessor_json(text, "models--x/preprocessor_config.json"); }

}  // namespace

// facebook/dinov2-small's config.json as the hub serves it.
TEST(HfConfig, Dinov2Small) {
    ConfigFile c = cfg(R"({
  "architectures": ["Dinov2Model"], "attention_probs_dropout_prob": 0.0, "drop_path_rate": 0.0,
  "hidden_act": "gelu", "hidden_dropout_prob": 0.0, "hidden_size": 384, "image_size": 518,
  "initializer_range": 0.02, "layer_norm_eps": 1e-06, "layerscale_value": 1.0, "mlp_ratio": 4,
  "model_type": "dinov2", "num_attention_heads": 6, "num_channels": 3, "num_hidden_layers": 12,
  "patch_size": 14, "qkv_bias": true, "torch_dtype": "float32", "transformers_version": "4.31.0.dev0",
  "use_swiglu_ffn": false})");
    const ModelConfigFile& m = c.model;
    EXPECT_EQ(m.kind, ConfigKind::HuggingFace);
    EXPECT_EQ(m.model_type.value(), "dinov2");
    EXPECT_EQ(m.architectures, std::vector<std::string>{"Dinov2Model"});
    EXPECT_FALSE(m.from_vision_config);
    EXPECT_EQ(m.hidden_size.value(), 384);
    EXPECT_EQ(m.num_hidden_layers.value(), 12);
    EXPECT_EQ(m.num_attention_heads.value(), 6);
    EXPECT_FALSE(m.intermediate_size);
    EXPECT_DOUBLE_EQ(m.mlp_ratio.value(), 4.0);
    EXPECT_EQ(m.image_height.value(), 518);
    EXPECT_EQ(m.image_width.value(), 518);
    EXPECT_EQ(m.patch_size.value(), 14);
    EXPECT_DOUBLE_EQ(m.layer_norm_eps.value(), 1e-6);
    EXPECT_DOUBLE_EQ(m.layerscale_value.value(), 1.0);
    EXPECT_FALSE(m.use_swiglu_ffn.value());
    EXPECT_TRUE(m.qkv_bias.value());
    EXPECT_FALSE(m.num_register_tokens);
    EXPECT_EQ(activation_of(m), ActKind::GeluErf);
    ModelConfigFile d = m;
    apply_hf_defaults(d);
    EXPECT_TRUE(d.defaulted.empty());  // every field was in the file
}

TEST(HfConfig, Dinov2WithRegisters) {
    ConfigFile c = cfg(R"({"architectures": ["Dinov2WithRegistersModel"], "hidden_act": "gelu", "hidden_size": 768,
      "image_size": 518, "layer_norm_eps": 1e-06, "layerscale_value": 1.0, "mlp_ratio": 4,
      "model_type": "dinov2_with_registers", "num_attention_heads": 12, "num_channels": 3, "num_hidden_layers": 12,
      "num_register_tokens": 4, "out_features": ["stage12"], "out_indices": [12], "patch_size": 14,
      "qkv_bias": true, "stage_names": ["stem", "stage1"], "use_swiglu_ffn": false})");
    EXPECT_EQ(c.model.num_register_tokens.value(), 4);
    EXPECT_EQ(c.model.model_type.value(), "dinov2_with_registers");
}

// openai/clip-vit-base-patch32's CLIPModel config: the image half under vision_config,
// projection_dim at the top level.
TEST(HfConfig, ClipModelVisionHalf) {
    ConfigFile c = cfg(R"({"_name_or_path": "openai/clip-vit-base-patch32", "architectures": ["CLIPModel"],
      "initializer_factor": 1.0, "logit_scale_init_value": 2.6592, "model_type": "clip", "projection_dim": 512,
      "text_config": {"hidden_size": 512, "intermediate_size": 2048, "model_type": "clip_text_model",
                      "num_attention_heads": 8, "num_hidden_layers": 12, "vocab_size": 49408},
      "text_config_dict": null,
      "vision_config": {"dropout": 0.0, "hidden_act": "quick_gelu", "hidden_size": 768, "image_size": 224,
                        "intermediate_size": 3072, "layer_norm_eps": 1e-05, "model_type": "clip_vision_model",
                        "num_attention_heads": 12, "num_hidden_layers": 12, "patch_size": 32,
                        "projection_dim": 512},
      "vision_config_dict": null, "torch_dtype": "float32", "transformers_version": null})");
    const ModelConfigFile& m = c.model;
    EXPECT_EQ(m.model_type.value(), "clip");
    EXPECT_TRUE(m.from_vision_config);
    EXPECT_EQ(m.vision_model_type.value(), "clip_vision_model");
    EXPECT_EQ(m.hidden_size.value(), 768);        // not the text tower's 512
    EXPECT_EQ(m.intermediate_size.value(), 3072);
    EXPECT_EQ(m.patch_size.value(), 32);
    EXPECT_EQ(m.projection_dim.value(), 512);
    EXPECT_DOUBLE_EQ(m.layer_norm_eps.value(), 1e-5);
    EXPECT_EQ(activation_of(m), ActKind::QuickGelu);
    EXPECT_FALSE(m.num_channels);  // not in the file...
    ModelConfigFile d = m;
    apply_hf_defaults(d);          // ...and filled from CLIPVisionConfig, said so
    EXPECT_EQ(d.num_channels.value(), 3);
    EXPECT_EQ(d.defaulted, std::vector<std::string>{"num_channels"});
}

TEST(HfConfig, ClipVisionWithProjectionAndSiglip) {
    ConfigFile c = cfg(R"({"architectures": ["CLIPVisionModelWithProjection"], "hidden_act": "quick_gelu",
      "hidden_size": 1024, "image_size": 336, "intermediate_size": 4096, "layer_norm_eps": 1e-05,
      "model_type": "clip_vision_model", "num_attention_heads": 16, "num_channels": 3, "num_hidden_layers": 24,
      "patch_size": 14, "projection_dim": 768})");
    EXPECT_EQ(c.model.projection_dim.value(), 768);
    EXPECT_EQ(c.model.image_height.value(), 336);
    ConfigFile s = cfg(R"({"architectures": ["SiglipModel"], "initializer_factor": 1.0, "model_type": "siglip",
      "text_config": {"hidden_size": 768, "model_type": "siglip_text_model", "vocab_size": 32000},
      "vision_config": {"hidden_size": 768, "image_size": 224, "intermediate_size": 3072,
                        "model_type": "siglip_vision_model", "num_attention_heads": 12, "num_hidden_layers": 12,
                        "patch_size": 16}})");
    EXPECT_TRUE(s.model.from_vision_config);
    EXPECT_FALSE(s.model.hidden_act);
    ModelConfigFile d = s.model;
    apply_hf_defaults(d);
    EXPECT_EQ(activation_of(d), ActKind::GeluTanh);
    EXPECT_DOUBLE_EQ(d.layer_norm_eps.value(), 1e-6);
    EXPECT_EQ(d.defaulted, (std::vector<std::string>{"num_channels", "hidden_act", "layer_norm_eps"}));
}

// facebook/deit-base-distilled-patch16-224: id2label (strings keyed by index), eps 1e-12.
TEST(HfConfig, DeitLabels) {
    ConfigFile c = cfg(R"({"architectures": ["DeiTForImageClassificationWithTeacher"], "encoder_stride": 16,
      "hidden_act": "gelu", "hidden_size": 768, "id2label": {"1": "goldfish", "0": "tench", "2": "great white shark"},
      "label2id": {"tench": 0, "goldfish": 1, "great white shark": 2}, "image_size": 224,
      "intermediate_size": 3072, "layer_norm_eps": 1e-12, "model_type": "deit", "num_attention_heads": 12,
      "num_channels": 3, "num_hidden_layers": 12, "patch_size": 16, "qkv_bias": true})");
    EXPECT_EQ(c.model.labels, (std::vector<std::string>{"tench", "goldfish", "great white shark"}));
    EXPECT_EQ(c.model.num_labels.value(), 3);
    EXPECT_DOUBLE_EQ(c.model.layer_norm_eps.value(), 1e-12);
}

// timm's config.json (timm/vit_small_patch14_reg4_dinov2.lvd142m).
TEST(HfConfig, TimmConfig) {
    ConfigFile c = cfg(R"({"architecture": "vit_small_patch14_reg4_dinov2", "num_classes": 0, "num_features": 384,
      "global_pool": "token", "model_args": {"img_size": 518, "patch_size": 14, "embed_dim": 384, "depth": 12,
      "num_heads": 6, "init_values": 1e-05, "reg_tokens": 4, "no_embed_class": true},
      "pretrained_cfg": {"tag": "lvd142m", "custom_load": false, "input_size": [3, 518, 518],
      "fixed_input_size": true, "interpolation": "bicubic", "crop_pct": 1.0, "crop_mode": "center",
      "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225], "num_classes": 0, "pool_size": null,
      "first_conv": "patch_embed.proj", "classifier": "head", "license": "apache-2.0"}})");
    EXPECT_EQ(c.model.kind, ConfigKind::Timm);
    EXPECT_EQ(c.model.architectures, std::vector<std::string>{"vit_small_patch14_reg4_dinov2"});
    EXPECT_EQ(c.model.num_register_tokens.value(), 4);
    EXPECT_TRUE(c.model.no_embed_class.value());
    EXPECT_DOUBLE_EQ(c.model.init_values.value(), 1e-5);
    EXPECT_EQ(c.model.hidden_size.value(), 384);
    EXPECT_EQ(c.model.num_attention_heads.value(), 6);
    EXPECT_EQ(c.model.num_labels.value(), 0);
    EXPECT_EQ(c.model.num_channels.value(), 3);
    EXPECT_EQ(c.pre.input_height.value(), 518);
    EXPECT_EQ(c.pre.resample.value(), "bicubic");
    EXPECT_DOUBLE_EQ(c.pre.crop_pct.value(), 1.0);
    EXPECT_FLOAT_EQ(c.pre.std->at(2), 0.225f);
}

// open_clip_config.json: QuickGELU from the config (it is not in the weights); heads = width / 64.
TEST(HfConfig, OpenClipConfig) {
    ConfigFile c = cfg(R"({"model_cfg": {"embed_dim": 512, "quick_gelu": true,
      "vision_cfg": {"image_size": 224, "layers": 12, "width": 768, "patch_size": 32},
      "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 512, "heads": 8, "layers": 12}},
      "preprocess_cfg": {"mean": [0.48145466, 0.4578275, 0.40821073], "std": [0.26862954, 0.26130258, 0.27577711],
      "interpolation": "bicubic", "resize_mode": "shortest"}})");
    const ModelConfigFile& m = c.model;
    EXPECT_EQ(m.kind, ConfigKind::OpenClip);
    EXPECT_EQ(activation_of(m), ActKind::QuickGelu);
    EXPECT_EQ(m.num_attention_heads.value(), 12);
    EXPECT_EQ(m.intermediate_size.value(), 3072);
    EXPECT_EQ(m.projection_dim.value(), 512);
    EXPECT_DOUBLE_EQ(m.layer_norm_eps.value(), 1e-5);
    EXPECT_EQ(m.defaulted, (std::vector<std::string>{"layer_norm_eps", "head_width", "mlp_ratio"}));
    EXPECT_EQ(c.pre.resize_mode.value(), "shortest");
    ConfigFile g = cfg(R"({"model_cfg": {"embed_dim": 512, "vision_cfg": {"image_size": 224, "layers": 12,
      "width": 768, "patch_size": 16}}})");
    EXPECT_EQ(activation_of(g.model), ActKind::GeluErf);  // no quick_gelu: open_clip uses nn.GELU...
    EXPECT_EQ(g.model.defaulted.front(), "quick_gelu");   // ...and that is said
}

TEST(HfConfig, Preprocessors) {
    PreprocessConfig clip = pre(R"({"crop_size": 224, "do_center_crop": true, "do_normalize": true,
      "do_resize": true, "feature_extractor_type": "CLIPFeatureExtractor",
      "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
      "resample": 3, "size": 224})");
    EXPECT_EQ(clip.shortest_edge.value(), 224);  // an int size is the shorter side for CLIP...
    EXPECT_FALSE(clip.resize_height);
    EXPECT_EQ(clip.crop_height.value(), 224);
    EXPECT_EQ(clip.resample.value(), "bicubic");
    PreprocessConfig vit = pre(R"({"do_normalize": true, "do_resize": true,
      "image_processor_type": "ViTImageProcessor", "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
      "resample": 2, "size": 224})");
    EXPECT_EQ(vit.resize_height.value(), 224);   // ...and a square for ViT
    EXPECT_FALSE(vit.shortest_edge);
    EXPECT_EQ(vit.resample.value(), "bilinear");
    PreprocessConfig bit = pre(R"({"crop_size": {"height": 224, "width": 224}, "do_center_crop": true,
      "do_convert_rgb": true, "do_normalize": true, "do_rescale": true, "do_resize": true,
      "image_mean": [0.485, 0.456, 0.406], "image_processor_type": "BitImageProcessor",
      "image_std": [0.229, 0.224, 0.225], "resample": 3, "rescale_factor": 0.00392156862745098,
      "size": {"shortest_edge": 256}})");
    EXPECT_EQ(bit.shortest_edge.value(), 256);
    EXPECT_EQ(bit.crop_width.value(), 224);
    EXPECT_NEAR(bit.rescale_factor.value(), 1.0 / 255, 1e-12);
    PreprocessConfig sig = pre(R"({"do_normalize": true, "do_rescale": true, "do_resize": true,
      "image_mean": [0.5, 0.5, 0.5], "image_processor_type": "SiglipImageProcessor", "image_std": [0.5, 0.5, 0.5],
      "processor_class": "SiglipProcessor", "resample": 3, "rescale_factor": 0.00392156862745098,
      "size": {"height": 384, "width": 384}})");
    EXPECT_EQ(sig.resize_height.value(), 384);
    EXPECT_FALSE(sig.crop_height);
}

TEST(HfConfig, DefaultsNeverGuessWhatChanged) {
    ConfigFile c = cfg(R"({"model_type": "dinov2", "hidden_size": 384, "num_attention_heads": 6})");
    ModelConfigFile d = c.model;
    apply_hf_defaults(d);
    EXPECT_FALSE(d.layer_norm_eps);  // 1e-12 in older transformers, 1e-6 later: not filled
    EXPECT_FALSE(d.patch_size);
    EXPECT_EQ(d.num_hidden_layers.value(), 12);
    ModelConfigFile u = cfg(R"({"model_type": "swinv2", "hidden_size": 96})").model;
    apply_hf_defaults(u);
    EXPECT_TRUE(u.defaulted.empty());
    EXPECT_FALSE(u.num_hidden_layers);
}

TEST(HfConfig, HostileFilesAreRefusedNamingFileAndField) {
    const char* f = "models--x/config.json";
    expect_refused([] { cfg(R"({"model_type": "vit", "hidden_size": "768"})"); }, {f, "'hidden_size'", "not an integer"});
    expect_refused([] { cfg(R"({"hidden_size": 1e30})"); }, {f, "'hidden_size'", "not an integer"});
    expect_refused([] { cfg(R"({"hidden_size": 1099511627776})"); }, {f, "'hidden_size'", "outside 1..8192"});
    expect_refused([] { cfg(R"({"hidden_size": 18446744073709551615})"); }, {f, "'hidden_size'", "outside"});
    expect_refused([] { cfg(R"({"num_hidden_layers": -3})"); }, {f, "'num_hidden_layers'", "outside"});
    expect_refused([] { cfg(R"({"vision_config": {"hidden_size": 768, "num_attention_heads": 5}})"); },
                   {f, "'vision_config.num_attention_heads'", "does not divide"});
    expect_refused([] { cfg(R"({"vision_config": {"image_size": 16, "patch_size": 32}})"); },
                   {f, "'vision_config.patch_size'", "larger than the image"});
    expect_refused([] { cfg(R"({"layer_norm_eps": 0})"); }, {f, "'layer_norm_eps'", "outside"});
    expect_refused([] { cfg(R"({"layer_norm_eps": 1e400})"); }, {f, "1e400"});
    expect_refused([] { cfg(R"({"num_register_tokens": 100000})"); }, {f, "'num_register_tokens'"});
    expect_refused([] { cfg(R"({"qkv_bias": "yes"})"); }, {f, "'qkv_bias'", "not true or false"});
    expect_refused([] { cfg(R"({"vision_config": [1, 2]})"); }, {f, "'vision_config'", "not an object"});
    expect_refused([] { cfg(R"({"image_size": [224, 224, 3]})"); }, {f, "'image_size'", "[height, width]"});
    expect_refused([] { cfg(R"({"id2label": {"0": "a", "2": "c"}})"); }, {f, "'id2label'", "\"2\""});
    expect_refused([] { cfg(R"({"id2label": {"0": "a", "01": "b"}})"); }, {f, "'id2label'", "\"01\""});
    expect_refused([] { cfg(R"({"id2label": {"0": 7}})"); }, {f, "'id2label.0'", "not a string"});
    // a class name over 1 KB (kMaxClassNameBytes), in either form; 1024 bytes is a name
    expect_refused([] { cfg(R"({"id2label": {"0": "a", "1": ")" + std::string(1025, 'b') + R"("}})"); },
                   {f, "'id2label.1'", "a class name of 1025 bytes, more than the 1024"});
    expect_refused([] { cfg(R"({"architecture": "vit_base", "label_names": ["a", ")" + std::string(1025, 'b') + R"("], "model_args": {}})"); },
                   {f, "'label_names[1]'", "a class name of 1025 bytes, more than the 1024"});
    EXPECT_EQ(cfg(R"({"id2label": {"0": "a", "1": ")" + std::string(1024, 'b') + R"("}})").model.labels[1].size(), 1024u);
    expect_refused([] { cfg(R"({"hidden_size": 8, "hidden_size": 16})"); }, {f, "'hidden_size' appears twice"});
    expect_refused([] { cfg(R"([1, 2, 3])"); }, {f, "not a JSON object"});
    expect_refused([] { cfg("{\"model_type\": \"vit\""); }, {f, "not valid JSON (UTF-8"});
    expect_refused([] { cfg("{\"model_type\": \"\xff\xfe\"}"); }, {f, "not valid JSON (UTF-8"});
    expect_refused([] { cfg(std::string(40, '[') + std::string(40, ']')); }, {f, "nested more than 32 levels"});
    expect_refused([] { cfg("{\"a\": " + std::string(100000, '[') + "}"); }, {f, "nested more than 32 levels"});
    std::string many = "{\"a\": [";
    for (int i = 0; i < 1000001; ++i) many += "0,";
    many += "0]}";
    expect_refused([&] { cfg(many); }, {f, "more than 1000000 JSON values"});
    // open_clip and timm
    expect_refused([] { cfg(R"({"model_cfg": {"vision_cfg": {"layers": [3, 4, 6, 3], "width": 64}}})"); },
                   {f, "'model_cfg.vision_cfg.layers'", "ResNet"});
    expect_refused([] { cfg(R"({"model_cfg": {"vision_cfg": {"layers": 12, "width": 768, "head_width": 100}}})"); },
                   {f, "'model_cfg.vision_cfg.head_width'", "does not divide"});
    expect_refused([] { cfg(R"({"model_cfg": 3})"); }, {f, "'model_cfg'", "not an object"});
    expect_refused([] { cfg(R"({"architecture": "vit_base", "model_args": {"embed_dim": 768, "num_heads": 7}})"); },
                   {f, "'model_args.num_heads'", "does not divide"});
    expect_refused([] { cfg(R"({"architecture": "vit_base", "pretrained_cfg": {"input_size": [224, 224]}})"); },
                   {f, "'pretrained_cfg.input_size'"});
    expect_refused([] { cfg(R"({"architecture": "vit_base", "num_classes": 3, "label_names": ["a", "b"],
                                "model_args": {}})"); }, {f, "'label_names'", "2 names for 3 classes"});
    // activations
    ModelConfigFile m = cfg(R"({"hidden_act": "gelu_10"})").model;
    expect_refused([&] { activation_of(m); }, {f, "'hidden_act'", "gelu_10"});
}

TEST(HfConfig, HostilePreprocessorsAreRefused) {
    const char* f = "models--x/preprocessor_config.json";
    expect_refused([] { pre(R"({"image_mean": [0.5, 0.5, 0.5, 0.5, 0.5]})"); }, {f, "'image_mean'", "1 to 4"});
    expect_refused([] { pre(R"({"image_std": [0.5, 0, 0.5]})"); }, {f, "'image_std'", "positive"});
    expect_refused([] { pre(R"({"image_mean": [0.5, 0.5], "image_std": [0.5, 0.5, 0.5]})"); },
                   {f, "'image_std'", "3 values for the 2"});
    expect_refused([] { pre(R"({"image_mean": ["a"]})"); }, {f, "'image_mean'", "not a number"});
    expect_refused([] { pre(R"({"size": {"height": 224}})"); }, {f, "'size.width'", "missing"});
    expect_refused([] { pre(R"({"size": {"longest_edge": 1333}})"); }, {f, "'size'", "neither shortest_edge"});
    expect_refused([] { pre(R"({"size": {"shortest_edge": 99999999}})"); }, {f, "'size.shortest_edge'", "outside"});
    expect_refused([] { pre(R"({"size": "224"})"); }, {f, "'size'", "not an integer or an object"});
    expect_refused([] { pre(R"({"crop_size": {"width": 224}})"); }, {f, "'crop_size'"});
    expect_refused([] { pre(R"({"resample": 9})"); }, {f, "'resample'", "outside 0..5"});
    expect_refused([] { pre(R"({"rescale_factor": -1})"); }, {f, "'rescale_factor'"});
    expect_refused([] { pre(R"({"do_resize": 1})"); }, {f, "'do_resize'", "not true or false"});
}

TEST(HfConfig, ReadsFilesAndNamesMissingOnes) {
    expect_refused([] { read_config_json("/nonexistent/dir/config.json"); }, {"/nonexistent/dir/config.json"});
    expect_refused([] { read_preprocessor_json("/nonexistent/preprocessor_config.json"); },
                   {"/nonexistent/preprocessor_config.json"});
}
