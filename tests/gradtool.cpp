// Test helper for tests/parity/test_grads.py: runs our backward and AdamW on
// a checkpoint and a batch, and writes the results for PyTorch to compare.
//   gradtool MODEL X.npy LABELS.npy OUTDIR [--no-affine] [--unbiased] [--mean]
#include <cstdio>
#include <fstream>
#include <string>

#include "core/io/checkpoint.h"
#include "core/io/io.h"
#include "core/train/train.h"

#include <xtensor/xview.hpp>

using namespace vit;

int main(int argc, char** argv) {
    if (argc < 5) { std::fprintf(stderr, "usage: gradtool MODEL X.npy LABELS.npy OUTDIR [flags]\n"); return 2; }
    try {
        Options opt;
        for (int i = 5; i < argc; ++i) {
            std::string f = argv[i];
            if (f == "--no-affine") opt.affine = false;
            else if (f == "--unbiased") opt.unbiased = true;
            else if (f == "--mean") opt.pooling = Pooling::Mean;
        }
        LoadedModel lm = load_model(argv[1]);
        Weights& w = lm.weights;
        Array xa = read_npy(argv[2]), yl = read_npy(argv[3]);
        if (xa.dimension() != 4) throw std::runtime_error("X must be (B, C, H, W)");
        Tensor4 x(std::move(xa));
        std::string out = argv[4];
        const size_t B = x.shape(0);
        std::vector<int> labels(B);
        for (size_t i = 0; i < B; ++i) labels[i] = int(yl.flat(i));
        Batch batch;
        Tensor2 dl;
        float loss = Batch::cross_entropy(batch.forward(w, x, opt), labels.data(), dl);
        Weights g = zeros_like(w);
        batch.backward(w, dl, g);
        std::ofstream(out + "/loss.txt") << loss << "\n";
        write_safetensors(out + "/grads.safetensors", param_refs(g), {});
        AdamW adam;
        adam.lr = 1e-2f; adam.weight_decay = 0.1f; adam.decay_all = true;
        adam.init(w);
        adam.update(w, g, adam.lr);
        adam.update(w, g, adam.lr);  // a second step exercises the bias corrections
        write_safetensors(out + "/adamw2.safetensors", param_refs(w), {});
        // Gradient of logit[labels[0]] w.r.t. every stage, for the first image (original weights).
        LoadedModel fresh = load_model(argv[1]);
        Tensor3 x0 = xt::view(x, 0);
        RunRequest req;
        req.grads = true;
        req.grad_class = labels[0];
        Trace t = run(fresh.weights, x0, opt, req);
        std::vector<ArrayRef> items;
        for (size_t i = 0; i < t.size(); ++i)
            if (const Array* g = t.grad_at(i)) items.push_back(array_ref(t.name(i) + ".grad", *g));
        write_npz(out + "/gradtrace.npz", items);
        std::ofstream(out + "/table.json") << stage_table_json(t.table()) << "\n";
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gradtool: %s\n", e.what());
        return 1;
    }
    return 0;
}
