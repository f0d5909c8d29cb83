// `train --resume`: the .optim file beside a checkpoint (AdamW moments, step,
// epoch) for a small model: toy-rgb8 made 1-channel, as `train --config
// toy-rgb8` makes it for Fashion-MNIST.
#include "core/io/io.h"
#include "core/model/model.h"
#include "core/train/train.h"
#include "core/train/trainer.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const vit::Weights w = [] {
        vit::Config c = vit::preset("toy-rgb8");
        c.channels = 1;
        c.pre.mean = {0.2860f};
        c.pre.std = {0.3530f};
        return vit::init_weights(c, 0);
    }();
    fuzz::expect_named([&] {
        vit::SafeTensors st = vit::parse_safetensors(reinterpret_cast<const char*>(data), size, fuzz::kWhat);
        vit::AdamW adam;
        (void)vit::optimizer_state_from(st, fuzz::kWhat, w, adam);
    });
    return 0;
}
