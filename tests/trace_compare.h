// Comparing two traces bit for bit: the tests where two ways of computing the same stages must run
// the same code on the same numbers (on demand vs recorded, reused prefixes vs full passes), and the
// input they run on.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "core/model/model.h"
#include "core/model/trace.h"

namespace vit::test_util {

// A smooth input at the config's native size: sin(f * i) over the flat index.
inline Tensor3 wave(const Config& c, float f = 0.1f) {
    Tensor3 x = Tensor3::from_shape({size_t(c.channels), size_t(c.image_size), size_t(c.image_size)});
    for (size_t i = 0; i < x.size(); ++i) x.flat(i) = std::sin(f * float(i));
    return x;
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
