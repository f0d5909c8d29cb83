#include "core/io/checkpoint.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include "core/io/io.h"
#include "core/io/pth.h"

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

namespace {
// Metadata JSON (vitscope.config, class_names) parsed with bounds: a 50 MB
// string of '[' would otherwise build 50 M nested arrays (gigabytes).
json parse_bounded(const std::string& text) {
    size_t values = 0;
    json::parser_callback_t cb = [&](int depth, json::parse_event_t, json&) {
        if (depth > 32) throw std::length_error("nested more than 32 levels deep");
        if (++values > 1'000'000) throw std::length_error("more than 1,000,000 values");
        return true;
    };
    return json::parse(text, cb);
}

// Checked reads of config fields: every number is range-checked before it is
// converted (nlohmann's get<int>() on 1e302 or 2^40 is undefined behaviour)
// and before anything is sized by it; errors name the file and the field.
struct ConfigReader {
    const json& j;
    const std::string& what;
    [[noreturn]] void bad(const std::string& key, const std::string& m) const {
        throw FileError(what + ": vitscope.config field '" + key + "' " + m);
    }
    int integer(const std::string& key, int64_t lo, int64_t hi, const int* fallback = nullptr) const {
        auto it = j.find(key);
        if (it == j.end()) {
            if (fallback) return *fallback;
            bad(key, "is missing");
        }
        if (!it->is_number_integer()) bad(key, "is not an integer");
        int64_t v = 0;
        bool in;
        if (it->is_number_unsigned()) {
            uint64_t u = it->get<uint64_t>();
            in = u <= uint64_t(hi);
            if (in) v = int64_t(u);
        } else {
            v = it->get<int64_t>();
            in = v <= hi;
        }
        if (!in || v < lo) bad(key, "is " + it->dump() + ", outside " + std::to_string(lo) + ".." + std::to_string(hi));
        return int(v);
    }
    static bool finite_float(const json& v) {
        if (!v.is_number()) return false;
        double d = v.get<double>();
        return std::isfinite(d) && std::fabs(d) <= 3.0e38;
    }
    float number(const std::string& key, float fallback) const {
        auto it = j.find(key);
        if (it == j.end()) return fallback;
        if (!finite_float(*it)) bad(key, "is not a finite number");
        return float(it->get<double>());
    }
    std::string text(const std::string& key, const std::string& fallback) const {
        auto it = j.find(key);
        if (it == j.end()) return fallback;
        if (!it->is_string()) bad(key, "is not a string");
        return it->get<std::string>();
    }
    std::vector<float> floats(const std::string& key, size_t n) const {
        auto it = j.find(key);
        if (it == j.end()) return std::vector<float>(n, 0.5f);
        if (!it->is_array() || it->size() != n)
            bad(key, "must be a list of " + std::to_string(n) + " numbers (one per channel)");
        std::vector<float> v;
        for (auto& x : *it) {
            if (!finite_float(x)) bad(key, "holds a value that is not a finite number");
            v.push_back(float(x.get<double>()));
        }
        return v;
    }
};
}  // namespace

Config config_from_json(const std::string& text, const std::string& what) {
    Config c;
    json j;
    try {
        j = parse_bounded(text);
    } catch (const json::exception& e) {
        throw FileError(what + ": bad vitscope.config metadata: " + e.what());
    } catch (const std::length_error& e) {
        throw FileError(what + ": bad vitscope.config metadata: " + e.what());
    }
    if (!j.is_object()) throw FileError(what + ": bad vitscope.config metadata: not a JSON object");
    ConfigReader r{j, what};
    c.name = r.text("name", c.name);
    c.image_size = r.integer("image_size", 1, kMaxImageSize);
    c.channels = r.integer("channels", 1, 3);
    c.patch = r.integer("patch", 1, kMaxImageSize);
    c.width = r.integer("width", 1, kMaxWidth);
    c.depth = r.integer("depth", 0, kMaxLayers);
    c.heads = r.integer("heads", 1, kMaxWidth);
    c.mlp = r.integer("mlp", 1, kMaxMlp);
    c.classes = r.integer("classes", 1, kMaxClasses);
    c.eps = r.number("eps", c.eps);
    c.pooling = r.text("pooling", "cls") == "mean" ? Pooling::Mean : Pooling::Cls;
    const int zero = 0;
    c.pre.resize = r.integer("resize", 0, kMaxResize, &zero);
    c.pre.interp = r.text("interp", "bilinear") == "bicubic" ? Interp::Bicubic : Interp::Bilinear;
    if (auto it = j.find("squash"); it != j.end()) {
        if (!it->is_boolean()) r.bad("squash", "is not true or false");
        c.pre.squash = it->get<bool>();
    }
    c.pre.mean = r.floats("mean", size_t(c.channels));
    c.pre.std = r.floats("std", size_t(c.channels));
    if (auto it = j.find("class_names"); it != j.end()) {
        if (!it->is_array() || it->size() > size_t(kMaxClasses)) r.bad("class_names", "is not a list of class names");
        for (auto& n : *it) {
            if (!n.is_string()) r.bad("class_names", "holds a value that is not a string");
            c.class_names.push_back(n.get<std::string>());
        }
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
    lm.nonfinite = nonfinite_tensors(src);  // by the file's own names, before the mapping moves them
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
    // Shapes become config fields: checked before narrowing (a 0-d or huge
    // dimension must be an error naming the tensor, not a crash).
    auto dim_of = [&](const Array& t, const std::string& key, size_t axis) -> int {
        if (t.dimension() <= axis)
            throw FileError(what + ": " + key + " has shape " + shape_str_of(t) + ", expected at least " +
                            std::to_string(axis + 1) + " dimension(s)");
        if (t.shape(axis) > size_t(INT32_MAX))
            throw FileError(what + ": " + key + " has shape " + shape_str_of(t) + ": dimension too large");
        return int(t.shape(axis));
    };
    c.width = dim_of(pw, patch_key, 0); c.channels = dim_of(pw, patch_key, 1); c.patch = dim_of(pw, patch_key, 2);
    const Array* pos = find(src, pos_key);
    if (!pos) throw FileError(what + ": missing " + pos_key);
    size_t T = pos->size() / std::max<size_t>(1, c.width);
    size_t G = size_t(std::lround(std::sqrt(double(T ? T - 1 : 0))));
    if (T < 2 || G * G + 1 != T)
        throw FileError(what + ": " + pos_key + " has " + std::to_string(T) + " positions; expected a square grid plus the cls token");
    if (int64_t(G) * c.patch > kMaxImageSize)
        throw FileError(what + ": " + pos_key + " has a " + std::to_string(G) + "x" + std::to_string(G) + " grid of " +
                        std::to_string(c.patch) + "-pixel patches, over the " + std::to_string(kMaxImageSize) +
                        "-pixel image limit");
    c.image_size = int(G) * c.patch;
    c.depth = count_blocks(src, blocks_prefix);
    const Array* fc1 = find(src, fc1_key0);
    c.mlp = fc1 ? dim_of(*fc1, fc1_key0, 0) : int(std::min<int64_t>(INT32_MAX, 4 * int64_t(c.width)));
    const char* head_key = fam == Family::Timm ? "head.weight" : fam == Family::Torchvision ? "heads.head.weight" : "classifier.weight";
    const Array* hw = find(src, head_key);
    if (!hw) throw FileError(what + ": no classification head '" + std::string(head_key) + "' (a headless backbone is not supported)");
    c.classes = dim_of(*hw, head_key, 0);
    // Settings shapes cannot tell: flag, then metadata, then defaults.
    auto meta_int = [&](const char* k) -> int {
        auto it = meta.find(k);
        if (it == meta.end()) return 0;
        const std::string& v = it->second;
        char* end = nullptr;
        errno = 0;
        long x = v.empty() ? 0 : std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end || errno || x < 1 || x > kMaxWidth)
            throw FileError(what + ": __metadata__ " + k + " is '" + v.substr(0, 40) + "', not an integer in 1.." +
                            std::to_string(kMaxWidth));
        return int(x);
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
    else if (auto it = meta.find("eps"); it != meta.end()) {
        const std::string& v = it->second;
        char* end = nullptr;
        errno = 0;
        double x = v.empty() ? 0 : std::strtod(v.c_str(), &end);
        if (v.empty() || *end || errno || !(x > 0) || x > 1)
            throw FileError(what + ": __metadata__ eps is '" + v.substr(0, 40) + "', not a number in (0, 1]");
        c.eps = float(x);
    }
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
        try { c.class_names = parse_bounded(it->second).get<std::vector<std::string>>(); }
        catch (...) { throw FileError(what + ": __metadata__ class_names is not a JSON list of strings"); }
    }
    if (!c.class_names.empty() && c.class_names.size() != size_t(c.classes)) c.class_names.clear();
    try { c.validate(); } catch (const std::invalid_argument& e) { throw FileError(what + ": " + e.what()); }


    size_t held = 0;  // the file's numbers, counted before the mapping moves them out
    for (auto& [k, v] : src) held += v.size();
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
    // The config must not ask for more parameters than the file holds. Checked after
    // the mapping (which only moves the file's own tensors, so allocates nothing the
    // file does not hold), so that a file missing tensors is told which ones.
    if (double(param_count(c)) > double(held))
        throw FileError(what + ": the config (" + c.describe() + ") needs " + std::to_string(param_count(c)) +
                        " parameters but the file holds " + std::to_string(held));
    return lm;
}

std::string LoadedModel::nonfinite_warning() const {
    if (nonfinite.empty()) return "";
    return source + ": " + describe_nonfinite_tensors(nonfinite);
}

const char* const kCheckpointFormats =
    ".safetensors, or a PyTorch torch.save zip checkpoint .pth / .pt / .bin";

SafeTensors read_checkpoint(const std::string& path) {
    auto ends = [&](const char* e) {
        size_t n = std::strlen(e);
        if (path.size() < n) return false;
        for (size_t i = 0; i < n; ++i)
            if (std::tolower(static_cast<unsigned char>(path[path.size() - n + i])) != e[i]) return false;
        return true;
    };
    if (ends(".safetensors")) return read_safetensors(path);
    if (ends(".pth") || ends(".pt") || ends(".bin") || ends(".ckpt")) return read_pth(path);
    // Unknown extension: the first bytes decide.
    char head[9] = {};
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
        size_t got = std::fread(head, 1, sizeof head, f);
        std::fclose(f);
        if (looks_like_zip(head, got) || (got >= 2 && uint8_t(head[0]) == 0x80)) return read_pth(path);
        if (got == 9 && head[8] == '{') return read_safetensors(path);  // u64 header length, then JSON
    }
    size_t dot = path.rfind('.'), slash = path.rfind('/');
    std::string ext = dot != std::string::npos && (slash == std::string::npos || dot > slash) ? path.substr(dot) : "";
    throw FileError(path + ": unknown checkpoint format" + (ext.empty() ? std::string(" (no extension)") : " '" + ext + "'") +
                    "; supported: " + kCheckpointFormats);
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
        lm.weights = name_out_of_memory("preset " + spec, "creating its random weights", [&] { return init_weights(c, seed); });
        lm.source = "preset:" + spec;
        return lm;
    }
    if (::access(spec.c_str(), F_OK) != 0) {
        std::string all;
        for (auto& p : preset_names()) all += (all.empty() ? "" : ", ") + p;
        throw FileError("model '" + spec + "' is neither 'default', a preset (" + all +
                        "; torchvision and timm names such as vit_b_16 or vit_base_patch16_224: see "
                        "'vitscope-cli info --list') nor an existing file (" + std::string(kCheckpointFormats) + ")");
    }
    return name_out_of_memory(spec, "reading the checkpoint",
                              [&] { return model_from_safetensors(read_checkpoint(spec), spec, ov); });
}

LoadedModel model_from_safetensors(SafeTensors st, const std::string& what, const LoadOverrides& ov) {
    for (auto& [k, dt] : st.dtypes)
        if (!st.tensors.count(k)) throw FileError(what + ": tensor '" + k + "' has dtype " + dt + "; only F32, F16, BF16 and F64 weights are supported");
    return weights_from_tensors(std::move(st.tensors), st.metadata, what, ov);
}

void apply_labels_file(Config& c, const std::string& path) {
    name_out_of_memory(path, "reading the class names", [&] { apply_labels(c, read_file(path, 1 << 24), path); });
}

void apply_labels(Config& c, const std::string& text, const std::string& path) {
    // Names are kept only up to the model's count (a 16 MB file of 8 M one-letter lines would
    // otherwise hold 8 M strings); the rest are only counted, for the message.
    std::vector<std::string> names;
    size_t count = 0;
    std::stringstream ss(text);
    std::string line;
    while (std::getline(ss, line)) {
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
        if (line.empty()) continue;
        if (++count <= size_t(c.classes)) names.push_back(line);
    }
    if (count != size_t(c.classes))
        throw FileError(path + ": " + std::to_string(count) + " class names for a model with " +
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
