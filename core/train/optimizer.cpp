#include "core/train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>

namespace vit {

void AdamW::init(const Weights& w) {
    m = zeros_like(w);
    v = zeros_like(w);
    step = 0;
}

void AdamW::update(Weights& w, const Weights& g, float lr_now) {
    ++step;
    const float bc1 = 1.f - std::pow(beta1, float(step)), bc2 = 1.f - std::pow(beta2, float(step));
    const float stepsize = lr_now / bc1, rbc2 = 1.f / std::sqrt(bc2);
    for_each_param(
        [&](const std::string& name, auto& p, const auto& gr, auto& mm, auto& vv) {
            // decoupled weight decay on matrices only (not biases, LayerNorm, cls, pos), as timm's AdamW groups
            const bool decay = decay_all || (p.dimension() >= 2 && name != "pos_embed");
            if (decay) p *= 1.f - lr_now * weight_decay;
            xt::noalias(mm) = beta1 * mm + (1.f - beta1) * gr;
            xt::noalias(vv) = beta2 * vv + (1.f - beta2) * gr * gr;
            // p -= lr * (m / bc1) / (sqrt(v / bc2) + eps)
            p -= stepsize * mm / (xt::sqrt(vv) * rbc2 + eps);
        },
        w, g, m, v);
    w.packs.clear();  // the packed copies of the old matrices are stale
}

float lr_schedule(int64_t step, int64_t warmup, int64_t total, float lr, float min_lr) {
    if (step < warmup) return lr * float(step + 1) / float(warmup);
    double prog = double(step - warmup) / double(std::max<int64_t>(1, total - warmup));
    prog = std::min(1.0, prog);
    return float(min_lr + 0.5 * (lr - min_lr) * (1 + std::cos(M_PI * prog)));
}

}  // namespace vit
