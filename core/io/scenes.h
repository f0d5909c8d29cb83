// Scenes: a Fashion-MNIST item, tinted, scaled and placed at a random position on a coloured,
// textured background among distractor shapes that are not clothing. The `scenes` model is trained
// on them, and since the generator knows where the object is, the attention a learner sees can be
// checked against the truth (the box, the mask).
//
// Deterministic: a scene is a pure function of (dataset, item, seed); no std:: distributions (their
// output differs between standard libraries), only integer arithmetic on a splitmix64 stream.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/io/dataset.h"
#include "core/model/tensor.h"

namespace vit {

constexpr int kSceneSize = 64;  // the scenes model's input side (8 x 8 patches of 8 pixels)

struct SceneOptions {
    int size = kSceneSize;
    bool object = true;  // false: the same scene without its object (for the tests' "outside the box" check)
    int grid = 0;        // the object's placement step in pixels (the model's patch); 0: size / 8. The object is
                         // size / 2 pixels wide: 32 pixels on an 8-pixel grid in the scenes model's 64-pixel scenes
};

struct Config;
// The scenes a model of config `c` reads: its input size, its patch as the grid.
SceneOptions scene_options(const Config& c, bool object = true);

struct Scene {
    int size = 0;
    int item = 0;                   // the Fashion-MNIST image it holds (index into its split)
    int label = 0;                  // that image's class
    std::array<int, 4> box{};       // x0, y0, x1, y1 in pixels, x1 / y1 exclusive: the object's tight box
    std::array<int, 4> square{};    // the same for the object's placement square (size / 2 wide, on the grid)
    std::vector<uint8_t> rgb;       // (size, size, 3), row-major, interleaved
    std::vector<uint8_t> mask;      // (size, size): 1 where the object covers the pixel (inside `box` only)
    int clutter = 0;                // distractor shapes drawn
    std::vector<std::array<int, 4>> clutter_boxes;  // each distractor's square, as `box`
};

// The scene of dataset item `item` drawn with `seed`. Throws std::invalid_argument for an item outside
// the dataset, a dataset that is not 28 x 28 gray-scale items, or a size under 48 pixels.
Scene make_scene(const Dataset& d, int item, uint64_t seed, const SceneOptions& o = {});

// The object's square of a scene (`square`: half its side, on the patch grid) as a scene of its own: the same
// pixels, the box, mask and distractors' boxes (those that reach into the square, clipped to it) moved into it.
// `vitscope-cli train --scenes-crops` trains the scenes model's first stage on them (32 x 32: 4 x 4 patches).
Scene object_crop(const Scene& s);

// Scene number `i` of a generated set (the CLI's `scenes`, the evaluation, the window's Scenes source):
// its item and its own seed, both from (seed, i). Items follow a permutation of the split fixed by
// `seed`, so a set of n <= the split's size holds n different items.
struct SceneDraw {
    int item = 0;
    uint64_t seed = 0;
};
SceneDraw scene_draw(const Dataset& d, uint64_t seed, int i);

// The model's input (3, S, S) of a scene: the 8-bit pixels / 255, normalized with the config's mean and std
// (exactly what reading the scene's PNG file and preprocessing it gives).
Tensor3 scene_input(const Scene& s, const std::vector<float>& mean, const std::vector<float>& stdev);

// The scene as a decoded image (3, S, S) in [0, 1], what reading its PNG gives: any model's preprocessing applies.
struct Image;
Image scene_image(const Scene& s);

// A model trained on scenes (`vitscope-cli train --scenes` names it "scenes-vit"): views that average over test
// images use test scenes for it.
struct Config;
bool is_scenes_model(const Config& c);

// The index of the scene's patch (row-major on a grid of `patch`-pixel cells) is "on the object" when its
// centre lies inside the box: the rule of the pointing game the evaluation and the window use.
bool patch_on_object(const Scene& s, int patch_index, int patch);

// What a scene's labels.json says of one image file (`vitscope-cli scenes` writes it beside the PNGs): its class
// and the boxes of its object and distractors, in the file's pixels. The window reads it for an image whose folder
// has one, to show the truth over every overlay.
struct SceneTruth {
    int label = -1;
    std::string cls;
    std::array<int, 4> box{};
    std::vector<std::array<int, 4>> clutter;
    int width = 0, height = 0;  // the image the boxes are in (the scenes' size)
};
// The entry for `image_path` in labels.json beside it: nullopt when there is no labels.json or it has no entry
// for this file; a FileError naming labels.json when it is not a regular file, over 64 MiB, not JSON of
// the scenes' form, or gives a box outside the image.
std::optional<SceneTruth> read_scene_truth(const std::string& image_path, int width, int height);
// labels.json's entry for one scene (what `vitscope-cli scenes` writes).
std::string scene_labels_entry(const Scene& s, const std::string& file, const std::string& cls, const std::string& split);

// splitmix64: the generator's random stream (also used to derive per-scene seeds).
uint64_t splitmix64(uint64_t& state);

}  // namespace vit
