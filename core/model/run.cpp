// A traced run: the forward pass recording every stage and, when asked, the backward
// pass writing every stage's gradient into the same trace (one call, one forward).
#include <algorithm>
#include <xtensor/xbuilder.hpp>

#include "core/model/backward.h"
#include "core/model/forward.h"

namespace vit {

namespace {
// The image as a batch of one (the same values seen as (1, C, S, S)).
Tensor4 batch_of_one(const Weights& w, const Tensor3& input) {  // the size is checked by forward_batch
    const Config& c = w.cfg;
    const size_t C = c.channels, Hi = input.shape(1), Wi = input.shape(2);
    if (input.shape(0) != C)
        throw std::invalid_argument("input has shape " + shape_str_of(input) + " but model '" + c.name + "' takes " +
                                    shape_str({C, size_t(c.image_size), size_t(c.image_size)}) +
                                    " (or another size that is a multiple of " + std::to_string(c.patch) + ")");
    Tensor4 x = Tensor4::from_shape({1, C, Hi, Wi});
    std::copy(input.begin(), input.end(), x.begin());
    return x;
}
}  // namespace

void forward(const Weights& w, const Tensor3& input, const Options& opt, Trace& trace, const RunRequest& req) {
    const Tensor4 x = batch_of_one(w, input);
    if (!req.grads) {
        thread_local WorkspacePtr ws = make_workspace();
        forward_batch(w, x, opt, trace, Keep::All, *ws, req.model, req.cancel);
        return;
    }
    const Config& c = w.cfg;
    Batch b;
    const Array& logits = b.forward(w, x, opt, &trace, req.model, req.cancel);
    int cls = req.grad_class;
    if (cls < 0) cls = int(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (cls >= c.classes)
        throw std::invalid_argument("class " + std::to_string(cls) + " is out of range (the model has " +
                                    std::to_string(c.classes) + " classes)");
    Tensor2 dl = xt::zeros<float>({size_t(1), size_t(c.classes)});
    dl(0, size_t(cls)) = 1.f;  // d logit[cls] / d logits
    Weights g = zeros_like(w);
    b.backward(w, dl, g, &trace);
    trace.set_grad_class(cls);
}

Trace run(const Weights& w, const Tensor3& input, const Options& opt, const RunRequest& req) {
    Trace t;
    forward(w, input, opt, t, req);
    return t;
}

}  // namespace vit
