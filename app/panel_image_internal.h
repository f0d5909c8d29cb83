// The image panel's parts in files of their own (internal to app/: panel_image.cpp draws the panel).
#pragma once
#include "core/model/trace.h"
#include "views.h"

namespace vit::app {

// The input-size control (panel_image_size.cpp): the run's H x W, and what happened to the position embeddings.
void draw_input_size(ViewCtx& v, ImagePanel& panel, const Trace& t);

}  // namespace vit::app
