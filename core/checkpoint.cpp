#include "checkpoint.h"

#include <unistd.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "io.h"

#include <xtensor/xbuilder.hpp>

namespace vit {

using json = nlohmann::json;

const char* family_name(Family f) {
    switch (f) {
        case Family::Timm: return "timm";
        case Family::HuggingFace: return "huggingface";
        case Family::Torchvision: return "torchvision";
    }
    return "?";
}

std::string config_to_json(const Config& c) {
    json j = {{"name", c.name}, {"image_size", c.image_size}, {"channels", c.channels}, {"patch", c.patch},
              {"width", c.width}, {"depth", c.depth}, {"heads", c.heads}, {"mlp", c.mlp},
              {"classes", c.classes}, {"eps", c.eps}, {"pooling", c.pooling == Pooling::Cls ? "cls" : "mean"},
              {"resize", c.pre.resize}, {"squash", c.pre.squash}, {"interp", c.pre.interp == Interp::Bicubic ? "bicubic" : "bilinear"},
              {"mean", c.pre.mean}, {"std", c.pre.std}, {"class_names", c.class_names}};
    return j.dump();
}

Config config_from_json(const std::string& text, const std::string& what) {
    Config c;
    try {
        json j = json::parse(text);
        c.name = j.value("name", c.name);
        c.image_size = j.at("image_size").get<int>();
        c.channels = j.at("channels").get<int>();
        c.patch = j.at("patch").get<int>();
        c.width = j.at("width").get<int>();
        c.depth = j.at("depth").get<int>();
        c.heads = j.at("heads").get<int>();
        c.mlp = j.at("mlp").get<int>();
        c.classes = j.at("classes").get<int>();
        c.eps = j.value("eps", c.eps);
        c.pooling = j.value("pooling", std::string("cls")) == "mean" ? Pooling::Mean : Pooling::Cls;
        c.pre.resize = j.value("resize", 0);
        c.pre.squash = j.value("squash", false);
        c.pre.interp = j.value("interp", std::string("bilinear")) == "bicubic" ? Interp::Bicubic : Interp::Bilinear;
        c.pre.mean = j.value("mean", std::vector<float>(c.channels, 0.5f));
        c.pre.std = j.value("std", std::vector<float>(c.channels, 0.5f));
        c.class_names = j.value("class_names", std::vector<std::string>{});
    } catch (const json::exception& e) {
        throw FileError(what + ": bad vitscope.config metadata: " + e.what());
    }
    return c;
}

// The published head counts of the standard ViTs (Dosovitskiy et al. 2021, DeiT's Ti and S), by
// (width, depth, mlp): the only shapes where heads can be known without the file saying so.
// ViT-H/14 has 16 heads of 80 dims, which width/64 (= 20) would get wrong.
int known_heads(int width, int depth, int mlp) {
    struct K { int width, depth, mlp, heads; };
    static const K known[] = {{192, 12, 768, 3}, {384, 12, 1536, 6}, {768, 12, 3072, 12},
                              {1024, 24, 4096, 16}, {1280, 32, 5120, 16}};
    for (const K& k : known)
        if (k.width == width && k.depth == depth && k.mlp == mlp) return k.heads;
    return 0;
}

namespace {

Shape squeeze_leading(const Shape& s) {
    Shape r = s;
    while (r.size() > 1 && r[0] == 1) r.erase(r.begin());
    return r;
}

struct Mapper {
    std::map<std::string, Array>& src;
    std::string what;
    std::set<std::string> used;
    std::vector<std::string> missing, misshaped;

    // Moves src[key]'s storage into dst (no copy) if its shape (leading 1s ignored) is `want`.
    template <size_t N>
    bool take(const std::string& key, const Shape& want, xt::xtensor<float, N>& dst) {
        auto it = src.find(key);
        if (it == src.end()) { missing.push_back(key + " " + shape_str(want)); return false; }
        used.insert(key);
        Shape got = shape_of(it->second);
        bool conv_flat = want.size() == 2 && got.size() == 4 && got[0] == want[0] &&
                         shape_numel(got) == shape_numel(want);  // OIHW -> (D, C*P*P)
        if (squeeze_leading(got) != squeeze_leading(want) && !conv_flat) {
            misshaped.push_back(key + ": file has " + shape_str(got) + ", config needs " + shape_str(want));
            return false;
        }
        it->second.reshape(want);  // same data: (1, 1, D) -> (D), OIHW -> (D, C*P*P)
        dst = xt::xtensor<float, N>(std::move(it->second));
        return true;
    }
    void fail_if_any() {
        std::vector<std::string> unexpected;
        for (auto& [k, v] : src) if (!used.count(k)) unexpected.push_back(k + " " + shape_str_of(v));
        if (missing.empty() && misshaped.empty() && unexpected.empty()) return;
        std::ostringstream o;
        o << what << ": checkpoint does not fit the model";
        auto list = [&](const char* title, const std::vector<std::string>& v) {
            if (v.empty()) return;
            o << "\n  " << title << " (" << v.size() << "):";
            for (size_t i = 0; i < v.size() && i < 20; ++i) o << "\n    " << v[i];
            if (v.size() > 20) o << "\n    ... and " << v.size() - 20 << " more";
        };
        list("missing", missing);
        list("wrong shape", misshaped);
        list("unexpected", unexpected);
        throw FileError(o.str());
    }
};

const Array* find(const std::map<std::string, Array>& m, const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? nullptr : &it->second;
}

int count_blocks(const std::map<std::string, Array>& m, const std::string& prefix) {
    std::set<int> idx;
    for (auto& [k, v] : m) {
        if (k.compare(0, prefix.size(), prefix) != 0) continue;
        size_t e = prefix.size();
        while (e < k.size() && std::isdigit(static_cast<unsigned char>(k[e]))) ++e;
        if (e > prefix.size() && e - prefix.size() < 6) idx.insert(std::stoi(k.substr(prefix.size(), e - prefix.size())));
    }
    if (idx.empty()) return 0;
    return *idx.rbegin() + 1;
}

}  // namespace

LoadedModel weights_from_tensors(std::map<std::string, Array> src,
                                 const std::map<std::string, std::string>& meta, const std::string& what,
                                 const LoadOverrides& ov) {
    LoadedModel lm;
    lm.source = what;
    lm.metadata = meta;
    // Which family? Hugging Face keys may lack the "vit." prefix (ViTModel).
    std::string hf;
    Family fam;
    std::string patch_key, pos_key, blocks_prefix, fc1_key0;
    if (find(src, "patch_embed.proj.weight")) {
        fam = Family::Timm; patch_key = "patch_embed.proj.weight"; pos_key = "pos_embed";
        blocks_prefix = "blocks."; fc1_key0 = "blocks.0.mlp.fc1.weight";
    } else if (find(src, "conv_proj.weight")) {
        fam = Family::Torchvision; patch_key = "conv_proj.weight"; pos_key = "encoder.pos_embedding";
        blocks_prefix = "encoder.layers.encoder_layer_";
        fc1_key0 = find(src, "encoder.layers.encoder_layer_0.mlp.0.weight") ? "encoder.layers.encoder_layer_0.mlp.0.weight"
                                                                           : "encoder.layers.encoder_layer_0.mlp.linear_1.weight";
    } else if (find(src, "vit.embeddings.patch_embeddings.projection.weight") ||
               find(src, "embeddings.patch_embeddings.projection.weight")) {
        fam = Family::HuggingFace;
        hf = find(src, "vit.embeddings.patch_embeddings.projection.weight") ? "vit." : "";
        patch_key = hf + "embeddings.patch_embeddings.projection.weight";
        pos_key = hf + "embeddings.position_embeddings";
        blocks_prefix = hf + "encoder.layer.";
        fc1_key0 = hf + "encoder.layer.0.intermediate.dense.weight";
    } else {
        std::string some;
        int i = 0;
        for (auto& [k, v] : src) { if (i++ < 5) some += "\n    " + k; }
        throw FileError(what + ": not a ViT checkpoint I know: no timm 'patch_embed.proj.weight', Hugging Face "
                               "'vit.embeddings.patch_embeddings.projection.weight' or torchvision 'conv_proj.weight'. "
                               "First keys:" + some);
    }
    lm.family = fam;

    // Infer the config from the shapes.
    Config c;
    if (auto it = meta.find("vitscope.config"); it != meta.end()) c = config_from_json(it->second, what);
    const Array& pw = src.at(patch_key);
    if (pw.dimension() != 4 || pw.shape(2) != pw.shape(3))
        throw FileError(what + ": " + patch_key + " has shape " + shape_str_of(pw) + ", expected (D, C, P, P)");
    c.width = int(pw.shape(0)); c.channels = int(pw.shape(1)); c.patch = int(pw.shape(2));
    const Array* pos = find(src, pos_key);
    if (!pos) throw FileError(what + ": missing " + pos_key);
    size_t T = pos->size() / std::max<size_t>(1, c.width);
    size_t G = size_t(std::lround(std::sqrt(double(T ? T - 1 : 0))));
    if (T < 2 || G * G + 1 != T)
        throw FileError(what + ": " + pos_key + " has " + std::to_string(T) + " positions; expected a square grid plus the cls token");
    c.image_size = int(G) * c.patch;
    c.depth = count_blocks(src, blocks_prefix);
    const Array* fc1 = find(src, fc1_key0);
    c.mlp = fc1 ? int(fc1->shape(0)) : 4 * c.width;
    const char* head_key = fam == Family::Timm ? "head.weight" : fam == Family::Torchvision ? "heads.head.weight" : "classifier.weight";
    const Array* hw = find(src, head_key);
    if (!hw) throw FileError(what + ": no classification head '" + std::string(head_key) + "' (a headless backbone is not supported)");
    c.classes = int(hw->shape(0));
    // Settings shapes cannot tell: flag, then metadata, then defaults.
    auto meta_int = [&](const char* k) -> int {
        auto it = meta.find(k);
        if (it == meta.end()) return 0;
        try { return std::stoi(it->second); } catch (...) { throw FileError(what + ": __metadata__ " + k + " is not an integer"); }
    };
    bool from_cfg = meta.count("vitscope.config") != 0;
    if (ov.heads > 0) c.heads = ov.heads;
    else if (int h = meta_int("num_heads")) c.heads = h;
    else if (int h2 = meta_int("heads")) c.heads = h2;
    else if (!from_cfg) {
        if (int kh = known_heads(c.width, c.depth, c.mlp)) c.heads = kh;  // a standard ViT's published count
        else {
            if (c.width % 64) throw FileError(what + ": width " + std::to_string(c.width) +
                                              " is not a multiple of 64, so the number of heads cannot be guessed: pass --heads N");
            c.heads = c.width / 64;
            c.heads_guessed = true;
        }
    }
    if (ov.eps > 0) c.eps = ov.eps;
    else if (auto it = meta.find("eps"); it != meta.end()) c.eps = std::stof(it->second);
    else if (!from_cfg) c.eps = fam == Family::HuggingFace ? 1e-12f : 1e-6f;
    bool has_fc_norm = fam == Family::Timm && find(src, "fc_norm.weight") && !find(src, "norm.weight");
    if (ov.pooling) c.pooling = *ov.pooling;
    else if (has_fc_norm) c.pooling = Pooling::Mean;
    if (!from_cfg) {
        c.name = std::string(family_name(fam)) + "-vit";
        if (fam == Family::Torchvision) {
            c.pre.mean = {0.485f, 0.456f, 0.406f}; c.pre.std = {0.229f, 0.224f, 0.225f};
            c.pre.resize = c.image_size * 256 / 224; c.pre.interp = Interp::Bilinear;
        } else if (fam == Family::Timm) {
            c.pre.mean = {0.5f, 0.5f, 0.5f}; c.pre.std = {0.5f, 0.5f, 0.5f};
            c.pre.resize = int(std::floor(c.image_size / 0.9)); c.pre.interp = Interp::Bicubic;
        } else {
            c.pre.mean = {0.5f, 0.5f, 0.5f}; c.pre.std = {0.5f, 0.5f, 0.5f};
            c.pre.resize = 0; c.pre.interp = Interp::Bilinear;
            c.pre.squash = true;  // ViTImageProcessor resizes straight to 224 x 224
        }
        if (c.channels == 1) { c.pre.mean.resize(1); c.pre.std.resize(1); }
    }
    if (auto it = meta.find("class_names"); it != meta.end()) {
        try { c.class_names = json::parse(it->second).get<std::vector<std::string>>(); }
        catch (...) { throw FileError(what + ": __metadata__ class_names is not a JSON list of strings"); }
    }
    if (!c.class_names.empty() && c.class_names.size() != size_t(c.classes)) c.class_names.clear();
    try { c.validate(); } catch (const std::invalid_argument& e) { throw FileError(what + ": " + e.what()); }

    // Map the tensors.
    const size_t D = c.width, M = c.mlp, K = c.classes, C = c.channels, P = c.patch;
    Mapper mp{src, what, {}, {}, {}};
    Weights& w = lm.weights;
    w.cfg = c;
    w.blocks.resize(c.depth);
    auto lnw = [&](const std::string& p, LayerNormW& l) { mp.take(p + "weight", {D}, l.g); mp.take(p + "bias", {D}, l.b); };
    if (fam == Family::Timm) {
        mp.take("cls_token", {D}, w.cls);
        mp.take("pos_embed", {T, D}, w.pos);
        mp.take("patch_embed.proj.weight", {D, C * P * P}, w.patch_w);
        mp.take("patch_embed.proj.bias", {D}, w.patch_b);
        for (int i = 0; i < c.depth; ++i) {
            auto p = "blocks." + std::to_string(i) + ".";
            auto& b = w.blocks[i];
            lnw(p + "norm1.", b.ln1);
            mp.take(p + "attn.qkv.weight", {3 * D, D}, b.qkv_w);
            mp.take(p + "attn.qkv.bias", {3 * D}, b.qkv_b);
            mp.take(p + "attn.proj.weight", {D, D}, b.proj_w);
            mp.take(p + "attn.proj.bias", {D}, b.proj_b);
            lnw(p + "norm2.", b.ln2);
            mp.take(p + "mlp.fc1.weight", {M, D}, b.fc1_w);
            mp.take(p + "mlp.fc1.bias", {M}, b.fc1_b);
            mp.take(p + "mlp.fc2.weight", {D, M}, b.fc2_w);
            mp.take(p + "mlp.fc2.bias", {D}, b.fc2_b);
        }
        lnw(has_fc_norm ? "fc_norm." : "norm.", w.ln_f);
        mp.take("head.weight", {K, D}, w.head_w);
        mp.take("head.bias", {K}, w.head_b);
    } else if (fam == Family::Torchvision) {
        mp.take("class_token", {D}, w.cls);
        mp.take("encoder.pos_embedding", {T, D}, w.pos);
        mp.take("conv_proj.weight", {D, C * P * P}, w.patch_w);
        mp.take("conv_proj.bias", {D}, w.patch_b);
        for (int i = 0; i < c.depth; ++i) {
            auto p = "encoder.layers.encoder_layer_" + std::to_string(i) + ".";
            auto& b = w.blocks[i];
            lnw(p + "ln_1.", b.ln1);
            mp.take(p + "self_attention.in_proj_weight", {3 * D, D}, b.qkv_w);
            mp.take(p + "self_attention.in_proj_bias", {3 * D}, b.qkv_b);
            mp.take(p + "self_attention.out_proj.weight", {D, D}, b.proj_w);
            mp.take(p + "self_attention.out_proj.bias", {D}, b.proj_b);
            lnw(p + "ln_2.", b.ln2);
            bool disk = find(src, p + "mlp.linear_1.weight") != nullptr;  // older torchvision files
            std::string f1 = p + (disk ? "mlp.linear_1." : "mlp.0."), f2 = p + (disk ? "mlp.linear_2." : "mlp.3.");
            mp.take(f1 + "weight", {M, D}, b.fc1_w);
            mp.take(f1 + "bias", {M}, b.fc1_b);
            mp.take(f2 + "weight", {D, M}, b.fc2_w);
            mp.take(f2 + "bias", {D}, b.fc2_b);
        }
        lnw("encoder.ln.", w.ln_f);
        mp.take("heads.head.weight", {K, D}, w.head_w);
        mp.take("heads.head.bias", {K}, w.head_b);
    } else {
        mp.take(hf + "embeddings.cls_token", {D}, w.cls);
        mp.take(hf + "embeddings.position_embeddings", {T, D}, w.pos);
        mp.take(hf + "embeddings.patch_embeddings.projection.weight", {D, C * P * P}, w.patch_w);
        mp.take(hf + "embeddings.patch_embeddings.projection.bias", {D}, w.patch_b);
        for (int i = 0; i < c.depth; ++i) {
            auto p = hf + "encoder.layer." + std::to_string(i) + ".";
            auto& b = w.blocks[i];
            lnw(p + "layernorm_before.", b.ln1);
            Tensor2 qw[3];
            Tensor1 qb[3];
            const char* names[3] = {"query", "key", "value"};
            bool ok = true;
            for (int s = 0; s < 3; ++s) {
                ok &= mp.take(p + "attention.attention." + names[s] + ".weight", {D, D}, qw[s]);
                ok &= mp.take(p + "attention.attention." + names[s] + ".bias", {D}, qb[s]);
            }
            if (ok) {  // fuse to [q; k; v] rows, as timm stores it: torch.cat([q, k, v])
                b.qkv_w = xt::concatenate(xt::xtuple(qw[0], qw[1], qw[2]), 0);
                b.qkv_b = xt::concatenate(xt::xtuple(qb[0], qb[1], qb[2]), 0);
            }
            mp.take(p + "attention.output.dense.weight", {D, D}, b.proj_w);
            mp.take(p + "attention.output.dense.bias", {D}, b.proj_b);
            lnw(p + "layernorm_after.", b.ln2);
            mp.take(p + "intermediate.dense.weight", {M, D}, b.fc1_w);
            mp.take(p + "intermediate.dense.bias", {M}, b.fc1_b);
            mp.take(p + "output.dense.weight", {D, M}, b.fc2_w);
            mp.take(p + "output.dense.bias", {D}, b.fc2_b);
        }
        lnw(hf + "layernorm.", w.ln_f);
        mp.take("classifier.weight", {K, D}, w.head_w);
        mp.take("classifier.bias", {K}, w.head_b);
    }
    mp.fail_if_any();
    return lm;
}

LoadedModel load_model(const std::string& spec, const LoadOverrides& ov, uint64_t seed) {
    if (spec == "default" || spec.empty()) {
        std::string bytes = embedded_model_bytes();
        if (bytes.empty()) {
            LoadedModel lm;
            lm.weights = init_weights(preset("fmnist"), seed);
            lm.source = "preset:fmnist (random weights: this build has no embedded model)";
            return lm;
        }
        SafeTensors st = parse_safetensors(bytes, "embedded default model");
        LoadedModel lm = weights_from_tensors(std::move(st.tensors), st.metadata, "embedded default model", ov);
        lm.source = "embedded";
        return lm;
    }
    if (is_preset(spec)) {
        Config c = preset(spec);
        if (ov.heads > 0) c.heads = ov.heads;
        if (ov.eps > 0) c.eps = ov.eps;
        if (ov.pooling) c.pooling = *ov.pooling;
        LoadedModel lm;
        lm.weights = init_weights(c, seed);
        lm.source = "preset:" + spec;
        return lm;
    }
    if (::access(spec.c_str(), F_OK) != 0) {
        std::string all;
        for (auto& p : preset_names()) all += (all.empty() ? "" : ", ") + p;
        throw FileError("model '" + spec + "' is neither 'default', a preset (" + all +
                        ") nor an existing .safetensors file");
    }
    SafeTensors st = read_safetensors(spec);
    for (auto& [k, dt] : st.dtypes)
        if (!st.tensors.count(k)) throw FileError(spec + ": tensor '" + k + "' has dtype " + dt + "; only F32, F16, BF16 and F64 weights are supported");
    return weights_from_tensors(std::move(st.tensors), st.metadata, spec, ov);
}

void apply_labels_file(Config& c, const std::string& path) {
    std::string text = read_file(path, 1 << 24);
    std::vector<std::string> names;
    std::stringstream ss(text);
    std::string line;
    while (std::getline(ss, line)) {
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
        if (!line.empty()) names.push_back(line);
    }
    if (names.size() != size_t(c.classes))
        throw FileError(path + ": " + std::to_string(names.size()) + " class names for a model with " +
                        std::to_string(c.classes) + " classes");
    c.class_names = std::move(names);
}

void save_model(const std::string& path, const Weights& w, std::map<std::string, std::string> extra) {
    extra["format"] = "pt";
    extra["vitscope.config"] = config_to_json(w.cfg);
    extra["num_heads"] = std::to_string(w.cfg.heads);
    if (!w.cfg.class_names.empty()) extra["class_names"] = json(w.cfg.class_names).dump();
    // timm shapes: cls (1,1,D), pos (1,T,D), conv (D,C,P,P): the same data, other shapes.
    const Config& c = w.cfg;
    std::vector<ArrayRef> named = param_refs(w);
    for (auto& r : named) {
        if (r.name == "cls_token") r.shape = {1, 1, size_t(c.width)};
        else if (r.name == "pos_embed") r.shape = {1, size_t(c.tokens()), size_t(c.width)};
        else if (r.name == "patch_embed.proj.weight")
            r.shape = {size_t(c.width), size_t(c.channels), size_t(c.patch), size_t(c.patch)};
    }
    write_safetensors(path, named, extra);
}

}  // namespace vit
