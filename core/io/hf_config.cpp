#include "core/io/hf_config.h"

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "core/io/io.h"
#include "core/model/model.h"

namespace vit {

using json = nlohmann::json;

namespace {

constexpr size_t kMaxConfigBytes = size_t(64) << 20, kMaxValues = 1'000'000, kMaxDepth = 32;
constexpr size_t kMaxText = 4096;  // one string (a label, an activation's name)
constexpr int kMaxRegisters = 64;

// Bounded JSON: at most kMaxValues values, kMaxDepth levels, no key twice in an object.
json parse_bounded(const std::string& text, const std::string& what) {
    if (text.size() > kMaxConfigBytes)
        throw FileError(what + ": " + std::to_string(text.size()) + " bytes, more than a config file can be (" +
                        std::to_string(kMaxConfigBytes >> 20) + " MB)");
    std::vector<std::unordered_set<std::string>> keys;
    size_t values = 0;
    std::string dup;
    json::parser_callback_t cb = [&](int depth, json::parse_event_t ev, json& parsed) {
        if (++values > kMaxValues)
            throw FileError(what + ": more than " + std::to_string(kMaxValues) + " JSON values");
        if (size_t(depth) > kMaxDepth) throw FileError(what + ": nested more than " + std::to_string(kMaxDepth) + " levels deep");
        if (ev == json::parse_event_t::object_start) {
            keys.emplace_back();
        } else if (ev == json::parse_event_t::object_end) {
            if (!keys.empty()) keys.pop_back();
        } else if (ev == json::parse_event_t::key && !keys.empty()) {
            if (!keys.back().insert(parsed.get<std::string>()).second && dup.empty()) dup = parsed.get<std::string>();
        }
        return true;
    };
    json j;
    try {
        j = json::parse(text, cb);
    } catch (const json::exception& e) {
        throw FileError(what + ": not valid JSON (UTF-8 JSON text expected: " + std::string(e.what()) + ")");
    }
    if (!dup.empty()) throw FileError(what + ": the key '" + dup + "' appears twice in one object");
    if (!j.is_object()) throw FileError(what + ": not a JSON object");
    return j;
}

std::string shown(const json& v) {
    std::string s = v.dump();
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return s;
}

// Checked reads from one JSON object; `path` is the object's place in the file
// ("vision_config.") for messages. A field that is absent or null is "not given".
struct Fields {
    const json& j;
    std::string what, path;

    [[noreturn]] void bad(const std::string& key, const std::string& m) const {
        throw FileError(what + ": field '" + path + key + "' " + m);
    }
    const json* get(const std::string& key) const {
        auto it = j.find(key);
        if (it == j.end() || it->is_null()) return nullptr;
        return &*it;
    }
    int int_value(const std::string& key, const json& v, int64_t lo, int64_t hi) const {
        if (!v.is_number_integer()) bad(key, "is " + shown(v) + ", not an integer");
        bool in;
        int64_t x = 0;
        if (v.is_number_unsigned()) {
            uint64_t u = v.get<uint64_t>();
            in = u <= uint64_t(hi);
            if (in) x = int64_t(u);
        } else {
            x = v.get<int64_t>();
            in = x <= hi;
        }
        if (!in || x < lo) bad(key, "is " + shown(v) + ", outside " + std::to_string(lo) + ".." + std::to_string(hi));
        return int(x);
    }
    std::optional<int> integer(const std::string& key, int64_t lo, int64_t hi) const {
        const json* v = get(key);
        if (!v) return std::nullopt;
        return int_value(key, *v, lo, hi);
    }
    // A LayerNorm epsilon: in (0, 1] and large enough to stay a positive float32 (1e-300 became 0 in
    // the model and was blamed on the weights).
    std::optional<double> eps(const std::string& key) const {
        std::optional<double> e = number(key, 0.0, 1.0, true);
        if (e && *e < 1e-30)
            bad(key, "is " + shown(*get(key)) + ", too small: a LayerNorm epsilon is at least 1e-30 here (float32; "
                     "models use 1e-12 to 1e-5)");
        return e;
    }
    // A finite number in (lo, hi] (lo_open) or [lo, hi].
    std::optional<double> number(const std::string& key, double lo, double hi, bool lo_open = false) const {
        const json* v = get(key);
        if (!v) return std::nullopt;
        if (!v->is_number()) bad(key, "is " + shown(*v) + ", not a number");
        double d = v->get<double>();
        if (!std::isfinite(d) || d > hi || d < lo || (lo_open && d == lo))
            bad(key, "is " + shown(*v) + ", outside " + (lo_open ? "(" : "[") + std::to_string(lo) + ", " +
                         std::to_string(hi) + "]");
        return d;
    }
    std::optional<bool> boolean(const std::string& key) const {
        const json* v = get(key);
        if (!v) return std::nullopt;
        if (!v->is_boolean()) bad(key, "is " + shown(*v) + ", not true or false");
        return v->get<bool>();
    }
    std::optional<std::string> text(const std::string& key) const {
        const json* v = get(key);
        if (!v) return std::nullopt;
        if (!v->is_string()) bad(key, "is " + shown(*v) + ", not a string");
        std::string s = v->get<std::string>();
        if (s.size() > kMaxText) bad(key, "is a string of " + std::to_string(s.size()) + " bytes");
        return s;
    }
    const json* object(const std::string& key) const {
        const json* v = get(key);
        if (v && !v->is_object()) bad(key, "is " + shown(*v) + ", not an object");
        return v;
    }
    Fields sub(const json& o, const std::string& key) const { return Fields{o, what, path + key + "."}; }
    // An int, or [h, w] (or [C, H, W] when `chw`), as (h, w).
    std::optional<std::pair<int, int>> size2(const std::string& key, int64_t lo, int64_t hi) const {
        const json* v = get(key);
        if (!v) return std::nullopt;
        if (v->is_number_integer()) {
            int s = int_value(key, *v, lo, hi);
            return std::make_pair(s, s);
        }
        if (!v->is_array() || v->size() != 2 || !(*v)[0].is_number_integer() || !(*v)[1].is_number_integer())
            bad(key, "is " + shown(*v) + ", not an integer or [height, width]");
        return std::make_pair(int_value(key, (*v)[0], lo, hi), int_value(key, (*v)[1], lo, hi));
    }
    std::optional<std::vector<float>> floats(const std::string& key, bool positive) const {
        const json* v = get(key);
        if (!v) return std::nullopt;
        std::vector<float> out;
        auto one = [&](const json& x) {
            if (!x.is_number()) bad(key, "holds " + shown(x) + ", not a number");
            double d = x.get<double>();
            if (!std::isfinite(d) || std::fabs(d) > 1e6 || (positive && !(d > 0)))
                bad(key, "holds " + shown(x) + (positive ? ", not a positive finite number" : ", not a finite number"));
            out.push_back(float(d));
        };
        if (v->is_number()) {
            one(*v);
        } else if (v->is_array() && v->size() >= 1 && v->size() <= 4) {
            for (const json& x : *v) one(x);
        } else {
            bad(key, "is " + shown(*v) + ", not a list of 1 to 4 numbers (one per channel)");
        }
        return out;
    }
    std::vector<std::string> strings(const std::string& key, size_t max) const {
        const json* v = get(key);
        if (!v) return {};
        if (!v->is_array() || v->size() > max) bad(key, "is not a list of at most " + std::to_string(max) + " strings");
        std::vector<std::string> out;
        for (const json& x : *v) {
            if (!x.is_string()) bad(key, "holds " + shown(x) + ", not a string");
            out.push_back(x.get<std::string>());
            if (out.back().size() > kMaxText) bad(key, "holds a string of " + std::to_string(out.back().size()) + " bytes");
        }
        return out;
    }
    // id2label / label_names as {"0": "tench", "1": ...}: keys 0..K-1, each once, names strings.
    std::vector<std::string> labels(const std::string& key) const {
        const json* v = get(key);
        if (!v) return {};
        if (v->is_array()) {
            std::vector<std::string> out = strings(key, size_t(kMaxClasses));
            for (size_t i = 0; i < out.size(); ++i)
                if (out[i].size() > kMaxClassNameBytes)
                    bad(key + "[" + std::to_string(i) + "]", "is a class name of " + std::to_string(out[i].size()) +
                                                               " bytes, more than the " + std::to_string(kMaxClassNameBytes) +
                                                               " a class name may have");
            return out;
        }
        if (!v->is_object()) bad(key, "is " + shown(*v) + ", not an object of index: name");
        if (v->size() > size_t(kMaxClasses)) bad(key, "has " + std::to_string(v->size()) + " labels, more than " + std::to_string(kMaxClasses));
        std::vector<std::string> out(v->size());
        for (auto it = v->begin(); it != v->end(); ++it) {
            const std::string& k = it.key();
            size_t idx = 0;
            bool digits = !k.empty() && k.size() <= 6;
            for (char ch : k) digits = digits && ch >= '0' && ch <= '9';
            if (digits) idx = size_t(std::stoul(k));
            if (!digits || (k.size() > 1 && k[0] == '0') || idx >= out.size())
                bad(key, "has the key \"" + k.substr(0, 40) + "\": the keys must be the class indices 0.." +
                             std::to_string(out.size() - 1));
            if (!it->is_string()) bad(key + "." + k, "is " + shown(*it) + ", not a string");
            if (it->get<std::string>().size() > kMaxClassNameBytes)
                bad(key + "." + k, "is a class name of " + std::to_string(it->get<std::string>().size()) + " bytes, more than the " +
                                       std::to_string(kMaxClassNameBytes) + " a class name may have");
            out[idx] = it->get<std::string>();
        }
        return out;  // n distinct keys (no key twice, no leading zeros) in 0..n-1: every index is there
    }
};

void check_heads(const Fields& f, const std::optional<int>& width, const std::optional<int>& heads,
                 const char* width_key, const char* heads_key) {
    if (width && heads && *width % *heads != 0)
        f.bad(heads_key, "(" + std::to_string(*heads) + ") does not divide '" + f.path + width_key + "' (" +
                             std::to_string(*width) + ")");
}

void check_patch(const Fields& f, const ModelConfigFile& m, const char* patch_key) {
    if (m.patch_size && m.image_height && (*m.patch_size > *m.image_height || *m.patch_size > *m.image_width))
        f.bad(patch_key, "(" + std::to_string(*m.patch_size) + ") is larger than the image (" +
                             std::to_string(*m.image_height) + " x " + std::to_string(*m.image_width) + ")");
}

const char* pil_resample(int code) {
    static const char* names[] = {"nearest", "lanczos", "bilinear", "bicubic", "box", "hamming"};
    return names[code];
}

// ---------------------------------------------------------------- Hugging Face config.json
void read_hf_model(const json& j, const std::string& what, ModelConfigFile& m) {
    Fields top{j, what, ""};
    m.kind = ConfigKind::HuggingFace;
    m.model_type = top.text("model_type");
    m.architectures = top.strings("architectures", 16);
    const json* vision = top.object("vision_config");
    std::string vkey = "vision_config";
    if (!vision) {  // early CLIPModel files: "vision_config_dict"
        vision = top.object("vision_config_dict");
        vkey = "vision_config_dict";
    }
    Fields f = vision ? top.sub(*vision, vkey) : top;
    m.from_vision_config = vision != nullptr;
    if (vision) m.vision_model_type = f.text("model_type");
    m.hidden_size = f.integer("hidden_size", 1, kMaxWidth);
    m.num_hidden_layers = f.integer("num_hidden_layers", 1, kMaxLayers);
    m.num_attention_heads = f.integer("num_attention_heads", 1, kMaxWidth);
    m.intermediate_size = f.integer("intermediate_size", 1, kMaxMlp);
    if (auto s = f.size2("image_size", 1, kMaxImageSize)) {
        m.image_height = s->first;
        m.image_width = s->second;
    }
    if (auto p = f.size2("patch_size", 1, kMaxImageSize)) {
        if (p->first != p->second) f.bad("patch_size", "is not square (" + std::to_string(p->first) + " x " + std::to_string(p->second) + ")");
        m.patch_size = p->first;
    }
    m.num_channels = f.integer("num_channels", 1, 3);
    m.layer_norm_eps = f.eps("layer_norm_eps");
    m.hidden_act = f.text("hidden_act");
    m.qkv_bias = f.boolean("qkv_bias");
    m.mlp_ratio = f.number("mlp_ratio", 0.0, 64.0, true);
    m.layerscale_value = f.number("layerscale_value", -1e6, 1e6);
    m.num_register_tokens = f.integer("num_register_tokens", 0, kMaxRegisters);
    m.use_swiglu_ffn = f.boolean("use_swiglu_ffn");
    m.rope_theta = f.number("rope_theta", 1.0, 1e9, true);
    m.use_gated_mlp = f.boolean("use_gated_mlp");
    m.vision_use_head = f.boolean("vision_use_head");
    // CLIPModel: the projection is the top level's; CLIPVisionModelWithProjection: its own (also top level)
    m.projection_dim = top.integer("projection_dim", 1, kMaxWidth);
    if (!m.projection_dim && vision) m.projection_dim = f.integer("projection_dim", 1, kMaxWidth);
    m.labels = top.labels("id2label");
    if (!m.labels.empty()) m.num_labels = int(m.labels.size());
    check_heads(f, m.hidden_size, m.num_attention_heads, "hidden_size", "num_attention_heads");
    check_patch(f, m, "patch_size");
}

// ---------------------------------------------------------------- timm config.json
void read_timm(const json& j, const std::string& what, ConfigFile& out) {
    ModelConfigFile& m = out.model;
    PreprocessConfig& p = out.pre;
    Fields top{j, what, ""};
    m.kind = ConfigKind::Timm;
    if (auto a = top.text("architecture")) m.architectures = {*a};
    m.num_labels = top.integer("num_classes", 0, kMaxClasses);
    m.global_pool = top.text("global_pool");
    m.labels = top.labels("label_names");
    if (!m.labels.empty()) {
        if (m.num_labels && *m.num_labels != int(m.labels.size()))
            top.bad("label_names", "has " + std::to_string(m.labels.size()) + " names for " + std::to_string(*m.num_labels) + " classes");
        m.num_labels = int(m.labels.size());
    }
    if (const json* a = top.object("model_args")) {
        Fields f = top.sub(*a, "model_args");
        if (auto s = f.size2("img_size", 1, kMaxImageSize)) {
            m.image_height = s->first;
            m.image_width = s->second;
        }
        m.patch_size = f.integer("patch_size", 1, kMaxImageSize);
        m.hidden_size = f.integer("embed_dim", 1, kMaxWidth);
        m.num_hidden_layers = f.integer("depth", 1, kMaxLayers);
        m.num_attention_heads = f.integer("num_heads", 1, kMaxWidth);
        m.mlp_ratio = f.number("mlp_ratio", 0.0, 64.0, true);
        m.init_values = f.number("init_values", -1e6, 1e6);
        m.num_register_tokens = f.integer("reg_tokens", 0, kMaxRegisters);
        m.no_embed_class = f.boolean("no_embed_class");
        m.class_token = f.boolean("class_token");
        m.qkv_bias = f.boolean("qkv_bias");
        if (auto g = f.text("global_pool")) m.global_pool = g;
        m.num_channels = f.integer("in_chans", 1, 3);
        check_heads(f, m.hidden_size, m.num_attention_heads, "embed_dim", "num_heads");
        check_patch(f, m, "patch_size");
    }
    if (const json* c = top.object("pretrained_cfg")) {
        Fields f = top.sub(*c, "pretrained_cfg");
        if (const json* in = f.get("input_size")) {
            if (!in->is_array() || in->size() != 3) f.bad("input_size", "is " + shown(*in) + ", not [channels, height, width]");
            int ch = f.int_value("input_size", (*in)[0], 1, 3);
            p.input_height = f.int_value("input_size", (*in)[1], 1, kMaxImageSize);
            p.input_width = f.int_value("input_size", (*in)[2], 1, kMaxImageSize);
            if (!m.num_channels) m.num_channels = ch;
        }
        m.pretrained_tag = f.text("tag");
        p.resample = f.text("interpolation");
        p.crop_pct = f.number("crop_pct", 0.0, 1.0, true);
        p.crop_mode = f.text("crop_mode");
        p.mean = f.floats("mean", false);
        p.std = f.floats("std", true);
        if (!m.num_labels) m.num_labels = f.integer("num_classes", 0, kMaxClasses);
    }
}

// ---------------------------------------------------------------- open_clip_config.json
void read_open_clip(const json& j, const std::string& what, ConfigFile& out) {
    ModelConfigFile& m = out.model;
    PreprocessConfig& p = out.pre;
    Fields top{j, what, ""};
    m.kind = ConfigKind::OpenClip;
    const json* mc = top.object("model_cfg");
    if (!mc) top.bad("model_cfg", "is missing");
    Fields f = top.sub(*mc, "model_cfg");
    m.projection_dim = f.integer("embed_dim", 1, kMaxWidth);
    m.quick_gelu = f.boolean("quick_gelu");
    // open_clip model.py: act_layer = QuickGELU if quick_gelu else nn.GELU
    m.hidden_act = m.quick_gelu.value_or(false) ? "quick_gelu" : "gelu";
    if (!m.quick_gelu) m.defaulted.push_back("quick_gelu");
    const json* vc = f.object("vision_cfg");
    if (!vc) f.bad("vision_cfg", "is missing");
    Fields v = f.sub(*vc, "vision_cfg");
    if (const json* layers = v.get("layers"); layers && layers->is_array())
        v.bad("layers", "is a list: a ResNet image tower, not a ViT");
    m.num_hidden_layers = v.integer("layers", 1, kMaxLayers);
    m.hidden_size = v.integer("width", 1, kMaxWidth);
    m.patch_size = v.integer("patch_size", 1, kMaxImageSize);
    if (auto s = v.size2("image_size", 1, kMaxImageSize)) {
        m.image_height = s->first;
        m.image_width = s->second;
    }
    m.head_width = v.integer("head_width", 1, kMaxWidth);
    m.mlp_ratio = v.number("mlp_ratio", 0.0, 64.0, true);
    m.init_values = v.number("ls_init_value", -1e6, 1e6);
    m.pool_type = v.text("pool_type");
    m.final_ln_after_pool = v.boolean("final_ln_after_pool");
    m.no_ln_pre = v.boolean("no_ln_pre");
    m.timm_model_name = v.text("timm_model_name");
    if (const json* nk = v.object("norm_kwargs")) m.layer_norm_eps = v.sub(*nk, "norm_kwargs").eps("eps");
    if (!m.layer_norm_eps) {  // open_clip's LayerNorm is torch's default
        m.layer_norm_eps = 1e-5;
        m.defaulted.push_back("layer_norm_eps");
    }
    // open_clip CLIPVisionCfg: head_width 64, mlp_ratio 4.0; heads = width / head_width
    if (m.hidden_size) {
        if (!m.head_width) {
            m.head_width = 64;
            m.defaulted.push_back("head_width");
        }
        if (*m.hidden_size % *m.head_width != 0)
            v.bad("head_width", "(" + std::to_string(*m.head_width) + ") does not divide 'model_cfg.vision_cfg.width' (" +
                                    std::to_string(*m.hidden_size) + ")");
        m.num_attention_heads = *m.hidden_size / *m.head_width;
        if (!m.mlp_ratio) {
            m.mlp_ratio = 4.0;
            m.defaulted.push_back("mlp_ratio");
        }
        double inter = double(*m.hidden_size) * *m.mlp_ratio;
        if (inter < 1 || inter > kMaxMlp) v.bad("mlp_ratio", "gives an MLP of " + std::to_string(inter) + " units");
        m.intermediate_size = int(inter);
    }
    check_patch(v, m, "patch_size");
    if (const json* pc = top.object("preprocess_cfg")) {
        Fields q = top.sub(*pc, "preprocess_cfg");
        p.mean = q.floats("mean", false);
        p.std = q.floats("std", true);
        p.resample = q.text("interpolation");
        p.resize_mode = q.text("resize_mode");
        if (auto s = q.size2("size", 1, kMaxImageSize)) {
            p.input_height = s->first;
            p.input_width = s->second;
        }
    }
}

PreprocessConfig read_preprocessor(const json& j, const std::string& what) {
    PreprocessConfig p;
    p.what = what;
    Fields f{j, what, ""};
    p.processor_type = f.text("image_processor_type");
    if (!p.processor_type) p.processor_type = f.text("feature_extractor_type");
    p.mean = f.floats("image_mean", false);
    p.std = f.floats("image_std", true);
    if (p.mean && p.std && p.mean->size() != p.std->size())
        f.bad("image_std", "has " + std::to_string(p.std->size()) + " values for the " + std::to_string(p.mean->size()) +
                               " of image_mean");
    p.do_resize = f.boolean("do_resize");
    p.do_center_crop = f.boolean("do_center_crop");
    p.do_normalize = f.boolean("do_normalize");
    p.do_rescale = f.boolean("do_rescale");
    p.do_convert_rgb = f.boolean("do_convert_rgb");
    p.rescale_factor = f.number("rescale_factor", 0.0, 1.0, true);
    p.crop_pct = f.number("crop_pct", 0.0, 1.0, true);
    if (auto r = f.integer("resample", 0, 5)) p.resample = pil_resample(*r);
    // An int size means the shorter side for the processors that resize that way
    // (get_size_dict(default_to_square=False): CLIP, Bit), a square for the others (ViT, DeiT, SigLIP).
    const std::string type = p.processor_type.value_or("");
    const bool shortest_default = type.rfind("CLIP", 0) == 0 || type.rfind("Bit", 0) == 0 ||
                                  type.rfind("ChineseCLIP", 0) == 0;
    if (const json* s = f.get("size")) {
        if (s->is_number_integer()) {
            int n = f.int_value("size", *s, 1, kMaxResize);
            if (shortest_default) p.shortest_edge = n;
            else p.resize_height = p.resize_width = n;
        } else if (s->is_object()) {
            Fields g = f.sub(*s, "size");
            p.shortest_edge = g.integer("shortest_edge", 1, kMaxResize);
            p.resize_height = g.integer("height", 1, kMaxResize);
            p.resize_width = g.integer("width", 1, kMaxResize);
            if (bool(p.resize_height) != bool(p.resize_width))
                g.bad(p.resize_height ? "width" : "height", "is missing (height and width come together)");
            if (!p.shortest_edge && !p.resize_height)
                f.bad("size", "is " + shown(*s) + ": neither shortest_edge nor height and width");
            if (p.shortest_edge && p.resize_height) f.bad("size", "has both shortest_edge and height/width");
        } else {
            f.bad("size", "is " + shown(*s) + ", not an integer or an object");
        }
    }
    if (const json* c = f.get("crop_size")) {
        if (c->is_number_integer()) {
            p.crop_height = p.crop_width = f.int_value("crop_size", *c, 1, kMaxImageSize);
        } else if (c->is_object()) {
            Fields g = f.sub(*c, "crop_size");
            p.crop_height = g.integer("height", 1, kMaxImageSize);
            p.crop_width = g.integer("width", 1, kMaxImageSize);
            if (!p.crop_height || !p.crop_width) f.bad("crop_size", "is " + shown(*c) + ", not {\"height\", \"width\"}");
        } else {
            f.bad("crop_size", "is " + shown(*c) + ", not an integer or an object");
        }
    }
    return p;
}

}  // namespace

ConfigFile parse_config_json(const std::string& text, const std::string& what) {
    json j = parse_bounded(text, what);
    ConfigFile out;
    out.model.what = out.pre.what = what;
    if (j.contains("model_cfg")) {
        read_open_clip(j, what, out);
    } else if (j.contains("architecture")) {  // timm's save_config_for_hf (Hugging Face writes "architectures")
        read_timm(j, what, out);
    } else {
        read_hf_model(j, what, out.model);
    }
    return out;
}

ConfigFile read_config_json(const std::string& path) { return parse_config_json(read_file(path, kMaxConfigBytes), path); }

PreprocessConfig parse_preprocessor_json(const std::string& text, const std::string& what) {
    return read_preprocessor(parse_bounded(text, what), what);
}

PreprocessConfig read_preprocessor_json(const std::string& path) {
    return parse_preprocessor_json(read_file(path, kMaxConfigBytes), path);
}

void apply_hf_defaults(ModelConfigFile& c) {
    if (c.kind != ConfigKind::HuggingFace) return;
    std::string t = c.from_vision_config ? c.vision_model_type.value_or("") : c.model_type.value_or("");
    if (t.empty() && c.from_vision_config) t = c.model_type.value_or("");
    struct D {
        int hidden, layers, heads, inter, image, patch;  // 0: not defaulted
        const char* act;
        double eps;                                      // 0: not defaulted
    };
    D d{};
    bool dinov2 = false;
    if (t == "vit" || t == "deit") d = {768, 12, 12, 3072, 224, 16, "gelu", 1e-12};
    else if (t == "clip_vision_model" || t == "clip") d = {768, 12, 12, 3072, 224, 32, "quick_gelu", 1e-5};
    else if (t == "siglip_vision_model" || t == "siglip") d = {768, 12, 12, 3072, 224, 16, "gelu_pytorch_tanh", 1e-6};
    else if (t == "dinov2" || t == "dinov2_with_registers") {
        d = {768, 12, 12, 0, 224, 0, "gelu", 0};
        dinov2 = true;
    } else {
        return;
    }
    auto fill_i = [&](std::optional<int>& f, int v, const char* name) {
        if (!f && v) {
            f = v;
            c.defaulted.push_back(name);
        }
    };
    fill_i(c.hidden_size, d.hidden, "hidden_size");
    fill_i(c.num_hidden_layers, d.layers, "num_hidden_layers");
    fill_i(c.num_attention_heads, d.heads, "num_attention_heads");
    fill_i(c.intermediate_size, d.inter, "intermediate_size");
    if (!c.image_height && d.image) {
        c.image_height = c.image_width = d.image;
        c.defaulted.push_back("image_size");
    }
    fill_i(c.patch_size, d.patch, "patch_size");
    fill_i(c.num_channels, 3, "num_channels");
    if (!c.hidden_act) {
        c.hidden_act = d.act;
        c.defaulted.push_back("hidden_act");
    }
    if (!c.layer_norm_eps && d.eps > 0) {
        c.layer_norm_eps = d.eps;
        c.defaulted.push_back("layer_norm_eps");
    }
    if (t == "vit" || t == "deit" || dinov2) {
        if (!c.qkv_bias) {
            c.qkv_bias = true;
            c.defaulted.push_back("qkv_bias");
        }
    }
    if (t == "clip_vision_model" || t == "clip") fill_i(c.projection_dim, 512, "projection_dim");
    if (dinov2) {
        if (!c.mlp_ratio) {
            c.mlp_ratio = 4.0;
            c.defaulted.push_back("mlp_ratio");
        }
        if (!c.layerscale_value) {
            c.layerscale_value = 1.0;
            c.defaulted.push_back("layerscale_value");
        }
        if (!c.use_swiglu_ffn) {
            c.use_swiglu_ffn = false;
            c.defaulted.push_back("use_swiglu_ffn");
        }
        if (t == "dinov2_with_registers") fill_i(c.num_register_tokens, 4, "num_register_tokens");
    }
    if (c.hidden_size && c.num_attention_heads && *c.hidden_size % *c.num_attention_heads != 0)
        throw FileError(c.what + ": num_attention_heads (" + std::to_string(*c.num_attention_heads) +
                        ") does not divide hidden_size (" + std::to_string(*c.hidden_size) + ")");
}

ActKind activation_of(const ModelConfigFile& c) {
    if (!c.hidden_act) throw FileError(c.what + ": field 'hidden_act' is missing");
    const std::string& a = *c.hidden_act;
    if (a == "gelu" || a == "gelu_python") return ActKind::GeluErf;
    if (a == "gelu_pytorch_tanh" || a == "gelu_new" || a == "gelu_fast") return ActKind::GeluTanh;
    if (a == "quick_gelu") return ActKind::QuickGelu;
    if (a == "silu" || a == "swish") return ActKind::Silu;
    if (a == "relu") return ActKind::Relu;
    throw FileError(c.what + ": field 'hidden_act' is \"" + a.substr(0, 60) +
                    "\", not an activation ViTScope computes (gelu, gelu_pytorch_tanh, gelu_new, quick_gelu, silu, relu)");
}

}  // namespace vit
