// ViT configuration, teaching options and weights. No xtensor here.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tensor.h"

namespace vit {

enum class Pooling { Cls, Mean };
enum class Interp { Bilinear, Bicubic };

// How an image becomes the model's input (the model family decides).
struct Preprocess {
    int resize = 0;           // shorter side resized to this (0: straight resize to image_size)
    Interp interp = Interp::Bilinear;
    std::vector<float> mean{0.5f, 0.5f, 0.5f};
    std::vector<float> std{0.5f, 0.5f, 0.5f};
};

// Upper limits every config is checked against, so that no file can make the
// app allocate absurd memory: ViT-H/14 (632 M parameters, a ~1.2 GB trace at
// 224 px) and a bit; ViT-L/16 at 384 px (a ~2.3 GB trace) still fits.
constexpr int kMaxImageSize = 4096, kMaxWidth = 8192, kMaxLayers = 128, kMaxMlp = 32768,
              kMaxClasses = 100000, kMaxResize = 8192;
constexpr double kMaxParams = 1e9, kMaxTraceFloats = 1 << 30;

struct Config {
    std::string name = "custom";
    int image_size = 224;
    int channels = 3;
    int patch = 16;
    int width = 768;    // D
    int depth = 12;     // L
    int heads = 12;     // H
    int mlp = 3072;     // M
    int classes = 1000; // K
    float eps = 1e-6f;
    Pooling pooling = Pooling::Cls;
    Preprocess pre;
    std::vector<std::string> class_names;  // may be empty

    int grid() const { return image_size / patch; }
    int patches() const { return grid() * grid(); }   // N
    int tokens() const { return patches() + 1; }       // T
    int head_dim() const { return width / heads; }     // d
    int patch_dim() const { return channels * patch * patch; }
    // Throws std::invalid_argument naming the offending field.
    void validate() const;
    std::string describe() const;
};

// The teaching switches. Changing one re-runs forward().
struct Options {
    bool affine = true;      // LayerNorm elementwise_affine: off ignores gamma and beta
    bool unbiased = false;   // LayerNorm variance over N-1 instead of N
    int pooling = -1;        // -1: the model's own, else a Pooling value
    bool operator==(const Options& o) const {
        return affine == o.affine && unbiased == o.unbiased && pooling == o.pooling;
    }
    bool operator!=(const Options& o) const { return !(*this == o); }
};

struct LayerNormW { Tensor g, b; };  // (D), (D)

struct BlockW {
    LayerNormW ln1, ln2;
    Tensor qkv_w, qkv_b;    // (3D, D), (3D): rows [q; k; v], heads contiguous
    Tensor proj_w, proj_b;  // (D, D), (D)
    Tensor fc1_w, fc1_b;    // (M, D), (M)
    Tensor fc2_w, fc2_b;    // (D, M), (D)
};

struct Weights {
    Config cfg;
    Tensor patch_w, patch_b;  // (D, C*P*P) == Conv2d OIHW flattened, (D)
    Tensor cls;               // (D)
    Tensor pos;               // (T, D)
    std::vector<BlockW> blocks;
    LayerNormW ln_f;
    Tensor head_w, head_b;    // (K, D), (K)

    // Every parameter with its timm name, in a fixed order.
    std::vector<std::pair<std::string, Tensor*>> named();
    std::vector<std::pair<std::string, const Tensor*>> named() const;
};

// Named presets: toy-rgb8, toy-gray4, vit-ti16, vit-s16, vit-b16, vit-l16,
// vit-h14, fmnist. Throws std::invalid_argument listing them on a bad name.
Config preset(const std::string& name);
std::vector<std::string> preset_names();
bool is_preset(const std::string& name);

// Parameter count from the config alone (what the weights will hold).
int64_t param_count(const Config& c);

// Allocate and initialise as timm does: trunc_normal(std=0.02) linears and
// position embedding, zero biases, LayerNorm ones/zeros, cls 1e-6 normal.
Weights init_weights(const Config& c, uint64_t seed);

}  // namespace vit
