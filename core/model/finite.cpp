#include "core/model/finite.h"

#include <cstring>

namespace vit {

namespace {
inline uint32_t bits_of(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}
std::string with_commas(uint64_t v) {
    std::string s = std::to_string(v);
    for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(size_t(i), ",");
    return s;
}
}  // namespace

std::string NonFinite::describe() const {
    std::string s;
    auto add = [&](uint64_t n, const char* what) {
        if (!n) return;
        s += (s.empty() ? "" : ", ") + with_commas(n) + " " + what;
    };
    add(nan, "NaN");
    add(pos_inf, "+Inf");
    add(neg_inf, "-Inf");
    if (s.empty()) s = "no NaN or Inf";
    s += " of " + with_commas(total) + " values";
    if (any()) s += ", first at flat index " + std::to_string(first);
    return s;
}

NonFinite count_nonfinite(const float* p, size_t n) {
    NonFinite r;
    r.total = n;
    // A value is NaN or Inf exactly when its exponent bits are all ones.
    constexpr uint32_t kExp = 0x7f800000u;
    uint32_t seen = 0;
    for (size_t i = 0; i < n; ++i) seen |= uint32_t((bits_of(p[i]) & kExp) == kExp);
    if (!seen) return r;
    for (size_t i = 0; i < n; ++i) {
        const uint32_t b = bits_of(p[i]);
        if ((b & kExp) != kExp) continue;
        if (!r.any()) r.first = i;
        if (b & 0x007fffffu) ++r.nan;
        else if (b >> 31) ++r.neg_inf;
        else ++r.pos_inf;
    }
    return r;
}

std::vector<std::pair<std::string, NonFinite>> nonfinite_tensors(const std::map<std::string, Array>& tensors) {
    std::vector<std::pair<std::string, NonFinite>> v;
    for (auto& [name, t] : tensors) {
        NonFinite nf = count_nonfinite(t);
        if (nf.any()) v.emplace_back(name, nf);
    }
    return v;
}

std::string describe_nonfinite_tensors(const std::vector<std::pair<std::string, NonFinite>>& found, size_t max_listed) {
    if (found.empty()) return "";
    std::string s = std::to_string(found.size()) + (found.size() == 1 ? " tensor holds" : " tensors hold") +
                    " non-finite values: ";
    for (size_t i = 0; i < found.size() && i < max_listed; ++i)
        s += (i ? "; " : "") + found[i].first + " (" + found[i].second.describe() + ")";
    if (found.size() > max_listed) s += "; and " + std::to_string(found.size() - max_listed) + " more";
    return s;
}

std::string NonFiniteStage::describe(size_t stages_total) const {
    return "first at stage '" + stage + "' (#" + std::to_string(index + 1) + " of " + std::to_string(stages_total) +
           "): " + counts.describe() + "; " + std::to_string(stages_with) + " of " + std::to_string(stages_total) +
           " stages hold non-finite values";
}

std::optional<NonFiniteStage> first_nonfinite_stage(const Trace& t) {
    std::optional<NonFiniteStage> r;
    auto visit = [&](size_t i, const Array& a) {
        NonFinite nf = count_nonfinite(a.data(), a.size());
        if (nf.any()) {
            if (!r) r = NonFiniteStage{t.name(i), t.info(i).id, i, nf, 0};
            ++r->stages_with;
        }
    };
    if (!t.on_demand()) {
        for (size_t i = 0; i < t.size(); ++i)
            if (t.has(t.info(i).id)) visit(i, t.at(i));  // a row this run did not record is skipped
        return r;
    }
    // Stages on demand: the kept rows (the residual stream leaving every block among them) first,
    // without recomputing anything. NaN and Inf carry through the residual stream, so a block whose
    // output is finite holds none inside, except where an ablation zeroes the sub-layer that held
    // them (then its stage shows them when it is looked at). When a kept row holds any, every stage
    // is looked at, a block at a time in a trace of this call's own (the trace's cache is not
    // touched), to name the first exactly and count them all.
    bool any = false;
    for (size_t i = 0; i < t.size() && !any; ++i)
        if (t.kept(i)) any = count_nonfinite(t.at(i).data(), t.at(i).size()).any();
    if (!any) return r;
    Trace blk;
    int held = -1;
    for (size_t i = 0; i < t.size(); ++i) {
        if (t.kept(i)) {
            visit(i, t.at(i));
            continue;
        }
        const int l = t.info(i).layer;
        if (l < 0) continue;
        if (held != l) {
            blk = t.block(l);
            held = l;
        }
        visit(i, blk.at(i));
    }
    return r;
}

}  // namespace vit
