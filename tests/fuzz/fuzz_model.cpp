// A whole model from .safetensors bytes: family detection (timm, Hugging Face,
// torchvision), config inference from shapes, __metadata__ (vitscope.config,
// num_heads, eps, class_names), Config::validate and the tensor mapping.
#include "core/io/checkpoint.h"
#include "core/io/io.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::expect_named([&] {
        vit::SafeTensors st = vit::parse_safetensors(reinterpret_cast<const char*>(data), size, fuzz::kWhat);
        vit::LoadedModel lm = vit::model_from_safetensors(std::move(st), fuzz::kWhat, {});
        (void)lm.weights.cfg.describe();
        (void)vit::param_count(lm.weights.cfg);
    });
    return 0;
}
