// The norms: LayerNorm with its internals recorded (mean, std, normalized, out), and RMSNorm with its
// (rms, normalized, out).
#include <cmath>
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
namespace {

// torch: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight   (timm RmsNorm, nn.RMSNorm)
// Stages: rms (rows) = sqrt(mean(x^2)) shown without eps, as LayerNorm's std is; normalized = x / sqrt(mean(x^2)
// + eps); out = normalized * gamma (elementwise_affine off: out == normalized). There is no mean to remove and no
// beta; the unbiased switch has nothing to act on (the mean of squares is over D, as torch computes it).
const float* rmsnorm_part(Pass& p, LnSite site, const float* x, const LayerNormW& w, size_t rows,
                          const PendingAdd* add) {
    const size_t D = p.D, R = p.B * rows;
    float* rms = p.rec(ln_kind(site, LnPart::Rms), {rows}).data();
    float* norm = p.rec(ln_kind(site, LnPart::Normalized), {rows, D}).data();
    float* out = p.rec(ln_kind(site, LnPart::Out), {rows, D}).data();
    if (p.dry) return out;
    if (add) {
        if (add->out != x) throw std::logic_error("rmsnorm_part: the pending add is not this norm's input");
        residual_add(add->out, add->a, add->b, R, D);
    }
    profile::Scope prof([] { return std::string("rmsnorm"); }, 5.0 * double(R) * double(D));
    const float* g = p.opt.affine ? w.g.data() : nullptr;
    const double eps = double(p.c.eps);
    for (size_t r = 0; r < R; ++r) {
        const float* xr = x + r * D;
        double ss = 0;
        for (size_t j = 0; j < D; ++j) ss += double(xr[j]) * double(xr[j]);
        const double ms = ss / double(D);
        rms[r] = float(std::sqrt(ms));
        const float inv = float(1.0 / std::sqrt(ms + eps));
        float *nr = norm + r * D, *orow = out + r * D;
        for (size_t j = 0; j < D; ++j) {
            nr[j] = xr[j] * inv;
            orow[j] = g ? nr[j] * g[j] : nr[j];
        }
    }
    return out;
}

}  // namespace

const float* layernorm_part(Pass& p, LnSite site, const float* x, const LayerNormW& w, size_t rows,
                            const PendingAdd* add, size_t width) {
    // RMSNorm models norm every site with it (SigLIP's pooling head, a LayerNorm model's, excepted)
    if (p.c.norm == Norm::RmsNorm && site != LnSite::Head) {
        if (width) throw std::logic_error("layernorm_part: an RMSNorm of another width than the model's");
        const float* out = rmsnorm_part(p, site, x, w, rows, add);
        if (!p.dry && p.opt.iv.patch && (site == LnSite::Ln1 || site == LnSite::Ln2 || site == LnSite::Final))
            p.patch(ln_kind(site, LnPart::Out), p.layer, p.rec.last());
        return out;
    }
    const size_t D = width ? width : p.D, R = p.B * rows;
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
