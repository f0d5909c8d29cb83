// The one table of stages. Everything that names, shapes or explains a stage
// comes from here: the forward pass records through it, the navigator lists
// it, `vitscope-cli info` prints it, the views take their titles, axes,
// explanations and PyTorch lines from it, and gradients are named after it.
// Texts are generated from the config and the options in force, so what the
// screen says is what was computed.
#pragma once
#include <string>
#include <vector>

#include "core/model/model.h"

namespace vit {

enum class Stage {
    Input, Patches, PatchEmbed, Tokens, Embed,
    LnMean, LnStd, LnNormalized, LnOut,
    AttnQ, AttnK, AttnV, AttnScores, AttnPattern, AttnZ, AttnOut, ResidMid,
    MlpPre, MlpPost, MlpOut, ResidPost,
    Pooled, Logits, Probs,
};
enum class LnSite { None, Ln1, Ln2, Final };

struct StageInfo {
    std::string name;               // "blocks.3.attn.pattern" (or "...pattern.grad")
    Stage kind = Stage::Input;
    LnSite ln = LnSite::None;
    int layer = -1;                 // block index, -1 outside the blocks
    Shape shape;                    // per image (no batch axis)
    std::string title;              // "Attention pattern"
    std::string what;               // one or two sentences, true for these options
    std::string torch;              // the PyTorch line that computes it, with the options' values
    std::vector<std::string> axes;  // one label per axis: "heads", "tokens (queries)", ...
    std::vector<std::string> from;  // the stages it is computed from
    bool per_head = false;          // first axis is heads
    bool signed_values = true;      // diverging colormap by default
    bool has_grad = false;          // the backward pass records "<name>.grad"
    bool is_grad = false;
};

// Every stage a forward pass of this config with these options records, in order.
std::vector<StageInfo> stage_table(const Config& c, const Options& o = {});
// One stage by name; "<stage>.grad" gives the gradient's description (same shape
// and axes). Unknown names give a StageInfo with an empty title and no axes.
StageInfo stage_info(const std::string& name, const Config& c, const Options& o = {});
// Names and shapes alone, from the table.
std::vector<std::string> stage_names(const Config& c, const Options& o = {});
std::vector<std::pair<std::string, Shape>> stage_shapes(const Config& c, const Options& o = {});

// Splits "blocks.3.attn.q" into layer 3 and "attn.q" (-1 and the name outside blocks).
int stage_layer(const std::string& name, std::string* rest = nullptr);

}  // namespace vit
