#include "core/model/model.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>
#include <stdexcept>
#include <xtensor/xbuilder.hpp>

namespace vit {

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
    // The resize is the crop's surround: at least the crop (torchvision's CenterCrop would
    // pad a smaller one) and at most twice it (crop_pct 0.5; published models use 0.875-1).
    // Every image is resized to it before the crop, so it is tied to image_size here.
    if (pre.resize != 0 && (pre.resize < image_size || pre.resize > 2 * image_size))
        bad("field 'resize' is " + std::to_string(pre.resize) + "; with image_size " + std::to_string(image_size) +
            " it must be 0 (resize to image_size) or in " + std::to_string(image_size) + ".." +
            std::to_string(2 * image_size) + " (the centre crop keeps image_size of it)");
    // Parameters and the floats one traced forward pass records (per block:
    // ~14 (T, D) stages, scores + pattern (H, T, T), fc1/GELU (T, M)).
    const double T = tokens(), D = width, H = heads, M = mlp;
    const double params = double(param_count(*this));
    const double trace = depth * (14 * T * D + 2 * H * T * T + 2 * T * M) + 4 * T * D;
    if (params > kMaxParams || trace > kMaxTraceFloats) {
        char m[200];
        std::snprintf(m, sizeof m, "%.3g parameters and a %.3g GB trace are over the limits (%.3g parameters, %.3g GB)",
                      params, trace * 4 / 1e9, kMaxParams, kMaxTraceFloats * 4 / 1e9);
        bad(m);
    }
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
      << " (d=" << head_dim() << "), mlp " << mlp << ", classes " << classes << ", eps " << eps
      << ", pooling " << (pooling == Pooling::Cls ? "cls" : "mean");
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
    return {"toy-rgb8", "toy-gray4", "vit-ti16", "vit-s16", "vit-b16", "vit-b32", "vit-l16", "vit-l32", "vit-h14", "fmnist"};
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
        // The family's name brings the family's preprocessing (see DESIGN.md).
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
    int64_t D = c.width, M = c.mlp, K = c.classes, T = c.tokens();
    int64_t embed = int64_t(c.patch_dim()) * D + D + D + T * D;
    int64_t block = 2 * (2 * D) + (3 * D * D + 3 * D) + (D * D + D) + (D * M + M) + (M * D + D);
    return embed + c.depth * block + 2 * D + D * K + K;
}

std::vector<ArrayRef> param_refs(const Weights& w) {
    std::vector<ArrayRef> v;
    for_each_param([&](const std::string& name, const auto& t) { v.push_back(array_ref(name, t)); }, w);
    return v;
}

size_t param_numel(const Weights& w) {
    size_t n = 0;
    for_each_param([&](const std::string&, const auto& t) { n += t.size(); }, w);
    return n;
}

Weights zeros_like(const Weights& w) {
    Weights z = w;
    for_each_param([](const std::string&, auto& t) { t.fill(0.f); }, z);
    return z;
}

std::string Options::describe() const {
    std::string s = std::string("elementwise_affine=") + (affine ? "True" : "False") +
                    ", unbiased=" + (unbiased ? "True" : "False") + ", pooling=" +
                    (pooling ? (*pooling == Pooling::Cls ? "cls" : "mean") : "model's");
    if (bug_scale_after_softmax) s += ", BUG: scale after softmax";
    if (bug_reshape_patches) s += ", BUG: patches by plain reshape";
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

Weights init_weights(const Config& c, uint64_t seed) {
    c.validate();
    const size_t D = c.width, M = c.mlp, K = c.classes, T = c.tokens(), CPP = c.patch_dim();
    std::mt19937_64 rng(seed);
    Weights w;
    w.cfg = c;
    // nn.Conv2d's default init (kaiming_uniform a=sqrt(5)) == U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    const float bound = 1.f / std::sqrt(float(CPP));
    std::uniform_real_distribution<float> ud(-bound, bound);
    w.patch_w = Tensor2::from_shape({D, CPP});
    for (auto& v : w.patch_w) v = ud(rng);
    w.patch_b = Tensor1::from_shape({D});
    for (auto& v : w.patch_b) v = ud(rng);
    w.cls = Tensor1::from_shape({D});
    trunc_normal(w.cls, 1e-6f, rng);
    w.pos = Tensor2::from_shape({T, D});
    trunc_normal(w.pos, 0.02f, rng);
    auto ln = [&](LayerNormW& l) { l.g = xt::ones<float>({D}); l.b = xt::zeros<float>({D}); };
    auto linear = [&](Tensor2& W, Tensor1& b, size_t out, size_t in) {
        W = Tensor2::from_shape({out, in});
        trunc_normal(W, 0.02f, rng);
        b = xt::zeros<float>({out});
    };
    w.blocks.resize(c.depth);
    for (auto& b : w.blocks) {
        ln(b.ln1);
        ln(b.ln2);
        linear(b.qkv_w, b.qkv_b, 3 * D, D);
        linear(b.proj_w, b.proj_b, D, D);
        linear(b.fc1_w, b.fc1_b, M, D);
        linear(b.fc2_w, b.fc2_b, D, M);
    }
    ln(w.ln_f);
    linear(w.head_w, w.head_b, K, D);
    return w;
}

}  // namespace vit
