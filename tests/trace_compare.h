// Comparing two traces bit for bit: the tests where two ways of computing the same stages must run
// the same code on the same numbers (on demand vs recorded, reused prefixes vs full passes), and the
// input they run on.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/model/trace.h"

namespace vit::test_util {

// A smooth input at the config's native size: sin(f * i) over the flat index.
inline Tensor3 wave(const Config& c, float f = 0.1f) {
    Tensor3 x = Tensor3::from_shape({size_t(c.channels), size_t(c.image_size), size_t(c.image_size)});
    for (size_t i = 0; i < x.size(); ++i) x.flat(i) = std::sin(f * float(i));
    return x;
}

// n normal floats from a seeded generator (kernel tests' operands).
inline std::vector<float> randn(size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd;
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
}

// A 2-block ViT-Ti at 368 px (530 tokens: more query rows per head than one block of the attention
// holds, and a trace large enough to be streamed), 10 classes, random weights packed as a traced
// pass packs them.
inline Config vit_ti_530_config() {
    Config c = preset("vit-ti16");
    c.depth = 2;
    c.image_size = 23 * c.patch;
    c.pos_grid = 0;
    c.pre.resize = 0;
    c.classes = 10;
    c.name = "vit-ti16-530";
    c.validate();
    return c;
}

inline bool same_bits(const Array& a, const Array& b) {
    return shape_of(a) == shape_of(b) && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every stage of two traces (same table rows), and every gradient either holds.
inline void expect_same_trace(const Trace& a, const Trace& b, const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t r = 0; r < a.size(); ++r) {
        SCOPED_TRACE(what + ": " + a.name(r));
        ASSERT_EQ(a.name(r), b.name(r));
        EXPECT_TRUE(same_bits(a.at(r), b.at(r)));
        if (a.grad_at(r) || b.grad_at(r)) {
            ASSERT_TRUE(a.grad_at(r) && b.grad_at(r));
            EXPECT_TRUE(same_bits(*a.grad_at(r), *b.grad_at(r)));
        }
    }
}

}  // namespace vit::test_util
