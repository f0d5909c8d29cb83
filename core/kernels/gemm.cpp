#include "core/kernels/gemm.h"

#include "core/kernels/gemm_own.h"
#include "core/kernels/ops_kernels.h"

#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>
#include <immintrin.h>

// Written against oneDNN 2.x (Debian bookworm's 2.6.3), whose operation
// descriptors (dnnl::matmul::desc) oneDNN 3.0 removed.
#if DNNL_VERSION_MAJOR != 2
#error "ViTScope's core/gemm.cpp needs oneDNN 2.x (Debian bookworm's libdnnl-dev 2.6); this is another major version"
#endif

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <unordered_map>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <vector>

namespace vit::gemm {

namespace {
// oneDNN runs a call on OpenMP's thread count when called outside a parallel
// region. ViTScope splits the work across the threads itself (ops.cpp), so every
// call here is one thread's share: outside a region the count is 1 for the call.
// (Letting oneDNN fork its own team for the default model's tiny products made a
// forward pass more than 1.5x slower: docs/kernels.md.)
struct OneThread {
    int saved = omp_in_parallel() ? 0 : omp_get_max_threads();
    OneThread() { if (saved > 1) omp_set_num_threads(1); }
    ~OneThread() { if (saved > 1) omp_set_num_threads(saved); }
    OneThread(const OneThread&) = delete;
    OneThread& operator=(const OneThread&) = delete;
};

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

dnnl::engine& engine() {
    static dnnl::engine e(dnnl::engine::kind::cpu, 0);
    return e;
}
dnnl::stream& stream() {  // one per calling thread: a stream is not shared across threads
    thread_local dnnl::stream s(engine());
    return s;
}
// The primitives' scratch memory is ours (user mode), per calling thread, so that
// slices run on different threads, and different models, never share it.
void* scratch(size_t bytes) {
    thread_local std::vector<char> buf;
    if (buf.size() < bytes) buf.resize(bytes);
    return buf.data();
}

// The packed products run on an own kernel (gemm_own.h) where the CPU has AVX-512 or AVX2 + FMA:
// the instruction set of the elementwise kernels (VITSCOPE_KERNELS=avx2 narrows both);
// VITSCOPE_GEMM_KERNEL=onednn keeps oneDNN's (to compare the two in one binary). Decided once:
// packs made for one are run by it.
own::Run own_kernel_v() {
    static const own::Run v = [] () -> own::Run {
        const char* e = std::getenv("VITSCOPE_GEMM_KERNEL");
        if (e && std::strcmp(e, "onednn") == 0) return nullptr;
        const std::string isa = vit::ops::kernels::best().name;
        return isa == "avx512" ? own::avx512::run : isa == "avx2" ? own::avx2::run : nullptr;
    }();
    return v;
}
void own_run(float* out, size_t ldo, const float* in, size_t ldi, int R, int K, const float* packed, int n,
             const float* bias, const own::Epilogue* epi = nullptr) {
    own_kernel_v()(out, ldo, in, ldi, R, K, packed, n, bias, nullptr, 0, epi);
}
// 64-byte aligned floats for a packed slice of the own kernel.
struct Aligned {
    void operator()(float* p) const { std::free(p); }
};
using OwnBuffer = std::unique_ptr<float, Aligned>;
OwnBuffer own_buffer(size_t floats) {
    void* p = std::aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return OwnBuffer(static_cast<float*>(p));
}

// Values sampled from a matrix: changed weights change them (an optimizer step
// moves every element; loading new weights into the same buffer too).
constexpr int kSamples = 16;
struct Fingerprint {
    float w[kSamples] = {}, b[2] = {};
    bool operator==(const Fingerprint& o) const { return std::memcmp(this, &o, sizeof(*this)) == 0; }
};
Fingerprint fingerprint(const float* W, const float* b, size_t n, int O) {
    Fingerprint f;
    for (int k = 0; k < kSamples; ++k) f.w[k] = W[(n - 1) * size_t(k) / (kSamples - 1)];
    if (b) f.b[0] = b[0], f.b[1] = b[O - 1];
    return f;
}
}  // namespace

struct Slice {
    uint64_t id = 0;                // names the slice in each thread's memory-object cache
    int c0 = 0, c1 = 0;             // output columns [c0, c1)
    bool dense = false;             // computed as a dense block, then copied (see MatrixSlice)
    dnnl::matmul prim;
    dnnl::memory::desc src, bias, dst;
    dnnl::memory weights;           // W[c0:c1].T in the kernel's blocked layout
    size_t scratch = 0;
    std::shared_ptr<float> own;     // or W[c0:c1] packed for the own kernel (own_kernel_v())
};

struct Packed {
    int R = 0, I = 0, O = 0;
    const float* b = nullptr;
    Fingerprint fp;
    std::vector<Slice> slices;
    size_t bytes = 0;
};

struct PackSet {
    std::mutex m;
    struct Entry {
        std::shared_ptr<const Packed> p;
        uint64_t used = 0;  // when it was last handed out (the set's clock)
    };
    std::map<std::tuple<const float*, const float*, int, int>, Entry> packs;
    uint64_t clock = 0;
};
// Row counts kept per matrix: a pack is made for a row count (the tokens of a run), and runs with
// patches dropped have fewer; the least recently used row count goes when a third one comes, so a
// session that drops patch after patch does not keep a copy of the weights for each count.
constexpr int kRowCountsPerMatrix = 2;

Packs::Packs() : set_(std::make_shared<PackSet>()) {}
Packs::~Packs() = default;
Packs::Packs(const Packs&) : set_(std::make_shared<PackSet>()) {}
Packs::Packs(Packs&& o) noexcept : set_(std::move(o.set_)) { o.set_ = std::make_shared<PackSet>(); }
Packs& Packs::operator=(const Packs& o) {
    if (this != &o) set_ = std::make_shared<PackSet>();
    return *this;
}
Packs& Packs::operator=(Packs&& o) noexcept {
    if (this != &o) {
        set_ = std::move(o.set_);
        o.set_ = std::make_shared<PackSet>();
    }
    return *this;
}
void Packs::clear() {
    std::lock_guard<std::mutex> l(set_->m);
    set_->packs.clear();
}
size_t Packs::bytes() const {
    std::lock_guard<std::mutex> l(set_->m);
    size_t n = 0;
    for (const auto& [k, e] : set_->packs) n += e.p->bytes;
    return n;
}

namespace {
// dst: (R, n) with row stride ld (O for out's columns in place, n for a dense block).
dnnl::matmul::primitive_desc matmul_pd(int R, int I, int64_t n, int64_t ld, const dnnl::memory::desc& w, bool bias) {
    const dnnl::memory::desc src(dims{R, I}, dt::f32, dims{I, 1});
    const dnnl::memory::desc dst(dims{R, n}, dt::f32, dims{ld, 1});
    const dnnl::memory::desc b = bias ? dnnl::memory::desc(dims{1, n}, dt::f32, tag::ab) : dnnl::memory::desc();
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, w, b, dst), attr, engine());
}
bool plain(const dnnl::memory::desc& d) {
    return d.data.format_kind == dnnl_blocked && d.data.format_desc.blocking.inner_nblks == 0;
}
// A slice's matmul for R rows of in(R, I) and n of out's O columns, with the weights' layout left
// to the kernel: as a dense block (`dense`) where the kernel then keeps the weights in a blocked
// layout that takes no more memory than W itself (a layout padded to its block width would hold
// the weights once and a bit: ViT-Ti's 96-column slices would take a third more); otherwise
// out's columns in place.
dnnl::matmul::primitive_desc slice_pd(int R, int I, int64_t n, int O, bool bias, bool& dense) {
    const dnnl::memory::desc any(dims{I, n}, dt::f32, tag::any);
    auto pd = matmul_pd(R, I, n, n, any, bias);
    dense = n < O && !plain(pd.weights_desc()) && pd.weights_desc().get_size() == size_t(I) * size_t(n) * sizeof(float);
    if (n < O && !dense) pd = matmul_pd(R, I, n, O, any, bias);
    return pd;
}
// The calling thread's buffer for dense blocks (a slice's result before it goes to out's columns).
float* block_buffer(size_t floats) {
    thread_local std::vector<float> buf;
    if (buf.size() < floats) buf.resize(floats);
    return buf.data();
}
}  // namespace

namespace {
std::shared_ptr<const Packed> make_packed(const float* W, const float* b, int R, int I, int O, int parts) {
    auto p = std::make_shared<Packed>();
    p->R = R, p->I = I, p->O = O, p->b = b;
    p->fp = fingerprint(W, b, size_t(O) * size_t(I), O);
    parts = std::max(1, std::min(parts, O / 16));
    for (int t = 0; t < parts; ++t) {
        Slice s;
        static std::atomic<uint64_t> next_id{1};
        s.id = next_id++;
        // Column slices on 16-float boundaries (the kernel's block width).
        s.c0 = int(int64_t(O / 16) * t / parts) * 16;
        s.c1 = t + 1 == parts ? O : int(int64_t(O / 16) * (t + 1) / parts) * 16;
        const int64_t n = s.c1 - s.c0;
        if (own_kernel_v()) {
            const size_t floats = own::packed_floats(I, int(n));
            s.own = std::shared_ptr<float>(own_buffer(floats).release(), Aligned());
            own::pack(s.own.get(), W + size_t(s.c0) * size_t(I), size_t(I), I, int(n));
            p->bytes += floats * sizeof(float);
            p->slices.push_back(std::move(s));
            continue;
        }
        // the same choice of kernel and output as pack_matrix's (a pass with these packs and one
        // with the matrices held packed give the same bits)
        const auto pd = slice_pd(R, I, n, O, b != nullptr, s.dense);
        s.src = pd.src_desc(), s.dst = pd.dst_desc(), s.bias = pd.bias_desc();
        s.prim = dnnl::matmul(pd);
        s.scratch = pd.scratchpad_desc().get_size();
        // W(O, I) row-major: element (k, j) of the slice's (I, n) weight is W[(c0 + j) * I + k].
        const dnnl::memory::desc w_user(dims{I, n}, dt::f32, dims{1, I});
        dnnl::memory user(w_user, engine(), const_cast<float*>(W) + size_t(s.c0) * size_t(I));
        s.weights = dnnl::memory(pd.weights_desc(), engine());
        dnnl::reorder(user, s.weights).execute(stream(), user, s.weights);
        stream().wait();
        p->bytes += pd.weights_desc().get_size();
        p->slices.push_back(std::move(s));
    }
    return p;
}
}  // namespace

std::shared_ptr<const Packed> packed(const Packs& packs, const float* W, const float* b, int R, int I, int O,
                                     int parts) {
    PackSet& set = packs.set();
    const auto key = std::make_tuple(W, b, R, parts);
    std::lock_guard<std::mutex> l(set.m);
    auto it = set.packs.find(key);
    if (it != set.packs.end()) {
        const Packed& p = *it->second.p;
        if (p.I == I && p.O == O && p.fp == fingerprint(W, b, size_t(O) * size_t(I), O)) {
            it->second.used = ++set.clock;
            return it->second.p;
        }
    }
    try {
        auto p = make_packed(W, b, R, I, O, parts);
        // the same matrix packed for other row counts: keep the most recently used ones
        std::vector<decltype(set.packs)::iterator> others;
        for (auto o = set.packs.begin(); o != set.packs.end(); ++o)
            if (std::get<0>(o->first) == W && std::get<1>(o->first) == b && std::get<3>(o->first) == parts &&
                std::get<2>(o->first) != R)
                others.push_back(o);
        std::sort(others.begin(), others.end(), [](auto a, auto c) { return a->second.used > c->second.used; });
        for (size_t i = kRowCountsPerMatrix - 1; i < others.size(); ++i) set.packs.erase(others[i]);
        set.packs[key] = {p, ++set.clock};
        return p;
    } catch (const dnnl::error& e) {
        throw std::runtime_error(std::string("oneDNN could not pack a ") + std::to_string(O) + "x" +
                                 std::to_string(I) + " weight for " + std::to_string(R) + " rows: " + e.what());
    }
}

int parts(const Packed& p) { return int(p.slices.size()); }

namespace {
// Each thread's memory objects for the slices it ran: creating the four objects
// a call needs cost ~20 us (ViT-Ti's qkv half-slice: 136 us a call with new
// objects, 116 with these), while setting their pointers is free.
struct Mems {
    dnnl::memory src, dst, bias, scratch;
};
Mems& mems_for(uint64_t id, const dnnl::memory::desc& src, const dnnl::memory::desc& dst,
                const dnnl::memory::desc& bias, size_t scratch_bytes) {
    thread_local std::unordered_map<uint64_t, Mems> cache;
    auto it = cache.find(id);
    if (it != cache.end()) return it->second;
    if (cache.size() > 4096) cache.clear();  // slices of models long gone
    dnnl::engine& e = engine();
    Mems m;
    m.src = dnnl::memory(src, e, DNNL_MEMORY_NONE);
    m.dst = dnnl::memory(dst, e, DNNL_MEMORY_NONE);
    if (bias) m.bias = dnnl::memory(bias, e, DNNL_MEMORY_NONE);
    m.scratch = dnnl::memory(dnnl::memory::desc(dims{int64_t(scratch_bytes)}, dt::u8, tag::a), e, DNNL_MEMORY_NONE);
    return cache.emplace(id, std::move(m)).first->second;
}
}  // namespace

void run(const Packed& p, int part, float* out, const float* in) {
    const Slice& s = p.slices.at(size_t(part));
    const size_t n = size_t(s.c1 - s.c0);
    if (s.own) {
        own_run(out + s.c0, size_t(p.O), in, size_t(p.I), p.R, p.I, s.own.get(), int(n), p.b ? p.b + s.c0 : nullptr);
        return;
    }
    Mems& m = mems_for(s.id, s.src, s.dst, s.bias, s.scratch);
    float* dst = s.dense ? block_buffer(size_t(p.R) * n) : out + s.c0;
    m.src.set_data_handle(const_cast<float*>(in));
    m.dst.set_data_handle(dst);
    m.scratch.set_data_handle(scratch(s.scratch));
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, m.src.get()}, {DNNL_ARG_WEIGHTS, s.weights.get()},
                               {DNNL_ARG_DST, m.dst.get()}, {DNNL_ARG_SCRATCHPAD, m.scratch.get()}, {0, nullptr}};
    int nargs = 4;
    if (p.b) {
        m.bias.set_data_handle(const_cast<float*>(p.b) + s.c0);
        args[nargs++] = {DNNL_ARG_BIAS, m.bias.get()};
    }
    OneThread one;
    const dnnl_status_t st = dnnl_primitive_execute(s.prim.get(), stream().get(), nargs, args);
    if (st != dnnl_success)
        throw std::runtime_error("oneDNN matmul failed on " + std::to_string(p.R) + "x" + std::to_string(p.I) +
                                 " @ " + std::to_string(p.I) + "x" + std::to_string(p.O) + " (status " +
                                 std::to_string(int(st)) + ")");
    if (s.dense)
        for (size_t r = 0; r < size_t(p.R); ++r)
            std::memcpy(out + r * size_t(p.O) + s.c0, dst + r * n, sizeof(float) * n);
}

void sgemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
           float beta, float* C, int ldc) {
    if (M <= 0 || N <= 0) return;
    OneThread one;
    const dnnl_status_t st =
        dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (st != dnnl_success)
        throw std::runtime_error("oneDNN sgemm failed on " + std::to_string(M) + "x" + std::to_string(K) + " @ " +
                                 std::to_string(K) + "x" + std::to_string(N) + " (status " +
                                 std::to_string(int(st)) + ")");
}

struct MatrixSlice {
    int c0 = 0, c1 = 0;
    // The kernel writes a dense (R, c1 - c0) block (a buffer of the calling thread, then copied
    // into out's columns) rather than out's columns in place: oneDNN's blocked-weight kernel
    // (brgemm) takes only a dense output, and with a strided one it falls back to a kernel that
    // re-packs the weights on every call. False where the CPU has no such kernel (before AVX-512)
    // or the slice is all of out's columns (dense in place).
    bool dense = false;
    dnnl::memory::desc wdesc;   // the blocked layout chosen for the packing row count
    dnnl::memory weights;       // W[c0:c1].T in that layout
    OwnBuffer own;              // or W[c0:c1] packed for the own kernel (own_kernel_v())
};
struct Matrix {
    uint64_t id = 0;  // names the matrix in each thread's primitive cache (run): never reused
    int I = 0, O = 0;
    std::vector<MatrixSlice> slices;
    size_t bytes = 0;
    // One primitive per (row count, slice, bias or not), made on first use with the slice's layout.
    struct Prim {
        uint64_t id = 0;
        dnnl::matmul prim;
        dnnl::memory::desc src, bias, dst;
        size_t scratch = 0;
    };
    mutable std::mutex m;
    mutable std::map<std::tuple<int, int, bool>, std::shared_ptr<const Prim>> prims;
};

std::shared_ptr<const Matrix> pack_matrix(const float* W, int I, int O, int parts, int R, bool onednn) {
    auto m = std::make_shared<Matrix>();
    static std::atomic<uint64_t> next_matrix{1};
    m->id = next_matrix++;
    m->I = I, m->O = O;
    parts = std::max(1, std::min(parts, O / 16));
    try {
        for (int t = 0; t < parts; ++t) {
            MatrixSlice s;
            s.c0 = int(int64_t(O / 16) * t / parts) * 16;
            s.c1 = t + 1 == parts ? O : int(int64_t(O / 16) * (t + 1) / parts) * 16;
            const int64_t n = s.c1 - s.c0;
            if (own_kernel_v() && !onednn) {
                const size_t floats = own::packed_floats(I, int(n));
                s.own = own_buffer(floats);
                own::pack(s.own.get(), W + size_t(s.c0) * size_t(I), size_t(I), I, int(n));
                m->bytes += floats * sizeof(float);
                m->slices.push_back(std::move(s));
                continue;
            }
            const auto pd = slice_pd(std::max(R, 1), I, n, O, true, s.dense);
            s.wdesc = pd.weights_desc();
            const dnnl::memory::desc w_user(dims{I, n}, dt::f32, dims{1, I});
            dnnl::memory user(w_user, engine(), const_cast<float*>(W) + size_t(s.c0) * size_t(I));
            s.weights = dnnl::memory(s.wdesc, engine());
            dnnl::reorder(user, s.weights).execute(stream(), user, s.weights);
            stream().wait();
            m->bytes += s.wdesc.get_size();
            m->slices.push_back(std::move(s));
        }
    } catch (const dnnl::error& e) {
        throw std::runtime_error(std::string("oneDNN could not pack a ") + std::to_string(O) + "x" +
                                 std::to_string(I) + " weight: " + e.what());
    }
    return m;
}

int parts(const Matrix& m) { return int(m.slices.size()); }
int first_column(const Matrix& m, int part) { return m.slices.at(size_t(part)).c0; }
int end_column(const Matrix& m, int part) { return m.slices.at(size_t(part)).c1; }
int rows(const Matrix& m) { return m.O; }
int cols(const Matrix& m) { return m.I; }
size_t bytes(const Matrix& m) { return m.bytes; }

void unpack(const Matrix& m, float* W) {
    for (const MatrixSlice& s : m.slices) {
        if (s.own) {
            own::unpack(W + size_t(s.c0) * size_t(m.I), size_t(m.I), s.own.get(), m.I, s.c1 - s.c0);
            continue;
        }
        const dnnl::memory::desc w_user(dims{m.I, s.c1 - s.c0}, dt::f32, dims{1, m.I});
        dnnl::memory user(w_user, engine(), W + size_t(s.c0) * size_t(m.I));
        dnnl::memory src(s.wdesc, engine(), s.weights.get_data_handle());
        dnnl::reorder(src, user).execute(stream(), src, user);
        stream().wait();
    }
}

bool fusable(const Matrix& m, int head_cols) {
    if (m.I <= 0 || m.slices.empty()) return false;
    for (const MatrixSlice& s : m.slices) {
        if (!s.own) return false;
        if (head_cols > 0 && (m.O % 3 || (m.O / 3) % head_cols || !own::heads_fit(s.c0, s.c1 - s.c0, head_cols)))
            return false;
    }
    return true;
}

void run_gelu(const Matrix& m, int part, float* pre, float* post, size_t ldp, const float* in, const float* b, int R,
              bool stream) {
    const MatrixSlice& s = m.slices.at(size_t(part));
    if (!s.own || m.I <= 0) throw std::logic_error("gemm::run_gelu: not a matrix of the own kernel (gemm::fusable)");
    own::Epilogue e;
    e.post = post + s.c0, e.ldp = ldp, e.stream = stream;
    own_run(pre + s.c0, size_t(m.O), in, size_t(m.I), R, m.I, s.own.get(), s.c1 - s.c0, b ? b + s.c0 : nullptr, &e);
}

void run_heads(const Matrix& m, int part, float* const* heads, int head_cols, const float* in, const float* b, int R) {
    const MatrixSlice& s = m.slices.at(size_t(part));
    if (!fusable(m, head_cols)) throw std::logic_error("gemm::run_heads: the matrix does not split into heads here");
    own::Epilogue e;
    e.heads = heads, e.part_cols = m.O / 3, e.head_cols = head_cols, e.col0 = s.c0, e.rows = size_t(R);
    own_run(nullptr, 0, in, size_t(m.I), R, m.I, s.own.get(), s.c1 - s.c0, b ? b + s.c0 : nullptr, &e);
}

Block run(const Matrix& m, int part, float* out, const float* in, const float* b, int R, Out mode) {
    const MatrixSlice& s = m.slices.at(size_t(part));
    const size_t n = size_t(s.c1 - s.c0);
    if (s.own) {
        // in place where out is read again; otherwise into the thread's dense block, from which the
        // epilogue reads it and (Streamed) it goes to out past the caches
        const float* bias = b ? b + s.c0 : nullptr;
        if (mode == Out::Cached) {
            own_run(out + s.c0, size_t(m.O), in, size_t(m.I), R, m.I, s.own.get(), int(n), bias);
            return {out + s.c0, size_t(m.O)};
        }
        float* dst = block_buffer(size_t(R) * n);
        own_run(dst, n, in, size_t(m.I), R, m.I, s.own.get(), int(n), bias);
        if (mode == Out::Streamed) {
            const auto& k = vit::ops::kernels::best();
            for (size_t r = 0; r < size_t(R); ++r) k.copy_stream(out + r * size_t(m.O) + s.c0, dst + r * n, n);
            _mm_sfence();
        }
        return {dst, n};
    }
    // This thread's primitives by (matrix, row count, slice, bias or not): found without the
    // matrix's lock; a miss takes it and makes the primitive (once per matrix) or shares it.
    // Weak: the matrix owns its primitives, and they go with it.
    struct Key {
        uint64_t matrix;
        int R, part;
        bool bias;
        bool operator==(const Key& o) const { return matrix == o.matrix && R == o.R && part == o.part && bias == o.bias; }
    };
    struct Hash {
        size_t operator()(const Key& k) const {
            return std::hash<uint64_t>()(k.matrix * 0x9E3779B97F4A7C15ull ^ (uint64_t(uint32_t(k.R)) << 20) ^
                                         (uint64_t(k.part) << 1) ^ uint64_t(k.bias));
        }
    };
    thread_local std::unordered_map<Key, std::weak_ptr<const Matrix::Prim>, Hash> mine;
    const Key key{m.id, R, part, b != nullptr};
    std::shared_ptr<const Matrix::Prim> p;
    auto found = mine.find(key);
    if (found != mine.end()) p = found->second.lock();
    if (!p) {
        if (mine.size() > 4096) mine.clear();  // matrices of models long gone
        std::lock_guard<std::mutex> l(m.m);
        auto& e = m.prims[std::make_tuple(R, part, b != nullptr)];
        if (!e) {
            try {
                const auto pd = matmul_pd(R, m.I, s.c1 - s.c0, s.dense ? s.c1 - s.c0 : m.O, s.wdesc, b != nullptr);
                auto np = std::make_shared<Matrix::Prim>();
                static std::atomic<uint64_t> next_id{uint64_t(1) << 48};
                np->id = next_id++;
                np->prim = dnnl::matmul(pd);
                np->src = pd.src_desc(), np->dst = pd.dst_desc(), np->bias = pd.bias_desc();
                np->scratch = pd.scratchpad_desc().get_size();
                e = np;
            } catch (const dnnl::error& err) {
                throw std::runtime_error("oneDNN has no matmul for " + std::to_string(R) + "x" + std::to_string(m.I) +
                                         " @ a packed " + std::to_string(m.I) + "x" + std::to_string(m.O) +
                                         " weight: " + err.what());
            }
        }
        p = e;
        mine[key] = p;
    }
    // the same per-thread memory objects as the Packs' slices, under the primitive's own id
    Mems& mm = mems_for(p->id, p->src, p->dst, p->bias, p->scratch);
    float* dst = s.dense ? block_buffer(size_t(R) * n) : out + s.c0;
    mm.src.set_data_handle(const_cast<float*>(in));
    mm.dst.set_data_handle(dst);
    mm.scratch.set_data_handle(scratch(p->scratch));
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, mm.src.get()}, {DNNL_ARG_WEIGHTS, s.weights.get()},
                               {DNNL_ARG_DST, mm.dst.get()}, {DNNL_ARG_SCRATCHPAD, mm.scratch.get()}, {0, nullptr}};
    int nargs = 4;
    if (b) {
        mm.bias.set_data_handle(const_cast<float*>(b) + s.c0);
        args[nargs++] = {DNNL_ARG_BIAS, mm.bias.get()};
    }
    OneThread one;
    const dnnl_status_t st = dnnl_primitive_execute(p->prim.get(), stream().get(), nargs, args);
    if (st != dnnl_success)
        throw std::runtime_error("oneDNN matmul failed on " + std::to_string(R) + "x" + std::to_string(m.I) +
                                 " @ " + std::to_string(m.I) + "x" + std::to_string(m.O) + " (status " +
                                 std::to_string(int(st)) + ")");
    if (!s.dense) return {out + s.c0, size_t(m.O)};
    if (mode == Out::Streamed) {
        const auto& k = vit::ops::kernels::best();
        for (size_t r = 0; r < size_t(R); ++r) k.copy_stream(out + r * size_t(m.O) + s.c0, dst + r * n, n);
        _mm_sfence();
    } else if (mode == Out::Cached) {
        for (size_t r = 0; r < size_t(R); ++r) std::memcpy(out + r * size_t(m.O) + s.c0, dst + r * n, sizeof(float) * n);
    }
    return {dst, n};
}

bool own_kernel() { return own_kernel_v() != nullptr; }
std::string own_kernel_isa() {
    const own::Run k = own_kernel_v();
    return k == own::avx512::run ? "AVX-512" : k == own::avx2::run ? "AVX2" : "";
}

std::string version() {
    const dnnl_version_t* v = dnnl_version();
    return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

std::string isa() {
    switch (dnnl_get_effective_cpu_isa()) {
        case dnnl_cpu_isa_sse41: return "SSE4.1";
        case dnnl_cpu_isa_avx: return "AVX";
        case dnnl_cpu_isa_avx2: return "AVX2";
        case dnnl_cpu_isa_avx512_mic: case dnnl_cpu_isa_avx512_mic_4ops: return "AVX-512 (Xeon Phi)";
        case dnnl_cpu_isa_avx512_core: return "AVX-512";
        case dnnl_cpu_isa_avx512_core_vnni: return "AVX-512 VNNI";
        case dnnl_cpu_isa_avx512_core_bf16: return "AVX-512 BF16";
        case dnnl_cpu_isa_avx512_core_amx: return "AVX-512 AMX";
        case dnnl_cpu_isa_avx2_vnni: return "AVX2 VNNI";
        default: return "baseline x86-64";
    }
}

std::string describe() {
    return version() + ", " + isa() + " kernels (chosen by oneDNN for this CPU; ONEDNN_MAX_CPU_ISA caps it)";
}

}  // namespace vit::gemm
