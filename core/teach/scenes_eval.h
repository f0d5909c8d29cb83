// What the scenes model learned, measured against the truth the generator knows (core/io/scenes.h):
// accuracy, the pointing game for the last block's cls attention and for the attention rollout, the
// position embeddings' 2D structure and the mean attention distance per block. `vitscope-cli eval
// --scenes` prints it; the README's figures come from that command.
#pragma once
#include <functional>
#include <vector>

#include "core/io/scenes.h"
#include "core/model/model.h"
#include "core/model/trace.h"

namespace vit {

// Where a map over the patch grid (N values, row-major; NaN for absent patches) peaks: the index of its
// largest value, the first of equal ones; -1 when every value is NaN.
int peak_patch(const std::vector<float>& map);

// Mean over patches p of Spearman's rank correlation between p's cosine similarity to every other patch's
// position embedding and the grid distance between the two (ties ranked by their mean rank). A table that
// learned the 2D grid reads near -1 (near patches alike); a random one near 0.
double pos_grid_spearman(const Weights& w);

struct ScenesEval {
    int n = 0;
    double accuracy = 0;
    std::vector<int> confusion;       // K x K, rows true class
    double pointing_cls = 0;          // last block's cls attention (mean over heads) peaks on the object
    double pointing_rollout = 0;      // attention rollout through every block peaks on the object
    double chance = 0;                // mean fraction of patches on the object: a random peak's rate
    double pos_rho = 0;               // pos_grid_spearman
    std::vector<double> distance;     // per block: mean attention distance in pixels over heads and scenes
    int distance_scenes = 0;          // scenes the distance averages over
};

// The first n scenes of the set `seed` of the test split (scene_draw), every figure above. The distance is
// averaged over the first min(n, distance_n) scenes. progress(done, n) after each scene; returning false stops
// (the figures are then over the scenes done).
ScenesEval evaluate_scenes(const Weights& w, const Dataset& test, uint64_t seed, int n, int distance_n = 1000,
                           const std::function<bool(int, int)>& progress = {});

}  // namespace vit
