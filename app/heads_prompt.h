// The window's question when a checkpoint does not say how many attention heads it has.
#pragma once
#include "views.h"

namespace vit::app {

// A modal over the window while Session::heads_request() is set: it names the file, says why
// the count is needed, and offers the head counts the width allows (each with its head size).
// A choice loads the file again with that count; Cancel keeps the model already loaded.
// Records the probe's strings["heads.prompt"] and rects["heads.prompt"], ["heads.choice.N"], ["heads.cancel"].
void DrawHeadsPrompt(ViewCtx& v);

}  // namespace vit::app
