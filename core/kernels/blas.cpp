#include "core/kernels/blas.h"

#include <strings.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

// OpenBLAS's public API (cblas.h declares these too, but not in every build).
extern "C" {
char* openblas_get_corename(void);
char* openblas_get_config(void);
// DYNAMIC_ARCH builds (Debian's, and every build where OPENBLAS_CORETYPE means
// anything) export the kernel selection they run when the library loads:
// gotoblas_dynamic_init() reads OPENBLAS_CORETYPE, points the `gotoblas` table
// at that kernel set and initialises its blocking parameters;
// gotoblas_dynamic_quit() clears the pointer. Weak: absent in builds for one
// fixed CPU, where there is nothing to choose.
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}

namespace vit::blas {

namespace {

// Instruction-set tiers, in the order OpenBLAS's x86-64 kernels use them.
enum Tier { Unknown = 0, SSE3 = 1, AVX = 2, AVX2 = 3, AVX512 = 4 };

const char* tier_name(Tier t) {
    switch (t) {
    case SSE3: return "SSE3";
    case AVX: return "AVX";
    case AVX2: return "AVX2";
    case AVX512: return "AVX-512";
    default: return "unknown";
    }
}

// The best tier this CPU (and the OS, which must save the wide registers) runs.
// GCC's __builtin_cpu_supports checks the XCR0 bits for AVX and AVX-512 state.
Tier cpu_tier() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512cd"))
        return AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return AVX2;
    if (__builtin_cpu_supports("avx")) return AVX;
    if (__builtin_cpu_supports("sse3")) return SSE3;
#endif
    return Unknown;
}

// The OpenBLAS 0.3.21 x86-64 kernel set for a tier, as OPENBLAS_CORETYPE spells it.
const char* kernel_for(Tier t) {
    switch (t) {
    case AVX512:
#if defined(__x86_64__)
        // Cooperlake = SkylakeX's sgemm plus bf16 kernels; OpenBLAS itself picks it
        // on CPUs with AVX512-BF16 (measured identical sgemm rates here).
        if (__builtin_cpu_supports("avx512bf16")) return "Cooperlake";
#endif
        return "SkylakeX";
    case AVX2: return "Haswell";
    case AVX: return "Sandybridge";
    default: return "";
    }
}

// The tier a kernel set is written for (names as openblas_get_corename() returns them).
Tier kernel_tier(const std::string& k) {
    static const struct { const char* name; Tier tier; } table[] = {
        {"SapphireRapids", AVX512}, {"Cooperlake", AVX512}, {"SkylakeX", AVX512},
        {"Haswell", AVX2}, {"Zen", AVX2},
        {"Sandybridge", AVX}, {"Bulldozer", AVX}, {"Piledriver", AVX}, {"Steamroller", AVX}, {"Excavator", AVX},
        {"Prescott", SSE3}, {"Core2", SSE3}, {"Penryn", SSE3}, {"Dunnington", SSE3}, {"Nehalem", SSE3},
        {"Atom", SSE3}, {"Nano", SSE3}, {"Opteron_SSE3", SSE3}, {"Opteron", SSE3}, {"Barcelona", SSE3},
        {"Bobcat", SSE3}, {"Katmai", SSE3}, {"Coppermine", SSE3}, {"Northwood", SSE3}, {"Banias", SSE3},
        {"Athlon", SSE3},
    };
    for (auto& e : table)
        if (strcasecmp(e.name, k.c_str()) == 0) return e.tier;
    return Unknown;
}

std::string corename() {
    const char* c = openblas_get_corename();
    std::string s = c ? c : "";
    while (!s.empty() && (s.back() == ' ' || s.back() == '\n')) s.pop_back();
    return s;
}

std::string library_name() {
    // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..." -> "OpenBLAS 0.3.21"
    const char* c = openblas_get_config();
    std::string s = c ? c : "OpenBLAS";
    size_t a = s.find_first_not_of(' ');
    if (a == std::string::npos) return "OpenBLAS";
    size_t b = s.find(' ', a);
    if (b != std::string::npos) b = s.find(' ', b + 1);
    return s.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

// Function-local: init() may run from another file's static constructor.
Info& state() {
    static Info i;
    return i;
}
std::once_flag g_once;  // constant-initialised

// Select a kernel set as OpenBLAS does when it loads with OPENBLAS_CORETYPE set.
// Safe before the first BLAS call: no buffer or thread holds the old kernel's
// parameters (DYNAMIC_ARCH sizes its buffers at build time for every kernel).
// The variable is set only for the call, so child processes see the
// environment the user gave us.
void reselect(const std::string& kernel) {
    std::string saved;
    const char* env = std::getenv("OPENBLAS_CORETYPE");
    if (env) saved = env;
    setenv("OPENBLAS_CORETYPE", kernel.c_str(), 1);
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    if (env) setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
    else unsetenv("OPENBLAS_CORETYPE");
}

void do_init() {
    Info& i = state();
    i.library = library_name();
    const Tier cpu = cpu_tier();
    i.cpu_isa = tier_name(cpu);
    i.best_kernel = kernel_for(cpu);
    const char* env = std::getenv("OPENBLAS_CORETYPE");
    i.user_set = env && *env;
    if (i.user_set) i.user_value = env;
    // For tests: behave as on a CPU that OpenBLAS does not know, where it picks
    // this kernel by itself (e.g. Prescott on Intel family 6 model 207).
    const char* emulate = std::getenv("VITSCOPE_EMULATE_OPENBLAS_PICK");
    if (emulate && *emulate && !i.user_set && gotoblas_dynamic_init && gotoblas_dynamic_quit) reselect(emulate);
    i.kernel = i.picked = corename();
    const Tier have = kernel_tier(i.kernel);
    // A kernel we cannot place, or a CPU below AVX, is left alone.
    if (have == Unknown || cpu <= SSE3 || have >= cpu) { i.best = have >= cpu || have == Unknown; return; }
    if (i.user_set || !gotoblas_dynamic_init || !gotoblas_dynamic_quit) { i.best = false; return; }
    reselect(i.best_kernel);
    i.kernel = corename();
    i.switched = true;
    i.best = kernel_tier(i.kernel) >= cpu;
}

}  // namespace

void init() { std::call_once(g_once, do_init); }

Info info() {
    init();
    return state();
}

std::string warning() {
    Info i = info();
    if (i.best) return "";
    std::string w = "warning: BLAS kernel " + i.kernel + " (" + tier_name(kernel_tier(i.kernel)) +
                    ") is not the best for this CPU (" + i.cpu_isa + ")";
    // What the kernel slows down: LAPACK (the teaching PCA) always; the matrix products
    // only when they were put on OpenBLAS (VITSCOPE_GEMM=openblas); otherwise oneDNN runs them.
    const char* e = std::getenv("VITSCOPE_GEMM");
    const bool products = e && std::strcmp(e, "openblas") == 0;
    const std::string what = products ? "matrix products and LAPACK" : "LAPACK (the matrix products run on oneDNN)";
    if (i.user_set)
        w += ": OPENBLAS_CORETYPE=" + i.user_value + " is set; unset it, or set OPENBLAS_CORETYPE=" + i.best_kernel +
             ", for faster " + what;
    else
        w += ": this OpenBLAS cannot switch to " + i.best_kernel + "; " + what + " run slower";
    return w;
}

std::string describe() {
    Info i = info();
    std::string s = i.library + ", kernel " + (i.kernel.empty() ? "unknown" : i.kernel);
    if (!i.best) return s + " (" + warning() + ")";
    if (kernel_tier(i.kernel) == Unknown) return s + " (not a kernel ViTScope knows; this CPU: " + i.cpu_isa + ")";
    if (i.switched) return s + " (best for this CPU: " + i.cpu_isa + "; OpenBLAS alone picked " + i.picked + ")";
    if (i.user_set && strcasecmp(i.user_value.c_str(), i.kernel.c_str()) != 0)
        return s + " (OPENBLAS_CORETYPE=" + i.user_value + " not taken by OpenBLAS; best for this CPU: " +
               i.cpu_isa + ")";
    if (i.user_set) return s + " (set by OPENBLAS_CORETYPE; best for this CPU: " + i.cpu_isa + ")";
    return s + " (best for this CPU: " + i.cpu_isa + ")";
}

}  // namespace vit::blas
