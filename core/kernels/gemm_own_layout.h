// The packed layout's constants (gemm_own.cpp describes the layout), shared by the layout functions
// and the kernels. Internal linkage: each translation unit, built with its own instruction set's
// flags, keeps its own copy of these functions.
#pragma once

namespace vit::gemm::own {
namespace {

constexpr int kKc = 768;   // K rows per chunk
constexpr int kNb = 64;    // columns per block
constexpr int kMc = 240;   // rows per row chunk, about
constexpr int kMr = 6;     // rows per tile

inline int round16(int n) { return (n + 15) / 16 * 16; }

}  // namespace
}  // namespace vit::gemm::own
