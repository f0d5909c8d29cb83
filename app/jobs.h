// The app's background work as jobs of one small queue (issue 18 item 6): the forward passes, the
// model loader, the Distance tab's average over test images and the trainer.
//
// A job has a name, a thread budget and a cancel flag: the worker that runs it sets both for the
// job's lifetime (ops::Budget), so its kernels use the job's threads and no job changes another's,
// and every kernel is a cancellation point (ops::Cancelled unwinds the job). A job reports its
// progress (a fraction, or stages done of a total) and the step it is at; the status bar shows every
// job in flight. Workers are persistent threads (their OpenMP pools survive between jobs), started
// as jobs need them, up to a limit; more jobs than workers wait in submission order.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace vit::app {

class Job {
public:
    enum class State { Queued, Running, Done, Failed, Cancelled };

    Job(std::string name, int threads) : name_(std::move(name)), threads_(threads) {}
    const std::string& name() const { return name_; }
    int threads() const { return threads_; }

    // ---- the submitter's side
    // Asks the job to stop: its next kernel throws ops::Cancelled, and its own loops see cancelled().
    void cancel() { cancel_ = true; }
    bool cancelled() const { return cancel_.load(); }
    State state() const;
    bool finished() const;          // Done, Failed or Cancelled
    bool running() const { return state() == State::Running; }
    // Waits up to `ms` for the job to finish; true when it has.
    bool wait_for(double ms) const;
    void wait() const;
    std::string error() const;      // Failed: the exception's message
    float progress() const;         // 0..1; -1 when the job does not know
    std::string step() const;       // what it is doing now ("epoch 2 of 5", "running block 3 of 24")
    // The step named from the units done (the forward pass: the stage it is at, said as a block of
    // the model), read by the submitter's thread; set by the submitter right after submit.
    void set_step_from_units(std::function<std::string(int)> f);

    // ---- the job's side
    // Progress as a count of units done out of a total (the forward pass counts stages in a trace).
    void set_total(int n) { total_ = n; }
    std::atomic<int>& units() { return units_; }
    int units_done() const { return units_.load(); }
    void set_progress(float f) { fraction_ = f; }
    void set_step(const std::string& s);
    const std::atomic<bool>& cancel_flag() const { return cancel_; }

private:
    friend class JobQueue;
    void finish(State s, std::string error = "");
    const std::string name_;
    const int threads_;
    std::atomic<bool> cancel_{false};
    std::atomic<int> units_{0}, total_{0};
    std::atomic<float> fraction_{-1.f};
    mutable std::mutex mu_;
    mutable std::condition_variable cv_;
    State state_ = State::Queued;
    std::string error_, step_;
    std::function<std::string(int)> step_from_units_;
};

// Threads for a job on a model of `params` parameters: one below 2M, where a fork/join per kernel
// costs more than it saves; else every core.
int job_threads(long long params);
int all_threads();  // every core

class JobQueue {
public:
    explicit JobQueue(int max_workers = 6);
    ~JobQueue();  // shutdown()
    JobQueue(const JobQueue&) = delete;
    JobQueue& operator=(const JobQueue&) = delete;

    // Runs fn(job) on a worker with `threads` kernel threads. fn returns (Done; Cancelled when the
    // job was cancelled meanwhile: it may have stopped early), throws ops::Cancelled (Cancelled) or
    // anything else (Failed, with its message). What fn computes it hands back itself (a shared
    // result the submitter reads once the job is Done).
    std::shared_ptr<Job> submit(std::string name, int threads, std::function<void(Job&)> fn);
    // The jobs queued or running, in submission order (for the status bar).
    std::vector<std::shared_ptr<const Job>> active() const;
    // Cancels every job, waits for the running ones, stops the workers. Later submits are refused.
    void shutdown();

private:
    struct Item {
        std::shared_ptr<Job> job;
        std::function<void(Job&)> fn;
    };
    void work();
    const int max_workers_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Item> queue_;
    std::vector<std::shared_ptr<Job>> running_;
    std::vector<std::thread> workers_;
    int idle_ = 0;
    bool quit_ = false;
};

}  // namespace vit::app
