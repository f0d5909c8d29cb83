// vitscope-bench-interventions: seconds for the two sweeps of issue 21 (head importance: one head
// knocked out per pass; occlusion: one patch dropped per pass) as ViTScope runs them (reusing the
// clean run's stages before the block that changes, passes that record nothing) and the naive way
// (one full traced pass from the input per intervention). Driven by tools/bench_interventions.py,
// which times PyTorch doing the same with hooks in the same run and compares the numbers.
//
//   vitscope-bench-interventions --model FILE --input X.npy --out sweeps.npz [--naive] [--threads N]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/io/checkpoint.h"
#include "core/io/image.h"
#include "core/io/io.h"
#include "core/kernels/blas.h"
#include "core/kernels/ops.h"
#include "core/model/forward.h"
#include "core/teach/interventions.h"

using namespace vit;

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
    vit::blas::init();
    std::string model, input, out;
    bool naive = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
        if (a == "--model") model = next();
        else if (a == "--input") input = next();
        else if (a == "--out") out = next();
        else if (a == "--naive") naive = true;
        else if (a == "--threads") ops::set_threads(std::stoi(next()));
        else {
            std::fprintf(stderr, "usage: %s --model FILE --input X.npy --out sweeps.npz [--naive] [--threads N]\n", argv[0]);
            return 2;
        }
    }
    if (model.empty() || input.empty() || out.empty()) {
        std::fprintf(stderr, "vitscope-bench-interventions: --model, --input and --out are needed\n");
        return 2;
    }
    try {
        const LoadedModel lm = load_model(model);
        const Weights& w = lm.weights;
        const Config& c = w.cfg;
        const Tensor3 x = input_from_array(read_npy(input), c, input);
        const Options opt;
        // a warm-up pass (packs the weights), then the clean pass the sweeps start from
        Trace clean;
        forward(w, x, opt, clean);
        auto t0 = std::chrono::steady_clock::now();
        forward(w, x, opt, clean);
        const double full_s = seconds_since(t0);
        auto timed = [&](bool heads, bool reuse, SweepResult& r) {
            SweepControl ctl;
            ctl.reuse = reuse;
            const auto t = std::chrono::steady_clock::now();
            r = heads ? head_importance(w, x, opt, ctl, &clean) : occlusion(w, x, opt, ctl, &clean);
            return seconds_since(t);
        };
        SweepResult hi, oc, hi_n, oc_n;
        const double hi_s = timed(true, true, hi), oc_s = timed(false, true, oc);
        std::printf("model=%s threads=%d gemm=\"%s\"\n", c.name.c_str(), ops::threads(), ops::gemm_engine_short().c_str());
        std::printf("full_pass_s=%.4f\n", full_s);
        std::printf("head_importance passes=%d blocks=%.0f seconds=%.3f\n", hi.passes, hi.blocks, hi_s);
        std::printf("occlusion passes=%d blocks=%.0f seconds=%.3f\n", oc.passes, oc.blocks, oc_s);
        std::vector<ArrayRef> items{array_ref("head_importance", hi.values), array_ref("occlusion", oc.values)};
        if (naive) {
            const double hn = timed(true, false, hi_n), on = timed(false, false, oc_n);
            std::printf("head_importance_naive passes=%d seconds=%.3f same_bits=%d\n", hi_n.passes, hn,
                        int(std::memcmp(hi.values.data(), hi_n.values.data(), hi.values.size() * 4) == 0));
            std::printf("occlusion_naive passes=%d seconds=%.3f same_bits=%d\n", oc_n.passes, on,
                        int(std::memcmp(oc.values.data(), oc_n.values.data(), oc.values.size() * 4) == 0));
        }
        write_npz(out, items, {});
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "vitscope-bench-interventions: %s\n", e.what());
        return 1;
    }
}
