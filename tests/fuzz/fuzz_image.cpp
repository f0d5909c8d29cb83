// Image decoding (PNG, BMP through stb_image; JPEG through libjpeg-turbo;
// everything else refused) and preprocessing for two kinds of model: a
// 1-channel straight resize (bilinear) and a 3-channel shorter-side resize +
// center crop (bicubic). Small model sizes keep the fuzzer fast.
#include "core/io/image.h"
#include "core/io/io.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string b(reinterpret_cast<const char*>(data), size);
    fuzz::expect_named([&] {
        // The application's limits, except 256 K pixels instead of 25 M: decoding
        // big images under ASan would cut the fuzzer's speed tenfold.
        vit::Image im = vit::decode_image(b, fuzz::kWhat, 1 << 18);
        vit::Config gray = vit::preset("fmnist");
        auto x = vit::preprocess(im, gray);
        vit::Config rgb = vit::preset("toy-rgb8");
        rgb.pre.resize = 10;
        rgb.pre.interp = vit::Interp::Bicubic;
        auto y = vit::preprocess(im, rgb);
        (void)vit::denormalize(y, rgb);
        (void)x;
    });
    return 0;
}
