// The norms: LayerNorm with its internals recorded (mean, std, normalized, out).
#include <string>

#include "core/kernels/ops.h"
#include "core/kernels/profile.h"
#include "core/model/pass.h"

namespace vit {

// torch: F.layer_norm(x, (D,), weight, bias, eps) -- or, unbiased, var over D-1.
// With `add`, x is add->out and the residual add that makes it runs in the same pass, a few rows
// at a time (ops::add_layernorm: the same bits as the add, then the LayerNorm).
// A pass that streams (Recorder::stream) writes `normalized`, which it does not read again, past the caches.
// `rows` is per image; the stages are (rows) and (rows, D).
const float* layernorm_part(Pass& p, LnSite site, const float* x, const LayerNormW& w, size_t rows,
                            const PendingAdd* add) {
    const size_t D = p.D, R = p.B * rows;
    float* mean = p.rec(ln_kind(site, LnPart::Mean), {rows}).data();
    float* sd = p.rec(ln_kind(site, LnPart::Std), {rows}).data();
    float* norm = p.rec(ln_kind(site, LnPart::Normalized), {rows, D}).data();
    float* out = p.rec(ln_kind(site, LnPart::Out), {rows, D}).data();
    if (p.dry) return out;
    const Options& opt = p.opt;
    const float *g = opt.affine ? w.g.data() : nullptr, *bb = opt.affine ? w.b.data() : nullptr;
    const float eps = p.c.eps;
    if (add) {
        if (add->out != x) throw std::logic_error("layernorm_part: the pending add is not this LayerNorm's input");
        profile::Scope prof([] { return std::string("residual add + layernorm"); }, 9.0 * double(R) * double(D));
        ops::add_layernorm(add->out, out, norm, mean, sd, add->a, add->b, g, bb, int(R), int(D), eps, opt.unbiased,
                           p.rec.stream());
    } else {
        profile::Scope prof([] { return std::string("layernorm"); }, 8.0 * double(R) * double(D));
        ops::layernorm(out, norm, mean, sd, x, g, bb, int(R), int(D), eps, opt.unbiased, p.rec.stream());
    }
    // a patch point: activation patching replaces the output of ln1, ln2 and the final norm
    if (opt.iv.patch && (site == LnSite::Ln1 || site == LnSite::Ln2 || site == LnSite::Final))
        p.patch(ln_kind(site, LnPart::Out), p.layer, p.rec.last());
    return out;
}

}  // namespace vit
