// The scene generator (core/io/scenes.h): deterministic, its boxes right (every pixel outside the box is
// the background or a distractor: the same scene drawn without its object equals it there), the mask inside
// the box and tight on it, and the evaluation's pieces against hand arithmetic.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <unistd.h>

#include "core/io/io.h"

#include "core/io/dataset.h"
#include "core/io/scenes.h"
#include "core/model/forward.h"
#include "core/model/model.h"
#include "core/teach/scenes_eval.h"

using namespace vit;

namespace {
const Dataset& test_split() {
    static const Dataset d = load_fashion_mnist(default_fashion_mnist_dir(), false);
    return d;
}
}  // namespace

TEST(Scenes, SameSeedSameSceneOtherSeedAnother) {
    const Dataset& d = test_split();
    const Scene a = make_scene(d, 7, 42), b = make_scene(d, 7, 42), c = make_scene(d, 7, 43);
    EXPECT_EQ(a.rgb, b.rgb);
    EXPECT_EQ(a.box, b.box);
    EXPECT_EQ(a.label, d.labels[7]);
    EXPECT_NE(a.rgb, c.rgb);
    ASSERT_EQ(a.rgb.size(), size_t(kSceneSize * kSceneSize * 3));
    // the draws of a set: reproducible, and n <= the split's size draws n different items
    std::set<int> items;
    for (int i = 0; i < 2000; ++i) {
        const SceneDraw x = scene_draw(d, 1, i), y = scene_draw(d, 1, i);
        EXPECT_EQ(x.item, y.item);
        EXPECT_EQ(x.seed, y.seed);
        items.insert(x.item);
    }
    EXPECT_EQ(items.size(), 2000u);
    EXPECT_NE(scene_draw(d, 1, 0).item, scene_draw(d, 2, 0).item);
}

TEST(Scenes, OutsideTheBoxIsBackgroundOrClutterAndTheBoxIsTight) {
    const Dataset& d = test_split();
    int clutter = 0;
    for (int i = 0; i < 300; ++i) {
        SCOPED_TRACE("scene " + std::to_string(i));
        const SceneDraw dr = scene_draw(d, 1, i);
        const Scene s = make_scene(d, dr.item, dr.seed);
        const Scene bare = make_scene(d, dr.item, dr.seed, SceneOptions{kSceneSize, false});
        const int S = s.size;
        const auto [x0, y0, x1, y1] = s.box;
        ASSERT_TRUE(0 <= x0 && x0 < x1 && x1 <= S && 0 <= y0 && y0 < y1 && y1 <= S);
        EXPECT_GE(x1 - x0, 8);  // an item is never smaller than a patch
        int mx0 = S, my0 = S, mx1 = 0, my1 = 0, changed_in = 0;
        for (int y = 0; y < S; ++y)
            for (int x = 0; x < S; ++x) {
                const bool in = x >= x0 && x < x1 && y >= y0 && y < y1;
                const size_t p = size_t(y) * S + x;
                bool same = true;
                for (int c = 0; c < 3; ++c) same &= s.rgb[p * 3 + c] == bare.rgb[p * 3 + c];
                if (!in) {
                    ASSERT_TRUE(same) << "pixel (" << x << ", " << y << ") outside the box differs from the scene without its object";
                    ASSERT_EQ(s.mask[p], 0);
                }
                if (s.mask[p]) { mx0 = std::min(mx0, x); my0 = std::min(my0, y); mx1 = std::max(mx1, x + 1); my1 = std::max(my1, y + 1); }
                changed_in += in && !same;
            }
        EXPECT_EQ((std::array<int, 4>{mx0, my0, mx1, my1}), s.box) << "the box is the mask's tight box";
        EXPECT_GT(changed_in, (x1 - x0) * (y1 - y0) / 10) << "the object shows inside its box";
        clutter += s.clutter;
    }
    EXPECT_GT(clutter, 300 * 2) << "scenes carry distractors";
}

// A scene of another side (`train --scenes --image-size 96`): the object is half the side and moves on the
// grid asked for (the model's patch), not on an eighth of the side. Items as tall as their 28 rows (trousers,
// dresses) fill the square's height, so their box starts on the grid.
TEST(Scenes, ObjectMovesOnTheGridAskedForAndIsHalfTheSide) {
    const Dataset& d = test_split();
    for (const int grid : {8, 0}) {
        SCOPED_TRACE("grid " + std::to_string(grid));
        const int step = grid ? grid : 96 / 8;
        int full = 0;
        std::set<int> rows;
        for (int i = 0; i < 300; ++i) {
            const SceneDraw dr = scene_draw(d, 1, i);
            SceneOptions o;
            o.size = 96;
            o.grid = grid;
            const Scene s = make_scene(d, dr.item, dr.seed, o);
            const auto [x0, y0, x1, y1] = s.box;
            ASSERT_LE(x1 - x0, 48);
            ASSERT_LE(y1 - y0, 48);
            if (y1 - y0 != 48) continue;
            ++full;
            EXPECT_EQ(y0 % step, 0) << "scene " << i << ": a full-height object starts at row " << y0;
            rows.insert(y0);
        }
        EXPECT_GT(full, 20);
        EXPECT_EQ(rows.size(), size_t(48 / step + 1)) << "every row of the grid is used";
    }
    Config c = preset("scenes");
    EXPECT_EQ(scene_options(c).size, 64);
    EXPECT_EQ(scene_options(c).grid, 8);
    SceneOptions bad;
    bad.size = 96;
    bad.grid = 49;
    EXPECT_THROW(make_scene(d, 0, 1, bad), std::invalid_argument);
    bad.grid = -1;
    EXPECT_THROW(make_scene(d, 0, 1, bad), std::invalid_argument);
}

// `train --scenes-crops`: the object's square of a scene (half its side, on the patch grid) is the scene's own
// pixels there, holds the whole box (the mask's every pixel), and feeds the model what the scene's input holds there.
TEST(Scenes, ObjectCropIsTheScenesPixelsInTheObjectSquareAndHoldsTheWholeBox) {
    const Dataset& d = test_split();
    for (const int S : {64, 96}) {
        const int L = S / 2, step = 8;
        SceneOptions o;
        o.size = S;
        o.grid = step;
        std::set<int> places;
        for (int i = 0; i < 400; ++i) {
            SCOPED_TRACE("scene " + std::to_string(i) + " of side " + std::to_string(S));
            const SceneDraw dr = scene_draw(d, 1, i);
            const Scene s = make_scene(d, dr.item, dr.seed, o), c = object_crop(s);
            const auto [qx, qy, qx1, qy1] = s.square;
            ASSERT_EQ(qx1 - qx, L);
            ASSERT_EQ(qy1 - qy, L);
            ASSERT_TRUE(qx >= 0 && qy >= 0 && qx1 <= S && qy1 <= S && qx % step == 0 && qy % step == 0);
            places.insert(qy * S + qx);
            ASSERT_EQ(c.size, L);
            EXPECT_EQ(c.label, s.label);
            ASSERT_EQ(c.rgb.size(), size_t(L) * L * 3);
            for (int y = 0; y < L; ++y)
                for (int x = 0; x < L; ++x) {
                    const size_t p = size_t(y) * L + x, q = size_t(qy + y) * S + qx + x;
                    for (int k = 0; k < 3; ++k) ASSERT_EQ(c.rgb[p * 3 + k], s.rgb[q * 3 + k]) << "pixel (" << x << ", " << y << ")";
                    ASSERT_EQ(c.mask[p], s.mask[q]);
                }
            // the whole box in the square: the crop's box is the scene's moved, and the crop holds every object pixel
            EXPECT_TRUE(s.box[0] >= qx && s.box[1] >= qy && s.box[2] <= qx1 && s.box[3] <= qy1);
            EXPECT_EQ(c.box, (std::array<int, 4>{s.box[0] - qx, s.box[1] - qy, s.box[2] - qx, s.box[3] - qy}));
            size_t in_scene = 0, in_crop = 0;
            for (uint8_t m : s.mask) in_scene += m;
            for (uint8_t m : c.mask) in_crop += m;
            EXPECT_EQ(in_crop, in_scene);
            if (S == 64) {  // what the trainer feeds the 32-pixel model: the scene's input, cut
                const Tensor3 a = scene_input(c, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}), b = scene_input(s, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f});
                for (int k = 0; k < 3; ++k)
                    for (int y = 0; y < L; y += 7)
                        for (int x = 0; x < L; x += 5) ASSERT_EQ(a(k, y, x), b(k, qy + y, qx + x));
            }
        }
        EXPECT_EQ(places.size(), size_t((S - L) / step + 1) * ((S - L) / step + 1)) << "the square moves over the whole grid";
    }
}

TEST(Scenes, PatchOnObjectIsThePatchCentreInTheBox) {
    Scene s;
    s.size = 64;
    s.box = {8, 16, 20, 25};  // x 8..19, y 16..24
    // patch (row 2, col 1): centre (12, 20), inside; (row 2, col 2): centre (20, 20), x1 is exclusive
    EXPECT_TRUE(patch_on_object(s, 2 * 8 + 1, 8));
    EXPECT_FALSE(patch_on_object(s, 2 * 8 + 2, 8));
    EXPECT_FALSE(patch_on_object(s, 3 * 8 + 1, 8));  // centre y 28 > 25
    EXPECT_EQ(peak_patch({0.1f, NAN, 0.3f, 0.3f}), 2);
    EXPECT_EQ(peak_patch({NAN, NAN}), -1);
}

TEST(Scenes, SpearmanOfAGridTableIsNearMinusOneAndOfARandomOneNearZero) {
    Config c = preset("scenes");
    Weights w = init_weights(c, 3);
    const double random_rho = pos_grid_spearman(w);
    EXPECT_LT(std::abs(random_rho), 0.15);
    // a table that is a smooth function of the grid position: similarity falls with distance
    const int G = c.grid(), D = c.width;
    // the table's row p: sin and cos of f x and of f y for four frequencies f (0.1 to 0.4 rad per patch), so
    // that p . q = sum_f cos(f dx) + cos(f dy) falls as the patches move apart
    for (int p = 0; p < G * G; ++p)
        for (int k = 0; k < D; ++k) {
            const float f = 0.1f * float(1 + k / 4 % 4), v = float(k % 4 < 2 ? p % G : p / G);
            w.pos(size_t(1 + p), size_t(k)) = k % 2 ? std::cos(f * v) : std::sin(f * v);
        }
    EXPECT_LT(pos_grid_spearman(w), -0.6);
}

TEST(Scenes, TruthIsReadFromLabelsJsonBesideTheImage) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("vitscope_truth_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const Dataset& d = test_split();
    const Scene s = make_scene(d, 3, 9);
    const auto write = [&](const std::string& text) {
        std::FILE* f = std::fopen((dir / "labels.json").c_str(), "w");
        std::fputs(text.c_str(), f);
        std::fclose(f);
    };
    EXPECT_FALSE(read_scene_truth((dir / "00000.png").string(), 64, 64)) << "no labels.json: no truth";
    write("[" + scene_labels_entry(s, "00000.png", "Pullover", "test") + "]");
    const auto t = read_scene_truth((dir / "00000.png").string(), 64, 64);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->box, s.box);
    EXPECT_EQ(t->label, s.label);
    EXPECT_EQ(t->cls, "Pullover");
    EXPECT_EQ(t->clutter, s.clutter_boxes);
    EXPECT_FALSE(read_scene_truth((dir / "00001.png").string(), 64, 64)) << "a file labels.json does not list";
    const auto error_of = [&](const std::string& text) {
        write(text);
        try {
            read_scene_truth((dir / "00000.png").string(), 64, 64);
        } catch (const FileError& e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    };
    EXPECT_NE(error_of("{\"file\": 1").find("labels.json: not a JSON list"), std::string::npos);
    EXPECT_NE(error_of(R"([{"file": "00000.png", "label": 2, "box": [0, 0, 90, 10]}])").find("is not inside the 64x64 image"),
              std::string::npos);
    EXPECT_NE(error_of(R"([{"file": "00000.png", "box": [0, 0, 9, 10]}])").find("no integer \"label\""), std::string::npos);
    fs::remove_all(dir);
}
