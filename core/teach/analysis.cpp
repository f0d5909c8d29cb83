#include "core/teach/analysis.h"

#include <algorithm>
#include <functional>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace vit {

Stats stats(const float* x, size_t n, int bins) {
    Stats s;
    if (!n) return s;
    s.min = s.max = x[0];
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; ++i) {
        if (x[i] < s.min) { s.min = x[i]; s.argmin = i; }
        if (x[i] > s.max) { s.max = x[i]; s.argmax = i; }
        sum += x[i];
    }
    s.mean = float(sum / n);
    for (size_t i = 0; i < n; ++i) sq += (x[i] - s.mean) * double(x[i] - s.mean);
    s.std = float(std::sqrt(sq / n));
    s.hist.assign(std::max(bins, 1), 0.f);
    float w = (s.max - s.min) / bins;
    for (size_t i = 0; i < n; ++i) {
        int b = w > 0 ? int((x[i] - s.min) / w) : 0;
        s.hist[std::clamp(b, 0, bins - 1)] += 1;
    }
    return s;
}

namespace {
const Array& pattern(const Trace& t, int l) { return t.get(StageId{StageKind::AttnPattern, l}); }
// Tokens before the patches (cls, registers, dist): the patch keys start there.
size_t prefix_of(const Trace& t) { return size_t(t.table().dims().prefix); }
void need_cls(const Trace& t, const char* what) {
    const Config& c = t.table().config();
    if (c.cls_token) return;
    // what the model has instead, true to it: SigLIP's probe, or (timm's reg4_gap, gap) the mean of the patches
    throw std::invalid_argument(std::string(what) + " follows the cls token, and this model has none " +
                                (c.pooling == Pooling::Map
                                     ? "(its image summary is the pooling head's probe attention: head.attn.pattern)"
                                     : "(it averages its patch tokens)"));
}
}  // namespace

std::vector<float> on_patch_grid(const Trace& t, const std::vector<float>& kept) {
    const RunDims& rd = t.table().dims();
    if (kept.size() != rd.kept.size())
        throw std::invalid_argument(std::to_string(kept.size()) + " values for the " + std::to_string(rd.kept.size()) +
                                    " patch tokens of the run");
    if (!rd.dropped()) return kept;
    std::vector<float> out(size_t(rd.N), std::numeric_limits<float>::quiet_NaN());
    for (size_t i = 0; i < kept.size(); ++i) out[size_t(rd.kept[i])] = kept[i];
    return out;
}

std::vector<float> cls_attention(const Trace& t, int layer, int head) {
    need_cls(t, "cls attention");
    const Array& p = pattern(t, layer);
    const size_t H = p.shape(0), T = p.shape(1), pre = prefix_of(t);
    std::vector<float> out(T - pre, 0.f);
    for (size_t h = 0; h < H; ++h) {
        if (head >= 0 && size_t(head) != h) continue;
        for (size_t j = pre; j < T; ++j) out[j - pre] += p(h, 0, j);  // row 0 = the cls query, over the patches
    }
    if (head < 0) for (auto& v : out) v /= float(H);
    return on_patch_grid(t, out);
}

std::vector<float> probe_attention(const Trace& t, int head) {
    const Array* p = t.find(StageId{StageKind::HeadAttnPattern});
    if (!p && !t.table().config().cls_token)  // timm's cls-less ViTs that average their patches
        throw std::invalid_argument("no cls token or probe: no one token sums up the image; try 'attention from a token'");
    if (!p) throw std::invalid_argument("this model has no attention-pooling head (no head.attn.pattern)");
    const size_t H = p->shape(0), T = p->shape(2), pre = prefix_of(t);
    if (head >= int(H)) throw std::invalid_argument("head " + std::to_string(head) + " out of range");
    std::vector<float> out(T - pre, 0.f);
    for (size_t h = 0; h < H; ++h) {
        if (head >= 0 && size_t(head) != h) continue;
        for (size_t j = pre; j < T; ++j) out[j - pre] += (*p)(h, 0, j);
    }
    if (head < 0) for (auto& v : out) v /= float(H);
    return on_patch_grid(t, out);
}

namespace {
// The cls token's row of a product of per-layer matrices M_upto ... M_1 M_0 (the rollout's R): row 0 of
// it is e0^T M_upto ... M_0, so it is a row vector times each matrix from the last layer down, T^2 per
// layer instead of the T^3 of the whole product (which the window would pay at every new trace).
// `layer_row(l, k, row)` writes row k of M_l (T values). Only the rows the vector weighs are made
// (M_upto's row 0 alone), one at a time: nothing T x T is held, and each row is used while in cache.
std::vector<double> cls_row_of_product(size_t T, int upto,
                                       const std::function<void(int, size_t, double*)>& layer_row) {
    std::vector<double> v(T, 0.0), out(T), row(T);
    v[0] = 1;
    for (int l = upto; l >= 0; --l) {
        std::fill(out.begin(), out.end(), 0.0);
        for (size_t k = 0; k < T; ++k) {  // out = v M_l, summed over k in order
            const double vk = v[k];
            if (vk == 0) continue;
            layer_row(l, k, row.data());
            for (size_t j = 0; j < T; ++j) out[j] += vk * row[j];
        }
        v.swap(out);
    }
    return v;
}
}  // namespace

std::vector<float> attention_rollout(const Trace& t, int upto, Fusion f, float discard) {
    need_cls(t, "attention rollout");
    const size_t T = pattern(t, 0).shape(1), pre = prefix_of(t);
    // R = A_upto ... A_0 with each A_l the heads fused, optionally thinned, then (A + I) / 2, rows summing to 1.
    std::vector<double> sorted;
    const std::vector<double> R0 = cls_row_of_product(T, upto, [&](int l, size_t i, double* a) {
        const Array& p = pattern(t, l);
        const size_t H = p.shape(0);
        const float* pd = p.data() + i * T;  // row i of head 0
        // the heads fused, each head's row read contiguously (the same operations in the same order
        // per entry as a loop over the heads)
        if (f == Fusion::Mean) std::fill(a, a + T, 0.0);
        else for (size_t j = 0; j < T; ++j) a[j] = pd[j];
        for (size_t h = 0; h < H; ++h) {
            const float* ph = pd + h * T * T;
            if (f == Fusion::Mean) for (size_t j = 0; j < T; ++j) a[j] += double(ph[j]) / double(H);
            else if (f == Fusion::Max) for (size_t j = 0; j < T; ++j) a[j] = std::max(a[j], double(ph[j]));
            else for (size_t j = 0; j < T; ++j) a[j] = std::min(a[j], double(ph[j]));
        }
        if (const size_t k = size_t(discard * T); discard > 0 && k > 0) {
            // drop the smallest weights of the row, never the diagonal
            sorted.assign(a, a + T);
            std::nth_element(sorted.begin(), sorted.begin() + long(k - 1), sorted.end());
            const double thr = sorted[k - 1];
            size_t dropped = 0;
            for (size_t j = 0; j < T && dropped < k; ++j)
                if (j != i && a[j] <= thr) { a[j] = 0; ++dropped; }
        }
        double s = 0;
        for (size_t j = 0; j < T; ++j) { a[j] = 0.5 * a[j] + (i == j ? 0.5 : 0); s += a[j]; }
        for (size_t j = 0; j < T; ++j) a[j] /= s;
    });
    std::vector<float> out(T - pre);
    for (size_t j = pre; j < T; ++j) out[j - pre] = float(R0[j]);  // row 0: the cls token, over the patches
    return on_patch_grid(t, out);
}

std::vector<float> grad_rollout(const Trace& t, int upto) {
    if (!t.has_grads()) throw std::invalid_argument("gradient rollout needs a trace with gradients");
    need_cls(t, "gradient rollout");
    const size_t T = pattern(t, 0).shape(1), pre = prefix_of(t);
    for (int l = 0; l <= upto; ++l)
        if (!t.grad(StageId{StageKind::AttnPattern, l}))
            throw std::invalid_argument("the trace has no gradient of " + t.table().name({StageKind::AttnPattern, l}));
    // R = R + A_l R per layer, that is R = (I + A_upto) ... (I + A_0), A_l = mean over heads of relu(grad * A).
    const std::vector<double> R0 = cls_row_of_product(T, upto, [&](int l, size_t i, double* a) {
        const Array& p = pattern(t, l);
        const Array& gp = *t.grad(StageId{StageKind::AttnPattern, l});
        const size_t H = p.shape(0);
        std::fill(a, a + T, 0.0);
        for (size_t h = 0; h < H; ++h) {
            const float *ph = p.data() + (h * T + i) * T, *gh = gp.data() + (h * T + i) * T;
            for (size_t j = 0; j < T; ++j) a[j] += std::max(0.0, double(gh[j]) * ph[j]) / H;
        }
        a[i] += 1;
    });
    std::vector<float> out(T - pre);
    for (size_t j = pre; j < T; ++j) out[j - pre] = float(R0[j]);
    return on_patch_grid(t, out);
}

namespace {
Array comparable(const Array* ap, const RunDims& rb, const Array* bp, const RunDims& rn) {
    if (!ap || !bp || !bp->size()) return Array();
    if (ap->shape() == bp->shape()) return *ap;
    if (rb.dropped() || !rn.dropped() || rb.N != rn.N || rb.prefix != rn.prefix || ap->dimension() != bp->dimension())
        return Array();
    // The base's tokens that `now` kept: the prefix, then the kept patches (stages before the blocks'
    // order, tokens / pos_embed / embed, have every patch in both).
    std::vector<size_t> keep;
    for (int i = 0; i < rn.prefix; ++i) keep.push_back(size_t(i));
    for (int p : rn.kept) keep.push_back(size_t(rn.prefix + p));
    Array a = *ap;
    for (size_t ax = 0; ax < a.dimension(); ++ax) {
        if (a.shape(ax) == bp->shape(ax)) continue;
        if (a.shape(ax) != size_t(rb.T) || bp->shape(ax) != size_t(rn.T)) return Array();
        Shape sh(a.shape().begin(), a.shape().end());
        const size_t outer = shape_numel(Shape(sh.begin(), sh.begin() + long(ax))),
                     inner = shape_numel(Shape(sh.begin() + long(ax) + 1, sh.end()));
        sh[ax] = keep.size();
        Array g = Array::from_shape(sh);
        for (size_t o = 0; o < outer; ++o)
            for (size_t k = 0; k < keep.size(); ++k)
                std::copy_n(a.data() + (o * size_t(rb.T) + keep[k]) * inner, inner, g.data() + (o * keep.size() + k) * inner);
        a = std::move(g);
    }
    return a.shape() == bp->shape() ? a : Array();
}

// A trace's rows read one at a time in table order without filling an on-demand trace's cache: a row
// the pass did not keep comes from its block computed into a trace of the reader's own (one block
// held at a time).
class RowReader {
public:
    explicit RowReader(const Trace& t) : t_(t) {}
    const Array* operator()(StageId id) {
        const int r = t_.index(id);
        if (r < 0) return nullptr;
        if (t_.kept(size_t(r)) || !t_.on_demand()) return &t_.at(size_t(r));
        const int l = t_.info(size_t(r)).layer;
        if (held_ != l) {
            block_ = t_.block(l);
            held_ = l;
        }
        return &block_.at(size_t(r));
    }

private:
    const Trace& t_;
    Trace block_;
    int held_ = -1;
};
}  // namespace

Array comparable_base(const Trace& base, const Trace& now, StageId id) {
    if (base.empty() || now.empty()) return Array();
    return comparable(base.find(id), base.table().dims(), now.find(id), now.table().dims());
}

std::vector<StageChange> trace_changes(const Trace& base, const Trace& now,
                                       const std::function<void(int, int)>& progress) {
    std::vector<StageChange> out;
    RowReader read_base(base), read_now(now);
    const RunDims& rb = base.table().dims();
    const RunDims& rn = now.table().dims();
    int block = -1;
    for (size_t r = 0; r < now.size(); ++r) {
        const StageId id = now.info(r).id;
        if (progress && id.layer != block && id.layer >= 0) progress(block = id.layer, now.depth());
        const Array* bp = read_now(id);
        if (!bp) continue;
        const Array& b = *bp;
        const Array a = comparable(read_base(id), rb, bp, rn);
        if (!a.size() || a.shape() != b.shape()) continue;
        double dn = 0, bn = 0;
        for (size_t k = 0; k < a.size(); ++k) {
            double df = double(b.data()[k]) - a.data()[k];
            dn += df * df;
            bn += double(a.data()[k]) * a.data()[k];
        }
        out.push_back({id, now.info(r).name, std::sqrt(dn), std::sqrt(bn)});
    }
    return out;
}

std::string why_nothing_changed(const Weights& w, const Options& now, const Options& base) {
    if (now == base) return "";
    const Config& c = w.cfg;
    std::vector<std::string> why;
    if (now.affine != base.affine) {
        if (layernorms_are_identity(w))
            why.push_back("every LayerNorm of this model has gamma = 1 and beta = 0 (nn.LayerNorm's initial values), so "
                          "elementwise_affine multiplies by 1 and adds 0: out equals normalized with it on or off");
        else
            why.push_back("elementwise_affine changed, yet no stage moved");
    }
    if (now.unbiased != base.unbiased) why.push_back("the std's divisor changed (N or N-1), yet no stage moved");
    if (now.pooling_for(c) == base.pooling_for(c) && now.pooling != base.pooling)
        why.push_back(std::string("the pooling asked for is this model's own (") + (now.pooling_for(c) == Pooling::Mean ? "mean" : "cls") + ")");
    else if (now.pooling != base.pooling)
        why.push_back("the pooling changed, yet no stage moved");
    if (now.bug_reshape_patches != base.bug_reshape_patches) {
        const int gw = (now.image_w > 0 ? now.image_w : c.image_size) / std::max(1, c.patch);
        if (gw <= 1 && c.channels == 1)
            why.push_back("with one patch per row and one channel, a plain reshape cuts the same tiles as unfold");
        else
            why.push_back("the reshape bug cut other tiles, yet every value came out the same (is the image uniform?)");
    }
    if (now.bug_scale_after_softmax != base.bug_scale_after_softmax)
        why.push_back("the scale moved after the softmax, yet no stage moved");
    if (!(now.iv == base.iv)) why.push_back("the interventions change nothing this pass computes (a head or sub-layer that was already 0?)");
    if (why.empty()) why.push_back("the options differ only in ways this model does not use");
    std::string out;
    for (size_t i = 0; i < why.size(); ++i) out += (i ? "; " : "") + why[i];
    return out;
}

}  // namespace vit
