// Whole-file reads, atomic writes, .npy and .npz.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <fstream>
#include <random>
#include <vector>
#include <cstdlib>

#include "core/io/io.h"

namespace vit {

SafeTensors parse_mapped(const std::string& path, const std::function<SafeTensors(const char*, size_t)>& parse) {
    check_regular_file(path);
    int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) throw FileError(path + ": " + std::strerror(errno));
    struct stat sb;
    if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        ::close(fd);
        throw FileError(path + ": is not a regular file");
    }
    const size_t n = size_t(sb.st_size);
    if (n == 0) { ::close(fd); return parse(nullptr, 0); }
    void* m = ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (m == MAP_FAILED) throw FileError(path + ": cannot map the file: " + std::strerror(errno));
    try {
        SafeTensors st = parse(static_cast<const char*>(m), n);
        ::munmap(m, n);
        return st;
    } catch (...) {
        ::munmap(m, n);
        throw;
    }
}

std::string terminal_safe(const std::string& t, bool keep_newlines) {
    std::string out;
    out.reserve(t.size());
    auto hex = [&](unsigned char c) {
        static const char* d = "0123456789abcdef";
        out += "\\x";
        out += d[c >> 4];
        out += d[c & 15];
    };
    for (size_t i = 0; i < t.size();) {
        const unsigned char c = static_cast<unsigned char>(t[i]);
        if (c == '\\') { out += "\\\\"; ++i; continue; }
        if (c == '\n' && keep_newlines) { out += c; ++i; continue; }
        if (c < 0x20 || c == 0x7f) { hex(c); ++i; continue; }
        if (c < 0x80) { out += char(c); ++i; continue; }
        // A well-formed UTF-8 sequence (no overlongs, no surrogates) passes, except the C1 controls.
        const int n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = n && i + size_t(n) <= t.size() && c >= 0xc2 && c <= 0xf4;
        uint32_t cp = n ? c & (0x7f >> n) : 0;
        for (int k = 1; ok && k < n; ++k) {
            const unsigned char cc = static_cast<unsigned char>(t[i + size_t(k)]);
            ok = (cc >> 6) == 2;
            cp = cp << 6 | (cc & 0x3f);
        }
        ok = ok && !(n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) && !(n == 4 && (cp < 0x10000 || cp > 0x10ffff));
        if (!ok) { hex(c); ++i; continue; }
        if (cp >= 0x80 && cp <= 0x9f) { for (int k = 0; k < n; ++k) hex(static_cast<unsigned char>(t[i + size_t(k)])); }
        else out.append(t, i, size_t(n));
        i += size_t(n);
    }
    return out;
}

namespace {
// What a stat mode is when it is not a regular file, as an error says it.
const char* not_regular_kind(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISFIFO(m)) return "a FIFO (a pipe)";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}
[[noreturn]] void refuse_not_regular(const std::string& path, mode_t m) {
    const std::string kind = not_regular_kind(m);
    if (kind == "not a regular file") throw FileError(path + ": is not a regular file");
    throw FileError(path + ": is " + kind + ", not a regular file");
}
}  // namespace

void check_regular_file(const std::string& path) {
    struct stat sb;
    if (::stat(path.c_str(), &sb) != 0) throw FileError(path + ": " + std::strerror(errno));
    if (!S_ISREG(sb.st_mode)) refuse_not_regular(path, sb.st_mode);
}

std::string read_file(const std::string& path, size_t max_bytes) {
    check_regular_file(path);
    // O_NONBLOCK: were the path swapped for a FIFO since the check, open does not wait for a writer
    // (the fstat below refuses it); a regular file's reads ignore the flag.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) throw FileError(path + ": cannot open: " + std::strerror(errno));
    struct Closer { int fd; ~Closer() { ::close(fd); } } closer{fd};
    struct stat sb;
    if (::fstat(fd, &sb) != 0) throw FileError(path + ": cannot determine the file size: " + std::strerror(errno));
    if (!S_ISREG(sb.st_mode)) refuse_not_regular(path, sb.st_mode);
    const uint64_t len = uint64_t(sb.st_size);
    if (len > max_bytes)
        throw FileError(path + ": file is too large (" + std::to_string(len) + " bytes; at most " + std::to_string(max_bytes) +
                        " are read)");
    std::string s(size_t(len), '\0');
    size_t got = 0;
    while (got < s.size()) {
        const ssize_t r = ::read(fd, &s[got], s.size() - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) throw FileError(path + ": read failed: " + std::strerror(errno));
        if (r == 0) throw FileError(path + ": read failed: the file ended after " + std::to_string(got) + " of its " +
                                    std::to_string(len) + " bytes (was it changed while read?)");
        got += size_t(r);
    }
    return s;
}

bool same_file(const std::string& a, const std::string& b) {
    struct stat sa, sb;
    if (a.empty() || b.empty() || ::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

OutputTarget output_target(const std::string& path) {
    if (path.empty()) throw FileError("the output path is empty; give the file to write");
    OutputTarget t;
    t.path = path;
    struct stat lsb;
    if (::lstat(path.c_str(), &lsb) != 0) {
        if (errno == ENOENT) return t;  // a new file
        throw FileError(path + ": cannot write: " + std::strerror(errno));
    }
    struct stat sb = lsb;
    if (S_ISLNK(lsb.st_mode)) {
        char to[4096];
        const ssize_t n = ::readlink(path.c_str(), to, sizeof to - 1);
        const std::string target = n > 0 ? std::string(to, size_t(n)) : "?";
        if (::stat(path.c_str(), &sb) != 0)
            throw FileError(path + ": is a symbolic link to " + target + ", which does not exist (" + std::strerror(errno) +
                            "); not written through it. Remove the link or give another file.");
    }
    if (S_ISDIR(sb.st_mode)) throw FileError(path + ": is a directory; give the file to write");
    if (S_ISSOCK(sb.st_mode)) throw FileError(path + ": is a socket; not written");
    if (S_ISBLK(sb.st_mode)) throw FileError(path + ": is a block device (a disk); not written");
    if (!S_ISREG(sb.st_mode)) {  // a character device (/dev/null, a terminal), a FIFO, a pipe as /dev/stdout
        t.in_place = true;
        return t;
    }
    if (S_ISLNK(lsb.st_mode)) {  // written through: the file it names is replaced, the link stays
        char* r = ::realpath(path.c_str(), nullptr);
        if (!r) throw FileError(path + ": cannot resolve the symbolic link: " + std::strerror(errno));
        t.path = r;
        std::free(r);
    }
    if (::access(t.path.c_str(), W_OK) != 0)
        throw FileError(path + ": cannot write over it: " + std::strerror(errno) + " (it is read-only)");
    t.existed = true;
    t.mode = sb.st_mode & 07777;
    t.uid = sb.st_uid;
    t.gid = sb.st_gid;
    return t;
}

namespace {
std::string temp_beside(const std::string& path) {
    std::random_device rd;
    return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd() % 100000);
}

void write_all(int fd, const char* p, size_t n, const std::string& path) {
    size_t done = 0;
    while (done < n) {
        const ssize_t w = ::write(fd, p + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) throw FileError(path + ": write failed: " + std::strerror(errno));
        done += size_t(w);
    }
}

// Opens a non-regular output (a character device, a FIFO) for writing in place. A FIFO nobody reads
// is refused instead of waited on.
int open_in_place(const std::string& path) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENXIO) throw FileError(path + ": is a FIFO (a pipe) that nobody reads; not written");
        throw FileError(path + ": cannot write: " + std::strerror(errno));
    }
    const int fl = ::fcntl(fd, F_GETFL);
    if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

// The finished temporary file takes the place of t.path: with the mode (and, where allowed, the owner)
// of the file it replaces.
void commit_temp(const OutputTarget& t, const std::string& tmp, const std::string& shown) {
    if (t.existed) {
        if (::chmod(tmp.c_str(), t.mode) != 0) {
            const int e = errno;
            ::unlink(tmp.c_str());
            throw FileError(shown + ": cannot keep its mode: " + std::strerror(e));
        }
        if (::geteuid() == 0 && ::chown(tmp.c_str(), t.uid, t.gid) != 0) {}  // best effort
    }
    if (std::rename(tmp.c_str(), t.path.c_str()) != 0) {
        const int e = errno;
        ::unlink(tmp.c_str());
        throw FileError(shown + ": cannot move the finished file into place: " + std::strerror(e));
    }
}

void write_temp_then_rename(const std::string& dest, const std::string& bytes, const std::string& shown,
                            const OutputTarget* keep) {
    const std::string tmp = temp_beside(dest);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) throw FileError(shown + ": cannot write: " + std::strerror(errno));
    try {
        write_all(fd, bytes.data(), bytes.size(), shown);
    } catch (...) {
        ::close(fd);
        ::unlink(tmp.c_str());
        throw;
    }
    if (::fsync(fd) != 0 || ::close(fd) != 0) {
        const int e = errno;
        ::unlink(tmp.c_str());
        throw FileError(shown + ": write failed: " + std::strerror(e));
    }
    OutputTarget plain;
    plain.path = dest;
    commit_temp(keep ? *keep : plain, tmp, shown);
}
}  // namespace

void write_file_atomic(const std::string& path, const std::string& bytes) {
    const OutputTarget t = output_target(path);
    if (t.in_place) {
        const int fd = open_in_place(path);
        struct Closer { int fd; ~Closer() { ::close(fd); } } closer{fd};
        write_all(fd, bytes.data(), bytes.size(), path);
        return;
    }
    write_temp_then_rename(t.path, bytes, path, &t);
}

void write_file_replacing(const std::string& path, const std::string& bytes) {
    if (path.empty()) throw FileError("the output path is empty; give the file to write");
    write_temp_then_rename(path, bytes, path, nullptr);
}

namespace {
// The .npy header of a float32 C-order array (the bytes before its data).
std::string npy_header(const Shape& tshape) {
    std::string shape = "(";
    for (size_t i = 0; i < tshape.size(); ++i) shape += std::to_string(tshape[i]) + (tshape.size() == 1 || i + 1 < tshape.size() ? "," : "");
    shape += ")";
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
    size_t total = 10 + dict.size() + 1;
    size_t pad = (64 - total % 64) % 64;
    dict += std::string(pad, ' ') + "\n";
    std::string out("\x93NUMPY\x01\x00", 8);
    uint16_t hl = uint16_t(dict.size());
    out.push_back(char(hl & 0xff));
    out.push_back(char(hl >> 8));
    out += dict;
    return out;
}
}  // namespace

std::string npy_bytes(const float* data, const Shape& tshape) {
    std::string out = npy_header(tshape);
    out.append(reinterpret_cast<const char*>(data), 4 * shape_numel(tshape));
    return out;
}

std::string npy_text_bytes(const std::string& text) {
    // UTF-8 -> the code points numpy's '<U' dtype stores as UTF-32LE.
    std::vector<uint32_t> cps;
    for (size_t i = 0; i < text.size();) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + size_t(n) > text.size()) throw FileError("text for .npy is not valid UTF-8");
        uint32_t cp = n == 1 ? c : c & (0x7f >> n);
        for (int k = 1; k < n; ++k) {
            const unsigned char cc = static_cast<unsigned char>(text[i + size_t(k)]);
            if ((cc >> 6) != 2) throw FileError("text for .npy is not valid UTF-8");
            cp = (cp << 6) | (cc & 0x3f);
        }
        cps.push_back(cp);
        i += size_t(n);
    }
    const size_t len = std::max<size_t>(cps.size(), 1);
    std::string dict = "{'descr': '<U" + std::to_string(len) + "', 'fortran_order': False, 'shape': (), }";
    size_t total = 10 + dict.size() + 1;
    dict += std::string((64 - total % 64) % 64, ' ') + "\n";
    std::string out("\x93NUMPY\x01\x00", 8);
    out.push_back(char(dict.size() & 0xff));
    out.push_back(char(dict.size() >> 8));
    out += dict;
    cps.resize(len, 0);
    for (uint32_t cp : cps)
        for (int b = 0; b < 4; ++b) out.push_back(char((cp >> (8 * b)) & 0xff));
    return out;
}

namespace {
// Finds the value text after 'key': in a numpy header dict.
std::string dict_value(const std::string& h, const std::string& key, const std::string& what) {
    auto p = h.find("'" + key + "'");
    if (p == std::string::npos) throw FileError(what + ": .npy header has no '" + key + "'");
    // numpy reads the header as a Python dict, where a key given twice means its last value: refused
    // rather than read differently from numpy
    if (h.find("'" + key + "'", p + 1) != std::string::npos)
        throw FileError(what + ": .npy header gives '" + key + "' twice");
    p = h.find(':', p);
    if (p == std::string::npos) throw FileError(what + ": malformed .npy header");
    ++p;
    while (p < h.size() && h[p] == ' ') ++p;
    size_t e = p;
    if (p < h.size() && h[p] == '(') e = h.find(')', p) + 1;
    else if (p < h.size() && h[p] == '\'') e = h.find('\'', p + 1) + 1;
    else while (e < h.size() && h[e] != ',' && h[e] != '}') ++e;
    if (e == std::string::npos || e == 0 || e > h.size()) throw FileError(what + ": malformed .npy header");
    return h.substr(p, e - p);
}
}  // namespace

Array parse_npy(const std::string& b, const std::string& what) {
    if (b.size() < 10 || b.compare(0, 6, "\x93NUMPY") != 0) throw FileError(what + ": not a .npy file (bad magic)");
    uint8_t major = uint8_t(b[6]);
    size_t hl, off;
    if (major == 1) { hl = uint8_t(b[8]) | size_t(uint8_t(b[9])) << 8; off = 10; }
    else if (major == 2 || major == 3) {
        if (b.size() < 12) throw FileError(what + ": truncated .npy header");
        hl = uint8_t(b[8]) | size_t(uint8_t(b[9])) << 8 | size_t(uint8_t(b[10])) << 16 | size_t(uint8_t(b[11])) << 24;
        off = 12;
    } else throw FileError(what + ": unsupported .npy version " + std::to_string(major));
    if (off + hl > b.size()) throw FileError(what + ": truncated .npy header");
    std::string h = b.substr(off, hl);
    std::string descr = dict_value(h, "descr", what);
    std::string fo = dict_value(h, "fortran_order", what);
    std::string sh = dict_value(h, "shape", what);
    size_t es;
    if (descr == "'<f4'") es = 4;
    else if (descr == "'<f8'") es = 8;
    else throw FileError(what + ": .npy dtype " + descr + " is not float32 or float64");
    if (fo != "False") throw FileError(what + ": Fortran-order .npy is not supported (save with np.ascontiguousarray)");
    if (sh.size() < 2 || sh.front() != '(' || sh.back() != ')') throw FileError(what + ": malformed .npy shape " + sh);
    Shape shape;
    std::string cur;
    size_t count = 1, nonzero = 1;
    for (size_t i = 1; i < sh.size(); ++i) {
        char c = sh[i];
        if (c >= '0' && c <= '9') { cur += c; if (cur.size() > 12) throw FileError(what + ": .npy dimension too large"); }
        else if (c == ',' || c == ')') {
            if (!cur.empty()) {
                size_t dim = std::stoull(cur);
                // The product of the non-zero dimensions is bounded too: with a 0 in the
                // shape the count stays 0, but the strides still multiply the rest (UB in xtensor).
                if (dim && (count > (size_t(1) << 34) / dim || nonzero > (size_t(1) << 34) / dim))
                    throw FileError(what + ": .npy array too large");
                if (dim) nonzero *= dim;
                shape.push_back(dim);
                count *= dim;
                cur.clear();
            }
        } else if (c != ' ' && c != 'L') throw FileError(what + ": malformed .npy shape " + sh);
    }
    size_t data = off + hl;
    if (b.size() - data != count * es)
        throw FileError(what + ": .npy data is " + std::to_string(b.size() - data) + " bytes, shape " + shape_str(shape) +
                        " needs " + std::to_string(count * es));
    Array t = empty_array(shape);
    float* out = t.data();
    for (size_t i = 0; i < count; ++i) {
        if (es == 4) std::memcpy(&out[i], b.data() + data + 4 * i, 4);
        else { double v; std::memcpy(&v, b.data() + data + 8 * i, 8); out[i] = float(v); }
    }
    return t;
}

Array read_npy(const std::string& path) {
    return name_out_of_memory(path, "reading the .npy", [&] { return parse_npy(read_file(path), path); });
}

namespace {
// One .npy entry streamed into the zip as libzip asks for it: the header, then
// the tensor's bytes straight from the caller's memory. Nothing is copied, so
// writing a trace needs no second copy of it (200 MB for ViT-B).
struct NpyEntry {
    std::string head, text;         // text: an entry that owns its data (the 0-d unicode arrays)
    const char* data = nullptr;
    uint64_t size = 0, pos = 0;
    const LazyTensor* lazy = nullptr;  // data made when the entry is opened, released when closed
    std::exception_ptr error;          // what making it threw (rethrown once the zip is discarded)
};
zip_int64_t npy_source(void* ud, void* out, zip_uint64_t len, zip_source_cmd_t cmd) {
    auto* e = static_cast<NpyEntry*>(ud);
    const uint64_t total = e->head.size() + e->size;
    switch (cmd) {
        case ZIP_SOURCE_OPEN:
            e->pos = 0;
            if (e->lazy) {
                try {
                    e->data = reinterpret_cast<const char*>(e->lazy->data());
                } catch (...) {
                    e->error = std::current_exception();  // rethrown by write_npz_streamed
                    return -1;
                }
            }
            return 0;
        case ZIP_SOURCE_READ: {
            const uint64_t n = std::min<uint64_t>(len, total - e->pos);
            char* o = static_cast<char*>(out);
            for (uint64_t done = 0; done < n;) {
                uint64_t k;
                if (e->pos < e->head.size()) {
                    k = std::min<uint64_t>(n - done, e->head.size() - e->pos);
                    std::memcpy(o + done, e->head.data() + e->pos, size_t(k));
                } else {
                    k = n - done;
                    std::memcpy(o + done, e->data + (e->pos - e->head.size()), size_t(k));
                }
                done += k;
                e->pos += k;
            }
            return zip_int64_t(n);
        }
        case ZIP_SOURCE_CLOSE:
            if (e->lazy && e->lazy->done) e->lazy->done();
            if (e->lazy) e->data = nullptr;
            return 0;
        case ZIP_SOURCE_STAT: {
            auto* st = static_cast<zip_stat_t*>(out);
            zip_stat_init(st);
            st->size = total;
            st->valid |= ZIP_STAT_SIZE;
            return sizeof(zip_stat_t);
        }
        case ZIP_SOURCE_ERROR: {
            int* ze = static_cast<int*>(out);
            ze[0] = ze[1] = 0;
            return 2 * sizeof(int);
        }
        case ZIP_SOURCE_FREE: return 0;
        case ZIP_SOURCE_SUPPORTS: return ZIP_SOURCE_SUPPORTS_READABLE;
        default: return -1;
    }
}
}  // namespace

void write_npz(const std::string& path, const std::vector<ArrayRef>& tensors,
               const std::vector<std::pair<std::string, std::string>>& texts) {
    std::vector<LazyTensor> lazy;
    lazy.reserve(tensors.size());
    for (const ArrayRef& t : tensors) {
        const float* p = t.data;
        lazy.push_back({t.name, t.shape, [p] { return p; }, nullptr});
    }
    write_npz_streamed(path, lazy, texts);
}

void write_npz_streamed(const std::string& path, const std::vector<LazyTensor>& tensors,
                        const std::vector<std::pair<std::string, std::string>>& texts) {
    const OutputTarget target = output_target(path);
    // A device or a FIFO is written in place: the zip is made in a temporary folder first (libzip
    // needs a file it can seek), then copied. Never renamed over.
    std::string tmp;
    if (target.in_place) {
        const char* td = std::getenv("TMPDIR");
        std::string tpl = std::string(td && *td ? td : "/tmp") + "/vitscope-npz-XXXXXX";
        const int tfd = ::mkstemp(tpl.data());
        if (tfd < 0) throw FileError(path + ": cannot make a temporary file in " + tpl + ": " + std::strerror(errno));
        ::close(tfd);
        tmp = tpl;
    } else {
        tmp = temp_beside(target.path);
    }
    int err = 0;
    zip_t* z = zip_open(tmp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
    if (!z) throw FileError(path + ": cannot create the .npz (libzip error " + std::to_string(err) + ")");
    std::deque<NpyEntry> entries;  // read by the sources until zip_close; a deque never moves them
    for (size_t e = 0; e < tensors.size() + texts.size(); ++e) {
        const bool is_text = e >= tensors.size();
        const std::string& name = is_text ? texts[e - tensors.size()].first : tensors[e].name;
        NpyEntry& ne = entries.emplace_back();
        if (is_text) {
            ne.text = npy_text_bytes(texts[e - tensors.size()].second);
            ne.data = ne.text.data();
            ne.size = ne.text.size();
        } else {
            ne.head = npy_header(tensors[e].shape);
            ne.lazy = &tensors[e];
            ne.size = 4 * uint64_t(shape_numel(tensors[e].shape));
        }
        zip_source_t* src = zip_source_function(z, npy_source, &ne);
        zip_int64_t idx = src ? zip_file_add(z, (name + ".npy").c_str(), src, ZIP_FL_ENC_UTF_8) : -1;
        if (idx < 0) {
            if (src) zip_source_free(src);
            std::string m = zip_strerror(z);
            zip_discard(z);
            std::remove(tmp.c_str());
            throw FileError(path + ": cannot add " + name + ": " + m);
        }
        zip_set_file_compression(z, zip_uint64_t(idx), ZIP_CM_STORE, 0);
    }
    if (zip_close(z) != 0) {
        std::string m = zip_strerror(z);
        zip_discard(z);
        std::remove(tmp.c_str());
        for (const NpyEntry& e : entries)
            if (e.error) std::rethrow_exception(e.error);
        throw FileError(path + ": cannot write the .npz: " + m);
    }
    if (!target.in_place) {
        commit_temp(target, tmp, path);
        return;
    }
    struct Unlink { std::string p; ~Unlink() { ::unlink(p.c_str()); } } unlink_tmp{tmp};
    const int in = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) throw FileError(path + ": cannot read back the temporary .npz: " + std::strerror(errno));
    struct Closer { int fd; ~Closer() { ::close(fd); } } close_in{in};
    const int out = open_in_place(path);
    Closer close_out{out};
    std::vector<char> buf(size_t(1) << 20);
    for (;;) {
        const ssize_t r = ::read(in, buf.data(), buf.size());
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) throw FileError(path + ": cannot read back the temporary .npz: " + std::strerror(errno));
        if (r == 0) break;
        write_all(out, buf.data(), size_t(r), path);
    }
}

}  // namespace vit
