// Settings from the config files beside the weights: checked against the checkpoint (a config that
// contradicts it describes another model), the activation, the preprocessing; and the shared look-ups.
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <sstream>

#include "core/io/layouts_internal.h"

namespace vit {
namespace layouts_detail {

// ------------------------------------------------------------------ settings from the config files

// A config beside the weights that contradicts them describes another model.
[[noreturn]] void config_mismatch(const std::string& cfg, const char* kind, const std::string& what, const std::string& field,
                                  const std::string& says, const std::string& quantity, const std::string& is) {
    throw FileError(cfg + " (the " + kind + " config beside " + what + ") says " + field + " " + says + " but the checkpoint's " +
                    quantity + " is " + is + ": it describes another model (move it away)");
}

void check_config(const ModelConfigFile& m, const std::string& path, const std::string& what, const Config& c, int regs_in_file) {
    const char* kind = m.kind == ConfigKind::HuggingFace ? "Hugging Face" : m.kind == ConfigKind::Timm ? "timm" : "open_clip";
    const std::string pre = m.kind == ConfigKind::Timm ? "model_args." : m.kind == ConfigKind::OpenClip ? "model_cfg.vision_cfg."
                            : m.from_vision_config ? "vision_config." : "";
    auto field = [&](const char* hf, const char* timm, const char* oc) {
        return pre + (m.kind == ConfigKind::Timm ? timm : m.kind == ConfigKind::OpenClip ? oc : hf);
    };
    // The historical message names hidden_size and the width (tests and users know it).
    if (m.hidden_size && *m.hidden_size != c.width)
        config_mismatch(path, kind, what, m.kind == ConfigKind::HuggingFace && !m.from_vision_config ? "hidden_size"
                                                                                                       : field("hidden_size", "embed_dim", "width"),
                        std::to_string(*m.hidden_size), "width", std::to_string(c.width));
    if (m.num_hidden_layers && *m.num_hidden_layers != c.depth)
        config_mismatch(path, kind, what, field("num_hidden_layers", "depth", "layers"), std::to_string(*m.num_hidden_layers),
                        "depth", std::to_string(c.depth) + " blocks");
    if (m.patch_size && *m.patch_size != c.patch)
        config_mismatch(path, kind, what, field("patch_size", "patch_size", "patch_size"), std::to_string(*m.patch_size),
                        "patch", std::to_string(c.patch));
    if (m.num_channels && *m.num_channels != c.channels)
        config_mismatch(path, kind, what, field("num_channels", "in_chans", "channels"), std::to_string(*m.num_channels),
                        "channel count", std::to_string(c.channels));
    const int side = c.stored_grid() * c.patch;
    if (c.pos_table && m.image_height && (*m.image_height != side || *m.image_width != side))
        config_mismatch(path, kind, what, field("image_size", "img_size", "image_size"),
                        std::to_string(*m.image_height) + "x" + std::to_string(*m.image_width), "position table",
                        "for " + std::to_string(side) + "x" + std::to_string(side));
    if (m.num_register_tokens && *m.num_register_tokens != regs_in_file)
        config_mismatch(path, kind, what, field("num_register_tokens", "reg_tokens", "reg_tokens"),
                        std::to_string(*m.num_register_tokens), "register count", std::to_string(regs_in_file));
    if (m.kind != ConfigKind::Timm) {
        int mlp = 0;
        if (m.intermediate_size) mlp = *m.intermediate_size;
        else if (m.mlp_ratio && m.kind == ConfigKind::HuggingFace && m.hidden_size) {
            const int h = int(double(*m.hidden_size) * *m.mlp_ratio);  // transformers: int(hidden_size * mlp_ratio)
            mlp = m.use_swiglu_ffn.value_or(false) ? (int(h * 2.0 / 3.0) + 7) / 8 * 8 : h;
        }
        if (mlp && mlp != c.mlp)
            config_mismatch(path, kind, what, m.intermediate_size ? field("intermediate_size", "", "mlp_ratio") : field("mlp_ratio", "", "mlp_ratio"),
                            m.intermediate_size ? std::to_string(mlp) : num(*m.mlp_ratio) + " (an MLP of " + std::to_string(mlp) + ")",
                            "MLP width", std::to_string(c.mlp));
    }
    if (m.use_swiglu_ffn && *m.use_swiglu_ffn != (c.act == Act::SwiGlu))
        config_mismatch(path, kind, what, field("use_swiglu_ffn", "", ""), *m.use_swiglu_ffn ? "true" : "false", "MLP",
                        c.act == Act::SwiGlu ? "SwiGLU" : "not SwiGLU");
    if (m.kind == ConfigKind::Timm && m.class_token && *m.class_token != c.cls_token)
        config_mismatch(path, kind, what, "model_args.class_token", *m.class_token ? "true" : "false", "checkpoint",
                        c.cls_token ? "with a cls_token" : "without a cls_token");
    if (m.kind == ConfigKind::Timm && m.no_embed_class && *m.no_embed_class != c.pos_no_cls && c.cls_token)
        config_mismatch(path, kind, what, "model_args.no_embed_class", *m.no_embed_class ? "true" : "false", "pos_embed",
                        c.pos_no_cls ? "without a cls row" : "with a cls row");
    if (c.head == Head::Projection && m.projection_dim && *m.projection_dim != c.embed_dim)
        config_mismatch(path, kind, what, m.kind == ConfigKind::OpenClip ? "model_cfg.embed_dim" : "projection_dim",
                        std::to_string(*m.projection_dim), "projection width", std::to_string(c.embed_dim));
    if (m.vision_use_head && !*m.vision_use_head && c.pooling == Pooling::Map)
        config_mismatch(path, kind, what, field("vision_use_head", "", ""), "false", "vision tower", "with its pooling head");
}

// The activation a Hugging Face config names, for the forward.
Act act_of(const ModelConfigFile& m, const std::string& path) {
    switch (activation_of(m)) {
        case ActKind::GeluErf: return Act::Gelu;
        case ActKind::GeluTanh: return Act::GeluTanh;
        case ActKind::QuickGelu: return Act::QuickGelu;
        default: break;
    }
    throw FileError(path + ": hidden_act '" + m.hidden_act.value_or("") + "' is not an activation of a ViT MLP ViTScope runs "
                           "(gelu, gelu_pytorch_tanh, quick_gelu)");
}

// Preprocessing from preprocessor_config.json (Hugging Face), timm's pretrained_cfg or open_clip's
// preprocess_cfg, over the family's defaults. What cannot be followed goes to `notes`.
void apply_preprocess(const PreprocessConfig& p, ConfigKind from, Config& c, std::vector<std::string>& notes) {
    auto channels = [&](const std::optional<std::vector<float>>& v, const char* label, std::vector<float>& dst) {
        if (!v) return;
        if (v->size() == size_t(c.channels)) dst = *v;
        else notes.push_back(std::string(label) + " is not " + std::to_string(c.channels) + " numbers");
    };
    const bool hf = from == ConfigKind::HuggingFace;
    channels(p.mean, hf ? "image_mean" : from == ConfigKind::Timm ? "pretrained_cfg.mean" : "preprocess_cfg.mean", c.pre.mean);
    channels(p.std, hf ? "image_std" : from == ConfigKind::Timm ? "pretrained_cfg.std" : "preprocess_cfg.std", c.pre.std);
    const std::string used = c.pre.interp == Interp::Bicubic ? "bicubic" : "bilinear";
    if (p.resample) {
        if (*p.resample == "bicubic") c.pre.interp = Interp::Bicubic;
        else if (*p.resample == "bilinear") c.pre.interp = Interp::Bilinear;
        else if (hf) {
            static const char* pil[] = {"nearest", "lanczos", "bilinear", "bicubic", "box", "hamming"};
            int code = 0;
            for (int i = 0; i < 6; ++i) if (*p.resample == pil[i]) code = i;
            notes.push_back("resample " + std::to_string(code) + " (PIL " + *p.resample + ") is not available: " + used + " used");
        } else {
            notes.push_back("interpolation '" + *p.resample + "' is not available: " + used + " used");
        }
    }
    if (from == ConfigKind::Timm) {
        if (p.crop_pct) {
            const std::string mode = p.crop_mode.value_or("center");
            if (mode == "center" || mode == "squash") {
                c.pre.resize = int(std::floor(c.image_size / *p.crop_pct));  // timm: scale_size = floor(img_size / crop_pct)
                c.pre.squash = mode == "squash";
            } else {
                notes.push_back("crop_pct " + num(*p.crop_pct) + " with crop_mode '" + mode + "' is not available");
            }
        }
        if (p.input_height && (*p.input_height != c.image_size || *p.input_width != c.image_size))
            notes.push_back("input_size " + std::to_string(*p.input_height) + "x" + std::to_string(*p.input_width) +
                            " is not the model's " + std::to_string(c.image_size) + " pixels: " + std::to_string(c.image_size) + " used");
        return;
    }
    if (from == ConfigKind::OpenClip) {
        const std::string mode = p.resize_mode.value_or("shortest");
        if (mode == "shortest") { c.pre.resize = c.image_size; c.pre.squash = false; }
        else if (mode == "squash") { c.pre.resize = 0; c.pre.squash = true; }
        else notes.push_back("resize_mode '" + mode + "' is not available: the shorter side resized, then a centre crop");
        if (p.input_height && (*p.input_height != c.image_size || *p.input_width != c.image_size))
            notes.push_back("size " + std::to_string(*p.input_height) + "x" + std::to_string(*p.input_width) +
                            " is not the model's " + std::to_string(c.image_size) + " pixels");
        return;
    }
    // Hugging Face image processors: resize (shorter side, or to height x width), then an optional centre crop.
    const bool do_resize = p.do_resize.value_or(true), do_crop = p.do_center_crop.value_or(false);
    int size = 0;
    bool shortest = false;
    if (p.shortest_edge) { size = *p.shortest_edge; shortest = true; }
    else if (p.resize_height) {
        if (*p.resize_height == *p.resize_width) size = *p.resize_height;
        else notes.push_back("size " + std::to_string(*p.resize_height) + "x" + std::to_string(*p.resize_width) + " is not a square");
    }
    int crop = 0;
    if (do_crop && p.crop_height) {
        if (*p.crop_height == *p.crop_width) crop = *p.crop_height;
        else notes.push_back("crop_size " + std::to_string(*p.crop_height) + "x" + std::to_string(*p.crop_width) + " is not a square");
    }
    if (do_crop && crop && crop != c.image_size) {
        notes.push_back("crop_size " + std::to_string(crop) + " is not the model's " + std::to_string(c.image_size));
    } else if (do_resize && size) {
        if (do_crop) {  // resize (shorter side, or to a square), then centre-crop to the model's size
            c.pre.squash = !shortest;
            c.pre.resize = size;
        } else if (!shortest && size == c.image_size) {
            c.pre.squash = true;  // straight to the model's square, aspect not kept
            c.pre.resize = 0;
        } else {
            notes.push_back("resizing to " + std::to_string(size) + (shortest ? " (shorter side)" : "") +
                            " without a crop does not give the model's " + std::to_string(c.image_size) + " pixels");
        }
    }
    if (!p.do_normalize.value_or(true)) notes.push_back("do_normalize is false: mean and std are applied anyway");
    if (p.rescale_factor && std::fabs(*p.rescale_factor - 1 / 255.0) > 1e-9)
        notes.push_back("rescale_factor " + num(*p.rescale_factor) + " is not 1/255");
}

const std::vector<float> kImagenetMean{0.485f, 0.456f, 0.406f}, kImagenetStd{0.229f, 0.224f, 0.225f};
const std::vector<float> kOpenaiMean{0.48145466f, 0.4578275f, 0.40821073f}, kOpenaiStd{0.26862954f, 0.26130258f, 0.27577711f};

// Each family's published preprocessing, used when no config file says otherwise.
void default_preprocess(const Plan& p, Config& c) {
    auto set = [&](const std::vector<float>& m, const std::vector<float>& s, int resize, bool squash, Interp in) {
        c.pre.mean = m; c.pre.std = s; c.pre.resize = resize; c.pre.squash = squash; c.pre.interp = in;
    };
    const int crop875 = int(std::floor(c.image_size / 0.875));  // resize 256, crop 224 (timm crop_pct 0.875)
    const std::vector<float> half{0.5f, 0.5f, 0.5f};
    switch (c.family) {
        case ModelFamily::ViT:
            if (p.kind == Kind::Torchvision) set(kImagenetMean, kImagenetStd, c.image_size * 256 / 224, false, Interp::Bilinear);
            else if (p.kind == Kind::HfVit) set(half, half, 0, true, Interp::Bilinear);  // ViTImageProcessor: straight to 224 x 224
            else set(half, half, int(std::floor(c.image_size / 0.9)), false, Interp::Bicubic);  // timm augreg: crop_pct 0.9
            break;
        case ModelFamily::DeiT: set(kImagenetMean, kImagenetStd, crop875, p.kind == Kind::HfVit, Interp::Bicubic); break;
        case ModelFamily::Dinov3:
            // dinov3 make_classification_eval_transform: resize 256, crop 224, bicubic; transformers'
            // DINOv3ViTImageProcessorFast: straight to 224 x 224, bilinear
            // (timm's vit_*_dinov3 pretrained_cfg: crop_pct 1.0, bicubic)
            if (p.layout == Family::HuggingFace) set(kImagenetMean, kImagenetStd, 0, true, Interp::Bilinear);
            else if (p.layout == Family::Timm) set(kImagenetMean, kImagenetStd, c.image_size, false, Interp::Bicubic);
            else set(kImagenetMean, kImagenetStd, crop875, false, Interp::Bicubic);
            break;
        case ModelFamily::Dino:
        case ModelFamily::Mae: set(kImagenetMean, kImagenetStd, crop875, false, Interp::Bicubic); break;
        case ModelFamily::Dinov2:  // dinov2 eval: resize 256, crop 224; timm's DINOv2: crop_pct 1.0
            set(kImagenetMean, kImagenetStd, p.kind == Kind::Timm && p.layout == Family::Timm ? c.image_size : crop875, false,
                Interp::Bicubic);
            break;
        case ModelFamily::Clip: set(kOpenaiMean, kOpenaiStd, c.image_size, false, Interp::Bicubic); break;
        // timm's aimv2_*.apple_pt pretrained_cfg (and Apple's hub processor): OpenAI CLIP's mean and std, crop_pct 1.0
        case ModelFamily::Aimv2: set(kOpenaiMean, kOpenaiStd, c.image_size, false, Interp::Bicubic); break;
        // timm's eva02_* pretrained_cfg: OpenAI CLIP's mean and std, bicubic; crop_pct 0.9 at 224 px (the MIM models),
        // 1.0 at 336 and 448 (the fine-tuned classifiers)
        case ModelFamily::Eva02:
            set(kOpenaiMean, kOpenaiStd, c.image_size >= 336 ? c.image_size : int(std::floor(c.image_size / 0.9)), false,
                Interp::Bicubic);
            break;
        case ModelFamily::Siglip: set(half, half, 0, true, Interp::Bicubic); break;
        // timm's _pe_cfg: mean and std 0.5, crop_pct 1.0, bicubic
        case ModelFamily::Pe: set(half, half, c.image_size, false, Interp::Bicubic); break;
    }
    if (c.channels == 1) {
        c.pre.mean.resize(1);
        c.pre.std.resize(1);
    }
}

int meta_int(const Meta& meta, const char* k, const std::string& what) {
    auto it = meta.find(k);
    if (it == meta.end()) return 0;
    const std::string& v = it->second;
    char* end = nullptr;
    errno = 0;
    long x = v.empty() ? 0 : std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end || errno || x < 1 || x > kMaxWidth)
        throw FileError(what + ": __metadata__ " + k + " is '" + v.substr(0, 40) + "', not an integer in 1.." + std::to_string(kMaxWidth));
    return int(x);
}

// The tensor of a canonical parameter's first source key, or a FileError naming the key.
const Array& need(const Keys& k, const Src& s, const std::string& what, const char* role) {
    if (s.keys.empty()) throw FileError(what + ": no " + role);
    if (const Array* a = k.get(s.keys[0])) return *a;
    if (auto d = k.dtypes.find(s.keys[0]); d != k.dtypes.end())
        throw FileError(what + ": tensor '" + s.keys[0] + "' has dtype " + d->second + "; only F32, F16, BF16 and F64 weights are supported");
    throw FileError(what + ": missing " + s.keys[0] + " (" + role + ")");
}
int dim_of(const Array& t, const std::string& key, size_t axis, const std::string& what) {
    if (t.dimension() <= axis)
        throw FileError(what + ": " + key + " has shape " + shape_str_of(t) + ", expected at least " + std::to_string(axis + 1) +
                        " dimension(s)");
    if (t.shape(axis) > size_t(INT32_MAX)) throw FileError(what + ": " + key + " has shape " + shape_str_of(t) + ": dimension too large");
    return int(t.shape(axis));
}

}  // namespace layouts_detail
}  // namespace vit
