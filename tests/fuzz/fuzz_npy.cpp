// The .npy reader (`trace --input`).
#include "core/io/io.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string b(reinterpret_cast<const char*>(data), size);
    fuzz::expect_named([&] {
        auto t = vit::parse_npy(b, fuzz::kWhat);
        float s = 0;
        for (size_t i = 0; i < t.size(); ++i) s += t.data()[i];
        (void)s;
    });
    return 0;
}
