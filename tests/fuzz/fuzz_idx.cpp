// IDX image + label files (gzipped or not), as `train` and `eval` read them.
// The input is split in two at a point chosen by its first two bytes.
#include "core/io/io.h"
#include "core/io/dataset.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2) return 0;
    size_t cut = (size_t(data[0]) | size_t(data[1]) << 8) % (size - 1);
    std::string rest(reinterpret_cast<const char*>(data) + 2, size - 2);
    std::string im = rest.substr(0, cut), lb = rest.substr(cut);
    fuzz::expect_named([&] {
        vit::Dataset d = vit::parse_idx(im, lb, fuzz::kWhat, "FUZZ-LABELS");
        if (d.n > 0 && d.rows <= 64 && d.cols <= 64) (void)vit::dataset_input(d, d.n - 1, vit::preset("fmnist"));
    }, "FUZZ-LABELS");
    return 0;
}
