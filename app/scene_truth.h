// The truth of a generated scene over the model input (issue 35): the object's box (and the distractors'),
// toggled with X, and a line saying whether the overlay's peak lies on the object.
#pragma once
#include <imgui.h>

#include <optional>
#include <vector>

#include "views.h"

namespace vit::app {

// The box (X) and the distractors' over the model input (p0: its top left on screen, img_w x img_h its size),
// its checkbox and legend. Draws nothing and says nothing for an image without truth.
void DrawSceneTruth(ViewCtx& v, ImDrawList* dl, ImVec2 p0, float img_w, float img_h);
// One line: whether the overlay's peak patch lies on the object (ov: the overlay's values over the run's patch
// grid; what: the overlay's name, for the tooltip and the probe).
void DrawScenePeak(ViewCtx& v, const std::vector<float>& ov, const char* what);

// On a generated scene: buttons that drop every patch the object's box touches, or the distractors' patches (an
// intervention, as painting with D), and put them back: what the model uses, tested against the truth.
void DrawSceneDrops(ViewCtx& v);

// The patches of the run `t` (row-major on its grid) that the object's box touches (any of its pixels inside the
// patch), and those only the distractors' touch; nullopt for an image without truth. The buttons above and the
// lessons' "what if" (lessons.h) drop these.
struct ScenePatches {
    std::vector<int> object, clutter;
};
std::optional<ScenePatches> scene_patches(const Session& s, const Trace& t);

}  // namespace vit::app
