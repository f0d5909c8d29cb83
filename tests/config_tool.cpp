// Test helper for tests/parity/test_family_configs.py: reads a config file with
// core/io/hf_config and prints what it understood as JSON (absent fields: null).
//   config_tool config PATH        (config.json of Hugging Face / timm, open_clip_config.json)
//   config_tool preprocessor PATH  (preprocessor_config.json)
//   config_tool load MODEL [HEADS] (a checkpoint through the loader, with the config files beside it:
//                                   the whole Config, where heads and names came from, the notes)
// A refused file: the message on stderr, exit status 1.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/io/checkpoint.h"
#include "core/io/hf_config.h"

using namespace vit;
using nlohmann::json;

namespace {
template <class T>
json opt(const std::optional<T>& v) {
    return v ? json(*v) : json(nullptr);
}
}  // namespace

int main(int argc, char** argv) {
    if (argc != 3 && !(argc == 4 && std::string(argv[1]) == "load")) {
        std::fprintf(stderr, "usage: config_tool config|preprocessor PATH | load MODEL [HEADS]\n");
        return 2;
    }
    try {
        const std::string kind = argv[1];
        json j;
        if (kind == "config") {
            ConfigFile c = read_config_json(argv[2]);
            ModelConfigFile m = c.model;
            apply_hf_defaults(m);
            const char* kinds[] = {"huggingface", "timm", "open_clip"};
            j = {{"kind", kinds[int(m.kind)]}, {"model_type", opt(m.model_type)},
                 {"vision_model_type", opt(m.vision_model_type)}, {"from_vision_config", m.from_vision_config},
                 {"architectures", m.architectures}, {"hidden_size", opt(m.hidden_size)},
                 {"num_hidden_layers", opt(m.num_hidden_layers)}, {"num_attention_heads", opt(m.num_attention_heads)},
                 {"intermediate_size", opt(m.intermediate_size)}, {"image_height", opt(m.image_height)},
                 {"image_width", opt(m.image_width)}, {"patch_size", opt(m.patch_size)},
                 {"num_channels", opt(m.num_channels)}, {"layer_norm_eps", opt(m.layer_norm_eps)},
                 {"hidden_act", opt(m.hidden_act)}, {"mlp_ratio", opt(m.mlp_ratio)},
                 {"layerscale_value", opt(m.layerscale_value)}, {"num_register_tokens", opt(m.num_register_tokens)},
                 {"use_swiglu_ffn", opt(m.use_swiglu_ffn)}, {"projection_dim", opt(m.projection_dim)},
                 {"num_labels", opt(m.num_labels)}, {"labels", m.labels}, {"no_embed_class", opt(m.no_embed_class)},
                 {"init_values", opt(m.init_values)}, {"quick_gelu", opt(m.quick_gelu)},
                 {"defaulted", m.defaulted}, {"mean", opt(c.pre.mean)}, {"std", opt(c.pre.std)},
                 {"resample", opt(c.pre.resample)}};
            if (m.hidden_act) j["activation"] = int(activation_of(m));
        } else if (kind == "preprocessor") {
            PreprocessConfig p = read_preprocessor_json(argv[2]);
            j = {{"processor_type", opt(p.processor_type)}, {"mean", opt(p.mean)}, {"std", opt(p.std)},
                 {"shortest_edge", opt(p.shortest_edge)}, {"resize_height", opt(p.resize_height)},
                 {"resize_width", opt(p.resize_width)}, {"crop_height", opt(p.crop_height)},
                 {"crop_width", opt(p.crop_width)}, {"resample", opt(p.resample)},
                 {"do_center_crop", opt(p.do_center_crop)}, {"rescale_factor", opt(p.rescale_factor)}};
        } else if (kind == "load") {
            LoadOverrides ov;
            if (argc == 4) ov.heads = std::atoi(argv[3]);
            LoadedModel lm = load_model(argv[2], ov);
            json meta = json::object();
            for (auto& [k, v] : lm.metadata)
                if (k.rfind("hf.", 0) == 0 || k.rfind("vitscope.", 0) == 0 || k.rfind("pth.", 0) == 0 || k.rfind("open_clip.", 0) == 0)
                    if (k != "vitscope.config") meta[k] = v;
            j = {{"config", json::parse(config_to_json(lm.weights.cfg))}, {"family", family_name(lm.family)},
                 {"layout", lm.layout}, {"heads_from", lm.heads_from}, {"labels_from", lm.labels_from},
                 {"notes", lm.notes}, {"metadata", meta}, {"params", param_numel(lm.weights)}};
        } else {
            std::fprintf(stderr, "unknown kind %s\n", argv[1]);
            return 2;
        }
        std::cout << j.dump() << "\n";
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
