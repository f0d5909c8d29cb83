// ViT configuration, teaching options and weights (xtensor containers).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/kernels/gemm.h"
#include "core/model/tensor.h"

namespace vit {

enum class Pooling { Cls, Mean };
enum class Interp { Bilinear, Bicubic };

// How an image becomes the model's input (the model family decides).
struct Preprocess {
    int resize = 0;           // shorter side resized to this, then a centre crop (0: to image_size)
    bool squash = false;      // true: straight resize to a square (aspect lost), as Hugging Face does
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
    std::optional<Pooling> pooling;  // empty: the model's own
    // Two classic bugs, off by default, to see their effect downstream:
    bool bug_scale_after_softmax = false;  // softmax(q k^T) / sqrt(d) instead of softmax(q k^T / sqrt(d))
    bool bug_reshape_patches = false;      // img.reshape(N, C*P*P) instead of unfold
    Pooling pooling_for(const Config& c) const { return pooling ? *pooling : c.pooling; }
    bool has_bug() const { return bug_scale_after_softmax || bug_reshape_patches; }
    bool operator==(const Options& o) const {
        return affine == o.affine && unbiased == o.unbiased && pooling == o.pooling &&
               bug_scale_after_softmax == o.bug_scale_after_softmax && bug_reshape_patches == o.bug_reshape_patches;
    }
    bool operator!=(const Options& o) const { return !(*this == o); }
    std::string describe() const;  // "elementwise_affine=True, unbiased=False, pooling=model's (cls)"
};

struct LayerNormW { Tensor1 g, b; };  // (D), (D)

struct BlockW {
    LayerNormW ln1, ln2;
    Tensor2 qkv_w; Tensor1 qkv_b;    // (3D, D), (3D): rows [q; k; v], heads contiguous
    Tensor2 proj_w; Tensor1 proj_b;  // (D, D), (D)
    Tensor2 fc1_w; Tensor1 fc1_b;    // (M, D), (M)
    Tensor2 fc2_w; Tensor1 fc2_b;    // (D, M), (D)
};

struct Weights {
    Config cfg;
    Tensor2 patch_w; Tensor1 patch_b;  // (D, C*P*P) == Conv2d OIHW flattened, (D)
    Tensor1 cls;                       // (D)
    Tensor2 pos;                       // (T, D)
    std::vector<BlockW> blocks;
    LayerNormW ln_f;
    Tensor2 head_w; Tensor1 head_b;    // (K, D), (K)
    // The matrices packed for the GEMM kernel by traced forward passes (gemm.h):
    // a copy starts empty; whoever changes weights in place calls packs.clear()
    // (AdamW does; a change is also detected by sampling).
    gemm::Packs packs;
};

// Calls f(name, p, q, ...) for every parameter in a fixed order (timm's names), with
// the same parameter of each of the given Weights (weights, gradients, Adam moments...).
// p, q, ... are the xtensor containers themselves (Tensor1 or Tensor2).
template <class F, class W0, class... W>
void for_each_param(F&& f, W0& w0, W&... ws) {
    f("cls_token", w0.cls, ws.cls...);
    f("pos_embed", w0.pos, ws.pos...);
    f("patch_embed.proj.weight", w0.patch_w, ws.patch_w...);
    f("patch_embed.proj.bias", w0.patch_b, ws.patch_b...);
    for (size_t i = 0; i < w0.blocks.size(); ++i) {
        const std::string p = "blocks." + std::to_string(i) + ".";
        f(p + "norm1.weight", w0.blocks[i].ln1.g, ws.blocks[i].ln1.g...);
        f(p + "norm1.bias", w0.blocks[i].ln1.b, ws.blocks[i].ln1.b...);
        f(p + "attn.qkv.weight", w0.blocks[i].qkv_w, ws.blocks[i].qkv_w...);
        f(p + "attn.qkv.bias", w0.blocks[i].qkv_b, ws.blocks[i].qkv_b...);
        f(p + "attn.proj.weight", w0.blocks[i].proj_w, ws.blocks[i].proj_w...);
        f(p + "attn.proj.bias", w0.blocks[i].proj_b, ws.blocks[i].proj_b...);
        f(p + "norm2.weight", w0.blocks[i].ln2.g, ws.blocks[i].ln2.g...);
        f(p + "norm2.bias", w0.blocks[i].ln2.b, ws.blocks[i].ln2.b...);
        f(p + "mlp.fc1.weight", w0.blocks[i].fc1_w, ws.blocks[i].fc1_w...);
        f(p + "mlp.fc1.bias", w0.blocks[i].fc1_b, ws.blocks[i].fc1_b...);
        f(p + "mlp.fc2.weight", w0.blocks[i].fc2_w, ws.blocks[i].fc2_w...);
        f(p + "mlp.fc2.bias", w0.blocks[i].fc2_b, ws.blocks[i].fc2_b...);
    }
    f("norm.weight", w0.ln_f.g, ws.ln_f.g...);
    f("norm.bias", w0.ln_f.b, ws.ln_f.b...);
    f("head.weight", w0.head_w, ws.head_w...);
    f("head.bias", w0.head_b, ws.head_b...);
}

// A tensor seen without its rank: name, data and shape (for files and loops).
struct ArrayRef {
    std::string name;
    const float* data = nullptr;
    Shape shape;
};
template <class E>
ArrayRef array_ref(std::string name, const E& e) {
    return ArrayRef{std::move(name), e.data(), shape_of(e)};
}
// Every parameter with its timm name, in for_each_param's order.
std::vector<ArrayRef> param_refs(const Weights& w);
size_t param_numel(const Weights& w);

// Named presets: toy-rgb8, toy-gray4, vit-ti16, vit-s16, vit-b16, vit-b32,
// vit-l16, vit-l32, vit-h14, fmnist, and the torchvision / timm names in
// preset_aliases(). Throws std::invalid_argument listing them on a bad name.
Config preset(const std::string& name);
std::vector<std::string> preset_names();  // ViTScope's own names
bool is_preset(const std::string& name);  // own names and aliases

// torchvision's and timm's names for the standard ViTs: the same shapes and
// published head counts as `preset`, with that family's preprocessing.
struct PresetAlias {
    const char* alias;   // "vit_b_16", "vit_base_patch16_224"
    const char* preset;  // "vit-b16"
    const char* family;  // "torchvision" or "timm"
};
const std::vector<PresetAlias>& preset_aliases();

// Parameter count from the config alone (what the weights will hold).
int64_t param_count(const Config& c);

// Allocate and initialise as timm does: trunc_normal(std=0.02) linears and
// position embedding, zero biases, LayerNorm ones/zeros, cls 1e-6 normal.
Weights init_weights(const Config& c, uint64_t seed);
// Zero-filled weights of the same shapes (for gradients and Adam moments).
Weights zeros_like(const Weights& w);

// The indices of the k largest of p[0..n), largest first; equal values in index order and NaN
// after every number. The window's predictions and the CLI's print this same order.
std::vector<int> top_k(const float* p, size_t n, size_t k);

}  // namespace vit
