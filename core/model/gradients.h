// Gradients for the app's views: d logit[class] / d stage, for every stage.
#pragma once
#include "core/model/model.h"
#include "core/model/tensor.h"

namespace vit {

// Runs forward + backward on one image (C, S, S) and returns a trace of
// "<stage>.grad" entries (the stage table says which stages have one).
// cls < 0: the predicted class.
Trace gradient_trace(const Weights& w, const Tensor3& input, const Options& opt, int cls);

}  // namespace vit
