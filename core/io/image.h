// Image decoding (stb_image) and preprocessing into the model's input.
#pragma once
#include <cstdint>
#include <string>

#include "core/model/model.h"
#include "core/model/tensor.h"

namespace vit {

// What is kept: an image over 25 megapixels (a 12-50 MP phone photo, a 9000x9000
// scan) is scaled down on load to at most this, so the float image (12 bytes a
// pixel for RGB) stays within 300 MB.
constexpr int64_t kKeepPixels = 25'000'000;

// Decoded image as float (C, H, W) in [0, 1], C in {1, 3} (alpha dropped,
// as PIL's convert("RGB") does). 16-bit files keep their precision.
struct Image {
    Tensor3 pixels;  // (C, H, W)
    int width = 0, height = 0, channels = 0;  // of `pixels`
    int file_channels = 0;
    bool sixteen_bit = false;
    // The size stored in the file (0: as width x height). An image over the
    // kept-pixel limit is scaled down on load; scaled_by then says how
    // ("2x2 box average", "the JPEG decoder's 4/8 DCT scaling"), else it is "".
    int file_width = 0, file_height = 0;
    std::string scaled_by;
    // What else was done on load, in words ("" when nothing): "the first of 12 frames of an animated GIF".
    std::string note;
};

// The largest image file read (bytes): it is held while it is decoded, beside the
// (at most 300 MB) image it becomes.
constexpr size_t kMaxImageFileBytes = size_t(256) << 20;
// "PNG (8/16-bit), JPEG, BMP": the formats decode_image reads, for help texts.
std::string image_formats();

// PNG (8/16-bit, libpng), JPEG (libjpeg-turbo) and BMP; every other format is
// refused by name. Throws FileError naming the file: missing, empty, not an
// image, an unsupported format, corrupt or truncated, or too large (checked on
// the header before decoding: 16384 pixels per side; a BMP or interlaced PNG
// must also fit 256 MB of samples, as it is decoded whole). An image over 25
// megapixels is scaled down on load to at most that (`max_pixels` > 0 lowers
// it): PNG and BMP by an integer k x k box average, JPEG by the decoder's M/8
// DCT scaling; Image::scaled_by says which.
Image load_image(const std::string& path);
Image decode_image(const std::string& bytes, const std::string& what, int64_t max_pixels = 0);

// Gray <-> RGB (ITU-R 601 luma, as PIL's convert("L")).
Tensor3 convert_channels(const Tensor3& chw, int channels);
// Resampling with antialiasing when shrinking (PIL / torchvision antialias=True
// semantics): triangle filter for bilinear, cubic a=-0.5 for bicubic.
Tensor3 resize(const Tensor3& chw, int out_h, int out_w, Interp interp);
// resize(chw, rh, rw)[:, top:top+oh, left:left+ow], bit for bit, computing only
// the pixels kept: memory and time follow the crop, not the resized size.
// Throws std::invalid_argument if the crop is not inside the resized image.
Tensor3 resize_crop(const Tensor3& chw, int rh, int rw, int top, int left, int oh, int ow, Interp interp);
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
    int file_w = 0, file_h = 0;   // the image as its file stores it
    // "" unless the image was scaled down on load, else the step in words:
    // "scaled down on load from 9000x9000 to 4500x4500 (...): over the 25-megapixel limit".
    std::string scaled_on_load;
};
PreprocessPlan plan_preprocess(int width, int height, const Config& c);
// The same for a decoded image, with what happened on load.
PreprocessPlan plan_preprocess(const Image& img, const Config& c);
// The full pipeline for a model: channels, resize (+crop; only the kept pixels
// are computed), normalize.
Tensor3 preprocess(const Image& img, const Config& c);
// The pipeline for a run at another input size h x w (multiples of the patch): as preprocess()
// for a model of side max(h, w) (the resize scaled likewise), then a centre crop to h x w; a
// model that squashes (Hugging Face processors) resizes straight to h x w.
Tensor3 preprocess_at(const Image& img, const Config& c, int h, int w);
// What preprocess_at does, as one plan (for the window's description of the steps): at the native size
// plan_preprocess; squashed, a straight resize to w x h; else the shorter side resized for a square of
// side max(h, w) (the resize scaled with it) and the centre crop h x w of that square, as one crop.
PreprocessPlan plan_preprocess_at(const Image& img, const Config& c, int h, int w);
// An already-normalized input read from `what` (an --input .npy): it must be
// (channels, H, W) for this model, H and W multiples of its patch size (the native
// size or another one the run adapts to), else a FileError naming `what`, the shape
// it holds and the shape the model takes.
Tensor3 input_from_array(Array a, const Config& c, const std::string& what);
// Undo the normalization (for display): returns (C, H, W) in [0, 1].
Tensor3 denormalize(const Tensor3& input, const Config& c);

// Writes 8-bit RGB(A) or gray pixels (row-major, interleaved) as PNG, atomically.
void write_png(const std::string& path, const unsigned char* px, int w, int h, int comp);

}  // namespace vit
