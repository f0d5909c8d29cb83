// The Stage tab's panels (stage_panels.cpp): statistics, bars, and the gradient's absence said in place.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "app/tabs/tab.h"
#include "app/tensor_access.h"

namespace vit::app {

std::string join_index(const std::vector<size_t>& idx);  // "1,2,3"
// stats(d, n) under `key`, computed once (the keys carry the trace version)
const Stats& cached_stats(std::map<std::string, Stats>& cache, const std::string& key, const float* d, size_t n);
// Statistics of exactly what is shown (the slice) with the whole tensor's beside them.
void stats_panel(const Array& t, const Slice2D& sl, const std::string& shown_what, std::map<std::string, Stats>& cache,
                 Probe& pr, const std::string& key);
// A horizontal bar per class (signed values on the diverging map's colours, probabilities the predictions').
void class_bars(const float* v, size_t n, const Config& c, Probe& pr, bool probabilities);
// One bar per value of a vector, red above 0, blue below.
void value_bars(const float* v, size_t n, Probe& pr);
// Why a stage has no recorded gradient (the backward pass's own structure, said plainly).
std::string no_grad_reason(const StageInfo& s);
// The gradient view without gradients: why, and the button that computes them where it can.
void draw_grads_missing(Session& s, Probe& pr, const std::string& why);

}  // namespace vit::app
