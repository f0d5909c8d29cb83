// The config files beside a checkpoint (core/io/hf_config): the same bytes read as a
// config.json (Hugging Face, timm or open_clip) and as a preprocessor_config.json, then
// the defaults and the activation looked up, as a loader would.
#include <string>

#include "core/io/hf_config.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    fuzz::expect_named([&] {
        vit::ConfigFile c = vit::parse_config_json(text, fuzz::kWhat);
        vit::apply_hf_defaults(c.model);
        if (c.model.hidden_act) (void)vit::activation_of(c.model);
    });
    fuzz::expect_named([&] { (void)vit::parse_preprocessor_json(text, fuzz::kWhat); });
    return 0;
}
