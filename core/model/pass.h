// One forward pass, as the parts of a model see it (internal to core/model).
//
// A model is built from parts: the embedding (core/model/parts/embed.cpp), the norms (norm.cpp),
// attention (attention.cpp), the MLP and the block around them (block.cpp), pooling and the head
// (head.cpp). Each part records its stages where it computes them, through the Pass's Recorder:
//
//     Array& out = p.rec(StageKind::AttnOut, {T, D});   // the stage, with its shape per image
//     if (p.dry) return;                                 // a shape-only pass computes nothing
//     linear(..., out.data(), ...);
//
// The stage table (stages.h) is that same code run dry (forward_stages): the parts' calls give the
// stages' order and shapes, so the architecture is written once. A real pass records through the
// table built from the dry run, and the Recorder checks that every stage it is handed matches the
// table's row (kind and shape).
#pragma once
#include <array>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <vector>
#include <xtensor/xadapt.hpp>

#include "core/kernels/gemm.h"
#include "core/kernels/profile.h"
#include "core/model/forward.h"
#include "core/model/model.h"
#include "core/model/rope.h"
#include "core/model/stages.h"
#include "core/model/trace.h"

namespace vit {

struct Workspace {
    Array qkv;                           // (B*T, 3D): the fused q/k/v projection
    std::vector<Tensor2> zcat;           // per block (B*T, D): heads concatenated
    std::map<int, Array> scratch;        // stages not kept, one array per kind
};

// Hands out each stage's array in the table's order: the trace's row (Keep::All) or, for
// training, a kept row (B, ...) or a reused scratch array. It checks that the computation records
// exactly the table's stages, in the table's order, with the table's shapes. Dry (no table): it
// lists the stages it is handed, with their shapes, and hands out one empty array.
class Recorder {
public:
    Recorder(const StageTable& table, size_t B, Keep keep, Trace& t, Workspace& ws, const std::vector<char>* rows)
        : table_(&table), B_(B), keep_(keep), t_(&t), ws_(&ws), rows_(rows) {}
    explicit Recorder(std::vector<std::pair<StageId, Shape>>* listed) : listed_(listed) {}

    // The stage of this kind (of the current block, for a block's kinds), shape per image.
    // (An initializer list: a real pass compares it with the table's row without allocating.)
    Array& operator()(StageKind kind, std::initializer_list<size_t> shape);
    // The array of the stage handed out last, and of the last stage of a kind (patch points).
    Array& last() const { return *last_; }
    Array& last_of(StageKind k) const { return *last_by_kind_[size_t(k)]; }
    bool all() const { return keep_ == Keep::All; }  // every stage computed in full (recorded or not)
    // Recorded stages that the pass does not read again are written with streaming stores (past the
    // caches) when the trace is larger than caches hold anyway; a small model's trace stays in
    // cache from one pass to the next, where plain stores cost less.
    bool stream() const { return stream_; }
    void set_stream(bool s) { stream_ = s; }
    void set_layer(int l) { layer_ = l; }
    // Skips the rows before block `layer` (a pass that starts at a later block; layer == depth:
    // at the first stage after the blocks).
    void skip_to_block(int layer);
    const StageInfo& info(StageId id) const { return table_->info(id); }
    void done() const;

private:
    Array& hand_out(StageKind kind, std::initializer_list<size_t> shape);
    const StageTable* table_ = nullptr;
    std::vector<std::pair<StageId, Shape>>* listed_ = nullptr;
    Array* last_ = nullptr;
    std::array<Array*, kStageKinds> last_by_kind_{};
    size_t i_ = 0, B_ = 1;
    int layer_ = -1;
    bool stream_ = false;
    Keep keep_ = Keep::All;
    Trace* t_ = nullptr;
    Workspace* ws_ = nullptr;
    const std::vector<char>* rows_ = nullptr;
};

// A view of an array's storage with the shape the computation wants (no copy).
template <size_t N>
auto as(Array& a, const std::array<size_t, N>& shape) {
    return xt::adapt(a.data(), a.size(), xt::no_ownership(), shape);
}
template <size_t N>
auto as(const float* p, size_t n, const std::array<size_t, N>& shape) {
    return xt::adapt(const_cast<float*>(p), n, xt::no_ownership(), shape);
}

// A residual add whose sum the next LayerNorm reads: out = a + b, computed by the LayerNorm's pass.
struct PendingAdd {
    float* out;
    const float* a;
    const float* b;
};

// What every part reads and the state the pass carries from one part to the next.
struct Pass {
    const Weights& w;
    const Config& c;
    const Options& opt;
    const RunDims& rd;
    Recorder& rec;
    Workspace& ws;
    bool dry;                    // shape-only: the parts record their stages and compute nothing
    size_t B;                    // images
    size_t T, R, D, H, d, M;     // tokens of the blocks, rows B*T, width, heads, head width, MLP width
    Pooling pool;
    const gemm::Packs* packs = nullptr;  // the traced passes' packed matrices (null when training)
    const std::atomic<bool>* cancel = nullptr;
    bool one_zcat = false;       // one concatenation array for every block (no backward follows)

    int layer = -1;              // the block being computed (-1: outside the blocks); enter() sets it
    const float* x = nullptr;    // the residual stream (B*T, D)
    std::optional<PendingAdd> pending;  // resid_post's add, run by the next block's ln1
    const float* lf = nullptr;   // the final norm's output
    const float* feat = nullptr; // (B, D): what the classifier or the projection reads

    Pass(const Weights& w, const Config& c, const Options& opt, const RunDims& rd, Recorder& rec, Workspace& ws,
         bool dry, size_t B);
    // Activation patching at a patch point (an intervention): the stage's rows replaced by another run's.
    void patch(StageKind k, int layer, Array& a) const;
    void check_cancel() const;
    void enter(int l) {
        layer = l;
        rec.set_layer(l);
    }
};

// The parts, in the order a ViT runs them.
void embed_part(Pass& p, const Tensor4& x);          // input .. with_registers, ln_pre
void block_part(Pass& p, int l, bool last);          // one encoder block (last: no block follows in this pass)
const Array& head_part(Pass& p);                     // the final norm, pooling and the head; the output
// LayerNorm with its four stages (mean, std, normalized, out) over R rows; with `add`, x is
// add->out and the residual add that makes it runs in the same pass. Returns out. Rows of the model's width, or of
// `width` (the MLP's norm: its hidden units).
const float* layernorm_part(Pass& p, LnSite site, const float* x, const LayerNormW& w, size_t rows,
                            const PendingAdd* add = nullptr, size_t width = 0);

// Kernels the parts share (core/model/parts/linear.cpp).
void linear(const char* what, float* out, const float* in, const Tensor2& W, const Tensor1& b, size_t R,
            const gemm::Packs* packs, const std::shared_ptr<const gemm::Matrix>& P = nullptr);
void linear_then(const char* what, const char* plus, float* out, const float* in, const gemm::Matrix& P,
                 const Tensor1& b, size_t R, const std::function<void(const float*, size_t, int, int)>& then,
                 gemm::Out out_mode);
profile::Scope gemm_then_scope(const char* what, const char* plus, const gemm::Matrix& P, size_t R);
void linear_act(const char* what, Act act, float* pre, float* post, const float* in, const Tensor2& W,
                const Tensor1& b, size_t R, size_t M, const gemm::Packs* packs,
                const std::shared_ptr<const gemm::Matrix>& P, bool stream);
void activation(Act act, float* out, const float* in, size_t R, size_t M);
void residual_add(float* out, const float* a, const float* b, size_t R, size_t D);
// Multi-head attention of B images' queries over keys and values (core/model/parts/attention.cpp).
void attention(float* scores, float* pattern, float* z, float* zcat, size_t ldz, const float* q, const float* k,
               const float* v, size_t B, size_t H, size_t Tq, size_t Tk, size_t d, float alpha, float post, bool stream);
bool sublayer_ablated(const Options& opt, int layer, bool mlp);

void attention_part(Pass& p, const BlockW& b, const float* h1);  // q, k, v .. attn.out, from ln1's output h1
// Activation patching: the stage's rows replaced by the other run's (opt.iv.patch), when it is this stage.
void patch_stage(const Options& opt, const StageInfo& s, Array& a, size_t B);

}  // namespace vit
