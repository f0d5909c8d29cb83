// The --labels file: class names, one per line, as many as the model's classes;
// each name as the CLI prints it (terminal_safe) holds no control character.
#include <cstdlib>

#include "core/io/checkpoint.h"
#include "core/io/io.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    vit::Config c = vit::preset("fmnist");
    fuzz::expect_named([&] {
        vit::apply_labels(c, text, fuzz::kWhat);
        c.validate();
        for (auto& n : c.class_names)
            for (char ch : vit::terminal_safe(n))
                if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) std::abort();
    });
    return 0;
}
