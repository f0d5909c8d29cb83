#include "analysis.h"

#include <algorithm>
#include <cmath>

namespace vit {

int stage_layer(const std::string& name, std::string* rest) {
    if (name.rfind("blocks.", 0) != 0) { if (rest) *rest = name; return -1; }
    size_t dot = name.find('.', 7);
    if (dot == std::string::npos) { if (rest) *rest = name; return -1; }
    if (rest) *rest = name.substr(dot + 1);
    return std::atoi(name.c_str() + 7);
}

StageInfo stage_info(const std::string& name, const Config& c) {
    std::string r;
    int l = stage_layer(name, &r);
    std::string L = std::to_string(l);
    const std::string T = std::to_string(c.tokens()), D = std::to_string(c.width), N = std::to_string(c.patches()),
                      H = std::to_string(c.heads), d = std::to_string(c.head_dim()), M = std::to_string(c.mlp),
                      P = std::to_string(c.patch), C = std::to_string(c.channels), S = std::to_string(c.image_size),
                      K = std::to_string(c.classes), CPP = std::to_string(c.patch_dim());
    std::string ln_src = r.rfind("ln1", 0) == 0 ? "the residual stream entering the block"
                       : r.rfind("ln2", 0) == 0 ? "the residual stream after attention" : "the final residual stream";
    std::string lnmod = l < 0 ? "model.norm" : "blocks[" + L + "]." + (r.rfind("ln1", 0) == 0 ? "norm1" : "norm2");
    StageInfo s;
    auto set = [&](std::string title, std::string what, std::string torch, std::vector<std::string> axes,
                   bool per_head = false, bool sgn = true) {
        s.title = std::move(title); s.what = std::move(what); s.torch = std::move(torch);
        s.axes = std::move(axes); s.per_head = per_head; s.signed_values = sgn;
    };
    if (r == "input")
        set("Input image", "The image after resizing and normalising with the model's mean and std: (" + C + ", " + S + ", " + S + ").",
            "x = (img - mean) / std", {"channels", "rows", "columns"}, false, false);
    else if (r == "patches")
        set("Patches", "The image cut into " + N + " patches of " + P + "x" + P + ", each flattened channel-major to " + CPP +
            " numbers. A plain reshape of the image would mix pixels of neighbouring patches.",
            "x.unfold(1, P, P).unfold(2, P, P).permute(1, 2, 0, 3, 4).reshape(N, C*P*P)", {"patches", "pixels in a patch"},
            false, false);
    else if (r == "patch_embed")
        set("Patch embedding", "Each patch mapped linearly to a " + D + "-dim token: identical to a Conv2d with kernel = stride = " + P + ".",
            "nn.Conv2d(C, D, P, stride=P)(x).flatten(2).transpose(1, 2)", {"patches", "embedding dims"});
    else if (r == "tokens")
        set("cls token prepended", "A learned cls token is put in front of the " + N + " patch tokens: " + T +
            " tokens. Its final state is what the classifier reads.", "torch.cat([cls_token, x], dim=1)", {"tokens", "embedding dims"});
    else if (r == "embed")
        set("Position embedding added", "A learned vector per position is added, so attention can tell where a patch came from. "
            "This is the residual stream entering block 0.", "x = x + pos_embed", {"tokens", "embedding dims"});
    else if (r.size() > 4 && (r.rfind("ln", 0) == 0)) {
        std::string part = r.substr(r.find('.') + 1);
        std::string base = "LayerNorm over the " + D + " dims of each token, applied to " + ln_src + ". ";
        if (part == "mean") set("LayerNorm: mean", base + "Mean of each token.", "x.mean(-1)", {"tokens"});
        else if (part == "std") set("LayerNorm: std", base + "Standard deviation of each token (N or N-1 divisor per the toggle; eps not included).",
                                    "x.std(-1, unbiased=False)", {"tokens"}, false, false);
        else if (part == "normalized") set("LayerNorm: normalized", base + "(x - mean) / sqrt(var + eps): every token now has mean 0 and std 1.",
                                           "(x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)",
                                           {"tokens", "embedding dims"});
        else set("LayerNorm: output", base + "normalized * gamma + beta (with elementwise_affine); just normalized without.",
                 lnmod + "(x)", {"tokens", "embedding dims"});
    } else if (r == "attn.q" || r == "attn.k" || r == "attn.v") {
        std::string which = r == "attn.q" ? "Queries" : r == "attn.k" ? "Keys" : "Values";
        set(which, which + " of every token for each of the " + H + " heads (" + d + " dims each): one third of the fused qkv Linear, split into heads.",
            "q, k, v = blocks[" + L + "].attn.qkv(x).reshape(T, 3, H, d).permute(1, 2, 0, 3)", {"heads", "tokens", "head dims"}, true);
    } else if (r == "attn.scores")
        set("Attention scores", "How much each query token matches each key token: q.k scaled by 1/sqrt(" + d +
            ") BEFORE the softmax (scaling after it, as one seed notebook does, is a bug).",
            "scores = q @ k.transpose(-2, -1) / math.sqrt(d)", {"heads", "tokens (queries)", "tokens (keys)"}, true);
    else if (r == "attn.pattern")
        set("Attention pattern", "Softmax over keys: each row sums to 1 and says where that token looks. Row 0 is the cls token.",
            "attn = scores.softmax(dim=-1)", {"heads", "tokens (queries)", "tokens (keys)"}, true, false);
    else if (r == "attn.z")
        set("Attention-weighted values", "Each token's new value: the attention-weighted mix of all tokens' values, per head.",
            "z = attn @ v", {"heads", "tokens", "head dims"}, true);
    else if (r == "attn.out")
        set("Attention output", "Heads concatenated back to " + D + " dims and mixed by the output projection.",
            "blocks[" + L + "].attn.proj(z.transpose(0, 1).reshape(T, D))", {"tokens", "embedding dims"});
    else if (r == "resid_mid")
        set("Residual after attention", "The attention output added to the block's input (skip connection).",
            "x = x + attn_out", {"tokens", "embedding dims"});
    else if (r == "mlp.pre")
        set("MLP hidden (before GELU)", "First Linear of the MLP: " + D + " -> " + M + " dims per token.",
            "blocks[" + L + "].mlp.fc1(x)", {"tokens", "hidden units"});
    else if (r == "mlp.post")
        set("MLP hidden (after GELU)", "GELU (exact, with erf): the only nonlinearity outside attention's softmax.",
            "F.gelu(h)", {"tokens", "hidden units"});
    else if (r == "mlp.out")
        set("MLP output", "Second Linear of the MLP: back to " + D + " dims.", "blocks[" + L + "].mlp.fc2(h)", {"tokens", "embedding dims"});
    else if (r == "resid_post")
        set("Residual after the MLP", "The block's output: the residual stream entering the next block.",
            "x = x + mlp_out", {"tokens", "embedding dims"});
    else if (r == "pooled")
        set("Pooled", c.pooling == Pooling::Cls ? "The cls token's final row: the image's summary the head reads."
                                                : "The mean of the patch tokens (then LayerNorm).",
            c.pooling == Pooling::Cls ? "x[:, 0]" : "x[:, 1:].mean(1)", {"embedding dims"});
    else if (r == "logits")
        set("Logits", "One score per class: a Linear layer on the pooled vector.", "model.head(pooled)", {"classes"});
    else if (r == "probs")
        set("Probabilities", "Softmax of the logits.", "logits.softmax(-1)", {"classes"}, false, false);
    else
        set(name, "", "", {});
    // Where the inputs come from (trace names), for "in -> out" in the views.
    const std::string blk = l >= 0 ? "blocks." + L + "." : "";
    const std::string prev_resid = l > 0 ? "blocks." + std::to_string(l - 1) + ".resid_post" : "embed";
    const std::string last_resid = c.depth > 0 ? "blocks." + std::to_string(c.depth - 1) + ".resid_post" : "embed";
    const bool cls_pool = c.pooling == Pooling::Cls;
    if (r == "patches") s.from = {"input"};
    else if (r == "patch_embed") s.from = {"patches"};
    else if (r == "tokens") s.from = {"patch_embed"};
    else if (r == "embed") s.from = {"tokens"};
    else if (r.rfind("ln1.", 0) == 0) s.from = {prev_resid};
    else if (r.rfind("ln2.", 0) == 0) s.from = {blk + "resid_mid"};
    else if (r.rfind("ln_final.", 0) == 0) s.from = {cls_pool ? last_resid : std::string("pooled")};
    else if (r == "attn.q" || r == "attn.k" || r == "attn.v") s.from = {blk + "ln1.out"};
    else if (r == "attn.scores") s.from = {blk + "attn.q", blk + "attn.k"};
    else if (r == "attn.pattern") s.from = {blk + "attn.scores"};
    else if (r == "attn.z") s.from = {blk + "attn.pattern", blk + "attn.v"};
    else if (r == "attn.out") s.from = {blk + "attn.z"};
    else if (r == "resid_mid") s.from = {prev_resid, blk + "attn.out"};
    else if (r == "mlp.pre") s.from = {blk + "ln2.out"};
    else if (r == "mlp.post") s.from = {blk + "mlp.pre"};
    else if (r == "mlp.out") s.from = {blk + "mlp.post"};
    else if (r == "resid_post") s.from = {blk + "resid_mid", blk + "mlp.out"};
    else if (r == "pooled") s.from = {cls_pool ? std::string("ln_final.out") : last_resid};
    else if (r == "logits") s.from = {cls_pool ? std::string("pooled") : std::string("ln_final.out")};
    else if (r == "probs") s.from = {"logits"};
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".grad") == 0) {
        s.title = "Gradient of " + s.title;
        s.what = "d logit[class] / d (" + name.substr(0, name.size() - 5) + ").";
        s.torch = "logits[cls].backward(); stage.grad";
        s.signed_values = true;
    }
    return s;
}

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
const Tensor& pattern(const Trace& t, int l) { return t.get("blocks." + std::to_string(l) + ".attn.pattern"); }
}  // namespace

std::vector<float> cls_attention(const Trace& t, int layer, int head) {
    const Tensor& p = pattern(t, layer);
    size_t H = p[0], T = p[1];
    std::vector<float> out(T - 1, 0.f);
    for (size_t h = 0; h < H; ++h) {
        if (head >= 0 && size_t(head) != h) continue;
        for (size_t j = 1; j < T; ++j) out[j - 1] += p((h * T) * T + j);  // row 0 = cls query
    }
    if (head < 0) for (auto& v : out) v /= float(H);
    return out;
}

namespace {
using Mat = std::vector<double>;
Mat matmul(const Mat& a, const Mat& b, size_t T) {
    Mat c(T * T, 0.0);
    for (size_t i = 0; i < T; ++i)
        for (size_t k = 0; k < T; ++k) {
            double v = a[i * T + k];
            if (v == 0) continue;
            for (size_t j = 0; j < T; ++j) c[i * T + j] += v * b[k * T + j];
        }
    return c;
}
}  // namespace

std::vector<float> attention_rollout(const Trace& t, int upto, Fusion f, float discard) {
    const size_t T = pattern(t, 0)[1];
    Mat R(T * T, 0.0);
    for (size_t i = 0; i < T; ++i) R[i * T + i] = 1;
    for (int l = 0; l <= upto; ++l) {
        const Tensor& p = pattern(t, l);
        size_t H = p[0];
        Mat A(T * T);
        for (size_t i = 0; i < T * T; ++i) {
            double v = f == Fusion::Mean ? 0 : p(i);
            for (size_t h = 0; h < H; ++h) {
                double x = p(h * T * T + i);
                if (f == Fusion::Mean) v += x / H;
                else if (f == Fusion::Max) v = std::max(v, x);
                else v = std::min(v, x);
            }
            A[i] = v;
        }
        if (discard > 0) {  // drop the smallest weights of each row, never the diagonal
            for (size_t i = 0; i < T; ++i) {
                std::vector<double> row(A.begin() + i * T, A.begin() + (i + 1) * T);
                std::vector<double> sorted = row;
                size_t k = size_t(discard * T);
                if (k == 0) continue;
                std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end());
                double thr = sorted[k - 1];
                size_t dropped = 0;
                for (size_t j = 0; j < T && dropped < k; ++j)
                    if (j != i && row[j] <= thr) { A[i * T + j] = 0; ++dropped; }
            }
        }
        for (size_t i = 0; i < T; ++i) {
            double s = 0;
            for (size_t j = 0; j < T; ++j) { A[i * T + j] = 0.5 * A[i * T + j] + (i == j ? 0.5 : 0); s += A[i * T + j]; }
            for (size_t j = 0; j < T; ++j) A[i * T + j] /= s;
        }
        R = matmul(A, R, T);
    }
    std::vector<float> out(T - 1);
    for (size_t j = 1; j < T; ++j) out[j - 1] = float(R[j]);  // row 0: the cls token
    return out;
}

std::vector<float> grad_rollout(const Trace& t, const Trace& g, int upto) {
    const size_t T = pattern(t, 0)[1];
    Mat R(T * T, 0.0);
    for (size_t i = 0; i < T; ++i) R[i * T + i] = 1;
    for (int l = 0; l <= upto; ++l) {
        const Tensor& p = pattern(t, l);
        const Tensor& gp = g.get("blocks." + std::to_string(l) + ".attn.pattern.grad");
        size_t H = p[0];
        Mat A(T * T, 0.0);
        for (size_t h = 0; h < H; ++h)
            for (size_t i = 0; i < T * T; ++i) A[i] += std::max(0.0, double(gp(h * T * T + i)) * p(h * T * T + i)) / H;
        Mat AR = matmul(A, R, T);
        for (size_t i = 0; i < T * T; ++i) R[i] += AR[i];
    }
    std::vector<float> out(T - 1);
    for (size_t j = 1; j < T; ++j) out[j - 1] = float(R[j]);
    return out;
}

std::vector<StageChange> trace_changes(const Trace& base, const Trace& now) {
    std::vector<StageChange> out;
    for (auto& e : now.entries()) {
        int i = base.index_of(e.name);
        if (i < 0) continue;
        const Tensor& a = base.at(size_t(i)).tensor;
        if (a.shape != e.tensor.shape) continue;
        double dn = 0, bn = 0;
        for (size_t k = 0; k < a.size(); ++k) {
            double df = double(e.tensor(k)) - a(k);
            dn += df * df;
            bn += double(a(k)) * a(k);
        }
        out.push_back({e.name, std::sqrt(dn), std::sqrt(bn)});
    }
    return out;
}

}  // namespace vit
