// Training: batched forward with cached activations, backward for every
// stage, AdamW, Fashion-MNIST IDX data, and gradient traces for the app.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model.h"
#include "tensor.h"

namespace vit {

// Zero-filled weights of the same shapes (for gradients and Adam moments).
Weights zeros_like(const Weights& w);
// A deep copy (Weights is move-only: tensors are large).
Weights clone(const Weights& w);
void scale_(Weights& w, float s);

struct TrainCache;  // per-batch activations, defined in train.cpp

class Batch {
public:
    Batch();
    ~Batch();
    // Forward on x (B, C, S, S); writes logits (B, K). Keeps activations for backward.
    void forward(const Weights& w, const float* x, int B, const Options& opt, float* logits);
    // Softmax cross-entropy, mean over the batch. Returns the loss and fills dlogits.
    static float cross_entropy(const float* logits, const int* labels, int B, int K, float* dlogits,
                               int* correct = nullptr);
    // Backward from dlogits (B, K), accumulating into grads. Must follow forward().
    // If `record` is set (B == 1 only), every stage's gradient is recorded as "<stage>.grad".
    void backward(const Weights& w, const float* dlogits, Weights& grads, Trace* record = nullptr);
private:
    std::unique_ptr<TrainCache> c_;
};

struct AdamW {
    float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.05f;
    bool decay_all = false;  // false: decay only matrices (not biases, LayerNorm, cls, pos)
    int64_t step = 0;
    Weights m, v;
    void init(const Weights& w);
    // torch.optim.AdamW: p *= 1 - lr*wd; m, v updated; p -= lr * mhat / (sqrt(vhat) + eps).
    void update(Weights& w, const Weights& g, float lr_now);
};

// Learning rate at `step`: linear warm-up then cosine to `min_lr`.
float lr_schedule(int64_t step, int64_t warmup, int64_t total, float lr, float min_lr);

// IDX files (gzipped or not), e.g. Debian's dataset-fashion-mnist.
struct Dataset {
    std::vector<uint8_t> images;  // (N, rows, cols)
    std::vector<uint8_t> labels;  // (N)
    int n = 0, rows = 0, cols = 0;
};
Dataset load_idx(const std::string& images_path, const std::string& labels_path);
// The same from the files' bytes (gzipped or not); the paths name them in errors.
Dataset parse_idx(const std::string& images, const std::string& labels, const std::string& images_path,
                  const std::string& labels_path);
// dir/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
Dataset load_fashion_mnist(const std::string& dir, bool train);
std::string default_fashion_mnist_dir();

// Normalized input (1, rows, cols) of one dataset image for a 1-channel model
// (resized if the model's image size differs).
Tensor dataset_input(const Dataset& d, int i, const Config& c);

// Gradient of logit[cls] with respect to every stage: runs forward + backward
// on one image and returns the trace with "<stage>.grad" entries.
Trace gradient_trace(const Weights& w, const Tensor& input, const Options& opt, int cls);

// Evaluation on a dataset: accuracy and confusion matrix (rows: true, cols: predicted).
struct EvalResult {
    double accuracy = 0;
    int n = 0;
    std::vector<int> confusion;  // K x K
};
EvalResult evaluate(const Weights& w, const Dataset& d, int limit = 0, int batch = 256,
                    const std::function<void(int, int)>& progress = {});

}  // namespace vit
