// The busy-core rule (core/kernels/ops.cpp): whether a thread's parallel regions run on all
// threads or on one, judged from each region's wall time and what one thread would have taken.
// A class of its own, on times in seconds, so that tests can feed it a load's pattern of regions
// (tests/test_ops_kernels.cpp) without a busy machine.
#pragma once

#include <algorithm>
#include <cmath>

namespace vit::ops {

class BusyGovernor {
public:
    static constexpr double kStall = 0.5e-3;    // s of waiting that no fork/join on an idle machine costs
    static constexpr double kFirstPause = 0.5;  // s on one thread after parallel first loses
    static constexpr double kMaxPause = 8.0;
    static constexpr double kWindow = 1.0;      // s: the decay time of the sums
    static constexpr double kEvidence = 2e-3;   // s: wall over one thread's time by this much (not one early stall)
    static constexpr double kLoss = 1.3;        // ... and by this factor (not a break-even burst)
    static constexpr double kJudge = 0.3;       // s of regions summed before judging (after the warm-up, after a
                                                // probe): a burst of stalls lasts a few tenths of a second
    static constexpr double kWarmup = 0.2;      // s after the first region: first calls JIT-compile oneDNN's
                                                // kernels and fault pages in; they say nothing of the load

    // At time `now` (s), before a region: true when the pause on one thread is over and all threads
    // are to be tried again (a probe).
    bool probe(double now) {
        if (!one_ || now < until_) return false;
        one_ = false;
        wall_ = single_ = 0;
        restored_ = now;
        return true;
    }
    // A region that ended at `now` took `wall` s on its threads and would have taken `single` s on
    // one; `stall`: a thread started or finished late. True when the thread is to run on one thread
    // from now on.
    bool report(double now, double wall, double single, bool stall) {
        const double dt = seen_ ? now - last_ : 0.0;
        last_ = now;
        if (!seen_) seen_ = true, first_ = now;
        if (stall) ++stalls_;
        if (now - first_ < kWarmup) return false;  // not judged, not summed
        const double decay = std::exp(-dt / kWindow);
        wall_ = wall_ * decay + wall;
        single_ = single_ * decay + single;
        if (!stall && single_ > wall_ && now - restored_ > 2 * pause_) pause_ = kFirstPause;  // a quiet spell
        if (one_ || wall_ <= kJudge || wall_ - single_ <= kEvidence || wall_ <= kLoss * single_) return false;
        // Parallel loses again soon after a probe: wait longer before the next one.
        if (fallbacks_ && now - restored_ < 2 * kWindow) pause_ = std::min(kMaxPause, pause_ * 2);
        one_ = true;
        ++fallbacks_;
        until_ = now + pause_;
        return true;
    }
    bool one() const { return one_; }  // on one thread now
    long stalls() const { return stalls_; }
    long fallbacks() const { return fallbacks_; }
    double pause() const { return pause_; }

private:
    double wall_ = 0, single_ = 0;  // s: the regions' wall times, and one thread's, decaying over kWindow
    bool seen_ = false;
    double last_ = 0, first_ = 0;   // the last report; the first (the warm-up)
    bool one_ = false;
    double until_ = 0, restored_ = -1e30;
    double pause_ = kFirstPause;
    long stalls_ = 0, fallbacks_ = 0;
};

}  // namespace vit::ops
