// What every tab shares: saying why there is no trace or nothing to show, and the probe's record of numbers drawn.
#include <imgui.h>

#include <cstdio>

#include "app/tabs/tab.h"

namespace vit::app {

const Trace* trace_or_why(ViewCtx& v, const std::string& key, const char* no_image) {
    const Trace* t = v.s.trace();
    if (t) return t;
    const std::string why = v.s.has_image() ? "Running the model..." : no_image;
    ImGui::TextDisabled("%s", why.c_str());
    v.probe.strings[key] = why;
    return nullptr;
}

const float kWarnRGBA[4] = {1, 0.75f, 0.4f, 1};

void say_why(ViewCtx& v, const std::string& key, const std::string& why) {
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(ImVec4(kWarnRGBA[0], kWarnRGBA[1], kWarnRGBA[2], kWarnRGBA[3]), "%s", why.c_str());
    ImGui::PopTextWrapPos();
    v.probe.strings[key] = why;
}

std::string csv(const float* v, size_t n) {
    std::string s;
    char b[32];
    for (size_t i = 0; i < n; ++i) {
        std::snprintf(b, sizeof b, "%s%.9g", i ? "," : "", double(v[i]));
        s += b;
    }
    return s;
}

}  // namespace vit::app
