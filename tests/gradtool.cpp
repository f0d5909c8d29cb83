// Test helper for tests/parity/test_grads.py: runs our backward and AdamW on
// a checkpoint and a batch, and writes the results for PyTorch to compare.
//   gradtool MODEL X.npy LABELS.npy OUTDIR [--no-affine] [--unbiased] [--mean]
#include <cstdio>
#include <fstream>
#include <string>

#include "core/checkpoint.h"
#include "core/io.h"
#include "core/train.h"

using namespace vit;

int main(int argc, char** argv) {
    if (argc < 5) { std::fprintf(stderr, "usage: gradtool MODEL X.npy LABELS.npy OUTDIR [flags]\n"); return 2; }
    try {
        Options opt;
        for (int i = 5; i < argc; ++i) {
            std::string f = argv[i];
            if (f == "--no-affine") opt.affine = false;
            else if (f == "--unbiased") opt.unbiased = true;
            else if (f == "--mean") opt.pooling = int(Pooling::Mean);
        }
        LoadedModel lm = load_model(argv[1]);
        Weights& w = lm.weights;
        Tensor x = read_npy(argv[2]), yl = read_npy(argv[3]);
        std::string out = argv[4];
        int B = int(x[0]), K = w.cfg.classes;
        std::vector<int> labels(B);
        for (int i = 0; i < B; ++i) labels[i] = int(yl(i));
        Batch batch;
        std::vector<float> logits(size_t(B) * K), dl(size_t(B) * K);
        batch.forward(w, x.data(), B, opt, logits.data());
        float loss = Batch::cross_entropy(logits.data(), labels.data(), B, K, dl.data());
        Weights g = zeros_like(w);
        batch.backward(w, dl.data(), g);
        std::ofstream(out + "/loss.txt") << loss << "\n";
        {
            auto named = g.named();
            std::vector<std::pair<std::string, const Tensor*>> v(named.begin(), named.end());
            write_safetensors(out + "/grads.safetensors", v, {});
        }
        AdamW adam;
        adam.lr = 1e-2f; adam.weight_decay = 0.1f; adam.decay_all = true;
        adam.init(w);
        adam.update(w, g, adam.lr);
        adam.update(w, g, adam.lr);  // a second step exercises the bias corrections
        {
            auto named = w.named();
            std::vector<std::pair<std::string, const Tensor*>> v(named.begin(), named.end());
            write_safetensors(out + "/adamw2.safetensors", v, {});
        }
        // Gradient of logit[labels[0]] w.r.t. every stage, for the first image (original weights).
        LoadedModel fresh = load_model(argv[1]);
        Tensor x0({x[1], x[2], x[3]});
        std::copy_n(x.data(), x0.size(), x0.data());
        Trace t = gradient_trace(fresh.weights, x0, opt, labels[0]);
        std::vector<std::pair<std::string, const Tensor*>> items;
        for (auto& e : t.entries()) items.emplace_back(e.name, &e.tensor);
        write_npz(out + "/gradtrace.npz", items);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gradtool: %s\n", e.what());
        return 1;
    }
    return 0;
}
