// Image decoding (stb_image) and preprocessing into the model's input.
#pragma once
#include <string>

#include "model.h"
#include "tensor.h"

namespace vit {

// Decoded image as float (C, H, W) in [0, 1], C in {1, 3} (alpha dropped,
// as PIL's convert("RGB") does). 16-bit files keep their precision.
struct Image {
    Tensor pixels;  // (C, H, W)
    int width = 0, height = 0, channels = 0;
    int file_channels = 0;
    bool sixteen_bit = false;
};

// PNG (8/16-bit), JPEG (libjpeg-turbo) and BMP; every other format is refused.
// Throws FileError naming the file: missing, empty, not an image, an
// unsupported format, corrupt or truncated, or too large (checked on the header
// before decoding: 16384 per side and 25 megapixels; `max_pixels` > 0 lowers
// the latter, as the fuzz harness does).
Image load_image(const std::string& path);
Image decode_image(const std::string& bytes, const std::string& what, int64_t max_pixels = 0);

// Gray <-> RGB (ITU-R 601 luma, as PIL's convert("L")).
Tensor convert_channels(const Tensor& chw, int channels);
// Resampling with antialiasing when shrinking (PIL / torchvision antialias=True
// semantics): triangle filter for bilinear, cubic a=-0.5 for bicubic.
Tensor resize(const Tensor& chw, int out_h, int out_w, Interp interp);
// Shorter side to `size`, keeping the aspect ratio (torchvision Resize(int)).
Tensor resize_shorter(const Tensor& chw, int size, Interp interp);
Tensor center_crop(const Tensor& chw, int out_h, int out_w);
// The full pipeline for a model: channels, resize (+crop), normalize.
Tensor preprocess(const Image& img, const Config& c);
// Undo the normalization (for display): returns (C, H, W) in [0, 1].
Tensor denormalize(const Tensor& input, const Config& c);

// Writes 8-bit RGB(A) or gray pixels (row-major, interleaved) as PNG, atomically.
void write_png(const std::string& path, const unsigned char* px, int w, int h, int comp);

}  // namespace vit
