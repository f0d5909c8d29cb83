#include "core/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "core/io/checkpoint.h"
#include "core/io/io.h"
#include "core/kernels/ops.h"
#include "core/model/pos_embed.h"

namespace vit {

Trainer::Trainer(Weights w, TrainSettings s, const Dataset& d) : w_(std::move(w)), s_(s), d_(d), rng_(s.seed) {
    unpack_blocks(w_);  // training changes the matrices in place: row-major while it trains
    if (const std::string why = backward_unsupported(w_.cfg, {}); !why.empty())
        throw std::invalid_argument("cannot train this model: " + why);
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

void Trainer::fill_batch(const std::vector<int>& idx, size_t from, int B, Tensor4& x, std::vector<int>& y) {
    const Config& c = w_.cfg;
    const size_t S = c.image_size, C = c.channels, rows = d_.rows, cols = d_.cols, per = C * S * S;
    x.resize({size_t(B), C, S, S});
    y.resize(B);
    std::uniform_int_distribution<int> sh(-s_.shift, s_.shift), coin(0, 1);
    Dataset one;  // one augmented image at a time, through the same preprocessing as evaluation
    one.rows = int(rows); one.cols = int(cols); one.n = 1;
    one.images.resize(rows * cols);
    one.labels = {0};
    for (int b = 0; b < B; ++b) {
        int i = idx[from + b];
        y[b] = d_.labels[i];
        if (s_.render) {
            s_.render(i, rng_(), x.data() + per * b);
            continue;
        }
        const uint8_t* src = d_.images.data() + size_t(i) * rows * cols;
        int dx = 0, dy = 0;
        bool flip = false;
        if (s_.augment) { dx = sh(rng_); dy = sh(rng_); flip = coin(rng_); }
        for (int r = 0; r < int(rows); ++r)
            for (int q = 0; q < int(cols); ++q) {
                int sr = r - dy, sq = (flip ? int(cols) - 1 - q : q) - dx;
                one.images[size_t(r) * cols + q] =
                    (sr >= 0 && sr < int(rows) && sq >= 0 && sq < int(cols)) ? src[size_t(sr) * cols + sq] : 0;
            }
        Tensor3 t = dataset_input(one, 0, c);
        std::copy(t.begin(), t.end(), x.begin() + per * b);
    }
}

bool Trainer::run_epoch(const std::function<bool(const StepInfo&)>& on_step) {
    const Config& c = w_.cfg;
    const int steps = (n_ + s_.batch - 1) / s_.batch;
    const int64_t total = int64_t(steps) * s_.epochs, warm = int64_t(s_.warmup_epochs * steps);
    std::vector<int> idx(n_);
    std::iota(idx.begin(), idx.end(), 0);
    std::shuffle(idx.begin(), idx.end(), rng_);
    Tensor4 x;
    std::vector<int> y;
    StepInfo info;
    info.epoch = epoch_; info.epochs = s_.epochs; info.steps_per_epoch = steps; info.total_steps = total;
    double loss_sum = 0;
    int correct_sum = 0, seen = 0;
    auto t0 = std::chrono::steady_clock::now();
    const size_t per = size_t(c.channels) * c.image_size * c.image_size;
    for (int st = 0; st < steps; ++st) {
        int B = std::min(s_.batch, n_ - st * s_.batch);
        fill_batch(idx, size_t(st) * s_.batch, B, x, y);
        // Data parallel: each thread runs forward and backward on its slice of
        // the batch with single-threaded kernels (nested regions run serially),
        // then the per-thread gradients are summed. One join per step.
        const int nt = std::min<int>(int(batches_.size()), std::max(1, B / 8));
        std::vector<float> loss_part(nt, 0.f);
        std::vector<int> correct_part(nt, 0);
#pragma omp parallel for num_threads(nt) schedule(static, 1)
        for (int t = 0; t < nt; ++t) {
            const int b0 = B * t / nt, b1 = B * (t + 1) / nt, n = b1 - b0;
            Tensor4 xs = Tensor4::from_shape({size_t(n), size_t(c.channels), size_t(c.image_size), size_t(c.image_size)});
            std::copy_n(x.data() + per * b0, per * n, xs.data());
            const Array& logits = batches_[t]->forward(w_, xs, {});
            Tensor2 dl;
            loss_part[t] = Batch::cross_entropy(logits, y.data() + b0, dl, &correct_part[t]) * n / B;
            dl *= float(n) / float(B);  // the mean over all of B, not over this slice
            for_each_param([](const std::string&, auto& gt) { gt.fill(0.f); }, grads_[t]);
            batches_[t]->backward(w_, dl, grads_[t]);
        }
        float loss = 0;
        int correct = 0;
        for (int t = 0; t < nt; ++t) { loss += loss_part[t]; correct += correct_part[t]; }
        if (!std::isfinite(loss)) throw std::runtime_error("training diverged (loss is " + std::to_string(loss) + "): lower --lr");
        Weights& g = grads_[0];
        for (int t = 1; t < nt; ++t)
            for_each_param([](const std::string&, auto& dst, const auto& src) { dst += src; }, g, grads_[t]);
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

InitFrom init_from(Weights& w, const Weights& src, InitPos pos) {
    unpack_blocks(w);
    const Weights s = unpacked_copy(src);
    const std::vector<ArrayRef> refs = param_refs(s);
    std::map<std::string, ArrayRef> have;
    for (const ArrayRef& r : refs) have.emplace(r.name, r);
    InitFrom out;
    const size_t pre = size_t(w.cfg.pos_prefix());
    const auto grid_str = [](int g) { return std::to_string(g) + "x" + std::to_string(g); };
    for_each_param(
        [&](const std::string& name, auto& t) {
            const auto it = have.find(name);
            if (it == have.end())
                throw std::invalid_argument("--init-from: the file has no '" + name + "' (the model's is " + shape_str_of(t) + ")");
            const Shape want = shape_of(t), got = it->second.shape;
            if (got == want) {
                std::copy_n(it->second.data, t.size(), t.data());
                out.copied.push_back(name);
            } else if (name == "pos_embed" && got.size() == 2 && got[1] == want[1] && size_t(s.cfg.pos_prefix()) == pre &&
                       got[0] > pre && want[0] > pre) {
                const int g = w.cfg.stored_grid(), fg = s.cfg.stored_grid();
                const std::string rows = "pos_embed's " + std::to_string(want[0] - pre) + " grid rows (" + grid_str(g);
                out.copied.push_back(pre == 1 ? "pos_embed (cls row)" : "pos_embed (prefix rows)");
                if (pos == InitPos::Resize) {  // the prefix rows as they are, the file's grid resized to the model's
                    const PosEmbedRule rule = pos_rule_timm();
                    const std::vector<float> r =
                        resize_pos_embed(it->second.data, int(got[0]), int(want[1]), int(pre), fg, fg, g, g, rule);
                    if (r.size() != t.size())
                        throw std::invalid_argument("--init-from: pos_embed resized from " + shape_str(got) + " has " +
                                                    std::to_string(r.size()) + " values, the model's " + shape_str(want));
                    std::copy(r.begin(), r.end(), t.data());
                    out.resized = rows + ") resized from the file's " + grid_str(fg) + " by " + rule.name;
                } else {
                    std::copy_n(it->second.data, pre * want[1], t.data());  // the cls (and dist) rows; the grid stays
                    out.kept = rows + "; the file's grid is " + grid_str(fg) + ")";
                }
            } else {
                throw std::invalid_argument("--init-from: '" + name + "' is " + shape_str(got) + " in the file and " +
                                            shape_str(want) + " in the model");
            }
            have.erase(it);
        },
        w);
    for (const ArrayRef& r : refs)  // the first left over, in the file's order
        if (have.count(r.name))
            throw std::invalid_argument("--init-from: the file's '" + r.name + "' " + shape_str(r.shape) + " has no place in the model");
    w.packs.clear();
    return out;
}

void save_training_checkpoint(const std::string& path, const Weights& w, const AdamW& adam, int epochs_done,
                              const std::map<std::string, std::string>& meta) {
    auto m = meta;
    m["epoch"] = std::to_string(epochs_done);
    save_model(path, w, m);
    std::vector<ArrayRef> st;
    for_each_param(
        [&](const std::string& name, const auto& mm, const auto& vv) {
            st.push_back(array_ref("m." + name, mm));
            st.push_back(array_ref("v." + name, vv));
        },
        adam.m, adam.v);
    write_safetensors(path + ".optim", st, {{"step", std::to_string(adam.step)}, {"epoch", std::to_string(epochs_done)}});
}

int load_optimizer_state(const std::string& model_path, const Weights& w, AdamW& adam) {
    std::string p = model_path + ".optim";
    if (::access(p.c_str(), R_OK) != 0) return -1;
    return optimizer_state_from(read_safetensors(p), p, w, adam);
}

int optimizer_state_from(const SafeTensors& st, const std::string& p, const Weights& w, AdamW& adam) {
    // Checked before anything is allocated: every moment present, F32-convertible, of the parameter's shape.
    for_each_param(
        [&](const std::string& name, const auto& t) {
            for (const char* pre : {"m.", "v."}) {
                auto it = st.tensors.find(pre + name);
                if (it == st.tensors.end() || it->second.size() != t.size())
                    throw FileError(p + ": optimizer state for '" + name + "' is missing or does not fit the model");
                const float* x = it->second.data();
                for (size_t j = 0; j < it->second.size(); ++j)
                    if (!std::isfinite(x[j]) || (pre[0] == 'v' && x[j] < 0))
                        throw FileError(p + ": optimizer state '" + pre + name + "' holds " +
                                        (pre[0] == 'v' ? "negative or " : "") + "non-finite values");
            }
        },
        w);
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
    for_each_param(
        [&](const std::string& name, auto& mm, auto& vv) {
            for (auto [pre, dst] : {std::pair<std::string, float*>{"m.", mm.data()}, {"v.", vv.data()}})
                std::copy_n(st.tensors.find(pre + name)->second.data(), mm.size(), dst);  // checked above
        },
        adam.m, adam.v);
    adam.step = step;
    return epoch;
}

}  // namespace vit
