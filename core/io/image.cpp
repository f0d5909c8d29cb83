#include "core/io/image.h"

// Decoders, each bounded before it allocates:
// - PNG through libpng, row by row, so a PNG over the kept-pixel limit is
//   averaged down while it is read (an interlaced PNG is read whole first,
//   within kMaxWholeBytes); a large non-interlaced one of 8/16-bit samples has
//   its image data inflated and unfiltered here (png_idat_rows), libpng reading
//   the header;
// - JPEG through libjpeg-turbo, which scales in the DCT (M/8) when the image is
//   over the limit, with a cap on progressive scans and on its memory;
// - BMP through stb_image built with its BMP decoder only (read whole, within
//   kMaxWholeBytes, then averaged down if needed). stb's JPEG decoder has
//   undefined behaviour on hostile Huffman tables (stb_image.h:1990) and its
//   PSD/HDR/PIC/GIF/TGA/PNM paths are neither needed nor safe, so none of them
//   is compiled: those formats are refused by name;
// - WebP through libwebp and a GIF's first frame through a decoder of our own
//   (core/io/image_web.cpp), within kMaxSide and kMaxWholeBytes, then averaged down.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_BMP
#define STBI_NO_STDIO
#define STBI_NO_LINEAR
#define STBI_NO_HDR
#define STBI_MAX_DIMENSIONS 16384
#include <cstring>
#include <stb_image.h>
#pragma GCC diagnostic pop
#include <stb_image_write.h>

#include <csetjmp>
#include <cstdio>
#include <jpeglib.h>
#include <jerror.h>
#include <png.h>
#include <zlib.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <climits>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "core/io/io.h"
#include "core/io/image_web.h"

#include <xtensor/xbroadcast.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "16-bit PNG samples are swapped to little-endian here"
#endif

namespace vit {

namespace {
// Checked on the header, before a pixel is decoded.
constexpr int64_t kMaxSide = 16384;
// BMP and interlaced PNG are decoded whole before they are scaled: at most this many bytes of samples.
constexpr int64_t kMaxWholeBytes = int64_t(256) << 20;
constexpr long kJpegMaxMemory = 384L << 20;  // libjpeg's own buffers (a progressive JPEG keeps every coefficient)
constexpr int kMaxJpegScans = 64;  // progressive JPEGs have ~10; each scan is a pass over the image

const char* kFormats = "ViTScope reads PNG, JPEG, BMP, WebP and GIF (its first frame) images";

[[noreturn]] void too_large(const std::string& what, int64_t w, int64_t h) {
    throw FileError(what + ": image too large: " + std::to_string(w) + "x" + std::to_string(h) + " (the limit is " +
                    std::to_string(kMaxSide) + " pixels per side)");
}
void check_size(const std::string& what, int64_t w, int64_t h) {
    if (w <= 0 || h <= 0) throw FileError(what + ": image has no pixels (" + std::to_string(w) + " x " + std::to_string(h) + ")");
    if (w > kMaxSide || h > kMaxSide) too_large(what, w, h);
}
[[noreturn]] void too_large_whole(const std::string& what, const char* kind, int64_t w, int64_t h, int64_t bytes) {
    throw FileError(what + ": " + kind + " of " + std::to_string(w) + "x" + std::to_string(h) + " is decoded whole before it " +
                    "is scaled down, and its " + std::to_string(bytes >> 20) + " MB of samples are over the " +
                    std::to_string(kMaxWholeBytes >> 20) + " MB limit (a PNG saved non-interlaced, or a JPEG, of this "
                    "size is scaled down while it is read)");
}

// The smallest integer k with ceil(w/k) * ceil(h/k) <= keep.
int shrink_factor(int64_t w, int64_t h, int64_t keep) {
    int k = 1;
    while (((w + k - 1) / k) * ((h + k - 1) / k) > keep) ++k;
    return k;
}

// Rows of interleaved samples in (n per pixel, the first `keep` of them used);
// a (keep, ceil(h/k), ceil(w/k)) float image out, each pixel the mean of its k x k
// block of the file's pixels (blocks at the right and bottom edges hold fewer and
// are averaged over what they hold). k = 1 stores sample / scale, as before any scaling.
class Shrinker {
public:
    Shrinker(int w, int h, int n, int keep, int k, float scale)
        : w_(w), h_(h), n_(n), keep_(keep), k_(k), ow_((w + k - 1) / k), oh_((h + k - 1) / k), scale_(scale) {
        out_ = Tensor3::from_shape({size_t(keep), size_t(oh_), size_t(ow_)});
        if (k > 1) vacc_.assign(size_t(keep) * size_t(w), 0);
    }
    // `px`: interleaved samples of one row, host order (uint8_t, uint16_t) or, big_endian, 16-bit
    // samples as PNG stores them (swapped here, not by a separate pass of libpng's).
    template <class T, bool big_endian = false>
    void row(const T* px) {
        if (y_ >= h_) return;
        const size_t plane = size_t(oh_) * size_t(ow_), n = size_t(n_);
        auto at = [](const T* p) -> uint32_t {
            if constexpr (big_endian) {
                uint16_t b;
                std::memcpy(&b, p, 2);
                return __builtin_bswap16(b);
            } else {
                return uint32_t(*p);
            }
        };
        if (k_ == 1) {
            float* d = out_.data() + size_t(y_) * size_t(w_);
            for (int c = 0; c < keep_; ++c, d += plane) {
                const T* p = px + c;
                for (int x = 0; x < w_; ++x, p += n) d[x] = float(at(p)) / scale_;
            }
        } else {
            // Integer sums (exact, as the double sums they replace were): each row added sample by sample
            // to its column's sum over the block's rows (one pass in memory order that the compiler
            // vectorizes: k <= 16384 rows of 16-bit samples stay under 2^32), and each block's columns
            // summed when its last row is in (a per-block inner loop took a sixth of a 16384^2 PNG's time).
            const size_t W = size_t(w_), keep = size_t(keep_);
            uint32_t* v = vacc_.data();
            if (n == keep) {
                for (size_t j = 0, m = W * keep; j < m; ++j) v[j] += at(px + j);
            } else {
                for (size_t x = 0; x < W; ++x)
                    for (size_t c = 0; c < keep; ++c) v[x * keep + c] += at(px + x * n + c);
            }
            ++rows_in_block_;
            if (rows_in_block_ == k_ || y_ + 1 == h_) {
                const int oy = y_ / k_;
                for (int c = 0; c < keep_; ++c) {
                    float* d = out_.data() + size_t(c) * plane + size_t(oy) * size_t(ow_);
                    for (int ox = 0; ox < ow_; ++ox) {
                        const int x0 = ox * k_, cols = std::min(k_, w_ - x0);
                        uint64_t a = 0;
                        for (int x = x0; x < x0 + cols; ++x) a += v[size_t(x) * keep + size_t(c)];
                        d[ox] = float(double(a) / (double(rows_in_block_) * cols * scale_));
                    }
                }
                std::fill(vacc_.begin(), vacc_.end(), 0u);
                rows_in_block_ = 0;
            }
        }
        ++y_;
    }
    bool complete() const { return y_ == h_; }
    Tensor3 take() { return std::move(out_); }
    int out_w() const { return ow_; }
    int out_h() const { return oh_; }

private:
    int w_, h_, n_, keep_, k_, ow_, oh_;
    float scale_;
    int y_ = 0, rows_in_block_ = 0;
    Tensor3 out_;
    std::vector<uint32_t> vacc_;  // k > 1: each column's sum over the block's rows so far (w x keep, interleaved)
};

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

std::string dims(int64_t w, int64_t h) { return std::to_string(w) + "x" + std::to_string(h); }

// ------------------------------------------------------------------ JPEG

// libjpeg-turbo with its errors and warnings turned into a message (via
// longjmp, so no C++ object lives across it) and a cap on progressive scans.
// Each method that calls libjpeg sets its own jump target and returns false
// with msg set on any error or warning.
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
class Jpeg {
public:
    Jpeg(const unsigned char* data, size_t len) : data_(data), len_(len) {
        std::memset(&ci_, 0, sizeof ci_);
        ci_.err = jpeg_std_error(&err_.pub);
        err_.pub.error_exit = jpeg_fail;
        err_.pub.emit_message = jpeg_message;
        err_.msg[0] = 0;
    }
    ~Jpeg() { if (created_) jpeg_destroy_decompress(&ci_); }
    Jpeg(const Jpeg&) = delete;
    Jpeg& operator=(const Jpeg&) = delete;
    const char* msg() const { return err_.msg; }
    // libjpeg's own buffers outgrew kJpegMaxMemory (a large progressive JPEG keeps every coefficient).
    bool out_of_memory() const { return err_.pub.msg_code == JERR_NO_BACKING_STORE || err_.pub.msg_code == JERR_OUT_OF_MEMORY; }
    bool header() {
        if (setjmp(err_.jump)) return false;
        jpeg_create_decompress(&ci_);
        created_ = true;
        err_.progress.progress_monitor = jpeg_progress;
        ci_.progress = &err_.progress;
        jpeg_mem_src(&ci_, data_, static_cast<unsigned long>(len_));
        jpeg_read_header(&ci_, TRUE);
        return true;
    }
    int width() const { return int(std::min<JDIMENSION>(ci_.image_width, INT_MAX)); }
    int height() const { return int(std::min<JDIMENSION>(ci_.image_height, INT_MAX)); }
    int components() const { return ci_.num_components; }
    bool cmyk() const { return ci_.jpeg_color_space == JCS_CMYK || ci_.jpeg_color_space == JCS_YCCK; }
    // Decoding at scale/8 (libjpeg-turbo's DCT scaling).
    bool start(int scale) {
        if (setjmp(err_.jump)) return false;
        ci_.out_color_space = ci_.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
        ci_.scale_num = unsigned(scale);
        ci_.scale_denom = 8;
        ci_.mem->max_memory_to_use = kJpegMaxMemory;
        jpeg_start_decompress(&ci_);
        return true;
    }
    int out_w() const { return int(ci_.output_width); }
    int out_h() const { return int(ci_.output_height); }
    int out_n() const { return ci_.output_components; }
    bool rows(unsigned char* row, Shrinker* s) {
        if (setjmp(err_.jump)) return false;
        while (ci_.output_scanline < ci_.output_height) {
            JSAMPROW r = row;
            jpeg_read_scanlines(&ci_, &r, 1);
            s->row(row);
        }
        jpeg_finish_decompress(&ci_);
        return true;
    }

private:
    const unsigned char* data_;
    size_t len_;
    jpeg_decompress_struct ci_;
    JpegErr err_;
    bool created_ = false;
};

// Rows handed to the shrinker in strips on a thread of its own while the decoder reads the next strip
// (double buffered): a 16384 x 16384 PNG's block sums no longer wait for its inflating, and the
// shrinker sees the rows in order, so the result is bit for bit the same.
class RowPipe {
public:
    RowPipe(Shrinker& s, size_t rowbytes, bool sixteen, int strip)
        : s_(s), rowbytes_(rowbytes), sixteen_(sixteen), strip_(strip) {
        for (auto& b : buf_) b.resize(rowbytes * size_t(strip) + 16);  // + 16: rows are read and written 8 bytes at a time
        worker_ = std::thread([this] { work(); });
    }
    ~RowPipe() {
        {
            std::lock_guard<std::mutex> l(mu_);
            quit_ = true;
        }
        cv_.notify_all();
        worker_.join();
    }
    RowPipe(const RowPipe&) = delete;
    RowPipe& operator=(const RowPipe&) = delete;
    // Where the decoder writes its next row.
    unsigned char* next_row() { return buf_[fill_].data() + size_t(rows_) * rowbytes_; }
    // That row is written: a full strip goes to the worker (once it is done with the other buffer).
    void row_done() {
        if (++rows_ == strip_) submit();
    }
    // The last strip handed over, and every row shrunk.
    void finish() {
        if (rows_) submit();
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return !busy_; });
    }

private:
    void submit() {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return !busy_; });
        work_buf_ = fill_;
        work_rows_ = rows_;
        busy_ = true;
        l.unlock();
        cv_.notify_all();
        fill_ ^= 1;
        rows_ = 0;
    }
    void work() {
        std::unique_lock<std::mutex> l(mu_);
        for (;;) {
            cv_.wait(l, [&] { return busy_ || quit_; });
            if (!busy_) return;
            const unsigned char* b = buf_[work_buf_].data();
            const int n = work_rows_;
            l.unlock();
            for (int r = 0; r < n; ++r) {
                const unsigned char* row = b + size_t(r) * rowbytes_;
                if (sixteen_) s_.row<uint16_t, true>(reinterpret_cast<const uint16_t*>(row));
                else s_.row(row);
            }
            l.lock();
            busy_ = false;
            cv_.notify_all();
        }
    }
    Shrinker& s_;
    const size_t rowbytes_;
    const bool sixteen_;
    const int strip_;
    std::vector<unsigned char> buf_[2];
    int fill_ = 0, rows_ = 0, work_buf_ = 0, work_rows_ = 0;
    bool busy_ = false, quit_ = false;
    std::mutex mu_;
    std::condition_variable cv_;
    std::thread worker_;
};

// ------------------------------------------------------------------ PNG

struct PngSrc { const unsigned char* p; size_t n, at; char msg[256]; };
void png_read_mem(png_structp png, png_bytep out, size_t len) {
    auto* in = static_cast<PngSrc*>(png_get_io_ptr(png));
    if (len > in->n - in->at) png_error(png, "the file ends early (truncated)");
    std::memcpy(out, in->p + in->at, len);
    in->at += len;
}
void png_fail(png_structp png, png_const_charp m) {
    auto* in = static_cast<PngSrc*>(png_get_error_ptr(png));
    std::snprintf(in->msg, sizeof in->msg, "%s", m ? m : "error");
    png_longjmp(png, 1);
}
void png_warn(png_structp, png_const_charp) {}  // ancillary chunks only (a bad text chunk): the pixels are unaffected

// libpng; each method that calls it sets its own jump target (png_fail longjmps
// there) and returns false with msg() set.
class Png {
public:
    Png(const unsigned char* data, size_t len) {
        src_ = PngSrc{data, len, 0, {0}};
        png_ = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src_, png_fail, png_warn);
        if (!png_) throw std::bad_alloc();
        info_ = png_create_info_struct(png_);
        if (!info_) { png_destroy_read_struct(&png_, nullptr, nullptr); throw std::bad_alloc(); }
        png_set_read_fn(png_, &src_, png_read_mem);
    }
    ~Png() { png_destroy_read_struct(&png_, &info_, nullptr); }
    Png(const Png&) = delete;
    Png& operator=(const Png&) = delete;
    const char* msg() const { return src_.msg; }
    bool header() {
        if (setjmp(png_jmpbuf(png_))) return false;
        png_set_user_limits(png_, uint32_t(kMaxSide), uint32_t(kMaxSide));
        // Text, ICC profiles, suggested palettes and Exif never change a sample read here: skipped
        // unread, so neither their size nor their number (libpng keeps 1,000 at most) refuses the
        // pixels. What is still read whole (pCAL, sCAL: never inflated) and every chunk's declared
        // length are bounded by the file itself, 8 MB at least.
        png_set_chunk_malloc_max(png_, std::max(size_t(8) << 20, src_.n));
        static const png_byte skip[] = "tEXt\0zTXt\0iTXt\0iCCP\0sPLT\0eXIf";
        png_set_keep_unknown_chunks(png_, PNG_HANDLE_CHUNK_NEVER, skip, int(sizeof skip / 5));
        png_set_benign_errors(png_, 0);  // too much or too little image data is an error, as stb_image had it
#ifdef PNG_IGNORE_ADLER32
        // The zlib stream's Adler-32 is not computed: every chunk's CRC is still checked, and the
        // checksum cost a tenth of a 16384 x 16384 PNG's decoding (1.6 GB inflated).
        png_set_option(png_, PNG_IGNORE_ADLER32, PNG_OPTION_ON);
#endif
        png_read_info(png_, info_);
        return true;
    }
    int width() const { return int(png_get_image_width(png_, info_)); }
    int height() const { return int(png_get_image_height(png_, info_)); }
    int depth() const { return png_get_bit_depth(png_, info_); }
    bool interlaced() const { return png_get_interlace_type(png_, info_) != PNG_INTERLACE_NONE; }
    bool palette() const { return png_get_color_type(png_, info_) == PNG_COLOR_TYPE_PALETTE; }
    // Palette to RGB, 1/2/4-bit gray to 8 bits (scaled to 0..255 as PIL does), 16-bit to the host's byte order.
    bool start() {
        if (setjmp(png_jmpbuf(png_))) return false;
        const int colour = png_get_color_type(png_, info_);
        if (colour == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png_);
        if (colour == PNG_COLOR_TYPE_GRAY && depth() < 8) png_set_expand_gray_1_2_4_to_8(png_);
        // 16-bit samples stay big-endian: the shrinker reads them so (no separate swapping pass).
        png_set_interlace_handling(png_);
        png_read_update_info(png_, info_);
        return true;
    }
    int channels() const { return png_get_channels(png_, info_); }
    size_t rowbytes() const { return png_get_rowbytes(png_, info_); }
    // Row by row into the pipe's strips (non-interlaced, large images).
    bool rows(RowPipe* pipe) {
        if (setjmp(png_jmpbuf(png_))) return false;
        for (int y = 0, h = height(); y < h; ++y) {
            png_read_row(png_, pipe->next_row(), nullptr);
            pipe->row_done();
        }
        png_read_end(png_, nullptr);
        return true;
    }
    // Row by row into the shrinker (non-interlaced).
    bool rows(unsigned char* row, Shrinker* s, bool sixteen) {
        if (setjmp(png_jmpbuf(png_))) return false;
        for (int y = 0, h = height(); y < h; ++y) {
            png_read_row(png_, row, nullptr);
            if (sixteen) s->row<uint16_t, true>(reinterpret_cast<const uint16_t*>(row));
            else s->row(row);
        }
        png_read_end(png_, nullptr);
        return true;
    }
    // The whole image (interlaced: every pass updates every row).
    bool image(unsigned char** rows) {
        if (setjmp(png_jmpbuf(png_))) return false;
        png_read_image(png_, rows);
        png_read_end(png_, nullptr);
        return true;
    }

private:
    PngSrc src_;
    png_structp png_ = nullptr;
    png_infop info_ = nullptr;
};

// ------------------------------------------------------------------ PNG, large: IDAT read here
// A large non-interlaced PNG of 8- or 16-bit samples (no palette) is inflated and unfiltered here, row by
// row into the RowPipe, not by libpng: libpng's Paeth unfiltering for 6- and 8-byte pixels (16-bit RGB,
// RGBA) is a byte-at-a-time loop that took 70% of a filtered 16384 x 16384 16-bit PNG's 4.5 s; here each
// pixel is one step of SSE2 (Paeth, Average), SWAR (Sub) or 16 bytes at a time (Up). libpng has read and
// checked everything up to the first IDAT (signature, IHDR, CRCs); each IDAT's CRC is checked here. The
// samples are those libpng gives for these types with no transform asked for: bit for bit the same pixels.

uint32_t be32(const unsigned char* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

// One row of `n` bytes (pixels of bpp <= 8 bytes) unfiltered from `raw` into `out`, `up` the row above
// unfiltered (zeros for the first). Each pixel is read and written as 8 bytes (a 6-byte memcpy through the
// stack stalled every pixel on store forwarding): `raw`, `up` and `out` have 8 bytes after the row that
// may be read, and `out` 8 that may be written. Returns false on an unknown filter type.
template <int BPP>
bool unfilter_px(int type, const unsigned char* raw, const unsigned char* up, unsigned char* out, size_t n) {
    static_assert(BPP >= 1 && BPP <= 8, "pixels of 1 to 8 bytes");
    switch (type) {
        case 0:
            std::memcpy(out, raw, n);
            return true;
        case 1: {  // Sub: bytewise add to the pixel on the left, 8 bytes in a word (SWAR)
            uint64_t a = 0;  // bytes past the pixel: garbage, written over by the next pixel
            for (size_t i = 0; i < n; i += BPP) {
                uint64_t x;
                std::memcpy(&x, raw + i, 8);
                const uint64_t h = 0x8080808080808080ull;
                a = ((x & ~h) + (a & ~h)) ^ ((x ^ a) & h);
                std::memcpy(out + i, &a, 8);
            }
            return true;
        }
        case 2: {  // Up
            size_t i = 0;
#if defined(__SSE2__)
            for (; i + 16 <= n; i += 16)
                _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                                 _mm_add_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(raw + i)),
                                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(up + i))));
#endif
            for (; i < n; ++i) out[i] = static_cast<unsigned char>(raw[i] + up[i]);
            return true;
        }
        case 3:  // Average
        case 4: {  // Paeth
#if defined(__SSE2__)
            const __m128i zero = _mm_setzero_si128(), low = _mm_set1_epi16(0xFF);
            __m128i a = zero, c = zero;  // the pixel on the left and the one above it, 16 bits a byte
            auto abs16 = [&](__m128i v) { return _mm_max_epi16(v, _mm_sub_epi16(zero, v)); };
            for (size_t i = 0; i < n; i += BPP) {
                // lanes past the pixel: garbage, never mixed into the pixel's (lanewise) and written over
                const __m128i x = _mm_unpacklo_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(raw + i)), zero);
                const __m128i b = _mm_unpacklo_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(up + i)), zero);
                __m128i pred;
                if (type == 3) {
                    pred = _mm_srli_epi16(_mm_add_epi16(a, b), 1);
                } else {
                    // p = a + b - c; a if |p-a| <= |p-b| and |p-a| <= |p-c|, else b if |p-b| <= |p-c|, else c
                    const __m128i bc = _mm_sub_epi16(b, c), ac = _mm_sub_epi16(a, c);
                    const __m128i pa = abs16(bc), pb = abs16(ac), pc = abs16(_mm_add_epi16(ac, bc));
                    const __m128i not_a = _mm_or_si128(_mm_cmpgt_epi16(pa, pb), _mm_cmpgt_epi16(pa, pc));
                    const __m128i not_b = _mm_cmpgt_epi16(pb, pc);
                    const __m128i b_or_c = _mm_or_si128(_mm_and_si128(not_b, c), _mm_andnot_si128(not_b, b));
                    pred = _mm_or_si128(_mm_and_si128(not_a, b_or_c), _mm_andnot_si128(not_a, a));
                }
                a = _mm_and_si128(_mm_add_epi16(pred, x), low);
                c = b;
                _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), _mm_packus_epi16(a, zero));
            }
#else
            for (size_t i = 0; i < n; ++i) {
                const int a = i >= BPP ? out[i - BPP] : 0, b = up[i], c = i >= BPP ? up[i - BPP] : 0;
                int pred;
                if (type == 3) {
                    pred = (a + b) >> 1;
                } else {
                    const int pa = std::abs(b - c), pb = std::abs(a - c), pc = std::abs(a + b - 2 * c);
                    pred = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
                }
                out[i] = static_cast<unsigned char>(raw[i] + pred);
            }
#endif
            return true;
        }
        default:
            return false;
    }
}
bool unfilter_row(int type, const unsigned char* raw, const unsigned char* up, unsigned char* out, size_t n, int bpp) {
    switch (bpp) {
        case 1: return unfilter_px<1>(type, raw, up, out, n);
        case 2: return unfilter_px<2>(type, raw, up, out, n);
        case 3: return unfilter_px<3>(type, raw, up, out, n);
        case 4: return unfilter_px<4>(type, raw, up, out, n);
        case 6: return unfilter_px<6>(type, raw, up, out, n);
        case 8: return unfilter_px<8>(type, raw, up, out, n);
        default: return false;
    }
}

// The image data of a PNG (non-interlaced, `channels` samples of `depth` 8 or 16 bits) inflated and
// unfiltered into the pipe's rows. Returns "" or what is wrong with the file.
std::string png_idat_rows(const unsigned char* b, size_t len, int w, int h, int channels, int depth, RowPipe& pipe) {
    const int bpp = channels * depth / 8;
    const size_t rowbytes = size_t(w) * size_t(bpp);
    std::vector<unsigned char> raw(rowbytes + 1 + 16), zeros(rowbytes + 16, 0), extra(64);  // + 16: see unfilter_px
    z_stream zs{};
    if (inflateInit(&zs) != Z_OK) throw std::bad_alloc();
    struct End { z_stream* z; ~End() { inflateEnd(z); } } end{&zs};
    inflateValidate(&zs, 0);  // no Adler-32 (as libpng was told, PNG_IGNORE_ADLER32): every IDAT's CRC is checked
    const unsigned char* up = zeros.data();
    size_t fill = 0;  // bytes of the current row (its filter byte first) inflated so far
    int y = 0;
    bool stream_end = false, seen_idat = false, after_idat = false;
    size_t at = 8;
    while (true) {
        if (at + 12 > len) return "the file ends early (truncated)";
        const uint32_t n = be32(b + at);
        const unsigned char* type = b + at + 4;
        if (n > 0x7FFFFFFFu || len - at - 12 < n) return "the file ends early (truncated)";
        const unsigned char* data = b + at + 8;
        if (std::memcmp(type, "IDAT", 4) == 0) {
            if (after_idat) return "IDAT chunks are not consecutive";
            seen_idat = true;
            const uLong crc = crc32(crc32(0, type, 4), data, uInt(n));
            if (crc != be32(data + n)) return "IDAT: CRC error";
            zs.next_in = const_cast<Bytef*>(data);
            zs.avail_in = n;
            while (zs.avail_in > 0) {
                if (stream_end) return "extra compressed data after the image";
                if (y == h) {  // every row read: only the end of the stream may follow
                    zs.next_out = extra.data();
                    zs.avail_out = uInt(extra.size());
                    const int r = inflate(&zs, Z_NO_FLUSH);
                    if (zs.avail_out != extra.size()) return "too much image data";
                    if (r == Z_STREAM_END) stream_end = true;
                    else if (r != Z_OK) return zs.msg ? zs.msg : "corrupt compressed data";
                    continue;
                }
                zs.next_out = raw.data() + fill;
                zs.avail_out = uInt(rowbytes + 1 - fill);
                const int r = inflate(&zs, Z_NO_FLUSH);
                fill = rowbytes + 1 - zs.avail_out;
                if (fill == rowbytes + 1) {
                    unsigned char* out = pipe.next_row();
                    if (!unfilter_row(raw[0], raw.data() + 1, up, out, rowbytes, bpp)) return "bad adaptive filter value";
                    up = out;  // read again for the next row: the pipe hands a strip over but never reuses it before the next
                    pipe.row_done();
                    fill = 0;
                    ++y;
                }
                if (r == Z_STREAM_END) {
                    stream_end = true;
                    if (y < h) return "not enough image data";
                } else if (r != Z_OK && r != Z_BUF_ERROR) {
                    return zs.msg ? zs.msg : "corrupt compressed data";
                }
            }
        } else if (seen_idat) {
            after_idat = true;
            if (std::memcmp(type, "IEND", 4) == 0) break;
        }
        at += 12 + size_t(n);
    }
    if (y < h || !stream_end) return "not enough image data";
    return "";
}

int keep_of(int n) { return (n == 1 || n == 2) ? 1 : 3; }  // drop alpha

std::string shrunk_by(int k) { return std::to_string(k) + "x" + std::to_string(k) + " box average"; }

// WebP and GIF (core/io/image_web.cpp): decoded whole within the same limits, then scaled down as a BMP is.
Image decode_web_format(const std::string& bytes, const std::string& what, int64_t keep_px) {
    try {
        detail::Decoded8 d = detail::is_webp(bytes) ? detail::decode_webp(bytes, what, kMaxSide, kMaxWholeBytes)
                                                    : detail::decode_gif_first_frame(bytes, what, kMaxSide, kMaxWholeBytes);
        Image img;
        img.file_channels = d.file_channels;
        img.note = d.note;
        const int k = shrink_factor(d.w, d.h, keep_px), keep = keep_of(d.n);
        Shrinker s(d.w, d.h, d.n, keep, k, 255.f);
        for (int y = 0; y < d.h; ++y) s.row(d.px.data() + size_t(y) * size_t(d.w) * size_t(d.n));
        img.pixels = s.take();
        img.width = s.out_w(); img.height = s.out_h(); img.channels = keep;
        img.file_width = d.w; img.file_height = d.h;
        if (img.width != d.w || img.height != d.h) img.scaled_by = shrunk_by(k);
        return img;
    } catch (const std::bad_alloc&) {
        throw FileError(what + ": out of memory while decoding the image");
    }
}

}  // namespace

Image decode_image(const std::string& bytes, const std::string& what, int64_t max_pixels) {
    const int64_t keep_px = max_pixels > 0 && max_pixels < kKeepPixels ? max_pixels : kKeepPixels;
    if (bytes.empty()) throw FileError(what + ": file is empty");
    if (bytes.size() > size_t(INT32_MAX)) throw FileError(what + ": file is too large");
    std::string other;
    Format fmt = sniff(bytes, other);
    if (detail::is_webp(bytes) || detail::is_gif(bytes))
        return decode_web_format(bytes, what, keep_px);
    if (fmt == Format::Other)
        throw FileError(what + (other.empty() ? ": not an image (unrecognised format): " : ": " + other + " is not supported: ") +
                        kFormats);
    auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
    Image img;
    auto finish = [&](Shrinker& s, int fw, int fh, int keep, const std::string& how) {
        img.pixels = s.take();
        img.width = s.out_w(); img.height = s.out_h(); img.channels = keep;
        img.file_width = fw; img.file_height = fh;
        if (img.width != fw || img.height != fh) img.scaled_by = how;
    };
    try {
        if (fmt == Format::Jpeg) {
            Jpeg j(b, bytes.size());
            if (!j.header()) throw FileError(what + ": corrupt or truncated JPEG (" + j.msg() + ")");
            check_size(what, j.width(), j.height());
            if (j.cmyk()) throw FileError(what + ": CMYK JPEG is not supported (save it as RGB)");
            int scale = 8;  // the largest M/8 that fits
            auto scaled = [&](int m) { return ((int64_t(j.width()) * m + 7) / 8) * ((int64_t(j.height()) * m + 7) / 8); };
            while (scale > 1 && scaled(scale) > keep_px) --scale;
            auto jpeg_failed = [&] {
                if (j.out_of_memory())
                    return FileError(what + ": this " + dims(j.width(), j.height()) + " JPEG needs more than the " +
                                     std::to_string(kJpegMaxMemory >> 20) + " MB its decoder may use (a progressive JPEG "
                                     "keeps every coefficient while it is read; a baseline one of this size decodes)");
                return FileError(what + ": corrupt or truncated JPEG (" + j.msg() + ")");
            };
            if (!j.start(scale)) throw jpeg_failed();
            img.file_channels = j.components();
            Shrinker s(j.out_w(), j.out_h(), j.out_n(), keep_of(j.out_n()), 1, 255.f);
            std::vector<unsigned char> row(size_t(j.out_w()) * size_t(j.out_n()));
            if (!j.rows(row.data(), &s)) throw jpeg_failed();
            finish(s, j.width(), j.height(), keep_of(j.out_n()),
                   "the JPEG decoder's " + std::to_string(scale) + "/8 DCT scaling");
            return img;
        }
        if (fmt == Format::Png) {
            // The size from IHDR first: libpng's own limit check would not say what the size is.
            if (bytes.size() >= 24) {
                auto be = [&](size_t o) { return int64_t(b[o]) << 24 | int64_t(b[o + 1]) << 16 | int64_t(b[o + 2]) << 8 | int64_t(b[o + 3]); };
                if (be(16) > kMaxSide || be(20) > kMaxSide) too_large(what, be(16), be(20));
            }
            Png p(b, bytes.size());
            if (!p.header()) throw FileError(what + ": corrupt or truncated PNG (" + p.msg() + ")");
            check_size(what, p.width(), p.height());
            const bool sixteen = p.depth() == 16;
            if (!p.start()) throw FileError(what + ": corrupt or truncated PNG (" + p.msg() + ")");
            const int n = p.channels(), w = p.width(), h = p.height();
            const int k = shrink_factor(w, h, keep_px);
            img.file_channels = n;
            img.sixteen_bit = sixteen;
            Shrinker s(w, h, n, keep_of(n), k, sixteen ? 65535.f : 255.f);
            const bool large = !p.interlaced() && int64_t(w) * h >= (int64_t(4) << 20);
            if (large && (p.depth() == 8 || sixteen) && !p.palette()) {
                // large: inflated and unfiltered here (png_idat_rows), shrunk side by side
                std::string bad;
                {
                    RowPipe pipe(s, p.rowbytes(), sixteen, int(std::max<size_t>(1, (size_t(1) << 20) / p.rowbytes())));
                    bad = png_idat_rows(b, bytes.size(), w, h, n, p.depth(), pipe);
                    pipe.finish();
                }
                if (!bad.empty()) throw FileError(what + ": corrupt or truncated PNG (" + bad + ")");
            } else if (large) {  // palette or 1/2/4-bit samples: libpng's rows, shrunk side by side
                bool ok;
                {
                    RowPipe pipe(s, p.rowbytes(), sixteen, int(std::max<size_t>(1, (size_t(1) << 20) / p.rowbytes())));
                    ok = p.rows(&pipe);
                    pipe.finish();
                }
                if (!ok) throw FileError(what + ": corrupt or truncated PNG (" + p.msg() + ")");
            } else if (!p.interlaced()) {
                std::vector<unsigned char> row(p.rowbytes());
                if (!p.rows(row.data(), &s, sixteen)) throw FileError(what + ": corrupt or truncated PNG (" + p.msg() + ")");
            } else {
                const int64_t total = int64_t(p.rowbytes()) * h;
                if (total > kMaxWholeBytes) too_large_whole(what, "an interlaced PNG", w, h, total);
                std::vector<unsigned char> all(static_cast<size_t>(total));
                std::vector<unsigned char*> rows(static_cast<size_t>(h));
                for (int y = 0; y < h; ++y) rows[size_t(y)] = all.data() + size_t(y) * p.rowbytes();
                if (!p.image(rows.data())) throw FileError(what + ": corrupt or truncated PNG (" + p.msg() + ")");
                for (int y = 0; y < h; ++y) {
                    if (sixteen) s.row<uint16_t, true>(reinterpret_cast<const uint16_t*>(rows[size_t(y)]));
                    else s.row(rows[size_t(y)]);
                }
            }
            finish(s, w, h, keep_of(n), shrunk_by(k));
            return img;
        }
        // BMP
        const int len = int(bytes.size());
        int w = 0, h = 0, n = 0;
        if (!stbi_info_from_memory(b, len, &w, &h, &n)) {
            // stb refuses over STBI_MAX_DIMENSIONS before we can see the size: read it from the header.
            if (bytes.size() >= 26) {
                int32_t bw, bh;
                std::memcpy(&bw, bytes.data() + 18, 4);
                std::memcpy(&bh, bytes.data() + 22, 4);
                int64_t aw = std::abs(int64_t(bw)), ah = std::abs(int64_t(bh));
                if (aw > kMaxSide || ah > kMaxSide) too_large(what, aw, ah);
            }
            throw FileError(what + ": corrupt or truncated image" + stb_reason());
        }
        // stb reports a top-down BMP's height negative (and would abs() INT_MIN itself).
        const int64_t ah = std::abs(int64_t(h));
        check_size(what, w, ah);
        if (int64_t(w) * ah * std::max(n, 1) > kMaxWholeBytes) too_large_whole(what, "a BMP", w, ah, int64_t(w) * ah * n);
        int ww, hh, nn;
        stbi_uc* px = stbi_load_from_memory(b, len, &ww, &hh, &nn, 0);
        if (!px) throw FileError(what + ": corrupt or truncated image" + stb_reason());
        std::unique_ptr<stbi_uc, void (*)(void*)> own(px, stbi_image_free);
        img.file_channels = n;
        const int k = shrink_factor(ww, hh, keep_px);
        Shrinker s(ww, hh, nn, keep_of(nn), k, 255.f);
        for (int y = 0; y < hh; ++y) s.row(px + size_t(y) * size_t(ww) * size_t(nn));
        finish(s, ww, hh, keep_of(nn), shrunk_by(k));
        return img;
    } catch (const std::bad_alloc&) {
        throw FileError(what + ": out of memory while decoding the image");
    }
}

Image load_image(const std::string& path) {
    return name_out_of_memory(path, "reading the image", [&] { return decode_image(read_file(path, kMaxImageFileBytes), path); });
}

std::string image_formats() { return "PNG (8/16-bit), JPEG, BMP, WebP, GIF (first frame)"; }

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
