// Issue 8's core pieces: centre-crop offsets as torchvision computes them, the preprocessing
// plan the app writes out, and the published head counts used instead of guessing.
#include <gtest/gtest.h>

#include "core/io/checkpoint.h"
#include "core/io/image.h"

using namespace vit;

// torchvision's CenterCrop: crop_top = int(round((H - h) / 2.0)); Python rounds half to even.
// python3 -c "print([int(round(m / 2.0)) for m in range(12)])" -> [0, 0, 1, 2, 2, 2, 3, 4, 4, 4, 5, 6]
TEST(Truth, CropOffsetRoundsHalfToEvenAsPython) {
    const int python[12] = {0, 0, 1, 2, 2, 2, 3, 4, 4, 4, 5, 6};
    for (int m = 0; m < 12; ++m) EXPECT_EQ(crop_offset(m), python[m]) << "margin " << m;
    EXPECT_EQ(crop_offset(77), 38);  // a 301-wide image cropped to 224 (lround gives 39)
}

TEST(Truth, CenterCropTakesTheHalfEvenWindow) {
    Tensor3 x = Tensor3::from_shape({1, 1, 7});  // margin 5 -> offset 2 (lround: 3)
    for (int i = 0; i < 7; ++i) x.flat(size_t(i)) = float(i);
    Tensor3 y = center_crop(x, 1, 2);
    EXPECT_EQ(y.flat(0), 2.f);
    EXPECT_EQ(y.flat(1), 3.f);
}

TEST(Truth, PlanKeepsAspectByDefaultAndSquashesOnRequest) {
    Config c = preset("fmnist");
    PreprocessPlan p = plan_preprocess(90, 60, c);
    EXPECT_FALSE(p.squash);
    EXPECT_EQ(p.resize_w, 42);  // int(28 * 90 / 60)
    EXPECT_EQ(p.resize_h, 28);
    EXPECT_EQ(p.crop_left, 7);
    EXPECT_EQ(p.crop_top, 0);
    c.pre.squash = true;
    p = plan_preprocess(90, 60, c);
    EXPECT_TRUE(p.squash);
    EXPECT_EQ(p.resize_w, 28);
    EXPECT_EQ(p.resize_h, 28);
}

TEST(Truth, KnownHeadsArePublishedOnesNotWidthOver64) {
    EXPECT_EQ(known_heads(192, 12, 768), 3);
    EXPECT_EQ(known_heads(384, 12, 1536), 6);
    EXPECT_EQ(known_heads(768, 12, 3072), 12);
    EXPECT_EQ(known_heads(1024, 24, 4096), 16);
    EXPECT_EQ(known_heads(1280, 32, 5120), 16);  // ViT-H/14: width/64 would say 20
    EXPECT_EQ(known_heads(64, 6, 128), 0);       // not a standard shape: a guess, marked as one
}
