// Image decoding and preprocessing on real files written by stb_image_write.
#include <gtest/gtest.h>
#include <stb_image_write.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

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
    // TGA (like GIF, PSD, HDR, PIC, PNM) is refused: only PNG, JPEG and BMP are decoded.
    try {
        load_image(t);
        ADD_FAILURE() << "TGA accepted";
    } catch (const FileError& e) {
        EXPECT_NE(std::string(e.what()).find("g.tga"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("PNG, JPEG and BMP"), std::string::npos) << e.what();
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
