#include "core/model/gradients.h"

#include <algorithm>

#include "core/model/backward.h"

namespace vit {

Trace gradient_trace(const Weights& w, const Tensor3& input, const Options& opt, int cls) {
    const Config& c = w.cfg;
    Tensor4 x = Tensor4::from_shape({1, input.shape(0), input.shape(1), input.shape(2)});
    std::copy(input.begin(), input.end(), x.begin());
    Batch b;
    Trace fwd;
    const Array& logits = b.forward(w, x, opt, &fwd);
    if (cls < 0) cls = int(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (cls >= c.classes) throw std::invalid_argument("class " + std::to_string(cls) + " is out of range");
    Tensor2 dl = xt::zeros<float>({size_t(1), size_t(c.classes)});
    dl(0, size_t(cls)) = 1.f;  // d logit[cls] / d logits
    Weights g = zeros_like(w);
    Trace t;
    b.backward(w, dl, g, &t);
    return t;
}

}  // namespace vit
