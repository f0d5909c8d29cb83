// The app's settings file (app/settings.cpp): any text must give either the
// settings or defaults with an error naming the file; what it keeps must write
// back as JSON that reads back cleanly and writes back the same (numbers are
// written rounded, so the first write is the fixed point; unknown keys are kept
// as their text). Deep nesting must be refused, never recursed into.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "app/settings.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    if (text.size() > vit::app::Settings::kMaxFileBytes) return 0;  // load() refuses these before parsing
    vit::app::Settings s(fuzz::kWhat);
    const bool clean = s.parse(text);
    if (!clean && s.error().find(fuzz::kWhat) == std::string::npos) {
        std::fprintf(stderr, "settings error does not name the file: %s\n", s.error().c_str());
        std::abort();
    }
    if (!clean && s.writable()) {
        std::fprintf(stderr, "a file with a problem would be overwritten\n");
        std::abort();
    }
    const std::string out = s.serialize();
    vit::app::Settings back(fuzz::kWhat);
    if (!nlohmann::json::accept(out) || !back.parse(out) || back.serialize() != out) {
        std::fprintf(stderr, "serialize() does not read back to itself:\n%s\n%s\n", out.c_str(), back.error().c_str());
        std::abort();
    }
    if (back.data().recent_models != s.data().recent_models || back.data().recent_images != s.data().recent_images ||
        !(back.data().options == s.data().options)) {
        std::fprintf(stderr, "serialize() loses recent files or options:\n%s\n", out.c_str());
        std::abort();
    }
    return 0;
}
