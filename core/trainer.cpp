#include "trainer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <numeric>

#include "checkpoint.h"
#include "io.h"
#include "ops.h"

namespace vit {

Trainer::Trainer(Weights w, TrainSettings s, const Dataset& d) : w_(std::move(w)), s_(s), d_(d), rng_(s.seed) {
    const Config& c = w_.cfg;
    if (c.classes < 10) throw std::invalid_argument("the model has " + std::to_string(c.classes) +
                                                    " classes; Fashion-MNIST needs 10");
    if (d_.n == 0) throw std::invalid_argument("the training set is empty");
    for (int i = 0; i < d_.n; ++i)  // a label past the head would index past the logits
        if (d_.labels[i] >= c.classes)
            throw std::invalid_argument("training label " + std::to_string(d_.labels[i]) + " (image " + std::to_string(i) +
                                        ") is not one of the model's " + std::to_string(c.classes) + " classes");
    n_ = s_.limit > 0 ? std::min(s_.limit, d_.n) : d_.n;
    if (s_.batch <= 0 || s_.epochs <= 0) throw std::invalid_argument("batch and epochs must be positive");
    adam_.lr = s_.lr;
    adam_.weight_decay = s_.weight_decay;
    adam_.init(w_);
    int nt = ops::threads();
    for (int t = 0; t < nt; ++t) {
        batches_.emplace_back(new Batch);
        grads_.push_back(zeros_like(w_));
    }
}

void Trainer::resume(AdamW adam, int epoch) {
    adam.lr = s_.lr;
    adam.weight_decay = s_.weight_decay;
    adam_ = std::move(adam);
    epoch_ = epoch;
}

void Trainer::fill_batch(const std::vector<int>& idx, size_t from, int B, std::vector<float>& x, std::vector<int>& y) {
    const Config& c = w_.cfg;
    const int S = c.image_size, C = c.channels, rows = d_.rows, cols = d_.cols;
    const size_t per = size_t(C) * S * S;
    x.resize(per * B);
    y.resize(B);
    std::uniform_int_distribution<int> sh(-s_.shift, s_.shift), coin(0, 1);
    std::vector<uint8_t> img(size_t(rows) * cols);
    for (int b = 0; b < B; ++b) {
        int i = idx[from + b];
        y[b] = d_.labels[i];
        const uint8_t* src = d_.images.data() + size_t(i) * rows * cols;
        int dx = 0, dy = 0;
        bool flip = false;
        if (s_.augment) { dx = sh(rng_); dy = sh(rng_); flip = coin(rng_); }
        for (int r = 0; r < rows; ++r)
            for (int q = 0; q < cols; ++q) {
                int sr = r - dy, sq = (flip ? cols - 1 - q : q) - dx;
                img[size_t(r) * cols + q] = (sr >= 0 && sr < rows && sq >= 0 && sq < cols) ? src[size_t(sr) * cols + sq] : 0;
            }
        if (rows == S && cols == S) {
            for (int ch = 0; ch < C; ++ch)
                for (size_t j = 0; j < size_t(S) * S; ++j)
                    x[per * b + ch * size_t(S) * S + j] = (img[j] / 255.f - c.pre.mean[ch]) / c.pre.std[ch];
        } else {
            Dataset one;
            one.rows = rows; one.cols = cols; one.n = 1;
            one.images = img;
            one.labels = {0};
            Tensor t = dataset_input(one, 0, c);
            std::copy_n(t.data(), per, x.data() + per * b);
        }
    }
}

bool Trainer::run_epoch(const std::function<bool(const StepInfo&)>& on_step) {
    const Config& c = w_.cfg;
    const int steps = (n_ + s_.batch - 1) / s_.batch;
    const int64_t total = int64_t(steps) * s_.epochs, warm = int64_t(s_.warmup_epochs * steps);
    std::vector<int> idx(n_);
    std::iota(idx.begin(), idx.end(), 0);
    std::shuffle(idx.begin(), idx.end(), rng_);
    std::vector<float> x, logits, dl;
    std::vector<int> y;
    StepInfo info;
    info.epoch = epoch_; info.epochs = s_.epochs; info.steps_per_epoch = steps; info.total_steps = total;
    double loss_sum = 0;
    int correct_sum = 0, seen = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (int st = 0; st < steps; ++st) {
        int B = std::min(s_.batch, n_ - st * s_.batch);
        fill_batch(idx, size_t(st) * s_.batch, B, x, y);
        logits.resize(size_t(B) * c.classes);
        dl.resize(size_t(B) * c.classes);
        // Data parallel: each thread runs forward and backward on its slice of
        // the batch with single-threaded kernels (nested regions run serially),
        // then the per-thread gradients are summed. One join per step.
        const int nt = std::min<int>(int(batches_.size()), std::max(1, B / 8));
        std::vector<float> loss_part(nt, 0.f);
        std::vector<int> correct_part(nt, 0);
        const size_t per = size_t(c.channels) * c.image_size * c.image_size;
#pragma omp parallel for num_threads(nt) schedule(static, 1)
        for (int t = 0; t < nt; ++t) {
            int b0 = B * t / nt, b1 = B * (t + 1) / nt, n = b1 - b0;
            float* lg = logits.data() + size_t(b0) * c.classes;
            float* d = dl.data() + size_t(b0) * c.classes;
            batches_[t]->forward(w_, x.data() + per * b0, n, {}, lg);
            loss_part[t] = Batch::cross_entropy(lg, y.data() + b0, n, c.classes, d, &correct_part[t]) * n / B;
            for (size_t i = 0; i < size_t(n) * c.classes; ++i) d[i] *= float(n) / float(B);  // mean over all of B
            for (auto& [name, gt] : grads_[t].named()) std::fill_n(gt->data(), gt->size(), 0.f);
            batches_[t]->backward(w_, d, grads_[t]);
        }
        float loss = 0;
        int correct = 0;
        for (int t = 0; t < nt; ++t) { loss += loss_part[t]; correct += correct_part[t]; }
        if (!std::isfinite(loss)) throw std::runtime_error("training diverged (loss is " + std::to_string(loss) + "): lower --lr");
        Weights& g = grads_[0];
        for (int t = 1; t < nt; ++t) {
            auto dst = g.named();
            auto src = grads_[t].named();
            for (size_t i = 0; i < dst.size(); ++i)
                for (size_t j = 0; j < dst[i].second->size(); ++j) (*dst[i].second)(j) += (*src[i].second)(j);
        }
        int64_t gstep = int64_t(epoch_) * steps + st;
        float lr = lr_schedule(gstep, warm, total, s_.lr, s_.min_lr);
        adam_.update(w_, g, lr);
        loss_sum += double(loss) * B;
        correct_sum += correct;
        seen += B;
        double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        info.step_in_epoch = st + 1;
        info.step = gstep + 1;
        info.loss = loss;
        info.lr = lr;
        info.epoch_loss = loss_sum / seen;
        info.epoch_acc = double(correct_sum) / seen;
        info.images_per_s = seen / std::max(el, 1e-9);
        info.eta_s = double(total - info.step) * s_.batch / std::max(info.images_per_s, 1e-9);
        if (on_step && !on_step(info)) return false;
    }
    ++epoch_;
    return true;
}

void save_training_checkpoint(const std::string& path, const Weights& w, const AdamW& adam, int epochs_done,
                              const std::map<std::string, std::string>& meta) {
    auto m = meta;
    m["epoch"] = std::to_string(epochs_done);
    save_model(path, w, m);
    std::vector<std::pair<std::string, const Tensor*>> st;
    auto mm = adam.m.named(), vv = adam.v.named();
    for (size_t i = 0; i < mm.size(); ++i) {
        st.emplace_back("m." + mm[i].first, mm[i].second);
        st.emplace_back("v." + vv[i].first, vv[i].second);
    }
    write_safetensors(path + ".optim", st, {{"step", std::to_string(adam.step)}, {"epoch", std::to_string(epochs_done)}});
}

int load_optimizer_state(const std::string& model_path, const Weights& w, AdamW& adam) {
    std::string p = model_path + ".optim";
    if (::access(p.c_str(), R_OK) != 0) return -1;
    return optimizer_state_from(read_safetensors(p), p, w, adam);
}

int optimizer_state_from(const SafeTensors& st, const std::string& p, const Weights& w, AdamW& adam) {
    // Checked before anything is allocated: every moment present, F32-convertible, of the parameter's shape.
    auto mm0 = w.named();
    for (auto& [name, t] : mm0)
        for (const char* pre : {"m.", "v."}) {
            auto it = st.tensors.find(pre + name);
            if (it == st.tensors.end() || it->second.size() != t->size())
                throw FileError(p + ": optimizer state for '" + name + "' is missing or does not fit the model");
            for (size_t j = 0; j < it->second.size(); ++j)
                if (!std::isfinite(it->second(j)) || (pre[0] == 'v' && it->second(j) < 0))
                    throw FileError(p + ": optimizer state '" + pre + name + "' holds " +
                                    (pre[0] == 'v' ? "negative or " : "") + "non-finite values");
        }
    // step and epoch: whole decimal numbers in range (std::stoi accepted "12abc" and threw "stoi" on 1e99).
    auto number = [&](const char* key, long long hi) -> long long {
        auto it = st.metadata.find(key);
        if (it == st.metadata.end()) throw FileError(p + ": missing " + key + " metadata");
        const std::string& v = it->second;
        char* end = nullptr;
        errno = 0;
        long long x = v.empty() ? -1 : std::strtoll(v.c_str(), &end, 10);
        if (v.empty() || *end || errno || x < 0 || x > hi)
            throw FileError(p + ": " + key + " metadata is '" + v.substr(0, 40) + "', not an integer in 0.." + std::to_string(hi));
        return x;
    };
    int64_t step = number("step", int64_t(1) << 40);
    int epoch = int(number("epoch", 1000000));
    adam.init(w);
    auto mm = adam.m.named(), vv = adam.v.named();
    for (size_t i = 0; i < mm.size(); ++i) {
        for (auto [pre, dst] : {std::pair<std::string, Tensor*>{"m.", mm[i].second}, {"v.", vv[i].second}}) {
            auto it = st.tensors.find(pre + mm[i].first);
            std::copy_n(it->second.data(), dst->size(), dst->data());
        }
    }
    adam.step = step;
    return epoch;
}

}  // namespace vit
