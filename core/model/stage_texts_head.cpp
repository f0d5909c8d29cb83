// The texts of the MLP's, the residual stream's and the head's stages (stage_texts.h).
#include <algorithm>
#include <string>

#include "core/model/stage_texts.h"

namespace vit {
namespace stage_texts {

// ---------------------------------------------------------------- MLP

void mlp_sub(const Ctx& x, StageInfo& s) {
    s.box.sub = std::string(act_label(x.c.act)) + ", " + str(x.M) + " hidden";
    if (x.sublayer_ablated(s.id.layer, true)) s.box.sub += ", output zeroed";
}

void d_mlp_pre(const Ctx& x, StageInfo& s) {
    s.axes = {"tokens", "hidden units"};
    s.from = {{K::Ln2Out, s.id.layer}};
    s.title = std::string("MLP hidden (before ") + act_label(x.c.act) + ")";
    s.what = "The MLP's first Linear: " + str(x.D) + " -> " + str(x.Mi) + " dims per token" +
             (x.c.act == Act::SwiGlu ? ": two halves of " + str(x.M) + ", x1 and x2, for SwiGLU." : ".");
    s.torch = x.c.act == Act::SwiGlu ? "h = blocks[" + std::to_string(s.id.layer) + "].mlp.w12(x)"
                                     : "h = blocks[" + std::to_string(s.id.layer) + "].mlp.fc1(x)";
    mlp_sub(x, s);
}

void d_mlp_post(const Ctx& x, StageInfo& s) {
    s.axes = {"tokens", "hidden units"};
    s.from = {{K::MlpPre, s.id.layer}};
    s.title = std::string("MLP hidden (after ") + act_label(x.c.act) + ")";
    switch (x.c.act) {
        case Act::Gelu:
            s.what = "GELU, the exact form x * Phi(x) with the normal CDF (erf), applied to every value: the MLP's "
                     "nonlinearity. Large negative inputs go to about 0, positive ones pass almost unchanged.";
            s.torch = "h = F.gelu(h)  # 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))";
            break;
        case Act::QuickGelu:
            s.what = "QuickGELU, x * sigmoid(1.702 x), applied to every value: OpenAI CLIP's cheaper approximation "
                     "of GELU (it is not in the weights: the model was trained with it).";
            s.torch = "h = h * torch.sigmoid(1.702 * h)  # QuickGELU";
            break;
        case Act::GeluTanh:
            s.what = "GELU in its tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), applied to "
                     "every value (SigLIP's gelu_pytorch_tanh).";
            s.torch = "h = F.gelu(h, approximate='tanh')";
            break;
        case Act::SwiGlu:
            s.what = "SwiGLU: the first half x1 through SiLU (x * sigmoid(x)) gates the second half x2, "
                     "silu(x1) * x2: " + str(x.Mi) + " -> " + str(x.M) + " dims per token.";
            s.torch = "x1, x2 = h.chunk(2, dim=-1); h = F.silu(x1) * x2";
            s.cell = CellRule::None;  // two inputs per cell: not written out
            break;
    }
    mlp_sub(x, s);
}

void d_mlp_out(const Ctx& x, StageInfo& s) {
    s.axes = kTD;
    s.from = {{x.c.mlp_norm ? K::MlpNormOut : K::MlpPost, s.id.layer}};
    s.title = "MLP output";
    s.what = std::string(x.c.mlp_norm ? "The MLP's second Linear, on the LayerNorm of the hidden units" : "The MLP's second Linear") +
             ": back to " + str(x.D) + " dims.";
    // (dinov2's and dinov3's SwiGLUFFN name the second Linear w3; timm's SwiGLU, fc2)
    s.torch = x.c.act == Act::SwiGlu && (x.c.family == ModelFamily::Dinov2 || x.c.family == ModelFamily::Dinov3)
                  ? "blocks[" + std::to_string(s.id.layer) + "].mlp.w3(h)"
                  : "blocks[" + std::to_string(s.id.layer) + "].mlp.fc2(" + (x.c.mlp_norm ? "mlp.norm(h)" : "h") + ")";
    if (x.sublayer_ablated(s.id.layer, true)) {
        s.intervened = true;
        s.title = "MLP output (ablated)";
        s.what = "Intervention: this block's MLP output is set to 0, so the residual stream passes the MLP unchanged.";
        s.torch = "mlp_out = torch.zeros(" + str(x.T) + ", " + str(x.D) + ")  # ablated";
    }
    mlp_sub(x, s);
}

void d_resid_post(const Ctx& x, StageInfo& s) {
    const int l = s.id.layer;
    s.axes = kTD;
    s.from = {{K::ResidMid, l}, {x.c.layer_scale ? K::Ls2 : K::MlpOut, l}};
    s.title = "Residual after the MLP";
    s.what = l + 1 < x.L ? "The block's output: the residual stream entering block " + std::to_string(l + 1) + "."
                         : "The last block's output, which goes to the final LayerNorm.";
    s.torch = x.c.layer_scale ? "x = x + ls2(mlp_out)" : "x = x + mlp_out";
    s.box.sub = "residual";
}

// ---------------------------------------------------------------- the head

void d_pooled(const Ctx& x, StageInfo& s) {
    s.axes = {"embedding dims"};
    switch (x.pool) {
        case Pooling::Cls:
            s.from = {{K::LnFinalOut, -1}};
            s.title = "Pooled (cls token)";
            s.what = std::string("The cls token's row of the final LayerNorm: the summary of the image that the ") +
                     (x.c.head == Head::Projection ? "projection" : "head") + " reads.";
            s.torch = "pooled = x[:, 0]";
            s.box.sub = x.c.head == Head::Distilled ? "cls and dist tokens" : "cls token";  // DeiT pools both
            break;
        case Pooling::Mean:
            s.from = {x.last_stream()};
            s.title = "Pooled (mean of patch tokens)";
            s.what = "The mean of the " + str(x.N) + " patch tokens (" +
                     (x.r.prefix ? "the " + std::string(x.r.prefix > 1 ? "prefix tokens are" : "cls token is") + " left out"
                                 : std::string("all the tokens")) +
                     "); the final LayerNorm (timm's fc_norm) follows.";
            s.torch = x.r.prefix ? "pooled = x[:, " + std::to_string(x.r.prefix) + ":].mean(dim=1)" : "pooled = x.mean(dim=1)";
            s.box.sub = "mean of patches";
            break;
        case Pooling::ClsThenNorm:
            s.from = {x.last_stream()};
            s.title = "Pooled (cls token)";
            s.what = "The cls token's row of the last residual stream; the final LayerNorm (ln_post) is applied to "
                     "this row alone, as CLIP does.";
            s.torch = "pooled = x[:, 0]";
            s.box.sub = "cls token";
            break;
        case Pooling::NormMean:
            s.from = {{K::LnFinalOut, -1}};
            s.title = "Pooled (mean of the normed patch tokens)";
            s.what = "The mean of the " + std::to_string(x.kept()) + " patch tokens of the final LayerNorm's output (" +
                     (x.r.prefix ? "the registers are left out" : std::string("every token: the model has no cls token")) +
                     "): the final norm comes first, on every token, then the average (timm's fc_norm=False).";
            s.torch = x.r.prefix ? "pooled = norm(x)[:, " + std::to_string(x.r.prefix) + ":].mean(dim=1)"
                                 : "pooled = norm(x).mean(dim=1)";
            s.box.sub = "mean of normed patches";
            break;
        case Pooling::Map:
            break;  // SigLIP: the head's stages pool
    }
}

void d_pooled_dist(const Ctx& x, StageInfo& s) {
    s.axes = {"embedding dims"};
    s.from = {{K::LnFinalOut, -1}};
    s.title = "Pooled (distillation token)";
    s.what = "The distillation token's row of the final LayerNorm: what head_dist reads.";
    s.torch = "pooled_dist = x[:, 1]";
    s.box.sub = "cls and dist tokens";  // one box with pooled
}

// The vector a classifier head reads: the pooled row, or the final norm of the pooled row.
StageId head_input(const Ctx& x) {
    return x.pool == Pooling::Cls || x.pool == Pooling::NormMean ? StageId{K::Pooled, -1} : StageId{K::LnFinalOut, -1};
}

// The head box's note: DeiT's two heads and their mean are one box, so it says so.
void logits_sub(const Ctx& x, StageInfo& s) {
    s.box.sub = x.c.head == Head::Distilled ? "2 heads averaged, " + str(x.K) + " classes" : str(x.K) + " classes";
}

void d_logits_cls(const Ctx& x, StageInfo& s) {
    s.axes = {"classes"};
    s.from = {{K::Pooled, -1}};
    s.title = "Logits of the cls head";
    s.what = "The class scores the cls token's head gives (" + str(x.K) + " classes).";
    s.torch = "logits_cls = model.head(pooled)";
    logits_sub(x, s);
}

void d_logits_dist(const Ctx& x, StageInfo& s) {
    s.axes = {"classes"};
    s.from = {{K::PooledDist, -1}};
    s.title = "Logits of the distillation head";
    s.what = "The class scores the distillation token's head gives: trained to match a CNN teacher's predictions.";
    s.torch = "logits_dist = model.head_dist(pooled_dist)";
    logits_sub(x, s);
}

void d_logits(const Ctx& x, StageInfo& s) {
    s.axes = {"classes"};
    if (x.c.head == Head::Distilled) {
        s.from = {{K::LogitsCls, -1}, {K::LogitsDist, -1}};
        s.title = "Logits (both heads averaged)";
        s.what = "DeiT's prediction at inference: the mean of the cls head's and the distillation head's logits.";
        s.torch = "logits = (logits_cls + logits_dist) / 2";
        s.cell = CellRule::None;
    } else {
        s.from = {head_input(x)};
        s.title = "Logits";
        s.what = "One score per class (" + str(x.K) + "): a Linear layer on the pooled vector.";
        s.torch = "logits = model.head(pooled)";
    }
    logits_sub(x, s);
}

void d_probs(const Ctx& x, StageInfo& s) {
    s.axes = {"classes"};
    s.from = {{K::Logits, -1}};
    s.title = "Probabilities";
    s.what = "Softmax of the logits: " + str(x.K) + " probabilities that sum to 1.";
    s.torch = "probs = logits.softmax(-1)";
    s.signed_values = false;
}

// The attention-pooling head: a learned probe attends over every token. SigLIP's (Hugging Face
// SiglipMultiheadAttentionPoolingHead: model.head.{probe, attention, layernorm, mlp}) or PE's (timm
// AttentionPoolLatent: model.attn_pool.{latent, q, kv, proj, norm, mlp}), with its own number of heads (PE: 8).
namespace {
bool timm_pool(const Ctx& x) { return x.c.family == ModelFamily::Pe; }
std::string pool_heads(const Ctx& x) { return str(size_t(x.c.pool_heads())); }
std::string pool_d(const Ctx& x) { return str(x.D / size_t(x.c.pool_heads())); }
std::string pool_norm(const Ctx& x) { return timm_pool(x) ? "model.attn_pool.norm" : "model.head.layernorm"; }
}  // namespace
void map_sub(const Ctx& x, StageInfo& s) { s.box.sub = "probe, " + pool_heads(x) + " heads"; }  // as head.ln's

void d_head_probe(const Ctx& x, StageInfo& s) {
    s.axes = {"probe", "embedding dims"};
    s.title = "Attention-pooling probe";
    s.what = "The learned probe: one query vector that attends over all " + str(x.T) + " tokens to pool them (" +
             (x.c.cls_token ? "the cls token among them: here the probe, not the cls token, makes the image's vector)."
                            : "the model has no cls token; this probe takes its place).");
    s.torch = (timm_pool(x) ? "probe = model.attn_pool.latent  # (1, 1, " : "probe = model.head.probe  # (1, 1, ") +
              str(x.D) + ")";
    map_sub(x, s);
}

void d_head_attn(const Ctx& x, StageInfo& s) {
    const std::string sd = pool_d(x), H = pool_heads(x), D = str(x.D);
    const bool t = timm_pool(x);
    map_sub(x, s);
    switch (s.id.kind) {
        case K::HeadAttnQ:
            s.axes = {"heads", "probe", "head dims"};
            s.from = {{K::HeadProbe, -1}};
            s.title = "Probe queries";
            s.what = "The probe's query for each of the pooling head's " + H + " heads (" + sd + " dims each): " +
                     (t ? std::string("the head's q Linear.") : "rows 0.." + str(x.D - 1) + " of the head's in_proj.");
            s.torch = (t ? "q = model.attn_pool.q(probe)" : "q = F.linear(probe, in_proj_weight[:" + D + "], in_proj_bias[:" + D + "])") +
                      ".reshape(1, " + H + ", " + sd + ").transpose(0, 1)";
            return;
        case K::HeadAttnK: case K::HeadAttnV: {
            const bool k = s.id.kind == K::HeadAttnK;
            s.axes = {"heads", "tokens", "head dims"};
            s.from = {{K::LnFinalOut, -1}};
            s.title = k ? "Keys of the tokens (pooling head)" : "Values of the tokens (pooling head)";
            s.what = std::string(k ? "Keys" : "Values") + " of every token for the pooling attention: " +
                     (t ? std::string(k ? "the first" : "the second") + " half of the head's kv Linear."
                        : "rows " + str((k ? 1 : 2) * x.D) + ".." + str((k ? 2 : 3) * x.D - 1) + " of the head's in_proj.");
            s.torch = t ? std::string(k ? "k" : "v") + " = model.attn_pool.kv(x)[..., " + (k ? ":" + D : D + ":") + "].reshape(" +
                              str(x.T) + ", " + H + ", " + sd + ").transpose(0, 1)"
                        : std::string(k ? "k" : "v") + " = F.linear(x, in_proj_weight[" + (k ? D + ":" + str(2 * x.D) : str(2 * x.D) + ":") +
                              "], ...).reshape(" + str(x.T) + ", " + H + ", " + sd + ").transpose(0, 1)";
            return;
        }
        case K::HeadAttnScores:
            s.axes = {"heads", "probe", "tokens (keys)"};
            s.from = {{K::HeadAttnQ, -1}, {K::HeadAttnK, -1}};
            s.title = "Probe attention scores";
            s.what = "How much the probe matches each token, per head: q.k / sqrt(" + sd + ").";
            s.torch = "scores = q @ k.transpose(-2, -1) / math.sqrt(" + sd + ")";
            return;
        case K::HeadAttnPattern:
            s.axes = {"heads", "probe", "tokens (keys)"};
            s.from = {{K::HeadAttnScores, -1}};
            s.title = "Probe attention";
            s.what = std::string("Softmax over the tokens: where the probe looks, per head. ") +
                     (x.c.cls_token ? "The weights that pool the image into one vector: in this model the probe's "
                                      "attention, not the cls token's, decides what the embedding is made of."
                                    : "This is the counterpart of the cls token's attention (the model has none): the "
                                      "weights that pool the image into one vector.");
            s.torch = "attn = scores.softmax(dim=-1)";
            s.signed_values = false;
            return;
        case K::HeadAttnZ:
            s.axes = {"heads", "probe", "head dims"};
            s.from = {{K::HeadAttnPattern, -1}, {K::HeadAttnV, -1}};
            s.title = "Probe's weighted values";
            s.what = "Per head, the attention-weighted mix of the tokens' values.";
            s.torch = "z = attn @ v";
            return;
        default:  // HeadAttnOut
            s.axes = {"probe", "embedding dims"};
            s.from = {{K::HeadAttnZ, -1}};
            s.title = "Pooling attention output";
            s.what = "The heads concatenated and mixed by the head's " + std::string(t ? "proj" : "out_proj") + ": the pooled vector.";
            s.torch = std::string(t ? "h = model.attn_pool.proj(" : "h = model.head.attention.out_proj(") +
                      "z.transpose(0, 1).reshape(1, " + D + "))";
            return;
    }
}

void d_head_mlp(const Ctx& x, StageInfo& s) {
    map_sub(x, s);
    switch (s.id.kind) {
        case K::HeadMlpPre:
            s.axes = {"probe", "hidden units"};
            s.from = {{K::HeadLnOut, -1}};
            s.title = "Pooling head MLP hidden (before GELU)";
            s.what = "The head's MLP, first Linear: " + str(x.D) + " -> " + str(x.M) + ".";
            s.torch = (timm_pool(x) ? "h2 = model.attn_pool.mlp.fc1(" : "h2 = model.head.mlp.fc1(") + pool_norm(x) + "(h))";
            return;
        case K::HeadMlpPost:
            s.axes = {"probe", "hidden units"};
            s.from = {{K::HeadMlpPre, -1}};
            s.title = std::string("Pooling head MLP hidden (after ") + act_label(x.c.act) + ")";
            s.what = std::string("The head MLP's nonlinearity, ") + act_label(x.c.act) + ".";
            s.torch = x.c.act == Act::GeluTanh ? "h2 = F.gelu(h2, approximate='tanh')" : "h2 = F.gelu(h2)";
            return;
        case K::HeadMlpOut:
            s.axes = {"probe", "embedding dims"};
            s.from = {{K::HeadMlpPost, -1}};
            s.title = "Pooling head MLP output";
            s.what = "The head MLP's second Linear: back to " + str(x.D) + " dims.";
            s.torch = timm_pool(x) ? "model.attn_pool.mlp.fc2(h2)" : "model.head.mlp.fc2(h2)";
            return;
        default:  // HeadResidPost
            s.axes = {"probe", "embedding dims"};
            s.from = {{K::HeadAttnOut, -1}, {K::HeadMlpOut, -1}};
            s.title = "Pooling head output";
            s.what = "The pooled vector plus its MLP (a residual, as in a block): h = h + mlp(layernorm(h)).";
            s.torch = (timm_pool(x) ? "h = h + model.attn_pool.mlp(" : "h = h + model.head.mlp(") + pool_norm(x) + "(h))";
            return;
    }
}

void d_embedding(const Ctx& x, StageInfo& s) {
    s.axes = {"embedding dims"};
    s.title = "Image embedding";
    s.box.sub = str(x.E) + " dims";
    if (x.c.pooling == Pooling::Map && x.c.head == Head::Projection) {
        s.from = {{K::HeadResidPost, -1}};
        s.what = "The model's output: the attention-pooled vector projected by x @ proj (" + str(x.D) + " -> " + str(x.E) +
                 "), the image embedding its CLIP training compares with text embeddings. There is no classifier.";
        s.torch = "embedding = model.head(h[:, 0])  # timm's form of PE's proj (its bias zeros)";
        return;
    }
    if (x.c.pooling == Pooling::Map) {
        s.from = {{K::HeadResidPost, -1}};
        s.what = "The model's output: the attention-pooled vector (" + str(x.E) + " dims). " +
                 std::string(x.c.family == ModelFamily::Pe ? "PE's CLIP training compares it (after a projection this "
                                                             "file does not hold) with text embeddings"
                                                           : "SigLIP compares it with text embeddings") +
                 "; there is no classifier.";
        s.torch = "embedding = h[:, 0]";
        return;
    }
    const bool pooled_first = x.pool == Pooling::Cls && x.c.head == Head::Projection;
    const StageId in = pooled_first ? StageId{K::Pooled, -1} : StageId{K::LnFinalOut, -1};
    s.from = {in};
    if (x.c.head == Head::Projection) {
        s.what = "The model's output: the " + std::string(pooled_first ? "pooled cls row" : "normalized cls row") +
                 " projected by x @ proj (" + str(x.D) + " -> " + str(x.E) + "), CLIP's image embedding, compared "
                 "with text embeddings by cosine similarity. There is no classifier.";
        s.torch = "embedding = " + std::string(pooled_first ? "pooled" : "x[:, 0]") + " @ model.proj";
    } else {
        s.what = "The model's output: the cls token's row of the final LayerNorm (" + str(x.D) +
                 " dims). This checkpoint has no classification head; the embedding is what its own forward "
                 "returns.";
        s.torch = "embedding = x[:, 0]";
    }
}

}  // namespace stage_texts
}  // namespace vit
