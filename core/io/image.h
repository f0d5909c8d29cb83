// Image decoding (stb_image) and preprocessing into the model's input.
#pragma once
#include <string>

#include "core/model/model.h"
#include "core/model/tensor.h"

namespace vit {

// Decoded image as float (C, H, W) in [0, 1], C in {1, 3} (alpha dropped,
// as PIL's convert("RGB") does). 16-bit files keep their precision.
struct Image {
    Tensor3 pixels;  // (C, H, W)
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
Tensor3 convert_channels(const Tensor3& chw, int channels);
// Resampling with antialiasing when shrinking (PIL / torchvision antialias=True
// semantics): triangle filter for bilinear, cubic a=-0.5 for bicubic.
Tensor3 resize(const Tensor3& chw, int out_h, int out_w, Interp interp);
// Shorter side to `size`, keeping the aspect ratio (torchvision Resize(int)).
Tensor3 resize_shorter(const Tensor3& chw, int size, Interp interp);
// Offsets as torchvision's CenterCrop: int(round(margin / 2)), Python's half-to-even rounding.
Tensor3 center_crop(const Tensor3& chw, int out_h, int out_w);
int crop_offset(int64_t margin);
// What preprocess() does to a width x height image for this config, so views can say it.
struct PreprocessPlan {
    bool squash = false;          // straight resize to a square, aspect lost
    int resize_w = 0, resize_h = 0;
    int crop_left = 0, crop_top = 0, crop_w = 0, crop_h = 0;
};
PreprocessPlan plan_preprocess(int width, int height, const Config& c);
// The full pipeline for a model: channels, resize (+crop), normalize.
Tensor3 preprocess(const Image& img, const Config& c);
// The pipeline for a run at another input size h x w (multiples of the patch): as preprocess()
// for a model of side max(h, w) (the resize scaled likewise), then a centre crop to h x w; a
// model that squashes (Hugging Face processors) resizes straight to h x w.
Tensor3 preprocess_at(const Image& img, const Config& c, int h, int w);
// Undo the normalization (for display): returns (C, H, W) in [0, 1].
Tensor3 denormalize(const Tensor3& input, const Config& c);

// Writes 8-bit RGB(A) or gray pixels (row-major, interleaved) as PNG, atomically.
void write_png(const std::string& path, const unsigned char* px, int w, int h, int comp);

}  // namespace vit
