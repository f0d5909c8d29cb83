// Accuracy and confusion matrix of a model on a dataset.
#pragma once
#include <functional>
#include <vector>

#include "core/io/dataset.h"
#include "core/model/model.h"

namespace vit {

struct EvalResult {
    double accuracy = 0;
    int n = 0;
    std::vector<int> confusion;  // K x K, rows: true class, columns: predicted
};
EvalResult evaluate(const Weights& w, const Dataset& d, int limit = 0, int batch = 256,
                    const std::function<void(int, int)>& progress = {});
// The same over any n inputs: input(i, dst) writes input i (C, S, S) at dst, label(i) is its class
// (the scenes model's test scenes).
EvalResult evaluate_inputs(const Weights& w, int n, const std::function<void(int, float*)>& input,
                           const std::function<int(int)>& label, int batch = 256,
                           const std::function<void(int, int)>& progress = {});

}  // namespace vit
