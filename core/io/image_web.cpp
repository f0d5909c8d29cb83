#include "core/io/image_web.h"

#include <webp/decode.h>
#include <webp/demux.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/io/io.h"

namespace vit::detail {

namespace {

std::string dims(int64_t w, int64_t h) { return std::to_string(w) + "x" + std::to_string(h); }

void check_dims(const std::string& what, const char* kind, int64_t w, int64_t h, int n, int64_t max_side, int64_t max_bytes) {
    if (w <= 0 || h <= 0) throw FileError(what + ": image has no pixels (" + std::to_string(w) + " x " + std::to_string(h) + ")");
    if (w > max_side || h > max_side)
        throw FileError(what + ": image too large: " + dims(w, h) + " (the limit is " + std::to_string(max_side) + " pixels per side)");
    const int64_t bytes = w * h * n;
    if (bytes > max_bytes)
        throw FileError(what + ": " + kind + " of " + dims(w, h) + " is decoded whole before it is scaled down, and its " +
                        std::to_string(bytes >> 20) + " MB of samples are over the " + std::to_string(max_bytes >> 20) +
                        " MB limit (a PNG saved non-interlaced, or a JPEG, of this size is scaled down while it is read)");
}

}  // namespace

bool is_webp(const std::string& b) { return b.size() >= 12 && b.compare(0, 4, "RIFF") == 0 && b.compare(8, 4, "WEBP") == 0; }
bool is_gif(const std::string& b) { return b.size() >= 6 && (b.compare(0, 6, "GIF87a") == 0 || b.compare(0, 6, "GIF89a") == 0); }

// ------------------------------------------------------------------ WebP (libwebp)

Decoded8 decode_webp(const std::string& bytes, const std::string& what, int64_t max_side, int64_t max_bytes) {
    const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
    WebPBitstreamFeatures f;
    if (WebPGetFeatures(data, bytes.size(), &f) != VP8_STATUS_OK) throw FileError(what + ": corrupt or truncated WebP");
    Decoded8 d;
    d.file_channels = f.has_alpha ? 4 : 3;
    if (!f.has_animation) {
        check_dims(what, "a WebP", f.width, f.height, 3, max_side, max_bytes);
        d.w = f.width; d.h = f.height; d.n = 3;
        d.px.resize(size_t(d.w) * size_t(d.h) * 3);
        // into our buffer: libwebp allocates nothing for the pixels (alpha, if any, is dropped as for PNG)
        if (!WebPDecodeRGBInto(data, bytes.size(), d.px.data(), d.px.size(), d.w * 3))
            throw FileError(what + ": corrupt or truncated WebP");
        return d;
    }
    // an animation: its first frame, as its canvas shows it (the decoder composes frames on an RGBA canvas)
    WebPData wd{data, bytes.size()};
    std::unique_ptr<WebPDemuxer, void (*)(WebPDemuxer*)> demux(WebPDemux(&wd), WebPDemuxDelete);
    if (!demux) throw FileError(what + ": corrupt or truncated animated WebP");
    const int64_t cw = WebPDemuxGetI(demux.get(), WEBP_FF_CANVAS_WIDTH), ch = WebPDemuxGetI(demux.get(), WEBP_FF_CANVAS_HEIGHT);
    const int frames = int(WebPDemuxGetI(demux.get(), WEBP_FF_FRAME_COUNT));
    // the canvas and the decoder's own copy of the previous one: twice the RGBA samples
    check_dims(what, "an animated WebP", cw, ch, 8, max_side, max_bytes);
    demux.reset();
    WebPAnimDecoderOptions o;
    if (!WebPAnimDecoderOptionsInit(&o)) throw FileError(what + ": this libwebp cannot decode animations");
    o.color_mode = MODE_RGBA;
    o.use_threads = 0;
    std::unique_ptr<WebPAnimDecoder, void (*)(WebPAnimDecoder*)> dec(WebPAnimDecoderNew(&wd, &o), WebPAnimDecoderDelete);
    if (!dec) throw FileError(what + ": corrupt or truncated animated WebP");
    uint8_t* buf = nullptr;
    int ts = 0;
    if (!WebPAnimDecoderHasMoreFrames(dec.get()) || !WebPAnimDecoderGetNext(dec.get(), &buf, &ts) || !buf)
        throw FileError(what + ": corrupt or truncated animated WebP (its first frame does not decode)");
    d.w = int(cw); d.h = int(ch); d.n = 4;
    d.file_channels = 4;
    d.px.assign(buf, buf + size_t(cw) * size_t(ch) * 4);
    d.note = "the first of " + std::to_string(frames) + " frames of an animated WebP";
    return d;
}

// ------------------------------------------------------------------ GIF (first frame)

namespace {

// The bytes of a GIF, read with every length checked.
class Reader {
public:
    Reader(const std::string& b, const std::string& what) : b_(b), what_(what) {}
    int u8() {
        if (i_ >= b_.size()) truncated();
        return static_cast<unsigned char>(b_[i_++]);
    }
    int u16() { const int lo = u8(); return lo | (u8() << 8); }
    void skip(size_t n) {
        if (n > b_.size() - i_) truncated();
        i_ += n;
    }
    const unsigned char* take(size_t n) {
        if (n > b_.size() - i_) truncated();
        const auto* p = reinterpret_cast<const unsigned char*>(b_.data() + i_);
        i_ += n;
        return p;
    }
    void skip_sub_blocks() {
        for (int n = u8(); n != 0; n = u8()) skip(size_t(n));
    }
    bool at_end() const { return i_ >= b_.size(); }
    [[noreturn]] void truncated() const { throw FileError(what_ + ": corrupt or truncated GIF (it ends inside a block)"); }
    [[noreturn]] void corrupt(const std::string& why) const { throw FileError(what_ + ": corrupt GIF (" + why + ")"); }

private:
    const std::string& b_;
    const std::string& what_;
    size_t i_ = 0;
};

// The LZW-coded indices of one image, written to `out` (w * h of them) row by row in file order.
// Returns the number of indices written (a short image leaves the rest at the background).
size_t lzw_decode(Reader& r, int min_code, unsigned char* out, size_t n_out) {
    if (min_code < 2 || min_code > 11) r.corrupt("LZW code size " + std::to_string(min_code));
    const int clear = 1 << min_code, eoi = clear + 1;
    static constexpr int kMax = 4096;
    std::vector<uint16_t> prefix(kMax);
    std::vector<unsigned char> suffix(kMax), stack(kMax + 1);
    for (int c = 0; c < clear; ++c) { prefix[size_t(c)] = 0xffff; suffix[size_t(c)] = static_cast<unsigned char>(c); }
    int size = min_code + 1, next = eoi + 1, old = -1;
    unsigned char first = 0;
    uint32_t bits = 0;
    int nbits = 0;
    size_t written = 0;
    bool done = false;
    for (int len = r.u8(); len != 0; len = r.u8()) {
        const unsigned char* p = r.take(size_t(len));
        for (int k = 0; k < len && !done; ++k) {
            bits |= uint32_t(p[k]) << nbits;
            nbits += 8;
            while (nbits >= size && !done) {
                const int code = int(bits & ((1u << size) - 1));
                bits >>= size;
                nbits -= size;
                if (code == clear) { size = min_code + 1; next = eoi + 1; old = -1; continue; }
                if (code == eoi) { done = true; break; }
                if (old < 0) {
                    if (code >= clear) r.corrupt("its first code is not a colour");
                    if (written < n_out) out[written++] = static_cast<unsigned char>(code);
                    old = code; first = static_cast<unsigned char>(code);
                    continue;
                }
                if (code > next || (code == next && next >= kMax)) r.corrupt("an LZW code past the table");
                int top = 0, c = code;
                if (code == next) { stack[size_t(top++)] = first; c = old; }
                while (c >= clear) {
                    if (top >= kMax) r.corrupt("an LZW chain longer than the table");
                    stack[size_t(top++)] = suffix[size_t(c)];
                    c = prefix[size_t(c)];
                }
                stack[size_t(top++)] = static_cast<unsigned char>(c);
                first = static_cast<unsigned char>(c);
                while (top > 0 && written < n_out) out[written++] = stack[size_t(--top)];
                if (next < kMax) {
                    prefix[size_t(next)] = static_cast<uint16_t>(old);
                    suffix[size_t(next)] = first;
                    ++next;
                    if (next == (1 << size) && size < 12) ++size;
                }
                old = code;
            }
        }
        if (done) {  // the rest of the image's sub-blocks
            r.skip_sub_blocks();
            return written;
        }
    }
    return written;
}

}  // namespace

Decoded8 decode_gif_first_frame(const std::string& bytes, const std::string& what, int64_t max_side, int64_t max_bytes) {
    Reader r(bytes, what);
    r.skip(6);  // GIF87a / GIF89a
    const int W = r.u16(), H = r.u16(), packed = r.u8();
    r.skip(2);  // background colour index, aspect
    const int bg = static_cast<unsigned char>(bytes[11]);
    check_dims(what, "a GIF", W, H, 4, max_side, max_bytes);  // the canvas (RGB) and the frame's indices
    std::vector<unsigned char> global;
    if (packed & 0x80) {
        const size_t n = size_t(3) << ((packed & 7) + 1);
        const unsigned char* p = r.take(n);
        global.assign(p, p + n);
    }
    Decoded8 d;
    d.w = W; d.h = H; d.n = 3; d.file_channels = 3;
    d.px.assign(size_t(W) * size_t(H) * 3, 0);
    if (!global.empty() && size_t(bg) * 3 + 2 < global.size())
        for (size_t i = 0; i < d.px.size(); i += 3) std::memcpy(&d.px[i], &global[size_t(bg) * 3], 3);
    int frames = 0, transparent = -1;
    bool decoded = false;
    while (!r.at_end()) {
        const int block = r.u8();
        if (block == 0x3B) break;  // trailer
        if (block == 0x21) {       // an extension
            const int label = r.u8();
            if (label == 0xF9 && !decoded) {  // graphic control: the first frame's transparent index
                const int len = r.u8();
                const unsigned char* p = r.take(size_t(len));
                if (len >= 4 && (p[0] & 1)) transparent = p[3];
                r.skip_sub_blocks();
            } else {
                r.skip_sub_blocks();
            }
            continue;
        }
        if (block != 0x2C) r.corrupt("an unknown block 0x" + std::to_string(block));
        ++frames;
        const int left = r.u16(), top = r.u16(), fw = r.u16(), fh = r.u16(), fp = r.u8();
        std::vector<unsigned char> local;
        if (fp & 0x80) {
            const size_t n = size_t(3) << ((fp & 7) + 1);
            const unsigned char* p = r.take(n);
            local.assign(p, p + n);
        }
        const int min_code = r.u8();
        if (decoded) {  // later frames: counted, not decoded
            r.skip_sub_blocks();
            continue;
        }
        check_dims(what, "a GIF's first frame", fw, fh, 1, max_side, max_bytes);  // its indices, before they are placed
        const std::vector<unsigned char>& pal = local.empty() ? global : local;
        if (pal.empty()) r.corrupt("no colour table");
        std::vector<unsigned char> idx(size_t(fw) * size_t(fh), 0);
        const size_t got = lzw_decode(r, min_code, idx.data(), idx.size());
        // rows in file order; an interlaced image's come in four passes
        std::vector<int> row_of(static_cast<size_t>(fh));
        if (fp & 0x40) {
            int k = 0;
            for (int pass = 0; pass < 4; ++pass) {
                static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
                for (int y = start[pass]; y < fh; y += step[pass]) row_of[size_t(k++)] = y;
            }
        } else {
            for (int y = 0; y < fh; ++y) row_of[size_t(y)] = y;
        }
        for (size_t i = 0; i < got; ++i) {
            const int fy = row_of[i / size_t(fw)], fx = int(i % size_t(fw));
            const int x = left + fx, y = top + fy;
            const int c = idx[i];
            if (x >= W || y >= H || c == transparent || size_t(c) * 3 + 2 >= pal.size()) continue;
            std::memcpy(&d.px[(size_t(y) * size_t(W) + size_t(x)) * 3], &pal[size_t(c) * 3], 3);
        }
        decoded = true;
    }
    if (!decoded) throw FileError(what + ": corrupt or truncated GIF (it holds no image)");
    if (frames > 1) d.note = "the first of " + std::to_string(frames) + " frames of an animated GIF";
    return d;
}

}  // namespace vit::detail
