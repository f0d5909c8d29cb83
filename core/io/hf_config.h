// The config files that come beside a checkpoint, read into plain structs:
//   - Hugging Face config.json (ViT, DeiT, Dinov2, Dinov2WithRegisters, CLIP, SigLIP,
//     ...): the model's fields at the top level, or for CLIPModel / SiglipModel under
//     "vision_config" (the image half);
//   - timm's config.json on the Hugging Face hub (timm/models/_hub.py save_config_for_hf:
//     "architecture", "model_args", "pretrained_cfg", "label_names");
//   - open_clip's open_clip_config.json ("model_cfg" with "vision_cfg" and "quick_gelu",
//     "preprocess_cfg");
//   - Hugging Face preprocessor_config.json (image_mean, image_std, size, crop_size, ...).
// Every field is optional: a field the file does not have stays empty (nothing is
// guessed here; apply_hf_defaults() fills documented defaults and says which).
// Every value is checked: types, ranges (model.h's limits), consistency (heads divide
// the width), id2label's keys; JSON nested more than 32 levels, more than 1,000,000
// values, a key twice in one object, and files over 64 MB are refused. Errors are
// vit::FileError (core/io/io.h) naming the file and the field:
//   "…/config.json: field 'vision_config.hidden_size' is "768", not an integer".
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace vit {

enum class ConfigKind { HuggingFace, Timm, OpenClip };

// The image model's fields, whichever file they came from (names as Hugging Face's).
struct ModelConfigFile {
    std::string what;                          // the file, for messages
    ConfigKind kind = ConfigKind::HuggingFace;
    std::optional<std::string> model_type;     // HF "model_type" of the file ("clip", "dinov2", ...)
    std::optional<std::string> vision_model_type;  // "clip_vision_model" when read from vision_config
    bool from_vision_config = false;           // the fields below came from "vision_config"
    std::vector<std::string> architectures;    // HF "architectures"; timm: its "architecture"
    std::optional<int> hidden_size, num_hidden_layers, num_attention_heads, intermediate_size;
    std::optional<int> image_height, image_width;  // image_size (an int or [h, w])
    std::optional<int> patch_size, num_channels;
    std::optional<double> layer_norm_eps;
    std::optional<std::string> hidden_act;     // as written: "gelu", "quick_gelu", "gelu_pytorch_tanh", ...
    std::optional<bool> qkv_bias;
    std::optional<double> mlp_ratio;           // Dinov2: intermediate = int(hidden * mlp_ratio)
    std::optional<double> layerscale_value;    // Dinov2: the layer scale's initial value
    std::optional<int> num_register_tokens;    // Dinov2WithRegisters; timm reg_tokens
    std::optional<bool> use_swiglu_ffn;        // Dinov2 (ViT-g)
    std::optional<double> rope_theta;          // DINOv3ViT: RoPE's base (the periods are base^(4j/d))
    std::optional<bool> use_gated_mlp;         // DINOv3ViT: act(gate_proj x) * up_proj x
    std::optional<bool> vision_use_head;       // SigLIP: the attention-pooling head (absent: present)
    std::optional<int> projection_dim;         // CLIP: the image embedding's width
    std::optional<int> num_labels;             // from id2label, timm num_classes or label_names
    std::vector<std::string> labels;           // id2label / label_names, index order (may be empty)
    // timm
    std::optional<std::string> global_pool;    // "token", "avg", "map", ""
    std::optional<bool> no_embed_class, class_token;
    std::optional<double> init_values;         // timm layer scale (present when set)
    std::optional<std::string> pretrained_tag; // timm pretrained_cfg.tag ("dino", "mae", "lvd142m", ...)
    // open_clip
    std::optional<bool> quick_gelu;            // model_cfg.quick_gelu (QuickGELU is not in the weights)
    std::optional<int> head_width;             // vision_cfg.head_width: heads = width / head_width
    std::optional<std::string> pool_type;      // vision_cfg.pool_type ("tok", "avg")
    std::optional<bool> final_ln_after_pool, no_ln_pre;
    std::optional<std::string> timm_model_name;  // vision_cfg.timm_model_name: a timm tower
    std::vector<std::string> defaulted;        // fields apply_hf_defaults() filled
};

// How an image becomes the model's input, as the files say.
struct PreprocessConfig {
    std::string what;
    std::optional<std::string> processor_type;     // "CLIPImageProcessor", ...
    std::optional<std::vector<float>> mean, std;   // 1..4 channels; std > 0
    std::optional<int> shortest_edge;              // size {"shortest_edge": n} or an int size
    std::optional<int> resize_height, resize_width;  // size {"height", "width"}: straight resize
    std::optional<int> crop_height, crop_width;    // crop_size (an int or {"height", "width"})
    std::optional<bool> do_resize, do_center_crop, do_normalize, do_rescale, do_convert_rgb;
    std::optional<double> rescale_factor;
    std::optional<std::string> resample;           // "nearest" "lanczos" "bilinear" "bicubic" "box" "hamming"
    std::optional<double> crop_pct;                // timm pretrained_cfg
    std::optional<std::string> crop_mode;          // timm: "center", "squash", "border"
    std::optional<std::string> resize_mode;        // open_clip: "shortest", "longest", "squash"
    std::optional<int> input_height, input_width;  // timm input_size [C, H, W]; open_clip size
};

struct ConfigFile {
    ModelConfigFile model;
    PreprocessConfig pre;  // timm's pretrained_cfg and open_clip's preprocess_cfg land here
};

// config.json (Hugging Face or timm) or open_clip_config.json: which one is told by
// its content ("model_cfg": open_clip; "architecture": timm).
ConfigFile parse_config_json(const std::string& text, const std::string& what);
ConfigFile read_config_json(const std::string& path);
// preprocessor_config.json
PreprocessConfig parse_preprocessor_json(const std::string& text, const std::string& what);
PreprocessConfig read_preprocessor_json(const std::string& path);

// Fills the fields a Hugging Face config may leave out with the defaults of its
// configuration class in transformers (ViTConfig, DeiTConfig, CLIPVisionConfig,
// SiglipVisionConfig, Dinov2Config, Dinov2WithRegistersConfig) and lists them in
// `defaulted`. Dinov2's layer_norm_eps and patch_size are never filled: their defaults
// changed between transformers versions. Unknown model types are left as they are.
void apply_hf_defaults(ModelConfigFile& c);

enum class ActKind { GeluErf, GeluTanh, QuickGelu, Silu, Relu };
// hidden_act as the forward computes it; throws FileError naming the file for an
// activation ViTScope does not compute.
ActKind activation_of(const ModelConfigFile& c);

}  // namespace vit
