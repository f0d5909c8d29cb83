// The PyTorch checkpoint reader: the zip (libzip, sizes and CRCs), the restricted
// unpickler (opcodes, globals, the value arena) and the tensor views over storages,
// then family detection and config inference on what it produced.
#include "core/io/checkpoint.h"
#include "core/io/pth.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::expect_named([&] {
        vit::SafeTensors st = vit::parse_pth(reinterpret_cast<const char*>(data), size, fuzz::kWhat);
        float sum = 0;
        for (auto& [name, t] : st.tensors)
            for (size_t i = 0; i < t.size(); ++i) sum += t.data()[i];
        (void)sum;
        vit::model_from_safetensors(std::move(st), fuzz::kWhat, {});
    });
    return 0;
}
