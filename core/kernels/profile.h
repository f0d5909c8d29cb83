// Where the time goes: the forward pass reports each part (GEMMs by shape,
// attention, LayerNorm, GELU, ...) to the profile active on its thread, if any.
// Off by default: then a part costs one branch.
#pragma once
#include <chrono>
#include <map>
#include <string>

namespace vit::profile {

struct Part {
    double ms = 0, flops = 0;
    long calls = 0;
};

class Profile {
public:
    void add(const std::string& kind, double ms, double flops) {
        Part& p = parts_[kind];
        p.ms += ms;
        p.flops += flops;
        ++p.calls;
    }
    const std::map<std::string, Part>& parts() const { return parts_; }
    void clear() { parts_.clear(); }

private:
    std::map<std::string, Part> parts_;
};

Profile*& active();  // this thread's profile (null: not profiling)

// Times its scope into the active profile under `kind` with `flops` floating-point operations.
class Scope {
public:
    template <class KindFn>
    Scope(KindFn&& kind, double flops) : p_(active()) {
        if (p_) { kind_ = kind(); flops_ = flops; t0_ = std::chrono::steady_clock::now(); }
    }
    ~Scope() {
        if (p_)
            p_->add(kind_, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count(),
                    flops_);
    }

private:
    Profile* p_;
    std::string kind_;
    double flops_ = 0;
    std::chrono::steady_clock::time_point t0_;
};

}  // namespace vit::profile
