// The training loop, shared by `vitscope-cli train` and the app's Train panel.
#pragma once
#include <atomic>
#include <memory>
#include <vector>
#include <functional>
#include <map>
#include <random>
#include <string>

#include "core/train/train.h"

namespace vit {

struct TrainSettings {
    int epochs = 30;
    int batch = 128;
    float lr = 1e-3f, min_lr = 1e-5f, weight_decay = 0.05f;
    float warmup_epochs = 2.f;
    bool augment = true;  // random horizontal flip and shifts of up to `shift` pixels
    int shift = 2;
    int limit = 0;        // use only the first `limit` training images (0: all)
    uint64_t seed = 0;
    // Renders training image `item` into the model's input (C, S, S) from one draw of the trainer's random
    // stream, in place of the dataset's image with flips and shifts (the scenes model: a fresh scene of the
    // item every epoch). Called on the training thread, one image at a time.
    std::function<void(int item, uint64_t draw, float* dst)> render;
};

struct StepInfo {
    int epoch = 0, epochs = 0;           // epoch is 0-based
    int step_in_epoch = 0, steps_per_epoch = 0;
    int64_t step = 0, total_steps = 0;
    float loss = 0, lr = 0;
    double epoch_loss = 0, epoch_acc = 0;  // running means over this epoch
    double images_per_s = 0, eta_s = 0;
};

class Trainer {
public:
    Trainer(Weights w, TrainSettings s, const Dataset& train);
    // Continue from a saved optimizer state at the start of `epoch`.
    void resume(AdamW adam, int epoch);
    // Runs one epoch; on_step returning false stops early (returns false).
    void set_epoch(int e) { epoch_ = e; }
    bool run_epoch(const std::function<bool(const StepInfo&)>& on_step);
    int epoch() const { return epoch_; }
    bool done() const { return epoch_ >= s_.epochs; }
    const Weights& weights() const { return w_; }
    const AdamW& adam() const { return adam_; }
    const TrainSettings& settings() const { return s_; }

private:
    void fill_batch(const std::vector<int>& idx, size_t from, int B, Tensor4& x, std::vector<int>& y);
    Weights w_;
    TrainSettings s_;
    const Dataset& d_;
    AdamW adam_;
    std::vector<std::unique_ptr<Batch>> batches_;  // one per thread
    std::vector<Weights> grads_;                    // one per thread
    int epoch_ = 0;
    int n_ = 0;
    std::mt19937_64 rng_;
};

// `train --init-from`: the fresh model `w` takes every tensor of `src` (a model written by train) by name. A
// position table whose grid differs (the 32-pixel crops' 4 x 4 against the scenes' 8 x 8) gives its prefix rows
// (cls); its grid rows, with InitPos::Keep (`--init-pos keep`), are `w`'s own initialisation, with InitPos::Resize
// (`--init-pos resize`) the file's grid resized to `w`'s by resize_pos_embed with timm's rule (pos_rule_timm():
// bicubic, antialias). Throws std::invalid_argument naming the tensor when any other shape differs, or a tensor is
// in only one of the two. No optimizer state: not --resume.
enum class InitPos { Keep, Resize };
struct InitFrom {
    std::vector<std::string> copied;  // timm names; "pos_embed (cls row)" when only the prefix rows came as they are
    std::string kept;                 // what kept its own initialisation ("" when nothing did)
    std::string resized;              // what came from the file resized, and how ("" when nothing did)
};
InitFrom init_from(Weights& w, const Weights& src, InitPos pos = InitPos::Keep);

// Files: the model (timm names, loadable by anyone) and, beside it,
// "<path>.optim" with AdamW's moments and step, for --resume.
void save_training_checkpoint(const std::string& path, const Weights& w, const AdamW& adam, int epochs_done,
                              const std::map<std::string, std::string>& meta);
// Returns the epoch to continue from; fills adam when the .optim file exists.
int load_optimizer_state(const std::string& model_path, const Weights& w, AdamW& adam);
// The same from an already-parsed .optim file; `what` names it in errors.
struct SafeTensors;
int optimizer_state_from(const SafeTensors& st, const std::string& what, const Weights& w, AdamW& adam);

}  // namespace vit
