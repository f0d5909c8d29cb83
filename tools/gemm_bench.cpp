// vitscope-gemm-bench: sgemm GFLOP/s of the BLAS libraries on this machine, on
// the GEMM shapes of a ViT forward pass (row-major, B transposed as in
// nn.Linear: out(M,N) = in(M,K) @ W(N,K).T).
//
//   vitscope-gemm-bench                 every backend this machine can run
//   vitscope-gemm-bench --backend openblas:SkylakeX --shapes vit-b
//
// Each backend is loaded with dlopen (nothing is linked), and each OpenBLAS
// core type runs in a child process of its own with OPENBLAS_CORETYPE set,
// because OpenBLAS picks its kernel once, when it is loaded.
//
// Threading modes:
//   t1     one thread, the whole GEMM
//   t2omp  two OpenMP threads, each a single-threaded GEMM on half of the output
//          (rows or columns, the same split as vit::ops::linear): how ViTScope calls BLAS
//   t2lib  the library's own two threads
#include <dlfcn.h>
#include <omp.h>
#include <unistd.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

enum Order { RowMajor = 101 };
enum Trans { NoTrans = 111, Trans = 112 };
using cblas_sgemm_t = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float,
                               float*, int);
using dnnl_sgemm_t = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                             int64_t, float, float*, int64_t);

struct Backend {
    std::string name;  // openblas:CORE, dnnl, blis
    void* lib = nullptr;
    cblas_sgemm_t cblas = nullptr;
    dnnl_sgemm_t dnnl = nullptr;
    void (*set_threads)(int) = nullptr;       // openblas_set_num_threads
    void (*blis_set_threads)(int64_t) = nullptr;
    std::string detail;

    // C(M,N) = A(M,K) @ B(N,K).T, single call; ld's are the full matrices'.
    void gemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc) const {
        if (dnnl) dnnl('N', 'T', M, N, K, 1.f, A, lda, B, ldb, 0.f, C, ldc);
        else cblas(RowMajor, NoTrans, Trans, M, N, K, 1.f, A, lda, B, ldb, 0.f, C, ldc);
    }
    void threads(int n) const {
        if (set_threads) set_threads(n);
        if (blis_set_threads) blis_set_threads(n);
        omp_set_num_threads(n);  // oneDNN (and BLIS-openmp) use OpenMP's count
    }
};

void* must_dlopen(const char* path) {
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) { std::fprintf(stderr, "gemm-bench: cannot load %s: %s\n", path, dlerror()); std::exit(3); }
    return h;
}

Backend load(const std::string& name) {
    Backend b;
    b.name = name;
    if (name.rfind("openblas", 0) == 0) {
        // The child was started with OPENBLAS_CORETYPE already in its environment.
        b.lib = must_dlopen("libopenblas.so.0");
        b.cblas = (cblas_sgemm_t)dlsym(b.lib, "cblas_sgemm");
        b.set_threads = (void (*)(int))dlsym(b.lib, "openblas_set_num_threads");
        auto corename = (char* (*)())dlsym(b.lib, "openblas_get_corename");
        auto config = (char* (*)())dlsym(b.lib, "openblas_get_config");
        b.detail = std::string("kernel ") + (corename ? corename() : "?") + ", " + (config ? config() : "");
    } else if (name == "dnnl") {
        b.lib = must_dlopen("libdnnl.so.2");
        b.dnnl = (dnnl_sgemm_t)dlsym(b.lib, "dnnl_sgemm");
        struct V { int major, minor, patch; const char* hash; unsigned cpu_runtime, gpu_runtime; };
        auto ver = (const V* (*)())dlsym(b.lib, "dnnl_version");
        if (ver) b.detail = "oneDNN " + std::to_string(ver()->major) + "." + std::to_string(ver()->minor) + "." +
                            std::to_string(ver()->patch);
    } else if (name == "blis") {
        b.lib = must_dlopen("libblis.so.4");
        b.cblas = (cblas_sgemm_t)dlsym(b.lib, "cblas_sgemm");
        b.blis_set_threads = (void (*)(int64_t))dlsym(b.lib, "bli_thread_set_num_threads");
        auto ver = (const char* (*)())dlsym(b.lib, "bli_info_get_version_str");
        b.detail = std::string("BLIS ") + (ver ? ver() : "?");
    } else {
        std::fprintf(stderr, "gemm-bench: unknown backend '%s'\n", name.c_str());
        std::exit(2);
    }
    if (!b.cblas && !b.dnnl) { std::fprintf(stderr, "gemm-bench: %s has no sgemm\n", name.c_str()); std::exit(3); }
    return b;
}

struct Shape { const char* what; int M, N, K; };

std::vector<Shape> shapes_for(const std::string& set) {
    std::vector<Shape> v;
    if (set == "vit-b" || set == "all") {
        v.push_back({"vit-b qkv", 197, 2304, 768});
        v.push_back({"vit-b proj", 197, 768, 768});
        v.push_back({"vit-b fc1", 197, 3072, 768});
        v.push_back({"vit-b fc2", 197, 768, 3072});
    }
    if (set == "vit-ti" || set == "all") {
        v.push_back({"vit-ti qkv", 197, 576, 192});
        v.push_back({"vit-ti proj", 197, 192, 192});
        v.push_back({"vit-ti fc1", 197, 768, 192});
        v.push_back({"vit-ti fc2", 197, 192, 768});
    }
    if (set == "peak" || set == "all") v.push_back({"square", 2048, 2048, 2048});
    if (v.empty()) { std::fprintf(stderr, "gemm-bench: unknown shape set '%s'\n", set.c_str()); std::exit(2); }
    return v;
}

// One timed call in the given mode.
void run_once(const Backend& b, const std::string& mode, const Shape& s, const float* A, const float* B, float* C) {
    if (mode != "t2omp") { b.gemm(s.M, s.N, s.K, A, s.K, B, s.K, C, s.N); return; }
    const int R = s.M, O = s.N, I = s.K;
#pragma omp parallel num_threads(2)
    {
        int t = omp_get_thread_num(), n = omp_get_num_threads();
        if (R >= 8 * n && R >= O / 4) {  // vit::ops::linear's rule
            int r0 = int(int64_t(R) * t / n), r1 = int(int64_t(R) * (t + 1) / n);
            b.gemm(r1 - r0, O, I, A + size_t(r0) * I, I, B, I, C + size_t(r0) * O, O);
        } else {
            int c0 = int(int64_t(O) * t / n), c1 = int(int64_t(O) * (t + 1) / n);
            b.gemm(R, c1 - c0, I, A, I, B + size_t(c0) * I, I, C + c0, O);
        }
    }
}

// GFLOP/s of the median and the best of `reps` timed batches (each >= 50 ms).
std::pair<double, double> measure(const Backend& b, const std::string& mode, const Shape& s, int reps) {
    std::vector<float> A(size_t(s.M) * s.K), B(size_t(s.N) * s.K), C(size_t(s.M) * s.N);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1, 1);
    for (auto& x : A) x = u(rng);
    for (auto& x : B) x = u(rng);
    if (mode == "t2lib") b.threads(2);
    else { b.threads(1); omp_set_num_threads(2); }
    const double flop = 2.0 * s.M * s.N * s.K;
    using clk = std::chrono::steady_clock;
    // Warm up and size a batch to ~50 ms.
    int calls = 1;
    for (;;) {
        auto t0 = clk::now();
        for (int i = 0; i < calls; ++i) run_once(b, mode, s, A.data(), B.data(), C.data());
        double dt = std::chrono::duration<double>(clk::now() - t0).count();
        if (dt > 0.05) break;
        calls = std::max(calls * 2, int(calls * 0.06 / std::max(dt, 1e-6)));
    }
    std::vector<double> g;
    for (int r = 0; r < reps; ++r) {
        auto t0 = clk::now();
        for (int i = 0; i < calls; ++i) run_once(b, mode, s, A.data(), B.data(), C.data());
        double dt = std::chrono::duration<double>(clk::now() - t0).count();
        g.push_back(flop * calls / dt / 1e9);
    }
    std::sort(g.begin(), g.end());
    return {g[g.size() / 2], g.back()};
}

int child(const std::string& backend, const std::string& set, const std::string& modes, int reps) {
    Backend b = load(backend);
    std::printf("# %s: %s\n", backend.c_str(), b.detail.c_str());
    for (const Shape& s : shapes_for(set)) {
        size_t p = 0;
        std::string ms = modes + ",";
        while (p < ms.size()) {
            size_t q = ms.find(',', p);
            std::string mode = ms.substr(p, q - p);
            p = q + 1;
            if (mode.empty()) continue;
            if (mode != "t1" && mode != "t2omp" && mode != "t2lib") {
                std::fprintf(stderr, "gemm-bench: unknown mode '%s'\n", mode.c_str());
                return 2;
            }
            if (s.M >= 1024 && mode == "t2omp") continue;
            auto [med, best] = measure(b, mode, s, s.M >= 1024 ? std::max(2, reps / 3) : reps);
            std::printf("gemm backend=%s mode=%s shape=\"%s\" M=%d N=%d K=%d gflops=%.1f best=%.1f\n",
                        backend.c_str(), mode.c_str(), s.what, s.M, s.N, s.K, med, best);
            std::fflush(stdout);
        }
    }
    return 0;
}

bool cpu_has(const char* flag) {
    __builtin_cpu_init();
    std::string f = flag;
    if (f == "avx512f") return __builtin_cpu_supports("avx512f");
    if (f == "avx512bf16") return __builtin_cpu_supports("avx512bf16");
    if (f == "avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    std::string backend, set = "all", modes = "t1,t2omp,t2lib";
    int reps = 7;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) { std::fprintf(stderr, "gemm-bench: %s needs a value\n", a.c_str()); std::exit(2); }
            return argv[++i];
        };
        if (a == "--backend") backend = next();
        else if (a == "--shapes") set = next();
        else if (a == "--modes") modes = next();
        else if (a == "--reps") reps = std::max(1, std::atoi(next().c_str()));
        else {
            std::fprintf(stderr,
                         "usage: vitscope-gemm-bench [--backend openblas|openblas:CORE|dnnl|blis] "
                         "[--shapes vit-b|vit-ti|peak|all] [--modes t1,t2omp,t2lib] [--reps N]\n");
            return 2;
        }
    }
    if (!backend.empty() && backend.find(':') == std::string::npos) {
        if (backend == "openblas") unsetenv("OPENBLAS_CORETYPE");
        return child(backend, set, modes, reps);
    }
    if (!backend.empty()) {  // openblas:CORE
        setenv("OPENBLAS_CORETYPE", backend.substr(backend.find(':') + 1).c_str(), 1);
        return child(backend, set, modes, reps);
    }
    // Every backend, each in a child process (OpenBLAS reads its core type once).
    std::vector<std::string> all{"openblas"};
    if (cpu_has("avx2")) { all.push_back("openblas:Haswell"); all.push_back("openblas:Zen"); }
    if (cpu_has("avx512f")) { all.push_back("openblas:SkylakeX"); }
    if (cpu_has("avx512bf16")) all.push_back("openblas:Cooperlake");
    all.push_back("openblas:Prescott");
    all.push_back("dnnl");
    all.push_back("blis");
    int rc = 0;
    for (const auto& b : all) {
        std::fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            std::vector<std::string> args{argv[0], "--backend", b, "--shapes", set, "--modes", modes, "--reps",
                                          std::to_string(reps)};
            std::vector<char*> av;
            for (auto& s : args) av.push_back(s.data());
            av.push_back(nullptr);
            execv("/proc/self/exe", av.data());
            _exit(127);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            std::printf("# %s: failed (status %d)\n", b.c_str(), st);
            rc = 1;
        }
    }
    return rc;
}
