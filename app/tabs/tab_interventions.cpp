// The What it uses tab (issue 21): where the model looks is not what it uses. Knock out one head at
// a time (vit::head_importance) or drop one patch at a time (vit::occlusion) and see how far the
// output moves from the run without interventions: a layer x head picture (a click applies that
// ablation) and the occlusion map over the image beside the cls attention and the rollout of the
// same run. The sweeps run as a job (progress, cancel; the window keeps drawing) and reuse the clean
// run's stages before the block they change.
#include "app/probe.h"
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "app/interventions_ui.h"
#include "app/jobs.h"
#include "app/paths.h"
#include "app/tabs/tab.h"
#include "app/scene_truth.h"
#include "app/tensor_access.h"
#include "core/io/image.h"
#include "core/teach/interventions.h"
#include "core/teach/teach.h"

namespace vit::app {

namespace {
// Each column as wide as its map or its key's two numbers, whichever is wider: the maps share what the keys leave
// of `room` (DINOv2's occlusion key, 2.461e-11 .. 5.147e-11, pushed the third map 23 px past the view at 1280x800).
template <class MapT, size_t N>
float map_side_beside_keys(const MapT (&maps)[N], int gw, int gh, float side, float room) {
    float keymin[N] = {};
    for (size_t k = 0; k < N; ++k)
        if (maps[k].vals.size() == size_t(gw) * size_t(gh)) {
            const GridRange g = grid_range(maps[k].vals);
            Colormap km;
            km.vmin = g.vmin;
            km.vmax = g.vmax;
            keymin[k] = color_key_min_width(km);
        }
    for (int it = 0; it < 3; ++it) {
        float fixed = 0;
        int n = 0;
        for (float w : keymin) {
            if (w > side) fixed += w;
            else ++n;
        }
        if (n) side = std::clamp((room - fixed) / float(n), 48.f, 220.f);
    }
    return side;
}
}  // namespace

namespace {

const ImVec4 kWarn(kWarnRGBA[0], kWarnRGBA[1], kWarnRGBA[2], kWarnRGBA[3]);

// A sweep's job and what it hands back (written by the job, read once it has finished).
struct Sweep {
    std::shared_ptr<Job> job;
    std::string key;            // model, input and options it belongs to
    std::string clean_text;     // the options without interventions, as the texts say them
    struct Outcome {
        SweepResult heads, occ;
        double seconds = 0;
        int total = 0;
    };
    std::shared_ptr<Outcome> out = std::make_shared<Outcome>();
    bool running() const { return !job->finished(); }
};

// What a sweep must have been computed for to be drawn for the trace on screen.
std::string sweep_key(const Session& s) {
    const auto m = s.shown_model();
    char b[64];
    std::snprintf(b, sizeof b, "%p|", static_cast<const void*>(m.get()));
    std::string k = b + s.image_path() + "|";
    if (m) k += options_json(s.shown_options().clean(), m->weights.cfg);
    k += s.squash() ? (*s.squash() ? "|squash" : "|crop") : "|model's";
    return k;
}

class WhatItUsesTab : public TabView {
public:
    explicit WhatItUsesTab(JobQueue& jobs) : jobs_(jobs) {}
    ~WhatItUsesTab() override {
        if (sw_ && sw_->job) sw_->job->cancel();
    }

    void tick(ViewCtx& v) override {
        Session& s = v.s;
        if (sw_ && sw_->running() && s.trace() && sw_->key != sweep_key(s)) sw_->job->cancel();  // no longer this trace's
        const bool shown = v.ui.tab == Tab::WhatItUses;
        if (!shown || !s.trace() || s.busy() || s.loading() || s.shown_model().get() != &s.model()) return;
        if (sw_ && sw_->key == sweep_key(s)) return;
        if (param_count(s.shown_config()) < kAutoGradParams || start_) start(s);
    }
    bool working() const override { return sw_ && sw_->running(); }

    // The sweep's job for the trace on screen (`key`): a button to start it, its progress and cancel, or how it
    // ended. Returns its state: "not computed", "running", "failed", "cancelled" or "done".
    std::string draw_job_state(ViewCtx& v, const Trace& t, const std::string& key) {
        Probe& pr = v.probe;
        const Config& c = v.s.shown_config();
        const bool mine = sw_ && sw_->key == key;
        // ---- the job: progress and cancel, or how it ended
        std::string state;
        if (!sw_ || !mine) {
            state = "not computed";
            const std::string why = c.depth == 0 ? "the model has no blocks" : "";
            if (!why.empty()) {
                ImGui::TextColored(kWarn, "Nothing to sweep: %s.", why.c_str());
            } else {
                ImGui::TextDisabled("%lld parameters: %d + %d passes.", (long long)param_count(c), c.depth * c.heads,
                                    t.table().dims().N);
                ImGui::SameLine();
                if (ImGui::SmallButton("Compute")) start_ = true;
            }
        } else if (sw_->running()) {
            state = "running";
            const float f = std::max(0.f, sw_->job->progress());
            ImGui::ProgressBar(f, ImVec2(260, 0), sw_->job->step().c_str());
            ImGui::SameLine();
            if (ImGui::SmallButton("Cancel")) sw_->job->cancel();
            pr.numbers["uses.progress"] = f;
        } else if (sw_->job->state() == Job::State::Failed) {
            state = "failed";
            ImGui::TextColored(kWarn, "The sweep failed: %s", sw_->job->error().c_str());
            pr.strings["uses.message"] = sw_->job->error();
            if (ImGui::SmallButton("Again")) { sw_.reset(); start_ = true; }
        } else if (sw_->job->cancelled()) {
            state = "cancelled";
            ImGui::TextColored(kWarn, "The sweep was cancelled: nothing is drawn.");
            ImGui::SameLine();
            if (ImGui::SmallButton("Compute")) { sw_.reset(); start_ = true; }
        } else {
            state = "done";
        }
        return state;
    }

    void draw(ViewCtx& v) override {
        Session& s = v.s;
        Probe& pr = v.probe;
        const Trace* t = s.trace();
        if (!t) {
            const std::string why = s.has_image() ? "Running the model..." : "No image is loaded, so the model has not run.";
            ImGui::TextDisabled("%s", why.c_str());
            pr.strings["uses.message"] = why;
            return;
        }
        const Config& c = s.shown_config();
        const Options clean = s.shown_options().clean();
        ImGui::PushTextWrapPos(0);
        ImGui::TextWrapped("Attention shows where the model looks, not what it uses. Here each head is knocked out alone "
                           "(its slice of attn.z set to 0) and each patch is dropped alone, and the picture says how far "
                           "the output moves from the run without interventions (%s).",
                           clean.describe().c_str());
        ImGui::PopTextWrapPos();
        DrawSceneDrops(v);
        const std::string key = sweep_key(s);
        const std::string state = draw_job_state(v, *t, key);
        pr.strings["uses.state"] = state;
        if (state != "done") return;
        const Sweep::Outcome& o = *sw_->out;
        const SweepResult& hi = o.heads;
        const SweepResult& oc = o.occ;
        // what is measured, from the sweep itself
        std::string measure = hi.target.measure();
        if (hi.target.logits && hi.target.cls >= 0) {
            const int k = hi.target.cls;
            const std::string name = size_t(k) < c.class_names.size() ? c.class_names[size_t(k)] : "class " + std::to_string(k);
            measure += ", class " + std::to_string(k) + " (" + name + ", the clean run's prediction)";
        }
        ImGui::PushTextWrapPos(0);
        ImGui::TextDisabled("measure: %s; %d + %d passes in %.2f s, %.0f blocks computed (full passes: %.0f)", measure.c_str(),
                            hi.passes, oc.passes, o.seconds, hi.blocks + oc.blocks,
                            double(hi.passes + oc.passes) * c.depth);
        ImGui::PopTextWrapPos();
        pr.strings["uses.measure"] = measure;
        if (const std::string note = weights_note(s); !note.empty())
            ImGui::TextColored(kWarn, "%s: what it uses means little", note.c_str());
        numbers_.push_back({"head_importance", hi.values});
        numbers_.push_back({"occlusion", oc.values});

        // ---- head importance: layer x head, a click applies that ablation
        const int L = int(hi.values.shape(0)), H = int(hi.values.shape(1));
        const float full_w = ImGui::GetContentRegionAvail().x;
        ImGui::BeginGroup();
        ImGui::Text("Head importance (click a head to knock it out)");
        float m = 0;
        for (float x : hi.values) m = std::max(m, std::fabs(x));
        HeatmapArgs a;
        a.data = hi.values.data();
        a.rows = L;
        a.cols = H;
        a.row_label = "layer";
        a.col_label = "head";
        a.cm.mode = Colormap::Diverging;
        a.cm.vmin = -std::max(m, 1e-9f);
        a.cm.vmax = std::max(m, 1e-9f);
        a.zoomable = false;
        a.rect_name = "uses.heads";
        a.index_prefix = "[layer ";
        a.max_w = std::min(300.f, full_w * 0.3f);
        a.max_h = std::min(360.f, ImGui::GetContentRegionAvail().y - 60);
        int cr = -1, cc = -1;
        a.clicked_row = &cr;
        a.clicked_col = &cc;
        const uint64_t result_id = uint64_t(std::hash<std::string>{}(key)) ^ uint64_t(reinterpret_cast<uintptr_t>(sw_.get()));
        Heatmap(v, "uses.heads", heads_tex_, keys_.stale("heads", result_id), a);
        if (cr >= 0 && cc >= 0) toggle_head(s, cr, cc);
        // the heads knocked out now (the options asked for), crossed out
        if (auto r = pr.rects.find("uses.heads"); r != pr.rects.end() && L > 0 && H > 0) {
            const float cw = r->second.w / float(H), ch = r->second.h / float(L);
            for (const HeadAblation& h : s.options().iv.heads)
                if (h.layer < L && h.head < H) {
                    const ImVec2 q(r->second.x + float(h.head) * cw, r->second.y + float(h.layer) * ch);
                    DrawKnockedOut(ImGui::GetWindowDrawList(), q, ImVec2(q.x + cw, q.y + ch));
                }
        }
        const size_t best = size_t(std::max_element(hi.values.begin(), hi.values.end()) - hi.values.begin());
        if (H > 0 && L > 0) {
            const std::string best_head = head_label(int(best / size_t(H)), int(best % size_t(H)));
            ImGui::TextDisabled("largest: head %s, %s", best_head.c_str(), fmt(hi.values.data()[best]).c_str());
            pr.strings["uses.heads.best"] = best_head;
        }
        ImGui::EndGroup();
        const float heads_w = ImGui::GetItemRectSize().x;
        ImGui::SameLine();

        // ---- the occlusion map beside the cls attention and the rollout of the same (clean) run
        ImGui::BeginGroup();
        const RunDims& rd = t->table().dims();
        const int gw = rd.gw, gh = rd.gh;
        const Trace* ct = clean_trace(s);
        const float gap = ImGui::GetStyle().ItemSpacing.x;
        float side = std::clamp((full_w - heads_w - 4 * gap - 8) / 3, 48.f, 220.f);
        struct Map {
            const char* title;
            const char* key;
            std::vector<float> vals;
            std::string why;
        };
        Map maps[3] = {{"occlusion: drop that patch", "uses.occlusion", {}, ""},
                       {"cls attention, last layer", "uses.cls", {}, ""},
                       {"attention rollout", "uses.rollout", {}, ""}};
        maps[0].vals.assign(oc.values.begin(), oc.values.end());
        if (!ct) {
            maps[1].why = maps[2].why = "the run without interventions is not on hand";
        } else {
            try {
                maps[1].vals = c.cls_token ? cls_attention(*ct, c.depth - 1, -1) : probe_attention(*ct, -1);
                if (!c.cls_token) maps[1].title = "pooling probe's attention";
            } catch (const std::exception& e) {
                maps[1].why = e.what();
            }
            try {
                maps[2].vals = attention_rollout(*ct, c.depth - 1, Fusion::Mean, 0.f);
            } catch (const std::exception& e) {
                maps[2].why = e.what();
            }
        }
        side = map_side_beside_keys(maps, gw, gh, side, full_w - heads_w - 4 * gap - 8);
        const bool up = keys_.stale("maps", result_id * 1000003ull + s.version());
        ImDrawList* dl = ImGui::GetWindowDrawList();
        // the titles wrap to the map's width: the maps start level under the tallest
        float title_h = 0;
        for (const Map& m : maps) title_h = std::max(title_h, ImGui::CalcTextSize(m.title, nullptr, false, side).y);
        for (int k = 0; k < 3; ++k) {
            if (k) ImGui::SameLine();
            ImGui::BeginGroup();
            ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + side);
            const float y0 = ImGui::GetCursorPosY();
            ImGui::TextDisabled("%s", maps[k].title);
            ImGui::SetCursorPosY(std::max(ImGui::GetCursorPosY(), y0 + title_h + ImGui::GetStyle().ItemSpacing.y));
            const ImVec2 p0 = ImGui::GetCursorScreenPos(), p1(p0.x + side, p0.y + side * float(gh) / float(std::max(gw, 1)));
            ImGui::PushID(k);
            ImGui::InvisibleButton("map", ImVec2(side, p1.y - p0.y));
            const bool hovered = v.hover && ImGui::IsItemHovered();
            const bool clicked = ImGui::IsItemClicked();
            ImGui::PopID();
            if (maps[k].vals.size() != size_t(gw) * size_t(gh)) {
                dl->AddRect(p0, p1, IM_COL32(80, 80, 80, 255));
                const std::string why = maps[k].why.empty() ? "no map" : maps[k].why;
                pr.strings[std::string(maps[k].key) + ".message"] = why;
                ImGui::TextColored(kWarn, "%s", why.c_str());
                ImGui::PopTextWrapPos();
                ImGui::EndGroup();
                continue;
            }
            // the model input under the map, as the image panel shows it
            if (up && k == 0) upload_input(*t, c);
            GridRange r = up ? upload_grid(tex_[k], maps[k].vals, gw, gh) : range_[k];
            range_[k] = r;
            if (input_.valid()) dl->AddImage(input_.id(), p0, p1);
            Colormap cm;
            cm.mode = Colormap::Overlay;
            cm.vmin = r.vmin;
            cm.vmax = r.vmax;
            cm.opacity = 0.7f;
            v.gfx.draw(dl, tex_[k], p0, p1, cm);
            dl->AddRect(p0, p1, IM_COL32(90, 90, 90, 255));
            pr.rects[maps[k].key] = Rect{p0.x, p0.y, p1.x - p0.x, p1.y - p0.y};
            pr.numbers[std::string(maps[k].key) + ".argmax"] = r.argmax;
            const float cw = side / float(gw), chh = (p1.y - p0.y) / float(gh);
            if (hovered) {
                const ImVec2 mp = ImGui::GetIO().MousePos;
                const int gx = std::clamp(int((mp.x - p0.x) / cw), 0, gw - 1), gy = std::clamp(int((mp.y - p0.y) / chh), 0, gh - 1);
                const int n = gy * gw + gx;
                ImGui::SetTooltip("patch %d (row %d, col %d): %s%s", n, gy, gx, fmt(maps[k].vals[size_t(n)]).c_str(),
                                  k == 0 ? "\nclick to drop this patch" : "");
                if (clicked && k == 0) toggle_dropped(s, n);
            }
            // the overlay's colours with their values: dark at the map's least, bright at its most
            ColorKey(v, maps[k].key, cm, side);
            ImGui::TextDisabled("max at patch %d", r.argmax);
            ImGui::PopTextWrapPos();
            ImGui::EndGroup();
        }
        ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + 3 * side + 2 * gap);
        ImGui::TextDisabled("maps of the run without interventions, each on its own scale (its key under it). Occlusion: %s. Click a patch of the "
                            "occlusion map to drop it.", oc.target.measure().c_str());
        ImGui::PopTextWrapPos();
        ImGui::EndGroup();
    }

    void sweep_states(SweepPlan& plan) override {
        interventions_sweep(plan);
        plan.add("what it uses: the sweeps", [](Session&, UiState& ui) { ui.tab = Tab::WhatItUses; });
        SweepState done;
        done.desc = "what it uses: the pictures drawn";
        done.apply = [](Session&, UiState& ui) { ui.tab = Tab::WhatItUses; };
        done.check = [](const Session& s, const UiState&, const Probe& p, const SweepFail& fail) {
            if (!s.trace() || s.shown_config().depth == 0) return;
            if (param_count(s.shown_config()) >= kAutoGradParams) return;  // computed on request only
            if (p.string("uses.state") != "done") fail("the What it uses tab's sweeps did not finish: " + p.string("uses.state"));
            else if (!p.rects.count("uses.heads") || !p.rects.count("uses.occlusion"))
                fail("the What it uses tab drew no head importance or occlusion map");
        };
        plan.states.push_back(done);
        // a click on the picture applies that ablation; a click on the occlusion map drops that patch
        plan.add("what it uses: head 0.0 knocked out from the picture", [](Session& s, UiState& ui) {
            ui.tab = Tab::WhatItUses;
            if (!head_ablated(s.options(), 0, 0)) toggle_head(s, 0, 0);
        });
        plan.add("what it uses: patch 0 dropped from the occlusion map", [](Session& s, UiState& ui) {
            ui.tab = Tab::WhatItUses;
            if (s.options().iv.dropped.empty()) toggle_dropped(s, 0);
        });
        plan.add("what it uses: interventions cleared", [](Session& s, UiState& ui) {
            Options o = s.options();
            o.iv = {};
            s.set_options(o);
            ui.tab = Tab::WhatItUses;
        });
    }
    void sweep_check(const Session& s, const UiState&, const Probe& p, const SweepFail& fail) const override {
        if (s.trace() && p.string("uses.state").empty() && p.string("uses.message").empty())
            fail("the What it uses tab said nothing");
    }

private:
    // Every stage (value and gradient views) and every tab with interventions active: heads knocked
    // out and sub-layers zeroed; patches dropped; a stage patched from another image; all at once.
    // Each state checks that the list above the tabs says what ran.
    static void interventions_sweep(SweepPlan& plan) {
        if (!plan.trace) return;
        const int L = plan.L, H = plan.H, N = plan.N;
        if (L == 0 || N < 4) return;
        std::string other;  // the patching source: a bundled image other than the one shown
        std::error_code ec;
        for (auto it = std::filesystem::recursive_directory_iterator(data_paths().samples, ec);
             !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
            if (it->path().extension() == ".png" && it->path().string() != plan.session->image_path() &&
                (other.empty() || it->path().string() < other))
                other = it->path().string();
        struct Set {
            std::string name;
            Interventions iv;
        };
        std::vector<Set> sets;
        Interventions a;
        a.heads = {{0, 0, false}, {L - 1, H - 1, true}};
        a.sublayers = {{L - 1, true}};
        sets.push_back({"heads knocked out, mlp.out zeroed", a});
        Interventions d;
        d.dropped = {0, N / 2, N - 1};
        sets.push_back({"patches dropped", d});
        if (!other.empty()) {
            Interventions p;
            p.patch = ActivationPatch{{StageKind::ResidPost, L / 2}, {0}, nullptr, other};
            sets.push_back({"cls row of resid_post patched", p});
            Interventions all = a;
            all.dropped = d.dropped;
            all.patch = ActivationPatch{{StageKind::Embed, -1}, {}, nullptr, other};
            sets.push_back({"all at once (embed patched, patches dropped, heads, mlp.out)", all});
        }
        for (const Set& set : sets) {
            const std::string tag = "[interventions: " + set.name + "]";
            SweepState on;
            on.desc = tag + " applied";
            on.apply = [set, other](Session& s, UiState& ui) {
                if (set.iv.patch && (!s.patch_source() || s.patch_source()->path != other)) s.load_patch_source(other);
                Options o = s.options();
                o.iv = set.iv;
                s.set_options(o);
                ui.tab = Tab::Stage;
            };
            on.check = [set](const Session& s, const UiState&, const Probe& p, const SweepFail& fail) {
                if (!s.trace() || !same_interventions(s.shown_options().iv, set.iv))
                    fail("the trace on screen was not computed with the interventions asked for");
                else if (p.string("iv.list") != s.shown_options().iv.describe())
                    fail("the list above the tabs does not say what ran: '" + p.string("iv.list") + "'");
            };
            plan.states.push_back(on);
            const int T = int(plan.stages.size());
            for (int k = 0; k < T; ++k) {
                const int i = plan.stages[size_t(k)];
                const bool grad = k % 2 == 1;  // the gradient view says why there is none
                plan.add(tag + " stage#" + std::to_string(i) + (grad ? " gradient" : " value"), [i, grad, H](Session& s, UiState& ui) {
                    if (s.trace()) select_row(ui, *s.trace(), std::min(size_t(i), s.trace()->size() - 1));
                    ui.tab = Tab::Stage;
                    ui.show_grad = grad;
                    ui.head = i % std::max(1, H);
                });
            }
            for (const TabSpec& t : tab_table()) {
                const Tab tab = t.tab;
                plan.add(tag + " tab " + t.name, [tab](Session&, UiState& ui) {
                    ui.show_grad = false;
                    ui.tab = tab;
                });
            }
            for (Overlay ov : {Overlay::Cls, Overlay::Rollout, Overlay::Query})
                plan.add(tag + " overlay " + overlay_name(ov), [ov, N](Session&, UiState& ui) {
                    ui.tab = Tab::AttentionMaps;
                    ui.overlay = ov;
                    ui.overlay_layer = -1;
                    ui.query = ov == Overlay::Query ? N / 2 + 1 : 0;  // a dropped patch in the "patches dropped" set
                });
        }
        plan.add("[interventions] cleared", [](Session& s, UiState& ui) {
            Options o = s.options();
            o.iv = {};
            s.set_options(o);
            ui.overlay = Overlay::Cls;
            ui.query = 0;
            ui.tab = Tab::Stage;
        });
    }

    // The run the sweeps start from, when the session has it: the trace on screen without
    // interventions, else the Changes baseline (the same options without them).
    static const Trace* clean_trace(const Session& s) {
        const Options clean = s.shown_options().clean();
        if (s.trace() && s.trace()->options() == clean) return s.trace();
        if (s.result().base && s.result().base->options() == clean) return s.result().base.get();
        return nullptr;
    }

    void start(Session& s) {
        start_ = false;
        if (sw_ && sw_->job) sw_->job->cancel();
        auto sw = std::make_shared<Sweep>();
        sw->key = sweep_key(s);
        const Options clean = s.shown_options().clean();
        sw->clean_text = clean.describe();
        const auto model = s.shown_model();
        const auto x = std::make_shared<const Tensor3>(s.input());
        std::shared_ptr<const Trace> given;
        if (s.result().trace && s.result().trace->options() == clean) given = s.result().trace;
        else if (s.result().base && s.result().base->options() == clean) given = s.result().base;
        const Config& c = model->weights.cfg;
        const int total = c.depth * c.heads + run_dims(c, clean).N;
        auto out = sw->out;
        out->total = total;
        sw->job = jobs_.submit("what it uses: " + std::to_string(total) + " passes", job_threads(param_count(c)),
                               [model, x, clean, given, out, total](Job& job) {
            const auto t0 = std::chrono::steady_clock::now();
            job.set_total(total);
            SweepControl ctl;
            ctl.cancel = &job.cancel_flag();
            int base = 0;
            ctl.progress = [&](int done, int n) {
                job.set_progress(float(base + done) / float(total));
                job.set_step((base ? "occlusion " : "head importance ") + std::to_string(done) + " of " + std::to_string(n));
                return !job.cancelled();
            };
            out->heads = head_importance(model->weights, *x, clean, ctl, given.get());
            base = out->heads.passes;
            out->occ = occlusion(model->weights, *x, clean, ctl, given.get());
            out->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        });
        sw_ = std::move(sw);
    }

    void upload_input(const Trace& t, const Config& c) {
        const Array* in = t.find(StageId{StageKind::Input});
        if (!in || in->dimension() != 3) return;
        const Tensor3 img = denormalize(Tensor3(*in), c);
        const size_t C = img.shape(0), Hh = img.shape(1), W = img.shape(2);
        std::vector<unsigned char> rgba(Hh * W * 4);
        for (size_t i = 0; i < Hh * W; ++i) {
            for (size_t k = 0; k < 3; ++k)
                rgba[i * 4 + k] = (unsigned char)std::lround(std::clamp(img.data()[(C == 3 ? k : 0) * Hh * W + i], 0.f, 1.f) * 255);
            rgba[i * 4 + 3] = 255;
        }
        input_.upload_rgba(rgba.data(), int(W), int(Hh));
    }

    JobQueue& jobs_;
    std::shared_ptr<Sweep> sw_;
    bool start_ = false;   // Compute was pressed (large models do not start by themselves)
    CacheKeys keys_;
    Texture heads_tex_, input_;
    Texture tex_[3];
    GridRange range_[3];
};

}  // namespace

std::unique_ptr<TabView> make_what_it_uses_tab(JobQueue& jobs) { return std::make_unique<WhatItUsesTab>(jobs); }

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_uses() {
    using K = ProbeKind;
    return {
        {K::Rect, "uses.{occlusion|cls|rollout}", "the occlusion, cls attention and rollout maps"},
        {K::Number, "uses.{occlusion|cls|rollout}.argmax", "each map's hottest patch"},
        {K::Number, "uses.progress", "the sweeps' progress"},
        {K::String, "uses.{state|message|measure|heads.best}", "the What it uses tab's state and texts"},
        {K::String, "uses.{occlusion|cls|rollout}.message", "why a map is not drawn"},
    };
}

}  // namespace vit::app
