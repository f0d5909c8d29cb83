// The checkpoint layouts of every family: which one a file is (from its key names and shapes,
// its __metadata__, the config files beside it and, where nothing else tells, its name), the
// Config that implies, and where each canonical parameter comes from in the file.
// docs/families.md lists the layouts with their upstream sources.
#include "core/io/layouts.h"
#include "core/io/layouts_internal.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include <xtensor/xbuilder.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xoperation.hpp>

namespace vit {

using namespace layouts_detail;

namespace {

// ------------------------------------------------------------------ the mapping

Shape squeeze_leading(const Shape& s) {
    Shape r = s;
    while (r.size() > 1 && r[0] == 1) r.erase(r.begin());
    return r;
}

struct Mapper {
    Tensors& src;
    const Meta& dtypes;
    std::string what;
    std::set<std::string> used;
    std::vector<std::string> missing, misshaped;
    size_t zeros = 0;  // values of the parts the layout has not, filled with zeros

    // The file's tensor `key` as `want` (leading 1s ignored; OIHW flattened), or null (listed).
    Array* fetch(const std::string& key, const Shape& want) {
        used.insert(key);
        auto it = src.find(key);
        if (it == src.end()) {
            if (auto d = dtypes.find(key); d != dtypes.end())
                misshaped.push_back(key + ": stored as " + d->second + "; only F32, F16, BF16 and F64 weights are supported");
            else
                missing.push_back(key + " " + shape_str(want));
            return nullptr;
        }
        Shape got = shape_of(it->second);
        const bool conv_flat = want.size() == 2 && got.size() == 4 && got[0] == want[0] && shape_numel(got) == shape_numel(want);
        if (squeeze_leading(got) != squeeze_leading(want) && !conv_flat) {
            misshaped.push_back(key + ": file has " + shape_str(got) + ", config needs " + shape_str(want));
            return nullptr;
        }
        it->second.reshape(want);
        return &it->second;
    }
    // dst *= the mask tensor (0s and 1s: DINOv3's LinearKMaskedBias multiplies its bias by it). A mask
    // with anything else (its NaN before initialisation) is refused naming it.
    template <size_t N>
    void apply_mask(const Src& s, const Shape& want, xt::xtensor<float, N>& dst) {
        const Array* m = fetch(s.mask, want);
        if (!m || dst.size() != m->size()) return;
        for (size_t i = 0; i < m->size(); ++i) {
            const float v = m->data()[i];
            if (v != 0.f && v != 1.f) {
                misshaped.push_back(s.mask + ": element " + std::to_string(i) + " is " + std::to_string(v) +
                                    "; a bias mask holds 0s and 1s");
                return;
            }
            dst.data()[i] *= v;
        }
    }
    // Moves (or stacks, or transposes) the file's tensors into dst.
    template <size_t N>
    void take(const Src& s, const Shape& want, xt::xtensor<float, N>& dst) {
        if (s.keys.empty()) {  // a part the layout has not: zeros (CLIP's patch conv has no bias)
            dst = xt::zeros<float>(want);
            zeros += shape_numel(want);
            return;
        }
        if (s.keys.size() == 1 && !s.transpose) {
            // the file's tensor goes as soon as it is copied: a model is never held twice while loading
            if (Array* a = fetch(s.keys[0], want)) { dst = xt::xtensor<float, N>(std::move(*a)); *a = Array(); }
            if (!s.mask.empty()) apply_mask(s, want, dst);
            return;
        }
        if (s.transpose) {  // (E, D) in the file, (D, E) here
            if constexpr (N == 2) {
                Array* a = fetch(s.keys[0], Shape{want[1], want[0]});
                if (a) { dst = xt::transpose(xt::xtensor<float, 2>(std::move(*a))); *a = Array(); }
            }
            return;
        }
        // q, k, v stacked along the rows: torch.cat([q, k, v]), each (want[0] / 3, ...); or parts of unequal rows in the
        // shares Src::shares gives (PE's attention pool: q, then kv of twice its rows)
        std::vector<size_t> rows(s.keys.size(), want[0] / s.keys.size());
        if (!s.shares.empty()) {
            size_t total = 0;
            for (int sh : s.shares) total += size_t(sh);
            for (size_t i = 0; i < rows.size(); ++i) rows[i] = want[0] * size_t(s.shares[i]) / total;
        }
        const size_t row_numel = want[0] ? shape_numel(want) / want[0] : 0;
        std::vector<Array*> got;
        bool missing_any = false;
        for (size_t i = 0; i < s.keys.size(); ++i) {
            Shape part = want;
            part[0] = rows[i];
            got.push_back(s.keys[i].empty() ? nullptr : fetch(s.keys[i], part));
            missing_any |= !s.keys[i].empty() && !got.back();
        }
        if (missing_any) return;
        dst = xt::xtensor<float, N>::from_shape(want);
        size_t at = 0;
        for (size_t i = 0; i < got.size(); ++i) {
            const size_t n = rows[i] * row_numel;
            if (got[i]) std::copy(got[i]->data(), got[i]->data() + n, dst.data() + at);
            else std::fill(dst.data() + at, dst.data() + at + n, 0.f), zeros += n;  // a part the file has not
            at += n;
        }
        for (Array* a : got)
            if (a) *a = Array();
    }
};

}  // namespace

Shape param_shape(const Config& c, const std::string& name) {
    const size_t D = c.width, M = c.mlp, Mi = c.mlp_in(), K = c.classes, E = size_t(std::max(c.embed_dim, 0));
    if (name == "cls_token" || name == "dist_token" || name == "map.probe") return {D};
    if (name == "reg_token") return {size_t(c.registers), D};
    if (name == "pos_embed") return {size_t(c.pos_rows()), D};
    if (name == "rope_embed.periods") return {size_t(std::max(1, c.head_dim() / 4))};
    if (name == "patch_embed.proj.weight") return {D, size_t(c.patch_dim())};
    if (name == "proj") return {D, E};
    if (name == "head.weight" || name == "head_dist.weight") return {K, D};
    if (name == "head.bias" || name == "head_dist.bias") return {K};
    auto [i, rest] = block_of(name);
    const std::string& r = i >= 0 ? rest : name;
    const std::string base = starts(r, "map.") ? r.substr(4) : r;
    const bool map = starts(r, "map.");
    if (base == "attn.qkv.weight" || base == "attn.in_proj_weight") return {3 * D, D};
    if (base == "attn.qkv.bias" || base == "attn.in_proj_bias") return {3 * D};
    if (base == "attn.proj.weight" || base == "attn.out_proj.weight") return {D, D};
    if (base == "mlp.fc1.weight") return {map ? M : Mi, D};
    if (base == "mlp.fc1.bias") return {map ? M : Mi};
    if (base == "mlp.fc2.weight") return {D, M};
    if (base == "mlp.norm.weight" || base == "mlp.norm.bias") return {M};  // EVA-02 Base/Large: over the hidden units
    return {D};  // LayerNorm weights and biases, every other bias, ls1/ls2 gammas
}

namespace {

// One load, as its steps see it: the file's tensors and metadata, the config files beside it, the
// plan of its layout and the model being made.
struct Load {
    Tensors& src;
    Meta dtypes;
    const Meta& meta;
    const std::string& what;
    const LoadOverrides& ov;
    const SideConfig& side;
    LoadedModel lm;
    Plan p;
    bool own = false;                     // ViTScope's own file (vitscope.config with the family)
    std::optional<Config> legacy_stated;  // an older ViTScope file's vitscope.config, as it states the model
    // the config files beside it (check_side_configs)
    const ModelConfigFile* cfg = nullptr;   // config.json (not when it is open_clip's)
    const ModelConfigFile* ocfg = nullptr;  // open_clip's config, for open_clip's files
    std::string ocfg_path;
    ModelConfigFile hfd;                    // the Hugging Face config with transformers' defaults for what it leaves out

    // The steps, in order (load_layout).
    void choose_plan();                   // which layout the file is, and its plan
    void sizes_from_shapes();
    void check_side_configs();
    void settle_heads();
    void settle_eps_pooling_preprocess();
    void settle_class_names();
    LoadedModel map_tensors();
};

// DataParallel's "module." on every key goes (the pth reader drops it too).
void strip_module_prefix(Tensors& src, Meta& dtypes) {
    bool all = !src.empty() || !dtypes.empty();
    for (auto& [k, v] : src) all &= starts(k, "module.") && k.size() > 7;
    for (auto& [k, v] : dtypes) all &= starts(k, "module.") && k.size() > 7;
    if (all) {
        Tensors s2;
        Meta d2;
        for (auto& [k, v] : src) s2.emplace(k.substr(7), std::move(v));
        for (auto& [k, v] : dtypes) d2.emplace(k.substr(7), v);
        src = std::move(s2);
        dtypes = std::move(d2);
    }
}

// Which layout the file is (its patch embedding's key names it) and that layout's plan.
void Load::choose_plan() {
    lm.source = what;
    lm.metadata = meta;
    lm.nonfinite = nonfinite_tensors(src);  // by the file's own names, before the mapping moves them
    if (own) {
        p = plan_own();
        p.it = "ViTScope's own file";
        p.c = config_from_json(meta.at("vitscope.config"), what);
    } else {
        const Keys k(src, dtypes);
        if (std::string u = unsupported(k, side); !u.empty()) throw FileError(what + ": " + u);
        // The patch embedding names the layout; what comes before it is the model's root in the file.
        struct L { const char* suffix; Kind kind; };
        static const L layouts[] = {{"embeddings.patch_embeddings.projection.weight", Kind::HfVit},
                                    {"embeddings.patch_embeddings.weight", Kind::Dinov3},  // HF DINOv3ViTModel
                                    {"embeddings.patch_embedding.weight", Kind::HfClip},
                                    {"visual.conv1.weight", Kind::OpenAI},
                                    {"conv_proj.weight", Kind::Torchvision},
                                    {"preprocessor.patchifier.proj.weight", Kind::Aimv2},  // apple/ml-aim AIMv2
                                    {"patch_embed.proj.weight", Kind::Timm}};
        std::string root;
        bool found = false;
        Kind kind = Kind::Timm;
        for (const L& l : layouts) {
            for (auto& key : k.all) {
                if (!ends(key, l.suffix)) continue;
                std::string r = key.substr(0, key.size() - std::strlen(l.suffix));
                if (!r.empty() && r.back() != '.') continue;
                // the shortest root (the model, not a sub-module's copy); of equal ones the teacher's,
                // which DINO evaluates (teacher.backbone. and student.backbone. in a training checkpoint)
                if (found && (r.size() > root.size() || (r.size() == root.size() && !starts(r, "teacher.")))) continue;
                root = r;
                kind = l.kind;
                found = true;
            }
            if (found) break;
        }
        if (!found) {
            std::string some;
            int i = 0;
            for (auto& key : k.all) if (i++ < 5) some += "\n    " + key;
            throw FileError(what + ": not a ViT checkpoint I know: no patch embedding of timm ('patch_embed.proj.weight'), "
                                   "Hugging Face ('vit.embeddings.patch_embeddings.projection.weight', "
                                   "'vision_model.embeddings.patch_embedding.weight'), OpenAI / open_clip "
                                   "('visual.conv1.weight') or torchvision ('conv_proj.weight')" +
                            (side.config && side.config->model.model_type ? " (" + side.path + " says model_type '" +
                                                                                *side.config->model.model_type + "')" : std::string()) +
                            ". First keys:" + some);
        }
        // DINOv2 training checkpoints split the blocks into chunks: blocks.<chunk>.<index>.
        if (kind == Kind::Timm && k.has(root + "blocks.0.0.norm1.weight")) {
            const std::string b = root + "blocks.";
            auto rename = [&](const std::string& key) {
                if (!starts(key, b)) return key;
                size_t e = b.size();
                while (e < key.size() && std::isdigit(static_cast<unsigned char>(key[e]))) ++e;
                return e > b.size() && e < key.size() && key[e] == '.' ? b + key.substr(e + 1) : key;
            };
            Tensors s2;
            Meta d2;
            for (auto& [key, v] : src) s2.insert_or_assign(rename(key), std::move(v));
            for (auto& [key, v] : dtypes) d2.insert_or_assign(rename(key), v);
            src = std::move(s2);
            dtypes = std::move(d2);
            lm.notes.push_back("the blocks are stored in chunks (blocks.<chunk>.<index>, DINOv2's block_chunks): read by index");
        }
        // DINOv3 shares timm's patch embedding name; its storage tokens and RoPE periods tell it apart
        if (kind == Kind::Timm && (k.has(root + "storage_tokens") || k.has(root + "rope_embed.periods"))) kind = Kind::Dinov3;
        // timm's DINOv3 (eva.py): register tokens, gamma_1 layer scale and no position table
        if (kind == Kind::Timm && k.has(root + "reg_token") && k.has(root + "blocks.0.gamma_1") && !k.has(root + "pos_embed"))
            kind = Kind::Dinov3;
        // timm's AIMv2: a norm on the patch embeddings and the SwiGLU's fc1_g / fc1_x
        if (kind == Kind::Timm && k.has(root + "patch_embed.norm.weight") && k.has(root + "blocks.0.mlp.fc1_g.weight"))
            kind = Kind::Aimv2;
        // timm's EVA-02 (eva.py): q_bias and v_bias beside a fused qkv, and a position table (timm's DINOv3 has none)
        if (kind == Kind::Timm && (k.has(root + "blocks.0.attn.q_bias") || k.has(root + "blocks.0.attn.q_proj.weight")) &&
            k.has(root + "pos_embed"))
            kind = Kind::Eva02;
        // timm's Perception Encoder (eva.py vit_pe_*): norm_pre and an attention pool (timm's CLIP towers have norm_pre
        // alone, its SigLIPs attn_pool alone)
        if (kind == Kind::Timm && k.has(root + "norm_pre.weight") && k.has(root + "attn_pool.latent")) kind = Kind::Pe;
        const Keys k2(src, dtypes);
        switch (kind) {
            case Kind::Dinov3: p = plan_dinov3(k2, root, what, side); break;
            case Kind::Aimv2: p = plan_aimv2(k2, root, what); break;
            case Kind::Eva02: p = plan_eva02(k2, root, what, side); break;
            case Kind::Pe: p = plan_pe(k2, root, what); break;
            case Kind::Timm: p = plan_timm(k2, root, meta, side, what); break;
            case Kind::HfVit: p = plan_hf_vit(k2, root, side, what); break;
            case Kind::HfClip: p = plan_hf_clip(k2, root, side, what); break;
            case Kind::OpenAI: p = plan_openai(k2, root, meta, side, what); break;
            case Kind::Torchvision: p = plan_torchvision(k2, root); break;
        }
        // An older ViTScope file of the vanilla ViT: its settings (heads, eps, preprocessing, names) are kept.
        if (auto it = meta.find("vitscope.config"); it != meta.end() && kind == Kind::Timm && p.c.family == ModelFamily::ViT &&
                                                    p.c.head == Head::Classifier) {
            Config legacy = config_from_json(it->second, what);
            legacy_stated = legacy;
            legacy.pooling = p.c.pooling;
            legacy.layer_scale = p.c.layer_scale;
            legacy.pos_no_cls = p.c.pos_no_cls;
            p.c = legacy;
            p.legacy_cfg = true;
        }
    }
    lm.family = p.layout;
    lm.layout = p.it;
}

// The sizes (width, patch, grid, depth, MLP, registers, classes, ...) from the tensors' shapes.
void Load::sizes_from_shapes() {
    Config& c = p.c;
    const Keys k(src, dtypes);
    if (!own) {
        const Src ps = p.source("patch_embed.proj.weight");
        const Array& pw = need(k, ps, what, "the patch embedding");
        if (pw.dimension() != 4 || pw.shape(2) != pw.shape(3))
            throw FileError(what + ": " + ps.keys[0] + " has shape " + shape_str_of(pw) + ", expected (D, C, P, P)");
        c.width = dim_of(pw, ps.keys[0], 0, what);
        c.channels = dim_of(pw, ps.keys[0], 1, what);
        c.patch = dim_of(pw, ps.keys[0], 2, what);
        if (c.width < 1 || c.patch < 1)
            throw FileError(what + ": " + ps.keys[0] + " has shape " + shape_str_of(pw) + ": an empty patch embedding");
        if (c.channels != 1 && c.channels != 3)
            throw FileError(what + ": " + ps.keys[0] + " has shape " + shape_str_of(pw) + ": " + std::to_string(c.channels) +
                            " input channels (1 or 3 expected)");
        if (!c.pos_table) {
            // RoPE alone (DINOv3): no table to tell the size; the family's default, and any multiple of the
            // patch runs
            c.image_size = 224 - 224 % c.patch;  // a config beside it may say another (check_side_configs)
            c.pos_grid = 0;
        }
        const Src pos_src = c.pos_table ? p.source("pos_embed") : Src{};
        const Array& pos = c.pos_table ? need(k, pos_src, what, "the position embedding") : pw;
        const size_t T = pos.size() / std::max<size_t>(1, size_t(c.width));
        const size_t pre = size_t(p.pos_prefix);
        const size_t G = size_t(std::lround(std::sqrt(double(T > pre ? T - pre : 0))));
        const char* rows_text = pre == 0 ? "" : pre == 1 ? " plus the cls token" : " plus the cls and distillation tokens";
        if (!c.pos_table) {
        } else if (pos.size() != T * size_t(c.width) || T <= pre || G * G + pre != T)
            throw FileError(what + ": " + pos_src.keys[0] + " has shape " + shape_str_of(pos) + " (" + std::to_string(T) +
                            " positions); expected a square grid" + rows_text);
        if (c.pos_table && int64_t(G) * c.patch > kMaxImageSize)
            throw FileError(what + ": " + pos_src.keys[0] + " has a " + std::to_string(G) + "x" + std::to_string(G) + " grid of " +
                            std::to_string(c.patch) + "-pixel patches, over the " + std::to_string(kMaxImageSize) + "-pixel image limit");
        if (c.pos_table) {
            c.image_size = int(G) * c.patch;
            c.pos_grid = 0;
            if (p.rope_ref_from_grid) c.rope_ref_grid = int(G);  // PE: RoPE's reference grid is the native one
        }
        c.depth = count_blocks(k, p.blocks);
        if (c.depth > kMaxLayers) throw FileError(what + ": " + std::to_string(c.depth) + " blocks, over the limit of " + std::to_string(kMaxLayers));
        if (c.depth > 0) {
            const Src f1 = p.source("blocks.0.mlp.fc1.weight"), f2 = p.source("blocks.0.mlp.fc2.weight");
            if (!f1.keys.empty() && !k.get(f1.keys[0]) && !k.dtypes.count(f1.keys[0])) {
                // fc1 is missing: its width comes from fc2's columns (or, with neither, any width will
                // do), and the mapping below lists every missing tensor at once rather than this one.
                const Array* fc2 = f2.keys.empty() ? nullptr : k.get(f2.keys[0]);
                c.mlp = int(std::min<int64_t>(kMaxMlp, fc2 && fc2->dimension() == 2 ? int64_t(fc2->shape(1)) : 4 * int64_t(c.width)));
            } else {
                const Array& fc1 = need(k, f1, what, "block 0's first MLP layer");
                // (fc1 stacked from two tensors, DINOv3's SwiGLU w1 and w2: their rows together)
                const int rows = dim_of(fc1, f1.keys[0], 0, what) * int(f1.keys.size());
                if (c.act == Act::SwiGlu) {
                    if (rows % 2) throw FileError(what + ": " + f1.keys[0] + " has shape " + shape_str_of(fc1) + ": a SwiGLU needs an even number of rows (x1 and x2)");
                    c.mlp = rows / 2;
                } else {
                    c.mlp = rows;
                }
            }
        } else {
            c.mlp = int(std::min<int64_t>(kMaxMlp, 4 * int64_t(c.width)));
        }
        if (p.registers) {
            const Src rs = p.source("reg_token");
            const Array& r = need(k, rs, what, "the register tokens");
            c.registers = dim_of(r, rs.keys[0], r.dimension() >= 2 ? r.dimension() - 2 : 0, what);
            if (c.registers < 1 || c.registers > 256)
                throw FileError(what + ": " + rs.keys[0] + " has shape " + shape_str_of(r) + ": 1..256 register tokens expected");
        }
        if (c.has_logits()) {
            const Src hs = p.source("head.weight");
            const Array* hw = hs.keys.empty() ? nullptr : k.get(hs.keys[0]);
            if (!hw)
                throw FileError(what + ": no classification head '" + (hs.keys.empty() ? std::string("head") : hs.keys[0]) +
                                "' (a " + p.it + " ends in one)");
            c.classes = dim_of(*hw, hs.keys[0], 0, what);
        } else {
            c.classes = 1;
        }
        if (c.head == Head::Projection) {
            const Src js = p.source("proj");
            const Array& pj = need(k, js, what, "the projection");
            c.embed_dim = dim_of(pj, js.keys[0], js.transpose ? 0 : 1, what);
        }
        if (c.family == ModelFamily::Dinov2 && p.kind == Kind::Timm && p.layout == Family::Facebook && c.image_size > 224 &&
            224 % c.patch == 0)
            lm.notes.push_back("runs at " + std::to_string(c.image_size) + "x" + std::to_string(c.image_size) +
                               ", the size its position table was learned at; DINOv2's own evaluation resizes to 256 and "
                               "crops 224 (--image-size 224 runs it there, the table resized by DINOv2's rule)");
        if (legacy_stated) {
            // what an older ViTScope file's config states of the model's sizes must be what its tensors hold
            const Config& st = *legacy_stated;
            for (const auto& [field, said, has] : {std::tuple<const char*, int, int>{"image_size", st.image_size, c.image_size},
                                                   {"patch", st.patch, c.patch}, {"channels", st.channels, c.channels},
                                                   {"width", st.width, c.width}, {"depth", st.depth, c.depth},
                                                   {"mlp", st.mlp, c.mlp}, {"classes", st.classes, c.classes}})
                if (said != has)
                    throw FileError(what + ": __metadata__ vitscope.config says " + field + " " + std::to_string(said) +
                                    " but the tensors hold " + std::to_string(has) + " (it describes another model)");
        }
        if (!p.legacy_cfg) c.name = std::string(family_name(p.layout)) + "-" + (c.family == ModelFamily::ViT ? "vit" : [&] {
            std::string f = family_label(c.family);
            for (char& ch : f) ch = char(std::tolower(static_cast<unsigned char>(ch)));
            return f;
        }());
    }
}

// The config files beside it must describe this model; what they add (the activation, metadata).
void Load::check_side_configs() {
    Config& c = p.c;
    cfg = side.config ? &side.config->model : nullptr;
    // (open_clip's own files: its CLIP towers, and its PE-Core, a timm tower as visual.trunk.*)
    const bool oc_used = (p.kind == Kind::OpenAI || (p.kind == Kind::Pe && p.layout == Family::OpenClip)) &&
                         (side.open_clip || (cfg && cfg->kind == ConfigKind::OpenClip));
    ocfg = !oc_used ? nullptr : side.open_clip ? &side.open_clip->model : cfg;
    ocfg_path = side.open_clip ? side.open_clip_path : side.path;
    if (cfg && cfg->kind == ConfigKind::OpenClip) cfg = nullptr;  // an open_clip config named config.json: used as open_clip's
    if (cfg && cfg->kind == ConfigKind::HuggingFace) {
        hfd = *cfg;
        apply_hf_defaults(hfd);
    }
    if (!own) {
        // Hugging Face Dinov2 runs at its processor's crop (224) with the table learned at 518 resized.
        if (p.kind == Kind::HfVit && c.family == ModelFamily::Dinov2 && side.preprocessor && side.preprocessor->crop_height &&
            side.preprocessor->do_center_crop.value_or(true) && *side.preprocessor->crop_height == *side.preprocessor->crop_width &&
            *side.preprocessor->crop_height % c.patch == 0 && *side.preprocessor->crop_height != c.image_size) {
            c.pos_grid = c.image_size / c.patch;
            c.image_size = *side.preprocessor->crop_height;
            lm.notes.push_back("runs at " + std::to_string(c.image_size) + "x" + std::to_string(c.image_size) + " (" +
                               side.preprocessor_path + " crop_size), its " + std::to_string(c.pos_grid) + "x" +
                               std::to_string(c.pos_grid) + " position table resized as Hugging Face's Dinov2 does");
        }
        if (!c.pos_table) {
            // no table to tell the size: the config's image_size, else DINOv3's default
            std::string from = "DINOv3's default";
            const PreprocessConfig* tpre = side.config && side.config->model.kind == ConfigKind::Timm ? &side.config->pre : nullptr;
            if (cfg && cfg->image_height && cfg->image_height == cfg->image_width && *cfg->image_height % c.patch == 0) {
                c.image_size = *cfg->image_height;
                from = side.path + " image_size";
            } else if (tpre && tpre->input_height && tpre->input_height == tpre->input_width && *tpre->input_height % c.patch == 0) {
                c.image_size = *tpre->input_height;  // timm's pretrained_cfg (vit_*_dinov3: 256)
                from = side.path + " pretrained_cfg.input_size";
            } else if (p.layout == Family::Timm) {
                c.image_size = 256 - 256 % c.patch;
                from = "timm's vit_*_dinov3 default, pretrained_cfg input_size 256";
            }
            lm.notes.push_back("no position table (RoPE): runs at " + std::to_string(c.image_size) + "x" +
                               std::to_string(c.image_size) + " (" + from + "); any multiple of " + std::to_string(c.patch) +
                               " pixels runs (--image-size)");
        }
        if (cfg) check_config(*cfg, side.path, what, c, c.registers);
        if (ocfg) check_config(*ocfg, ocfg_path, what, c, c.registers);
        if (cfg) lm.metadata["hf.config"] = side.path;
        if (cfg && cfg->model_type) lm.metadata.emplace("hf.model_type", *cfg->model_type);
        if (cfg && cfg->kind == ConfigKind::Timm && !cfg->architectures.empty())
            lm.metadata.emplace("hf.model_type", "timm " + cfg->architectures[0]);
        if (ocfg) lm.metadata["open_clip.config"] = ocfg_path;
        // The activation a Hugging Face config states (CLIP's varies: quick_gelu or gelu).
        if (p.kind == Kind::HfClip) {
            if (cfg && cfg->kind == ConfigKind::HuggingFace && hfd.hidden_act) {
                c.act = act_of(hfd, side.path);
                if (!cfg->hidden_act)
                    lm.notes.push_back("the activation is not in " + side.path + ": transformers' default for model_type '" +
                                       cfg->model_type.value_or("") + "' (" + *hfd.hidden_act + ")");
            } else if (c.family == ModelFamily::Siglip) {
                c.act = Act::GeluTanh;
                lm.notes.push_back("no config.json beside it: the activation is SiglipVisionConfig's default gelu_pytorch_tanh, "
                                   "which every released SigLIP uses");
            } else {
                throw FileError(what + ": a Hugging Face CLIP vision tower without its config.json: the MLP's activation "
                                       "(hidden_act: quick_gelu for OpenAI's models, gelu for others) is not in the weights; "
                                       "put the repository's config.json beside it");
            }
        } else if ((p.kind == Kind::HfVit || p.kind == Kind::Timm || p.kind == Kind::Torchvision || p.kind == Kind::Dinov3) &&
                   c.act != Act::SwiGlu &&
                   cfg && cfg->kind == ConfigKind::HuggingFace && cfg->hidden_act) {
            c.act = act_of(*cfg, side.path);
        }
    }
    for (auto& n : p.notes) lm.notes.push_back(n);
}

// Heads: never guessed (issue 19). What the file (or a config beside it) states, else --heads,
// else what the shapes tell (a published ViT, CLIP's rule). --heads is for files that do not say:
// one that contradicts the file's count is refused (it would run a model the file does not describe).
void Load::settle_heads() {
    Config& c = p.c;
    check_heads_flag(ov.heads, c.width, what);
    int stated = 0;
    std::string stated_from;
    if (own) stated = c.heads, stated_from = "__metadata__ vitscope.config";
    else if (int h = meta_int(meta, "num_heads", what)) stated = h, stated_from = "__metadata__ num_heads";
    else if (int h2 = meta_int(meta, "heads", what)) stated = h2, stated_from = "__metadata__ heads";
    else if (p.legacy_cfg) stated = c.heads, stated_from = "__metadata__ vitscope.config";
    else if (side.heads > 0 && (!ocfg || cfg)) {
        stated = side.heads;
        stated_from = side.path + (cfg && cfg->kind == ConfigKind::Timm ? " model_args.num_heads" : " num_attention_heads");
    } else if (ocfg && ocfg->num_attention_heads) {
        stated = *ocfg->num_attention_heads;
        stated_from = ocfg_path + " width / head_width" +
                      (std::find(ocfg->defaulted.begin(), ocfg->defaulted.end(), "head_width") != ocfg->defaulted.end()
                           ? " (head_width absent: open_clip's default 64)" : "");
    }
    if (!stated && p.kind == Kind::Dinov3 && !p.rope_from_base) {
        // RoPE's periods are d/4 per head: the file states the head width, so the head count
        const Src ps = p.source("rope_embed.periods");
        const Keys k(src, dtypes);
        const Array& per = need(k, ps, what, "RoPE's periods");
        const size_t n = per.size();
        if (n == 0 || c.width % int(4 * n))
            throw FileError(what + ": " + ps.keys[0] + " has shape " + shape_str_of(per) + ": " + std::to_string(n) +
                            " periods (head width / 4) do not divide the width " + std::to_string(c.width) + " into heads");
        stated = c.width / int(4 * n);
        stated_from = ps.keys[0] + " (" + std::to_string(n) + " periods: head width " + std::to_string(4 * n) + ")";
    }
    if (stated > 0 && ov.heads > 0 && ov.heads != stated)
        throw UsageError("--heads " + std::to_string(ov.heads) + " contradicts " + what + ", which states " +
                         std::to_string(stated) + " heads (" + stated_from + "): leave --heads out");
    if (stated > 0) { c.heads = stated; lm.heads_from = stated_from; }
    else if (ov.heads > 0) {
        c.heads = ov.heads;
        lm.heads_from = "--heads";
    } else if (p.head_width > 0 && c.width % p.head_width == 0) {
        c.heads = c.width / p.head_width;
        lm.heads_from = p.heads_rule;
    } else if (int kh = known_heads(c.width, c.depth, c.mlp)) {
        c.heads = kh;
        lm.heads_from = "the published ViT with these shapes";
    } else if (p.clip_rule && c.width % 64 == 0) {
        c.heads = c.width / 64;
        lm.heads_from = "width / 64: OpenAI CLIP's rule (vision_heads = vision_width // 64 in clip/model.py build_model; "
                        "open_clip's default head_width)";
    } else {
        const std::string list = head_choices_text(c.width);
        throw HeadsNeeded(what + ": the number of attention heads is not in the file (no __metadata__ num_heads), "
                          "not in a config.json beside it (num_attention_heads), and width " + std::to_string(c.width) +
                          ", depth " + std::to_string(c.depth) + ", mlp " + std::to_string(c.mlp) +
                          " is not a published ViT: pass --heads N, where N divides the width " + std::to_string(c.width) +
                          " (" + list + ")", what, c.width, head_choices(c.width));
    }
}

// eps, the pooling switch, and the preprocessing (the family's published one, then the config files').
void Load::settle_eps_pooling_preprocess() {
    Config& c = p.c;
    // ---- eps
    if (ov.eps > 0) c.eps = ov.eps;
    else if (auto it = meta.find("eps"); it != meta.end()) {
        const std::string& v = it->second;
        char* end = nullptr;
        errno = 0;
        double x = v.empty() ? 0 : std::strtod(v.c_str(), &end);
        if (v.empty() || *end || errno || !(x > 0) || x > 1)
            throw FileError(what + ": __metadata__ eps is '" + v.substr(0, 40) + "', not a number in (0, 1]");
        c.eps = float(x);
    } else if (!own && !p.legacy_cfg) {
        // as the config states it; transformers' default only for the layout transformers itself reads
        if (cfg && cfg->kind == ConfigKind::HuggingFace && cfg->layer_norm_eps) c.eps = float(*cfg->layer_norm_eps);
        else if (cfg && cfg->kind == ConfigKind::HuggingFace && hfd.layer_norm_eps && (p.kind == Kind::HfVit || p.kind == Kind::HfClip))
            c.eps = float(*hfd.layer_norm_eps);
    }

    // ---- pooling switch
    if (ov.pooling && *ov.pooling != c.pooling) {
        if (!((c.pooling == Pooling::Cls || c.pooling == Pooling::Mean) && c.cls_token && c.head != Head::Projection))
            throw UsageError(std::string("--pooling ") + pooling_name(*ov.pooling) + " does not apply to " + what + " (" +
                             family_label(c.family) + ", pooling " + pooling_name(c.pooling) + ")");
        c.pooling = *ov.pooling;
    }

    // ---- preprocessing: the family's published one, then what the config files say
    if (!own && !p.legacy_cfg) {
        default_preprocess(p, c);
        std::vector<std::string> pnotes;
        std::string ppath;
        // the files of the code that runs this layout: open_clip's own config for its files, timm's
        // pretrained_cfg for timm's names, else a Hugging Face processor's
        const bool timm_cfg = cfg && cfg->kind == ConfigKind::Timm;
        if (ocfg) {
            apply_preprocess(side.open_clip ? side.open_clip->pre : side.config->pre, ConfigKind::OpenClip, c, pnotes);
            ppath = ocfg_path;
        } else if (timm_cfg && (p.kind == Kind::Timm || !side.preprocessor)) {
            apply_preprocess(side.config->pre, ConfigKind::Timm, c, pnotes);
            ppath = side.path;
        } else if (side.preprocessor) {
            apply_preprocess(*side.preprocessor, ConfigKind::HuggingFace, c, pnotes);
            ppath = side.preprocessor_path;
            lm.metadata["hf.preprocessor"] = side.preprocessor_path;
        }
        if (!pnotes.empty()) {
            std::string all;
            for (auto& n : pnotes) all += (all.empty() ? "" : "; ") + n;
            lm.metadata["vitscope.preprocess_note"] = ppath + ": " + all;
            // Said wherever the model is used (every command, the window's model notes), not only by info.
            lm.notes.push_back("preprocessing not followed: " + ppath + ": " + all);
        }
    }
}

// The class names: the file's, the config's, ImageNet-1k's for 1000 classes; then the config is checked.
void Load::settle_class_names() {
    Config& c = p.c;
    // ---- class names
    if ((own || p.legacy_cfg) && !c.class_names.empty()) lm.labels_from = "__metadata__ vitscope.config";
    if (auto it = meta.find("class_names"); it != meta.end()) {
        c.class_names = class_names_from_json(it->second, what);
        lm.labels_from = "__metadata__ class_names";
    }
    if (!c.has_logits() && !c.class_names.empty()) {
        lm.notes.push_back(lm.labels_from + " names " + std::to_string(c.class_names.size()) +
                           " classes, but the model has no classifier: not used");
        c.class_names.clear();
        lm.labels_from.clear();
    }
    if (!c.class_names.empty() && c.class_names.size() != size_t(c.classes))
        throw FileError(what + ": " + lm.labels_from + " names " + std::to_string(c.class_names.size()) +
                        " classes but the checkpoint's head has " + std::to_string(c.classes));
    if (c.class_names.empty() && !side.class_names.empty() && !own) {
        if (!c.has_logits()) {
            lm.notes.push_back(side.path + " names " + std::to_string(side.class_names.size()) +
                               " classes, but the model has no classifier: not used");
        } else {
            if (side.class_names.size() != size_t(c.classes))
                throw FileError(side.path + " (the config beside " + what + "): " +
                                (cfg && cfg->kind == ConfigKind::Timm ? "label_names" : "id2label") + " names " +
                                std::to_string(side.class_names.size()) + " classes but the checkpoint's head has " +
                                std::to_string(c.classes));
            c.class_names = side.class_names;
            lm.labels_from = side.path + (cfg && cfg->kind == ConfigKind::Timm ? " label_names" : " id2label");
        }
    }
    if (c.class_names.empty() && c.has_logits() && c.classes == 1000 && !imagenet1k_class_names().empty()) {
        c.class_names = imagenet1k_class_names();
        lm.labels_from = "ImageNet-1k (the default for 1000 classes)";
    }
    try { c.validate(); } catch (const std::invalid_argument& e) { throw FileError(what + ": " + e.what()); }
}

// The tensors, moved from the file into the weights under the canonical names.
LoadedModel Load::map_tensors() {
    Config& c = p.c;
    const Keys k(src, dtypes);  // every name of the file, before the mapping moves its tensors
    // ---- the tensors
    size_t held = 0;  // the file's numbers, counted before the mapping moves them out
    for (auto& [key, v] : src) held += v.size();
    // Names from a miniature of the same config (every part present as in c, each tensor tiny);
    // the weights themselves are the file's arrays, moved, never allocated twice.
    Config tiny = c;
    tiny.width = tiny.heads = tiny.mlp = tiny.classes = tiny.patch = tiny.image_size = tiny.channels = 1;
    tiny.pos_grid = 1;
    if (tiny.embed_dim > 0) tiny.embed_dim = 1;
    const Weights names = shaped_weights(tiny);
    Weights& w = lm.weights;
    w.cfg = c;
    w.blocks.resize(size_t(c.depth));
    Mapper mp{src, dtypes, what, {}, {}, {}, 0};
    for_each_param([&](const std::string& name, const auto&, auto& t) { mp.take(p.source(name), param_shape(c, name), t); },
                   names, w);
    std::vector<std::string> unexpected;
    std::map<std::string, size_t> skipped;  // why -> tensors
    for (auto& key : k.all) {
        if (mp.used.count(key)) continue;
        bool ign = false;
        for (auto& [prefix, why] : p.ignore)
            if (starts(key, prefix)) { ++skipped[why]; ign = true; break; }
        if (!ign) unexpected.push_back(key + (src.count(key) ? " " + shape_str_of(src.at(key)) : " (" + dtypes.at(key) + ")"));
    }
    if (!mp.missing.empty() || !mp.misshaped.empty() || !unexpected.empty()) {
        std::ostringstream o;
        o << what << ": checkpoint does not fit the model (" << p.it << ")";
        auto list = [&](const char* title, const std::vector<std::string>& v) {
            if (v.empty()) return;
            o << "\n  " << title << " (" << v.size() << "):";
            for (size_t i = 0; i < v.size() && i < 20; ++i) o << "\n    " << v[i];
            if (v.size() > 20) o << "\n    ... and " << v.size() - 20 << " more";
        };
        list("missing", mp.missing);
        list("wrong shape", mp.misshaped);
        list("unexpected", unexpected);
        throw FileError(o.str());
    }
    for (auto& [why, n] : skipped)
        lm.notes.push_back(why + ": not part of the image model, ignored (" + std::to_string(n) + (n == 1 ? " tensor)" : " tensors)"));
    // The config must not ask for more parameters than the file holds. Checked after the mapping
    // (which only moves the file's own tensors), so that a file missing tensors is told which ones.
    if (double(param_count(c)) > double(held) + double(mp.zeros))
        throw FileError(what + ": the config (" + c.describe() + ") needs " + std::to_string(param_count(c)) +
                        " parameters but the file holds " + std::to_string(held));
    if (p.rope_from_base && c.rope) {  // not in the file (HF DINOv3: inv_freq is not saved): from the base
        w.rope_periods = rope_periods_of(c);
        mp.zeros -= std::min(mp.zeros, w.rope_periods.size());
    }
    if (!c.patch_bias && w.patch_b.size() && xt::any(xt::not_equal(w.patch_b, 0.f)))
        throw FileError(what + ": patch_embed.proj.bias is not zero, but the config says the patch conv has no bias");
    if (!lm.notes.empty()) {
        std::string all;
        for (auto& n : lm.notes) all += (all.empty() ? "" : "\n") + n;
        lm.metadata["vitscope.load_note"] = all;
    }
    lm.metadata["vitscope.layout"] = p.it;
    return std::move(lm);
}

}  // namespace

LoadedModel load_layout(Tensors& src, const Meta& dtypes_in, const Meta& meta, const std::string& what,
                        const LoadOverrides& ov, const SideConfig& side) {
    Load L{src, dtypes_in, meta, what, ov, side, {}, {}, false, {}, nullptr, nullptr, {}, {}};
    strip_module_prefix(L.src, L.dtypes);
    L.own = meta.count("vitscope.config") && meta.at("vitscope.config").find("\"family\"") != std::string::npos;
    L.choose_plan();
    L.sizes_from_shapes();
    L.check_side_configs();
    L.settle_heads();
    L.settle_eps_pooling_preprocess();
    L.settle_class_names();
    return L.map_tensors();
}

}  // namespace vit
