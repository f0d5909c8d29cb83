#include "core/train/evaluate.h"

#include <algorithm>

#include "core/train/train.h"

namespace vit {

EvalResult evaluate(const Weights& w, const Dataset& d, int limit, int batch,
                    const std::function<void(int, int)>& progress) {
    const Config& c = w.cfg;
    const int n = limit > 0 ? std::min(limit, d.n) : d.n;
    return evaluate_inputs(
        w, n,
        [&](int i, float* dst) {
            Tensor3 xi = dataset_input(d, i, c);
            std::copy(xi.begin(), xi.end(), dst);
        },
        [&](int i) { return int(d.labels[i]); }, batch, progress);
}

EvalResult evaluate_inputs(const Weights& w, int n, const std::function<void(int, float*)>& input,
                           const std::function<int(int)>& label, int batch, const std::function<void(int, int)>& progress) {
    const Config& c = w.cfg;
    EvalResult r;
    r.n = n;
    r.confusion.assign(size_t(c.classes) * c.classes, 0);
    Batch b;
    const size_t S = c.image_size, C = c.channels;
    int correct = 0;
    for (int s = 0; s < n; s += batch) {
        const int B = std::min(batch, n - s);
        Tensor4 x = Tensor4::from_shape({size_t(B), C, S, S});
        for (int i = 0; i < B; ++i) input(s + i, x.data() + size_t(i) * C * S * S);
        const Array& logits = b.forward(w, x, {});
        for (int i = 0; i < B; ++i) {
            const float* z = logits.data() + size_t(i) * c.classes;
            int pred = int(std::max_element(z, z + c.classes) - z);
            int lab = label(s + i);
            if (lab >= 0 && lab < c.classes) r.confusion[size_t(lab) * c.classes + pred]++;
            correct += pred == lab;
        }
        if (progress) progress(s + B, n);
    }
    r.accuracy = n ? double(correct) / n : 0;
    return r;
}

}  // namespace vit
