// The Hugging Face hub's names and replies, checked: a model spec and its cache folder, a reply's header lines,
// sizes and ranges, the SHA-256 an LFS file is named by, the free space a download needs. Pure functions (no
// network: hub.cpp does the transfers), each tested on its own in test_hub.cpp.
#include "core/io/hub.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/io/hub_internal.h"
#include "core/io/io.h"

namespace vit::hub {

namespace detail {

std::string strip(std::string s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    size_t i = 0;
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    return s.substr(i);
}

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

bool safe_component(const std::string& s, size_t max_len) {
    if (s.empty() || s.size() > max_len || s[0] == '.') return false;
    for (char c : s)
        if (!word_char(c) && c != '-' && c != '.') return false;
    return true;
}

}  // namespace detail

using detail::safe_component;
using detail::strip;
using detail::word_char;


// ------------------------------------------------------------------ replies, checked

long stall_seconds() {
    const char* e = std::getenv("HF_HUB_DOWNLOAD_TIMEOUT");
    const std::string v = e ? e : "";
    char* end = nullptr;
    const double x = v.empty() ? 0 : std::strtod(v.c_str(), &end);
    if (v.empty() || *end || !(x >= 1)) return 30;
    return long(std::min(x, 3600.0));
}

void parse_header_line(const std::string& raw, long& status, std::map<std::string, std::string>& headers) {
    std::string line = raw;
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (line.rfind("HTTP/", 0) == 0) {  // a new response (after a redirect, or a 100 Continue)
        headers.clear();
        const size_t sp = line.find(' ');
        status = 0;
        if (sp != std::string::npos && sp + 4 <= line.size() && std::isdigit(static_cast<unsigned char>(line[sp + 1])) &&
            std::isdigit(static_cast<unsigned char>(line[sp + 2])) && std::isdigit(static_cast<unsigned char>(line[sp + 3])))
            status = std::stol(line.substr(sp + 1, 3));
    } else if (size_t c = line.find(':'); c != std::string::npos && c > 0 && c <= 256) {
        std::string k = line.substr(0, c);
        for (char& ch : k) ch = char(std::tolower(static_cast<unsigned char>(ch)));
        if (headers.size() < 1000) headers[k] = strip(line.substr(c + 1, 8192));
    }
}

uint64_t parse_size(const std::string& v, const std::string& header) {
    auto bad = [&](const std::string& why) -> uint64_t {
        throw FileError(header + " '" + terminal_safe(v.substr(0, 40)) + (v.size() > 40 ? "..." : "") + "' " + why);
    };
    if (v.empty()) return bad("is empty, not a size in bytes");
    if (v.size() > 20) return bad("is not a size in bytes (over 20 characters)");
    uint64_t n = 0;
    for (char c : v) {
        if (c < '0' || c > '9') return bad("is not a size in bytes (digits only)");
        const uint64_t d = uint64_t(c - '0');
        if (n > (UINT64_MAX - d) / 10) return bad("is not a size in bytes (too large)");
        n = n * 10 + d;
    }
    if (n > kMaxDownloadBytes)
        return bad("is over the " + std::to_string(kMaxDownloadBytes >> 30) + " GiB a download may be");
    return n;
}

bool parse_content_range(const std::string& v, uint64_t& start, uint64_t& end, uint64_t& total) {
    if (v.rfind("bytes ", 0) != 0) return false;
    size_t i = 6;
    auto number = [&](uint64_t& out) {
        const size_t b = i;
        uint64_t n = 0;
        while (i < v.size() && v[i] >= '0' && v[i] <= '9' && i - b < 20) {
            const uint64_t d = uint64_t(v[i] - '0');
            if (n > (UINT64_MAX - d) / 10) return false;
            n = n * 10 + d;
            ++i;
        }
        out = n;
        return i > b;
    };
    if (!number(start) || i >= v.size() || v[i++] != '-' || !number(end) || i >= v.size() || v[i++] != '/') return false;
    if (i + 1 == v.size() && v[i] == '*') {
        total = 0;
        return end >= start;
    }
    if (!number(total) || i != v.size()) return false;
    return end >= start && end < total;
}

HeadFields head_fields(long status, const std::map<std::string, std::string>& headers) {
    auto header = [&](const char* k) {
        auto it = headers.find(k);
        return it == headers.end() ? std::string() : it->second;
    };
    HeadFields f;
    f.commit = header("x-repo-commit");
    std::string etag = header("x-linked-etag");
    if (etag.empty()) etag = header("etag");
    if (etag.rfind("W/", 0) == 0) etag = etag.substr(2);
    while (!etag.empty() && etag.front() == '"') etag.erase(etag.begin());
    while (!etag.empty() && etag.back() == '"') etag.pop_back();
    f.etag = etag;
    f.redirect = status >= 300 && status < 400;
    if (f.commit.empty()) throw FileError("sent no X-Repo-Commit header");
    if (!safe_component(f.commit, 128))
        throw FileError("sent the commit '" + terminal_safe(f.commit.substr(0, 80)) + "', not a commit id");
    if (f.etag.empty()) throw FileError("sent no ETag");
    if (!safe_component(f.etag, 128))
        throw FileError("sent the ETag '" + terminal_safe(f.etag.substr(0, 80)) + "', not usable as a file name");
    // The size: X-Linked-Size (a redirected LFS file), else the reply's own Content-Length.
    const bool linked = headers.count("x-linked-size") != 0;
    if (!linked && (f.redirect || !headers.count("content-length")))
        throw FileError("sent no size (X-Linked-Size or Content-Length)");
    const std::string name = linked ? "X-Linked-Size" : "Content-Length";
    try {
        f.size = parse_size(header(linked ? "x-linked-size" : "content-length"), name);
    } catch (const FileError& e) {
        throw FileError(std::string("sent ") + e.what());
    }
    if (f.redirect) {
        f.location = header("location");
        if (f.location.empty()) throw FileError("redirected without a Location");
    }
    return f;
}

bool is_sha256(const std::string& e) {
    if (e.size() != 64) return false;
    for (char c : e)
        if (!std::isdigit(static_cast<unsigned char>(c)) && !(c >= 'a' && c <= 'f')) return false;
    return true;
}

namespace {
// SHA-256 (FIPS 180-4), small and portable: only downloads are hashed, once each.
class Sha256 {
public:
    void update(const unsigned char* p, size_t n) {
        len_ += n;
        while (n) {
            const size_t k = std::min(n, size_t(64) - fill_);
            std::memcpy(buf_ + fill_, p, k);
            fill_ += k, p += k, n -= k;
            if (fill_ == 64) block(buf_), fill_ = 0;
        }
    }
    std::string hex() {
        const uint64_t bits = len_ * 8;
        const unsigned char one = 0x80, zero = 0;
        update(&one, 1);
        while (fill_ != 56) update(&zero, 1);
        unsigned char l[8];
        for (int i = 0; i < 8; ++i) l[i] = (unsigned char)(bits >> (56 - 8 * i));
        update(l, 8);
        static const char* d = "0123456789abcdef";
        std::string o;
        for (uint32_t v : h_)
            for (int i = 28; i >= 0; i -= 4) o += d[(v >> i) & 15];
        return o;
    }

private:
    static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
    void block(const unsigned char* p) {
        static const uint32_t K[64] = {
            0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
            0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
            0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
            0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
            0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
            0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
            0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
            0xc67178f2};
        uint32_t w[64];
        for (int i = 0; i < 16; ++i)
            w[i] = uint32_t(p[4 * i]) << 24 | uint32_t(p[4 * i + 1]) << 16 | uint32_t(p[4 * i + 2]) << 8 | p[4 * i + 3];
        for (int i = 16; i < 64; ++i) {
            const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
            const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
        for (int i = 0; i < 64; ++i) {
            const uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
            const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
            h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
        }
        h_[0] += a, h_[1] += b, h_[2] += c, h_[3] += d, h_[4] += e, h_[5] += f, h_[6] += g, h_[7] += h;
    }
    uint32_t h_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    unsigned char buf_[64];
    size_t fill_ = 0;
    uint64_t len_ = 0;
};

}  // namespace

std::string sha256_fd(int fd, const std::string& what) {
    Sha256 h;
    std::vector<unsigned char> buf(size_t(1) << 20);
    off_t at = 0;
    for (;;) {
        const ssize_t r = ::pread(fd, buf.data(), buf.size(), at);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) throw FileError(what + ": cannot read it back to check its sha256: " + std::strerror(errno));
        if (r == 0) break;
        h.update(buf.data(), size_t(r));
        at += r;
    }
    return h.hex();
}

std::string sha256_hex(const std::string& bytes) {
    Sha256 h;
    h.update(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
    return h.hex();
}

std::string sha256_file(const std::string& path) {
    check_regular_file(path);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw FileError(path + ": cannot open: " + std::strerror(errno));
    struct Closer { int fd; ~Closer() { ::close(fd); } } closer{fd};
    return sha256_fd(fd, path);
}

void check_free_space(const std::string& dir, uint64_t need, const std::string& what) {
    struct statvfs v;
    if (::statvfs(dir.c_str(), &v) != 0) return;  // unknown: the writes will say
    const uint64_t avail = uint64_t(v.f_bavail) * uint64_t(v.f_frsize);
    if (need > avail)
        throw FileError(what + " needs " + std::to_string(need) + " bytes (" + std::to_string(need >> 20) + " MiB) but " +
                        dir + " has " + std::to_string(avail) + " bytes (" + std::to_string(avail >> 20) +
                        " MiB) free; nothing downloaded. Free some space, or set HF_HUB_CACHE to a folder on a larger disk.");
}

// ------------------------------------------------------------------ names

bool is_spec(const std::string& spec) { return spec.rfind("hf:", 0) == 0; }

std::string repo_folder(const std::string& repo_id) {
    std::string f = "models--";
    for (char c : repo_id) {
        if (c == '/') f += "--";
        else f += c;
    }
    return f;
}

Ref parse_spec(const std::string& spec) {
    if (!is_spec(spec)) throw FileError("'" + spec + "' is not a Hugging Face model (hf:ORG/NAME[@REVISION])");
    std::string rest = spec.substr(3);
    Ref r;
    if (size_t at = rest.find('@'); at != std::string::npos) {
        r.revision = rest.substr(at + 1);
        rest = rest.substr(0, at);
    }
    auto bad = [&](const std::string& why) {
        throw FileError("model '" + spec + "': " + why + "; expected hf:ORG/NAME or hf:ORG/NAME@REVISION " +
                        "(a branch, tag or commit), e.g. hf:google/vit-base-patch16-224");
    };
    // huggingface_hub's validate_repo_id: one or two parts of [\w.-], each beginning and ending
    // with a word character, no '--' or '..', at most 96 characters.
    if (rest.empty()) bad("no repository name");
    if (rest.size() > 96) bad("the repository name is longer than 96 characters");
    size_t slash = rest.find('/');
    if (slash != std::string::npos && rest.find('/', slash + 1) != std::string::npos) bad("more than one '/'");
    for (const std::string& part : {slash == std::string::npos ? rest : rest.substr(0, slash),
                                    slash == std::string::npos ? std::string("x") : rest.substr(slash + 1)}) {
        if (part.empty() || !word_char(part.front()) || !word_char(part.back())) bad("'" + rest + "' is not ORG/NAME");
        for (char c : part)
            if (!word_char(c) && c != '-' && c != '.') bad("'" + std::string(1, c) + "' in the repository name");
    }
    if (rest.find("--") != std::string::npos || rest.find("..") != std::string::npos) bad("'--' or '..' in the repository name");
    if (rest.size() >= 4 && rest.compare(rest.size() - 4, 4, ".git") == 0) bad("a name ending in .git");
    if (r.revision.empty() || r.revision.size() > 255) bad("an empty or over-long revision");
    for (char c : r.revision)
        if (!word_char(c) && c != '-' && c != '.' && c != '/') bad("'" + std::string(1, c) + "' in the revision");
    if (r.revision.front() == '/' || r.revision.back() == '/' || r.revision.find("//") != std::string::npos ||
        ("/" + r.revision + "/").find("/../") != std::string::npos || ("/" + r.revision + "/").find("/./") != std::string::npos)
        bad("the revision '" + r.revision + "' is not a branch, tag or commit name");
    r.repo_id = rest;
    return r;
}

}  // namespace vit::hub
