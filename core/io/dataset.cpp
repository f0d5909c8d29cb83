// IDX files (gzipped or not): Debian's dataset-fashion-mnist.
#include "core/io/dataset.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <cstdio>
#include <cstring>
#include <memory>
#include <xtensor/xadapt.hpp>

#include "core/io/image.h"
#include "core/io/io.h"

namespace vit {

namespace {
uint32_t be32(const unsigned char* s) {
    return uint32_t(s[0]) << 24 | uint32_t(s[1]) << 16 | uint32_t(s[2]) << 8 | uint32_t(s[3]);
}
// At most 512 MiB of pixels (Fashion-MNIST's training set is 47 MB).
constexpr uint64_t kMaxIdxBytes = uint64_t(1) << 29;

// The next bytes of a file into buf (at most cap); 0 at its end. Throws FileError.
using Source = std::function<size_t(char* buf, size_t cap)>;

// One IDX file, gzipped or not: its `head` header bytes go to `check`, which
// validates them and returns how many bytes follow the header; those go straight
// into the returned vector, sized once from the header. Nothing is held twice
// (neither the inflated file nor a copy of it) and nothing past the size the
// header states is inflated, so a small .gz cannot make us allocate gigabytes.
std::vector<uint8_t> read_idx(const Source& next, const std::string& path, const char* kind, size_t head,
                              const std::function<uint64_t(const unsigned char*)>& check) {
    std::vector<char> in(size_t(1) << 16);
    size_t in_n = 0;
    while (in_n < 2) {  // enough to tell gzip from a raw file
        size_t r = next(in.data() + in_n, in.size() - in_n);
        if (!r) break;
        in_n += r;
    }
    const bool gz = in_n >= 2 && uint8_t(in[0]) == 0x1f && uint8_t(in[1]) == 0x8b;
    unsigned char header[16] = {};
    std::vector<uint8_t> out;
    uint64_t want = 0;  // payload bytes, once the header is known
    size_t got_head = 0;
    uint64_t got = 0;
    auto short_file = [&]() -> FileError {
        if (got_head < head)
            return FileError(path + ": not an IDX " + kind + " file (only " + std::to_string(got_head) + " bytes, shorter than its header)");
        return FileError(path + ": " + std::to_string(got) + " bytes after the header, which says " + std::to_string(want) +
                         ": truncated or corrupt");
    };
    // Places decoded bytes: the header first, then the payload; false if there are more than the header says.
    auto place = [&](const char* p, size_t n) {
        while (n && got_head < head) { header[got_head++] = uint8_t(*p++); --n; if (got_head == head) { want = check(header); out.resize(size_t(want)); } }
        if (!n) return true;
        if (n > want - got) return false;
        std::memcpy(out.data() + got, p, n);
        got += n;
        return true;
    };
    auto too_much = [&] { return FileError(path + ": more data than its header says (" + std::to_string(head + want) + " bytes): corrupt"); };
    if (!gz) {
        if (!place(in.data(), in_n)) throw too_much();
        while (true) {
            if (got_head == head && got < want) {  // read straight into the payload
                size_t r = next(reinterpret_cast<char*>(out.data()) + got, size_t(std::min<uint64_t>(want - got, 1u << 30)));
                if (!r) break;
                got += r;
                continue;
            }
            size_t r = next(in.data(), in.size());
            if (!r) break;
            if (!place(in.data(), r)) throw too_much();
        }
        if (got_head < head || got != want) throw short_file();
        return out;
    }
    z_stream z{};
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw FileError(path + ": cannot start gzip decoding");
    std::unique_ptr<z_stream, int (*)(z_stream*)> end_z(&z, inflateEnd);
    char buf[1 << 14];
    int r = Z_OK;
    bool input_done = false;
    z.next_in = reinterpret_cast<Bytef*>(in.data());
    z.avail_in = uInt(in_n);
    while (true) {
        if (z.avail_in == 0 && !input_done) {
            size_t n = next(in.data(), in.size());
            if (!n) input_done = true;
            z.next_in = reinterpret_cast<Bytef*>(in.data());
            z.avail_in = uInt(n);
        }
        // Inflate straight into the payload once the header is out (never past its end).
        const bool direct = got_head == head && got < want;
        Bytef* dst = direct ? out.data() + got : reinterpret_cast<Bytef*>(buf);
        const uInt cap = direct ? uInt(std::min<uint64_t>(want - got, 1u << 30)) : uInt(sizeof buf);
        z.next_out = dst;
        z.avail_out = cap;
        r = inflate(&z, Z_NO_FLUSH);
        if (r != Z_OK && r != Z_STREAM_END && r != Z_BUF_ERROR)
            throw FileError(path + ": corrupt gzip data (" + (z.msg ? std::string(z.msg) : "error " + std::to_string(r)) + ")");
        const size_t made = cap - z.avail_out;
        if (direct) got += made;
        else if (!place(buf, made)) throw too_much();
        if (r == Z_STREAM_END) {
            if (z.avail_in == 0 && !input_done) {  // is another gzip member next (as gzread reads)?
                size_t n = next(in.data(), in.size());
                if (!n) input_done = true;
                z.next_in = reinterpret_cast<Bytef*>(in.data());
                z.avail_in = uInt(n);
            }
            if (z.avail_in == 0) break;
            inflateReset(&z);
        } else if (r == Z_BUF_ERROR && made == 0 && z.avail_in == 0 && input_done) {
            throw FileError(path + ": truncated gzip data");
        }
    }
    if (got_head < head || got != want) throw short_file();
    return out;
}

Source from_string(const std::string& s) {
    auto at = std::make_shared<size_t>(0);
    return [&s, at](char* buf, size_t cap) {
        size_t n = std::min(cap, s.size() - *at);
        std::memcpy(buf, s.data() + *at, n);
        *at += n;
        return n;
    };
}

Source from_file(std::FILE* f, const std::string& path) {
    return [f, path](char* buf, size_t cap) {
        size_t n = std::fread(buf, 1, cap, f);
        if (n == 0 && std::ferror(f)) throw FileError(path + ": read failed: " + std::strerror(errno));
        return n;
    };
}

Dataset parse_sources(const Source& im_src, const Source& lb_src, const std::string& ip, const std::string& lp) {
    // Headers are validated before any pixel is inflated or allocated.
    uint32_t n = 0, rows = 0, cols = 0;
    std::vector<uint8_t> im = read_idx(im_src, ip, "image", 16, [&](const unsigned char* h) -> uint64_t {
        if (be32(h) != 0x00000803)
            throw FileError(ip + ": not an IDX image file (magic must be 0x00000803: unsigned bytes, 3 dimensions)");
        n = be32(h + 4); rows = be32(h + 8); cols = be32(h + 12);
        if (rows == 0 || cols == 0 || rows > 4096 || cols > 4096)
            throw FileError(ip + ": implausible image size " + std::to_string(rows) + "x" + std::to_string(cols));
        if (uint64_t(n) * rows * cols > kMaxIdxBytes)
            throw FileError(ip + ": " + std::to_string(n) + " images of " + std::to_string(rows) + "x" + std::to_string(cols) +
                            " are over the limit of " + std::to_string(kMaxIdxBytes) + " bytes of pixels");
        return uint64_t(n) * rows * cols;
    });
    uint32_t nl = 0;
    std::vector<uint8_t> lb = read_idx(lb_src, lp, "label", 8, [&](const unsigned char* h) -> uint64_t {
        if (be32(h) != 0x00000801) throw FileError(lp + ": not an IDX label file (magic must be 0x00000801)");
        nl = be32(h + 4);
        if (nl != n)
            throw FileError(ip + " has " + std::to_string(n) + " images but " + lp + " has " + std::to_string(nl) + " labels");
        return nl;
    });
    Dataset d;
    d.n = int(n); d.rows = int(rows); d.cols = int(cols);
    d.images = std::move(im);
    d.labels = std::move(lb);
    return d;
}
}  // namespace

Dataset load_idx(const std::string& ip, const std::string& lp) {
    auto open = [](const std::string& p) {
        check_regular_file(p);  // a FIFO would wait for a writer, /dev/zero never end
        std::FILE* f = std::fopen(p.c_str(), "rb");
        if (!f) throw FileError(p + ": cannot open: " + std::strerror(errno));
        return std::unique_ptr<std::FILE, int (*)(std::FILE*)>(f, std::fclose);
    };
    auto fi = open(ip), fl = open(lp);
    try {
        return parse_sources(from_file(fi.get(), ip), from_file(fl.get(), lp), ip, lp);
    } catch (const std::bad_alloc&) {
        throw FileError(ip + ": out of memory while reading the dataset (with " + lp + ")");
    }
}

Dataset parse_idx(const std::string& im_raw, const std::string& lb_raw, const std::string& ip, const std::string& lp) {
    return parse_sources(from_string(im_raw), from_string(lb_raw), ip, lp);
}

std::string default_fashion_mnist_dir() { return "/usr/share/datasets/fashion-mnist"; }

Dataset load_fashion_mnist(const std::string& dir, bool train) {
    struct stat sb;
    if (::stat(dir.c_str(), &sb) != 0)
        throw FileError(dir + ": " + (errno == ENOENT ? std::string("no such directory") : std::strerror(errno)) +
                        " (the Fashion-MNIST IDX files' directory; Debian's dataset-fashion-mnist installs them in "
                        "/usr/share/datasets/fashion-mnist)");
    if (!S_ISDIR(sb.st_mode))
        throw FileError(dir + ": not a directory (give the directory that holds the Fashion-MNIST IDX files)");
    std::string pre = dir + "/" + (train ? "train" : "t10k");
    auto pick = [](const std::string& base) {
        if (::access((base + ".gz").c_str(), R_OK) == 0) return base + ".gz";
        if (::access(base.c_str(), R_OK) == 0) return base;
        throw FileError(base + "[.gz]: not found (Debian's dataset-fashion-mnist installs it in "
                               "/usr/share/datasets/fashion-mnist)");
    };
    const std::string labels = pick(pre + "-labels-idx1-ubyte");
    Dataset d = load_idx(pick(pre + "-images-idx3-ubyte"), labels);
    // Fashion-MNIST's classes are 0..9: another label would index past a 10-class head in
    // training and be counted as a miss, outside the confusion matrix, by eval.
    for (size_t i = 0; i < d.labels.size(); ++i)
        if (d.labels[i] > 9)
            throw FileError(labels + ": label " + std::to_string(d.labels[i]) + " of image " + std::to_string(i) +
                            " is not one of Fashion-MNIST's 10 classes (0..9)");
    return d;
}

Tensor3 dataset_input(const Dataset& d, int i, const Config& c, int h, int w) {
    const size_t rows = size_t(d.rows), cols = size_t(d.cols);
    const uint8_t* src = d.images.data() + size_t(i) * rows * cols;
    Image im;
    // img / 255, as torchvision's ToTensor
    im.pixels = xt::adapt(src, rows * cols, xt::no_ownership(), std::array<size_t, 3>{1, rows, cols}) / 255.f;
    im.width = d.cols; im.height = d.rows; im.channels = 1;
    return h > 0 && w > 0 ? preprocess_at(im, c, h, w) : preprocess(im, c);
}

}  // namespace vit
