// The --labels file: class names, one per line, as many as the model's classes.
#include "core/io/checkpoint.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    vit::Config c = vit::preset("fmnist");
    fuzz::expect_named([&] {
        vit::apply_labels(c, text, fuzz::kWhat);
        c.validate();
    });
    return 0;
}
