// A Hugging Face config.json beside a checkpoint (read for num_attention_heads, hidden_size and
// id2label, also under vision_config): bounded JSON, checked fields, errors naming the file.
#include "core/io/checkpoint.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::expect_named([&] {
        vit::SideConfig sc = vit::parse_side_config(std::string(reinterpret_cast<const char*>(data), size), fuzz::kWhat);
        if (sc.heads < 0 || sc.width < 0 || sc.class_names.size() > size) std::abort();
    });
    return 0;
}
