// What the user selected: the stage, head, patch, tab, overlay and view settings. Nothing else:
// caches belong to the view that fills them (each tab's own state, app/tabs/), what was drawn
// where belongs to the probe (probe.h), background work to the jobs (jobs.h).
#pragma once
#include "core/model/stage_id.h"

namespace vit::app {

// The centre tabs, in the order of the tab bar. Their names, keys and exports are the tab table's
// (app/tabs/tab.h): nothing else lists them.
enum class Tab { Stage = 0, AttentionMaps, Changes, Train, LogitLens, Positions, Filters, Distance, Patches, Map, Norms, Features,
                 SelfAttention, WhatItUses };
// Query: the attention row of any token (UiState::query: 0 = cls, 1..N = patches), vit::attention_from.
enum class Overlay { None = 0, Cls, Rollout, GradRollout, Query };
constexpr int kOverlayCount = 5;
enum class ScaleMode { PerTensor = 0, PerSlice, Symmetric };
const char* overlay_name(Overlay o);  // as --overlay takes it: none, cls, rollout, grad, query

struct UiState {
    StageId stage;            // the stage shown (by identity: it survives a re-run with other options)
    int head = 0;             // slice of per-head tensors
    int channel = 0;          // slice of the input
    int patch = -1;           // selected patch (token = patch + 1), -1 none
    int cell_r = -1, cell_c = -1;  // the cell whose math is shown (row, column of the shown slice), -1 none
    int query = 0;            // query token of the Query overlay: 0 = cls, 1..N = patch token (patch + 1)
    int map_layer = 0;        // the block layer the map shows
    ScaleMode scale_mode = ScaleMode::PerTensor;
    // Attention pictures (the grid, the thumbnails, the overlay): one scale from 0 shared by every
    // map on screen (false), or each map from 0 to its own largest value, its range printed (true).
    bool attention_per_map = false;
    bool attention_image = true;  // the Attention maps tab: the model input faintly under each map (issue 36)
    bool show_grad = false;   // show d logit / d stage instead of the stage
    Tab tab = Tab::Stage;
    Overlay overlay = Overlay::Cls;
    int overlay_layer = -1;   // -1: last
    int overlay_head = -1;    // -1: mean over heads
    float opacity = 0.65f;
    int fusion = 0;           // rollout head fusion: mean, max, min
    float discard = 0.f;
    float zoom = 1.f, pan_x = 0.f, pan_y = 0.f;
    // Interventions (app/interventions_ui.h): a click on an attention map knocks its head out; a click
    // or drag over the model input drops patches.
    bool knock_out = false;
    bool paint_drop = false;
    bool show_box = true;     // a generated scene: its object's box over the model input (X)
    // The Changes tab's list: in pipeline order (false) or largest relative change first (true).
    bool changes_largest_first = false;
    // The input stage of an RGB model: the picture (false) or one channel's numbers as a heatmap (true).
    bool input_channels = false;
    // Learn mode (app/learn.h): the forward pass as one animated lesson instead of the workbench.
    bool learn = false;
    int learn_step = 0;         // the step shown
    float learn_time = 0;       // seconds into its animation
    bool learn_playing = true;  // the time runs (and steps follow each other)
    float learn_speed = 1;      // 0.5, 1, 2
    float learn_zoom = 1;       // the camera: 1 shows the whole picture; the focus as a fraction of it
    float learn_fx = 0.5f, learn_fy = 0.5f;
    // The tour (lessons.h): the lesson it is at (an index into the model's tour; -1: not started), and whether
    // Learn mode still has to go to that lesson's step (T, --tour N).
    int lesson = -1;
    bool lesson_go = false;
    int learn_token = -1;       // the token followed through the block (-1: the cls token, else the first patch)
};

}  // namespace vit::app
