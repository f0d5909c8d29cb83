// IDX files (gzipped or not): Debian's dataset-fashion-mnist.
#include "dataset.h"

#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <xtensor/xadapt.hpp>

#include "image.h"
#include "io.h"

namespace vit {

namespace {
std::string read_maybe_gz(const std::string& path) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (!f) throw FileError(path + ": cannot open: " + std::strerror(errno));
    std::string out;
    char buf[1 << 16];
    for (;;) {
        int n = gzread(f, buf, sizeof buf);
        if (n < 0) {
            int e;
            std::string m = gzerror(f, &e);
            gzclose(f);
            throw FileError(path + ": corrupt gzip data (" + m + ")");
        }
        if (n == 0) break;
        out.append(buf, size_t(n));
        if (out.size() > (size_t(1) << 32)) { gzclose(f); throw FileError(path + ": too large"); }
    }
    gzclose(f);
    return out;
}
uint32_t be32(const std::string& s, size_t o) {
    return uint32_t(uint8_t(s[o])) << 24 | uint32_t(uint8_t(s[o + 1])) << 16 | uint32_t(uint8_t(s[o + 2])) << 8 |
           uint32_t(uint8_t(s[o + 3]));
}
}  // namespace

Dataset load_idx(const std::string& ip, const std::string& lp) {
    std::string im = read_maybe_gz(ip), lb = read_maybe_gz(lp);
    if (im.size() < 16 || be32(im, 0) != 0x00000803)
        throw FileError(ip + ": not an IDX image file (magic must be 0x00000803: unsigned bytes, 3 dimensions)");
    if (lb.size() < 8 || be32(lb, 0) != 0x00000801)
        throw FileError(lp + ": not an IDX label file (magic must be 0x00000801)");
    Dataset d;
    uint32_t n = be32(im, 4), rows = be32(im, 8), cols = be32(im, 12), nl = be32(lb, 4);
    if (rows == 0 || cols == 0 || rows > 4096 || cols > 4096) throw FileError(ip + ": implausible image size");
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
