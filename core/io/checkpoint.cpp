#include "core/io/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "core/io/io.h"
#include "core/io/layouts.h"
#include "core/io/pth.h"

namespace vit {

using json = nlohmann::json;

const char* family_name(Family f) {
    switch (f) {
        case Family::Timm: return "timm";
        case Family::HuggingFace: return "huggingface";
        case Family::Torchvision: return "torchvision";
        case Family::OpenAI: return "openai";
        case Family::OpenClip: return "open_clip";
        case Family::Facebook: return "facebookresearch";
        case Family::Apple: return "apple";
    }
    return "?";
}

namespace {
// The spellings of the families' enums in vitscope.config (and `info`).
const char* const kPoolingNames[] = {"cls", "mean", "cls_then_norm", "map", "norm_mean"};
const char* const kFamilyNames[] = {"vit", "deit", "dino", "dinov2", "clip", "siglip", "mae", "dinov3", "aimv2", "eva02",
                                    "pe"};
const char* const kRopeKindNames[] = {"dinov3", "eva", "pe"};
const char* const kNormNames[] = {"layer_norm", "rms_norm"};
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
    // the family fields, whenever one of them is not the vanilla ViT's (each of them: a converted Hugging Face
    // ViT differs only in its position table's resize rule, and reloaded with timm's when that was left out)
    if (c.family != ModelFamily::ViT || c.head != Head::Classifier || !c.cls_token || c.dist_token || c.registers || c.layer_scale ||
        c.ln_pre || !c.patch_bias || c.pos_no_cls || c.act != Act::Gelu || c.pos_grid || c.pos_rule != PosRule::Timm ||
        !c.pos_table || c.rope || c.norm != Norm::LayerNorm || !c.qkv_bias || !c.proj_bias || c.patch_norm || c.mlp_norm) {
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
        if (c.rope && c.rope_kind != RopeKind::Dinov3) {  // EVA-02, PE: RoPE beside the table, no base (a fixed temperature)
            j["rope"] = true;
            j["rope_kind"] = kRopeKindNames[int(c.rope_kind)];
            j["rope_ref_grid"] = c.rope_ref_grid;
        } else if (!c.pos_table || c.rope) {  // written only when on: older files stay as they were
            j["pos_table"] = c.pos_table;
            j["rope"] = c.rope;
            j["rope_base"] = c.rope_base;
        }
        // each written only when not the vanilla ViT's (older files stay as they were)
        if (c.norm != Norm::LayerNorm) j["norm"] = kNormNames[int(c.norm)];
        if (!c.qkv_bias) j["qkv_bias"] = false;
        if (!c.proj_bias) j["proj_bias"] = false;
        if (c.patch_norm) j["patch_norm"] = true;
        if (c.mlp_norm) j["mlp_norm"] = true;
        if (c.map_heads) j["map_heads"] = c.map_heads;
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
    c.pos_table = r.flag("pos_table", true);
    c.rope = r.flag("rope", false);
    c.rope_base = r.number("rope_base", c.rope_base);
    c.rope_kind = RopeKind(r.choice("rope_kind", kRopeKindNames, 0));
    c.rope_ref_grid = r.integer("rope_ref_grid", 0, kMaxImageSize, &kZero);
    c.norm = Norm(r.choice("norm", kNormNames, 0));
    c.qkv_bias = r.flag("qkv_bias", true);
    c.proj_bias = r.flag("proj_bias", true);
    c.patch_norm = r.flag("patch_norm", false);
    c.mlp_norm = r.flag("mlp_norm", false);
    c.map_heads = r.integer("map_heads", 0, kMaxWidth, &kZero);
    const int zero = 0;
    c.pre.resize = r.integer("resize", 0, kMaxResize, &zero);
    static const char* const kInterpNames[] = {"bilinear", "bicubic"};  // anything else is refused, not read as bilinear
    c.pre.interp = r.choice("interp", kInterpNames, 0) == 1 ? Interp::Bicubic : Interp::Bilinear;
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
// ViT-H/14 has 16 heads of 80 dims, which width/64 (= 20) would get wrong. The same shapes cover
// DeiT, DINO, DINOv2 S/B/L, MAE B/L/H and CLIP B/L/H. Beyond them: DINOv2 ViT-g/14 (width 1536,
// 40 blocks, SwiGLU of 4096, 24 heads: dinov2 hub/backbones.py vit_giant2), open_clip's ViT-g-14
// (1408, 40, 6144, 16: head_width 88) and ViT-bigG-14 (1664, 48, 8192, 16: head_width 104)
// (model_configs/*.json), SigLIP So400m (1152, 27, 4304, 16: google/siglip-so400m-patch14-384), AIMv2's five.
int known_heads(int width, int depth, int mlp) {
    struct K { int width, depth, mlp, heads; };
    static const K known[] = {{192, 12, 768, 3}, {384, 12, 1536, 6}, {768, 12, 3072, 12},
                              {1024, 24, 4096, 16}, {1280, 32, 5120, 16}, {1536, 40, 4096, 24},
                              {1408, 40, 6144, 16}, {1664, 48, 8192, 16}, {1152, 27, 4304, 16},
                              // AIMv2 B/L/H/1B/3B (apple/ml-aim aimv2_*: heads of 128; mlp is the SwiGLU's hidden width)
                              {768, 12, 2048, 6}, {1024, 24, 2816, 8}, {1536, 24, 4096, 12}, {2048, 24, 5632, 16},
                              {3072, 24, 8192, 24}};
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


void check_heads_flag(int heads, int width, const std::string& what) {
    if (heads > 0 && (heads > width || width % heads))
        throw UsageError("--heads " + std::to_string(heads) + " does not divide the width " + std::to_string(width) +
                         " of " + what + ": the heads split the width into equal parts (" + head_choices_text(width) + ")");
}

std::vector<std::string> class_names_from_json(const std::string& text, const std::string& what) {
    try {
        json j = parse_bounded(text);
        if (!j.is_array() || j.size() > size_t(kMaxClasses)) throw std::length_error("not a list");
        return j.get<std::vector<std::string>>();
    } catch (...) {
        throw FileError(what + ": __metadata__ class_names is not a JSON list of strings");
    }
}

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

namespace {
// SideConfig's summary of a config file: heads, width and class names as the file states them
// (transformers' placeholder labels LABEL_0, LABEL_1, ... are not names).
void summarise(SideConfig& sc) {
    const ModelConfigFile& m = sc.config->model;
    sc.heads = m.num_attention_heads.value_or(0);
    sc.width = m.hidden_size.value_or(0);
    bool placeholders = !m.labels.empty();
    for (size_t i = 0; i < m.labels.size() && placeholders; ++i) placeholders = m.labels[i] == "LABEL_" + std::to_string(i);
    sc.class_names = placeholders ? std::vector<std::string>{} : m.labels;
}

// The checkpoint's name as its released files and the Hugging Face cache spell it: the file name,
// and the repository folder (models--ORG--NAME) of a cache path.
std::string checkpoint_name(const std::string& weights) {
    const size_t slash = weights.rfind('/');
    std::string name = slash == std::string::npos ? weights : weights.substr(slash + 1);
    const size_t m = weights.find("/models--");
    if (m != std::string::npos) {
        const size_t e = weights.find('/', m + 1);
        name += " " + weights.substr(m + 1, e == std::string::npos ? std::string::npos : e - m - 1);
    }
    return name;
}

std::string dir_of(const std::string& path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

void read_open_clip_beside(SideConfig& sc, const std::string& dir) {
    const std::string oc = dir + "/open_clip_config.json";
    if (!is_regular_file(oc)) return;
    sc.open_clip = read_config_json(oc);
    sc.open_clip_path = oc;
    if (sc.open_clip->model.kind != ConfigKind::OpenClip)
        throw FileError(oc + ": not an open_clip config (no model_cfg)");
}
}  // namespace

SideConfig parse_side_config(const std::string& text, const std::string& path) {
    SideConfig sc;
    sc.path = path;
    sc.config = parse_config_json(text, path);
    summarise(sc);
    return sc;
}

SideConfig read_side_config(const std::string& dir) {
    const std::string path = (dir.empty() ? std::string(".") : dir) + "/config.json";
    if (::access(path.c_str(), F_OK) != 0) return {};
    SideConfig sc;
    sc.path = path;
    sc.config = read_config_json(path);
    summarise(sc);
    return sc;
}

SideConfig read_side_files(const std::string& weights) {
    const std::string dir = dir_of(weights);
    SideConfig sc = read_side_config(dir);
    read_open_clip_beside(sc, dir);
    const std::string pre = dir + "/preprocessor_config.json";
    // There but not a file (a FIFO, /dev/zero): read_preprocessor_json names it; never skipped silently.
    if (struct stat sb; ::stat(pre.c_str(), &sb) == 0) {
        sc.preprocessor = read_preprocessor_json(pre);
        sc.preprocessor_path = pre;
    }
    sc.name = checkpoint_name(weights);
    return sc;
}

LoadedModel weights_from_tensors(std::map<std::string, Array> src, const std::map<std::string, std::string>& meta,
                                 const std::string& what, const LoadOverrides& ov, const SideConfig* side) {
    static const SideConfig none;
    return load_layout(src, {}, meta, what, ov, side ? *side : none);
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
    check_regular_file(path);  // before the first bytes are read: /dev/zero, a FIFO, a directory
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

bool is_embedded_model(const std::string& spec) { return spec.empty() || spec == "default" || spec == "scenes"; }

LoadedModel load_model(const std::string& spec, const LoadOverrides& ov, uint64_t seed) {
    if (spec == "scenes") {
        const std::string bytes = embedded_scenes_bytes();
        if (bytes.empty()) throw FileError("model 'scenes': this build has no embedded scenes model (assets/scenes_vit.safetensors "
                                           "was missing when it was built)");
        SafeTensors st = parse_safetensors(bytes, "embedded scenes model");
        LoadedModel lm = weights_from_tensors(std::move(st.tensors), st.metadata, "embedded scenes model", ov);
        lm.source = "embedded scenes";
        return lm;
    }
    if (spec == "default" || spec.empty()) {
        std::string bytes = embedded_model_bytes();
        if (bytes.empty()) {
            LoadedModel lm;
            lm.weights = init_weights(preset("fmnist"), seed);
            randomize_layernorms(lm.weights, seed);
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
        else if (c.has_logits() && c.classes == 1000 && !imagenet1k_class_names().empty()) {
            // (a preset without a classifier, DINO's or CLIP's, has no classes to name)
            c.class_names = imagenet1k_class_names();
            lm.labels_from = "ImageNet-1k (the default for 1000 classes)";
        }
        // random LayerNorm gamma and beta too (issue 35): with nn.LayerNorm's ones and zeros, elementwise_affine
        // would change nothing on a preset
        lm.weights = name_out_of_memory("preset " + spec, "creating its random weights", [&] {
            Weights w = init_weights(c, seed);
            randomize_layernorms(w, seed);
            return w;
        });
        lm.source = "preset:" + spec;
        return lm;
    }
    if (::access(spec.c_str(), F_OK) != 0) {
        std::string all;
        for (auto& p : preset_names()) all += (all.empty() ? "" : ", ") + p;
        // the missing file first (issue 36): a path the user typed is what they meant, the presets come after
        throw FileError("model '" + spec + "': no such file (" + std::string(kCheckpointFormats) +
                        "), and not 'default' or a preset (" + all +
                        "; torchvision and timm names such as vit_b_16 or vit_base_patch16_224: see "
                        "'vitscope-cli info --list')");
    }
    check_regular_file(spec);  // a directory or a device is named as such, before anything beside it is read
    // The config files beside a checkpoint describe it (a hub snapshot's, a released model's folder).
    const SideConfig side = read_side_files(spec);
    return name_out_of_memory(spec, "reading the checkpoint",
                              [&] { return model_from_safetensors(read_checkpoint(spec), spec, ov, &side); });
}

LoadedModel load_checkpoint_files(const std::string& weights, const std::string& config_json,
                                  const std::string& preprocessor_json, const LoadOverrides& ov) {
    SafeTensors st = read_checkpoint(weights);
    SideConfig side;
    if (!config_json.empty()) {
        side.path = config_json;
        side.config = read_config_json(config_json);
        summarise(side);
    }
    if (!preprocessor_json.empty()) {
        side.preprocessor = read_preprocessor_json(preprocessor_json);
        side.preprocessor_path = preprocessor_json;
    }
    read_open_clip_beside(side, dir_of(weights));
    side.name = checkpoint_name(weights);
    return model_from_safetensors(std::move(st), weights, ov, &side);
}

LoadedModel model_from_safetensors(SafeTensors st, const std::string& what, const LoadOverrides& ov,
                                   const SideConfig* side) {
    static const SideConfig none;
    return load_layout(st.tensors, st.dtypes, st.metadata, what, ov, side ? *side : none);
}

void apply_labels_file(Config& c, const std::string& path) {
    check_regular_file(path);
    struct stat sb;
    if (::stat(path.c_str(), &sb) == 0 && uint64_t(sb.st_size) > kMaxClassNamesFileBytes)
        throw FileError(path + ": " + std::to_string(sb.st_size) + " bytes, more than the " +
                        std::to_string(kMaxClassNamesFileBytes) + " (" + std::to_string(kMaxClassNamesFileBytes >> 20) +
                        " MiB) a class-name file may hold; it is not read (one name a line, at most " +
                        std::to_string(kMaxClassNameBytes) + " bytes each, up to " + std::to_string(kMaxClasses) + " classes)");
    name_out_of_memory(path, "reading the class names",
                       [&] { apply_labels(c, read_file(path, kMaxClassNamesFileBytes), path); });
}

void apply_labels(Config& c, const std::string& text, const std::string& path) {
    // Names are kept only up to the model's count (an 8 MiB file of 4 M one-letter lines would
    // otherwise hold 4 M strings); the rest are only counted, for the message.
    // One name a line, in class order: a UTF-8 byte-order mark is not part of the first name, and
    // blank lines may only end the file (one between names would shift every later class).
    std::vector<std::string> names;
    size_t count = 0, lineno = 0, blank = 0;
    std::stringstream ss(text.compare(0, 3, "\xef\xbb\xbf") == 0 ? text.substr(3) : text);
    std::string line;
    while (std::getline(ss, line)) {
        ++lineno;
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
        if (line.empty()) {
            if (!blank) blank = lineno;
            continue;
        }
        if (line.size() > kMaxClassNameBytes)
            throw FileError(path + ": line " + std::to_string(lineno) + " is a class name of " + std::to_string(line.size()) +
                            " bytes, more than the " + std::to_string(kMaxClassNameBytes) + " a class name may have");
        if (blank)
            throw FileError(path + ": line " + std::to_string(blank) + " is blank, and class names follow it: the file " +
                            "holds one name a line in class order, so a skipped line would shift every later class (give " +
                            "that class a name)");
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
    // packed block matrices are written row-major from a copy (saving is rare; the copy goes after)
    std::optional<Weights> plain;
    if (blocks_packed(w)) plain = unpacked_copy(w);
    std::vector<ArrayRef> named = param_refs(plain ? *plain : w);
    for (auto& r : named) {
        if (r.name == "cls_token") r.shape = {1, 1, size_t(c.width)};
        else if (r.name == "pos_embed") r.shape = {1, size_t(c.pos_rows()), size_t(c.width)};
        else if (r.name == "patch_embed.proj.weight")
            r.shape = {size_t(c.width), size_t(c.channels), size_t(c.patch), size_t(c.patch)};
    }
    write_safetensors(path, named, extra);
}

}  // namespace vit
