// Issue 10 item 7: a map of the loaded model (tabs/tab_map.cpp).
//
// Both are generated from the one stage table (core/model/stages.h) for the config and options that
// produced the trace on screen, with the trace's own shapes: nothing about the architecture is
// written here, so the map of a mean-pooled model, a no-affine LayerNorm or a BUG switch is the
// map of what ran.
#pragma once
#include <string>
#include <vector>

#include "views.h"

namespace vit::app {

// One box of the map: a run of consecutive stages of the table that one architectural step records.
struct MapBox {
    std::string id;                   // "input", "patches", "ln1", "attn", "resid_mid", "ln_final", ...
    std::string label;                // "image", "patches", "embed", "+cls", "+pos", "LN", "MHA", "+", ...
    std::string sub;                  // from the config and options: "12 heads", "no affine", "mean", "BUG: ..."
    int row = 0;                      // 0: embedding, 1: the encoder block (layer `layer`), 2: the head
    int layer = -1;                   // block layer of its stages, -1 outside the blocks
    std::vector<StageId> ids;         // its stages, in execution order
    std::vector<std::string> stages;  // their names (for display)
    StageId out_id;                   // the stage whose shape is on the arrow leaving it
    std::string out_stage;            // its name
    std::string out_shape;            // "(50, 64)": the trace's tensor, else the stage table's shape
    bool bug = false;                 // a BUG switch changes what this box computes
};

struct ModelMap {
    std::vector<MapBox> boxes;
    int depth = 0, layer = 0;         // L and the block layer shown
    bool from_trace = false;          // shapes read from the trace (else from the config's stage table)
    std::string missing;              // what is missing, said on screen ("" when a trace is shown)
};

// The map for the shown model and options, with the block drawn for `layer`.
ModelMap build_model_map(const Session& s, int layer);

void DrawMapStrip(ViewCtx& v);                   // one row of the map's boxes above the stage view


}  // namespace vit::app
