// The .safetensors reader (header JSON, dtypes, shapes, offsets, conversion).
#include "core/io/io.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::expect_named([&] {
        vit::SafeTensors st = vit::parse_safetensors(reinterpret_cast<const char*>(data), size, fuzz::kWhat);
        float sum = 0;
        for (auto& [name, t] : st.tensors)  // touch every converted value
            for (size_t i = 0; i < t.size(); ++i) sum += t.data()[i];
        (void)sum;
    });
    return 0;
}
