// The window's interventions (issue 21): the list always shown above the tabs, each item removable;
// the patching panel (the other input, the stage, the tokens); knocking heads out (the Attention
// maps grid, the navigator, the What it uses tab); painting patches to drop on the image; and how
// every view draws a dropped patch: hatched, absent, with the legend saying so.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "views.h"

namespace vit::app {

// What the interventions' controls keep between frames (AppContext::iv).
struct InterventionsUi {
    bool patch_panel = false;        // the patching panel is open
    char patch_path[1024] = "";      // the other input
    int patch_stage = -1;            // the stage chosen: a row of the shown trace's table (-1: none yet)
    char patch_tokens[256] = "";     // "" every row, else i,j,...
    std::string patch_error;         // why the last Apply did not apply
    std::optional<std::vector<std::string>> samples;  // the bundled images (listed once)
};

// The list of the interventions in force, at the top of the centre panel (so an exported view
// carries it), with the knock-out and paint modes and the patching panel's button.
void DrawInterventionStrip(ViewCtx& v, InterventionsUi& st);
// The patching panel, a window of its own while open.
void DrawPatchPanel(ViewCtx& v, InterventionsUi& st);

// The requested options' interventions changed (the pass re-runs; the trace on screen says what ran).
bool head_ablated(const Options& o, int layer, int head);
void toggle_head(Session& s, int layer, int head);   // zero-ablated, or no longer ablated
void toggle_dropped(Session& s, int patch);
// The navigator's row of head switches inside block `layer`.
void NavigatorHeads(ViewCtx& v, int layer);
// Whether two sets of interventions are the same, the patch's values aside (the requested options
// hold none: the pass computes them).
bool same_interventions(const Interventions& a, const Interventions& b);

// A map over the patch grid (NaN at dropped patches, vit::on_patch_grid) as a texture: NaN uploaded
// as the finite minimum (the hatch covers it); the range and extremes of the finite values.
struct GridRange {
    float vmin = 0, vmax = 1;
    int argmin = -1, argmax = -1;
    int absent = 0;  // values that are NaN (dropped patches)
};
GridRange upload_grid(Texture& tex, const std::vector<float>& values, int gw, int gh);
GridRange grid_range(const std::vector<float>& values);
// Hatches the patches the trace's run dropped, over a gw x gh grid drawn from p0 with cells cw x ch.
// Returns how many.
int DrawDropped(ImDrawList* dl, const Trace& t, ImVec2 p0, float cw, float ch);
// The legend of the hatch ("hatched: 3 patches dropped (an intervention)"), when any; `key` names
// it in the probe.
void DroppedLegend(ViewCtx& v, const Trace& t, const std::string& key);
// A knocked-out map: a red X across it.
void DrawKnockedOut(ImDrawList* dl, ImVec2 p0, ImVec2 p1);
struct AppArgs;
// --ablate-head, --ablate, --drop-patches, --patch-from/--patch-stage/--patch-tokens: checked against
// the model loaded and put into the session's options (the patching source loaded). "" when all
// fit, else the message naming the flag (bad usage: the app exits 2).
std::string apply_intervention_flags(Session& s, const AppArgs& a);


}  // namespace vit::app
