// WebP and GIF, as people have them (issue 36 item 16): files written by Pillow's own encoders
// (tests/images/make_web_images.py) decode to the pixels the generator wrote; an animation opens on
// its first frame and says so; hostile headers are refused on the same limits as the other formats.
#include <gtest/gtest.h>

#include <string>

#include "core/io/image.h"
#include "core/io/io.h"

using namespace vit;

namespace {

std::string fixture(const std::string& name) { return std::string(VITSCOPE_SOURCE_DIR) + "/tests/images/" + name; }

// the pixel of channel c at (x, y), 0..255, as the image holds it
int at(const Image& im, int c, int x, int y) {
    return int(std::lround(im.pixels(size_t(c), size_t(y), size_t(x)) * 255.f));
}

void expect_rgb_pattern(const Image& im, int w, int h, int shift = 0) {
    ASSERT_EQ(im.width, w);
    ASSERT_EQ(im.height, h);
    ASSERT_EQ(im.channels, 3);
    int bad = 0;
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            bad += at(im, 0, x, y) != (x * 19 + shift) % 256 || at(im, 1, x, y) != y * 37 % 256 || at(im, 2, x, y) != x * y * 5 % 256;
    EXPECT_EQ(bad, 0) << "pixels that differ from the generator's";
}

void expect_gif_pattern(const Image& im, int w, int h) {
    ASSERT_EQ(im.width, w);
    ASSERT_EQ(im.height, h);
    ASSERT_EQ(im.channels, 3);
    int bad = 0;
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
            const int i = (x + 13 * y) % 256;
            bad += at(im, 0, x, y) != i || at(im, 1, x, y) != 255 - i || at(im, 2, x, y) != i * 7 % 256;
        }
    EXPECT_EQ(bad, 0) << "pixels that differ from the generator's";
}

std::string le16(int v) { return std::string{char(v & 255), char(v >> 8)}; }

}  // namespace

TEST(ImageWeb, WebpLosslessFromPillow) {
    const Image im = load_image(fixture("pattern.webp"));
    expect_rgb_pattern(im, 13, 7);
    EXPECT_TRUE(im.note.empty()) << im.note;
}

TEST(ImageWeb, WebpWithAlphaDropsItAsPngDoes) {
    const Image im = load_image(fixture("pattern_alpha.webp"));
    expect_rgb_pattern(im, 13, 7);
    EXPECT_EQ(im.file_channels, 4);
}

TEST(ImageWeb, AnimatedWebpOpensOnItsFirstFrameAndSaysSo) {
    const Image im = load_image(fixture("anim.webp"));
    expect_rgb_pattern(im, 13, 7, 0);
    EXPECT_EQ(im.note, "the first of 3 frames of an animated WebP");
}

TEST(ImageWeb, GifFromPillow) {
    const Image im = load_image(fixture("pattern.gif"));
    expect_gif_pattern(im, 13, 7);
    EXPECT_TRUE(im.note.empty()) << im.note;
}

TEST(ImageWeb, InterlacedGifRowsInPlace) {
    const std::string b = read_file(fixture("interlaced.gif"));
    // the generator's file is interlaced (the image descriptor's bit 6), or this test proves nothing
    const size_t d = b.find(',', 13 + 3 * 256);
    ASSERT_NE(d, std::string::npos);
    ASSERT_TRUE(static_cast<unsigned char>(b[d + 9]) & 0x40) << "interlaced.gif is not interlaced";
    expect_gif_pattern(load_image(fixture("interlaced.gif")), 17, 20);
}

TEST(ImageWeb, AnimatedGifOpensOnItsFirstFrameAndSaysSo) {
    const Image im = load_image(fixture("anim.gif"));
    expect_gif_pattern(im, 13, 7);
    EXPECT_EQ(im.note, "the first of 3 frames of an animated GIF");
}

TEST(ImageWeb, HostileHeadersRefusedOnTheSameLimits) {
    auto refused = [](const std::string& bytes, const std::string& says) {
        try {
            decode_image(bytes, "x");
            ADD_FAILURE() << "accepted: " << says;
        } catch (const FileError& e) {
            EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
        }
    };
    // a GIF canvas over 16384 pixels a side, and one whose samples are over the whole-decode limit
    refused("GIF89a" + le16(20000) + le16(10) + std::string("\0\0\0", 3), "image too large: 20000x10");
    refused("GIF89a" + le16(16000) + le16(16000) + std::string("\0\0\0", 3), "MB limit");
    // truncated inside its colour table; an LZW stream that points past its table
    refused("GIF89a" + le16(4) + le16(4) + std::string("\x87\0\0", 3) + "abc", "corrupt or truncated GIF");
    std::string lzw = "GIF89a" + le16(2) + le16(1) + std::string("\x80\0\0", 3) + std::string(6, '\0') + "," +
                      le16(0) + le16(0) + le16(2) + le16(1) + std::string("\0\x02\x01\x3f\0;", 6);
    refused(lzw, "corrupt GIF");
    // a GIF with no image; a WebP that is only its RIFF header
    refused("GIF89a" + le16(2) + le16(2) + std::string("\0\0\0;", 4), "holds no image");
    refused(std::string("RIFF\x04\0\0\0WEBP", 12), "corrupt or truncated WebP");
    // a truncated copy of every fixture
    for (const char* f : {"pattern.webp", "anim.webp", "pattern.gif", "anim.gif"}) {
        const std::string b = read_file(fixture(f));
        try {
            decode_image(b.substr(0, b.size() / 2), f);
        } catch (const FileError&) {
            continue;  // refused with a message: fine (a GIF cut after its first frame may also decode)
        }
    }
}

TEST(ImageWeb, FormatsSaid) {
    EXPECT_NE(image_formats().find("WebP"), std::string::npos);
    EXPECT_NE(image_formats().find("GIF (first frame)"), std::string::npos);
}
