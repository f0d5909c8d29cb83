#include "model.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>
#include <stdexcept>

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
    return {"toy-rgb8", "toy-gray4", "vit-ti16", "vit-s16", "vit-b16", "vit-l16", "vit-h14", "fmnist"};
}

bool is_preset(const std::string& n) {
    for (auto& p : preset_names()) if (p == n) return true;
    return false;
}

Config preset(const std::string& n) {
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
    if (n == "vit-l16") return make(n, 224, 3, 16, 1024, 24, 16, 4096, 1000);
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
    throw std::invalid_argument("unknown preset '" + n + "' (presets: " + all + ")");
}

int64_t param_count(const Config& c) {
    int64_t D = c.width, M = c.mlp, K = c.classes, T = c.tokens();
    int64_t embed = int64_t(c.patch_dim()) * D + D + D + T * D;
    int64_t block = 2 * (2 * D) + (3 * D * D + 3 * D) + (D * D + D) + (D * M + M) + (M * D + D);
    return embed + c.depth * block + 2 * D + D * K + K;
}

std::vector<std::pair<std::string, const Tensor*>> Weights::named() const {
    auto v = const_cast<Weights*>(this)->named();
    std::vector<std::pair<std::string, const Tensor*>> out;
    for (auto& [n, t] : v) out.emplace_back(n, t);
    return out;
}

std::vector<std::pair<std::string, Tensor*>> Weights::named() {
    std::vector<std::pair<std::string, Tensor*>> v{
        {"cls_token", &cls}, {"pos_embed", &pos},
        {"patch_embed.proj.weight", &patch_w}, {"patch_embed.proj.bias", &patch_b}};
    for (size_t i = 0; i < blocks.size(); ++i) {
        auto p = "blocks." + std::to_string(i) + ".";
        auto& b = blocks[i];
        v.insert(v.end(), {{p + "norm1.weight", &b.ln1.g}, {p + "norm1.bias", &b.ln1.b},
                           {p + "attn.qkv.weight", &b.qkv_w}, {p + "attn.qkv.bias", &b.qkv_b},
                           {p + "attn.proj.weight", &b.proj_w}, {p + "attn.proj.bias", &b.proj_b},
                           {p + "norm2.weight", &b.ln2.g}, {p + "norm2.bias", &b.ln2.b},
                           {p + "mlp.fc1.weight", &b.fc1_w}, {p + "mlp.fc1.bias", &b.fc1_b},
                           {p + "mlp.fc2.weight", &b.fc2_w}, {p + "mlp.fc2.bias", &b.fc2_b}});
    }
    v.insert(v.end(), {{"norm.weight", &ln_f.g}, {"norm.bias", &ln_f.b},
                       {"head.weight", &head_w}, {"head.bias", &head_b}});
    return v;
}

namespace {
void trunc_normal(Tensor& t, float std, std::mt19937_64& rng) {
    std::normal_distribution<float> nd(0.f, std);
    for (size_t i = 0; i < t.size(); ++i) {
        float x;
        do { x = nd(rng); } while (std::fabs(x) > 2.f * std);  // timm truncates at +-2 std
        t(i) = x;
    }
}
void fill(Tensor& t, float v) { for (size_t i = 0; i < t.size(); ++i) t(i) = v; }
}  // namespace

Weights init_weights(const Config& c, uint64_t seed) {
    c.validate();
    size_t D = c.width, M = c.mlp, K = c.classes, T = c.tokens();
    std::mt19937_64 rng(seed);
    Weights w;
    w.cfg = c;
    w.patch_w = Tensor({D, size_t(c.patch_dim())});
    // Conv2d default (kaiming_uniform a=sqrt(5)) == U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    float bound = 1.f / std::sqrt(float(c.patch_dim()));
    std::uniform_real_distribution<float> ud(-bound, bound);
    for (size_t i = 0; i < w.patch_w.size(); ++i) w.patch_w(i) = ud(rng);
    w.patch_b = Tensor({D});
    for (size_t i = 0; i < D; ++i) w.patch_b(i) = ud(rng);
    w.cls = Tensor({D});
    trunc_normal(w.cls, 1e-6f, rng);
    w.pos = Tensor({T, D});
    trunc_normal(w.pos, 0.02f, rng);
    auto ln = [&](LayerNormW& l) { l.g = Tensor({D}); fill(l.g, 1.f); l.b = Tensor::zeros({D}); };
    w.blocks.resize(c.depth);
    for (auto& b : w.blocks) {
        ln(b.ln1); ln(b.ln2);
        b.qkv_w = Tensor({3 * D, D}); trunc_normal(b.qkv_w, 0.02f, rng); b.qkv_b = Tensor::zeros({3 * D});
        b.proj_w = Tensor({D, D}); trunc_normal(b.proj_w, 0.02f, rng); b.proj_b = Tensor::zeros({D});
        b.fc1_w = Tensor({M, D}); trunc_normal(b.fc1_w, 0.02f, rng); b.fc1_b = Tensor::zeros({M});
        b.fc2_w = Tensor({D, M}); trunc_normal(b.fc2_w, 0.02f, rng); b.fc2_b = Tensor::zeros({D});
    }
    ln(w.ln_f);
    w.head_w = Tensor({K, D}); trunc_normal(w.head_w, 0.02f, rng);
    w.head_b = Tensor::zeros({K});
    return w;
}

}  // namespace vit
