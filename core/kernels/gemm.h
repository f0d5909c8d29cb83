// Matrix products through oneDNN, which picks its kernel from the CPU's
// instruction set itself (AVX-512, AVX2, ...): nothing to set, and no
// OPENBLAS_CORETYPE can slow it down. OpenBLAS stays for LAPACK (core/teach/teach.cpp).
//
// Two entry points:
//  - sgemm: a plain row-major GEMM (attention per head, training, anything whose
//    operands change every call). oneDNN packs the operands inside each call.
//  - packed/run (through ops::linear): F.linear with the weight matrix packed ONCE into the blocked
//    layout oneDNN's matmul kernel reads (a oneDNN matmul primitive per column
//    slice; on CPUs with AVX-512 or AVX2 + FMA, the own kernels' layout instead: gemm_own.h), then reused by
//    every forward pass. The packs live in the Weights
//    they were made from (Weights::packs): copying Weights starts an empty set,
//    and a weight changed in place is detected (see gemm.cpp) and repacked.
//
// The packed matmul reaches the machine's GEMM peak on ViT-B's shapes, faster than
// dnnl_sgemm and OpenBLAS's best kernel (docs/kernels.md has the figures).
#pragma once
#include <cstddef>
#include <memory>
#include <string>

namespace vit::gemm {

// C(M,N) = alpha * op(A) op(B) + beta * C, row-major; op = transpose when the flag is set.
void sgemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
           float beta, float* C, int ldc);

struct PackSet;  // the packed matrices of one Weights (gemm.cpp)

// A member of Weights. Copies start empty (a copy's matrices live elsewhere);
// moves keep the packs (the matrices move with their buffers).
class Packs {
public:
    Packs();
    ~Packs();
    Packs(const Packs&);
    Packs(Packs&&) noexcept;
    Packs& operator=(const Packs&);
    Packs& operator=(Packs&&) noexcept;
    // Forget every pack (call after changing weights in place; AdamW does).
    void clear();
    size_t bytes() const;  // memory the packed copies take
    PackSet& set() const { return *set_; }

private:
    std::shared_ptr<PackSet> set_;
};

// One weight matrix W(O,I) (+ bias b(O), may be null) packed for F.linear with R
// input rows, as `parts` column slices that threads compute independently
// (ops::linear runs them; its busy-machine fallback runs them all on one thread,
// with bitwise the same result). Packed on first use; a weight changed in place
// since is detected (a sample of its values is compared on every lookup) and repacked.
struct Packed;
std::shared_ptr<const Packed> packed(const Packs& packs, const float* W, const float* b, int R, int I, int O,
                                     int parts);
int parts(const Packed& p);
// Slice `part` of out(R,O) = in(R,I) @ W.T + b.
void run(const Packed& p, int part, float* out, const float* in);

// A weight matrix W(O,I) kept ONLY in the kernel's blocked layout: the storage of a model's
// block matrices once they are packed (model.h, pack_blocks), so that the weights exist once
// in memory. Immutable once made (copies of Weights share it); its layout does not depend on
// the row count, and a primitive for each row count a run uses is made on first use.
struct Matrix;
// Packs W(O,I) in `parts` column slices (16-float boundaries); R is the row count whose
// kernel picks the layout (any other row count runs on the same layout). `onednn`: for oneDNN's
// kernel even where the own one runs (to measure the machine's best GEMM with both).
std::shared_ptr<const Matrix> pack_matrix(const float* W, int I, int O, int parts, int R, bool onednn = false);
int parts(const Matrix& m);
int rows(const Matrix& m);    // O
int cols(const Matrix& m);    // I
size_t bytes(const Matrix& m);
// Slice `part` of out(R,O) = in(R,I) @ W.T + b (b may be null). Returns where the slice's values
// are warmest in cache: the calling thread's dense copy (valid until its next run) or out itself.
struct Block {
    const float* p;  // row r of the slice at p + r * ld
    size_t ld;
};
// What becomes of out's columns when the slice was computed as a dense block (a slice computed in
// place is in out anyway): copied (Cached), copied past the caches with streaming stores (Streamed:
// a recorded stage that the pass does not read again), or not written at all (Skipped: an epilogue
// reads the block and nothing reads out).
enum class Out { Cached, Streamed, Skipped };
Block run(const Matrix& m, int part, float* out, const float* in, const float* b, int R, Out mode = Out::Cached);
// The own kernel's fused epilogues (gemm_own.h, Epilogue), for slice `part`:
// run_gelu: pre(R,O) = in @ W.T + b and post(R,O) (row r at post + r * ldp) = GELU(pre), from the
// registers (pre past the caches with `stream`); run_heads: qkv = in @ W.T + b stored straight
// into q, k, v (heads[0..2], each (H, R, head_cols) of one image), the split done by the stores.
// fusable: whether every slice of m runs on the own kernel and (head_cols > 0) its columns split
// into whole heads for run_heads; where not, the caller runs `run` and its own epilogue.
bool fusable(const Matrix& m, int head_cols = 0);
void run_gelu(const Matrix& m, int part, float* pre, float* post, size_t ldp, const float* in, const float* b, int R,
              bool stream);
void run_heads(const Matrix& m, int part, float* const* heads, int head_cols, const float* in, const float* b, int R);
int first_column(const Matrix& m, int part);
int end_column(const Matrix& m, int part);
// W(O,I) back in row-major order, bit for bit what was packed.
void unpack(const Matrix& m, float* W);

// Whether the packed products run on an own kernel (gemm_own.h), and on which: "AVX-512", "AVX2"
// (empty where they run on oneDNN's).
bool own_kernel();
std::string own_kernel_isa();
// "oneDNN 2.6.3, AVX-512 kernels (chosen by oneDNN for this CPU; ...)".
std::string describe();
// "oneDNN 2.6.3" and the instruction set its kernels use on this CPU: "AVX-512 BF16", "AVX2", ...
std::string version();
std::string isa();

}  // namespace vit::gemm
