// Stage identity: every kind of stage a forward pass can record, and the id that
// addresses one stage of a trace, (kind, layer). Names ("blocks.3.attn.pattern")
// are derived from ids (stages.h) for display, export and the command line only.
// This header is light on purpose (no xtensor): views, jobs and exports use ids.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>

namespace vit {

// X(kind): every kind of stage. A new stage is one line here, one definition in
// stages.cpp (its name, texts, gradient, map box, cell math) and its computation
// in the part that computes it (core/model/parts/, which also gives its place and
// shape in the table), and backward.cpp if it has a gradient.
#define VIT_STAGE_KINDS(X)                                                                      \
    X(Input) X(Patches) X(PatchEmbed)                                                           \
    X(PatchNormRms) X(PatchNormNormalized) X(PatchNormOut)                                      \
    X(Tokens) X(PosEmbedLearned) X(PosEmbed) X(Embed) X(EmbedKept)                              \
    X(WithRegisters) X(LnPreMean) X(LnPreStd) X(LnPreNormalized) X(LnPreOut)                    \
    X(Ln1Mean) X(Ln1Std) X(Ln1Rms) X(Ln1Normalized) X(Ln1Out)                                   \
    X(AttnQ) X(AttnK) X(AttnV) X(AttnQRot) X(AttnKRot) X(AttnScores) X(AttnPattern) X(AttnZ) X(AttnOut) X(Ls1) X(ResidMid) \
    X(Ln2Mean) X(Ln2Std) X(Ln2Rms) X(Ln2Normalized) X(Ln2Out)                                   \
    X(MlpPre) X(MlpPost) X(MlpNormMean) X(MlpNormStd) X(MlpNormNormalized) X(MlpNormOut)        \
    X(MlpOut) X(Ls2) X(ResidPost)                                                               \
    X(LnFinalMean) X(LnFinalStd) X(LnFinalRms) X(LnFinalNormalized) X(LnFinalOut)               \
    X(Pooled) X(PooledDist) X(LogitsCls) X(LogitsDist) X(Logits) X(Probs)                       \
    X(HeadProbe) X(HeadAttnQ) X(HeadAttnK) X(HeadAttnV) X(HeadAttnScores) X(HeadAttnPattern)    \
    X(HeadAttnZ) X(HeadAttnOut) X(HeadLnMean) X(HeadLnStd) X(HeadLnNormalized) X(HeadLnOut)     \
    X(HeadMlpPre) X(HeadMlpPost) X(HeadMlpOut) X(HeadResidPost) X(Embedding)

enum class StageKind : uint8_t {
#define VIT_STAGE_ENUM(k) k,
    VIT_STAGE_KINDS(VIT_STAGE_ENUM)
#undef VIT_STAGE_ENUM
};
constexpr int kStageKinds = 0
#define VIT_STAGE_COUNT(k) +1
    VIT_STAGE_KINDS(VIT_STAGE_COUNT)
#undef VIT_STAGE_COUNT
    ;

// One stage of a trace: its kind and, for the stages of an encoder block, the block.
struct StageId {
    StageKind kind = StageKind::Input;
    int layer = -1;  // block index; -1 for stages outside the blocks
    bool operator==(const StageId& o) const { return kind == o.kind && layer == o.layer; }
    bool operator!=(const StageId& o) const { return !(*this == o); }
    bool operator<(const StageId& o) const { return layer != o.layer ? layer < o.layer : kind < o.kind; }
};
struct StageIdHash {
    size_t operator()(const StageId& s) const { return size_t(s.kind) * 131071u + size_t(s.layer + 1); }
};

// The norms of the model and the stages each records: a LayerNorm mean, std, normalized and out; an
// RMSNorm (Config::norm) rms, normalized and out. Patch: the norm on the patch embeddings (AIMv2). Mlp: the
// LayerNorm over the MLP's hidden units before fc2 (EVA-02 Base and Large: timm's scale_mlp).
enum class LnSite : uint8_t { None, Ln1, Ln2, Final, Pre, Head, Patch, Mlp };
enum class LnPart : uint8_t { Mean, Std, Normalized, Out, Rms };
LnSite ln_site(StageKind k);
LnPart ln_part(StageKind k);           // only for kinds with a site
StageKind ln_kind(LnSite site, LnPart part);  // throws where no model has that part there (ln_has)
bool ln_has(LnSite site, LnPart part);

}  // namespace vit
