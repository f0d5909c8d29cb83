// vitscope-bench: median time of the traced forward pass (every stage
// recorded) on one image. Driven by tools/bench.py, which times PyTorch on
// the same weights in the same run and prints the ratio.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>
#include <sys/resource.h>
#include <immintrin.h>

#include "core/kernels/blas.h"
#include "core/kernels/gemm.h"
#include "core/io/checkpoint.h"
#include "core/model/forward.h"
#include "core/kernels/ops.h"
#include "core/kernels/ops_kernels.h"
#include "core/kernels/profile.h"
#include "core/train/train.h"
#include "core/train/trainer.h"

// Median milliseconds of f() over `runs` calls.
template <class F>
static double median_ms(int runs, F&& f) {
    std::vector<double> ms;
    for (int r = 0; r < runs + 3; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        f();
        double d = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (r >= 3) ms.push_back(d);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

// --ops: the elementwise kernels on ViT-B/16 shapes, one thread (T=197, D=768,
// M=3072, H=12): what a build without -march=native must keep.
static int bench_ops(int runs) {
    vit::ops::set_threads(1);
    const int T = 197, D = 768, M = 3072, H = 12;
    std::mt19937 rng(0);
    std::normal_distribution<float> nd;
    std::vector<float> x(std::max(size_t(H) * T * T, size_t(T) * M)), y(x.size()), g(D, 1.1f), b(D, 0.1f), n2(size_t(T) * D), mean(T),
        sd(T), z(size_t(T) * M);
    for (auto& v : x) v = nd(rng);
    double gelu = median_ms(runs, [&] { vit::ops::gelu(z.data(), x.data(), size_t(T) * M); });
    double ln = median_ms(runs, [&] {
        vit::ops::layernorm(y.data(), n2.data(), mean.data(), sd.data(), x.data(), g.data(), b.data(), T, D, 1e-6f, false);
    });
    double sm = median_ms(runs, [&] { vit::ops::softmax_rows(y.data(), x.data(), H * T, T); });
    double add = median_ms(runs, [&] { vit::ops::add(y.data(), x.data(), x.data() + T * D, size_t(T) * D); });
    std::printf("ops kernels=%s gelu_ms=%.3f layernorm_ms=%.3f softmax_ms=%.3f add_ms=%.4f  "
                "(one thread; gelu %dx%d, layernorm %dx%d, softmax %dx%dx%d, add %dx%d)\n",
                vit::ops::kernels::best().name, gelu, ln, sm, add, T, M, T, D, H, T, T, T, D);
    return 0;
}

// CPU time of this process so far (every thread, user + system), in ms: a pass's share of it
// (cpu_ms) depends less on other processes taking the cores than its wall time does.
static double cpu_ms() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return (double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3);
}

// Peak resident memory of this process image. (getrusage's ru_maxrss survives
// execve on Linux, so a child of a big Python process would report the parent's.)
static double peak_mb() {
    std::FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    double kb = -1;
    while (std::fgets(line, sizeof line, f))
        if (std::strncmp(line, "VmHWM:", 6) == 0) kb = std::atof(line + 6);
    std::fclose(f);
    return kb / 1024.0;
}

// --gemm-peak: the packed matmul's GFLOP/s on a 2048^3 product, its column slices on every thread,
// with the own kernel (where it runs) and with oneDNN's: the machine's practical fp32 GEMM peak is
// the faster of the two. The matrices are made and packed once; best_gflops(reps) is the best of
// `reps` products on each engine.
struct PeakProbe {
    static constexpr int n = 2048;
    std::vector<float> in, out;
    std::shared_ptr<const vit::gemm::Matrix> own, onednn;
    PeakProbe() : in(size_t(n) * n), out(size_t(n) * n) {
        std::mt19937 rng(0);
        std::normal_distribution<float> nd;
        std::vector<float> W(size_t(n) * n);
        for (auto& v : W) v = nd(rng);
        for (auto& v : in) v = nd(rng);
        own = vit::gemm::pack_matrix(W.data(), n, n, vit::ops::threads(), n, false);
        onednn = vit::gemm::pack_matrix(W.data(), n, n, vit::ops::threads(), n, true);
    }
    double gflops(const vit::gemm::Matrix& m, int reps) {
        double best = 1e30;
        for (int r = 0; r < reps; ++r) {
            auto t0 = std::chrono::steady_clock::now();
            vit::ops::linear_packed(out.data(), in.data(), m, nullptr, n);
            best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        return 2.0 * n * n * double(n) / best / 1e9;
    }
    double best_gflops(int reps) { return std::max(gflops(*own, reps), gflops(*onednn, reps)); }
};

// The cores' FMA peak: on every thread at once, 12 independent chains of vector FMAs on registers
// alone (no memory), the widest vectors the kernels use (AVX-512, AVX2 or SSE2, ops::kernels::best()):
// the ceiling that no product can pass, GFLOP/s: the sum of each thread's best of 7 rounds.
template <class V, class Fma>
static float fma_chains(long iters, V init, Fma fma) {
    V acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = init;
    const V m = init;
    for (long it = 0; it < iters; ++it)
        for (int i = 0; i < 12; ++i) acc[i] = fma(acc[i], m);
    float sum = 0;
    for (int i = 0; i < 12; ++i) sum += reinterpret_cast<const float*>(&acc[i])[0];
    return sum;
}
// The AVX-512 and AVX2 chains are written out in functions of their own target (a lambda or template called
// from one does not inherit it: a build without -mavx512f, on a CPU without AVX-512, failed to compile them).
__attribute__((target("avx512f"))) static float fma_chains_avx512(long iters) {
    __m512 acc[12];
    const __m512 m = _mm512_set1_ps(0.999999f);
    for (int i = 0; i < 12; ++i) acc[i] = m;
    for (long it = 0; it < iters; ++it)
        for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, m);
    float sum = 0;
    for (int i = 0; i < 12; ++i) sum += _mm512_cvtss_f32(acc[i]);
    return sum;
}
__attribute__((target("avx2,fma"))) static float fma_chains_avx2(long iters) {
    __m256 acc[12];
    const __m256 m = _mm256_set1_ps(0.999999f);
    for (int i = 0; i < 12; ++i) acc[i] = m;
    for (long it = 0; it < iters; ++it)
        for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, m);
    float sum = 0;
    for (int i = 0; i < 12; ++i) sum += _mm256_cvtss_f32(acc[i]);
    return sum;
}
// SSE2 has no FMA: a multiply and an add per lane (the kernels' sse2 build, a CPU without AVX2).
static float fma_chains_sse2(long iters) {
    return fma_chains(iters, _mm_set1_ps(0.999999f), [](__m128 a, __m128 m) { return _mm_add_ps(_mm_mul_ps(a, m), m); });
}
static double fma_peak_gflops() {
    const std::string k = vit::ops::kernels::best().name;
    const int lanes = k == "avx512" ? 16 : k == "avx2" ? 8 : 4;  // never wider than the CPU has (best())
    const long iters = 500000;  // ~1.5 ms a round at 4 GHz
    const int n = vit::ops::threads();
    // every thread at once, each timing its own rounds and keeping its best: a thread that another
    // process holds off its core for a while (a scheduler slice is longer than a round) loses that
    // round only, not the others' (the region's time would be the slowest thread's)
    std::vector<double> rate(static_cast<size_t>(n));
    std::vector<float> sink(static_cast<size_t>(n));
    vit::ops::for_range(n, true, [&](int i) {
        double best = 1e30;
        for (int r = 0; r < 8; ++r) {
            auto t0 = std::chrono::steady_clock::now();
            sink[size_t(i)] += lanes == 16 ? fma_chains_avx512(iters) : lanes == 8 ? fma_chains_avx2(iters) : fma_chains_sse2(iters);
            if (r > 0) best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        rate[size_t(i)] = double(iters) * 12 * lanes * 2 / best / 1e9;
    });
    double sum = 0;
    for (double r : rate) sum += r;
    return sum;
}

// --gemm-layers: ViT-B/16's four linear layers (197 rows) through the packed matmul on every
// thread, each with one matrix (hot in cache) and with twelve in turn (as a pass meets them: a
// layer's weights come from memory): the most a pass's linear layers can reach on this machine.
static int gemm_layers() {
    const int R = 197, L = 12;
    struct Shape { const char* name; int I, O; } shapes[] = {{"qkv", 768, 2304}, {"proj", 768, 768}, {"fc1", 768, 3072},
                                                             {"fc2", 3072, 768}};
    std::mt19937 rng(0);
    std::normal_distribution<float> nd;
    double flops = 0, hot_s = 0, cold_s = 0;
    for (const Shape& sh : shapes) {
        std::vector<float> W(size_t(sh.I) * sh.O), b(size_t(sh.O)), in(size_t(R) * sh.I), out(size_t(R) * sh.O);
        for (auto& v : W) v = nd(rng) * 0.02f;
        for (auto& v : in) v = nd(rng);
        std::vector<std::shared_ptr<const vit::gemm::Matrix>> ms;
        for (int l = 0; l < L; ++l) ms.push_back(vit::gemm::pack_matrix(W.data(), sh.I, sh.O, vit::ops::threads(), R));
        auto median_s = [&](int n) {  // one call per matrix of the first n, median over 20 rounds
            std::vector<double> t;
            for (int r = 0; r < 23; ++r) {
                auto t0 = std::chrono::steady_clock::now();
                for (int l = 0; l < n; ++l) vit::ops::linear_packed(out.data(), in.data(), *ms[size_t(l)], b.data(), R);
                if (r >= 3) t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / n);
            }
            std::sort(t.begin(), t.end());
            return t[t.size() / 2];
        };
        const double hot = median_s(1), cold = median_s(L), f = 2.0 * R * sh.I * sh.O;
        flops += f, hot_s += hot, cold_s += cold;
        std::printf("gemm_layer %s %dx%d @ %dx%d hot_ms=%.3f hot_gflops=%.1f cold_ms=%.3f cold_gflops=%.1f\n", sh.name, R,
                    sh.I, sh.I, sh.O, hot * 1e3, f / hot / 1e9, cold * 1e3, f / cold / 1e9);
    }
    std::printf("gemm_layers per_block_hot_ms=%.3f per_block_cold_ms=%.3f hot_gflops=%.1f cold_gflops=%.1f threads=%d\n",
                hot_s * 1e3, cold_s * 1e3, flops / hot_s / 1e9, flops / cold_s / 1e9, vit::ops::threads());
    return 0;
}

int main(int argc, char** argv) {
    vit::blas::init();
    std::string model = "default";
    int runs = 10, warmup = 2, train_batch = 0, image_size = 0;
    bool prof = false, on_demand = false, kept = false, grads = false, paired = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) { std::fprintf(stderr, "vitscope-bench: %s needs a value\n", a.c_str()); std::exit(2); }
            return argv[++i];
        };
        if (a == "--model") model = next();
        else if (a == "--runs") runs = std::max(1, std::atoi(next().c_str()));
        else if (a == "--warmup") warmup = std::max(0, std::atoi(next().c_str()));
        else if (a == "--train-batch") train_batch = std::max(1, std::atoi(next().c_str()));
        else if (a == "--profile") prof = true;
        else if (a == "--on-demand") on_demand = true;
        else if (a == "--kept") on_demand = kept = true;
        else if (a == "--grads") grads = true;
        else if (a == "--paired") paired = true;
        else if (a == "--image-size") image_size = std::max(1, std::atoi(next().c_str()));
        else if (a == "--fma-peak") {
            std::printf("fma_peak_gflops=%.1f threads=%d kernels=%s\n", fma_peak_gflops(), vit::ops::threads(),
                        vit::ops::kernels::best().name);
            return 0;
        }
        else if (a == "--gemm-peak") {
            PeakProbe probe;
            probe.gflops(*probe.own, 1), probe.gflops(*probe.onednn, 1);  // warm-up
            const double own = probe.gflops(*probe.own, 5), onednn = probe.gflops(*probe.onednn, 5);
            std::printf("gemm_peak_gflops=%.1f threads=%d peak_own_gflops=%.1f peak_onednn_gflops=%.1f\ngemm: %s\n",
                        std::max(own, onednn), vit::ops::threads(), own, onednn, vit::ops::gemm_engine().c_str());
            return 0;
        }
        else if (a == "--ops") return bench_ops(runs * 10);
        else if (a == "--gemm-layers") return gemm_layers();
        else { std::fprintf(stderr, "usage: vitscope-bench [--model SPEC] [--runs N] [--warmup N] [--train-batch B] [--profile] [--ops] "
                                 "[--on-demand] [--kept] [--grads] [--image-size S] [--gemm-peak] [--gemm-layers] [--paired] [--fma-peak]\n"); return 2; }
    }
    try {
        auto l0 = std::chrono::steady_clock::now();
        vit::LoadedModel lm = vit::load_model(model);
        if (!train_batch) vit::pack_blocks(lm.weights);  // as the CLI and the window hold them
        const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - l0).count();
        const vit::Config& c = lm.weights.cfg;
        if (train_batch) {
            // Training throughput: the real Trainer (data-parallel forward, backward,
            // AdamW) on random 28x28 images, without augmentation.
            vit::Dataset d;
            d.rows = d.cols = c.image_size;
            d.n = train_batch * (runs + warmup);
            d.images.resize(size_t(d.n) * d.rows * d.cols);
            d.labels.resize(d.n);
            std::mt19937 rng(1);
            for (auto& p : d.images) p = uint8_t(rng());
            for (auto& l : d.labels) l = uint8_t(rng() % c.classes);
            vit::TrainSettings ts;
            ts.batch = train_batch; ts.epochs = 1; ts.augment = false;
            vit::Trainer tr(std::move(lm.weights), ts, d);
            std::chrono::steady_clock::time_point t0;
            tr.run_epoch([&](const vit::StepInfo& i) {
                if (i.step_in_epoch == warmup) t0 = std::chrono::steady_clock::now();
                return true;
            });
            double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            std::printf("ours_img_s=%.1f steps=%d peak_mb=%.1f\n", double(runs) * train_batch / s, runs, peak_mb());
            std::printf("gemm: %s\nblas: %s\n", vit::ops::gemm_engine().c_str(), vit::blas::describe().c_str());
            return 0;
        }
        const size_t S = size_t(image_size ? image_size : c.image_size);
        vit::Options opt;
        if (image_size) opt.image_h = opt.image_w = image_size;
        auto x = vit::Tensor3::from_shape({size_t(c.channels), S, S});
        std::mt19937 rng(0);
        std::normal_distribution<float> nd;
        for (auto& v : x) v = nd(rng);
        vit::Trace t;
        vit::Trace od;  // --on-demand: the kept pass, its blocks recomputed when read
        // one pass, without gradients: the kept one (what the window runs for a big model, into od) or
        // with every stage recorded (into t)
        auto pass = [&](bool keep) {
            if (keep) {
                vit::RunRequest rq;
                rq.on_demand = vit::borrowed(lm.weights);
                vit::forward(lm.weights, x, opt, od, rq);
            } else {
                vit::forward(lm.weights, x, opt, t);
            }
        };
        if (paired) {
            // --paired: the GEMM-peak fraction measured pair by pair. This machine's speed drifts by
            // 10-20% over seconds, so a pass timed in one second and the peak in another compare two
            // machines. Each pair takes, within about half a second, the best of 3 passes with every
            // stage recorded, the best of 3 with the stages kept (as the window runs a big model), and
            // the best of 2 products of --gemm-peak on each engine, and the cores' FMA peak (register-only FMA
            // chains: fma_peak_gflops); the order inside a pair alternates.
            // tools/bench.py divides the pass's FLOP by each pair's time and peak.
            PeakProbe probe;
            probe.best_gflops(1);
            auto best_ms = [&](bool keep) {
                double best = 1e30;
                for (int r = 0; r < 3; ++r) {
                    auto t0 = std::chrono::steady_clock::now();
                    pass(keep);
                    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
                }
                return best;
            };
            for (int r = 0; r < warmup; ++r) best_ms(false), best_ms(true);
            for (int r = 0; r < runs; ++r) {
                double full, keep, peak, fma;
                if (r % 2) fma = fma_peak_gflops(), peak = probe.best_gflops(2), full = best_ms(false), keep = best_ms(true);
                else full = best_ms(false), keep = best_ms(true), peak = probe.best_gflops(2), fma = fma_peak_gflops();
                std::printf("pair %d full_ms=%.3f kept_ms=%.3f peak_gflops=%.1f fma_gflops=%.1f\n", r, full, keep, peak, fma);
            }
            std::printf("gemm: %s\nthreads: %s\n", vit::ops::gemm_engine().c_str(), vit::ops::threading().c_str());
            return 0;
        }
        std::vector<double> ms, cpu;
        double first_ms = -1;
        // --grads: the pass with its backward (d logit[top-1] / d every stage); on demand, the
        // checkpointed backward, then one block's gradients (the last block's attention pattern's)
        vit::RunRequest req;
        req.grads = grads;
        for (int r = 0; r < warmup + runs; ++r) {
            const double c0 = cpu_ms();
            auto t0 = std::chrono::steady_clock::now();
            if (kept) {  // the pass the window runs for a big model (--stages auto): what it keeps, no block
                vit::RunRequest rq = req;
                rq.on_demand = vit::borrowed(lm.weights);
                vit::forward(lm.weights, x, opt, od, rq);
            } else if (on_demand) {  // what a picture needs: the kept pass, then one block's stages (the last)
                od = vit::Trace();
                vit::RunRequest rq = req;
                rq.on_demand = vit::borrowed(lm.weights);
                vit::forward(lm.weights, x, opt, od, rq);
                od.get(vit::StageId{vit::StageKind::AttnPattern, c.depth - 1});
                if (grads) od.grad(vit::StageId{vit::StageKind::AttnPattern, c.depth - 1});
            } else {
                vit::forward(lm.weights, x, opt, t, req);
            }
            double d = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (r == 0) first_ms = d;
            if (r >= warmup) ms.push_back(d), cpu.push_back(cpu_ms() - c0);
        }
        if (prof) {
            // One more run per profiled pass, each part timed (the timing adds a little overhead).
            vit::profile::Profile p;
            vit::profile::active() = &p;
            for (int r = 0; r < runs; ++r) pass(kept);
            vit::profile::active() = nullptr;
            double total = 0;
            for (auto& [k, v] : p.parts()) total += v.ms;
            std::printf("profile (%s, median forward %.2f ms; per forward, %d runs):\n", model.c_str(),
                        [&] { auto m = ms; std::sort(m.begin(), m.end()); return m[m.size() / 2]; }(), runs);
            std::printf("  %-52s %9s %7s %9s\n", "part", "ms", "share", "GFLOP/s");
            std::vector<std::pair<std::string, vit::profile::Part>> rows(p.parts().begin(), p.parts().end());
            std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.ms > b.second.ms; });
            for (auto& [k, v] : rows)
                std::printf("  %-52s %9.3f %6.1f%% %9s\n", k.c_str(), v.ms / runs, 100 * v.ms / total,
                            v.flops > 0 ? std::to_string(int(v.flops / (v.ms * 1e6))).c_str() : "-");
            std::printf("  %-52s %9.3f %6.1f%% %9s\n", "weight conversion (load, once)", load_ms, 0.0, "-");
            std::printf("  %-52s %9.3f\n", "sum of parts", total / runs);
        }
        std::sort(ms.begin(), ms.end());
        std::sort(cpu.begin(), cpu.end());
        std::printf("ours_ms=%.3f min_ms=%.3f cpu_ms=%.3f stages=%zu trace_mb=%.1f peak_mb=%.1f load_ms=%.1f first_ms=%.1f "
                    "weights_mb=%.1f mode=%s%s tokens=%d\n",
                    ms[ms.size() / 2], ms[0], cpu[cpu.size() / 2], (on_demand ? od : t).size(),
                    (on_demand ? od : t).bytes() / 1e6, peak_mb(), load_ms,
                    first_ms, vit::weights_bytes(lm.weights) / 1e6, kept ? "kept" : on_demand ? "on-demand" : "full", grads ? "+grads" : "",
                    vit::StageTable::get(c, opt)->dims().T);
        std::printf("gemm: %s\nblas: %s\nthreads: %s\n", vit::ops::gemm_engine().c_str(), vit::blas::describe().c_str(),
                    vit::ops::threading().c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "vitscope-bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
