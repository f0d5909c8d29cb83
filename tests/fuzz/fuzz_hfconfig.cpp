// The config files beside a checkpoint (core/io/hf_config, the one parser of them): the same
// bytes read as a config.json (Hugging Face, timm or open_clip), as the loader's summary of it
// (parse_side_config: heads, width, class names) and as a preprocessor_config.json, then the
// defaults and the activation looked up, as a loader would.
#include <cstdlib>
#include <string>

#include "core/io/checkpoint.h"
#include "core/io/hf_config.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    fuzz::expect_named([&] {
        vit::ConfigFile c = vit::parse_config_json(text, fuzz::kWhat);
        vit::apply_hf_defaults(c.model);
        if (c.model.hidden_act) (void)vit::activation_of(c.model);
    });
    fuzz::expect_named([&] {
        vit::SideConfig sc = vit::parse_side_config(text, fuzz::kWhat);
        if (sc.heads < 0 || sc.width < 0 || sc.class_names.size() > size) std::abort();
    });
    fuzz::expect_named([&] { (void)vit::parse_preprocessor_json(text, fuzz::kWhat); });
    return 0;
}
