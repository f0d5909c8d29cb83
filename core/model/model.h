// ViT configuration, teaching options and weights (xtensor containers).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <memory>

#include "core/kernels/gemm.h"
#include "core/model/stage_id.h"
#include "core/model/tensor.h"

namespace vit {

// What the head reads. Cls: the final norm on every token, then row 0 (timm, DINO,
// DeiT, open_clip). Mean: the mean of the patch tokens, then the final norm (timm's
// fc_norm). ClsThenNorm: row 0, then the final norm on that row alone (OpenAI CLIP's
// and Hugging Face CLIP's ln_post). Map: the final norm on every token, then an
// attention-pooling head whose learned probe attends over them (SigLIP). NormMean: the final norm on
// every token, then the mean of the patch tokens (timm's class_token=False ViTs with fc_norm=False,
// vit_*_gap_*).
enum class Pooling { Cls, Mean, ClsThenNorm, Map, NormMean };
enum class Interp { Bilinear, Bicubic };

// The families ViTScope runs: each is the vanilla ViT plus the parts its Config turns on.
enum class ModelFamily { ViT, DeiT, Dino, Dinov2, Clip, Siglip, Mae, Dinov3, Aimv2, Eva02, Pe };
// "ViT", "DeiT", "DINO", "DINOv2", "CLIP", "SigLIP", "MAE", "DINOv3", "AIMv2", "EVA-02", "PE" (Meta's Perception Encoder)
const char* family_label(ModelFamily f);
// Which rotary position embedding a model's blocks apply (Config::rope): DINOv3's (RopePositionEmbedding: the patch
// centre scaled to [-1, 1] per axis, angles 2 pi * coord / period, dims i and i + d/2 paired) or EVA-02's (timm
// RotaryEmbeddingCat: the patch's row and column index scaled by rope_ref_grid / grid, angles t / 10000^(j / (d/4)),
// dims 2m and 2m + 1 paired) or Perception Encoder's (the same RotaryEmbeddingCat with grid_offset 1 and 'xy'
// indexing: t = (index + 1) * rope_ref_grid / grid, the column's d/4 angles first, then the row's).
enum class RopeKind { Dinov3, Eva, Pe };
// The norm of every site of a model: LayerNorm ((x - mean) / sqrt(var + eps) * gamma + beta) or RMSNorm
// (x / sqrt(mean(x^2) + eps) * gamma: no centring, no beta; AIMv2, timm RmsNorm, torch nn.RMSNorm).
enum class Norm { LayerNorm, RmsNorm };
const char* norm_label(Norm n);  // "LayerNorm", "RMSNorm"
// The MLP's nonlinearity: exact GELU (erf), QuickGELU x*sigmoid(1.702x) (OpenAI CLIP),
// tanh-GELU (SigLIP), SwiGLU silu(x1) * x2 over fc1's two halves (DINOv2 ViT-g).
enum class Act { Gelu, QuickGelu, GeluTanh, SwiGlu };
const char* act_label(Act a);
// What the model's forward returns: logits from a Linear head (Distilled: DeiT's two
// heads on cls and dist, averaged), or an embedding: the pooled feature itself
// (Identity: DINO, MAE, SigLIP) or projected by x @ proj (Projection: CLIP).
enum class Head { Classifier, Distilled, Identity, Projection };
// How the learned position embeddings are resized to another patch grid (core/model/pos_embed.h).
enum class PosRule { Timm, Dino, Dinov2, Dinov2Reg, Hf, HfAntialias, OpenClip, Mae };
const char* pos_rule_label(PosRule r);
const char* pooling_name(Pooling p);  // "cls", "mean", "cls, then norm", "map", "norm, then mean"

// How an image becomes the model's input (the model family decides).
struct Preprocess {
    int resize = 0;           // shorter side resized to this, then a centre crop (0: to image_size)
    bool squash = false;      // true: straight resize to a square (aspect lost), as Hugging Face does
    Interp interp = Interp::Bilinear;
    std::vector<float> mean{0.5f, 0.5f, 0.5f};
    std::vector<float> std{0.5f, 0.5f, 0.5f};
};

// Upper limits every config is checked against, so that no file can make the
// app allocate absurd memory: ViT-H/14 (632 M parameters) and a bit. kMaxTraceFloats bounds
// what a pass holds with its stages on demand (run_dims, Config::validate) and, separately,
// a full trace that records every stage (ViT-L/16 at 384 px, ~2.3 GB, still fits; at 512 px
// only on demand).
constexpr int kMaxImageSize = 4096, kMaxWidth = 8192, kMaxLayers = 128, kMaxMlp = 32768,
              kMaxClasses = 100000, kMaxResize = 8192;
constexpr double kMaxParams = 1e9, kMaxTraceFloats = 1 << 30;
// Class names, from any source (--labels, a checkpoint's metadata, a config.json's id2label): one
// name at most 1 KB (ImageNet's longest, with its synonyms, is under 100 bytes), and a class-name
// file at most 8 MiB (kMaxClasses names of 80 bytes), refused before it is read.
constexpr size_t kMaxClassNameBytes = 1024, kMaxClassNamesFileBytes = size_t(8) << 20;

struct Config {
    std::string name = "custom";
    int image_size = 224;   // the native input side (square); a run may use another size (Options)
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

    // The family's parts (all off: the vanilla ViT of timm, torchvision and Hugging Face).
    ModelFamily family = ModelFamily::ViT;
    bool cls_token = true;    // false: SigLIP (the tokens are the patches alone)
    bool dist_token = false;  // DeiT distilled: tokens [cls, dist, patches]
    int registers = 0;        // DINOv2 with registers: tokens [cls, reg0..., patches], no position
    bool layer_scale = false; // DINOv2: x + gamma * attn(...), x + gamma * mlp(...)
    bool ln_pre = false;      // CLIP: a LayerNorm on the tokens before the blocks
    bool patch_bias = true;   // false: CLIP's patch conv has no bias
    Norm norm = Norm::LayerNorm;  // every norm of the model (RMSNorm: AIMv2)
    bool qkv_bias = true;     // false: nn.Linear(D, 3D, bias=False) (timm qkv_bias=False; its bias is held as zeros)
    bool proj_bias = true;    // false: attn.proj and the MLP's fc1/fc2 without biases (timm proj_bias=False; zeros)
    bool patch_norm = false;  // a norm on the patch embeddings before the position table (AIMv2: timm embed_norm_layer)
    bool mlp_norm = false;    // a LayerNorm over the MLP's hidden units before fc2 (EVA-02 Base/Large: timm scale_mlp)
    bool pos_no_cls = false;  // the stored position table has patch rows only (timm no_embed_class, SigLIP)
    Act act = Act::Gelu;
    Head head = Head::Classifier;
    int embed_dim = 0;        // E, the width of CLIP's projection (Head::Projection)
    PosRule pos_rule = PosRule::Timm;
    int pos_grid = 0;         // the stored position table's grid side (0: image_size / patch); DINOv2: 37
    bool pos_table = true;    // false: no learned position table (DINOv3: positions enter as RoPE alone)
    // Rotary position embeddings (DINOv3's RopePositionEmbedding): every block rotates the patch tokens'
    // q and k (not the prefix tokens') by angles 2 pi * coord / period, coord the patch centre's row
    // (first d/4 periods) and column (next d/4) normalized to [-1, 1] on each axis separately, the pairs
    // (i, i + d/2) of a head's dims rotated together. The periods are Weights::rope_periods (d/4 of
    // them, the file's rope_embed.periods; rope_base^(4j/d) for j < d/4 where a preset makes them).
    bool rope = false;
    float rope_base = 100.f;
    RopeKind rope_kind = RopeKind::Dinov3;
    int rope_ref_grid = 0;    // EVA-02: the grid its RoPE was trained at (timm ref_feat_shape, 16 for every eva02_*; PE: the
                              // native grid); 0: the run's own grid (coordinates unscaled)
    int map_heads = 0;        // the attention-pooling head's heads (Pooling::Map); 0: the model's (SigLIP); PE: 8

    int grid() const { return image_size / patch; }
    int stored_grid() const { return pos_grid > 0 ? pos_grid : grid(); }
    int patches() const { return grid() * grid(); }   // N at the native size
    // Tokens before the patches: cls, registers, dist (in that order in the sequence).
    int prefix_tokens() const { return int(cls_token) + registers + int(dist_token); }
    int tokens() const { return prefix_tokens() + patches(); }  // T at the native size
    // Rows of the stored position table: cls and dist positions (unless pos_no_cls), then the grid.
    int pos_rows() const { return pos_table ? pos_prefix() + stored_grid() * stored_grid() : 0; }
    int pos_prefix() const { return pos_no_cls ? 0 : int(cls_token) + int(dist_token); }
    bool has_logits() const { return head == Head::Classifier || head == Head::Distilled; }
    // The width of the model's output: classes, or the embedding's width.
    int out_dim() const { return has_logits() ? classes : head == Head::Projection ? embed_dim : width; }
    int mlp_in() const { return act == Act::SwiGlu ? 2 * mlp : mlp; }  // fc1's outputs
    int head_dim() const { return width / heads; }     // d
    int pool_heads() const { return map_heads > 0 ? map_heads : heads; }  // the attention-pooling head's
    int patch_dim() const { return channels * patch * patch; }
    // Throws std::invalid_argument naming the offending field.
    void validate() const;
    std::string describe() const;
};

// A head named for people, the same everywhere on screen and in the command line's output (issue 36
// item 14): "L4 H2" (layer 4, head 2), never "4.2", which reads as a decimal.
std::string head_label(int layer, int head);

// Interventions (what the model uses, not only where it looks). Recorded in the options, so
// every trace, view and export says which interventions produced it.
struct HeadAblation {
    int layer = 0, head = 0;
    bool mean = false;  // false: its slice of attn.z set to 0; true: to its mean over the tokens
    bool operator==(const HeadAblation& o) const { return layer == o.layer && head == o.head && mean == o.mean; }
};
struct SublayerAblation {
    int layer = 0;
    bool mlp = false;  // false: blocks.L.attn.out set to 0; true: blocks.L.mlp.out set to 0
    bool operator==(const SublayerAblation& o) const { return layer == o.layer && mlp == o.mlp; }
};
// Activation patching: a stage's rows (all, or the given tokens) replaced by the same stage of a
// run on another input (same options, no interventions); the pass continues from the patched tensor.
struct ActivationPatch {
    StageId stage;
    std::vector<int> tokens;               // token rows (cls = 0); empty: every row
    std::shared_ptr<const Array> values;   // the other run's stage, the stage's shape
    std::string source;                    // what the other run ran on (a file name), for texts and exports
    bool operator==(const ActivationPatch& o) const {
        return stage == o.stage && tokens == o.tokens && values == o.values && source == o.source;
    }
};
struct Interventions {
    std::vector<HeadAblation> heads;
    std::vector<SublayerAblation> sublayers;
    std::vector<int> dropped;              // patch indices (0-based, row-major), sorted, no repeats
    std::optional<ActivationPatch> patch;
    bool empty() const { return heads.empty() && sublayers.empty() && dropped.empty() && !patch; }
    bool operator==(const Interventions& o) const {
        return heads == o.heads && sublayers == o.sublayers && dropped == o.dropped && patch == o.patch;
    }
    // "head 3.1 zeroed; block 2 mlp.out zeroed; patches 4, 5 dropped; blocks.1.resid_post patched from cat.png"
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
    // The input size of the run (multiples of the patch size); 0: the model's native size.
    // Another size resizes the position embeddings by the family's rule (Config::pos_rule).
    int image_h = 0, image_w = 0;
    Interventions iv;
    Pooling pooling_for(const Config& c) const { return pooling ? *pooling : c.pooling; }
    bool has_bug() const { return bug_scale_after_softmax || bug_reshape_patches; }
    bool operator==(const Options& o) const {
        return affine == o.affine && unbiased == o.unbiased && pooling == o.pooling &&
               bug_scale_after_softmax == o.bug_scale_after_softmax && bug_reshape_patches == o.bug_reshape_patches &&
               image_h == o.image_h && image_w == o.image_w && iv == o.iv;
    }
    // The same options without interventions (the clean run they are compared with).
    Options clean() const {
        Options o = *this;
        o.iv = {};
        return o;
    }
    bool operator!=(const Options& o) const { return !(*this == o); }
    std::string describe() const;  // "elementwise_affine=True, unbiased=False, pooling=model's (cls)"
};

// The sizes of one run: the config at the options' input size, with the dropped patches removed.
struct RunDims {
    int img_h, img_w;   // input (multiples of the patch)
    int gh, gw;         // the patch grid
    int N;              // patches of the grid (patches, patch_embed, tokens, pos_embed, embed have them all)
    int prefix;         // tokens before the patches (cls, registers, dist)
    int T;              // tokens of the blocks: prefix + the patches kept
    int T0;             // tokens of `tokens` and `embed`: cls, dist and every patch (no registers yet)
    bool resized;       // the grid differs from the stored position table's
    std::vector<int> kept;  // the patches in the blocks' sequence (all N unless some were dropped)
    double full_floats = 0; // the floats a full trace of this run records (every stage)
    int kept_n() const { return int(kept.size()); }
    bool dropped() const { return int(kept.size()) != N; }
};
// Throws std::invalid_argument naming what does not fit: a size that is not a multiple of the
// patch or is too large, a pooling the model cannot use, an intervention outside the model.
RunDims run_dims(const Config& c, const Options& o);

struct LayerNormW { Tensor1 g, b; };  // (D), (D)

struct BlockW {
    LayerNormW ln1, ln2;
    Tensor2 qkv_w; Tensor1 qkv_b;    // (3D, D), (3D): rows [q; k; v], heads contiguous
    Tensor2 proj_w; Tensor1 proj_b;  // (D, D), (D)
    Tensor2 fc1_w; Tensor1 fc1_b;    // (M, D), (M); SwiGLU: (2M, D), (2M), the halves x1, x2
    Tensor2 fc2_w; Tensor1 fc2_b;    // (D, M), (D)
    Tensor1 ls1, ls2;                // (D) layer scale (empty without)
    LayerNormW mlp_norm;             // (M) the LayerNorm inside the MLP (Config::mlp_norm; empty without)
    // The four matrices once packed (pack_blocks): each is then kept only here, in the GEMM
    // kernel's layout, and its Tensor2 above is empty. Copies of the weights share them.
    std::shared_ptr<const gemm::Matrix> qkv_p, proj_p, fc1_p, fc2_p;
};

// SigLIP's attention-pooling head (Hugging Face SiglipMultiheadAttentionPoolingHead).
struct MapHeadW {
    Tensor1 probe;                   // (D) the learned query
    Tensor2 in_w; Tensor1 in_b;      // (3D, D), (3D): rows [q; k; v] of nn.MultiheadAttention
    Tensor2 out_w; Tensor1 out_b;    // (D, D), (D)
    LayerNormW ln;
    Tensor2 fc1_w; Tensor1 fc1_b;    // (M, D), (M)
    Tensor2 fc2_w; Tensor1 fc2_b;    // (D, M), (D)
};

struct Weights {
    Config cfg;
    Tensor2 patch_w; Tensor1 patch_b;  // (D, C*P*P) == Conv2d OIHW flattened, (D) (zeros without a bias)
    Tensor1 cls;                       // (D) (empty without a cls token)
    Tensor1 dist;                      // (D) DeiT's distillation token (empty without)
    Tensor2 reg;                       // (R, D) DINOv2's register tokens, DINOv3's storage tokens (empty without)
    Tensor2 pos;                       // (Config::pos_rows(), D), as stored: [cls, dist,] the grid, row-major
                                       // (empty without a table: DINOv3)
    Tensor1 rope_periods;              // (d/4) RoPE's periods (Config::rope; empty without)
    LayerNormW ln_pre;                 // CLIP (empty without)
    LayerNormW patch_norm;             // the patch embeddings' norm (Config::patch_norm; AIMv2) (empty without)
    std::vector<BlockW> blocks;
    LayerNormW ln_f;
    Tensor2 head_w; Tensor1 head_b;    // (K, D), (K) (empty without a classifier)
    Tensor2 head_dist_w; Tensor1 head_dist_b;  // DeiT's distillation head
    Tensor2 proj;                      // (D, E) CLIP: embedding = x @ proj
    MapHeadW map;                      // SigLIP
    // The matrices packed for the GEMM kernel by traced forward passes (gemm.h):
    // a copy starts empty; whoever changes weights in place calls packs.clear()
    // (AdamW does; a change is also detected by sampling).
    gemm::Packs packs;
};

// Weights once (issue 22): the block matrices (qkv, proj, fc1, fc2: nearly all of a model's
// parameters) moved into the GEMM kernel's packed layout and their row-major copies freed, so a
// model is held once. Forward passes read the packed matrices; whatever needs them row-major
// (training, the gradients' backward pass, saving, exporting parameters) unpacks: unpack_blocks
// for good, plain_matrix for one matrix at a time. Does nothing where products run on OpenBLAS
// (VITSCOPE_GEMM=openblas) or for matrices too small to gain from packing (the default model).
void pack_blocks(Weights& w);
void unpack_blocks(Weights& w);
bool blocks_packed(const Weights& w);  // true when any block matrix is held packed only
// The row-major matrix: `plain` itself, or (packed only) unpacked into `tmp`.
const Tensor2& plain_matrix(const Tensor2& plain, const std::shared_ptr<const gemm::Matrix>& p, Tensor2& tmp);
// A copy whose matrices are all row-major (for saving and exporting parameters; costs a copy).
Weights unpacked_copy(const Weights& w);
// Bytes of the parameters as held: row-major tensors plus packed matrices.
size_t weights_bytes(const Weights& w);

// Calls f(name, p, q, ...) for every parameter in a fixed order (timm's names), with
// the same parameter of each of the given Weights (weights, gradients, Adam moments...).
// p, q, ... are the xtensor containers themselves (Tensor1 or Tensor2).
// The families' extra parameters come under timm's names where timm has them (dist_token,
// reg_token, norm_pre, ls1.gamma, head_dist) and ViTScope's own otherwise (proj, map.*);
// each only when the model has it.
template <class F, class W0, class... W>
void for_each_param(F&& f, W0& w0, W&... ws) {
    if (w0.cls.size()) f("cls_token", w0.cls, ws.cls...);
    if (w0.dist.size()) f("dist_token", w0.dist, ws.dist...);
    if (w0.reg.size()) f("reg_token", w0.reg, ws.reg...);
    if (w0.pos.size() || w0.cfg.pos_table) f("pos_embed", w0.pos, ws.pos...);
    if (w0.rope_periods.size()) f("rope_embed.periods", w0.rope_periods, ws.rope_periods...);
    f("patch_embed.proj.weight", w0.patch_w, ws.patch_w...);
    f("patch_embed.proj.bias", w0.patch_b, ws.patch_b...);
    if (w0.patch_norm.g.size()) {  // (RMSNorm: its bias is held as zeros and never read)
        f("patch_embed.norm.weight", w0.patch_norm.g, ws.patch_norm.g...);
        f("patch_embed.norm.bias", w0.patch_norm.b, ws.patch_norm.b...);
    }
    if (w0.ln_pre.g.size()) {
        f("norm_pre.weight", w0.ln_pre.g, ws.ln_pre.g...);
        f("norm_pre.bias", w0.ln_pre.b, ws.ln_pre.b...);
    }
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
        if (w0.blocks[i].ls1.size()) {
            f(p + "ls1.gamma", w0.blocks[i].ls1, ws.blocks[i].ls1...);
            f(p + "ls2.gamma", w0.blocks[i].ls2, ws.blocks[i].ls2...);
        }
        if (w0.blocks[i].mlp_norm.g.size()) {
            f(p + "mlp.norm.weight", w0.blocks[i].mlp_norm.g, ws.blocks[i].mlp_norm.g...);
            f(p + "mlp.norm.bias", w0.blocks[i].mlp_norm.b, ws.blocks[i].mlp_norm.b...);
        }
    }
    f("norm.weight", w0.ln_f.g, ws.ln_f.g...);
    f("norm.bias", w0.ln_f.b, ws.ln_f.b...);
    if (w0.head_w.size()) {
        f("head.weight", w0.head_w, ws.head_w...);
        f("head.bias", w0.head_b, ws.head_b...);
    }
    if (w0.head_dist_w.size()) {
        f("head_dist.weight", w0.head_dist_w, ws.head_dist_w...);
        f("head_dist.bias", w0.head_dist_b, ws.head_dist_b...);
    }
    if (w0.proj.size()) f("proj", w0.proj, ws.proj...);
    if (w0.map.probe.size()) {
        f("map.probe", w0.map.probe, ws.map.probe...);
        f("map.attn.in_proj_weight", w0.map.in_w, ws.map.in_w...);
        f("map.attn.in_proj_bias", w0.map.in_b, ws.map.in_b...);
        f("map.attn.out_proj.weight", w0.map.out_w, ws.map.out_w...);
        f("map.attn.out_proj.bias", w0.map.out_b, ws.map.out_b...);
        f("map.norm.weight", w0.map.ln.g, ws.map.ln.g...);
        f("map.norm.bias", w0.map.ln.b, ws.map.ln.b...);
        f("map.mlp.fc1.weight", w0.map.fc1_w, ws.map.fc1_w...);
        f("map.mlp.fc1.bias", w0.map.fc1_b, ws.map.fc1_b...);
        f("map.mlp.fc2.weight", w0.map.fc2_w, ws.map.fc2_w...);
        f("map.mlp.fc2.bias", w0.map.fc2_b, ws.map.fc2_b...);
    }
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
// Every parameter with its timm name, in for_each_param's order. Packed block matrices
// (pack_blocks) have no row-major data: unpacked_copy first (std::logic_error otherwise).
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
// The random presets' LayerNorms (issue 35): gamma ~ U(0.5, 1.5) and beta ~ U(-0.5, 0.5) in every
// LayerNorm (the blocks', the final one, CLIP's ln_pre, the attention-pool head's), from their own
// stream of `seed`, so that turning elementwise_affine off changes something on a preset, as it
// does on a trained model. init_weights keeps nn.LayerNorm's ones and zeros (training starts there).
void randomize_layernorms(Weights& w, uint64_t seed);
// True when every LayerNorm of the model has gamma = 1 and beta = 0 exactly (nn.LayerNorm's
// initialisation): then elementwise_affine multiplies by 1 and adds 0, and turning it off changes
// nothing. False for a model without LayerNorm weights.
bool layernorms_are_identity(const Weights& w);
// RoPE's periods as DINOv3 makes them from Config::rope_base: base^(2j / (d/2)) for j < d/4, in float32.
Tensor1 rope_periods_of(const Config& c);
// Zero-filled weights of the same shapes (for gradients and Adam moments).
Weights zeros_like(const Weights& w);
// Every parameter the config has, allocated with its shape and not initialised (loaders fill them).
Weights shaped_weights(const Config& c);

// The indices of the k largest of p[0..n), largest first; equal values in index order and NaN
// after every number. The window's predictions and the CLI's print this same order.
std::vector<int> top_k(const float* p, size_t n, size_t k);

}  // namespace vit
