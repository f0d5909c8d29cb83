// The hub's replies (core/io/hub.h): the input is a server's header block, one line each (as
// libcurl hands them over), read by parse_header_line, then what a download acts on: head_fields
// (commit, ETag, size, Location), every value as a size header (parse_size) and as a Content-Range.
// A refusal must be a FileError naming the header; what is accepted must be usable: a size within
// kMaxDownloadBytes, a commit and ETag that are one safe path component, a range inside its total.
#include <cstdlib>
#include <map>
#include <string>

#include "core/io/hub.h"
#include "core/io/io.h"
#include "fuzz_common.h"

namespace {
bool component(const std::string& s) {
    if (s.empty() || s.size() > 128 || s[0] == '.') return false;
    for (char c : s)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
    return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    long status = 0;
    std::map<std::string, std::string> headers;
    size_t at = 0;
    while (at <= text.size()) {
        size_t nl = text.find('\n', at);
        if (nl == std::string::npos) nl = text.size();
        vit::hub::parse_header_line(text.substr(at, nl - at + 1), status, headers);
        at = nl + 1;
    }
    if (headers.size() > 1000) std::abort();
    try {
        const vit::hub::HeadFields f = vit::hub::head_fields(status, headers);
        if (f.size > vit::hub::kMaxDownloadBytes || !component(f.etag) || !component(f.commit)) std::abort();
        if (f.redirect && f.location.empty()) std::abort();
    } catch (const vit::FileError& e) {
        if (!*e.what()) std::abort();
    }
    for (const auto& kv : headers) {
        const std::string& v = kv.second;  // (clang 14 cannot capture a structured binding)
        fuzz::expect_named([&] {
            const uint64_t n = vit::hub::parse_size(v, fuzz::kWhat);
            if (n > vit::hub::kMaxDownloadBytes || v.find_first_not_of("0123456789") != std::string::npos) std::abort();
        });
        uint64_t b = 0, e = 0, t = 0;
        if (vit::hub::parse_content_range(v, b, e, t) && (e < b || (t && e >= t))) std::abort();
    }
    return 0;
}
