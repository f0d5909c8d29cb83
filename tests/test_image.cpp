// Image decoding and preprocessing on real files written by stb_image_write.
#include <gtest/gtest.h>
#include <stb_image.h>
#include <stb_image_write.h>
#include <zlib.h>

#include <cmath>
#include <random>
#include <vector>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <xtensor/xview.hpp>

#include "core/io/image.h"
#include "core/io/io.h"
#include "core/model/model.h"

using namespace vit;

namespace {
std::string tmp(const std::string& name) {
    auto d = std::filesystem::temp_directory_path() / "vitscope_img_test";
    std::filesystem::create_directories(d);
    return (d / name).string();
}
void write_bytes(const std::string& p, const std::string& b) { std::ofstream(p, std::ios::binary) << b; }
std::string read_bytes(const std::string& p) { return read_file(p); }
}  // namespace

TEST(Image, PngRgbaDropsAlphaAndScalesToUnit) {
    unsigned char px[2 * 1 * 4] = {255, 0, 0, 10, 0, 128, 255, 255};
    std::string p = tmp("rgba.png");
    ASSERT_TRUE(stbi_write_png(p.c_str(), 2, 1, 4, px, 8));
    Image im = load_image(p);
    EXPECT_EQ(im.channels, 3);
    EXPECT_EQ(im.file_channels, 4);
    EXPECT_EQ(shape_of(im.pixels), (Shape{3, 1, 2}));
    EXPECT_FLOAT_EQ(im.pixels.flat(0), 1.f);            // R of pixel 0
    EXPECT_FLOAT_EQ(im.pixels.flat(2 + 1), 128 / 255.f); // G of pixel 1
}

TEST(Image, GrayBmpAndJpegAndTga) {
    unsigned char g[4 * 4];
    for (int i = 0; i < 16; ++i) g[i] = (unsigned char)(i * 16);
    std::string b = tmp("g.bmp"), j = tmp("g.jpg"), t = tmp("g.tga");
    ASSERT_TRUE(stbi_write_bmp(b.c_str(), 4, 4, 1, g));
    ASSERT_TRUE(stbi_write_jpg(j.c_str(), 4, 4, 1, g, 95));
    ASSERT_TRUE(stbi_write_tga(t.c_str(), 4, 4, 1, g));
    for (auto& p : {b, j}) {
        SCOPED_TRACE(p);
        Image im = load_image(p);
        EXPECT_EQ(im.width, 4);
        EXPECT_NEAR(im.pixels.flat(5), 80 / 255.f, p == j ? 0.05 : 1e-6);
    }
    // TGA (like PSD, HDR, PIC, PNM) is refused: only PNG, JPEG, BMP, WebP and GIF are decoded.
    try {
        load_image(t);
        ADD_FAILURE() << "TGA accepted";
    } catch (const FileError& e) {
        EXPECT_NE(std::string(e.what()).find("g.tga"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("PNG, JPEG, BMP, WebP and GIF"), std::string::npos) << e.what();
    }
}

TEST(Image, SixteenBitPngKeepsPrecision) {
    // A hand-made 16-bit grayscale 1x1 PNG: stb_image_write cannot write one, so build the bytes.
    // Signature, IHDR (1x1, depth 16, colour 0), IDAT (zlib of filter byte 0 + 0x1234), IEND.
    const unsigned char png[] = {
        0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00,
        0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x10, 0x00, 0x00, 0x00, 0x00, 0x6A, 0xEE, 0x47, 0x16, 0x00, 0x00, 0x00,
        0x0B, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x10, 0x32, 0x01, 0x00, 0x00, 0x5B, 0x00, 0x47, 0x96, 0xFB,
        0x1B, 0x65, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82};
    Image im = decode_image(std::string(reinterpret_cast<const char*>(png), sizeof(png)), "16bit.png");
    EXPECT_TRUE(im.sixteen_bit);
    EXPECT_NEAR(im.pixels.flat(0), 0x1234 / 65535.f, 1e-7);
}

TEST(ImageBad, EmptyCorruptTruncatedAndNotAnImage) {
    unsigned char px[8 * 8 * 3] = {};
    std::string good = tmp("good.png");
    ASSERT_TRUE(stbi_write_png(good.c_str(), 8, 8, 3, px, 24));
    std::string bytes = read_bytes(good);
    write_bytes(tmp("empty.png"), "");
    write_bytes(tmp("text.png"), "this is not an image at all");
    write_bytes(tmp("trunc.png"), bytes.substr(0, bytes.size() / 2));
    std::string corrupt = bytes;
    for (size_t i = 40; i < corrupt.size() - 12; ++i) corrupt[i] = char(0x5a);
    write_bytes(tmp("corrupt.png"), corrupt);
    for (auto name : {"empty.png", "text.png", "trunc.png", "corrupt.png", "missing.png"}) {
        SCOPED_TRACE(name);
        try {
            load_image(tmp(name));
            ADD_FAILURE() << "accepted";
        } catch (const FileError& e) {
            EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
        }
    }
    EXPECT_THROW(load_image(std::filesystem::temp_directory_path().string()), FileError);  // a directory
}

TEST(ImageBad, HugeDimensionsRejectedBeforeDecoding) {
    // A valid BMP header claiming 100000 x 100000 pixels, no pixel data.
    unsigned char px[4] = {};
    std::string p = tmp("small.bmp");
    ASSERT_TRUE(stbi_write_bmp(p.c_str(), 1, 1, 3, px));
    std::string b = read_bytes(p);
    int32_t big = 100000;
    std::memcpy(&b[18], &big, 4);
    std::memcpy(&b[22], &big, 4);
    try {
        decode_image(b, "huge.bmp");
        FAIL();
    } catch (const FileError& e) {
        EXPECT_NE(std::string(e.what()).find("huge.bmp"), std::string::npos);
    }
}

TEST(Preprocess, GrayToRgbAndLuma) {
    Tensor3 g = Tensor3::from_shape({1, 1, 2});
    g.flat(0) = 0.25f; g.flat(1) = 1.f;
    auto rgb = convert_channels(g, 3);
    EXPECT_EQ(shape_of(rgb), (Shape{3, 1, 2}));
    EXPECT_EQ(rgb.flat(2), 0.25f);
    Tensor3 c = Tensor3::from_shape({3, 1, 1});
    c.flat(0) = 1; c.flat(1) = 0; c.flat(2) = 0;
    EXPECT_NEAR(convert_channels(c, 1).flat(0), 0.299f, 1e-6);
}

TEST(Preprocess, BilinearUpscaleMatchesHandArithmetic) {
    // 1x2 -> 1x4, half-pixel centres: outputs at x = 0.25, 0.75 (clamped edges) -> [a, .75a+.25b, .25a+.75b, b]
    Tensor3 x = Tensor3::from_shape({1, 1, 2});
    x.flat(0) = 0.f; x.flat(1) = 1.f;
    auto y = resize(x, 1, 4, Interp::Bilinear);
    EXPECT_NEAR(y.flat(0), 0.f, 1e-6);
    EXPECT_NEAR(y.flat(1), 0.25f, 1e-6);
    EXPECT_NEAR(y.flat(2), 0.75f, 1e-6);
    EXPECT_NEAR(y.flat(3), 1.f, 1e-6);
}

TEST(Preprocess, DownscaleAveragesAndPreservesConstant) {
    Tensor3 x = Tensor3::from_shape({1, 4, 4});
    for (int i = 0; i < 16; ++i) x.flat(i) = 0.3f;
    for (auto k : {Interp::Bilinear, Interp::Bicubic}) {
        auto y = resize(x, 2, 2, k);
        for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y.flat(i), 0.3f, 1e-6);
    }
    // 2x antialiased bilinear over [0,1,0,1,...] columns gives 0.5 everywhere in the interior
    for (int i = 0; i < 16; ++i) x.flat(i) = float(i % 2);
    auto y = resize(x, 4, 2, Interp::Bilinear);
    EXPECT_NEAR(y.flat(0 * 2 + 1), 0.5f, 0.13f);
}

TEST(Preprocess, ShorterSideThenCenterCropAndNormalize) {
    Config c = preset("vit-b16");
    c.image_size = 4; c.patch = 2; c.pre.resize = 6;
    c.pre.mean = {0.5f, 0.5f, 0.5f}; c.pre.std = {0.25f, 0.25f, 0.25f};
    Image im;
    im.pixels = Tensor3::from_shape({3, 10, 20});
    for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels.flat(i) = 0.75f;
    auto x = preprocess(im, c);
    EXPECT_EQ(shape_of(x), (Shape{3, 4, 4}));
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x.flat(i), 1.0f, 1e-5);  // (0.75 - 0.5) / 0.25
    auto back = denormalize(x, c);
    EXPECT_NEAR(back.flat(0), 0.75f, 1e-6);
}

// Issue 20: the plan the window writes out for another input size is what preprocess_at computes: the
// resize, then one crop of h x w (the centre of the longer side's square), then the normalization.
TEST(Preprocess, PlanAtAnotherSizeIsWhatPreprocessAtDoes) {
    std::mt19937 g(7);
    std::uniform_real_distribution<float> u(0, 1);
    Config c = preset("vit-b16");  // timm: shorter side 248 (crop_pct 0.9), crop 224
    c.pre.resize = 248;
    Image im;
    im.width = 451; im.height = 300; im.channels = 3;
    im.pixels = Tensor3::from_shape({3, 300, 451});
    for (auto& v : im.pixels) v = u(g);
    for (auto hw : {std::pair{112, 176}, std::pair{176, 112}, std::pair{224, 224}, std::pair{64, 320}})
        for (bool squash : {false, true}) {
            Config cc = c;
            cc.pre.squash = squash;
            const auto [h, w] = hw;
            const PreprocessPlan p = plan_preprocess_at(im, cc, h, w);
            ASSERT_EQ(p.crop_w, w);
            ASSERT_EQ(p.crop_h, h);
            Tensor3 want = resize_crop(im.pixels, p.resize_h, p.resize_w, p.crop_top, p.crop_left, h, w, cc.pre.interp);
            for (size_t k = 0; k < 3; ++k)
                xt::view(want, k, xt::all(), xt::all()) = (xt::view(want, k, xt::all(), xt::all()) - cc.pre.mean[k]) / cc.pre.std[k];
            const Tensor3 got = preprocess_at(im, cc, h, w);
            ASSERT_EQ(shape_of(got), shape_of(want)) << h << "x" << w << (squash ? " squash" : "");
            double err = 0;
            for (size_t i = 0; i < got.size(); ++i) err = std::max(err, double(std::fabs(got.flat(i) - want.flat(i))));
            EXPECT_LT(err, 1e-5) << h << "x" << w << (squash ? " squash" : "") << ": resize " << p.resize_w << "x"
                                 << p.resize_h << ", crop at (" << p.crop_left << ", " << p.crop_top << ")";
        }
}

// ---------------------------------------------------------------- issue 23 and issue 19 item 6

namespace {
// A PNG chunk with its CRC (zlib's crc32, independent of libpng).
std::string png_chunk(const char* tag, const std::string& data) {
    std::string c;
    auto be = [&](uint32_t v) { for (int s = 24; s >= 0; s -= 8) c.push_back(char(v >> s & 0xff)); };
    be(uint32_t(data.size()));
    std::string td = std::string(tag, 4) + data;
    c += td;
    be(uint32_t(crc32(0, reinterpret_cast<const Bytef*>(td.data()), uInt(td.size()))));
    return c;
}
std::string png_header(uint32_t w, uint32_t h, int depth, int colour, int interlace) {
    std::string ihdr;
    for (uint32_t v : {w, h}) for (int s = 24; s >= 0; s -= 8) ihdr.push_back(char(v >> s & 0xff));
    ihdr += char(depth); ihdr += char(colour); ihdr += '\0'; ihdr += '\0'; ihdr += char(interlace);
    return std::string("\x89PNG\r\n\x1a\n", 8) + png_chunk("IHDR", ihdr);
}
}  // namespace

// resize_crop is the crop of the full resize, bit for bit, while computing only the kept pixels.
TEST(Preprocess, ResizeCropIsTheCropOfTheFullResizeBitForBit) {
    std::mt19937 g(5);
    std::uniform_real_distribution<float> u(0, 1);
    const int shapes[][2] = {{13, 29}, {3, 401}, {240, 300}, {97, 2}, {64, 64}};
    for (auto& sh : shapes)
        for (auto k : {Interp::Bilinear, Interp::Bicubic})
            for (int r : {8, 16, 40}) {
                Tensor3 x = Tensor3::from_shape({3, size_t(sh[0]), size_t(sh[1])});
                for (auto& v : x) v = u(g);
                const int H = sh[0], W = sh[1];
                const int rh = H <= W ? r : int(int64_t(r) * H / W), rw = H <= W ? int(int64_t(r) * W / H) : r;
                const int S = 8, top = crop_offset(rh - S), left = crop_offset(rw - S);
                Tensor3 full = resize(x, rh, rw, k), crop = resize_crop(x, rh, rw, top, left, S, S, k);
                ASSERT_EQ(shape_of(crop), (Shape{3, 8, 8}));
                for (int c = 0; c < 3; ++c)
                    for (int y = 0; y < S; ++y)
                        for (int xx = 0; xx < S; ++xx)
                            ASSERT_EQ(std::memcmp(&full(c, top + y, left + xx), &crop(c, y, xx), 4), 0)
                                << H << "x" << W << " -> " << rh << "x" << rw << " at " << c << "," << y << "," << xx;
            }
    EXPECT_THROW(resize_crop(Tensor3::from_shape({1, 4, 4}), 8, 8, 4, 0, 8, 8, Interp::Bilinear), std::invalid_argument);
}

// Issue 23: a 16384x1 image on vit_b_16 is resized by its shorter side to 256 x 4,194,304 (12 GB as
// floats); only the 224 x 224 the crop keeps are computed. The values are a linear ramp's, by hand.
TEST(Preprocess, ExtremeAspectRatioComputesOnlyTheCrop) {
    Config c = preset("vit_b_16");
    Image im;
    im.pixels = Tensor3::from_shape({1, 1, 16384});
    for (size_t i = 0; i < 16384; ++i) im.pixels.flat(i) = float(i) / 16383.f;
    im.width = 16384; im.height = 1; im.channels = 1;
    PreprocessPlan p = plan_preprocess(im, c);
    EXPECT_EQ(p.resize_h, 256);
    EXPECT_EQ(p.resize_w, 256 * 16384);
    Tensor3 x = preprocess(im, c);
    ASSERT_EQ(shape_of(x), (Shape{3, 224, 224}));
    // Upsampling 256x along x: output column i samples the ramp at (i + 0.5) / 256 - 0.5 input pixels,
    // and every row is the single input row: value = ((left + j + 0.5) / 256 - 0.5) / 16383.
    for (int j : {0, 100, 223}) {
        const double src = (p.crop_left + j + 0.5) / 256.0 - 0.5;
        const double want = (src / 16383.0 - c.pre.mean[0]) / c.pre.std[0];
        EXPECT_NEAR(x(0, 0, j), want, 1e-5) << j;
        EXPECT_EQ(x(0, 0, j), x(0, 223, j));
        EXPECT_NEAR(x(2, 100, j), (src / 16383.0 - c.pre.mean[2]) / c.pre.std[2], 1e-5);
    }
}

// Issue 19 item 6: large images are scaled down on load (here with a lowered limit so the files
// stay small): PNG and BMP by a k x k box average (smaller blocks at the edges), JPEG by the
// decoder's M/8 scaling; the plan says so and keeps the file's size.
TEST(Image, OverTheLimitScaledDownOnLoadByBoxAverage) {
    const int W = 22, H = 16;  // limit 50 px: k = 2 gives 11 x 8 = 88, k = 3 gives 8 x 6 (1-pixel edge blocks)
    std::vector<unsigned char> px(size_t(W) * H);
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) px[size_t(y) * W + size_t(x)] = (unsigned char)(x * 11 + y * 7);
    std::string p = tmp("box.png"), b = tmp("box.bmp");
    ASSERT_TRUE(stbi_write_png(p.c_str(), W, H, 1, px.data(), W));
    ASSERT_TRUE(stbi_write_bmp(b.c_str(), W, H, 1, px.data()));
    for (auto& f : {p, b}) {
        SCOPED_TRACE(f);
        Image im = decode_image(read_bytes(f), f, 50);
        EXPECT_EQ(im.file_width, W);
        EXPECT_EQ(im.file_height, H);
        ASSERT_EQ(im.width, 8);
        ASSERT_EQ(im.height, 6);
        EXPECT_EQ(im.scaled_by, "3x3 box average");
        for (int oy = 0; oy < 6; ++oy)
            for (int ox = 0; ox < 8; ++ox) {
                double s = 0;
                int n = 0;
                for (int y = oy * 3; y < std::min(H, oy * 3 + 3); ++y)
                    for (int x = ox * 3; x < std::min(W, ox * 3 + 3); ++x) { s += px[size_t(y) * W + size_t(x)]; ++n; }
                const float want = float(s / n / 255.0);
                EXPECT_NEAR(im.pixels(0, oy, ox), want, 1e-6) << ox << "," << oy;
            }
        Config c = preset("fmnist");
        PreprocessPlan plan = plan_preprocess(im, c);
        EXPECT_EQ(plan.file_w, W);
        EXPECT_NE(plan.scaled_on_load.find("from 22x16 to 8x6 (3x3 box average)"), std::string::npos) << plan.scaled_on_load;
    }
    // Under the limit: untouched, and the plan says nothing.
    Image whole = decode_image(read_bytes(p), p);
    EXPECT_EQ(whole.width, W);
    EXPECT_TRUE(whole.scaled_by.empty());
    EXPECT_TRUE(plan_preprocess(whole, preset("fmnist")).scaled_on_load.empty());
}

TEST(Image, LargeJpegDecodedAtAScaleThatFits) {
    std::vector<unsigned char> px(64 * 48 * 3, 128);
    std::string j = tmp("scale.jpg");
    ASSERT_TRUE(stbi_write_jpg(j.c_str(), 64, 48, 3, px.data(), 95));
    Image im = decode_image(read_bytes(j), j, 1000);  // 64 x 48 = 3072 px: 4/8 gives 32 x 24 = 768
    EXPECT_EQ(im.width, 32);
    EXPECT_EQ(im.height, 24);
    EXPECT_EQ(im.file_width, 64);
    EXPECT_EQ(im.scaled_by, "the JPEG decoder's 4/8 DCT scaling");
    EXPECT_NEAR(im.pixels(1, 10, 10), 128 / 255.f, 3 / 255.f);
}

// libpng's decoding against stb_image's (the library's own, independent PNG decoder) on the fuzz
// corpus's PNGs: palette, gray, gray+alpha, RGBA, 16-bit, Adam7-interlaced.
TEST(Image, LibpngAgreesWithStbImageOnEveryCorpusPng) {
    const std::string dir = std::string(VITSCOPE_SOURCE_DIR) + "/tests/fuzz/corpus/image/";
    int n = 0;
    for (auto& e : std::filesystem::directory_iterator(dir)) {
        if (e.path().extension() != ".png") continue;
        SCOPED_TRACE(e.path().string());
        const std::string bytes = read_bytes(e.path().string());
        Image im = decode_image(bytes, e.path().string());
        int w, h, comp;
        const bool sixteen = stbi_is_16_bit_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()), int(bytes.size()));
        void* ref = sixteen ? static_cast<void*>(stbi_load_16_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()),
                                                                          int(bytes.size()), &w, &h, &comp, 0))
                            : static_cast<void*>(stbi_load_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()),
                                                                       int(bytes.size()), &w, &h, &comp, 0));
        ASSERT_NE(ref, nullptr);
        ASSERT_EQ(im.width, w);
        ASSERT_EQ(im.height, h);
        EXPECT_EQ(im.sixteen_bit, sixteen);
        const int keep = comp <= 2 ? 1 : 3;
        ASSERT_EQ(im.channels, keep);
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x)
                for (int c = 0; c < keep; ++c) {
                    const size_t i = (size_t(y) * w + x) * comp + c;
                    const float want = sixteen ? static_cast<uint16_t*>(ref)[i] / 65535.f : static_cast<stbi_uc*>(ref)[i] / 255.f;
                    ASSERT_EQ(im.pixels(c, y, x), want) << x << "," << y << "," << c;
                }
        stbi_image_free(ref);
        ++n;
    }
    EXPECT_GE(n, 7);
}

TEST(ImageBad, WholeImageDecodesOverTheirBudgetRefusedByName) {
    // An interlaced 12000 x 12000 RGB PNG needs all 432 MB of its rows at once: refused before a row is read.
    std::string png = png_header(12000, 12000, 8, 2, 1) + png_chunk("IDAT", "") + png_chunk("IEND", "");
    try {
        decode_image(png, "interlaced_big.png");
        ADD_FAILURE() << "accepted";
    } catch (const FileError& e) {
        EXPECT_NE(std::string(e.what()).find("interlaced_big.png"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("interlaced"), std::string::npos) << e.what();
    }
    // The same size non-interlaced is read row by row: what stops this one is its missing image data.
    try {
        decode_image(png_header(12000, 12000, 8, 2, 0) + png_chunk("IDAT", "") + png_chunk("IEND", ""), "flat_big.png");
        ADD_FAILURE() << "accepted";
    } catch (const FileError& e) {
        EXPECT_NE(std::string(e.what()).find("flat_big.png: corrupt or truncated PNG"), std::string::npos) << e.what();
    }
    // Over 16384 per side: refused on the header, whatever the format.
    try {
        decode_image(png_header(16385, 2, 8, 0, 0) + png_chunk("IEND", ""), "wide.png");
        ADD_FAILURE() << "accepted";
    } catch (const FileError& e) {
        EXPECT_NE(std::string(e.what()).find("16385x2"), std::string::npos) << e.what();
    }
}

// Text, ICC and palette-suggestion chunks never change a pixel: a 2x2 gray PNG whose zTXt
// inflates to 64 MB, whose iCCP does too, with 5,000 tEXt chunks (libpng keeps at most 1,000
// ancillary chunks) or a 9 MB plain tEXt decodes to its pixels, not to "corrupt or truncated"
// (the metadata is skipped unread, never inflated or kept).
TEST(Image, MetadataChunksNeverStopThePixels) {
    std::string idat;
    {
        const unsigned char rows[] = {0, 10, 200, 0, 30, 255};  // filter byte, 2 gray samples, twice
        uLongf n = compressBound(sizeof rows);
        idat.resize(n);
        ASSERT_EQ(compress(reinterpret_cast<Bytef*>(&idat[0]), &n, rows, sizeof rows), Z_OK);
        idat.resize(n);
    }
    std::string bomb;
    {
        const std::string zeros(64 << 20, '\0');
        uLongf n = compressBound(uLong(zeros.size()));
        bomb.resize(n);
        ASSERT_EQ(compress2(reinterpret_cast<Bytef*>(&bomb[0]), &n, reinterpret_cast<const Bytef*>(zeros.data()),
                            uLong(zeros.size()), 9), Z_OK);
        bomb.resize(n);
    }
    std::string many;
    for (int i = 0; i < 5000; ++i) many += png_chunk("tEXt", std::string("k\0v", 3));
    const std::pair<const char*, std::string> cases[] = {
        {"ztxt_64mb.png", png_chunk("zTXt", std::string("k\0\0", 3) + bomb)},
        {"iccp_64mb.png", png_chunk("iCCP", std::string("p\0\0", 3) + bomb)},
        {"text_5000.png", many},
        {"text_9mb.png", png_chunk("tEXt", "k" + std::string(1, '\0') + std::string(9 << 20, 'v'))},
    };
    for (auto& [name, meta] : cases) {
        SCOPED_TRACE(name);
        const std::string png = png_header(2, 2, 8, 0, 0) + meta + png_chunk("IDAT", idat) + png_chunk("IEND", "");
        Image im;
        try {
            im = decode_image(png, name);
        } catch (const std::exception& e) {
            ADD_FAILURE() << e.what();
            continue;
        }
        ASSERT_EQ(shape_of(im.pixels), (Shape{1, 2, 2}));
        EXPECT_FLOAT_EQ(im.pixels.flat(0), 10 / 255.f);
        EXPECT_FLOAT_EQ(im.pixels.flat(1), 200 / 255.f);
        EXPECT_FLOAT_EQ(im.pixels.flat(2), 30 / 255.f);
        EXPECT_FLOAT_EQ(im.pixels.flat(3), 1.f);
    }
}

// The help lists what decode_image reads, and nothing else.
TEST(Image, FormatsListedAreTheFormatsRead) {
    EXPECT_EQ(image_formats(), "PNG (8/16-bit), JPEG, BMP, WebP, GIF (first frame)");
    for (const char* sig : {"8BPS", "P6\n", "#?RADIANCE\n", "II*\0"}) {
        try {
            decode_image(std::string(sig, std::strlen(sig) + 1) + std::string(64, '\0'), "other.x");
            ADD_FAILURE() << sig;
        } catch (const FileError& e) {
            EXPECT_NE(std::string(e.what()).find("reads PNG, JPEG, BMP, WebP and GIF"), std::string::npos) << e.what();
        }
    }
}
