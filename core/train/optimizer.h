// AdamW and the learning-rate schedule, as torch.optim.AdamW and timm's cosine schedule.
#pragma once
#include <cstdint>

#include "core/model/model.h"

namespace vit {

struct AdamW {
    float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.05f;
    bool decay_all = false;  // false: decay only matrices (not biases, LayerNorm, cls, pos)
    int64_t step = 0;
    Weights m, v;
    void init(const Weights& w);
    // torch.optim.AdamW: p *= 1 - lr*wd; m, v updated; p -= lr * mhat / (sqrt(vhat) + eps).
    void update(Weights& w, const Weights& g, float lr_now);
};

// Learning rate at `step`: linear warm-up then cosine to `min_lr`.
float lr_schedule(int64_t step, int64_t warmup, int64_t total, float lr, float min_lr);

}  // namespace vit
