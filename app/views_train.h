// The Train panel: trains a ViT on Fashion-MNIST in the background with live
// loss and accuracy curves; the other views can follow the live model, so the
// fixed image's prediction and attention overlay change as it learns.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/train/trainer.h"
#include "views.h"

namespace vit::app {

class TrainPanel {
public:
    ~TrainPanel();
    void Draw(Session& s, UiState& ui, Textures& tx);
    void Poll(Session& s);  // hands a new weights snapshot to the session when following
    // Starts training from the command line (--train-epochs/--train-limit) with the form's config.
    void StartHeadless(int epochs, int limit);
    bool running() const { return running_; }
private:
    void start(const Config& c, const TrainSettings& ts);
    void stop();
    std::thread worker_;
    std::atomic<bool> running_{false}, paused_{false}, stop_{false};
    std::mutex mu_;
    std::vector<float> loss_, acc_, test_acc_;
    StepInfo last_;
    std::shared_ptr<LoadedModel> snapshot_;
    uint64_t snapshot_version_ = 0, taken_version_ = 0;
    std::string message_;
    bool follow_ = true;
    std::unique_ptr<Dataset> train_, test_;
    // form
    int width_ = 64, depth_ = 6, heads_ = 4, mlp_ = 128, patch_ = 4, epochs_ = 5, batch_ = 128, limit_ = 0;
    float lr_ = 1e-3f;
    char save_path_[512] = "vitscope-trained.safetensors";
};

}  // namespace vit::app
