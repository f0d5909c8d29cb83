// The centre tabs as units. Each tab lives in its own file (app/tabs/tab_*.cpp) with the state and
// caches it keeps, and is registered in the one tab table (table.cpp): its name on the tab bar, its
// key, what it exports and how to make it. The tab bar, the keys, --tab, the exports and the headless
// sweep all read the table; nothing else lists the tabs.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "app/views.h"

namespace vit::app {

struct AppArgs;
class JobQueue;

// The headless sweep's view of a tab (headless.cpp runs it): states to draw, and checks on them.
using SweepFail = std::function<void(const std::string&)>;  // records a failure
struct SweepState {
    std::string desc;
    std::function<void(Session&, UiState&)> apply;  // applied on every frame the state waits
    // A check of this state alone, on its last frame (besides the shown tab's own checks).
    std::function<void(const Session&, const UiState&, const Probe&, const SweepFail&)> check;
};
struct SweepPlan {
    const Session* session = nullptr;  // the session swept, when the plan is made
    const Trace* trace = nullptr;      // its trace
    int T = 0, L = 0, H = 0, N = 0;    // stages, layers, heads, patches of that trace
    Options base;                      // the options a state resets to (the defaults at the input size swept)
    std::vector<int> stages;           // the stages the sweep visits
    std::vector<SweepState> states;
    void add(std::string desc, std::function<void(Session&, UiState&)> apply) {
        states.push_back({std::move(desc), std::move(apply), nullptr});
    }
};

// The trace on screen; when there is none, says why in place (no image yet, or its first pass still
// running), records it under the probe key `key` and returns null. `no_image` is what the tab lacks
// without an image.
const Trace* trace_or_why(ViewCtx& v, const std::string& key,
                          const char* no_image = "No image is loaded, so the model has not run.");
// Values as "v0,v1,..." with 9 significant digits: the probe's record of numbers drawn.
std::string csv(const float* v, size_t n);
// Why a view shows nothing (or less) for this model or trace, said in place in the warning colour,
// wrapped to the panel, and recorded under the probe key `key`.
void say_why(ViewCtx& v, const std::string& key, const std::string& why);
// The warning colour of the tabs' notes: {1, 0.75, 0.4, 1}.
extern const float kWarnRGBA[4];

class TabView {
public:
    virtual ~TabView() = default;
    virtual void draw(ViewCtx& v) = 0;
    // Drawn after the tab bar, over the centre views, while this tab is shown (the Stage tab's math panel).
    virtual void draw_over(ViewCtx& v, const Rect& centre) {}
    // Every frame, whatever tab is shown, before anything is drawn: jobs to start, cancel or take.
    virtual void tick(ViewCtx& v) {}
    // A job of this tab is running (headless drivers wait for it to finish).
    virtual bool working() const { return false; }
    // The command line's requests for this tab (--train-epochs, --distance-images).
    virtual void apply_args(const AppArgs& a) {}
    // The numbers this tab drew this frame (its export, when the table gives it an export name).
    const NamedArrays& numbers() const { return numbers_; }
    void clear_numbers() { numbers_.clear(); }
    // The sweep hook: states this tab adds to the headless sweep, and the checks on a frame that
    // shows this tab (`fail` records a failure).
    virtual void sweep_states(SweepPlan& plan) {}
    virtual void sweep_check(const Session& s, const UiState& ui, const Probe& p, const SweepFail& fail) const {}

protected:
    NamedArrays numbers_;
};

struct TabSpec {
    Tab tab;
    const char* name;          // on the tab bar
    const char* key;           // the key that selects it ("1" .. "9", "M"), as help and tooltips say it
    int glfw_key;
    const char* export_name;   // "Numbers .npy+.csv" exports what it drew, under this name in the view PNG;
                               // null: the exports are the current stage's
    std::unique_ptr<TabView> (*make)(JobQueue& jobs);
};
// The table, in Tab order.
const std::vector<TabSpec>& tab_table();
const TabSpec& tab_spec(Tab t);
const char* tab_name(Tab t);
int tab_count();
// "0 Stage, 1 Attention maps, ..., 9 Map (key M)": --tab's help.
std::string tab_help();

// The tabs of one window, made from the table.
class Tabs {
public:
    explicit Tabs(JobQueue& jobs);
    TabView& operator[](Tab t) { return *units_[size_t(t)]; }
    const TabView& operator[](Tab t) const { return *units_[size_t(t)]; }
    bool working() const;
    void tick(ViewCtx& v);
    void clear_numbers();
    void apply_args(const AppArgs& a);

private:
    std::vector<std::unique_ptr<TabView>> units_;
};

// The makers the table registers (each in its tab's file).
std::unique_ptr<TabView> make_stage_tab(JobQueue& jobs);
std::unique_ptr<TabView> make_attention_tab(JobQueue& jobs);
std::unique_ptr<TabView> make_changes_tab(JobQueue& jobs);
std::unique_ptr<TabView> make_train_tab(JobQueue& jobs);
std::unique_ptr<TabView> make_lens_tab(JobQueue& jobs);
std::unique_ptr<TabView> make_positions_tab(JobQueue& jobs);
std::unique_ptr<TabView> make_filters_tab(JobQueue& jobs);
std::unique_ptr<TabView> make_distance_tab(JobQueue& jobs);
std::unique_ptr<TabView> make_patches_tab(JobQueue& jobs);
std::unique_ptr<TabView> make_map_tab(JobQueue& jobs);
std::unique_ptr<TabView> make_norms_tab(JobQueue& jobs);
std::unique_ptr<TabView> make_features_tab(JobQueue& jobs);
std::unique_ptr<TabView> make_selfattn_tab(JobQueue& jobs);
std::unique_ptr<TabView> make_what_it_uses_tab(JobQueue& jobs);

}  // namespace vit::app
