// Exports: the centre view as PNG, the current tensor as .npy (and its gradient when the gradient view shows it), the trace (with its gradients,
// when computed) as .npz. Requested by the toolbar buttons or --export-*.
#pragma once
#include <string>
#include <vector>

#include "frame.h"

namespace vit::app {

// Runs this frame's requested exports, reading the back buffer before the swap. Each failure is
// added to the window's errors and returned (an empty list: all went well).
std::vector<std::string> run_exports(AppContext& app, int W, int H);

}  // namespace vit::app
