// `trace --input`: a .npy checked against the model's input shape (toy-rgb8:
// (3, 8, 8)), its NaN / Inf counted, and, when it fits, a forward pass whose
// first non-finite stage is found, as the CLI reports it.
#include "core/io/image.h"
#include "core/io/io.h"
#include "core/model/finite.h"
#include "core/model/forward.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const vit::Weights w = vit::init_weights(vit::preset("toy-rgb8"), 0);
    std::string b(reinterpret_cast<const char*>(data), size);
    fuzz::expect_named([&] {
        vit::Tensor3 x = vit::input_from_array(vit::parse_npy(b, fuzz::kWhat), w.cfg, fuzz::kWhat);
        vit::NonFinite nf = vit::count_nonfinite(x.data(), x.size());
        (void)nf.describe();
        vit::Trace t = vit::run(w, x, vit::Options{});
        auto first = vit::first_nonfinite_stage(t);
        if (nf.any() && !first) std::abort();  // a NaN in the input must show up in the trace ('input' holds it)
        if (first) (void)first->describe(t.entries().size());
    });
    return 0;
}
