// The backward pass for every stage, after a batched forward pass (forward.h)
// that kept what it needs. Training as a whole (optimizer, data, evaluation) is
// core/train/train.h.
#pragma once
#include <memory>

#include "core/model/forward.h"
#include "core/model/model.h"

namespace vit {

// Why the backward pass cannot run for this model and options ("" when it can): it is written for
// the vanilla ViT (cls token, GELU, a Linear classifier on cls or mean pooling), at any input size.
std::string backward_unsupported(const Config& c, const Options& o);

// d logit[cls] / d logits for one image: a (1, K) one-hot. cls < 0 takes the predicted class (top-1,
// ties to the lower index) and is set to it; a class outside the model's throws naming it. A model whose output
// is an embedding (no classifier: DINO, DINOv2, MAE) has no logit: the target is one number of its output,
// embedding[cls], a (1, E) one-hot; cls < 0 takes its largest value (ties to the lower index).
Tensor2 d_logit(const Config& c, const Array& logits, int& cls);
// What a gradient is of, for texts: "logit[3]" or "embedding[17]".
std::string grad_target(const Config& c, int cls);

// Gradients on demand in a Trace, checkpointed at the residual stream: `t` is an on-demand pass of
// `w` (forward with RunRequest::on_demand, set_on_demand done). Runs the backward pass from the last
// block to the first, each block's stages recomputed from the kept stream entering it (Trace::block),
// and records into `t` the gradients outside the blocks and of every row the pass kept (the residual
// stream leaving each block, the kept kinds): d logit[req.grad_class] / d stage (-1: the predicted
// class), bit for bit as the full backward. Returns how `t` computes any other block gradient
// (Trace::set_on_demand's BlockGrads), with the calling thread's thread count.
Trace::BlockGrads backward_on_demand(std::shared_ptr<const Weights> w, Trace& t, const RunRequest& req);

class Batch {
public:
    Batch();
    ~Batch();
    // Forward on x (B, C, S, S); returns the logits (B, K). Keeps what backward needs.
    // record: a batch of one that records every stage into `record` (a traced run with gradients).
    const Array& forward(const Weights& w, const Tensor4& x, const Options& opt, Trace* record = nullptr,
                         const ModelIdentity& model = {}, const std::atomic<bool>* cancel = nullptr);
    // Softmax cross-entropy, mean over the batch. Returns the loss and fills dlogits (B, K).
    static float cross_entropy(const Array& logits, const int* labels, Tensor2& dlogits, int* correct = nullptr);
    // Backward from dlogits (B, K), accumulating into grads. Must follow forward().
    // If `record` is set (B == 1 only, the trace forward() recorded into), the gradient of every
    // stage the table gives one is written into it (Trace::grad).
    void backward(const Weights& w, const Tensor2& dlogits, Weights& grads, Trace* record = nullptr);
    // The same with grads null: the stages' gradients alone (into `record`), the weights' not computed.
    void backward(const Weights& w, const Tensor2& dlogits, Weights* grads, Trace* record);

private:
    struct State;
    std::unique_ptr<State> s_;
};

}  // namespace vit
