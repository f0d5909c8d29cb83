// The whole image path as the app and CLI run it: decode_image with the real
// limits (16384 per side, scaling down over 25 megapixels: PNG row by row,
// JPEG by DCT scaling, BMP whole within 256 MB), then preprocess with one
// preset's rule, chosen by the input's last byte among every preset and alias
// (shorter side to 224, 248 bicubic or 256 bilinear, then the crop; 28 gray;
// 8 and 4 toys), with or without squash. The model input must be
// (C, S, S) and finite.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/io/image.h"
#include "core/io/io.h"
#include "fuzz_common.h"

namespace {
const std::vector<std::string>& rules() {
    static const std::vector<std::string> r = [] {
        std::vector<std::string> v = vit::preset_names();
        for (auto& a : vit::preset_aliases()) v.push_back(a.alias);
        return v;
    }();
    return r;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    std::string b(reinterpret_cast<const char*>(data), size);
    const uint8_t pick = data[size - 1];
    fuzz::expect_named([&] {
        vit::Image im = vit::decode_image(b, fuzz::kWhat);
        vit::Config c = vit::preset(rules()[pick % rules().size()]);
        c.pre.squash = (pick / rules().size()) % 2 == 1;
        vit::PreprocessPlan p = vit::plan_preprocess(im, c);
        if (im.width * int64_t(im.height) > 25'000'000 || (im.scaled_by.empty() != p.scaled_on_load.empty())) std::abort();
        vit::Tensor3 x = vit::preprocess(im, c);
        if (x.shape(0) != size_t(c.channels) || x.shape(1) != size_t(c.image_size) || x.shape(2) != size_t(c.image_size)) {
            std::fprintf(stderr, "preprocess gave the wrong shape\n");
            std::abort();
        }
        for (float v : x)
            if (!std::isfinite(v)) { std::fprintf(stderr, "non-finite model input\n"); std::abort(); }
    });
    return 0;
}
