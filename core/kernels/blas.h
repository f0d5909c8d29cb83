// The BLAS kernel for this CPU, chosen with nothing set by the user.
//
// Debian's OpenBLAS (DYNAMIC_ARCH) picks its kernel from a list of CPU models
// when it loads. On a CPU it does not know it falls back to an older kernel,
// e.g. SSE3 "Prescott" on an AVX-512 Intel family 6 model 207: sgemm 4-5x
// slower. init() compares the kernel OpenBLAS chose with the instruction set
// the CPU has, and when OPENBLAS_CORETYPE is not set and the kernel is worse,
// makes OpenBLAS select the right one before any BLAS call (in-process: see
// blas.cpp). A kernel set by the user with OPENBLAS_CORETYPE is respected, with
// a warning when it is not the best.
#pragma once
#include <string>

namespace vit::blas {

// Call first thing in main(), before any thread or BLAS call. Idempotent.
void init();

struct Info {
    std::string library;     // "OpenBLAS 0.3.21"
    std::string kernel;      // kernel in use, as OpenBLAS names it: "SkylakeX"
    std::string picked;      // what OpenBLAS picked by itself (or the user's OPENBLAS_CORETYPE)
    std::string cpu_isa;     // best instruction set of this CPU: "AVX-512", "AVX2", "AVX", "SSE3"
    std::string best_kernel; // the kernel for that instruction set: "SkylakeX"
    bool user_set = false;   // OPENBLAS_CORETYPE was set by the user
    std::string user_value;  // ... to this
    bool switched = false;   // init() replaced OpenBLAS's choice
    bool best = true;        // the kernel in use makes full use of the CPU's instruction set
};
Info info();

// One line: "OpenBLAS 0.3.21, kernel SkylakeX (best for this CPU: AVX-512)", or
// with "warning: ..." when the kernel is not the best for this CPU.
std::string describe();

// Empty when the kernel is the best for this CPU; otherwise one sentence that
// says why and what to do.
std::string warning();

}  // namespace vit::blas
