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

}  // namespace vit
