#include "image.h"

#include <stb_image.h>
#include <stb_image_write.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "io.h"

#include <xtensor/xbroadcast.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

namespace vit {

namespace {
constexpr int64_t kMaxSide = 16384, kMaxPixels = 100'000'000;

// A PNG's size from its IHDR chunk. stb_image refuses huge PNGs inside stbi_info and then reports
// "unknown image type"; reading the header first lets the error say "too large" with the size.
bool png_size(const std::string& b, int64_t* w, int64_t* h) {
    static const char sig[8] = {'\x89', 'P', 'N', 'G', '\r', '\n', '\x1a', '\n'};
    if (b.size() < 24 || b.compare(0, 8, sig, 8) != 0 || b.compare(12, 4, "IHDR") != 0) return false;
    auto be32 = [&](size_t o) {
        return (int64_t(uint8_t(b[o])) << 24) | (int64_t(uint8_t(b[o + 1])) << 16) | (int64_t(uint8_t(b[o + 2])) << 8) |
               int64_t(uint8_t(b[o + 3]));
    };
    *w = be32(16); *h = be32(20);
    return true;
}

std::string too_large(const std::string& what, int64_t w, int64_t h) {
    return what + ": image is " + std::to_string(w) + "x" + std::to_string(h) +
           ", too large (the limit is 16384 per side and 100 megapixels)";
}
}

Image decode_image(const std::string& bytes, const std::string& what) {
    if (bytes.empty()) throw FileError(what + ": file is empty");
    if (bytes.size() > size_t(INT32_MAX)) throw FileError(what + ": file is too large");
    auto* b = reinterpret_cast<const stbi_uc*>(bytes.data());
    int len = int(bytes.size());
    int64_t pw = 0, ph = 0;
    if (png_size(bytes, &pw, &ph) && (pw > kMaxSide || ph > kMaxSide || pw * ph > kMaxPixels))
        throw FileError(too_large(what, pw, ph));
    int w = 0, h = 0, n = 0;
    if (!stbi_info_from_memory(b, len, &w, &h, &n))
        throw FileError(what + ": not an image stb_image can read (" + std::string(stbi_failure_reason()) + ")");
    if (w <= 0 || h <= 0 || w > kMaxSide || h > kMaxSide || int64_t(w) * h > kMaxPixels)
        throw FileError(too_large(what, w, h));
    Image img;
    img.file_channels = n;
    img.sixteen_bit = stbi_is_16_bit_from_memory(b, len);
    int keep = (n == 1 || n == 2) ? 1 : 3;  // drop alpha
    img.width = w; img.height = h; img.channels = keep;
    img.pixels = Tensor3::from_shape({size_t(keep), size_t(h), size_t(w)});
    float* dst = img.pixels.data();
    auto plane = size_t(w) * h;
    if (img.sixteen_bit) {
        int ww, hh, nn;
        stbi_us* px = stbi_load_16_from_memory(b, len, &ww, &hh, &nn, 0);
        if (!px) throw FileError(what + ": corrupt or truncated image (" + std::string(stbi_failure_reason()) + ")");
        for (size_t i = 0; i < plane; ++i)
            for (int c = 0; c < keep; ++c) dst[c * plane + i] = px[i * nn + c] / 65535.f;
        stbi_image_free(px);
    } else {
        int ww, hh, nn;
        stbi_uc* px = stbi_load_from_memory(b, len, &ww, &hh, &nn, 0);
        if (!px) throw FileError(what + ": corrupt or truncated image (" + std::string(stbi_failure_reason()) + ")");
        for (size_t i = 0; i < plane; ++i)
            for (int c = 0; c < keep; ++c) dst[c * plane + i] = px[i * nn + c] / 255.f;
        stbi_image_free(px);
    }
    return img;
}

Image load_image(const std::string& path) { return decode_image(read_file(path, size_t(1) << 30), path); }

Tensor3 convert_channels(const Tensor3& chw, int channels) {
    const size_t C = chw.shape(0), H = chw.shape(1), W = chw.shape(2);
    if (int(C) == channels) return chw;
    if (channels == 1) {  // PIL's convert("L"): L = 0.299 R + 0.587 G + 0.114 B
        Tensor3 out = Tensor3::from_shape({1, H, W});
        xt::view(out, 0) = 0.299f * xt::view(chw, 0) + 0.587f * xt::view(chw, 1) + 0.114f * xt::view(chw, 2);
        return out;
    }
    return xt::broadcast(chw, {size_t(channels), H, W});  // gray -> RGB: the plane repeated
}

namespace {

double filter(double x, Interp k) {
    x = std::fabs(x);
    if (k == Interp::Bilinear) return x < 1 ? 1 - x : 0;
    const double a = -0.5;  // PIL's bicubic
    if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
    return 0;
}

struct Taps { std::vector<int> start, count; std::vector<double> w; int max = 0; };

// PIL-style separable resampling weights for one axis.
Taps taps(int in, int out, Interp k) {
    Taps t;
    double scale = double(in) / out, fs = std::max(scale, 1.0);
    double support = (k == Interp::Bilinear ? 1.0 : 2.0) * fs;
    t.max = int(std::ceil(support)) * 2 + 1;
    t.start.resize(out); t.count.resize(out); t.w.assign(size_t(out) * t.max, 0.0);
    for (int i = 0; i < out; ++i) {
        double center = (i + 0.5) * scale;
        int lo = std::max(0, int(center - support + 0.5));
        int hi = std::min(in, int(center + support + 0.5));
        double sum = 0;
        int n = hi - lo;
        for (int j = 0; j < n; ++j) {
            double v = filter((j + lo - center + 0.5) / fs, k);
            t.w[size_t(i) * t.max + j] = v;
            sum += v;
        }
        if (sum != 0) for (int j = 0; j < n; ++j) t.w[size_t(i) * t.max + j] /= sum;
        t.start[i] = lo; t.count[i] = n;
    }
    return t;
}

}  // namespace

Tensor3 resize(const Tensor3& chw, int oh, int ow, Interp k) {
    const size_t C = chw.shape(0), H = chw.shape(1), W = chw.shape(2);
    if (size_t(oh) == H && size_t(ow) == W) return chw;
    Taps tx = taps(int(W), ow, k), ty = taps(int(H), oh, k);
    Tensor3 tmp = Tensor3::from_shape({C, H, size_t(ow)}), out = Tensor3::from_shape({C, size_t(oh), size_t(ow)});
    for (size_t c = 0; c < C; ++c)
        for (size_t y = 0; y < H; ++y) {
            const float* row = chw.data() + (c * H + y) * W;
            float* o = tmp.data() + (c * H + y) * ow;
            for (int x = 0; x < ow; ++x) {
                double s = 0;
                for (int j = 0; j < tx.count[x]; ++j) s += tx.w[size_t(x) * tx.max + j] * row[tx.start[x] + j];
                o[x] = float(s);
            }
        }
    for (size_t c = 0; c < C; ++c)
        for (int y = 0; y < oh; ++y) {
            float* o = out.data() + (c * oh + y) * ow;
            for (int x = 0; x < ow; ++x) {
                double s = 0;
                for (int j = 0; j < ty.count[y]; ++j)
                    s += ty.w[size_t(y) * ty.max + j] * tmp.data()[(c * H + ty.start[y] + j) * ow + x];
                o[x] = float(s);
            }
        }
    return out;
}

Tensor3 resize_shorter(const Tensor3& chw, int size, Interp k) {
    const size_t H = chw.shape(1), W = chw.shape(2);
    int oh, ow;
    if (H <= W) { oh = size; ow = int(std::max<int64_t>(1, int64_t(size) * int64_t(W) / int64_t(H))); }
    else { ow = size; oh = int(std::max<int64_t>(1, int64_t(size) * int64_t(H) / int64_t(W))); }
    return resize(chw, oh, ow, k);
}

// Python's int(round(x)) for x = m / 2: round half to even, as torchvision's CenterCrop computes its
// offsets (crop_top = int(round((H - h) / 2.0))). Margins 3, 5, 7 give 2, 2, 4 (lround gives 2, 3, 4).
int crop_offset(int64_t margin) {
    int64_t q = margin / 2;
    if (margin % 2 == 0) return int(q);
    return int(q % 2 == 0 ? q : q + 1);
}

Tensor3 center_crop(const Tensor3& chw, int oh, int ow) {
    const size_t H = chw.shape(1), W = chw.shape(2);
    if (size_t(oh) > H || size_t(ow) > W) return resize(chw, oh, ow, Interp::Bilinear);
    const size_t top = size_t(crop_offset(int64_t(H) - oh)), left = size_t(crop_offset(int64_t(W) - ow));
    // img[:, top:top+oh, left:left+ow]
    return xt::view(chw, xt::all(), xt::range(top, top + oh), xt::range(left, left + ow));
}

PreprocessPlan plan_preprocess(int width, int height, const Config& c) {
    PreprocessPlan p;
    const int S = c.image_size;
    p.squash = c.pre.squash;
    if (c.pre.squash) {
        int r = c.pre.resize > 0 ? c.pre.resize : S;
        p.resize_w = p.resize_h = r;
    } else {
        int r = c.pre.resize > 0 ? c.pre.resize : S;
        // torchvision Resize(int): the shorter side to r, the longer int(r * long / short)
        if (height <= width) { p.resize_h = r; p.resize_w = int(std::max<int64_t>(1, int64_t(r) * width / height)); }
        else { p.resize_w = r; p.resize_h = int(std::max<int64_t>(1, int64_t(r) * height / width)); }
    }
    p.crop_w = p.crop_h = S;
    p.crop_left = p.resize_w >= S ? crop_offset(p.resize_w - S) : 0;
    p.crop_top = p.resize_h >= S ? crop_offset(p.resize_h - S) : 0;
    return p;
}

namespace {
// mean and std as (C, 1, 1) for broadcasting over an image
Tensor3 per_channel(const std::vector<float>& v) {
    Tensor3 t = Tensor3::from_shape({v.size(), 1, 1});
    std::copy(v.begin(), v.end(), t.begin());
    return t;
}
}  // namespace

Tensor3 preprocess(const Image& img, const Config& c) {
    Tensor3 x = convert_channels(img.pixels, c.channels);
    const int S = c.image_size;
    PreprocessPlan p = plan_preprocess(int(x.shape(2)), int(x.shape(1)), c);
    x = resize(x, p.resize_h, p.resize_w, c.pre.interp);
    if (p.resize_h != S || p.resize_w != S) x = center_crop(x, S, S);
    // transforms.Normalize(mean, std): (x - mean[:, None, None]) / std[:, None, None]
    return (x - per_channel(c.pre.mean)) / per_channel(c.pre.std);
}

Tensor3 denormalize(const Tensor3& input, const Config& c) {
    return xt::clip(input * per_channel(c.pre.std) + per_channel(c.pre.mean), 0.f, 1.f);
}

namespace {
void append_bytes(void* ctx, void* data, int size) {
    static_cast<std::string*>(ctx)->append(static_cast<const char*>(data), size_t(size));
}
}  // namespace

void write_png(const std::string& path, const unsigned char* px, int w, int h, int comp) {
    std::string out;
    if (!stbi_write_png_to_func(append_bytes, &out, w, h, comp, px, w * comp))
        throw FileError(path + ": PNG encoding failed");
    write_file_atomic(path, out);
}

}  // namespace vit
