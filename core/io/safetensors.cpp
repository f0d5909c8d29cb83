#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "core/io/io.h"

namespace vit {

// IEEE half to float, exactly (subnormals renormalised); shared by the .safetensors and .pth readers.
float half_to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0) {
        if (mant == 0) bits = sign;
        else {  // subnormal: renormalise
            int e = -1;
            do { ++e; mant <<= 1; } while (!(mant & 0x400));
            bits = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
        }
    } else if (exp == 31) bits = sign | 0x7f800000u | mant << 13;
    else bits = sign | (exp + 112) << 23 | mant << 13;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

namespace {

using json = nlohmann::json;

size_t dtype_size(const std::string& dt) {
    if (dt == "F32" || dt == "I32" || dt == "U32") return 4;
    if (dt == "F16" || dt == "BF16" || dt == "I16" || dt == "U16") return 2;
    if (dt == "F64" || dt == "I64" || dt == "U64") return 8;
    if (dt == "I8" || dt == "U8" || dt == "BOOL" || dt == "F8_E4M3" || dt == "F8_E5M2") return 1;
    return 0;
}


// Parses the header JSON, rejecting duplicate keys at any level. Linear in the
// header: one hash set of keys per open object (a header with 80,000 keys took
// 7 s with a list), and bounded: at most kMaxValues JSON values (the DOM costs
// ~100 bytes each) and kMaxDepth levels of nesting.
constexpr size_t kMaxValues = 2'000'000, kMaxDepth = 64;
json parse_header(const std::string& text, const std::string& what) {
    std::vector<std::unordered_set<std::string>> keys;  // one set of keys per open object
    size_t depth = 0, values = 0;
    std::string dup;
    json::parser_callback_t cb = [&](int d, json::parse_event_t ev, json& parsed) {
        if (++values > kMaxValues)
            throw FileError(what + ": header has more than " + std::to_string(kMaxValues) + " JSON values");
        if (size_t(d) > kMaxDepth || depth > kMaxDepth)
            throw FileError(what + ": header is nested more than " + std::to_string(kMaxDepth) + " levels deep");
        if (ev == json::parse_event_t::object_start) { keys.emplace_back(); ++depth; }
        else if (ev == json::parse_event_t::array_start) ++depth;
        else if (ev == json::parse_event_t::array_end) { if (depth) --depth; }
        else if (ev == json::parse_event_t::object_end) { if (!keys.empty()) keys.pop_back(); if (depth) --depth; }
        else if (ev == json::parse_event_t::key && !keys.empty()) {
            if (!keys.back().insert(parsed.get<std::string>()).second && dup.empty()) dup = parsed.get<std::string>();
        }
        return true;
    };
    json h;
    try {
        h = json::parse(text, cb);
    } catch (const json::exception& e) {
        throw FileError(what + ": header is not valid UTF-8 JSON (" + e.what() + ")");
    }
    if (!dup.empty()) throw FileError(what + ": header has the key '" + dup + "' twice");
    if (!h.is_object()) throw FileError(what + ": header is not a JSON object");
    return h;
}

}  // namespace

SafeTensors parse_safetensors(const std::string& bytes, const std::string& what) {
    return parse_safetensors(bytes.data(), bytes.size(), what);
}

namespace {
// mapped: the bytes are a read-only file mapping; each tensor's pages are dropped
// from memory once converted (they would be re-read from the file if touched
// again), so loading ViT-B holds the converted weights, not the file as well.
SafeTensors parse_impl(const char* base, size_t size, const std::string& what, bool mapped);
}  // namespace

SafeTensors parse_safetensors(const char* base, size_t size, const std::string& what) {
    return parse_impl(base, size, what, false);
}

namespace {
SafeTensors parse_impl(const char* base, size_t size, const std::string& what, bool mapped) {
    struct View {
        const char* p; size_t n;
        size_t size() const { return n; }
        const char* data() const { return p; }
        char operator[](size_t i) const { return p[i]; }
        std::string substr(size_t o, size_t len) const { return std::string(p + o, len); }
    } bytes{base, size};
    if (bytes.size() < 8) throw FileError(what + ": too small to be a safetensors file (" +
                                          std::to_string(bytes.size()) + " bytes)");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[i]);
    if (n > 100000000ull) throw FileError(what + ": header length " + std::to_string(n) +
                                          " exceeds the 100,000,000-byte limit");
    if (n + 8 > bytes.size())
        throw FileError(what + ": header length " + std::to_string(n) + " runs past the end of the file (" +
                        std::to_string(bytes.size()) + " bytes): truncated?");
    json h = parse_header(bytes.substr(8, n), what);
    const size_t data0 = 8 + n, data_len = bytes.size() - data0;

    SafeTensors st;
    struct Span { uint64_t b, e; std::string name; };
    std::vector<Span> spans;
    for (auto& [name, info] : h.items()) {
        if (name == "__metadata__") {
            if (!info.is_object()) throw FileError(what + ": __metadata__ is not an object");
            for (auto& [k, v] : info.items()) {
                if (!v.is_string()) throw FileError(what + ": __metadata__ value of '" + k + "' is not a string");
                st.metadata[k] = v.get<std::string>();
            }
            continue;
        }
        const std::string& tname = name;  // (clang: a structured binding cannot be captured in C++17)
        auto bad = [&](const std::string& m) { throw FileError(what + ": tensor '" + tname + "': " + m); };
        if (!info.is_object()) bad("entry is not an object");
        if (!info.contains("dtype") || !info["dtype"].is_string()) bad("missing dtype");
        if (!info.contains("shape") || !info["shape"].is_array()) bad("missing shape");
        if (!info.contains("data_offsets") || !info["data_offsets"].is_array() || info["data_offsets"].size() != 2)
            bad("missing data_offsets [begin, end]");
        std::string dt = info["dtype"].get<std::string>();
        size_t es = dtype_size(dt);
        if (!es) bad("unknown dtype '" + dt + "'");
        Shape shape;
        uint64_t count = 1, nonzero = 1;
        if (info["shape"].size() > 16) bad("shape has " + std::to_string(info["shape"].size()) + " dimensions (at most 16)");
        for (auto& d : info["shape"]) {
            if (!d.is_number_unsigned()) bad("shape has a non-integer or negative dimension");
            uint64_t v = d.get<uint64_t>();
            // Non-zero dimensions bounded even when another is 0 (count 0): the strides multiply them.
            if (v && (count > UINT64_MAX / v || nonzero > (uint64_t(1) << 62) / v)) bad("shape overflows");
            if (v) nonzero *= v;
            count *= v;
            shape.push_back(size_t(v));
        }
        if (count > UINT64_MAX / es) bad("byte size overflows");
        auto& off = info["data_offsets"];
        if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) bad("data_offsets are not non-negative integers");
        uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
        if (e < b) bad("data_offsets end before they begin");
        if (e - b != count * es)
            bad("shape " + shape_str(shape) + " of " + dt + " needs " + std::to_string(count * es) +
                " bytes but data_offsets span " + std::to_string(e - b));
        if (e > data_len) bad("data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                              "] run past the end of the data (" + std::to_string(data_len) + " bytes)");
        spans.push_back({b, e, name});
        st.dtypes[name] = dt;
        if (dt != "F32" && dt != "F16" && dt != "BF16" && dt != "F64") continue;  // kept, not converted
        Array t = empty_array(shape);
        float* out = t.data();
        const char* src = bytes.data() + data0 + b;
        if (dt == "F32") { if (count) std::memcpy(out, src, 4 * count); }  // memcpy: the data may be unaligned; an empty array's data() is null
        else
            for (uint64_t i = 0; i < count; ++i) {
                if (dt == "F64") { double v; std::memcpy(&v, src + 8 * i, 8); out[i] = float(v); }
                else {
                    uint16_t v;
                    std::memcpy(&v, src + 2 * i, 2);
                    if (dt == "F16") out[i] = half_to_float(v);
                    else { uint32_t bits = uint32_t(v) << 16; std::memcpy(&out[i], &bits, 4); }
                }
            }
        st.tensors.emplace(name, std::move(t));
        if (mapped && count) {
            const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
            uintptr_t p0 = uintptr_t(src) & ~(page - 1), p1 = uintptr_t(src + (e - b));
            ::madvise(reinterpret_cast<void*>(p0), size_t(p1 - p0), MADV_DONTNEED);
        }
    }
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.b < b.b || (a.b == b.b && a.e < b.e); });
    uint64_t at = 0;
    for (auto& s : spans) {
        if (s.b < at) throw FileError(what + ": tensor '" + s.name + "' overlaps the one before it");
        if (s.b > at) throw FileError(what + ": gap in the data before tensor '" + s.name + "'");
        at = s.e;
    }
    if (at != data_len)
        throw FileError(what + ": the data buffer is " + std::to_string(data_len) + " bytes but the tensors cover " +
                        std::to_string(at));
    return st;
}
}  // namespace

SafeTensors read_safetensors(const std::string& path) {
    // Map the file rather than read it: a ViT-B checkpoint is 350 MB and the
    // converted tensors are all we keep (parse_impl drops each one's pages).
    return parse_mapped(path, [&](const char* b, size_t n) { return parse_impl(b, n, path, n != 0); });
}

void write_safetensors(const std::string& path, const std::vector<ArrayRef>& tensors,
                       const std::map<std::string, std::string>& metadata) {
    json h = json::object();
    if (!metadata.empty()) h["__metadata__"] = metadata;
    auto sorted = tensors;
    std::sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.name < b.name; });
    uint64_t off = 0;
    for (auto& t : sorted) {
        if (h.contains(t.name)) throw std::invalid_argument("duplicate tensor name " + t.name);
        const uint64_t n = shape_numel(t.shape);
        h[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {off, off + 4 * n}}};
        off += 4 * n;
    }
    std::string head = h.dump();
    while ((head.size() + 8) % 8) head.push_back(' ');
    std::string out;
    out.reserve(8 + head.size() + off);
    uint64_t n = head.size();
    for (int i = 0; i < 8; ++i) out.push_back(char((n >> (8 * i)) & 0xff));
    out += head;
    for (auto& t : sorted) out.append(reinterpret_cast<const char*>(t.data), 4 * shape_numel(t.shape));
    write_file_atomic(path, out);
}

}  // namespace vit

namespace vit {

TensorIndex index_safetensors(const std::string& path) {
    check_regular_file(path);
    int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) throw FileError(path + ": " + std::strerror(errno));
    struct Closer { int fd; ~Closer() { ::close(fd); } } closer{fd};
    struct stat sb;
    if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) throw FileError(path + ": is not a regular file");
    const uint64_t size = uint64_t(sb.st_size);
    auto read_at = [&](char* dst, size_t n, uint64_t off) {
        size_t got = 0;
        while (got < n) {
            ssize_t r = ::pread(fd, dst + got, n - got, off_t(off + got));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) throw FileError(path + ": cannot read the header: " + (r < 0 ? std::strerror(errno) : "unexpected end of file"));
            got += size_t(r);
        }
    };
    if (size < 8) throw FileError(path + ": too small to be a safetensors file (" + std::to_string(size) + " bytes)");
    unsigned char len[8];
    read_at(reinterpret_cast<char*>(len), 8, 0);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
    if (n > 100000000ull) throw FileError(path + ": header length " + std::to_string(n) + " exceeds the 100,000,000-byte limit");
    if (n + 8 > size)
        throw FileError(path + ": header length " + std::to_string(n) + " runs past the end of the file (" +
                        std::to_string(size) + " bytes): truncated?");
    std::string text(size_t(n), '\0');
    read_at(text.data(), size_t(n), 8);
    json h = parse_header(text, path);
    const uint64_t data_len = size - 8 - n;
    TensorIndex ix;
    for (auto& [name, info] : h.items()) {
        if (name == "__metadata__") {
            if (!info.is_object()) throw FileError(path + ": __metadata__ is not an object");
            for (auto& [k, v] : info.items()) {
                if (!v.is_string()) throw FileError(path + ": __metadata__ value of '" + k + "' is not a string");
                ix.metadata[k] = v.get<std::string>();
            }
            continue;
        }
        const std::string& tname = name;
        auto bad = [&](const std::string& m) { throw FileError(path + ": tensor '" + tname + "': " + m); };
        if (!info.is_object() || !info.contains("dtype") || !info["dtype"].is_string() || !info.contains("shape") ||
            !info["shape"].is_array() || info["shape"].size() > 16 || !info.contains("data_offsets") ||
            !info["data_offsets"].is_array() || info["data_offsets"].size() != 2)
            bad("entry is not {dtype, shape (at most 16 dimensions), data_offsets [begin, end]}");
        std::string dt = info["dtype"].get<std::string>();
        size_t es = dtype_size(dt);
        if (!es) bad("unknown dtype '" + dt + "'");
        Shape shape;
        uint64_t count = 1;
        for (auto& d : info["shape"]) {
            if (!d.is_number_unsigned()) bad("shape has a non-integer or negative dimension");
            uint64_t v = d.get<uint64_t>();
            if (v && count > UINT64_MAX / v) bad("shape overflows");
            count *= v;
            shape.push_back(size_t(v));
        }
        auto& off = info["data_offsets"];
        if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) bad("data_offsets are not non-negative integers");
        uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
        if (e < b || count > UINT64_MAX / es || e - b != count * es) bad("data_offsets do not span shape x dtype bytes");
        if (e > data_len) bad("data_offsets run past the end of the file: truncated?");
        ix.tensors.emplace(name, std::make_pair(dt, std::move(shape)));
    }
    return ix;
}

}  // namespace vit
