// The stage table: the one source of what a stage is.
//
// Each kind of stage (stage_id.h) has one definition (StageDef, stages.cpp): its
// name pattern, whether it has a gradient and whether training keeps it, its box on
// the model map, its cell-math rule, the PyTorch module whose forward hook sees it,
// and the function that writes its axes and texts for a config and options
// (stage_texts_*.cpp). The table for a (config, options) lists the stages a forward
// pass records, in order and with their shapes, as the forward pass's own parts
// give them run dry (forward_stages), each described for exactly those options; it is built once, shared and
// immutable (StageTable::get), and looks stages up by id in O(1). The forward pass
// records through it (it cannot record a stage the table does not list), the
// backward pass writes gradients by id, and the views, exports, `vitscope-cli info`,
// the map and the tour read it.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/model/model.h"
#include "core/model/stage_id.h"

namespace vit {

// What "the math of one cell" (core/teach) writes out for a stage, if anything.
enum class CellRule : uint8_t {
    None,
    ScaledDot,    // attn.scores: sum_t q k / sqrt(d)
    Softmax,      // attn.pattern: exp(s - max) / Z
    WeightedSum,  // attn.z: sum_j pattern v
    LayerNorm,    // a LayerNorm's .normalized / .out
    Gelu,         // mlp.post
    HeadLinear,   // logits: pooled . head row + bias
};

// A box of the model map: consecutive stages of one architectural step share it.
struct MapBoxInfo {
    std::string id;     // "attn", "ln1", "resid_mid", ... (one per box in a row)
    std::string label;  // "MHA", "LN", "+", ...
    std::string sub;    // from the config and options: "12 heads of 64", "no affine", "BUG: plain reshape"
    int row = 0;        // 0: embedding, 1: the encoder block, 2: the head
    bool bug = false;   // a BUG switch changes what this box computes
};

struct StageInfo {
    StageId id;
    std::string name;               // "blocks.3.attn.pattern"
    int layer = -1;                 // id.layer
    Shape shape;                    // per image (no batch axis)
    std::string title;              // "Attention pattern"
    std::string what;               // one or two sentences, true for these options
    std::string torch;              // the PyTorch line that computes it, with the options' values
    std::string hook;               // where PyTorch's timm ViT computes it (module and what of it)
    std::vector<std::string> axes;  // one label per axis: "heads", "tokens (queries)", ...
    std::vector<StageId> from;      // the stages it is computed from
    bool per_head = false;          // first axis is heads
    bool signed_values = true;      // diverging colormap by default
    bool has_grad = false;          // the backward pass writes its gradient
    bool kept = false;              // training keeps it for the backward pass
    CellRule cell = CellRule::None;
    bool patchable = false;         // activation patching can replace its rows
    bool intervened = false;        // an intervention changed what this stage holds (said in `what`)
    MapBoxInfo box;
    LnSite ln = LnSite::None;
    // The gradient's description: d logit[class] / d this stage (same shape and axes).
    std::string grad_title, grad_what, grad_torch;
};

// One definition per kind of stage (stages.cpp). `describe` fills axes, texts,
// `from` and the box's sub-label for the config and options of a table (the shape
// is the forward pass's, set before it is called).
struct StageContext;  // the sizes and options a description reads (stage_texts.h)
struct StageDef {
    StageKind kind;
    const char* pattern;    // the name, "{l}" standing for the block
    bool block;             // one per encoder block
    bool has_grad;          // the backward pass writes its gradient
    bool kept;              // training keeps it (the backward pass reads it)
    bool per_head;          // first axis is heads
    bool signed_values;     // diverging colormap by default
    CellRule cell;
    const char* box;        // map box id
    const char* box_label;
    int box_row;            // 0 embedding, 1 block, 2 head
    const char* hook;       // timm's VisionTransformer: where PyTorch computes it
    void (*describe)(const StageContext&, StageInfo&);
    bool patchable = false; // activation patching can replace its rows (the forward pass has a patch point)
};
const StageDef& stage_def(StageKind k);
const std::vector<StageDef>& stage_defs();  // all of them, in StageKind order
const char* stage_kind_name(StageKind k);  // "AttnPattern"

// The immutable table for one (config, options): the stages a forward pass records, in order.
class StageTable {
public:
    // The shared table for this config and options (built on first use, then cached).
    static std::shared_ptr<const StageTable> get(const Config& c, const Options& o = {});
    // Built afresh (the cache's constructor; tests use it to build a table without the cache).
    StageTable(const Config& c, const Options& o);

    size_t size() const { return rows_.size(); }
    const StageInfo& operator[](size_t i) const { return rows_[i]; }
    const std::vector<StageInfo>& rows() const { return rows_; }
    auto begin() const { return rows_.begin(); }
    auto end() const { return rows_.end(); }
    // O(1): the row of a stage, -1 when this table has none (another pooling, a layer past the depth).
    int index(StageId id) const;
    bool has(StageId id) const { return index(id) >= 0; }
    const StageInfo& info(StageId id) const;  // throws std::out_of_range naming the stage
    const StageInfo* find(StageId id) const;
    // By name, for the command line, exports and tests (a hash look-up).
    const StageInfo* find(const std::string& name) const;
    std::string name(StageId id) const;  // the table's name for an id (also for ids it lacks)
    // The config's shape fields and the options the table was built for (class names are not kept).
    const Config& config() const { return cfg_; }
    const Options& options() const { return opt_; }
    int depth() const { return cfg_.depth; }
    // The sizes of the run the table is for (input size, patch grid, tokens before the patches).
    const RunDims& dims() const { return dims_; }

private:
    Config cfg_;
    Options opt_;
    RunDims dims_{};
    std::vector<StageInfo> rows_;
    std::vector<int> slot_;  // (layer + 1) * kStageKinds + kind -> row, -1
    std::unordered_map<std::string, int> by_name_;
};

// The name of token i of a run's sequence: "cls", "reg0", "dist", "p12" (long form: "patch 12
// (row 1, col 5)"). before_registers: the order of the stages before the registers are inserted
// (tokens, pos_embed, embed): cls, dist, patches. With patches dropped, a token of the blocks'
// sequence names the patch it holds (the run's kept patches, in order).
std::string token_label(const StageTable& t, int i, bool long_form = false, bool before_registers = false);
// What the token indices mean, for messages: "0 = cls, 1..4 = reg0..reg3, 5..260 = patches p0..p255".
std::string token_range_text(const StageTable& t);
// Whether a stage's token axis is in the order before the registers (tokens, pos_embed, embed).
bool before_registers(StageKind k);

// The stages a forward pass records for (config, options), in order, with their shapes per image: the
// forward pass's own parts run dry (core/model/pass.h, forward.cpp). A table's rows are these, each
// described by its kind's definition; nothing else lists the architecture.
std::vector<std::pair<StageId, Shape>> forward_stages(const Config& c, const Options& o);

// The name of a stage of any table ("blocks.3.attn.pattern"), from its definition's pattern.
std::string stage_name(StageId id);
// The name within its block ("attn.pattern" for blocks.3.attn.pattern; the whole name outside).
std::string stage_local_name(StageId id);
// Parses a name ("blocks.3.attn.pattern", "logits") into an id; nullopt for a name no kind has.
std::optional<StageId> parse_stage_name(const std::string& name);

// The table as JSON, for scripts and the parity tests: a list of rows with name, kind,
// layer, shape, axes, has_grad, kept, cell (rule name or null), box {id, label, row, sub},
// hook, title, what, torch.
std::string stage_table_json(const StageTable& t);

// The checks that make a forgotten part of a new stage kind fail the suite: every kind
// has a definition with a pattern that round-trips through parse_stage_name, a title,
// a map box, a PyTorch line and a hook; a kept stage has a gradient or is read by the
// backward pass; a cell rule only on a stage its inputs support. Returns the problems
// found (empty when all is well); tests/test_stage_table.cpp checks it stays empty.
std::vector<std::string> check_stage_definitions();
// The same checks on any list of definitions and gradient kinds (tests doctor copies).
std::vector<std::string> check_stage_definitions(const std::vector<StageDef>& defs,
                                                 const std::vector<StageKind>& grad_kinds);
// The same checks on one table (every row described for its options).
std::vector<std::string> check_table(const StageTable& t);

// The stage kinds whose gradient the backward pass writes (backward.cpp): the table's
// has_grad must be exactly this set (check_stage_definitions compares them).
const std::vector<StageKind>& backward_grad_kinds();

}  // namespace vit
