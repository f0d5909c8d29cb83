// The checkpoint layouts' shared pieces (internal to core/io): the file's keys, the plan of one
// layout (its Config and where each canonical parameter comes from), and the helpers every
// convention's file uses. One file per checkpoint convention (layouts_timm.cpp, layouts_hf.cpp,
// layouts_openai.cpp, layouts_torchvision.cpp) writes its plan; layouts.cpp is the driver that
// picks one, reads the sizes from the shapes, applies the config files (layouts_config.cpp) and maps
// the tensors.
#pragma once
#include <cctype>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/io/layouts.h"

namespace vit {
namespace layouts_detail {


using Tensors = std::map<std::string, Array>;
using Meta = std::map<std::string, std::string>;

inline bool starts(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }
inline bool ends(const std::string& s, const std::string& p) {
    return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}
inline std::string num(double v) {
    char b[40];
    std::snprintf(b, sizeof b, "%.9g", v);
    return b;
}

// Every tensor name of the file: the float ones (converted) and the others (dtypes only).
struct Keys {
    const Tensors& t;
    const Meta& dtypes;
    std::set<std::string> all;
    Keys(const Tensors& t_, const Meta& d) : t(t_), dtypes(d) {
        for (auto& [k, v] : t) all.insert(k);
        for (auto& [k, v] : d) all.insert(k);
    }
    bool has(const std::string& k) const { return all.count(k) != 0; }
    const Array* get(const std::string& k) const {
        auto it = t.find(k);
        return it == t.end() ? nullptr : &it->second;
    }
    bool any_prefix(const std::string& p) const {
        auto it = all.lower_bound(p);
        return it != all.end() && starts(*it, p);
    }
    // The first key containing `part` (or "").
    std::string containing(const std::string& part) const {
        for (auto& k : all)
            if (k.find(part) != std::string::npos) return k;
        return "";
    }
    size_t count_prefix(const std::string& p) const {
        size_t n = 0;
        for (auto it = all.lower_bound(p); it != all.end() && starts(*it, p); ++it) ++n;
        return n;
    }
};

// 1 + the largest N of "<prefix>N." keys (0 when none).
inline int count_blocks(const Keys& k, const std::string& prefix) {
    int n = 0;
    for (auto it = k.all.lower_bound(prefix); it != k.all.end() && starts(*it, prefix); ++it) {
        size_t e = prefix.size();
        int v = 0;
        while (e < it->size() && std::isdigit(static_cast<unsigned char>((*it)[e])) && e - prefix.size() < 6)
            v = v * 10 + ((*it)[e++] - '0');
        if (e > prefix.size() && e < it->size() && (*it)[e] == '.') n = std::max(n, v + 1);
    }
    return n;
}

// Lower-case alphanumeric words of a name: "vit_b_32-quickgelu-laion400m" -> vit, b, 32, quickgelu, laion400m.
inline std::set<std::string> words(const std::string& name) {
    std::set<std::string> w;
    std::string cur;
    for (char ch : name + " ") {
        if (std::isalnum(static_cast<unsigned char>(ch))) {
            cur += char(std::tolower(static_cast<unsigned char>(ch)));
        } else if (!cur.empty()) {
            w.insert(cur);
            cur.clear();
        }
    }
    return w;
}

// A model family ViTScope does not run, recognised by its key names (or config.json's model_type):
// the message names the family and what it has that a plain ViT lacks. "" for none.
inline std::string unsupported(const Keys& k, const SideConfig& side) {
    auto key_with = [&](const char* part) { return k.containing(part); };
    std::string e;
    if (!(e = key_with("relative_position_bias_table")).empty() || !(e = key_with("relative_position_index")).empty()) {
        if (!key_with("layers.0.blocks.").empty() || !key_with(".downsample.").empty())
            return "a Swin Transformer checkpoint ('" + e + "'): windowed attention with a relative position bias and "
                   "patch merging between stages, which the plain ViT families here do not have";
        return "a BEiT-style checkpoint ('" + e + "'): a relative position bias inside every attention, which the plain "
               "ViT families here do not have";
    }
    if (!(e = key_with(".lambda_1")).empty() && !key_with("beit.").empty())
        return "a BEiT checkpoint ('" + e + "'): a relative position bias inside every attention";
    // (timm's EVA-02 Base/Large also name attn.q_proj, beside the SwiGLU's fc1_g: run, layouts_eva.cpp)
    if (!(e = key_with("rope.")).empty() || !(e = key_with("freqs_cos")).empty() ||
        (!(e = key_with("attn.q_proj.weight")).empty() && key_with("mlp.fc1_g.weight").empty()))
        if (key_with("self_attn.").empty())  // Hugging Face CLIP/SigLIP also name q_proj, under self_attn.
            return "an EVA-style checkpoint ('" + e + "'): saved rotary position embeddings or separate q/k/v projections "
                   "without timm's SwiGLU (BAAI's own EVA-02 release, the EVA-02 CLIP towers), which are not read; EVA-02 "
                   "as timm saves it is";
    // (open_clip's PE-Core: a timm vit_pe_core_* as visual.trunk.*: read, layouts_eva.cpp)
    if (!(e = key_with("visual.trunk.")).empty() && key_with("visual.trunk.attn_pool.latent").empty())
        return "an open_clip model with a timm image tower ('" + e + "'): open_clip's visual.trunk.* wrapper is not "
               "read; load the timm or Hugging Face release of the same tower";
    if (!(e = key_with("visual.layer1.")).empty())
        return "a CLIP model with a ResNet image tower ('" + e + "'): a convolutional network, not a ViT";
    // (Meta's PE-Core release: visual.attn_pool.probe, an attention pool that is read, layouts_openai.cpp)
    if (!(e = key_with("visual.attn_pool.")).empty() && key_with("visual.attn_pool.probe").empty())
        return "a CoCa model ('" + e + "'): its image tower ends in an attentional pooler that is not implemented";
    if ((!key_with("stages.").empty() && (!key_with("stem.").empty() || !key_with("downsample").empty())) ||
        !(e = key_with(".dwconv.")).empty() || !(e = key_with("conv_dw.")).empty())
        return "a ConvNeXt-style convolutional network ('" + (e.empty() ? key_with("stages.") : e) + "'), not a ViT";
    if (!(e = key_with("decoder.decoder_layers.")).empty())
        return "a Hugging Face ViTMAE checkpoint ('" + e + "'): its forward masks 75% of the patches at random; load "
               "facebookresearch/mae's release (mae_pretrain_vit_*.pth) instead, whose encoder ViTScope runs on every patch";
    if (side.config && side.config->model.kind == ConfigKind::HuggingFace && side.config->model.model_type) {
        const std::string& t = *side.config->model.model_type;
        if (t == "swin" || t == "swinv2" || t == "beit" || t == "data2vec-vision" || t == "convnext" || t == "convnextv2" ||
            t == "vit_mae" || t == "eva" || t == "levit" || t == "pvt" || t == "vit_hybrid" || t == "dinat" || t == "nat")
            return "a '" + t + "' model (" + side.path + " model_type): not one of the ViT families ViTScope runs (ViT, "
                   "DeiT, DINO, DINOv2, CLIP, SigLIP, MAE)";
    }
    return "";
}

// ------------------------------------------------------------------ the plan of one layout

enum class Kind { Timm, HfVit, HfClip, OpenAI, Torchvision, Dinov3, Aimv2, Eva02, Pe };

// Where one canonical parameter comes from in the file.
struct Src {
    std::vector<std::string> keys;  // one; three stacked along the rows (q, k, v; an empty one: zeros, HF DINOv3's
                                    // missing k_proj bias); none: zeros (CLIP's missing patch bias)
    bool transpose = false;         // the file holds the matrix transposed (Hugging Face visual_projection)
    std::string mask;               // a tensor of 0s and 1s the value is multiplied by (DINOv3's qkv bias_mask)
    std::vector<int> shares;        // stacked keys of unequal rows: each key's share (PE's attn_pool q and kv: {1, 2});
                                    // empty: equal parts
};

struct Plan {
    Kind kind = Kind::Timm;
    Family layout = Family::Timm;
    std::string root;                 // the model's prefix inside the file ("", "vision_model.", "teacher.backbone.")
    std::string it;                   // what the file is, in words
    Config c;                         // the family's parts; sizes come from the shapes
    std::function<Src(const std::string&)> source;
    std::string blocks;               // the blocks' key prefix, root included
    int pos_prefix = 1;               // rows of the stored position table before the grid
    bool registers = false;           // the file has register tokens (their number: the tensor's rows)
    std::vector<std::pair<std::string, std::string>> ignore;  // (key prefix, what it is): tensors not used
    std::vector<std::string> notes;
    bool clip_rule = false;           // heads: OpenAI's width / 64 when nothing else says
    bool legacy_cfg = false;          // a vanilla file saved by an older ViTScope: vitscope.config's settings
    std::string eps_default_from;     // whose default eps the family takes
    bool rope_from_base = false;      // RoPE's periods are not in the file: made from Config::rope_base (HF DINOv3)
    bool rope_ref_from_grid = false;  // Config::rope_ref_grid is the position table's grid (PE's ref_feat_shape)
    int head_width = 0;               // heads = width / head_width where nothing states them (EVA-02: 64), and why
    std::string heads_rule;
};

// A plan's start: its convention, the checkpoint family it names, the model's root and where its blocks are.
inline Plan start_plan(Kind kind, Family layout, const std::string& R, const std::string& blocks) {
    Plan p;
    p.kind = kind;
    p.layout = layout;
    p.root = R;
    p.blocks = blocks;
    return p;
}

// "blocks.3.attn.qkv.weight" -> (3, "attn.qkv.weight"); -1 for names outside the blocks.
inline std::pair<int, std::string> block_of(const std::string& n) {
    if (!starts(n, "blocks.")) return {-1, n};
    size_t e = 7;
    while (e < n.size() && std::isdigit(static_cast<unsigned char>(n[e]))) ++e;
    return {std::atoi(n.c_str() + 7), n.substr(e + 1)};
}
// "attn.qkv.weight" -> ("attn.qkv", "weight")
inline std::pair<std::string, std::string> split_param(const std::string& n) {
    size_t d = n.rfind('.');
    if (d == std::string::npos) return {"", n};
    return {n.substr(0, d), n.substr(d + 1)};
}
inline Src one(std::string k) { return Src{{std::move(k)}, false, ""}; }


// One plan per checkpoint convention (the files named above).
Plan plan_timm(const Keys& k, const std::string& R, const Meta& meta, const SideConfig& side, const std::string& what);
Plan plan_hf_vit(const Keys& k, const std::string& R, const SideConfig& side, const std::string& what);
Plan plan_hf_clip(const Keys& k, const std::string& R, const SideConfig& side, const std::string& what);
Plan plan_openai(const Keys& k, const std::string& R, const Meta& meta, const SideConfig& side, const std::string& what);
Plan plan_torchvision(const Keys& k, const std::string& R);
Plan plan_dinov3(const Keys& k, const std::string& R, const std::string& what, const SideConfig& side);
Plan plan_aimv2(const Keys& k, const std::string& R, const std::string& what);
Plan plan_eva02(const Keys& k, const std::string& R, const std::string& what, const SideConfig& side);
Plan plan_pe(const Keys& k, const std::string& R, const std::string& what);
Plan plan_pe_meta(const Keys& k, const std::string& R, const std::string& what);
void pe_core_parts(const Keys& k, const std::string& pool_fc1, const std::string& block_fc1, bool cls, const std::string& what,
                   Plan& p);
Plan plan_own();

// Settings from the config files beside the weights (layouts_config.cpp).
void check_config(const ModelConfigFile& m, const std::string& path, const std::string& what, const Config& c,
                  int regs_in_file);
Act act_of(const ModelConfigFile& m, const std::string& path);
void apply_preprocess(const PreprocessConfig& p, ConfigKind from, Config& c, std::vector<std::string>& notes);
void default_preprocess(const Plan& p, Config& c);
int meta_int(const Meta& meta, const char* k, const std::string& what);
// The tensor of a canonical parameter's first source key, or a FileError naming the key.
const Array& need(const Keys& k, const Src& s, const std::string& what, const char* role);
int dim_of(const Array& t, const std::string& key, size_t axis, const std::string& what);

}  // namespace layouts_detail
}  // namespace vit
