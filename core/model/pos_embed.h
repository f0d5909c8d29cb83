// Position-embedding interpolation, exactly as each model family's own code
// resizes its learned grid of position embeddings to another patch grid.
//
// All of them end in torch.nn.functional.interpolate on the (1, D, gh, gw) grid
// with align_corners=False; they differ in the mode, in antialias, and in
// whether they pass an output size or a scale factor (DINO's "+ 0.1" offset).
// interpolate() reproduces torch's CPU kernels (aten/src/ATen/native/UpSample.h,
// cpu/UpSampleKernel.cpp of torch 1.13, the version the tests compare with):
//   - bicubic without antialias: Keys' cubic convolution with A = -0.75 on the
//     4x4 neighbourhood, indices clamped to the border;
//   - bilinear without antialias: two taps, the source index clamped at 0;
//   - antialias (bilinear or bicubic): separable PIL-style filters (triangle, or
//     the cubic with a = -0.5), widened by the scale when downsampling, taps
//     outside the grid dropped and the weights renormalised; width first, then height;
//   - with a scale factor s the source of output pixel i is (i + 0.5) / s - 0.5
//     (torch uses the given factor, not in/out) and the output size is floor(in * s).
// No dependency on the model or the stage table: plain row-major float buffers.
#pragma once
#include <string>
#include <vector>

namespace vit {

enum class InterpMode { Bilinear, Bicubic };

// One call of F.interpolate(grid, size=... | scale_factor=..., mode, align_corners=False, antialias).
struct InterpSpec {
    InterpMode mode = InterpMode::Bicubic;
    bool antialias = false;
    // > 0: torch's scale_factor path for that axis (output size = floor(in * scale),
    // source coordinates use 1 / scale). 0: the output size is given.
    double scale_h = 0, scale_w = 0;
};

// torch's output size for a scale factor: floor(double(in) * scale).
// Throws std::invalid_argument when the result is not a usable size.
int interp_scaled_size(int in, double scale);

// grid: (in_h, in_w, dim) row-major, i.e. the patch rows of a position-embedding
// table in row-major patch order (what F.interpolate sees after the reshape and
// permute every family does). Returns (out_h, out_w, dim) in the same layout.
// Throws std::invalid_argument on sizes < 1 or absurd sizes, or a scale factor
// whose output size is not (out_h, out_w).
std::vector<float> interpolate_grid(const float* grid, int in_h, int in_w, int dim, int out_h, int out_w,
                                    const InterpSpec& spec);

// How a family resizes its learned position embeddings (upstream file in the comment
// of each constructor below). `offset` > 0 selects the scale-factor path with
// scale = (new + offset) / old, as DINO's interpolate_pos_encoding does.
struct PosEmbedRule {
    std::string name;        // for the learner: "DINOv2 interpolate_pos_encoding (offset 0.1)"
    InterpMode mode = InterpMode::Bicubic;
    bool antialias = false;
    double offset = 0;       // 0: size-based
};

// timm layers/pos_embed.py resample_abs_pos_embed (also timm's dynamic_img_size,
// DeiT, DINOv2 in timm): bicubic, antialias=True, by size.
PosEmbedRule pos_rule_timm();
// facebookresearch/dino vision_transformer.py: bicubic, scale_factor (new + 0.1) / old, no antialias.
PosEmbedRule pos_rule_dino();
// facebookresearch/dinov2 models/vision_transformer.py: without registers (hub
// defaults interpolate_offset=0.1, antialias False) as DINO; with registers
// (interpolate_offset=0.0, interpolate_antialias=True) by size with antialias.
PosEmbedRule pos_rule_dinov2(bool registers);
// Hugging Face interpolate_pos_encoding of ViT, DeiT, Dinov2, CLIP, SigLIP: bicubic by
// size without antialias; Dinov2WithRegisters: the same with antialias=True.
PosEmbedRule pos_rule_hf(bool antialias);
// open_clip model.py resize_pos_embed (what open_clip does for another image size;
// OpenAI's clip code has none): bicubic, antialias=True, by size.
PosEmbedRule pos_rule_open_clip();
// facebookresearch/mae util/pos_embed.py interpolate_pos_embed: bicubic by size, no antialias.
PosEmbedRule pos_rule_mae();

// Resizes a position-embedding table: `table` holds `rows` x `dim` floats, the first
// `prefix` rows (cls, dist, ... positions, 0 for SigLIP and timm no_embed_class) kept
// as they are, the rest a row-major (old_h, old_w) grid resized to (new_h, new_w).
// When the grid does not change, the table comes back unchanged (every family skips
// the interpolation then). Returns (prefix + new_h * new_w) x dim floats. Errors
// (std::invalid_argument) name what does not fit: rows vs prefix + old_h * old_w,
// sizes, a scale factor that would not give the new size.
std::vector<float> resize_pos_embed(const float* table, int rows, int dim, int prefix, int old_h, int old_w,
                                    int new_h, int new_w, const PosEmbedRule& rule);

// The side of a square grid holding n positions (n = side * side), or 0 if n is not a square.
int square_side(long long n);

}  // namespace vit
