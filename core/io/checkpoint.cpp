#include "core/io/checkpoint.h"

#include <sys/stat.h>
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
#include <xtensor/xoperation.hpp>

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

namespace {
// The spellings of the families' enums in vitscope.config (and `info`).
const char* const kPoolingNames[] = {"cls", "mean", "cls_then_norm", "map"};
const char* const kFamilyNames[] = {"vit", "deit", "dino", "dinov2", "clip", "siglip", "mae"};
const char* const kActNames[] = {"gelu", "quick_gelu", "gelu_tanh", "swiglu"};
const char* const kHeadNames[] = {"classifier", "distilled", "identity", "projection"};
const char* const kPosRuleNames[] = {"timm", "dino", "dinov2", "dinov2_reg", "hf", "hf_antialias", "open_clip", "mae"};
}  // namespace

std::string config_to_json(const Config& c) {
    json j = {{"name", c.name}, {"image_size", c.image_size}, {"channels", c.channels}, {"patch", c.patch},
              {"width", c.width}, {"depth", c.depth}, {"heads", c.heads}, {"mlp", c.mlp},
              {"classes", c.classes}, {"eps", c.eps}, {"pooling", kPoolingNames[int(c.pooling)]},
              {"resize", c.pre.resize}, {"squash", c.pre.squash}, {"interp", c.pre.interp == Interp::Bicubic ? "bicubic" : "bilinear"},
              {"mean", c.pre.mean}, {"std", c.pre.std}, {"class_names", c.class_names}};
    if (c.family != ModelFamily::ViT || c.head != Head::Classifier || !c.cls_token || c.registers || c.layer_scale ||
        c.ln_pre || !c.patch_bias || c.pos_no_cls || c.act != Act::Gelu || c.pos_grid) {
        j["family"] = kFamilyNames[int(c.family)];
        j["cls_token"] = c.cls_token;
        j["dist_token"] = c.dist_token;
        j["registers"] = c.registers;
        j["layer_scale"] = c.layer_scale;
        j["ln_pre"] = c.ln_pre;
        j["patch_bias"] = c.patch_bias;
        j["pos_no_cls"] = c.pos_no_cls;
        j["act"] = kActNames[int(c.act)];
        j["head"] = kHeadNames[int(c.head)];
        j["embed_dim"] = c.embed_dim;
        j["pos_rule"] = kPosRuleNames[int(c.pos_rule)];
        j["pos_grid"] = c.pos_grid;
    }
    return j.dump();
}

namespace {
bool is_regular_file(const std::string& p) {
    struct stat sb;
    return ::stat(p.c_str(), &sb) == 0 && S_ISREG(sb.st_mode);
}

const int kZero = 0;
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
    template <size_t N>
    int choice(const std::string& key, const char* const (&names)[N], int fallback) const {
        auto it = j.find(key);
        if (it == j.end()) return fallback;
        if (it->is_string())
            for (size_t i = 0; i < N; ++i)
                if (it->get<std::string>() == names[i]) return int(i);
        std::string all;
        for (size_t i = 0; i < N; ++i) all += (i ? ", " : "") + std::string(names[i]);
        bad(key, "is " + it->dump().substr(0, 40) + ", not one of " + all);
    }
    bool flag(const std::string& key, bool fallback) const {
        auto it = j.find(key);
        if (it == j.end()) return fallback;
        if (!it->is_boolean()) bad(key, "is not true or false");
        return it->get<bool>();
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
    c.pooling = Pooling(r.choice("pooling", kPoolingNames, 0));
    c.family = ModelFamily(r.choice("family", kFamilyNames, 0));
    c.cls_token = r.flag("cls_token", true);
    c.dist_token = r.flag("dist_token", false);
    c.registers = r.integer("registers", 0, 256, &kZero);
    c.layer_scale = r.flag("layer_scale", false);
    c.ln_pre = r.flag("ln_pre", false);
    c.patch_bias = r.flag("patch_bias", true);
    c.pos_no_cls = r.flag("pos_no_cls", false);
    c.act = Act(r.choice("act", kActNames, 0));
    c.head = Head(r.choice("head", kHeadNames, 0));
    c.embed_dim = r.integer("embed_dim", 0, kMaxWidth, &kZero);
    c.pos_rule = PosRule(r.choice("pos_rule", kPosRuleNames, 0));
    c.pos_grid = r.integer("pos_grid", 0, kMaxImageSize, &kZero);
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

std::vector<int> head_choices(int width) {
    std::vector<int> v;
    for (int n = 1; n <= width; ++n)
        if (width % n == 0) v.push_back(n);
    return v;
}

std::string head_choices_text(int width) {
    const std::vector<int> ch = head_choices(width);
    std::string list;
    for (size_t i = 0; i < ch.size(); ++i)
        list += (i ? (i + 1 == ch.size() ? " or " : ", ") : "") + std::to_string(ch[i]);
    return list;
}

namespace {
void check_heads_flag(int heads, int width, const std::string& what) {
    if (heads > 0 && (heads > width || width % heads))
        throw UsageError("--heads " + std::to_string(heads) + " does not divide the width " + std::to_string(width) +
                         " of " + what + ": the heads split the width into equal parts (" + head_choices_text(width) + ")");
}
}  // namespace

const std::vector<std::string>& imagenet1k_class_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> v;
        std::stringstream ss(imagenet1k_names_text());
        std::string line;
        while (std::getline(ss, line)) {
            while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
            if (!line.empty()) v.push_back(line);
        }
        if (v.size() != 1000) v.clear();  // a build without the list: no names rather than wrong ones
        return v;
    }();
    return names;
}

SideConfig read_side_config(const std::string& dir) {
    const std::string path = (dir.empty() ? std::string(".") : dir) + "/config.json";
    if (::access(path.c_str(), F_OK) != 0) return {};
    return parse_side_config(read_file(path, size_t(1) << 24), path);
}

SideConfig parse_side_config(const std::string& text, const std::string& path) {
    SideConfig sc;
    sc.path = path;
    json j;
    try {
        j = parse_bounded(text);
    } catch (const json::exception& e) {
        throw FileError(path + " (the Hugging Face config beside the checkpoint): not valid JSON: " + e.what());
    } catch (const std::length_error& e) {
        throw FileError(path + " (the Hugging Face config beside the checkpoint): " + e.what());
    }
    auto bad = [&](const std::string& key, const std::string& m) -> FileError {
        return FileError(path + " (the Hugging Face config beside the checkpoint): '" + key + "' " + m);
    };
    if (!j.is_object()) throw bad("", "the file is not a JSON object");
    auto integer = [&](const json& o, const std::string& prefix, const char* key, int hi) -> int {
        auto it = o.find(key);
        if (it == o.end() || it->is_null()) return 0;
        // nlohmann keeps non-negative integers unsigned: read each kind as itself before comparing
        const bool in = it->is_number_unsigned() ? (it->get<uint64_t>() >= 1 && it->get<uint64_t>() <= uint64_t(hi))
                                                 : (it->is_number_integer() && it->get<int64_t>() >= 1 && it->get<int64_t>() <= hi);
        if (!in)
            throw bad(prefix + key, "is " + it->dump().substr(0, 40) + ", not an integer in 1.." + std::to_string(hi));
        return int(it->get<int64_t>());
    };
    // ViT: top level; CLIP / SigLIP: the vision tower's own section.
    const json* o = &j;
    std::string prefix;
    if (auto vc = j.find("vision_config"); vc != j.end() && j.find("num_attention_heads") == j.end()) {
        if (!vc->is_object()) throw bad("vision_config", "is not a JSON object");
        o = &*vc;
        prefix = "vision_config.";
    }
    sc.heads = integer(*o, prefix, "num_attention_heads", kMaxWidth);
    sc.width = integer(*o, prefix, "hidden_size", kMaxWidth);
    if (auto it = j.find("id2label"); it != j.end() && !it->is_null()) {
        if (!it->is_object() || it->size() > size_t(kMaxClasses)) throw bad("id2label", "is not an object of class names");
        std::vector<std::string> names(it->size());
        std::vector<bool> seen(it->size(), false);
        bool placeholders = true;
        for (auto& [k, v] : it->items()) {
            char* end = nullptr;
            errno = 0;
            long i = k.empty() ? -1 : std::strtol(k.c_str(), &end, 10);
            if (k.empty() || *end || errno || i < 0 || size_t(i) >= names.size() || seen[size_t(i)])
                throw bad("id2label", "has key '" + k.substr(0, 40) + "': the keys must be the class indices 0.." +
                                          std::to_string(names.size() - 1) + ", each once");
            if (!v.is_string()) throw bad("id2label", "holds a name that is not a string (key " + k + ")");
            seen[size_t(i)] = true;
            names[size_t(i)] = v.get<std::string>();
            if (names[size_t(i)] != "LABEL_" + std::to_string(i)) placeholders = false;
        }
        if (!placeholders) sc.class_names = std::move(names);  // LABEL_0, LABEL_1, ...: transformers' defaults, not names
    }
    return sc;
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

namespace {
// ViTScope's own file of any family: the config from vitscope.config, every tensor under the
// name for_each_param gives it, with the shape the config gives it.
LoadedModel own_format(std::map<std::string, Array>& src, const std::map<std::string, std::string>& meta,
                       const std::string& what, const LoadOverrides& ov) {
    LoadedModel lm;
    lm.source = what;
    lm.metadata = meta;
    lm.family = Family::Timm;
    Config c = config_from_json(meta.at("vitscope.config"), what);
    check_heads_flag(ov.heads, c.width, what);
    lm.heads_from = ov.heads > 0 ? "--heads" : "__metadata__ vitscope.config";
    if (ov.heads > 0) c.heads = ov.heads;
    if (ov.eps > 0) c.eps = ov.eps;
    if (ov.pooling) c.pooling = *ov.pooling;
    try { c.validate(); } catch (const std::invalid_argument& e) { throw FileError(what + ": " + e.what()); }
    size_t held = 0;
    for (auto& [k, v] : src) held += v.size();
    if (double(param_count(c)) > double(held))
        throw FileError(what + ": the config (" + c.describe() + ") needs " + std::to_string(param_count(c)) +
                        " parameters but the file holds " + std::to_string(held));
    lm.weights = shaped_weights(c);  // shapes only: nothing is touched before the file's arrays move in
    Mapper mp{src, what, {}, {}, {}};
    for_each_param([&](const std::string& name, auto& t) { mp.take(name, shape_of(t), t); }, lm.weights);
    mp.fail_if_any();
    if (!c.patch_bias && xt::any(xt::not_equal(lm.weights.patch_b, 0.f)))
        throw FileError(what + ": patch_embed.proj.bias is not zero, but the config says the patch conv has no bias");
    return lm;
}
}  // namespace

LoadedModel weights_from_tensors(std::map<std::string, Array> src,
                                 const std::map<std::string, std::string>& meta, const std::string& what,
                                 const LoadOverrides& ov, const SideConfig* side) {
    if (auto it = meta.find("vitscope.config"); it != meta.end() && it->second.find("\"family\"") != std::string::npos)
        return own_format(src, meta, what, ov);
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
                               "'vit.embeddings.patch_embeddings.projection.weight' or torchvision 'conv_proj.weight'" +
                               (meta.count("hf.model_type") && meta.count("hf.config") ? " (" + meta.at("hf.config") + " says model_type '" +
                                                                  meta.at("hf.model_type") + "')" : std::string()) +
                               ". First keys:" + some);
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
    if (side && side->width > 0 && side->width != c.width)
        throw FileError(side->path + " (the Hugging Face config beside " + what + ") says hidden_size " +
                        std::to_string(side->width) + " but the checkpoint's width is " + std::to_string(c.width) +
                        ": it describes another model (move it away, or pass --heads N)");
    // The number of heads is not in the shapes: it comes from the user, the file, the config.json
    // beside it, or the published ViT shapes. Nothing else: a wrong count gives wrong attention.
    check_heads_flag(ov.heads, c.width, what);
    if (ov.heads > 0) { c.heads = ov.heads; lm.heads_from = "--heads"; }
    else if (int h = meta_int("num_heads")) { c.heads = h; lm.heads_from = "__metadata__ num_heads"; }
    else if (int h2 = meta_int("heads")) { c.heads = h2; lm.heads_from = "__metadata__ heads"; }
    else if (from_cfg) lm.heads_from = "__metadata__ vitscope.config";
    else if (int h3 = meta_int("hf.num_heads")) {
        c.heads = h3;
        lm.heads_from = (meta.count("hf.config") ? meta.at("hf.config") : std::string("config.json")) + " num_attention_heads";
    }
    else if (side && side->heads > 0) {
        c.heads = side->heads;
        lm.heads_from = side->path + " num_attention_heads";
    } else if (int kh = known_heads(c.width, c.depth, c.mlp)) {
        c.heads = kh;
        lm.heads_from = "the published ViT with these shapes";
    } else {
        const std::string list = head_choices_text(c.width);
        throw HeadsNeeded(what + ": the number of attention heads is not in the file (no __metadata__ num_heads), "
                          "not in a config.json beside it (num_attention_heads), and width " + std::to_string(c.width) +
                          ", depth " + std::to_string(c.depth) + ", mlp " + std::to_string(c.mlp) +
                          " is not a published ViT: pass --heads N, where N divides the width " + std::to_string(c.width) +
                          " (" + list + ")", what, c.width, head_choices(c.width));
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
    if (from_cfg && !c.class_names.empty()) lm.labels_from = "__metadata__ vitscope.config";
    if (auto it = meta.find("class_names"); it != meta.end()) {
        try { c.class_names = parse_bounded(it->second).get<std::vector<std::string>>(); }
        catch (...) { throw FileError(what + ": __metadata__ class_names is not a JSON list of strings"); }
        lm.labels_from = "__metadata__ class_names";
    }
    if (!c.class_names.empty() && c.class_names.size() != size_t(c.classes)) { c.class_names.clear(); lm.labels_from.clear(); }
    if (c.class_names.empty() && side && !side->class_names.empty()) {
        if (side->class_names.size() != size_t(c.classes))
            throw FileError(side->path + " (the Hugging Face config beside " + what + "): id2label names " +
                            std::to_string(side->class_names.size()) + " classes but the checkpoint's head has " +
                            std::to_string(c.classes));
        c.class_names = side->class_names;
        lm.labels_from = side->path + " id2label";
    }
    if (c.class_names.empty() && c.classes == 1000 && !imagenet1k_class_names().empty()) {
        c.class_names = imagenet1k_class_names();
        lm.labels_from = "ImageNet-1k (the default for 1000 classes)";
    }
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

namespace {
enum class Format { SafeTensors, Pth };
// By extension; other files by their first bytes. Unknown: a FileError listing kCheckpointFormats.
Format checkpoint_format(const std::string& path) {
    auto ends = [&](const char* e) {
        size_t n = std::strlen(e);
        if (path.size() < n) return false;
        for (size_t i = 0; i < n; ++i)
            if (std::tolower(static_cast<unsigned char>(path[path.size() - n + i])) != e[i]) return false;
        return true;
    };
    if (ends(".safetensors")) return Format::SafeTensors;
    if (ends(".pth") || ends(".pt") || ends(".bin") || ends(".ckpt")) return Format::Pth;
    // Unknown extension: the first bytes decide.
    char head[9] = {};
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
        size_t got = std::fread(head, 1, sizeof head, f);
        std::fclose(f);
        if (looks_like_zip(head, got) || (got >= 2 && uint8_t(head[0]) == 0x80)) return Format::Pth;
        if (got == 9 && head[8] == '{') return Format::SafeTensors;  // u64 header length, then JSON
    }
    size_t dot = path.rfind('.'), slash = path.rfind('/');
    std::string ext = dot != std::string::npos && (slash == std::string::npos || dot > slash) ? path.substr(dot) : "";
    throw FileError(path + ": unknown checkpoint format" + (ext.empty() ? std::string(" (no extension)") : " '" + ext + "'") +
                    "; supported: " + kCheckpointFormats);
}
}  // namespace

SafeTensors read_checkpoint(const std::string& path) {
    return checkpoint_format(path) == Format::SafeTensors ? read_safetensors(path) : read_pth(path);
}

TensorIndex index_checkpoint(const std::string& path) {
    return checkpoint_format(path) == Format::SafeTensors ? index_safetensors(path) : index_pth(path);
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
    if (hub::is_spec(spec)) {
        const hub::Snapshot snap = hub::resolve(hub::parse_spec(spec), ov.hub);
        LoadedModel lm = load_checkpoint_files(snap.weights, snap.config, snap.preprocessor, ov);
        lm.source = spec + " @ " + snap.commit.substr(0, 12);
        lm.metadata["hf.commit"] = snap.commit;
        lm.metadata["hf.weights"] = snap.weights;
        return lm;
    }
    if (is_preset(spec)) {
        LoadedModel lm;
        Config c = preset(spec);
        lm.heads_from = ov.heads > 0 ? "--heads" : "the preset";
        check_heads_flag(ov.heads, c.width, "preset " + spec);
        if (ov.heads > 0) c.heads = ov.heads;
        if (ov.eps > 0) c.eps = ov.eps;
        if (ov.pooling) c.pooling = *ov.pooling;
        if (!c.class_names.empty()) lm.labels_from = "the preset";
        else if (c.classes == 1000 && !imagenet1k_class_names().empty()) {
            c.class_names = imagenet1k_class_names();
            lm.labels_from = "ImageNet-1k (the default for 1000 classes)";
        }
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
    // A hub snapshot's file opened by its path reads the configs beside it, as hf: does.
    const size_t slash = spec.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : spec.substr(0, slash == 0 ? 1 : slash),
                      base = slash == std::string::npos ? spec : spec.substr(slash + 1);
    if ((base == "model.safetensors" || base == "pytorch_model.bin") && is_regular_file(dir + "/config.json"))
        return load_checkpoint_files(spec, dir + "/config.json",
                                     is_regular_file(dir + "/preprocessor_config.json") ? dir + "/preprocessor_config.json" : "", ov);
    const SideConfig side = read_side_config(dir);
    return name_out_of_memory(spec, "reading the checkpoint",
                              [&] { return model_from_safetensors(read_checkpoint(spec), spec, ov, &side); });
}

namespace {

std::string number_text(double v) {
    char b[40];
    std::snprintf(b, sizeof b, "%.9g", v);
    return b;
}

json read_json_config(const std::string& path) {
    std::string text = read_file(path, size_t(16) << 20);
    try {
        json j = parse_bounded(text);
        if (!j.is_object()) throw FileError(path + ": not a JSON object");
        return j;
    } catch (const json::exception& e) {
        throw FileError(path + ": not valid JSON (" + e.what() + ")");
    } catch (const std::length_error& e) {
        throw FileError(path + ": " + e.what());
    }
}

// A positive integer field, or 0.
int64_t int_field(const json& j, const char* k, int64_t hi) {
    auto it = j.find(k);
    if (it == j.end() || !it->is_number_integer()) return 0;
    if (it->is_number_unsigned()) return it->get<uint64_t>() <= uint64_t(hi) ? int64_t(it->get<uint64_t>()) : 0;
    int64_t v = it->get<int64_t>();
    return v > 0 && v <= hi ? v : 0;
}

// The config.json of a Hugging Face or timm repository, as the metadata entries the loader reads.
void config_metadata(const json& j, const std::string& path, std::map<std::string, std::string>& meta) {
    meta["hf.config"] = path;
    auto put = [&](const std::string& k, const std::string& v) { meta.emplace(k, v); };  // the file's own metadata wins
    if (auto it = j.find("model_type"); it != j.end() && it->is_string()) put("hf.model_type", it->get<std::string>());
    if (auto it = j.find("architecture"); it != j.end() && it->is_string()) put("hf.model_type", "timm " + it->get<std::string>());
    // Hugging Face: the vision settings at the top level, or in vision_config (CLIP, SigLIP).
    const json* v = &j;
    if (!j.contains("num_attention_heads") && j.contains("vision_config") && j["vision_config"].is_object()) v = &j["vision_config"];
    if (int64_t h = int_field(*v, "num_attention_heads", kMaxWidth)) put("hf.num_heads", std::to_string(h));
    if (auto it = v->find("layer_norm_eps"); it != v->end() && it->is_number()) {
        double e = it->get<double>();
        if (e > 0 && e <= 1) put("eps", number_text(e));
    }
    std::vector<std::string> names;
    if (auto it = j.find("id2label"); it != j.end() && it->is_object() && !it->empty() && it->size() <= size_t(kMaxClasses)) {
        names.assign(it->size(), "");
        for (auto& [k, val] : it->items()) {
            char* end = nullptr;
            long i = std::strtol(k.c_str(), &end, 10);
            if (k.empty() || *end || i < 0 || size_t(i) >= names.size() || !val.is_string() || !names[size_t(i)].empty()) {
                names.clear();
                break;
            }
            names[size_t(i)] = val.get<std::string>();
        }
    } else if (auto it2 = j.find("label_names"); it2 != j.end() && it2->is_array() && it2->size() <= size_t(kMaxClasses)) {
        for (auto& n : *it2) {
            if (!n.is_string()) { names.clear(); break; }
            names.push_back(n.get<std::string>());
        }
    }
    // transformers writes LABEL_0, LABEL_1, ... when a model has no class names: those are not names.
    bool placeholder = !names.empty();
    for (size_t i = 0; i < names.size() && placeholder; ++i) placeholder = names[i] == "LABEL_" + std::to_string(i);
    if (!names.empty() && !placeholder) put("class_names", json(names).dump());
}

// Preprocessing from a Hugging Face preprocessor_config.json or timm's pretrained_cfg. What cannot
// be followed is said in vitscope.preprocess_note, never dropped silently.
void apply_preprocessing(const json& j, const std::string& path, LoadedModel& lm) {
    Config& c = lm.weights.cfg;
    std::vector<std::string> notes;
    // One number per channel from src[k]; anything else is noted and the value kept.
    auto channels = [&](const json& src, const char* k, const std::string& label, std::vector<float>& dst) {
        auto it = src.find(k);
        if (it == src.end()) return;
        std::vector<float> v;
        if (it->is_array())
            for (auto& x : *it)
                if (x.is_number() && std::isfinite(x.get<double>())) v.push_back(float(x.get<double>()));
        if (it->is_array() && v.size() == it->size() && v.size() == size_t(c.channels)) dst = v;
        else notes.push_back(label + " is not " + std::to_string(c.channels) + " numbers");
    };
    auto flag = [](const json& src, const char* k, bool dflt) {
        auto it = src.find(k);
        return it != src.end() && it->is_boolean() ? it->get<bool>() : dflt;
    };
    auto interp_name = [&] { return std::string(c.pre.interp == Interp::Bicubic ? "bicubic" : "bilinear"); };
    const bool timm = j.contains("pretrained_cfg") && j["pretrained_cfg"].is_object();
    if (timm) {
        const json& p = j["pretrained_cfg"];
        channels(p, "mean", "pretrained_cfg.mean", c.pre.mean);
        channels(p, "std", "pretrained_cfg.std", c.pre.std);
        if (auto ip = p.find("interpolation"); ip != p.end() && ip->is_string()) {
            if (*ip == "bicubic") c.pre.interp = Interp::Bicubic;
            else if (*ip == "bilinear") c.pre.interp = Interp::Bilinear;
            else notes.push_back("interpolation '" + ip->get<std::string>() + "' is not available: " + interp_name() + " used");
        }
        if (auto cp = p.find("crop_pct"); cp != p.end() && cp->is_number()) {
            double pct = cp->get<double>();
            auto cm = p.find("crop_mode");
            const std::string mode = cm != p.end() && cm->is_string() ? cm->get<std::string>() : "center";
            if (pct > 0 && pct <= 1 && mode == "center") {
                c.pre.resize = int(std::floor(c.image_size / pct));
                c.pre.squash = false;
            } else {
                notes.push_back("crop_pct " + number_text(pct) + " with crop_mode '" + mode + "' is not available");
            }
        }
    } else {
        lm.metadata["hf.preprocessor"] = path;
        channels(j, "image_mean", "image_mean", c.pre.mean);
        channels(j, "image_std", "image_std", c.pre.std);
        if (auto it = j.find("resample"); it != j.end() && it->is_number_integer()) {
            int r = it->get<int>();
            if (r == 3) c.pre.interp = Interp::Bicubic;
            else if (r == 2) c.pre.interp = Interp::Bilinear;
            else notes.push_back("resample " + std::to_string(r) + " (PIL " + (r == 0 ? "nearest" : r == 1 ? "lanczos" : "other") +
                                 ") is not available: " + interp_name() + " used");
        }
        // size: {"height", "width"} (a straight resize), {"shortest_edge"} (aspect kept), or an int.
        auto square = [&](const char* k, int64_t& side, bool& shortest) {
            side = 0;
            shortest = false;
            auto it = j.find(k);
            if (it == j.end()) return;
            if (it->is_number_integer()) side = int_field(j, k, kMaxResize);
            else if (it->is_object()) {
                int64_t h = int_field(*it, "height", kMaxResize), w = int_field(*it, "width", kMaxResize);
                int64_t se = int_field(*it, "shortest_edge", kMaxResize);
                if (h && h == w) side = h;
                else if (se) { side = se; shortest = true; }
                else notes.push_back(std::string(k) + " " + it->dump() + " is not a square or a shortest edge");
            }
        };
        int64_t size = 0, crop = 0;
        bool size_shortest = false, crop_shortest = false;
        const bool do_resize = flag(j, "do_resize", true), do_crop = flag(j, "do_center_crop", false);
        square("size", size, size_shortest);
        if (do_crop) square("crop_size", crop, crop_shortest);
        if (do_crop && crop && crop != c.image_size)
            notes.push_back("crop_size " + std::to_string(crop) + " is not the model's " + std::to_string(c.image_size));
        else if (do_resize && size) {
            if (do_crop) {  // resize (shorter side, or to a square), then centre-crop to the model's size
                c.pre.squash = !size_shortest && j.at("size").is_object();
                c.pre.resize = int(size);
            } else if (!size_shortest && size == c.image_size) {
                c.pre.squash = true;  // straight to the model's square, aspect not kept
                c.pre.resize = 0;
            } else {
                notes.push_back("resizing to " + std::to_string(size) + (size_shortest ? " (shorter side)" : "") +
                                " without a crop does not give the model's " + std::to_string(c.image_size) + " pixels");
            }
        }
        if (!flag(j, "do_normalize", true)) notes.push_back("do_normalize is false: mean and std are applied anyway");
        if (auto it = j.find("rescale_factor"); it != j.end() && it->is_number() && std::fabs(it->get<double>() - 1 / 255.0) > 1e-9)
            notes.push_back("rescale_factor " + number_text(it->get<double>()) + " is not 1/255");
    }
    if (!notes.empty()) {
        std::string all;
        for (auto& n : notes) all += (all.empty() ? "" : "; ") + n;
        lm.metadata["vitscope.preprocess_note"] = path + ": " + all;
    }
}

}  // namespace

LoadedModel load_checkpoint_files(const std::string& weights, const std::string& config_json,
                                  const std::string& preprocessor_json, const LoadOverrides& ov) {
    SafeTensors st = read_checkpoint(weights);
    json cfg, pre;
    if (!config_json.empty()) {
        cfg = read_json_config(config_json);
        config_metadata(cfg, config_json, st.metadata);
    }
    if (!preprocessor_json.empty()) pre = read_json_config(preprocessor_json);
    const bool own_config = st.metadata.count("vitscope.config") != 0;  // a file vitscope saved: its config is complete
    LoadedModel lm = model_from_safetensors(std::move(st), weights, ov);
    if (!own_config) {
        if (!pre.is_null()) apply_preprocessing(pre, preprocessor_json, lm);
        else if (cfg.is_object() && cfg.contains("pretrained_cfg")) apply_preprocessing(cfg, config_json, lm);
        try {
            lm.weights.cfg.validate();
        } catch (const std::invalid_argument& e) {
            throw FileError(weights + ": with " + (pre.is_null() ? config_json : preprocessor_json) + ": " + e.what());
        }
    }
    return lm;
}

LoadedModel model_from_safetensors(SafeTensors st, const std::string& what, const LoadOverrides& ov,
                                   const SideConfig* side) {
    for (auto& [k, dt] : st.dtypes)
        if (!st.tensors.count(k)) throw FileError(what + ": tensor '" + k + "' has dtype " + dt + "; only F32, F16, BF16 and F64 weights are supported");
    return weights_from_tensors(std::move(st.tensors), st.metadata, what, ov, side);
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
