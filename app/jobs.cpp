#include "jobs.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/kernels/ops.h"

namespace vit::app {

Job::State Job::state() const {
    std::lock_guard<std::mutex> g(mu_);
    return state_;
}

bool Job::finished() const {
    const State s = state();
    return s == State::Done || s == State::Failed || s == State::Cancelled;
}

bool Job::wait_for(double ms) const {
    std::unique_lock<std::mutex> lk(mu_);
    auto done = [this] { return state_ == State::Done || state_ == State::Failed || state_ == State::Cancelled; };
    return cv_.wait_for(lk, std::chrono::microseconds(int64_t(ms * 1000)), done);
}

void Job::wait() const {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [this] { return state_ == State::Done || state_ == State::Failed || state_ == State::Cancelled; });
}

std::string Job::error() const {
    std::lock_guard<std::mutex> g(mu_);
    return error_;
}

float Job::progress() const {
    const int total = total_.load();
    if (total > 0) return std::min(1.f, float(units_.load()) / float(total));
    return fraction_.load();
}

std::string Job::step() const {
    std::function<std::string(int)> f;
    std::string st;
    {
        std::lock_guard<std::mutex> g(mu_);
        f = step_from_units_;
        st = step_;
    }
    if (f) {
        const std::string named = f(units_.load());
        if (!named.empty()) return named;
    }
    return st;
}

void Job::set_step_from_units(std::function<std::string(int)> f) {
    std::lock_guard<std::mutex> g(mu_);
    step_from_units_ = std::move(f);
}

void Job::set_step(const std::string& s) {
    std::lock_guard<std::mutex> g(mu_);
    step_ = s;
}

void Job::finish(State s, std::string error) {
    {
        std::lock_guard<std::mutex> g(mu_);
        state_ = s;
        error_ = std::move(error);
    }
    cv_.notify_all();
}

int all_threads() { return std::max(1, int(std::thread::hardware_concurrency())); }

int job_threads(long long params) { return params < 2'000'000 ? 1 : all_threads(); }

JobQueue::JobQueue(int max_workers) : max_workers_(std::max(1, max_workers)) {}

JobQueue::~JobQueue() { shutdown(); }

std::shared_ptr<Job> JobQueue::submit(std::string name, int threads, std::function<void(Job&)> fn) {
    auto job = std::make_shared<Job>(std::move(name), std::max(1, threads));
    std::lock_guard<std::mutex> g(mu_);
    if (quit_) {
        job->finish(Job::State::Cancelled);
        return job;
    }
    queue_.push_back({job, std::move(fn)});
    if (int(queue_.size()) > idle_ && int(workers_.size()) < max_workers_) workers_.emplace_back([this] { work(); });
    cv_.notify_one();
    return job;
}

std::vector<std::shared_ptr<const Job>> JobQueue::active() const {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<std::shared_ptr<const Job>> v(running_.begin(), running_.end());
    for (const Item& it : queue_) v.push_back(it.job);
    return v;
}

void JobQueue::shutdown() {
    std::vector<std::thread> workers;
    {
        std::lock_guard<std::mutex> g(mu_);
        quit_ = true;
        for (auto& j : running_) j->cancel();
        for (Item& it : queue_) {
            it.job->cancel();
            it.job->finish(Job::State::Cancelled);
        }
        queue_.clear();
        workers.swap(workers_);
    }
    cv_.notify_all();
    for (auto& w : workers) w.join();
}

void JobQueue::work() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
        ++idle_;
        cv_.wait(lk, [this] { return quit_ || !queue_.empty(); });
        --idle_;
        if (quit_ && queue_.empty()) return;
        Item it = std::move(queue_.front());
        queue_.pop_front();
        running_.push_back(it.job);
        lk.unlock();
        Job& job = *it.job;
        {
            std::lock_guard<std::mutex> g(job.mu_);
            job.state_ = Job::State::Running;
        }
        Job::State end = Job::State::Done;
        std::string error;
        if (job.cancelled()) {
            end = Job::State::Cancelled;  // cancelled while it waited
        } else {
            // the job's threads and cancel flag, on this thread, for the job's lifetime
            ops::Budget budget(job.threads(), &job.cancel_flag());
            try {
                it.fn(job);
                if (job.cancelled()) end = Job::State::Cancelled;  // it stopped early: nothing of it is to be used
            } catch (const ops::Cancelled&) {
                end = Job::State::Cancelled;
            } catch (const std::exception& e) {
                end = Job::State::Failed;
                error = e.what();
            } catch (...) {
                end = Job::State::Failed;
                error = "an exception that is not a std::exception";
            }
        }
        it.fn = nullptr;  // what the function holds goes before the job is said finished
        lk.lock();
        running_.erase(std::find(running_.begin(), running_.end(), it.job));
        job.finish(end, std::move(error));
    }
}

}  // namespace vit::app
