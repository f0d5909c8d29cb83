// Shared by the libFuzzer harnesses: every parser must either succeed or throw
// an exception whose message names the input (the `what` string we pass);
// anything else (a crash, a sanitizer report, an exception naming nothing) is
// a finding.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace fuzz {

constexpr const char* kWhat = "FUZZ-INPUT";

// Runs f(); an exception must mention kWhat (or `other`, a second file's name).
template <class F>
void expect_named(F&& f, const char* other = nullptr) {
    try {
        f();
    } catch (const std::exception& e) {
        std::string m = e.what();
        if (m.find(kWhat) == std::string::npos && !(other && m.find(other) != std::string::npos)) {
            std::fprintf(stderr, "error message does not name the file: %s\n", m.c_str());
            std::abort();
        }
    }
}

}  // namespace fuzz
