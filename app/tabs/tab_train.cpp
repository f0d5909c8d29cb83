// The Train tab: trains a ViT on Fashion-MNIST in the background with live loss and accuracy
// curves; the other views can follow the live model, so the fixed image's prediction and attention
// overlay change as it learns.
#include "app/probe.h"
#include <imgui.h>

#include <atomic>
#include <cfloat>
#include <cstdio>
#include <memory>
#include <mutex>
#include <chrono>
#include <thread>
#include <vector>

#include "app/app_args.h"
#include "app/jobs.h"
#include "app/tabs/tab.h"
#include "core/kernels/ops.h"
#include "core/io/checkpoint.h"
#include "core/train/trainer.h"

namespace vit::app {

namespace {

class TrainTab : public TabView {
public:
    explicit TrainTab(JobQueue& jobs) : jobs_(jobs) {}
    ~TrainTab() override;
    void draw(ViewCtx& v) override;
    void tick(ViewCtx& v) override;  // hands a new weights snapshot to the session when following
    bool working() const override { return job_ && !job_->finished(); }
    // --train-epochs/--train-limit: starts training at launch with the form's config.
    void apply_args(const AppArgs& a) override;

private:
    void start(const Config& c, const TrainSettings& ts);
    void stop();
    JobQueue& jobs_;
    std::shared_ptr<Job> job_;      // the training run (a job: app/jobs.h), null before the first
    std::atomic<bool> paused_{false};
    std::mutex mu_;                 // guards what the job reports: curves, last step, snapshot, message
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

TrainTab::~TrainTab() { stop(); }

void TrainTab::stop() {
    paused_ = false;
    if (!job_) return;
    job_->cancel();
    job_->wait();
}

void TrainTab::start(const Config& c, const TrainSettings& ts) {
    stop();
    {
        std::lock_guard<std::mutex> g(mu_);
        loss_.clear(); acc_.clear(); test_acc_.clear();
        message_.clear();
    }
    try {
        if (!train_) train_ = std::make_unique<Dataset>(load_fashion_mnist(default_fashion_mnist_dir(), true));
        if (!test_) test_ = std::make_unique<Dataset>(load_fashion_mnist(default_fashion_mnist_dir(), false));
        c.validate();
    } catch (const std::exception& e) {
        message_ = e.what();
        return;
    }
    // every core: the trainer splits each batch across its threads (the job's budget, ops::threads())
    job_ = jobs_.submit("training", all_threads(), [this, c, ts](Job& job) {
        try {
            Trainer tr(init_weights(c, ts.seed), ts, *train_);
            auto snap = [&] {
                auto m = std::make_shared<LoadedModel>();
                m->weights = tr.weights();
                m->source = "training (live)";
                std::lock_guard<std::mutex> g(mu_);
                snapshot_ = m;
                ++snapshot_version_;
            };
            snap();
            while (!tr.done() && !job.cancelled()) {
                job.set_step("epoch " + std::to_string(tr.epoch() + 1) + " of " + std::to_string(ts.epochs));
                bool ok = tr.run_epoch([&](const StepInfo& i) {
                    job.set_progress(float(double(i.step) / double(std::max<int64_t>(1, i.total_steps))));
                    while (paused_ && !job.cancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
                    {
                        std::lock_guard<std::mutex> g(mu_);
                        loss_.push_back(i.loss);
                        acc_.push_back(float(i.epoch_acc));
                        last_ = i;
                    }
                    if (i.step_in_epoch % 40 == 0) snap();
                    return !job.cancelled();
                });
                if (!ok) break;
                EvalResult r = evaluate(tr.weights(), *test_, 2000);
                std::lock_guard<std::mutex> g(mu_);
                test_acc_.push_back(float(r.accuracy));
            }
            snap();
        } catch (const ops::Cancelled&) {
            // stopped inside the evaluation: the last snapshot stays
        } catch (const std::exception& e) {
            std::lock_guard<std::mutex> g(mu_);
            message_ = e.what();
        }
    });
}

void TrainTab::apply_args(const AppArgs& a) {
    if (a.train_epochs <= 0) return;
    const int epochs = a.train_epochs, limit = a.train_limit;
    epochs_ = epochs;
    limit_ = limit;
    Config c = preset("fmnist");
    c.width = width_; c.depth = depth_; c.heads = heads_; c.mlp = mlp_; c.patch = patch_;
    TrainSettings ts;
    ts.epochs = epochs; ts.batch = batch_; ts.lr = lr_; ts.limit = limit;
    ts.warmup_epochs = 0.2f;
    start(c, ts);
}

void TrainTab::tick(ViewCtx& v) {
    Session& s = v.s;
    if (!follow_) return;
    std::shared_ptr<LoadedModel> m;
    {
        std::lock_guard<std::mutex> g(mu_);
        if (snapshot_version_ == taken_version_ || !snapshot_) return;
        m = snapshot_;
        taken_version_ = snapshot_version_;
    }
    if (!s.busy()) s.set_weights(m, "training (live)");
    else taken_version_ = 0;  // try again next frame
}

void TrainTab::draw(ViewCtx& v) {
    Probe& pr = v.probe;
    ImGui::TextWrapped("Train a ViT on Fashion-MNIST (60,000 images from Debian's dataset-fashion-mnist) right here. "
                       "With 'follow' on, the other views show the model as it learns: watch the prediction and "
                       "the cls attention over the image change from noise to structure.");
    const bool busy = working();
    ImGui::BeginDisabled(busy);
    ImGui::SetNextItemWidth(90); ImGui::InputInt("width", &width_, 16); ImGui::SameLine();
    ImGui::SetNextItemWidth(90); ImGui::InputInt("depth", &depth_, 1); ImGui::SameLine();
    ImGui::SetNextItemWidth(90); ImGui::InputInt("heads", &heads_, 1); ImGui::SameLine();
    ImGui::SetNextItemWidth(90); ImGui::InputInt("mlp", &mlp_, 32); ImGui::SameLine();
    ImGui::SetNextItemWidth(90); ImGui::InputInt("patch", &patch_, 1);
    ImGui::SetNextItemWidth(90); ImGui::InputInt("epochs", &epochs_, 1); ImGui::SameLine();
    ImGui::SetNextItemWidth(90); ImGui::InputInt("batch", &batch_, 32); ImGui::SameLine();
    ImGui::SetNextItemWidth(90); ImGui::InputFloat("lr", &lr_, 0, 0, "%.0e"); ImGui::SameLine();
    ImGui::SetNextItemWidth(90); ImGui::InputInt("images (0: all)", &limit_, 1000);
    ImGui::EndDisabled();
    if (!busy) {
        if (ImGui::Button("Start training")) {
            Config c = preset("fmnist");
            c.width = std::max(4, width_); c.depth = std::max(1, depth_); c.heads = std::max(1, heads_);
            c.mlp = std::max(4, mlp_); c.patch = std::max(1, patch_);
            TrainSettings ts;
            ts.epochs = std::max(1, epochs_); ts.batch = std::max(1, batch_); ts.lr = lr_; ts.limit = std::max(0, limit_);
            ts.warmup_epochs = std::min(1.f, float(ts.epochs) / 5);
            start(c, ts);
        }
    } else {
        if (ImGui::Button(paused_ ? "Resume" : "Pause")) paused_ = !paused_;
        ImGui::SameLine();
        if (ImGui::Button("Stop")) stop();
    }
    ImGui::SameLine();
    ImGui::Checkbox("follow: show the live model in all views", &follow_);
    ImGui::SetNextItemWidth(300);
    ImGui::InputText("##save", save_path_, sizeof save_path_);
    ImGui::SameLine();
    if (ImGui::Button("Save model")) {
        std::shared_ptr<LoadedModel> m;
        { std::lock_guard<std::mutex> g(mu_); m = snapshot_; }
        if (!m) message_ = "nothing trained yet";
        else {
            try { save_model(save_path_, m->weights, {{"command", "vitscope Train panel"}}); message_ = std::string("saved ") + save_path_; }
            catch (const std::exception& e) { message_ = e.what(); }
        }
    }
    std::vector<float> loss, acc, test;
    StepInfo li;
    std::string msg;
    {
        std::lock_guard<std::mutex> g(mu_);
        loss = loss_; acc = acc_; test = test_acc_; li = last_; msg = message_;
    }
    if (!msg.empty()) ImGui::TextColored(ImVec4(1, 0.8f, 0.4f, 1), "%s", msg.c_str());
    pr.numbers["train.steps"] = double(loss.size());
    pr.numbers["train.epochs_done"] = double(test.size());
    if (!loss.empty()) { pr.numbers["train.first_loss"] = loss.front(); pr.numbers["train.last_loss"] = loss.back(); }
    if (!test.empty()) pr.numbers["train.test_acc"] = test.back();
    if (!loss.empty()) {
        double frac = double(li.step) / std::max<int64_t>(1, li.total_steps);
        char buf[160];
        std::snprintf(buf, sizeof buf, "epoch %d/%d  step %d/%d  %.0f img/s  ETA %.0fs%s", li.epoch + 1, li.epochs,
                      li.step_in_epoch, li.steps_per_epoch, li.images_per_s, li.eta_s, paused_ ? "  (paused)" : "");
        ImGui::ProgressBar(float(frac), ImVec2(-1, 0), buf);
        // the curves with their axes: what, in which unit, over which steps
        const float w = ImGui::GetContentRegionAvail().x;
        const float steps = float(loss.size());
        PlotWithAxes(v, "train.loss", loss, 0.f, NAN, "training step (batches of " + std::to_string(batch_) + ")",
                     "training loss (cross-entropy), now " + fmt(loss.back()), 0, steps, ImVec2(w, 150));
        std::vector<float> acc_pct(acc.size());
        for (size_t i = 0; i < acc.size(); ++i) acc_pct[i] = 100 * acc[i];
        PlotWithAxes(v, "train.acc", acc_pct, 0.f, 100.f, "training step",
                     "training accuracy, % (running mean over the epoch), now " + std::to_string(int(acc_pct.back())) + "%", 0, steps,
                     ImVec2(w, 130));
        if (!test.empty()) {
            std::vector<float> test_pct(test.size());
            for (size_t i = 0; i < test.size(); ++i) test_pct[i] = 100 * test[i];
            char b[96];
            std::snprintf(b, sizeof b, "test accuracy, %% (2,000 test images, after each epoch), now %.1f%%", double(test_pct.back()));
            PlotWithAxes(v, "train.test", test_pct, 0.f, 100.f, "epoch", b, 1, float(test.size()), ImVec2(w, 120));
        }
    }
    ImGui::Separator();
    ImGui::TextWrapped("How the gradients are computed: every stage has a hand-written backward pass (checked against "
                       "PyTorch autograd in the tests). The chain rule at work, on a small example: for "
                       "e = (a + b)(b + 1) with a = 2, b = 1, de/da = (b + 1) = 2 and de/db = (b + 1) + (a + b) = 5, "
                       "because b reaches e along two paths whose contributions add, exactly as a residual "
                       "connection's gradient adds the skip path and the block's path.");
}

}  // namespace

std::unique_ptr<TabView> make_train_tab(JobQueue& jobs) { return std::make_unique<TrainTab>(jobs); }

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_train() {
    using K = ProbeKind;
    return {
        {K::Rect, "train.{loss|acc|test}", "the curves' plot areas"},
        {K::Group, "train.{loss|acc|test}.axes", "the curves' titles, axis figures and axis names"},
        {K::Number, "train.{steps|epochs_done|first_loss|last_loss|test_acc}", "the training run"},
    };
}

}  // namespace vit::app
