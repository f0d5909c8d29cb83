// The restricted unpickler behind a valid zip: the input is data.pkl, wrapped
// here in a stored zip with correct CRCs beside three storages ("0": 4096
// float32, "1": 4096 float16, "2": one int64) and byteorder / version entries,
// so that every mutation reaches Unpickler::run (libzip would refuse almost all
// of them on the CRC if the fuzzer mutated the whole archive, as in fuzz_pth). A
// pickle that names __torch__ also gets code/ and constants.pkl: a TorchScript
// archive, whose module tree is walked.
// Then the tensor views over the storages, family detection and the config.
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/io/checkpoint.h"
#include "core/io/pth.h"
#include "fuzz_common.h"
#include "stored_zip.h"

namespace {

// The storages every seed's pickle refers to (see make_corpus.py, "pickle").
const std::vector<std::pair<std::string, std::string>>& storages() {
    static const std::vector<std::pair<std::string, std::string>> s = [] {
        std::string f32(4096 * 4, '\0'), f16(4096 * 2, '\0'), i64(8, '\0');
        for (size_t i = 0; i < 4096; ++i) {
            float v = float(int(i % 17) - 8) / 16.f;  // small, exact values
            std::memcpy(&f32[4 * i], &v, 4);
            uint16_t h = uint16_t(0x3000 + (i % 64));  // float16 values near 0.125
            std::memcpy(&f16[2 * i], &h, 2);
        }
        i64[0] = 3;
        return std::vector<std::pair<std::string, std::string>>{
            {"archive/data/0", f32}, {"archive/data/1", f16}, {"archive/data/2", i64},
            {"archive/byteorder", "little"}, {"archive/version", "3\n"}};
    }();
    return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<std::pair<std::string, std::string>> entries{
        {"archive/data.pkl", std::string(reinterpret_cast<const char*>(data), size)}};
    for (auto& e : storages()) entries.push_back(e);
    // A pickle naming __torch__ classes is read as a TorchScript archive's (its module tree
    // walked), which needs code/ and constants.pkl beside it; any other pickle reads the same.
    if (std::string_view(reinterpret_cast<const char*>(data), size).find("__torch__") != std::string_view::npos) {
        entries.emplace_back("archive/constants.pkl", "\x80\x02).");
        entries.emplace_back("archive/code/__torch__.py", "");
    }
    const std::string zip = fuzz::stored_zip(entries);
    fuzz::expect_named([&] {
        vit::SafeTensors st = vit::parse_pth(zip, fuzz::kWhat);
        float sum = 0;
        for (auto& [name, t] : st.tensors)
            for (size_t i = 0; i < t.size(); ++i) sum += t.data()[i];
        (void)sum;
        vit::LoadedModel lm = vit::model_from_safetensors(std::move(st), fuzz::kWhat, {});
        (void)lm.nonfinite_warning();
    });
    return 0;
}
