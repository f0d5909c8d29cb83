// A decoded image becomes a model input: channels converted, resized (PIL's filters: bilinear and bicubic
// taps over the whole source, antialiased when shrinking), centre-cropped or squashed, normalized; and back
// (denormalize). The decoders are in image.cpp.
#include "core/io/image.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/io/io.h"

#include <xtensor/xbroadcast.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

namespace vit {

namespace {
std::string dims(int64_t w, int64_t h) { return std::to_string(w) + "x" + std::to_string(h); }
}  // namespace

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

// PIL-style separable resampling weights for one axis, for the outputs [o0, o1)
// of a resize from `in` to `out` samples (entry i - o0 holds output i): only the
// outputs a crop keeps are ever weighed, so a 16384x1 image resized by its
// shorter side to 256 (4 M columns) costs the 224 columns it keeps.
Taps taps(int in, int out, Interp k, int o0, int o1) {
    Taps t;
    double scale = double(in) / out, fs = std::max(scale, 1.0);
    double support = (k == Interp::Bilinear ? 1.0 : 2.0) * fs;
    t.max = int(std::ceil(support)) * 2 + 1;
    const int n_out = o1 - o0;
    t.start.resize(size_t(n_out)); t.count.resize(size_t(n_out)); t.w.assign(size_t(n_out) * size_t(t.max), 0.0);
    for (int i = o0; i < o1; ++i) {
        const size_t r = size_t(i - o0);
        double center = (i + 0.5) * scale;
        int lo = std::max(0, int(center - support + 0.5));
        int hi = std::min(in, int(center + support + 0.5));
        double sum = 0;
        int n = hi - lo;
        for (int j = 0; j < n; ++j) {
            double v = filter((j + lo - center + 0.5) / fs, k);
            t.w[r * size_t(t.max) + size_t(j)] = v;
            sum += v;
        }
        if (sum != 0) for (int j = 0; j < n; ++j) t.w[r * size_t(t.max) + size_t(j)] /= sum;
        t.start[r] = lo; t.count[r] = n;
    }
    return t;
}

}  // namespace

Tensor3 resize_crop(const Tensor3& chw, int rh, int rw, int top, int left, int oh, int ow, Interp k) {
    const size_t C = chw.shape(0), H = chw.shape(1), W = chw.shape(2);
    if (rh <= 0 || rw <= 0 || oh <= 0 || ow <= 0 || top < 0 || left < 0 || int64_t(top) + oh > rh || int64_t(left) + ow > rw)
        throw std::invalid_argument("resize_crop: the crop " + dims(ow, oh) + " at (" + std::to_string(left) + ", " +
                                    std::to_string(top) + ") is not inside the resized " + dims(rw, rh));
    if (size_t(rh) == H && size_t(rw) == W)  // no resize: the crop alone
        return xt::view(chw, xt::all(), xt::range(size_t(top), size_t(top + oh)), xt::range(size_t(left), size_t(left + ow)));
    // The same arithmetic, in the same order, as resizing everything and cropping
    // afterwards (horizontal pass, then vertical): the kept pixels are bit-identical.
    Taps tx = taps(int(W), rw, k, left, left + ow), ty = taps(int(H), rh, k, top, top + oh);
    int y0 = int(H), y1 = 0;  // the input rows the kept output rows read
    for (int y = 0; y < oh; ++y)
        if (ty.count[size_t(y)] > 0) { y0 = std::min(y0, ty.start[size_t(y)]); y1 = std::max(y1, ty.start[size_t(y)] + ty.count[size_t(y)]); }
    if (y1 < y0) y1 = y0;
    const size_t rows = size_t(y1 - y0);
    Tensor3 tmp = Tensor3::from_shape({C, rows, size_t(ow)}), out = Tensor3::from_shape({C, size_t(oh), size_t(ow)});
    // (Plain pointers in the loops: a 25-megapixel photo goes through them.)
    const double* txw = tx.w.data();
    const int *txs = tx.start.data(), *txc = tx.count.data();
    for (size_t c = 0; c < C; ++c)
        for (size_t y = 0; y < rows; ++y) {
            const float* row = chw.data() + (c * H + size_t(y0) + y) * W;
            float* o = tmp.data() + (c * rows + y) * size_t(ow);
            for (int x = 0; x < ow; ++x) {
                const double* w = txw + size_t(x) * size_t(tx.max);
                const float* r = row + txs[x];
                double s = 0;
                for (int j = 0; j < txc[x]; ++j) s += w[j] * r[j];
                o[x] = float(s);
            }
        }
    const double* tyw = ty.w.data();
    const int *tys = ty.start.data(), *tyc = ty.count.data();
    for (size_t c = 0; c < C; ++c)
        for (int y = 0; y < oh; ++y) {
            float* o = out.data() + (c * size_t(oh) + size_t(y)) * size_t(ow);
            const double* w = tyw + size_t(y) * size_t(ty.max);
            const float* col = tmp.data() + (c * rows + size_t(tys[y] - y0)) * size_t(ow);
            for (int x = 0; x < ow; ++x) {
                double s = 0;
                for (int j = 0; j < tyc[y]; ++j) s += w[j] * col[size_t(j) * size_t(ow) + size_t(x)];
                o[x] = float(s);
            }
        }
    return out;
}

Tensor3 resize(const Tensor3& chw, int oh, int ow, Interp k) {
    const size_t H = chw.shape(1), W = chw.shape(2);
    if (size_t(oh) == H && size_t(ow) == W) return chw;
    return resize_crop(chw, oh, ow, 0, 0, oh, ow, k);
}

namespace {
// torchvision Resize(int): the shorter side to r, the longer int(r * long / short).
void shorter_side(int64_t w, int64_t h, int r, int& rw, int& rh) {
    auto longer = [&](int64_t l, int64_t s) { return int(std::clamp<int64_t>(int64_t(r) * l / s, 1, INT_MAX)); };
    if (h <= w) { rh = r; rw = longer(w, h); }
    else { rw = r; rh = longer(h, w); }
}
}  // namespace

Tensor3 resize_shorter(const Tensor3& chw, int size, Interp k) {
    int oh, ow;
    shorter_side(int64_t(chw.shape(2)), int64_t(chw.shape(1)), size, ow, oh);
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
    const int r = c.pre.resize > 0 ? c.pre.resize : S;
    p.squash = c.pre.squash;
    if (c.pre.squash) p.resize_w = p.resize_h = r;
    else shorter_side(width, height, r, p.resize_w, p.resize_h);
    p.crop_w = p.crop_h = S;
    p.crop_left = p.resize_w >= S ? crop_offset(p.resize_w - S) : 0;
    p.crop_top = p.resize_h >= S ? crop_offset(p.resize_h - S) : 0;
    p.file_w = width;
    p.file_h = height;
    return p;
}

PreprocessPlan plan_preprocess(const Image& img, const Config& c) {
    PreprocessPlan p = plan_preprocess(img.width, img.height, c);
    if (img.file_width > 0 && img.file_height > 0) { p.file_w = img.file_width; p.file_h = img.file_height; }
    if (!img.scaled_by.empty())
        p.scaled_on_load = "scaled down on load from " + dims(p.file_w, p.file_h) + " to " + dims(img.width, img.height) +
                           " (" + img.scaled_by + "): over the " + std::to_string(kKeepPixels / 1'000'000) +
                           "-megapixel limit";
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
    const int S = c.image_size;
    const size_t C = img.pixels.shape(0);
    // RGB -> gray before resizing (as PIL converts first); gray -> RGB after it: the
    // three planes would be resized identically, so one is resized and then copied.
    Tensor3 gray;
    if (c.channels == 1 && C == 3) gray = convert_channels(img.pixels, 1);
    const Tensor3& x = gray.size() ? gray : img.pixels;
    PreprocessPlan p = plan_preprocess(int(x.shape(2)), int(x.shape(1)), c);
    Tensor3 y;
    if (p.resize_w >= S && p.resize_h >= S)
        y = resize_crop(x, p.resize_h, p.resize_w, p.crop_top, p.crop_left, S, S, c.pre.interp);
    else  // a resize smaller than the crop (never in a validated config): the whole resize, then the crop's own fallback
        y = center_crop(resize(x, p.resize_h, p.resize_w, c.pre.interp), S, S);
    if (int(y.shape(0)) != c.channels) y = convert_channels(y, c.channels);
    // transforms.Normalize(mean, std): (x - mean[:, None, None]) / std[:, None, None]
    return (y - per_channel(c.pre.mean)) / per_channel(c.pre.std);
}

Tensor3 input_from_array(Array a, const Config& c, const std::string& what) {
    const Shape want{size_t(c.channels), size_t(c.image_size), size_t(c.image_size)};
    // Another height and width run at that size (the position embeddings resized), when they are
    // multiples of the patch within the size limit.
    const bool fits = a.dimension() == 3 && a.shape(0) == size_t(c.channels) && a.shape(1) >= size_t(c.patch) &&
                      a.shape(2) >= size_t(c.patch) && a.shape(1) % size_t(c.patch) == 0 &&
                      a.shape(2) % size_t(c.patch) == 0 && a.shape(1) <= size_t(kMaxImageSize) &&
                      a.shape(2) <= size_t(kMaxImageSize);
    if (!fits)
        throw FileError(what + ": input has shape " + shape_str_of(a) + "; this model (" + c.name + ") takes " +
                        shape_str(want) + " (channels, height, width), already normalized, or another height and "
                        "width that are multiples of its patch size " + std::to_string(c.patch));
    return Tensor3(std::move(a));
}

Tensor3 denormalize(const Tensor3& input, const Config& c) {
    return xt::clip(input * per_channel(c.pre.std) + per_channel(c.pre.mean), 0.f, 1.f);
}

PreprocessPlan plan_preprocess_at(const Image& img, const Config& c, int h, int w) {
    if (h == c.image_size && w == c.image_size) return plan_preprocess(img, c);
    if (c.pre.squash) {
        PreprocessPlan p = plan_preprocess(img, c);
        p.resize_w = p.crop_w = w;
        p.resize_h = p.crop_h = h;
        p.crop_left = p.crop_top = 0;
        return p;
    }
    Config cc = c;  // as preprocess_at: the square of the longer side, then its centre h x w
    const int side = std::max(h, w);
    cc.image_size = side;
    if (c.pre.resize > 0) cc.pre.resize = int(std::lround(double(c.pre.resize) * side / c.image_size));
    PreprocessPlan p = plan_preprocess(img, cc);
    p.crop_left += crop_offset(side - w);
    p.crop_top += crop_offset(side - h);
    p.crop_w = w;
    p.crop_h = h;
    return p;
}

Tensor3 preprocess_at(const Image& img, const Config& c, int h, int w) {
    if (h == c.image_size && w == c.image_size) return preprocess(img, c);
    if (c.pre.squash) {  // a straight resize to h x w, as the Hugging Face processors do for any size
        Tensor3 x = resize(convert_channels(img.pixels, c.channels), h, w, c.pre.interp);
        return (x - per_channel(c.pre.mean)) / per_channel(c.pre.std);
    }
    Config cc = c;
    const int side = std::max(h, w);
    cc.image_size = side;
    if (c.pre.resize > 0) cc.pre.resize = int(std::lround(double(c.pre.resize) * side / c.image_size));
    Tensor3 x = preprocess(img, cc);
    return h == w ? x : center_crop(x, h, w);
}

}  // namespace vit
