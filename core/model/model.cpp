#include "core/model/model.h"

#include "core/model/stages.h"
#include "core/kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>
#include <stdexcept>
#include <xtensor/xbuilder.hpp>

namespace vit {

const char* family_label(ModelFamily f) {
    switch (f) {
        case ModelFamily::ViT: return "ViT";
        case ModelFamily::DeiT: return "DeiT";
        case ModelFamily::Dino: return "DINO";
        case ModelFamily::Dinov2: return "DINOv2";
        case ModelFamily::Clip: return "CLIP";
        case ModelFamily::Siglip: return "SigLIP";
        case ModelFamily::Mae: return "MAE";
        case ModelFamily::Dinov3: return "DINOv3";
        case ModelFamily::Aimv2: return "AIMv2";
        case ModelFamily::Eva02: return "EVA-02";
        case ModelFamily::Pe: return "PE";
    }
    return "?";
}

const char* norm_label(Norm n) { return n == Norm::RmsNorm ? "RMSNorm" : "LayerNorm"; }

const char* act_label(Act a) {
    switch (a) {
        case Act::Gelu: return "GELU";
        case Act::QuickGelu: return "QuickGELU";
        case Act::GeluTanh: return "GELU (tanh)";
        case Act::SwiGlu: return "SwiGLU";
    }
    return "?";
}

const char* pos_rule_label(PosRule r) {
    switch (r) {
        case PosRule::Timm: return "timm resample_abs_pos_embed (bicubic, antialias)";
        case PosRule::Dino: return "DINO interpolate_pos_encoding (bicubic, scale factor with offset 0.1)";
        case PosRule::Dinov2: return "DINOv2 interpolate_pos_encoding (bicubic, scale factor with offset 0.1)";
        case PosRule::Dinov2Reg: return "DINOv2 with registers interpolate_pos_encoding (bicubic, antialias)";
        case PosRule::Hf: return "Hugging Face interpolate_pos_encoding (bicubic)";
        case PosRule::HfAntialias: return "Hugging Face interpolate_pos_encoding (bicubic, antialias)";
        case PosRule::OpenClip: return "open_clip resize_pos_embed (bicubic, antialias)";
        case PosRule::Mae: return "MAE interpolate_pos_embed (bicubic)";
    }
    return "?";
}

namespace {
// Floats one traced forward pass records with T tokens (per block: ~16 (T, D) stages,
// scores + pattern (H, T, T), fc1 and the activation (T, M)).
double D_of(const Config& c) { return c.width; }
double block_floats(const Config& c, double T) {
    const double D = c.width, H = c.heads, M = c.mlp_in();
    return 16 * T * D + 2 * H * T * T + 2 * T * M;
}
double trace_floats(const Config& c, double T) { return c.depth * block_floats(c, T) + 6 * T * D_of(c); }
}  // namespace

RunDims run_dims(const Config& c, const Options& o) {
    RunDims r;
    r.img_h = o.image_h > 0 ? o.image_h : c.image_size;
    r.img_w = o.image_w > 0 ? o.image_w : c.image_size;
    const std::string size = std::to_string(r.img_h) + "x" + std::to_string(r.img_w);
    if (r.img_h % c.patch || r.img_w % c.patch)
        throw std::invalid_argument("input size " + size + " is not a multiple of the patch size " +
                                    std::to_string(c.patch));
    if (r.img_h < c.patch || r.img_w < c.patch || r.img_h > kMaxImageSize || r.img_w > kMaxImageSize)
        throw std::invalid_argument("input size " + size + " is outside " + std::to_string(c.patch) + ".." +
                                    std::to_string(kMaxImageSize) + " per side");
    if (o.pooling && *o.pooling != c.pooling &&
        !((c.pooling == Pooling::Cls || c.pooling == Pooling::Mean) && c.cls_token &&
          (*o.pooling == Pooling::Cls || *o.pooling == Pooling::Mean) && c.head != Head::Projection &&
          c.head != Head::Distilled))  // DeiT's two heads read the cls and dist rows themselves
        throw std::invalid_argument(std::string("pooling ") + pooling_name(*o.pooling) + " does not apply to this model (" +
                                    family_label(c.family) + ", pooling " + pooling_name(c.pooling) +
                                    "): the pooling switch is for ViT classifiers with a cls token, between cls and mean");
    r.gh = r.img_h / c.patch;
    r.gw = r.img_w / c.patch;
    r.N = r.gh * r.gw;
    r.prefix = c.prefix_tokens();
    r.T0 = int(c.cls_token) + int(c.dist_token) + r.N;
    r.resized = c.pos_table && (r.gh != c.stored_grid() || r.gw != c.stored_grid());
    // Interventions must name parts the model has.
    const Interventions& iv = o.iv;
    for (const HeadAblation& h : iv.heads)
        if (h.layer < 0 || h.layer >= c.depth || h.head < 0 || h.head >= c.heads)
            throw std::invalid_argument("head ablation " + head_label(h.layer, h.head) +
                                        " is outside the model (blocks 0.." + std::to_string(c.depth - 1) +
                                        ", heads 0.." + std::to_string(c.heads - 1) + ")");
    for (size_t i = 0; i < iv.heads.size(); ++i)
        for (size_t j = 0; j < i; ++j)
            if (iv.heads[i].layer == iv.heads[j].layer && iv.heads[i].head == iv.heads[j].head)
                throw std::invalid_argument("head " + head_label(iv.heads[i].layer, iv.heads[i].head) + " is ablated twice");
    for (size_t i = 0; i < iv.sublayers.size(); ++i) {
        const SublayerAblation& s = iv.sublayers[i];
        if (s.layer < 0 || s.layer >= c.depth)
            throw std::invalid_argument("ablation of block " + std::to_string(s.layer) + " is outside the model (blocks 0.." +
                                        std::to_string(c.depth - 1) + ")");
        for (size_t j = 0; j < i; ++j)
            if (iv.sublayers[j] == s)
                throw std::invalid_argument(stage_name(StageId{s.mlp ? StageKind::MlpOut : StageKind::AttnOut, s.layer}) +
                                            " is ablated twice");
    }
    if (iv.patch) {
        const ActivationPatch& p = *iv.patch;
        const StageDef& def = stage_def(p.stage.kind);
        std::string points;
        for (const StageDef& d : stage_defs())
            if (d.patchable) points += (points.empty() ? "" : ", ") + std::string(d.pattern);
        if (!def.patchable)
            throw std::invalid_argument("stage " + stage_name(p.stage) + " cannot be patched (the patch points are " +
                                        points + ")");
        if (def.block ? p.stage.layer < 0 || p.stage.layer >= c.depth : p.stage.layer != -1)
            throw std::invalid_argument("stage " + stage_name(p.stage) + " is outside the model (blocks 0.." +
                                        std::to_string(c.depth - 1) + ")");
        for (size_t i = 0; i < p.tokens.size(); ++i)
            if (p.tokens[i] < 0 || (i && p.tokens[i] <= p.tokens[i - 1]))
                throw std::invalid_argument("patched token " + std::to_string(p.tokens[i]) +
                                            ": token indices must be 0 or more, in increasing order, each once");
    }
    r.kept.clear();
    size_t di = 0;
    for (size_t i = 0; i < iv.dropped.size(); ++i)
        if (iv.dropped[i] < 0 || iv.dropped[i] >= r.N || (i && iv.dropped[i] <= iv.dropped[i - 1]))
            throw std::invalid_argument("dropped patch " + std::to_string(iv.dropped[i]) + " is not one of the patches 0.." +
                                        std::to_string(r.N - 1) + " (in increasing order, each once)");
    for (int p = 0; p < r.N; ++p) {
        if (di < iv.dropped.size() && iv.dropped[di] == p) { ++di; continue; }
        r.kept.push_back(p);
    }
    if (r.kept.empty()) throw std::invalid_argument("every patch is dropped: nothing is left to run on");
    r.T = r.prefix + int(r.kept.size());
    // What a pass holds at least: the stages on demand (the residual stream of every block, the
    // stages outside the blocks, one block's stages). A full trace (every stage recorded) is
    // checked against the same limit by the pass that records it (forward_batch).
    r.full_floats = trace_floats(c, r.T);
    const double held = c.depth * double(r.T) * c.width + block_floats(c, r.T) + 6.0 * r.T * c.width;
    if (held > kMaxTraceFloats) {
        char m[200];
        std::snprintf(m, sizeof m, "a pass at %s holds %.3g GB even with its stages on demand, over the limit of %.3g GB",
                      size.c_str(), held * 4 / 1e9, kMaxTraceFloats * 4 / 1e9);
        throw std::invalid_argument(m);
    }
    return r;
}

void Config::validate() const {
    auto bad = [](const std::string& m) { throw std::invalid_argument("invalid config: " + m); };
    if (image_size <= 0 || image_size > 4096) bad("image_size must be in 1..4096");
    if (channels != 1 && channels != 3) bad("channels must be 1 or 3");
    if (patch <= 0 || patch > image_size) bad("patch must be in 1..image_size");
    if (image_size % patch) bad("image_size " + std::to_string(image_size) +
                                " is not a multiple of patch " + std::to_string(patch));
    if (width <= 0 || depth < 0 || heads <= 0 || mlp <= 0 || classes <= 0)
        bad("width, heads, mlp and classes must be positive, depth non-negative");
    if (width > kMaxWidth || depth > kMaxLayers || heads > width || mlp > kMaxMlp || classes > kMaxClasses)
        bad("width " + std::to_string(width) + ", depth " + std::to_string(depth) + ", heads " + std::to_string(heads) +
            ", mlp " + std::to_string(mlp) + " or classes " + std::to_string(classes) + " over the limits (width " +
            std::to_string(kMaxWidth) + ", depth " + std::to_string(kMaxLayers) + ", heads <= width, mlp " +
            std::to_string(kMaxMlp) + ", classes " + std::to_string(kMaxClasses) + ")");
    if (pre.resize < 0 || pre.resize > kMaxResize) bad("resize must be in 0.." + std::to_string(kMaxResize));
    for (size_t i = 0; i < class_names.size(); ++i)
        if (class_names[i].size() > kMaxClassNameBytes)
            bad("class name " + std::to_string(i) + " is " + std::to_string(class_names[i].size()) + " bytes, more than the " +
                std::to_string(kMaxClassNameBytes) + " a class name may have");
    // The family's parts must fit together.
    if (registers < 0 || registers > 256) bad("registers must be in 0..256");
    if (dist_token && !cls_token) bad("a distillation token needs a cls token");
    if (dist_token != (head == Head::Distilled)) bad("a distillation token goes with the distilled head, and only with it");
    if (head == Head::Projection && (embed_dim <= 0 || embed_dim > kMaxWidth))
        bad("a projection head needs embed_dim in 1.." + std::to_string(kMaxWidth));
    if (!cls_token && (pooling == Pooling::Cls || pooling == Pooling::ClsThenNorm))
        bad("a model without a cls token cannot pool it (pooling must be mean or map)");
    if (pooling == Pooling::Map && has_logits()) bad("attention pooling (map) has no classifier here");
    if (pos_grid < 0 || pos_grid > kMaxImageSize) bad("pos_grid must be in 0.." + std::to_string(kMaxImageSize));
    if (!pos_table && !rope) bad("a model without a position table needs RoPE (rope true): nothing would tell the patches apart");
    if (rope && (width % heads || (width / heads) % 4))
        bad("RoPE needs a head dimension divisible by 4 (width " + std::to_string(width) + ", heads " +
            std::to_string(heads) + ")");
    if (rope && (!(rope_base > 1.f) || !std::isfinite(rope_base) || rope_base > 1e9f))
        bad("rope_base must be a finite number over 1");
    if (rope_ref_grid < 0 || rope_ref_grid > kMaxImageSize) bad("rope_ref_grid must be in 0.." + std::to_string(kMaxImageSize));
    if (map_heads < 0 || map_heads > kMaxWidth) bad("map_heads must be in 0.." + std::to_string(kMaxWidth));
    if (map_heads && pooling != Pooling::Map) bad("map_heads is the attention-pooling head's (pooling map)");
    if (pooling == Pooling::Map && width % pool_heads())
        bad("the attention-pooling head's " + std::to_string(pool_heads()) + " heads do not divide width " + std::to_string(width));
    // The resize is the crop's surround: at least the crop (torchvision's CenterCrop would
    // pad a smaller one) and at most twice it (crop_pct 0.5; published models use 0.875-1).
    // Every image is resized to it before the crop, so it is tied to image_size here.
    if (pre.resize != 0 && (pre.resize < image_size || pre.resize > 2 * image_size))
        bad("field 'resize' is " + std::to_string(pre.resize) + "; with image_size " + std::to_string(image_size) +
            " it must be 0 (resize to image_size) or in " + std::to_string(image_size) + ".." +
            std::to_string(2 * image_size) + " (the centre crop keeps image_size of it)");
    // Parameters and the floats a pass holds at the native size with its stages on demand (the
    // residual stream of every block, one block's stages; run_dims says the same per run).
    const double T = tokens();
    const double params = double(param_count(*this));
    const double trace = depth * T * width + block_floats(*this, T) + 6 * T * width;
    if (params > kMaxParams || trace > kMaxTraceFloats) {
        char m[200];
        std::snprintf(m, sizeof m, "%.3g parameters and %.3g GB for a pass are over the limits (%.3g parameters, %.3g GB)",
                      params, trace * 4 / 1e9, kMaxParams, kMaxTraceFloats * 4 / 1e9);
        bad(m);
    }
    // the norms ViTScope has: an RMSNorm at ln1, ln2, the final norm and on the patch embeddings (AIMv2); a LayerNorm
    // everywhere else. A model that would need another (RMSNorm with ln_pre or SigLIP's pooling head, a LayerNorm on
    // the patch embeddings) is refused rather than run with a norm it does not have.
    if (norm == Norm::RmsNorm && ln_pre) bad("norm rms_norm with ln_pre: an RMSNorm before the blocks is not implemented");
    if (norm == Norm::RmsNorm && pooling == Pooling::Map)
        bad("norm rms_norm with the attention-pooling head (pooling map): its LayerNorm would not be an RMSNorm");
    if (patch_norm && norm != Norm::RmsNorm) bad("patch_norm with norm layer_norm: a LayerNorm on the patch embeddings is not implemented");
    if (mlp_norm && norm != Norm::LayerNorm) bad("mlp_norm with norm rms_norm: an RMSNorm inside the MLP is not implemented");
    if (width % heads) bad("width " + std::to_string(width) + " is not divisible by heads " +
                           std::to_string(heads));
    if (!(eps > 0) || !std::isfinite(eps)) bad("eps must be positive and finite");
    if (pre.mean.size() != size_t(channels) || pre.std.size() != size_t(channels))
        bad("preprocessing mean/std must have one value per channel");
    for (float s : pre.std)
        if (!(s > 0) || !std::isfinite(s)) bad("preprocessing std must be positive and finite");
    for (float m : pre.mean)
        if (!std::isfinite(m)) bad("preprocessing mean must be finite");
    if (!class_names.empty() && class_names.size() != size_t(classes))
        bad(std::to_string(class_names.size()) + " class names for " + std::to_string(classes) +
            " classes");
}

std::string Config::describe() const {
    std::ostringstream o;
    o << name << ": image " << image_size << "x" << image_size << "x" << channels << ", patch "
      << patch << " (" << grid() << "x" << grid() << " = " << patches() << " patches, "
      << tokens() << " tokens), width " << width << ", depth " << depth << ", heads " << heads
      << " (d=" << head_dim() << "), mlp " << mlp;
    if (has_logits()) o << ", classes " << classes;  // a model without a classifier has no classes to count
    o << ", eps " << eps << ", pooling " << pooling_name(pooling);
    // a ViT with any part beyond the vanilla one (timm's reg4_gap: no cls token, registers, layer scale)
    // says its parts as the other families do
    const bool vanilla = cls_token && !dist_token && !registers && !layer_scale && !ln_pre && patch_bias &&
                         act == Act::Gelu && head == Head::Classifier && pos_table && !rope && norm == Norm::LayerNorm &&
                         qkv_bias && proj_bias && !patch_norm && !mlp_norm;
    if (family != ModelFamily::ViT || !vanilla) {
        o << ", family " << family_label(family) << " (";
        std::string parts;
        auto add = [&](const std::string& s) { parts += (parts.empty() ? "" : ", ") + s; };
        if (!cls_token) add("no cls token");
        if (dist_token) add("distillation token");
        if (registers) add(std::to_string(registers) + (family == ModelFamily::Dinov3 ? " storage tokens" : " registers"));
        if (!pos_table) add("no position table");
        if (rope && rope_kind != RopeKind::Dinov3)
            add(std::string("RoPE (") + (rope_kind == RopeKind::Eva ? "EVA-02's" : "PE's: grid offset 1, column first") +
                ", reference grid " + std::to_string(rope_ref_grid > 0 ? rope_ref_grid : grid()) + ")");
        else if (rope) add("RoPE (axial, base " + std::to_string(int(rope_base)) + ")");
        if (layer_scale) add("layer scale");
        if (ln_pre) add("ln_pre");
        if (!patch_bias) add("patch conv without bias");
        if (norm != Norm::LayerNorm) add(norm_label(norm));
        if (patch_norm) add("a norm on the patch embeddings");
        if (mlp_norm) add("a LayerNorm inside the MLP");
        if (map_heads) add("attention pooling with " + std::to_string(map_heads) + " heads");
        if (!qkv_bias && !proj_bias) add("no biases in the blocks");
        else if (!qkv_bias) add("q/k/v without bias");
        else if (!proj_bias) add("attn.proj and MLP without biases");
        add(act_label(act));
        add(head == Head::Classifier ? "classifier" : head == Head::Distilled ? "two heads averaged"
            : head == Head::Projection ? "projection to " + std::to_string(embed_dim) : "embedding output");
        if (pos_table && stored_grid() != grid()) add("position grid " + std::to_string(stored_grid()) + "x" + std::to_string(stored_grid()));
        o << parts << ")";
    }
    return o.str();
}

namespace {
Config make(const std::string& name, int img, int ch, int p, int d, int l, int h, int m, int k) {
    Config c;
    c.name = name; c.image_size = img; c.channels = ch; c.patch = p; c.width = d; c.depth = l;
    c.heads = h; c.mlp = m; c.classes = k;
    if (ch == 1) { c.pre.mean = {0.5f}; c.pre.std = {0.5f}; }
    return c;
}
}  // namespace

std::vector<std::string> preset_names() {
    return {"toy-rgb8", "toy-gray4", "vit-ti16", "vit-s16", "vit-b16", "vit-b32", "vit-l16", "vit-l32", "vit-h14", "fmnist",
            "deit-ti16-distilled", "deit-s16-distilled", "deit-b16-distilled", "dino-s16", "dino-b16", "dinov2-s14",
            "dinov2-s14-reg", "dinov2-b14", "dinov2-b14-reg", "clip-b32", "clip-b16", "clip-l14", "siglip-b16",
            "mae-b16", "vit-betwixt16-reg4-gap", "dinov3-s16", "aimv2-l14", "eva02-s14", "eva02-b14", "pe-core-t16"};
}

// Checked against torchvision/models/vision_transformer.py (vit_b_16 ... vit_h_14:
// patch, num_layers, num_heads, hidden_dim, mlp_dim; image_size 224) and timm's
// vision_transformer.py (vit_*_patch*_224: patch_size, embed_dim, depth, num_heads,
// mlp_ratio 4).
const std::vector<PresetAlias>& preset_aliases() {
    static const std::vector<PresetAlias> v = {
        {"vit_b_16", "vit-b16", "torchvision"},
        {"vit_b_32", "vit-b32", "torchvision"},
        {"vit_l_16", "vit-l16", "torchvision"},
        {"vit_l_32", "vit-l32", "torchvision"},
        {"vit_h_14", "vit-h14", "torchvision"},
        {"vit_tiny_patch16_224", "vit-ti16", "timm"},
        {"vit_small_patch16_224", "vit-s16", "timm"},
        {"vit_base_patch16_224", "vit-b16", "timm"},
        {"vit_base_patch32_224", "vit-b32", "timm"},
        {"vit_large_patch16_224", "vit-l16", "timm"},
        {"vit_large_patch32_224", "vit-l32", "timm"},
        {"vit_huge_patch14_224", "vit-h14", "timm"},
    };
    return v;
}

bool is_preset(const std::string& n) {
    for (auto& p : preset_names()) if (p == n) return true;
    for (auto& a : preset_aliases()) if (a.alias == n) return true;
    return false;
}

Config preset(const std::string& n) {
    for (auto& a : preset_aliases()) {
        if (a.alias != n) continue;
        // The family's name brings the family's preprocessing (README, "Models").
        Config c = preset(a.preset);
        c.name = a.alias;
        if (std::string(a.family) == "torchvision") {
            c.pre.mean = {0.485f, 0.456f, 0.406f}; c.pre.std = {0.229f, 0.224f, 0.225f};
            c.pre.resize = 256; c.pre.interp = Interp::Bilinear;
        } else {
            c.pre.mean = {0.5f, 0.5f, 0.5f}; c.pre.std = {0.5f, 0.5f, 0.5f};
            c.pre.resize = 248; c.pre.interp = Interp::Bicubic;
        }
        return c;
    }
    // Seed 000: an 8x8 RGB image, 4x4 patches, embedding width 6.
    if (n == "toy-rgb8") return make(n, 8, 3, 4, 6, 1, 2, 24, 10);
    // Seed 001: a 4x4 grayscale image, 2x2 patches, embedding width 8.
    if (n == "toy-gray4") {
        Config c = make(n, 4, 1, 2, 8, 1, 2, 32, 10);
        c.pre.mean = {0.f}; c.pre.std = {1.f};  // the seed feeds raw arange values
        return c;
    }
    if (n == "vit-ti16") return make(n, 224, 3, 16, 192, 12, 3, 768, 1000);
    if (n == "vit-s16") return make(n, 224, 3, 16, 384, 12, 6, 1536, 1000);
    if (n == "vit-b16") return make(n, 224, 3, 16, 768, 12, 12, 3072, 1000);
    if (n == "vit-b32") return make(n, 224, 3, 32, 768, 12, 12, 3072, 1000);
    if (n == "vit-l16") return make(n, 224, 3, 16, 1024, 24, 16, 4096, 1000);
    if (n == "vit-l32") return make(n, 224, 3, 32, 1024, 24, 16, 4096, 1000);
    if (n == "vit-h14") return make(n, 224, 3, 14, 1280, 32, 16, 5120, 1000);
    // The families' standard shapes (random weights), from their upstream configs:
    // timm deit_*_distilled_patch16_224, facebookresearch/dino dino_vits16/vitb16, dinov2 vits14/vitb14
    // (_reg: 4 registers; position table 37x37 from 518 px, run at 224 as their eval transform),
    // openai/CLIP ViT-B/32, B/16, L/14, google/siglip-base-patch16-224, facebookresearch/mae vit_base.
    const std::vector<float> imagenet_mean{0.485f, 0.456f, 0.406f}, imagenet_std{0.229f, 0.224f, 0.225f};
    auto imagenet = [&](Config& c, int resize, Interp in) {
        c.pre.mean = imagenet_mean; c.pre.std = imagenet_std; c.pre.resize = resize; c.pre.interp = in;
    };
    if (n.rfind("deit-", 0) == 0) {
        Config c = n == "deit-ti16-distilled" ? make(n, 224, 3, 16, 192, 12, 3, 768, 1000)
                   : n == "deit-s16-distilled" ? make(n, 224, 3, 16, 384, 12, 6, 1536, 1000)
                   : n == "deit-b16-distilled" ? make(n, 224, 3, 16, 768, 12, 12, 3072, 1000) : Config{};
        if (c.name == n) {
            c.family = ModelFamily::DeiT; c.dist_token = true; c.head = Head::Distilled;
            imagenet(c, 256, Interp::Bicubic);
            return c;
        }
    }
    if (n == "dino-s16" || n == "dino-b16") {
        Config c = n == "dino-s16" ? make(n, 224, 3, 16, 384, 12, 6, 1536, 1000) : make(n, 224, 3, 16, 768, 12, 12, 3072, 1000);
        c.family = ModelFamily::Dino; c.head = Head::Identity; c.pos_rule = PosRule::Dino;
        imagenet(c, 256, Interp::Bicubic);
        return c;
    }
    if (n.rfind("dinov2-", 0) == 0 && (n.find("s14") != std::string::npos || n.find("b14") != std::string::npos) &&
        (n.size() == 10 || n.substr(10) == "-reg")) {
        const bool small = n.find("s14") != std::string::npos, reg = n.size() > 10;
        Config c = small ? make(n, 224, 3, 14, 384, 12, 6, 1536, 1000) : make(n, 224, 3, 14, 768, 12, 12, 3072, 1000);
        c.family = ModelFamily::Dinov2; c.head = Head::Identity; c.layer_scale = true; c.pos_grid = 37;
        c.registers = reg ? 4 : 0;
        c.pos_rule = reg ? PosRule::Dinov2Reg : PosRule::Dinov2;
        imagenet(c, 256, Interp::Bicubic);
        return c;
    }
    if (n == "clip-b32" || n == "clip-b16" || n == "clip-l14") {
        Config c = n == "clip-b32" ? make(n, 224, 3, 32, 768, 12, 12, 3072, 1000)
                   : n == "clip-b16" ? make(n, 224, 3, 16, 768, 12, 12, 3072, 1000)
                                     : make(n, 224, 3, 14, 1024, 24, 16, 4096, 1000);
        c.family = ModelFamily::Clip; c.ln_pre = true; c.patch_bias = false; c.act = Act::QuickGelu; c.eps = 1e-5f;
        c.pooling = Pooling::ClsThenNorm; c.head = Head::Projection; c.embed_dim = n == "clip-l14" ? 768 : 512;
        c.pos_rule = PosRule::OpenClip;
        c.pre.mean = {0.48145466f, 0.4578275f, 0.40821073f}; c.pre.std = {0.26862954f, 0.26130258f, 0.27577711f};
        c.pre.resize = 224; c.pre.interp = Interp::Bicubic;
        return c;
    }
    if (n == "siglip-b16") {
        Config c = make(n, 224, 3, 16, 768, 12, 12, 3072, 1000);
        c.family = ModelFamily::Siglip; c.cls_token = false; c.pos_no_cls = true; c.act = Act::GeluTanh;
        c.pooling = Pooling::Map; c.head = Head::Identity; c.pos_rule = PosRule::Hf;
        c.pre.squash = true; c.pre.resize = 224; c.pre.interp = Interp::Bicubic;  // SiglipImageProcessor: 224x224
        return c;
    }
    if (n == "vit-betwixt16-reg4-gap") {
        // timm vit_betwixt_patch16_reg4_gap_256 (class_token=False, reg_tokens=4, no_embed_class=True,
        // global_pool='avg' with fc_norm, init_values=1e-5); its pretrained_cfg: 256 px, crop_pct 0.95
        // (resize floor(256 / 0.95) = 269), bicubic, mean = std = 0.5
        Config c = make(n, 256, 3, 16, 640, 12, 10, 2560, 1000);
        c.cls_token = false; c.registers = 4; c.pos_no_cls = true; c.layer_scale = true; c.pooling = Pooling::Mean;
        c.pre.resize = 269; c.pre.interp = Interp::Bicubic;
        return c;
    }
    if (n == "dinov3-s16") {
        // facebookresearch/dinov3 hub dinov3_vits16: patch 16, width 384, 6 heads, ffn_ratio 4, 4 storage
        // tokens, layer scale, LayerNorm eps 1e-5 ("layernormbf16"), RoPE base 100 and no position
        // table, the K third of the qkv bias masked (zero); its eval transform: 224 px, ImageNet mean/std
        Config c = make(n, 224, 3, 16, 384, 12, 6, 1536, 1000);
        c.family = ModelFamily::Dinov3; c.head = Head::Identity; c.layer_scale = true; c.registers = 4;
        c.eps = 1e-5f; c.pos_table = false; c.rope = true; c.rope_base = 100.f;
        imagenet(c, 256, Interp::Bicubic);
        return c;
    }
    if (n == "eva02-s14") {
        // timm eva02_small_patch14_224 (mim_in22k): patch 14, width 384, 12 blocks, 6 heads, SwiGLU of int(384 * 4 * 2/3)
        // = 1024 (packed, GluMlp), q/v biases without a K bias, the learned table and RoPE (ref_feat_shape 16x16,
        // temperature 10000, neighbouring dims paired), LayerNorm eps 1e-6, the mean of the patch tokens then fc_norm;
        // its pretrained_cfg: 224 px, crop_pct 0.9, bicubic, OpenAI CLIP's mean and std
        Config c = make(n, 224, 3, 14, 384, 12, 6, 1024, 1000);
        c.family = ModelFamily::Eva02; c.head = Head::Identity; c.act = Act::SwiGlu; c.pooling = Pooling::Mean;
        c.rope = true; c.rope_kind = RopeKind::Eva; c.rope_ref_grid = 16;
        c.pre.resize = 248; c.pre.interp = Interp::Bicubic;
        c.pre.mean = {0.48145466f, 0.4578275f, 0.40821073f}; c.pre.std = {0.26862954f, 0.26130258f, 0.27577711f};
        return c;
    }
    if (n == "eva02-b14") {
        // timm eva02_base_patch14_224 (mim_in22k): as eva02-s14 at width 768, 12 heads, SwiGLU of 2048 unpacked
        // (fc1_g, fc1_x) with a LayerNorm over its hidden units before fc2 (scale_mlp), q/k/v from three Linears
        // (qkv_fused=False: read into one product here)
        Config c = preset("eva02-s14");
        c.name = n; c.width = 768; c.heads = 12; c.mlp = 2048; c.mlp_norm = true;
        return c;
    }
    if (n == "pe-core-t16") {
        // timm vit_pe_core_tiny_patch16_384 (Meta's Perception Encoder PE-Core T/16): patch 16, width 192, 12 blocks,
        // 3 heads, MLP 768 (GELU), cls token and the learned table with its cls row, a LayerNorm before the blocks
        // (norm_pre; the patch conv without bias), RoPE beside the table (timm RotaryEmbeddingCat: ref_feat_shape 24x24,
        // grid_offset 1, 'xy' indexing, neighbouring dims paired), LayerNorm eps 1e-5, the final norm on every token then
        // the attention-pooling head (8 heads, MLP 4 x width) and the projection to 512 (timm: head, num_classes 512); its
        // pretrained_cfg: 384 px, crop_pct 1.0, bicubic, mean and std 0.5
        Config c = make(n, 384, 3, 16, 192, 12, 3, 768, 1000);
        c.family = ModelFamily::Pe; c.head = Head::Projection; c.embed_dim = 512; c.pooling = Pooling::Map; c.map_heads = 8;
        c.ln_pre = true; c.patch_bias = false; c.eps = 1e-5f;
        c.rope = true; c.rope_kind = RopeKind::Pe; c.rope_ref_grid = 24;
        c.pre.resize = 384; c.pre.interp = Interp::Bicubic;
        return c;
    }
    if (n == "aimv2-l14") {
        // timm aimv2_large_patch14_224 (apple/ml-aim aimv2_large): patch 14, width 1024, 24 blocks, 8 heads of 128,
        // SwiGLU of 2816, no cls token, RMSNorm eps 1e-5 (also on the patch embeddings), no biases in the blocks,
        // the final norm on every token then the mean (global_pool 'avg', fc_norm False); its pretrained_cfg:
        // 224 px, crop_pct 1.0, bicubic, OpenAI CLIP's mean and std
        Config c = make(n, 224, 3, 14, 1024, 24, 8, 2816, 1000);
        c.family = ModelFamily::Aimv2; c.head = Head::Identity; c.cls_token = false; c.pos_no_cls = true;
        c.pooling = Pooling::NormMean; c.act = Act::SwiGlu; c.norm = Norm::RmsNorm; c.patch_norm = true;
        c.qkv_bias = false; c.proj_bias = false; c.eps = 1e-5f;
        c.pre.resize = 224; c.pre.interp = Interp::Bicubic;
        c.pre.mean = {0.48145466f, 0.4578275f, 0.40821073f}; c.pre.std = {0.26862954f, 0.26130258f, 0.27577711f};
        return c;
    }
    if (n == "mae-b16") {
        Config c = make(n, 224, 3, 16, 768, 12, 12, 3072, 1000);
        c.family = ModelFamily::Mae; c.head = Head::Identity; c.pos_rule = PosRule::Mae;
        imagenet(c, 256, Interp::Bicubic);
        return c;
    }
    if (n == "scenes") {
        // The scenes model (core/io/scenes.h): 64x64 RGB scenes, 8x8 patches -> an 8x8 grid; the embedded model's
        // shapes (width 96, 6 heads of 16, MLP 192), so `train --scenes` starts from them.
        Config c = make(n, 64, 3, 8, 96, 6, 6, 192, 10);
        c.class_names = preset("fmnist").class_names;
        return c;
    }
    if (n == "fmnist") {
        // The embedded default: 28x28 grayscale, 4x4 patches -> a 7x7 grid.
        Config c = make(n, 28, 1, 4, 64, 6, 4, 128, 10);
        c.pre.mean = {0.2860f}; c.pre.std = {0.3530f};
        c.class_names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                         "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
        return c;
    }
    std::string all;
    for (auto& p : preset_names()) all += (all.empty() ? "" : ", ") + p;
    for (auto& a : preset_aliases()) all += std::string(", ") + a.alias;
    throw std::invalid_argument("unknown preset '" + n + "' (presets: " + all + ")");
}

int64_t param_count(const Config& c) {
    const int64_t D = c.width, M = c.mlp, Mi = c.mlp_in(), K = c.classes;
    int64_t embed = int64_t(c.patch_dim()) * D + (c.patch_bias ? D : 0) + int64_t(c.pos_rows()) * D;
    const int64_t norm = c.norm == Norm::RmsNorm ? D : 2 * D;  // RMSNorm: gamma alone
    embed += (int64_t(c.cls_token) + int64_t(c.dist_token) + c.registers) * D + (c.ln_pre ? norm : 0) +
             (c.patch_norm ? norm : 0);
    const int64_t pb = c.proj_bias ? 1 : 0;
    // (EVA-02 has q and v biases only: its K bias is a zero buffer, not a parameter)
    const int64_t qkv_biases = c.qkv_bias ? (c.family == ModelFamily::Eva02 ? 2 : 3) * D : 0;
    const int64_t block = 2 * norm + (3 * D * D + qkv_biases) + (D * D + pb * D) + (D * Mi + pb * Mi) +
                          (M * D + pb * D) + (c.layer_scale ? 2 * D : 0) + (c.mlp_norm ? 2 * M : 0);
    int64_t head = norm;  // the final norm
    if (c.has_logits()) head += (D * K + K) * (c.head == Head::Distilled ? 2 : 1);
    if (c.head == Head::Projection) head += D * int64_t(c.embed_dim);
    if (c.pooling == Pooling::Map) head += D + (3 * D * D + 3 * D) + (D * D + D) + 2 * D + (D * M + M) + (M * D + D);
    return embed + c.depth * block + head;
}

namespace {
// Calls f(plain, packed) for the four matrices of every block.
template <class W, class F>
void for_each_block_matrix(W& w, F&& f) {
    for (auto& b : w.blocks) {
        f(b.qkv_w, b.qkv_p);
        f(b.proj_w, b.proj_p);
        f(b.fc1_w, b.fc1_p);
        f(b.fc2_w, b.fc2_p);
    }
}
}  // namespace

void pack_blocks(Weights& w) {
    if (ops::use_openblas()) return;
    const double rows = double(w.cfg.tokens());
    for_each_block_matrix(w, [&](Tensor2& W, std::shared_ptr<const gemm::Matrix>& P) {
        if (P || W.size() == 0) return;
        const int O = int(W.shape(0)), I = int(W.shape(1));
        const double size = rows * I * O;
        // the rule of ops::linear: packing pays from ~1e6 multiply-adds, two threads from ~2e6
        if (size < 1e6) return;
        P = gemm::pack_matrix(W.data(), I, O, size >= 2e6 ? ops::threads() : 1, int(rows));
        W = Tensor2();  // the packed matrix is now the only copy
    });
}

void unpack_blocks(Weights& w) {
    for_each_block_matrix(w, [&](Tensor2& W, std::shared_ptr<const gemm::Matrix>& P) {
        if (!P) return;
        W = Tensor2::from_shape({size_t(gemm::rows(*P)), size_t(gemm::cols(*P))});
        gemm::unpack(*P, W.data());
        P.reset();
    });
}

bool blocks_packed(const Weights& w) {
    bool any = false;
    for_each_block_matrix(w, [&](const Tensor2&, const std::shared_ptr<const gemm::Matrix>& P) { any = any || P; });
    return any;
}

const Tensor2& plain_matrix(const Tensor2& plain, const std::shared_ptr<const gemm::Matrix>& p, Tensor2& tmp) {
    if (!p) return plain;
    tmp = Tensor2::from_shape({size_t(gemm::rows(*p)), size_t(gemm::cols(*p))});
    gemm::unpack(*p, tmp.data());
    return tmp;
}

Weights unpacked_copy(const Weights& w) {
    Weights c = w;
    unpack_blocks(c);
    return c;
}

size_t weights_bytes(const Weights& w) {
    size_t n = 0;
    for_each_param([&](const std::string&, const auto& t) { n += t.size() * sizeof(float); }, w);
    for_each_block_matrix(w, [&](const Tensor2&, const std::shared_ptr<const gemm::Matrix>& P) {
        if (P) n += gemm::bytes(*P);
    });
    return n;
}

std::vector<ArrayRef> param_refs(const Weights& w) {
    if (blocks_packed(w))
        throw std::logic_error("param_refs: the block matrices are packed (unpacked_copy the weights first)");
    std::vector<ArrayRef> v;
    for_each_param([&](const std::string& name, const auto& t) { v.push_back(array_ref(name, t)); }, w);
    return v;
}

size_t param_numel(const Weights& w) {
    size_t n = 0;
    for_each_param([&](const std::string&, const auto& t) { n += t.size(); }, w);
    for_each_block_matrix(w, [&](const Tensor2&, const std::shared_ptr<const gemm::Matrix>& P) {
        if (P) n += size_t(gemm::rows(*P)) * size_t(gemm::cols(*P));
    });
    return n;
}

Weights zeros_like(const Weights& w) {
    Weights z = w;
    for_each_block_matrix(z, [](Tensor2& W, std::shared_ptr<const gemm::Matrix>& P) {
        if (!P) return;
        W = Tensor2::from_shape({size_t(gemm::rows(*P)), size_t(gemm::cols(*P))});
        P.reset();
    });
    for_each_param([](const std::string&, auto& t) { t.fill(0.f); }, z);
    return z;
}

const char* pooling_name(Pooling p) {
    switch (p) {
        case Pooling::Cls: return "cls";
        case Pooling::Mean: return "mean";
        case Pooling::ClsThenNorm: return "cls, then norm";
        case Pooling::Map: return "map";
        case Pooling::NormMean: return "norm, then mean";
    }
    return "?";
}

std::string head_label(int layer, int head) { return "L" + std::to_string(layer) + " H" + std::to_string(head); }

std::string Interventions::describe() const {
    std::string s;
    auto add = [&](const std::string& t) { s += (s.empty() ? "" : "; ") + t; };
    for (const HeadAblation& h : heads)
        add("head " + head_label(h.layer, h.head) + (h.mean ? " mean-ablated" : " zeroed"));
    for (const SublayerAblation& a : sublayers)
        add("block " + std::to_string(a.layer) + (a.mlp ? " mlp.out" : " attn.out") + " zeroed");
    if (!dropped.empty()) {
        std::string d;
        for (size_t i = 0; i < dropped.size() && i < 12; ++i) d += (i ? ", " : "") + std::to_string(dropped[i]);
        if (dropped.size() > 12) d += ", ... (" + std::to_string(dropped.size()) + " in all)";
        add((dropped.size() == 1 ? "patch " : "patches ") + d + " dropped");
    }
    if (patch) {
        std::string t;
        for (size_t i = 0; i < patch->tokens.size() && i < 12; ++i) t += (i ? ", " : "") + std::to_string(patch->tokens[i]);
        add("stage " + stage_name(patch->stage) + (patch->tokens.empty() ? "" : " (tokens " + t + ")") + " patched from " +
            patch->source);
    }
    return s;
}

std::string Options::describe() const {
    std::string s = std::string("elementwise_affine=") + (affine ? "True" : "False") +
                    ", unbiased=" + (unbiased ? "True" : "False") + ", pooling=" +
                    (pooling ? pooling_name(*pooling) : "model's");
    if (image_h > 0 || image_w > 0) s += ", input " + std::to_string(image_h) + "x" + std::to_string(image_w);
    if (bug_scale_after_softmax) s += ", BUG: scale after softmax";
    if (bug_reshape_patches) s += ", BUG: patches by plain reshape";
    if (!iv.empty()) s += ", interventions: " + iv.describe();
    return s;
}

namespace {
// nn.init.trunc_normal_(t, std=std, a=-2*std, b=2*std), as timm truncates.
template <class T>
void trunc_normal(T& t, float std, std::mt19937_64& rng) {
    std::normal_distribution<float> nd(0.f, std);
    for (auto& v : t) {
        float x;
        do { x = nd(rng); } while (std::fabs(x) > 2.f * std);
        v = x;
    }
}
}  // namespace

Tensor1 rope_periods_of(const Config& c) {
    // dinov3 RopePositionEmbedding._init_weights: base ** (2 * arange(d // 4) / (d // 2)), in float32
    const size_t n = size_t(c.head_dim() / 4);
    Tensor1 p = Tensor1::from_shape({n});
    for (size_t j = 0; j < n; ++j) p(j) = std::pow(c.rope_base, float(2 * j) / float(c.head_dim() / 2));
    return p;
}

Weights shaped_weights(const Config& c) {
    const size_t D = c.width, M = c.mlp, Mi = c.mlp_in(), K = c.classes, CPP = c.patch_dim(), R = c.registers;
    Weights w;
    w.cfg = c;
    auto ln = [&](LayerNormW& l) { l.g = Tensor1::from_shape({D}); l.b = Tensor1::from_shape({D}); };
    auto linear = [&](Tensor2& W, Tensor1& b, size_t out, size_t in) {
        W = Tensor2::from_shape({out, in});
        b = Tensor1::from_shape({out});
    };
    linear(w.patch_w, w.patch_b, D, CPP);
    if (c.cls_token) w.cls = Tensor1::from_shape({D});
    if (c.dist_token) w.dist = Tensor1::from_shape({D});
    if (R) w.reg = Tensor2::from_shape({R, D});
    w.pos = Tensor2::from_shape({size_t(c.pos_rows()), D});
    if (c.rope && c.rope_kind == RopeKind::Dinov3)  // (EVA-02's frequencies are not weights: rope_angles makes them)
        w.rope_periods = Tensor1::from_shape({size_t(std::max(1, c.head_dim() / 4))});  // (1 for a loader's miniature)
    if (c.ln_pre) ln(w.ln_pre);
    if (c.patch_norm) ln(w.patch_norm);
    w.blocks.resize(size_t(c.depth));
    for (auto& b : w.blocks) {
        ln(b.ln1);
        ln(b.ln2);
        linear(b.qkv_w, b.qkv_b, 3 * D, D);
        linear(b.proj_w, b.proj_b, D, D);
        linear(b.fc1_w, b.fc1_b, Mi, D);
        linear(b.fc2_w, b.fc2_b, D, M);
        if (c.layer_scale) { b.ls1 = Tensor1::from_shape({D}); b.ls2 = Tensor1::from_shape({D}); }
        if (c.mlp_norm) { b.mlp_norm.g = Tensor1::from_shape({M}); b.mlp_norm.b = Tensor1::from_shape({M}); }
    }
    ln(w.ln_f);
    if (c.has_logits()) linear(w.head_w, w.head_b, K, D);
    if (c.head == Head::Distilled) linear(w.head_dist_w, w.head_dist_b, K, D);
    if (c.head == Head::Projection) w.proj = Tensor2::from_shape({D, size_t(c.embed_dim)});
    if (c.pooling == Pooling::Map) {
        w.map.probe = Tensor1::from_shape({D});
        linear(w.map.in_w, w.map.in_b, 3 * D, D);
        linear(w.map.out_w, w.map.out_b, D, D);
        ln(w.map.ln);
        linear(w.map.fc1_w, w.map.fc1_b, M, D);
        linear(w.map.fc2_w, w.map.fc2_b, D, M);
    }
    return w;
}

Weights init_weights(const Config& c, uint64_t seed) {
    c.validate();
    const size_t D = c.width, M = c.mlp, Mi = c.mlp_in(), K = c.classes, CPP = c.patch_dim(), R = c.registers;
    std::mt19937_64 rng(seed);
    Weights w;
    w.cfg = c;
    // nn.Conv2d's default init (kaiming_uniform a=sqrt(5)) == U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    const float bound = 1.f / std::sqrt(float(CPP));
    std::uniform_real_distribution<float> ud(-bound, bound);
    w.patch_w = Tensor2::from_shape({D, CPP});
    for (auto& v : w.patch_w) v = ud(rng);
    w.patch_b = xt::zeros<float>({D});
    if (c.patch_bias)
        for (auto& v : w.patch_b) v = ud(rng);
    if (c.cls_token) {
        w.cls = Tensor1::from_shape({D});
        trunc_normal(w.cls, 1e-6f, rng);
    }
    if (c.dist_token) {
        w.dist = Tensor1::from_shape({D});
        trunc_normal(w.dist, 0.02f, rng);
    }
    if (R) {  // dinov2: nn.init.normal_(register_tokens, std=1e-6)
        w.reg = Tensor2::from_shape({R, D});
        trunc_normal(w.reg, 1e-6f, rng);
    }
    w.pos = Tensor2::from_shape({size_t(c.pos_rows()), D});
    trunc_normal(w.pos, 0.02f, rng);
    if (c.rope && c.rope_kind == RopeKind::Dinov3) w.rope_periods = rope_periods_of(c);
    auto ln = [&](LayerNormW& l) { l.g = xt::ones<float>({D}); l.b = xt::zeros<float>({D}); };
    auto linear = [&](Tensor2& W, Tensor1& b, size_t out, size_t in) {
        W = Tensor2::from_shape({out, in});
        trunc_normal(W, 0.02f, rng);
        b = xt::zeros<float>({out});
    };
    if (c.ln_pre) ln(w.ln_pre);
    if (c.patch_norm) ln(w.patch_norm);
    w.blocks.resize(c.depth);
    for (auto& b : w.blocks) {
        ln(b.ln1);
        ln(b.ln2);
        linear(b.qkv_w, b.qkv_b, 3 * D, D);
        linear(b.proj_w, b.proj_b, D, D);
        linear(b.fc1_w, b.fc1_b, Mi, D);
        linear(b.fc2_w, b.fc2_b, D, M);
        if (c.layer_scale) {  // dinov2 / timm LayerScale(init_values=1e-5)
            b.ls1 = xt::full_like(Tensor1::from_shape({D}), 1e-5f);
            b.ls2 = xt::full_like(Tensor1::from_shape({D}), 1e-5f);
        }
        if (c.mlp_norm) { b.mlp_norm.g = xt::ones<float>({M}); b.mlp_norm.b = xt::zeros<float>({M}); }
    }
    ln(w.ln_f);
    if (c.has_logits()) linear(w.head_w, w.head_b, K, D);
    if (c.head == Head::Distilled) linear(w.head_dist_w, w.head_dist_b, K, D);
    if (c.head == Head::Projection) {  // openai/CLIP: width ** -0.5 * randn(width, output_dim)
        w.proj = Tensor2::from_shape({D, size_t(c.embed_dim)});
        std::normal_distribution<float> nd(0.f, 1.f / std::sqrt(float(D)));
        for (auto& v : w.proj) v = nd(rng);
    }
    if (c.pooling == Pooling::Map) {
        w.map.probe = Tensor1::from_shape({D});
        trunc_normal(w.map.probe, 0.02f, rng);
        linear(w.map.in_w, w.map.in_b, 3 * D, D);
        linear(w.map.out_w, w.map.out_b, D, D);
        ln(w.map.ln);
        linear(w.map.fc1_w, w.map.fc1_b, M, D);
        linear(w.map.fc2_w, w.map.fc2_b, D, M);
    }
    return w;
}

namespace {
template <class W, class F>  // W: Weights or const Weights
void for_each_layernorm(W& w, F f) {
    auto one = [&](auto& l) { if (l.g.size()) f(l); };
    one(w.patch_norm);
    one(w.ln_pre);
    for (auto& b : w.blocks) { one(b.ln1); one(b.ln2); one(b.mlp_norm); }
    one(w.ln_f);
    one(w.map.ln);
}
}  // namespace

void randomize_layernorms(Weights& w, uint64_t seed) {
    std::mt19937_64 rng(seed ^ 0x4c4e6761u);  // "LNga": not the stream init_weights drew the matrices from
    std::uniform_real_distribution<float> g(0.5f, 1.5f), b(-0.5f, 0.5f);
    const bool rms = w.cfg.norm == Norm::RmsNorm;  // RMSNorm has no beta (its bias is held as zeros, never read)
    for_each_layernorm(w, [&](LayerNormW& l) {
        for (auto& v : l.g) v = g(rng);
        if (!rms)
            for (auto& v : l.b) v = b(rng);
    });
}

bool layernorms_are_identity(const Weights& w) {
    bool any = false, identity = true;
    for_each_layernorm(w, [&](const LayerNormW& l) {
        any = true;
        for (float v : l.g) identity = identity && v == 1.f;
        for (float v : l.b) identity = identity && v == 0.f;
    });
    return any && identity;
}

std::vector<int> top_k(const float* p, size_t n, size_t k) {
    std::vector<int> idx(n);
    for (size_t i = 0; i < n; ++i) idx[i] = int(i);
    // A strict weak order even with NaN: numbers before NaN, larger first, then the smaller index.
    auto before = [p](int a, int b) {
        const float x = p[a], y = p[b];
        const bool nx = std::isnan(x), ny = std::isnan(y);
        if (nx != ny) return ny;
        if (!nx && x != y) return x > y;
        return a < b;
    };
    k = std::min(k, n);
    std::partial_sort(idx.begin(), idx.begin() + long(k), idx.end(), before);
    idx.resize(k);
    return idx;
}

}  // namespace vit
