// The traced ViT forward pass on one image.
#pragma once
#include "model.h"
#include "tensor.h"

namespace vit {

// Runs the model on input (C, H, W) (already normalized) and records every
// stage into `trace` under the names of DESIGN.md, in execution order.
// Throws std::invalid_argument if the input does not fit the config.
void forward(const Weights& w, const Tensor& input, const Options& opt, Trace& trace);

// Convenience: a fresh trace.
Trace run(const Weights& w, const Tensor& input, const Options& opt = {});

// The sequence of stage names a forward pass of `c` records (what the
// navigator lists), without running it.
std::vector<std::string> stage_names(const Config& c, const Options& opt = {});
// The same stages with the shapes a forward pass records (no weights needed).
std::vector<std::pair<std::string, Shape>> stage_shapes(const Config& c, const Options& opt = {});

}  // namespace vit
