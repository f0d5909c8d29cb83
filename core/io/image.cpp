#include "core/io/image.h"

// stb_image compiled here, privately (static functions), for PNG and BMP only:
// its JPEG decoder has undefined behaviour on hostile Huffman tables
// (stb_image.h:1990) and its PSD/HDR/PIC/GIF/TGA/PNM paths are neither needed
// nor safe, so they are not even compiled. JPEG goes to libjpeg-turbo.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_ONLY_BMP
#define STBI_NO_STDIO
#define STBI_NO_LINEAR
#define STBI_NO_HDR
#define STBI_MAX_DIMENSIONS 16384
// stb copies 0 bytes from/to a null buffer (a PNG whose first IDAT chunk is
// empty: memcpy(NULL, p, 0), UB found by the fuzzer): its memcpy skips n == 0.
#include <cstring>
static inline void* vit_stbi_memcpy(void* d, const void* s, size_t n) { return n ? std::memcpy(d, s, n) : d; }
#define memcpy vit_stbi_memcpy
#include <stb_image.h>
#undef memcpy
#pragma GCC diagnostic pop
#include <stb_image_write.h>

#include <csetjmp>
#include <cstdio>
#include <jpeglib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/io/io.h"

#include <xtensor/xbroadcast.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

namespace vit {

namespace {
// Checked on the header, before a pixel is decoded: a 24 MP camera photo fits,
// and decoding plus preprocessing stay within ~1 GB and ~2 s.
constexpr int64_t kMaxSide = 16384, kMaxPixels = 25'000'000;
constexpr int kMaxJpegScans = 64;  // progressive JPEGs have ~10; each scan is a pass over the image

const char* kFormats = "ViTScope reads PNG, JPEG and BMP images";

[[noreturn]] void too_large(const std::string& what, int64_t w, int64_t h, int64_t max_pixels) {
    throw FileError(what + ": image too large: " + std::to_string(w) + "x" + std::to_string(h) +
                    " (the limit is " + std::to_string(kMaxSide) + " per side and " +
                    std::to_string(max_pixels) + " pixels)");
}
void check_size(const std::string& what, int64_t w, int64_t h, int64_t max_pixels) {
    if (w <= 0 || h <= 0) throw FileError(what + ": image has no pixels (" + std::to_string(w) + " x " + std::to_string(h) + ")");
    if (w > kMaxSide || h > kMaxSide || w * h > max_pixels) too_large(what, w, h, max_pixels);
}

std::string stb_reason() {
    const char* r = stbi_failure_reason();
    return r && *r ? std::string(" (") + r + ")" : std::string();
}

enum class Format { Png, Jpeg, Bmp, Other };
Format sniff(const std::string& b, std::string& name) {
    auto starts = [&](const char* m, size_t n) { return b.size() >= n && std::memcmp(b.data(), m, n) == 0; };
    if (starts("\x89PNG\r\n\x1a\n", 8)) return Format::Png;
    if (starts("\xff\xd8\xff", 3)) return Format::Jpeg;
    if (starts("BM", 2)) return Format::Bmp;
    if (starts("GIF8", 4)) name = "GIF";
    else if (starts("8BPS", 4)) name = "PSD";
    else if (starts("#?RADIANCE", 10) || starts("#?RGBE", 6)) name = "HDR";
    else if (starts("\x53\x80\xf6\x34", 4)) name = "PIC";
    else if (starts("P5", 2) || starts("P6", 2)) name = "PNM";
    else if (starts("RIFF", 4) && b.size() >= 12 && b.compare(8, 4, "WEBP") == 0) name = "WebP";
    else if (starts("II*\0", 4) || starts("MM\0*", 4)) name = "TIFF";
    return Format::Other;
}

// libjpeg-turbo with its errors and warnings turned into a message (via
// longjmp, so no C++ object lives across it) and a cap on progressive scans.
struct JpegErr {
    jpeg_error_mgr pub;
    jpeg_progress_mgr progress;
    std::jmp_buf jump;
    char msg[JMSG_LENGTH_MAX + 64];
};
void jpeg_fail(j_common_ptr ci) {
    auto* e = reinterpret_cast<JpegErr*>(ci->err);
    (*ci->err->format_message)(ci, e->msg);
    std::longjmp(e->jump, 1);
}
void jpeg_message(j_common_ptr ci, int level) {
    if (level < 0) jpeg_fail(ci);  // a warning: corrupt data, premature end of file
}
void jpeg_progress(j_common_ptr ci) {
    auto* d = reinterpret_cast<j_decompress_ptr>(ci);
    if (d->input_scan_number > kMaxJpegScans) {
        auto* e = reinterpret_cast<JpegErr*>(ci->err);
        std::snprintf(e->msg, sizeof e->msg, "more than %d progressive scans", kMaxJpegScans);
        std::longjmp(e->jump, 1);
    }
}
struct JpegOut {
    unsigned char* px = nullptr;  // malloc'd, interleaved
    int w = 0, h = 0, n = 0, file_n = 0;
    bool too_large = false, cmyk = false;
};
// Returns false with e->msg set on any error or warning.
bool decode_jpeg(const unsigned char* data, size_t len, JpegOut* o, JpegErr* e, int64_t max_pixels) {
    jpeg_decompress_struct ci;
    ci.err = jpeg_std_error(&e->pub);
    e->pub.error_exit = jpeg_fail;
    e->pub.emit_message = jpeg_message;
    e->msg[0] = 0;
    if (setjmp(e->jump)) {
        jpeg_destroy_decompress(&ci);
        std::free(o->px);
        o->px = nullptr;
        return false;
    }
    jpeg_create_decompress(&ci);
    e->progress.progress_monitor = jpeg_progress;
    ci.progress = &e->progress;
    jpeg_mem_src(&ci, data, static_cast<unsigned long>(len));
    jpeg_read_header(&ci, TRUE);
    o->w = int(ci.image_width); o->h = int(ci.image_height); o->file_n = ci.num_components;
    if (int64_t(ci.image_width) > kMaxSide || int64_t(ci.image_height) > kMaxSide ||
        int64_t(ci.image_width) * ci.image_height > max_pixels || ci.image_width == 0 || ci.image_height == 0) {
        o->too_large = true;
        jpeg_destroy_decompress(&ci);
        return false;
    }
    if (ci.jpeg_color_space == JCS_CMYK || ci.jpeg_color_space == JCS_YCCK) {
        o->cmyk = true;
        jpeg_destroy_decompress(&ci);
        return false;
    }
    ci.out_color_space = ci.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
    ci.mem->max_memory_to_use = size_t(1) << 30;
    jpeg_start_decompress(&ci);
    o->n = ci.output_components;
    size_t stride = size_t(ci.output_width) * ci.output_components;
    o->px = static_cast<unsigned char*>(std::malloc(stride * ci.output_height));
    if (!o->px) {
        std::snprintf(e->msg, sizeof e->msg, "out of memory");
        jpeg_destroy_decompress(&ci);
        return false;
    }
    while (ci.output_scanline < ci.output_height) {
        JSAMPROW row = o->px + stride * ci.output_scanline;
        jpeg_read_scanlines(&ci, &row, 1);
    }
    jpeg_finish_decompress(&ci);
    jpeg_destroy_decompress(&ci);
    return true;
}
}  // namespace

Image decode_image(const std::string& bytes, const std::string& what, int64_t max_pixels) {
    if (max_pixels <= 0 || max_pixels > kMaxPixels) max_pixels = kMaxPixels;
    if (bytes.empty()) throw FileError(what + ": file is empty");
    if (bytes.size() > size_t(INT32_MAX)) throw FileError(what + ": file is too large");
    std::string other;
    Format fmt = sniff(bytes, other);
    if (fmt == Format::Other)
        throw FileError(what + (other.empty() ? ": not an image (unrecognised format): " : ": " + other + " is not supported: ") +
                        kFormats);
    auto* b = reinterpret_cast<const stbi_uc*>(bytes.data());
    int len = int(bytes.size());
    Image img;
    auto fill = [&](int w, int h, int n, auto* px, float scale) {
        int keep = (n == 1 || n == 2) ? 1 : 3;  // drop alpha
        img.width = w; img.height = h; img.channels = keep;
        img.pixels = Tensor3::from_shape({size_t(keep), size_t(h), size_t(w)});
        float* dst = img.pixels.data();
        auto plane = size_t(w) * h;
        for (size_t i = 0; i < plane; ++i)
            for (int c = 0; c < keep; ++c) dst[c * plane + i] = px[i * n + c] / scale;
    };
    if (fmt == Format::Jpeg) {
        JpegOut o;
        JpegErr e;
        if (!decode_jpeg(b, bytes.size(), &o, &e, max_pixels)) {
            if (o.too_large) { check_size(what, o.w, o.h, max_pixels); too_large(what, o.w, o.h, max_pixels); }
            if (o.cmyk) throw FileError(what + ": CMYK JPEG is not supported (save it as RGB)");
            throw FileError(what + ": corrupt or truncated JPEG (" + e.msg + ")");
        }
        img.file_channels = o.file_n;
        try { fill(o.w, o.h, o.n, o.px, 255.f); } catch (...) { std::free(o.px); throw; }
        std::free(o.px);
        return img;
    }
    int w = 0, h = 0, n = 0;
    if (!stbi_info_from_memory(b, len, &w, &h, &n)) {
        // stb refuses over STBI_MAX_DIMENSIONS before we can see the size: read it from the header.
        if (fmt == Format::Png && bytes.size() >= 24) {
            auto be = [&](size_t o) { return int64_t(uint8_t(bytes[o])) << 24 | uint8_t(bytes[o + 1]) << 16 | uint8_t(bytes[o + 2]) << 8 | uint8_t(bytes[o + 3]); };
            int64_t pw = be(16), ph = be(20);
            if (pw > kMaxSide || ph > kMaxSide) too_large(what, pw, ph, max_pixels);
        } else if (fmt == Format::Bmp && bytes.size() >= 26) {
            int32_t bw, bh;
            std::memcpy(&bw, bytes.data() + 18, 4);
            std::memcpy(&bh, bytes.data() + 22, 4);
            int64_t aw = std::abs(int64_t(bw)), ah = std::abs(int64_t(bh));
            if (aw > kMaxSide || ah > kMaxSide) too_large(what, aw, ah, max_pixels);
        }
        throw FileError(what + ": corrupt or truncated image" + stb_reason());
    }
    // stb reports a top-down BMP's height negative (and would abs() INT_MIN itself).
    check_size(what, w, fmt == Format::Bmp ? std::abs(int64_t(h)) : int64_t(h), max_pixels);
    img.file_channels = n;
    img.sixteen_bit = stbi_is_16_bit_from_memory(b, len);
    int ww, hh, nn;
    if (img.sixteen_bit) {
        stbi_us* px = stbi_load_16_from_memory(b, len, &ww, &hh, &nn, 0);
        if (!px) throw FileError(what + ": corrupt or truncated image" + stb_reason());
        try { fill(ww, hh, nn, px, 65535.f); } catch (...) { stbi_image_free(px); throw; }
        stbi_image_free(px);
    } else {
        stbi_uc* px = stbi_load_from_memory(b, len, &ww, &hh, &nn, 0);
        if (!px) throw FileError(what + ": corrupt or truncated image" + stb_reason());
        try { fill(ww, hh, nn, px, 255.f); } catch (...) { stbi_image_free(px); throw; }
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
