// Non-finite numbers (NaN, +Inf, -Inf) named where they enter: in a file's
// tensors at load, in an input, and at the first stage of a forward pass that
// holds them. For the CLI's reports, the app's warnings and the views' legends.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/model/trace.h"

namespace vit {

struct NonFinite {
    uint64_t nan = 0, pos_inf = 0, neg_inf = 0;
    uint64_t total = 0;   // values scanned
    uint64_t first = 0;   // flat index of the first non-finite value (when any())
    uint64_t count() const { return nan + pos_inf + neg_inf; }
    bool any() const { return count() != 0; }
    // "3 NaN, 1 +Inf of 768 values (first at flat index 5)"
    std::string describe() const;
};

// Counts NaN and +-Inf in n floats (a fast pass when there are none).
NonFinite count_nonfinite(const float* p, size_t n);
inline NonFinite count_nonfinite(const Array& a) { return count_nonfinite(a.data(), a.size()); }

// The tensors of a file (by the file's names) that hold non-finite values, in name order.
std::vector<std::pair<std::string, NonFinite>> nonfinite_tensors(const std::map<std::string, Array>& tensors);
// "2 tensors hold non-finite values: blocks.0.attn.qkv.weight (3 NaN of 1728 values ...); head.bias (...)" ("" when none).
std::string describe_nonfinite_tensors(const std::vector<std::pair<std::string, NonFinite>>& found, size_t max_listed = 8);

// The first recorded stage, in execution order, that holds NaN or Inf.
struct NonFiniteStage {
    std::string stage;      // its name ("blocks.0.attn.scores")
    StageId id;
    size_t index = 0;       // its row in the trace
    NonFinite counts;       // in that stage
    size_t stages_with = 0; // how many stages of the trace hold any (this one and later ones)
    // "first at stage 'blocks.0.attn.scores' (#12 of 252): 6 NaN of 588 values ...; 230 stages hold non-finite values"
    std::string describe(size_t stages_total) const;
};
std::optional<NonFiniteStage> first_nonfinite_stage(const Trace& t);

}  // namespace vit
