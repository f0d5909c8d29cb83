#include "core/teach/scenes_eval.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "core/model/forward.h"
#include "core/teach/analysis.h"
#include "core/teach/teach.h"
#include "core/train/evaluate.h"

namespace vit {

int peak_patch(const std::vector<float>& map) {
    int best = -1;
    for (size_t i = 0; i < map.size(); ++i)
        if (!std::isnan(map[i]) && (best < 0 || map[i] > map[size_t(best)])) best = int(i);
    return best;
}

namespace {
// Ranks 1..n, ties given their mean rank (scipy.stats.rankdata's default).
std::vector<double> ranks(const std::vector<double>& v) {
    std::vector<size_t> o(v.size());
    std::iota(o.begin(), o.end(), 0);
    std::stable_sort(o.begin(), o.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
    std::vector<double> r(v.size());
    for (size_t i = 0; i < o.size();) {
        size_t j = i;
        while (j + 1 < o.size() && v[o[j + 1]] == v[o[i]]) ++j;
        const double mean_rank = (double(i) + double(j)) / 2 + 1;
        for (size_t k = i; k <= j; ++k) r[o[k]] = mean_rank;
        i = j + 1;
    }
    return r;
}
double pearson(const std::vector<double>& a, const std::vector<double>& b) {
    const double n = double(a.size());
    const double ma = std::accumulate(a.begin(), a.end(), 0.0) / n, mb = std::accumulate(b.begin(), b.end(), 0.0) / n;
    double sab = 0, saa = 0, sbb = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        sab += (a[i] - ma) * (b[i] - mb);
        saa += (a[i] - ma) * (a[i] - ma);
        sbb += (b[i] - mb) * (b[i] - mb);
    }
    return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0.0;
}
}  // namespace

double pos_grid_spearman(const Weights& w) {
    const Tensor2 sim = pos_similarity(w);
    const int N = int(sim.shape(0)), G = w.cfg.stored_grid();
    if (G * G != N) throw std::invalid_argument("the position table's " + std::to_string(N) + " patch rows are not a square grid");
    double sum = 0;
    for (int p = 0; p < N; ++p) {
        std::vector<double> s, d;
        for (int q = 0; q < N; ++q) {
            if (q == p) continue;
            s.push_back(sim(size_t(p), size_t(q)));
            d.push_back(std::hypot(double(p / G - q / G), double(p % G - q % G)));
        }
        sum += pearson(ranks(s), ranks(d));
    }
    return sum / N;
}

ScenesEval evaluate_scenes(const Weights& w, const Dataset& test, uint64_t seed, int n, int distance_n,
                           const std::function<bool(int, int)>& progress) {
    const Config& c = w.cfg;
    if (c.channels != 3 || c.image_size < 48 || !c.has_logits() || c.classes != 10 || !c.cls_token)
        throw std::invalid_argument("scenes are 3-channel images of 10 Fashion-MNIST classes for a model with a cls token "
                                    "and a classifier; this model is " + c.describe());
    if (n <= 0) throw std::invalid_argument("evaluate at least one scene");
    ScenesEval r;
    r.confusion.assign(100, 0);
    r.distance.assign(size_t(c.depth), 0.0);
    const int L = c.depth, P = c.patch, N = c.patches();
    int correct = 0, hit_cls = 0, hit_roll = 0;
    double chance = 0;
    Trace t;
    for (int i = 0; i < n; ++i) {
        const SceneDraw dr = scene_draw(test, seed, i);
        const Scene sc = make_scene(test, dr.item, dr.seed, scene_options(c));
        forward(w, scene_input(sc, c.pre.mean, c.pre.std), {}, t);
        const Array& logits = t.get(StageId{StageKind::Logits, -1});
        const int pred = int(std::max_element(logits.begin(), logits.end()) - logits.begin());
        correct += pred == sc.label;
        r.confusion[size_t(sc.label) * 10 + size_t(pred)]++;
        hit_cls += patch_on_object(sc, peak_patch(cls_attention(t, L - 1, -1)), P);
        hit_roll += patch_on_object(sc, peak_patch(attention_rollout(t, L - 1, Fusion::Mean, 0.f)), P);
        int on = 0;
        for (int p = 0; p < N; ++p) on += patch_on_object(sc, p, P);
        chance += double(on) / N;
        if (i < distance_n) {
            const Tensor2 d = attn_distance(t);
            for (int l = 0; l < L; ++l) {
                double m = 0;
                for (size_t h = 0; h < d.shape(1); ++h) m += d(size_t(l), h);
                r.distance[size_t(l)] += m / double(d.shape(1));
            }
            ++r.distance_scenes;
        }
        r.n = i + 1;
        if (progress && !progress(i + 1, n)) break;
    }
    r.accuracy = double(correct) / r.n;
    r.pointing_cls = double(hit_cls) / r.n;
    r.pointing_rollout = double(hit_roll) / r.n;
    r.chance = chance / r.n;
    for (double& d : r.distance) d /= std::max(1, r.distance_scenes);
    r.pos_rho = pos_grid_spearman(w);
    return r;
}

}  // namespace vit
