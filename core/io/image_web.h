// The formats pictures saved from the web come in (issue 36 item 16): WebP through Debian's libwebp
// (a still image, or an animation's first frame through libwebpdemux) and a GIF's first frame through
// a decoder of our own (stb_image's GIF path is not safe on hostile files: image.cpp). Both stop at
// the same limits as the other formats (image.cpp passes them): a side over max_side is refused on
// the header, and a picture whose decoded samples would be over max_bytes is refused before a pixel
// is decoded. Internal to core/io: decode_image() calls these and scales the result down as it does
// for every format.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vit::detail {

struct Decoded8 {
    int w = 0, h = 0, n = 0;          // interleaved 8-bit samples, n per pixel (3: RGB, 4: RGBA)
    int file_channels = 0;            // what the file holds (4 when it has alpha)
    std::vector<unsigned char> px;    // h rows of w * n samples
    std::string note;                 // "the first of 12 frames of an animated GIF", or ""
};

bool is_webp(const std::string& bytes);
bool is_gif(const std::string& bytes);
// Throw FileError naming `what` on a corrupt, truncated or too large file.
Decoded8 decode_webp(const std::string& bytes, const std::string& what, int64_t max_side, int64_t max_bytes);
Decoded8 decode_gif_first_frame(const std::string& bytes, const std::string& what, int64_t max_side, int64_t max_bytes);

}  // namespace vit::detail
