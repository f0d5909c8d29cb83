// The app's job queue (app/jobs.h): each job runs with its own thread budget, a cancel flag its
// kernels honour, progress the submitter reads, and an end state that says what became of it.
// Every wait here is on the jobs' own signals (promises, Job::wait): nothing is timed.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <stdexcept>
#include <vector>

#include "app/jobs.h"
#include "core/kernels/ops.h"

using vit::app::Job;
using vit::app::JobQueue;

namespace {

// Small matrix products until a kernel throws ops::Cancelled. Bounded: if no kernel noticed the
// cancel, the loop ends and says so in `ran_out`.
void kernels_until_cancelled(std::promise<void>* started, std::atomic<bool>* ran_out) {
    std::vector<float> in(64, 1.f), w(64, 0.5f), out(64);
    if (started) started->set_value();
    for (int i = 0; i < 5'000'000; ++i) vit::ops::linear(out.data(), in.data(), w.data(), nullptr, 8, 8, 8);
    if (ran_out) *ran_out = true;
}

}  // namespace

// Two jobs running at the same time each see their own budget in the kernels' thread count.
TEST(Jobs, ThreadBudgetIsPerJob) {
    JobQueue q;
    std::promise<int> a_seen, b_seen;
    std::promise<void> go;
    auto release = go.get_future().share();
    auto a = q.submit("a", 1, [&](Job&) {
        a_seen.set_value(vit::ops::threads());
        release.wait();  // both are running when each reads its count
    });
    auto b = q.submit("b", 3, [&](Job&) {
        b_seen.set_value(vit::ops::threads());
        release.wait();
    });
    const int ta = a_seen.get_future().get(), tb = b_seen.get_future().get();
    EXPECT_TRUE(a->running() && b->running());
    go.set_value();
    a->wait();
    b->wait();
    EXPECT_EQ(ta, 1);
    EXPECT_EQ(tb, 3);
    EXPECT_EQ(a->state(), Job::State::Done);
    EXPECT_EQ(b->state(), Job::State::Done);
}

// cancel() stops a job inside its kernels (ops::Cancelled unwinds it): the job ends Cancelled.
TEST(Jobs, CancelStopsAJobInsideItsKernels) {
    JobQueue q;
    std::promise<void> started;
    std::atomic<bool> ran_out{false};
    auto j = q.submit("kernels", 2, [&](Job&) { kernels_until_cancelled(&started, &ran_out); });
    started.get_future().wait();
    j->cancel();
    j->wait();
    EXPECT_EQ(j->state(), Job::State::Cancelled);
    EXPECT_FALSE(ran_out) << "no kernel noticed the cancel: the loop ran to its end";
}

// A newer request supersedes the one in flight: the old job is cancelled and ends Cancelled, the
// new one runs to the end (as Session::launch does with forward passes).
TEST(Jobs, NewerRequestSupersedesTheOneInFlight) {
    JobQueue q;
    std::promise<void> started;
    std::atomic<bool> ran_out{false};
    auto old_job = q.submit("forward pass", 1, [&](Job&) { kernels_until_cancelled(&started, &ran_out); });
    started.get_future().wait();
    old_job->cancel();
    auto result = std::make_shared<int>(0);
    auto new_job = q.submit("forward pass", 1, [result](Job&) { *result = 42; });
    new_job->wait();
    old_job->wait();
    EXPECT_EQ(old_job->state(), Job::State::Cancelled);
    EXPECT_FALSE(ran_out);
    EXPECT_EQ(new_job->state(), Job::State::Done);
    EXPECT_EQ(*result, 42);
}

// Progress as units of a total, or a fraction; the step; a failure's message; the jobs in flight.
TEST(Jobs, ProgressStepErrorAndTheActiveList) {
    JobQueue q;
    std::promise<void> reported, go;
    auto release = go.get_future().share();
    auto j = q.submit("counting", 1, [&](Job& job) {
        job.set_total(4);
        job.units() = 1;
        job.set_step("step one");
        reported.set_value();
        release.wait();
    });
    reported.get_future().wait();
    EXPECT_FLOAT_EQ(j->progress(), 0.25f);
    EXPECT_EQ(j->step(), "step one");
    auto active = q.active();
    ASSERT_EQ(active.size(), 1u);
    EXPECT_EQ(active[0]->name(), "counting");
    go.set_value();
    j->wait();
    EXPECT_TRUE(q.active().empty());

    auto f = q.submit("fails", 1, [](Job& job) {
        job.set_progress(0.5f);
        throw std::runtime_error("no such file 'x.safetensors'");
    });
    f->wait();
    EXPECT_EQ(f->state(), Job::State::Failed);
    EXPECT_EQ(f->error(), "no such file 'x.safetensors'");
    EXPECT_FLOAT_EQ(f->progress(), 0.5f);
}

// A job that stops early because it saw cancelled() ends Cancelled (its result is not to be used).
TEST(Jobs, AJobThatStopsOnCancelEndsCancelled) {
    JobQueue q;
    std::promise<void> started;
    auto j = q.submit("loop", 1, [&](Job& job) {
        started.set_value();
        while (!job.cancelled()) job.units() = job.units() + 1;
    });
    started.get_future().wait();
    j->cancel();
    j->wait();
    EXPECT_EQ(j->state(), Job::State::Cancelled);
}

// shutdown() cancels the running job, drops the queued ones without running them, and refuses new ones.
TEST(Jobs, ShutdownCancelsRunningAndQueuedJobs) {
    JobQueue q(1);  // one worker: the second job waits
    std::promise<void> started;
    std::atomic<bool> second_ran{false};
    std::atomic<bool> ran_out{false};
    auto first = q.submit("first", 1, [&](Job&) { kernels_until_cancelled(&started, &ran_out); });
    started.get_future().wait();
    auto second = q.submit("second", 1, [&](Job&) { second_ran = true; });
    EXPECT_EQ(second->state(), Job::State::Queued);
    q.shutdown();
    EXPECT_EQ(first->state(), Job::State::Cancelled);
    EXPECT_FALSE(ran_out);
    EXPECT_EQ(second->state(), Job::State::Cancelled);
    EXPECT_FALSE(second_ran);
    auto late = q.submit("late", 1, [&](Job&) { second_ran = true; });
    EXPECT_EQ(late->state(), Job::State::Cancelled);
    EXPECT_FALSE(second_ran);
}
