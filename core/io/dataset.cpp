// IDX files (gzipped or not): Debian's dataset-fashion-mnist.
#include "core/io/dataset.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <cstring>
#include <xtensor/xadapt.hpp>

#include "core/io/image.h"
#include "core/io/io.h"

namespace vit {

namespace {
uint32_t be32(const std::string& s, size_t o) {
    return uint32_t(uint8_t(s[o])) << 24 | uint32_t(uint8_t(s[o + 1])) << 16 | uint32_t(uint8_t(s[o + 2])) << 8 |
           uint32_t(uint8_t(s[o + 3]));
}
// At most 512 MiB of pixels (Fashion-MNIST's training set is 47 MB).
constexpr uint64_t kMaxIdxBytes = uint64_t(1) << 29;

// The file's bytes, gunzipped in memory if it is gzip. The header (its first
// `head` bytes) is parsed by `total` as soon as it is out, which validates it
// and returns the whole size the file must have: nothing past that size is
// ever inflated, so a small .gz cannot make us allocate gigabytes.
std::string idx_bytes(const std::string& raw, const std::string& path, size_t head,
                      const std::function<uint64_t(const std::string&)>& total) {
    if (raw.size() < 2 || uint8_t(raw[0]) != 0x1f || uint8_t(raw[1]) != 0x8b) {
        if (raw.size() >= head) total(raw);
        return raw;
    }
    z_stream z{};
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw FileError(path + ": cannot start gzip decoding");
    std::string out;
    uint64_t want = 0;  // 0 until the header is out
    size_t in_at = 0;
    char buf[1 << 16];
    int r = Z_OK;
    while (in_at < raw.size()) {
        z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data() + in_at));
        z.avail_in = uInt(std::min<size_t>(raw.size() - in_at, 1u << 30));
        z.next_out = reinterpret_cast<Bytef*>(buf);
        z.avail_out = sizeof buf;
        size_t before = z.avail_in;
        r = inflate(&z, Z_NO_FLUSH);
        in_at += before - z.avail_in;
        if (r != Z_OK && r != Z_STREAM_END && r != Z_BUF_ERROR) {
            std::string m = z.msg ? z.msg : "error " + std::to_string(r);
            inflateEnd(&z);
            throw FileError(path + ": corrupt gzip data (" + m + ")");
        }
        out.append(buf, sizeof buf - z.avail_out);
        if (!want && out.size() >= head) {
            try { want = total(out); } catch (...) { inflateEnd(&z); throw; }
        }
        if (want && out.size() > want) {
            inflateEnd(&z);
            throw FileError(path + ": more data than its header says (" + std::to_string(want) + " bytes): corrupt");
        }
        if (r == Z_STREAM_END) {
            if (in_at < raw.size()) inflateReset(&z);  // another gzip member follows (as gzread reads)
            else break;
        } else if (r == Z_BUF_ERROR && sizeof buf == z.avail_out) break;  // no progress: input ends mid-stream
    }
    inflateEnd(&z);
    if (r != Z_STREAM_END) throw FileError(path + ": truncated gzip data");
    return out;
}
}  // namespace

Dataset load_idx(const std::string& ip, const std::string& lp) {
    return parse_idx(read_file(ip, size_t(1) << 30), read_file(lp, size_t(1) << 30), ip, lp);
}

Dataset parse_idx(const std::string& im_raw, const std::string& lb_raw, const std::string& ip, const std::string& lp) {
    // Headers are validated before any pixel is inflated or allocated.
    std::string im = idx_bytes(im_raw, ip, 16, [&](const std::string& h) -> uint64_t {
        if (be32(h, 0) != 0x00000803)
            throw FileError(ip + ": not an IDX image file (magic must be 0x00000803: unsigned bytes, 3 dimensions)");
        uint64_t n = be32(h, 4), rows = be32(h, 8), cols = be32(h, 12);
        if (rows == 0 || cols == 0 || rows > 4096 || cols > 4096)
            throw FileError(ip + ": implausible image size " + std::to_string(rows) + "x" + std::to_string(cols));
        if (n * rows * cols > kMaxIdxBytes)
            throw FileError(ip + ": " + std::to_string(n) + " images of " + std::to_string(rows) + "x" + std::to_string(cols) +
                            " are over the limit of " + std::to_string(kMaxIdxBytes) + " bytes of pixels");
        return 16 + n * rows * cols;
    });
    std::string lb = idx_bytes(lb_raw, lp, 8, [&](const std::string& h) -> uint64_t {
        if (be32(h, 0) != 0x00000801) throw FileError(lp + ": not an IDX label file (magic must be 0x00000801)");
        if (be32(h, 4) > kMaxIdxBytes) throw FileError(lp + ": " + std::to_string(be32(h, 4)) + " labels: too many");
        return 8 + uint64_t(be32(h, 4));
    });
    if (im.size() < 16 || be32(im, 0) != 0x00000803)
        throw FileError(ip + ": not an IDX image file (magic must be 0x00000803: unsigned bytes, 3 dimensions)");
    if (lb.size() < 8 || be32(lb, 0) != 0x00000801)
        throw FileError(lp + ": not an IDX label file (magic must be 0x00000801)");
    Dataset d;
    uint32_t n = be32(im, 4), rows = be32(im, 8), cols = be32(im, 12), nl = be32(lb, 4);
    if (n != nl)
        throw FileError(ip + " has " + std::to_string(n) + " images but " + lp + " has " + std::to_string(nl) + " labels");
    if (im.size() != 16 + size_t(n) * rows * cols)
        throw FileError(ip + ": " + std::to_string(im.size() - 16) + " bytes of pixels for " + std::to_string(n) + " images of " +
                        std::to_string(rows) + "x" + std::to_string(cols) + ": truncated or corrupt");
    if (lb.size() != 8 + size_t(n)) throw FileError(lp + ": " + std::to_string(lb.size() - 8) + " labels for " + std::to_string(n) + " images: truncated or corrupt");
    d.n = int(n); d.rows = int(rows); d.cols = int(cols);
    d.images.assign(im.begin() + 16, im.end());
    d.labels.assign(lb.begin() + 8, lb.end());
    return d;
}

std::string default_fashion_mnist_dir() { return "/usr/share/datasets/fashion-mnist"; }

Dataset load_fashion_mnist(const std::string& dir, bool train) {
    std::string pre = dir + "/" + (train ? "train" : "t10k");
    auto pick = [](const std::string& base) {
        if (::access((base + ".gz").c_str(), R_OK) == 0) return base + ".gz";
        if (::access(base.c_str(), R_OK) == 0) return base;
        throw FileError(base + "[.gz]: not found (Debian's dataset-fashion-mnist installs it in "
                               "/usr/share/datasets/fashion-mnist)");
    };
    return load_idx(pick(pre + "-images-idx3-ubyte"), pick(pre + "-labels-idx1-ubyte"));
}

Tensor3 dataset_input(const Dataset& d, int i, const Config& c) {
    const size_t rows = size_t(d.rows), cols = size_t(d.cols);
    const uint8_t* src = d.images.data() + size_t(i) * rows * cols;
    Image im;
    // img / 255, as torchvision's ToTensor
    im.pixels = xt::adapt(src, rows * cols, xt::no_ownership(), std::array<size_t, 3>{1, rows, cols}) / 255.f;
    im.width = d.cols; im.height = d.rows; im.channels = 1;
    return preprocess(im, c);
}

}  // namespace vit
