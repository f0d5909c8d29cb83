// The ViT forward pass: one batched implementation for tracing and training.
#pragma once
#include <memory>

#include "core/model/model.h"
#include "core/model/stages.h"
#include "core/model/tensor.h"

namespace vit {

// What a forward pass keeps. All: every stage of the table (a traced run, a batch
// of one, shapes exactly as the table's). ForBackward: the stages the backward
// pass reads, with a leading batch axis; the others go to reused scratch arrays.
enum class Keep { All, ForBackward };

struct Workspace;  // scratch arrays reused across runs (defined in forward.cpp)
struct WorkspaceDeleter { void operator()(Workspace*) const; };
using WorkspacePtr = std::unique_ptr<Workspace, WorkspaceDeleter>;
WorkspacePtr make_workspace();

// Runs the model on a batch x (B, C, S, S), already normalized, writing each stage
// into `acts` under the stage table's names, in its order (with Keep::All, B must be 1).
// Returns the logits (B, K), which are also the stage "logits".
// Throws std::invalid_argument if the input does not fit the config.
const Array& forward_batch(const Weights& w, const Tensor4& x, const Options& opt, Trace& acts, Keep keep,
                           Workspace& ws);
// The concatenated heads (B*T, D) of block l from the last forward_batch (the
// output projection's input, which the backward pass needs).
const Tensor2& workspace_zcat(const Workspace& ws, int l);

// A traced run on one image (C, S, S): a batch of one that records every stage.
void forward(const Weights& w, const Tensor3& input, const Options& opt, Trace& trace);
Trace run(const Weights& w, const Tensor3& input, const Options& opt = {});

}  // namespace vit
