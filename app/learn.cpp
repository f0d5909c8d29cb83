// Learn mode (learn.h). The picture is laid out in "world" units: the picture's own size at zoom 1,
// so a step lays out for the room it has; the camera (the user's wheel and drag, or the step's own
// move) maps it to the screen. Grids are float textures coloured by the heatmap shader with a key in
// the narration panel; values are printed in their cells once a cell is large enough on screen.
#include "probe.h"
#include "learn_internal.h"

namespace vit::app {

using namespace learn_detail;

namespace {

// ---------------------------------------------------------------- lessons: what the trace says

struct LessonTruth {
    std::string answer;  // "" when this trace cannot answer it (a stage it needs is missing)
    std::string detail;
    std::vector<std::string> choices;  // choice-classes: the buttons (sorted: their order gives nothing away)
    std::string unanswerable;          // why this trace cannot answer it, when it says more than "a stage is missing"
    bool pending = false;              // its second pass is still running (a "what if")
};

const float* token_row(const Ctx& x, K k, int layer, int tok, int head = -1) {
    const Array* a = x.get(k, layer);
    if (!a) return nullptr;
    return head >= 0 ? row_of_stage(*a, tok, head) : row_of_stage(*a, tok);
}

LessonTruth lesson_truth(const Ctx& x, const Lesson& L) {
    LessonTruth t;
    const int tok = x.tok, h = x.head;
    const std::string f = L.fact;
    if (f == "cls-peak") {
        if (x.c.depth <= 0 || !x.c.cls_token || x.rd.dropped()) return t;
        const std::vector<float> m = cls_attention(x.t, x.c.depth - 1, -1);  // mean over heads, one value per patch
        const int best = peak_patch(m);
        if (best < 0) return t;
        t.answer = itos(best);
        t.detail = pct(m[size_t(best)]) + " of it (spread evenly, each patch would get " + pct(1.0 / x.rd.T) + ")";
    } else if (f == "score-peak") {
        const float* s = token_row(x, K::AttnScores, 0, tok, h);
        const Array* sc = x.get(K::AttnScores, 0);
        if (!s || !sc) return t;
        const int T = int(extent(*sc, 2)), best = argmax(s, T);
        t.answer = itos(best);
        t.detail = "score " + num(s[best], 3) + " (" + token_name(x, best) + "), the next largest " +
                   num(*std::max_element(s, s + T, [&](float a, float b) { return (a == s[best] ? -1e30f : a) < (b == s[best] ? -1e30f : b); }), 3);
    } else if (f == "patch-is-square") {
        const bool bug = x.t.options().bug_reshape_patches;
        t.answer = bug ? "no" : "yes";
        t.detail = bug ? "No: the BUG switch reshapes the image's rows into patch rows, so a row holds pieces of several image rows: not a patch."
                       : "Yes: each row is one " + itos(x.c.patch) + " x " + itos(x.c.patch) + " square, its " + itos(x.c.channels) +
                             " channels one after the other (unfold, not a plain reshape).";
    } else if (f == "pos-vs-patches") {
        const Array* tk = x.get(K::Tokens);
        const Array* pos = x.get(K::PosEmbed);
        if (!tk || !pos) return t;
        const int T0 = rows_of(*tk), D = cols_of(*tk), pr = rows_of(*pos);
        const double mt = mean_abs(tk->data() + size_t(T0 - pr) * D, size_t(pr) * D), mp = mean_abs(pos->data(), pos->size());
        t.answer = mp > mt ? "larger" : "smaller";
        t.detail = "mean |value| " + num(mp, 3) + " for the position rows against " + num(mt, 3) + " for the patch rows";
    } else if (f == "ln-normalized-mean-zero" || f == "ln-out-mean-zero") {
        const float* r = token_row(x, f == "ln-out-mean-zero" ? K::Ln1Out : K::Ln1Normalized, 0, tok);
        const Array* a = x.get(K::Ln1Out, 0);
        if (!r || !a) return t;
        const int D = cols_of(*a);
        double m = 0, s2 = 0;
        for (int i = 0; i < D; ++i) m += r[i];
        m /= D;
        for (int i = 0; i < D; ++i) s2 += (r[i] - m) * (r[i] - m);
        const double sd = std::sqrt(s2 / D);
        const bool zero = std::fabs(m) <= 0.01 * std::max(sd, 1e-12);
        t.answer = zero ? "yes" : "no";
        if (f == "ln-normalized-mean-zero")
            t.detail = std::string(zero ? "Yes" : "No") + ": its mean is " + num(m, 3) + " (std " + num(sd, 3) +
                       "); subtracting the mean makes it 0 up to float rounding.";
        else
            t.detail = std::string(zero ? "Yes" : "No") + ": its mean is " + num(m, 3) + " (std " + num(sd, 3) + "). " +
                       (x.t.options().affine ? "gamma scales each number and beta shifts it, each channel by its own amount, so the mean moves."
                                             : "elementwise_affine is off: the output is the normalised row itself.");
    } else if (f == "softmax-sums-one") {
        const float* a = token_row(x, K::AttnPattern, 0, tok, h);
        const Array* pt = x.get(K::AttnPattern, 0);
        if (!a || !pt) return t;
        const double s = std::accumulate(a, a + extent(*pt, 2), 0.0);
        t.answer = std::fabs(s - 1) < 1e-4 ? "yes" : "no";
        t.detail = std::string(t.answer == "yes" ? "Yes" : "No") + ": the row adds up to " + num(s, 6) +
                   (x.t.options().bug_scale_after_softmax ? " (the BUG divides the weights after the softmax)" : " (float rounding aside)") + ".";
    } else if (f == "weights-top3-half") {
        const float* a = token_row(x, K::AttnPattern, 0, tok, h);
        const Array* pt = x.get(K::AttnPattern, 0);
        if (!a || !pt) return t;
        std::vector<float> v(a, a + extent(*pt, 2));
        std::sort(v.rbegin(), v.rend());
        const double share = double(v[0]) + (v.size() > 1 ? v[1] : 0) + (v.size() > 2 ? v[2] : 0);
        t.answer = share > 0.5 ? "yes" : "no";
        t.detail = std::string(share > 0.5 ? "Yes" : "No") + ": they make " + pct(share) + " of it (the largest " + pct(v[0]) + ")" +
                   (share > 0.5 ? ": this head looks at a few tokens." : ": this head spreads its attention.");
    } else if (f == "attn-small-change") {
        const float* in = nullptr;
        const StageInfo& rm = x.t.info(StageId{K::ResidMid, 0});
        const StageId add = x.t.has(StageId{K::Ls1, 0}) ? StageId{K::Ls1, 0} : StageId{K::AttnOut, 0};
        for (const StageId& id : rm.from)
            if (id != add && x.t.find(id)) in = row_of_stage(*x.t.find(id), tok);
        const float* ao = x.t.find(add) ? row_of_stage(*x.t.find(add), tok) : nullptr;
        if (!in || !ao) return t;
        const int D = x.c.width;
        const double r = norm2(ao, size_t(D)) / std::max(1e-12, norm2(in, size_t(D)));
        t.answer = r < 0.5 ? "yes" : "no";
        t.detail = std::string(r < 0.5 ? "Yes" : "No") + ": |attention's output| / |stream| = " + num(r, 3) + ".";
    } else if (f == "gelu-negative") {
        const float* r = token_row(x, K::MlpPost, 0, tok);
        const Array* a = x.get(K::MlpPost, 0);
        if (!r || !a) return t;
        const int M = cols_of(*a);
        const float mn = *std::min_element(r, r + M);
        int neg = 0;
        for (int i = 0; i < M; ++i) neg += r[i] < 0;
        t.answer = mn < 0 ? "yes" : "no";
        t.detail = std::string(mn < 0 ? "Yes" : "No") + ": " + itos(neg) + " of the " + itos(M) + " are negative, the smallest " + num(mn, 4) +
                   (x.c.act == Act::SwiGlu ? "." : ": GELU(x) = x * Phi(x) dips below 0 for negative x (to about -0.17), unlike ReLU.");
    } else if (f == "depth-norm") {
        const Array* a = x.get(K::ResidPost, 0);
        const Array* b = x.get(K::ResidPost, x.c.depth - 1);
        if (!a || !b || x.c.depth < 2) return t;
        const double n0 = norm2(row_of_stage(*a, tok), size_t(cols_of(*a))), n1 = norm2(row_of_stage(*b, tok), size_t(cols_of(*b)));
        t.answer = n1 > n0 ? "grows" : "shrinks";
        t.detail = "|x| " + num(n0, 2) + " after block 0, " + num(n1, 2) + " after block " + itos(x.c.depth - 1);
    } else if (is_what_if(f)) {  // a second pass with one thing changed: a job, once per trace
        LearnView::WhatIfRun& w = x.lv.what_ifs[f];
        if (w.version != x.version || !w.out) {
            if (w.job) w.job->cancel();
            w.version = x.version;
            w.job.reset();
            w.out = std::make_shared<WhatIf>();
            WhatIfPass pass = prepare_what_if(x.v.s, x.t, f);
            if (!pass.model || !x.lv.jobs) {
                *w.out = run_what_if(pass);
            } else {
                const int threads = job_threads(param_count(pass.model->weights.cfg));
                w.job = x.lv.jobs->submit("what if: " + f, threads, [pass = std::move(pass), out = w.out](Job& job) {
                    *out = run_what_if(pass, &job.cancel_flag());
                });
            }
        }
        if (w.job && !w.job->finished()) {
            t.pending = true;
        } else if (w.job && w.job->state() != Job::State::Done) {
            t.unanswerable = "The second pass did not finish: " + (w.job->error().empty() ? std::string("cancelled") : w.job->error());
        } else {
            t.answer = w.out->answer;
            t.detail = w.out->detail;
            if (t.answer.empty()) t.unanswerable = w.out->detail;
        }
    } else if (f == "top-class") {
        const Array* pr = x.get(K::Probs);
        if (!pr) return t;
        const int Kc = int(pr->size());
        const std::vector<std::string> names = class_labels(x.c, size_t(Kc));
        std::vector<int> idx(static_cast<size_t>(Kc));
        std::iota(idx.begin(), idx.end(), 0);
        std::partial_sort(idx.begin(), idx.begin() + std::min(3, Kc), idx.end(), [&](int i, int j) { return (*pr)(size_t(i)) > (*pr)(size_t(j)); });
        t.answer = names[size_t(idx[0])];
        for (int i = 0; i < std::min(3, Kc); ++i) t.choices.push_back(names[size_t(idx[size_t(i)])]);
        std::sort(t.choices.begin(), t.choices.end());
        t.detail = "The model says " + names[size_t(idx[0])] + " (" + pct((*pr)(size_t(idx[0]))) + ")" +
                   (Kc > 1 ? ", then " + names[size_t(idx[1])] + " (" + pct((*pr)(size_t(idx[1]))) + ")" : std::string()) +
                   (x.v.s.scene_truth() ? "; the scene holds a " + x.v.s.scene_truth()->cls + "." : ".");
    }
    return t;
}

std::string fill(std::string s, const LessonTruth& t, const std::string& shown_truth) {
    for (auto [k, v] : {std::pair<std::string, std::string>{"{truth}", shown_truth}, {"{detail}", t.detail}})
        for (size_t at; (at = s.find(k)) != std::string::npos;) s.replace(at, k.size(), v);
    return s;
}

// ---------------------------------------------------------------- the window

const ImGuiWindowFlags kFixed = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse |
                                ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoBringToFrontOnFocus;

void go_step(UiState& ui, int k, int n) {
    ui.learn_step = std::clamp(k, 0, std::max(0, n - 1));
    ui.learn_time = 0;
    ui.learn_zoom = 1;
    ui.learn_fx = ui.learn_fy = 0.5f;
}

// A lesson as this frame shows it: its buttons, the trace's answer, the learner's, the verdict and why.
struct LessonView {
    int index;
    std::vector<std::string> choices;
    std::string truth, given, verdict, why, unused;
};

// What one frame of Learn mode shares between its three windows.
struct Frame {
    std::vector<LearnStepInfo> steps;
    std::vector<int> tour;                 // the tour's lessons (indices into the lessons)
    std::string narration, title, torch;   // the step's texts, from the picture for the narration panel
    std::vector<LessonView> lesson_views;  // the lessons of the step shown
};

// The controls along the top: play, step, speed, the tour's lessons, the image and the model. Returns their height.
float draw_controls(ViewCtx& v, LearnView& lv, Frame& f, float W, float H) {
    UiState& ui = v.ui;
    Probe& pr = v.probe;
    const int n = int(f.steps.size());
    auto go = [&](int k) { go_step(ui, k, n); };
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSizeConstraints(ImVec2(W, 0), ImVec2(W, H * 0.3f));
    ImGui::Begin("learn controls", nullptr, (kFixed & ~ImGuiWindowFlags_NoResize) | ImGuiWindowFlags_AlwaysAutoResize);
    {
        Flow flow(W - 2 * ImGui::GetStyle().WindowPadding.x);
        flow.next(Flow::button_w("Workbench (L)"));
        if (ImGui::Button("Workbench (L)")) ui.learn = false;
        flow.next(Flow::button_w("< Back"), true);
        if (ImGui::Button("< Back")) go(ui.learn_step - 1);
        const char* play = ui.learn_playing ? "Pause (Space)" : "Play (Space)";
        flow.next(Flow::button_w("Pause (Space)"));
        if (ImGui::Button(play, ImVec2(Flow::button_w("Pause (Space)"), 0))) {  // one width for both labels
            if (!ui.learn_playing && ui.learn_time >= kLearnStepSeconds && ui.learn_step + 1 >= n) go(0);
            ui.learn_playing = !ui.learn_playing;
        }
        flow.next(Flow::button_w("Next >"));
        if (ImGui::Button("Next >")) go(ui.learn_step + 1);
        // a combo as wide as its widest entry (never a cut title), within a third of the window
        const float arrow = ImGui::GetFrameHeight() + 2 * ImGui::GetStyle().FramePadding.x + 4;
        auto combo_w = [&](float widest) { return std::min(widest + arrow, std::max(200.f, W / 3)); };
        float widest = 0;
        for (int i = 0; i < n; ++i)
            widest = std::max(widest, ImGui::CalcTextSize((itos(i + 1) + "/" + itos(n) + " " + f.steps[size_t(i)].title).c_str()).x);
        const float step_w = combo_w(std::max(widest, ImGui::CalcTextSize("no steps").x));
        flow.next(Flow::labelled_w(step_w, "step"));
        ImGui::SetNextItemWidth(step_w);
        const std::string cur = n ? itos(ui.learn_step + 1) + "/" + itos(n) + " " + f.steps[size_t(ui.learn_step)].title : "no steps";
        if (ImGui::BeginCombo("step", cur.c_str())) {
            for (int i = 0; i < n; ++i)
                if (ImGui::Selectable((itos(i + 1) + ". " + f.steps[size_t(i)].title).c_str(), i == ui.learn_step)) go(i);
            ImGui::EndCombo();
        }
        flow.next(Flow::labelled_w(120, "speed"));
        ImGui::SetNextItemWidth(120);
        const char* speeds[] = {"0.5x", "1x", "2x"};
        int sp = ui.learn_speed < 0.75f ? 0 : ui.learn_speed > 1.5f ? 2 : 1;
        if (ImGui::Combo("speed", &sp, speeds, 3)) ui.learn_speed = sp == 0 ? 0.5f : sp == 2 ? 2.f : 1.f;
        // the tour of lessons: pick one, or go to the next (T)
        if (!f.tour.empty()) {
            const int nt = int(f.tour.size());
            auto label = [&](int i) {
                return itos(i + 1) + "/" + itos(nt) + " " + lv.lessons[size_t(f.tour[size_t(i)])].title +
                       (lv.answers.count(f.tour[size_t(i)]) ? " (answered)" : "");
            };
            const std::string cur = ui.lesson >= 0 ? label(ui.lesson) : itos(nt) + " lessons: predict, then check";
            float lw = ImGui::CalcTextSize(cur.c_str()).x;
            for (int i = 0; i < nt; ++i) lw = std::max(lw, ImGui::CalcTextSize(label(i).c_str()).x);
            const float lesson_w = combo_w(lw);
            flow.next(Flow::labelled_w(lesson_w, "lesson"), true);
            ImGui::SetNextItemWidth(lesson_w);
            if (ImGui::BeginCombo("lesson", cur.c_str())) {
                for (int i = 0; i < nt; ++i)
                    if (ImGui::Selectable(label(i).c_str(), i == ui.lesson)) { ui.lesson = i; ui.lesson_go = true; }
                ImGui::EndCombo();
            }
            const char* next = ui.lesson < 0 ? "First lesson (T)" : "Next lesson (T)";
            const float next_w = std::max(Flow::button_w("First lesson (T)"), Flow::button_w("Next lesson (T)"));
            flow.next(next_w);
            ImGui::BeginDisabled(ui.lesson + 1 >= nt);
            if (ImGui::Button(next, ImVec2(next_w, 0))) { ui.lesson = std::min(ui.lesson + 1, nt - 1); ui.lesson_go = true; }
            ImGui::EndDisabled();
            if (ui.lesson >= 0) {
                const Lesson& L = lv.lessons[size_t(f.tour[size_t(ui.lesson)])];
                pr.numbers["tour.step"] = ui.lesson;
                pr.strings["tour.id"] = L.step;
                pr.strings["tour.title"] = L.title;
            }
            pr.numbers["tour.steps"] = nt;
        }
        // the image and the model
        if (lv.samples.empty()) lv.samples = sample_images();
        const std::string img = v.s.has_image() ? std::filesystem::path(v.s.image_path()).filename().string() : "no image";
        const float img_w = Flow::combo_w(img, 220, 320);
        flow.next(Flow::labelled_w(img_w, "image"), true);
        ImGui::SetNextItemWidth(img_w);
        if (ImGui::BeginCombo("image", Flow::combo_preview(img, img_w).c_str())) {
            if (v.s.model_spec() == "scenes" && ImGui::Selectable("New test scene")) v.s.new_scene();
            for (const std::string& p : lv.samples)
                if (ImGui::Selectable(std::filesystem::path(p).filename().string().c_str(), p == v.s.image_path())) v.s.load_image(p);
            ImGui::EndCombo();
        }
        const std::string model = v.s.model_spec();
        const float model_w = Flow::combo_w(model, 200, 320);
        flow.next(Flow::labelled_w(model_w, "model"));
        ImGui::SetNextItemWidth(model_w);
        if (ImGui::BeginCombo("model", Flow::combo_preview(model, model_w).c_str())) {
            for (const char* m : {"scenes", "default", "vit-ti16", "vit-b16", "dinov2-s14-reg", "clip-b32", "siglip-b16"})
                if (ImGui::Selectable(m, model == m)) v.s.begin_load_model(m, 0);
            ImGui::EndCombo();
        }
    }
    const float top = ImGui::GetWindowSize().y;
    pr.rects["learn.controls"] = Rect{0, 0, W, top};
    ImGui::End();
    return top;
}

// The picture: the step drawn from the trace, with the camera (wheel, drag, + / -), the clicks that answer a
// lesson or open a value in the workbench, and the lessons of the step checked against the trace.
void draw_picture(ViewCtx& v, LearnView& lv, Frame& f, const Rect& picr) {
    UiState& ui = v.ui;
    Probe& pr = v.probe;
    const int n = int(f.steps.size());
    std::vector<int> step_lessons;
    ImGui::SetNextWindowPos(ImVec2(picr.x, picr.y));
    ImGui::SetNextWindowSize(ImVec2(picr.w, picr.h));
    ImGui::Begin("learn picture", nullptr, kFixed | ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
    const ImVec2 c0 = ImGui::GetCursorScreenPos(), av = ImGui::GetContentRegionAvail();
    const Rect pic{c0.x, c0.y, av.x, av.y};
    pr.rects["learn.picture"] = pic;
    pr.numbers["learn.steps"] = n;
    std::string step_ids;
    for (auto& s : f.steps) step_ids += (step_ids.empty() ? "" : ",") + s.id;
    pr.strings["learn.step_ids"] = step_ids;
    const Trace* t = v.s.trace();
    pr.numbers["learn.lessons"] = double(lv.lessons.size());
    lv.keys.clear();
    if (!t || !n) {
        if (!DrawWorking(v))
            say_why(v, "learn.message", v.s.has_image() ? "The model has not run yet: Learn mode shows the forward pass once it has."
                                                         : "No image is loaded, so there is no forward pass to show: choose one in the image menu above.");
    } else {
        // the camera: the wheel zooms about the mouse, a drag pans
        ImGuiIO& io = ImGui::GetIO();
        const bool hovered = ImGui::IsWindowHovered();
        if (hovered && io.MouseWheel != 0) {
            const float z0 = ui.learn_zoom, z1 = std::clamp(z0 * std::pow(1.2f, io.MouseWheel), 0.5f, 400.f);
            const ImVec2 m = io.MousePos;
            // keep the world point under the mouse in place
            const float wx = ui.learn_fx * pic.w + (m.x - pic.x - pic.w * 0.5f) / z0, wy = ui.learn_fy * pic.h + (m.y - pic.y - pic.h * 0.5f) / z0;
            ui.learn_fx = (wx - (m.x - pic.x - pic.w * 0.5f) / z1) / pic.w;
            ui.learn_fy = (wy - (m.y - pic.y - pic.h * 0.5f) / z1) / pic.h;
            ui.learn_zoom = z1;
        }
        if (hovered && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 3)) lv.dragging = true;
        if (lv.dragging && ImGui::IsMouseDown(ImGuiMouseButton_Left)) {
            ui.learn_fx -= io.MouseDelta.x / (pic.w * ui.learn_zoom);
            ui.learn_fy -= io.MouseDelta.y / (pic.h * ui.learn_zoom);
        }
        const bool click = hovered && ImGui::IsMouseReleased(ImGuiMouseButton_Left) && !lv.dragging;
        if (!ImGui::IsMouseDown(ImGuiMouseButton_Left) && !ImGui::IsMouseReleased(ImGuiMouseButton_Left)) lv.dragging = false;
        if (ImGui::IsMouseReleased(ImGuiMouseButton_Left)) lv.dragging = false;

        const Config& c = v.s.shown_config();
        const auto model = v.s.shown_model();
        if (!lv.input.valid() || lv.input_key != v.s.version()) {
            upload_model_input(lv.input, v.s);
            lv.input_key = v.s.version();
        }
        ImDrawList* dl = ImGui::GetWindowDrawList();
        dl->PushClipRect(ImVec2(pic.x, pic.y), ImVec2(pic.x + pic.w, pic.y + pic.h), true);
        Ctx x{v, lv, *t, c, model->weights, t->table().dims(), dl, pic};
        x.zoom = ui.learn_zoom;
        x.focus = ImVec2(ui.learn_fx, ui.learn_fy);
        x.own_cam = ui.learn_zoom == 1 && ui.learn_fx == 0.5f && ui.learn_fy == 0.5f;
        x.p = clamp01(ui.learn_time / kLearnStepSeconds);
        x.version = v.s.version();
        x.clicked = click;
        const RunDims& rd = x.rd;
        x.tok = ui.learn_token >= 0 && ui.learn_token < rd.T ? ui.learn_token : (c.cls_token ? 0 : rd.prefix);
        x.head = std::clamp(ui.head, 0, std::max(0, c.heads - 1));
        x.patch = followed_patch(v, *t, c, x.why_patch);
        const LearnStepInfo& st = f.steps[size_t(ui.learn_step)];
        // the lessons on this step; the first unanswered one that waits for a click takes the click
        if (lv.answers_version != v.s.version()) {
            lv.answers.clear();
            lv.answers_version = v.s.version();
        }
        for (size_t i = 0; i < lv.lessons.size(); ++i)
            if (lv.lessons[i].step == st.id) step_lessons.push_back(int(i));
        int waiting = -1;
        for (int i : step_lessons)
            if (!lv.answers.count(i)) { waiting = i; break; }
        if (waiting >= 0 && !lv.pending_answer.empty()) {
            // --learn-answer with --tour: the tour's lesson takes it when it is on this step
            const int tl = ui.lesson >= 0 && ui.lesson < int(f.tour.size()) ? f.tour[size_t(ui.lesson)] : -1;
            if (tl >= 0 && lv.lessons[size_t(tl)].step == st.id && !lv.answers.count(tl)) waiting = tl;
            lv.answers[waiting] = lv.pending_answer;
            lv.pending_answer.clear();
            waiting = -1;
            for (int i : step_lessons)
                if (!lv.answers.count(i)) { waiting = i; break; }
        }
        const std::string& wk = waiting >= 0 ? lv.lessons[size_t(waiting)].kind : std::string();
        x.capture = wk == "click-patch" || wk == "click-key";
        draw_step(x, st.id);
        if (x.capture && !x.pick.name.empty()) {
            if (wk == "click-patch" && x.pick.name == "image") lv.answers[waiting] = itos(x.pick.r * rd.gw + x.pick.c);
            if (wk == "click-key" && x.pick.name == "K") lv.answers[waiting] = itos(x.pick.r);
        }
        for (int i : step_lessons) {
            LessonTruth tr = lesson_truth(x, lv.lessons[size_t(i)]);
            const Lesson& L = lv.lessons[size_t(i)];
            auto show = [&](const std::string& a) {
                if (L.kind == "click-patch" && !a.empty()) return token_name(x, rd.prefix + std::atoi(a.c_str()));
                if (L.kind == "click-key" && !a.empty()) return token_name(x, std::atoi(a.c_str()));
                return a;
            };
            LessonView lvw{i, L.kind == "choice-classes" ? tr.choices : L.choices, show(tr.answer), "", "", "", ""};
            if (tr.answer.empty() && !tr.pending)
                lvw.why = tr.unanswerable.empty() ? "This trace cannot answer it (a stage it needs is missing)." : tr.unanswerable;
            auto it = lv.answers.find(i);
            if (it != lv.answers.end() && !tr.answer.empty()) {
                lvw.given = show(it->second);
                bool close = false;
                if (L.kind == "click-patch") {
                    const int a = std::atoi(it->second.c_str()), b = std::atoi(tr.answer.c_str());
                    close = std::abs(a / rd.gw - b / rd.gw) <= 1 && std::abs(a % rd.gw - b % rd.gw) <= 1;
                }
                lvw.verdict = it->second == tr.answer ? "Right." : close ? "Close: next to it." : "Not quite.";
                lvw.why = fill(L.why, tr, show(tr.answer));
            } else if (it != lv.answers.end() && tr.pending) {
                lvw.given = show(it->second);  // predicted while the second pass runs: the answer follows
                lvw.why = "Running the model a second time to check...";
            }
            f.lesson_views.push_back(lvw);
        }
        dl->PopClipRect();
        if (!x.tooltip.empty() && v.hover) ImGui::SetTooltip("%s", x.tooltip.c_str());
        f.narration = x.narration;
        f.title = st.title;
        if (x.torch && t->table().has(*x.torch)) f.torch = t->info(*x.torch).torch;
        pr.strings["learn.id"] = st.id;
        pr.numbers["learn.step"] = ui.learn_step;
        pr.numbers["learn.time"] = ui.learn_time;
        pr.numbers["learn.phase"] = x.p;
        pr.numbers["learn.zoom"] = x.zoom;
        pr.numbers["learn.value_texts"] = x.value_texts;
        pr.numbers["learn.token"] = x.tok;
        pr.numbers["learn.drawn"] = x.drawn;
        if (f.narration.empty()) f.narration = "This step has nothing to show for this trace (a stage it reads is missing).";
    }
    ImGui::End();

}

// The narration beside the picture: the step's title and text, its lessons, the PyTorch line and the keys.
void draw_narration(ViewCtx& v, LearnView& lv, Frame& f, const Rect& nr) {
    UiState& ui = v.ui;
    Probe& pr = v.probe;
    const int n = int(f.steps.size());
    ImGui::SetNextWindowPos(ImVec2(nr.x, nr.y));
    ImGui::SetNextWindowSize(ImVec2(nr.w, nr.h));
    ImGui::Begin("learn narration", nullptr, kFixed);
    pr.rects["learn.narration"] = nr;
    if (n) {
        ImGui::TextDisabled("Step %d of %d", ui.learn_step + 1, n);
        ImGui::SetWindowFontScale(1.3f);
        TextWrappedWords(pr, "learn.title", f.title);
        ImGui::SetWindowFontScale(1.f);
        ImGui::ProgressBar(clamp01(ui.learn_time / kLearnStepSeconds), ImVec2(-1, 4), "");
        ImGui::Spacing();
        TextWrappedWords(pr, "learn.narration", f.narration);
        // the lessons of this step: predict, then check
        for (const LessonView& lw : f.lesson_views) {
            const Lesson& L = lv.lessons[size_t(lw.index)];
            ImGui::PushID(lw.index);
            ImGui::Spacing();
            ImGui::Separator();
            const ImVec4 gold(1.f, 0.85f, 0.3f, 1.f);
            const auto in_tour = std::find(f.tour.begin(), f.tour.end(), lw.index);
            if (in_tour != f.tour.end()) ImGui::TextDisabled("Lesson %d of %d", int(in_tour - f.tour.begin()) + 1, int(f.tour.size()));
            TextWrappedWords(pr, "learn.lesson.title", "Predict: " + L.title, &gold);
            pr.strings["learn.lesson.titles"] += (pr.strings["learn.lesson.titles"].empty() ? "" : "|") + L.title;
            TextWrappedWords(pr, "learn.lesson.ask", L.ask);
            if (lw.given.empty() && lw.why.empty()) {
                if (L.kind == "click-patch" || L.kind == "click-key") {
                    TextWrappedWords(pr, "learn.lesson.hint", L.kind == "click-patch" ? "(click a patch on the image)" : "(click a key row)", nullptr, true);
                } else {
                    Flow flow;
                    for (const std::string& c : lw.choices) {
                        flow.next(Flow::button_w(c.c_str()));
                        if (ImGui::Button(c.c_str())) lv.answers[lw.index] = c;
                    }
                }
            } else {
                if (!lw.given.empty()) {
                    const ImVec4 col = lw.verdict == "Right." ? ImVec4(0.5f, 1.f, 0.5f, 1.f) : ImVec4(1.f, 0.6f, 0.4f, 1.f);
                    TextWrappedWords(pr, "learn.lesson.verdict",
                                     lw.verdict.empty() ? "You: " + lw.given + "." : "You: " + lw.given + ". " + lw.verdict + " The numbers say: " + lw.truth + ".",
                                     lw.verdict.empty() ? nullptr : &col);
                }
                TextWrappedWords(pr, "learn.lesson.why", lw.why);
                if (!lw.given.empty() && ImGui::SmallButton("Ask again")) lv.answers.erase(lw.index);
            }
            if (lw.index == (f.lesson_views.empty() ? -1 : f.lesson_views.front().index)) {
                pr.strings["learn.lesson.title"] = L.title;
                pr.strings["learn.lesson.ask"] = L.ask;
                pr.strings["learn.lesson.answer"] = lw.given;
                pr.strings["learn.lesson.truth"] = lw.truth;
                pr.strings["learn.lesson.verdict"] = lw.verdict;
                pr.strings["learn.lesson.why"] = lw.why;
            }
            pr.strings["learn.lesson.truths"] += (pr.strings["learn.lesson.truths"].empty() ? "" : "|") + lw.truth;
            pr.strings["learn.lesson.verdicts"] += (lw.index == f.lesson_views.front().index ? "" : "|") + lw.verdict;
            pr.strings["learn.lesson.whys"] += (lw.index == f.lesson_views.front().index ? "" : "|") + lw.why;
            ImGui::PopID();
        }
        if (!lv.lessons_error.empty()) {
            const ImVec4 warn(kWarnRGBA[0], kWarnRGBA[1], kWarnRGBA[2], kWarnRGBA[3]);
            TextWrappedWords(pr, "learn.lessons_error", "Lessons not read: " + lv.lessons_error, &warn);
            pr.strings["learn.lessons_error"] = lv.lessons_error;
        }
        if (!f.torch.empty()) {
            ImGui::Spacing();
            ImGui::TextDisabled("In PyTorch:");
            const ImVec4 code(0.6f, 0.85f, 1.f, 1.f);
            TextWrappedWords(pr, "learn.torch", f.torch, &code);
        }
        if (!lv.keys.empty()) {
            ImGui::Spacing();
            ImGui::TextDisabled("Colour keys:");
            std::string names;
            const float kw = std::max(120.f, ImGui::GetContentRegionAvail().x - 8);
            for (auto& [name, cm] : lv.keys) {
                TextWrappedWords(pr, "learn.keys", name);
                ImGui::PushID(names.c_str());
                ColorKey(v, "learn", cm, kw);
                ImGui::PopID();
                names += (names.empty() ? "" : "\n") + name;
            }
            pr.strings["learn.keys"] = names;
            pr.numbers["learn.keys"] = double(lv.keys.size());
        }
        ImGui::Spacing();
        TextWrappedWords(pr, "learn.help", "Wheel or + / -: zoom (numbers show in large cells), drag: pan, 0: reset; click a value: open it in the workbench. T: the next lesson.",
                         nullptr, true);
    }
    ImGui::End();
}

}  // namespace


bool LearnView::working() const {
    return std::any_of(what_ifs.begin(), what_ifs.end(), [](const auto& w) { return w.second.job && !w.second.job->finished(); });
}

std::vector<std::string> learn_step_ids() {
    std::vector<std::string> v;
    for (const StepDef& d : step_defs()) v.push_back(d.id);
    return v;
}

std::vector<LearnStepInfo> learn_steps(const StageTable& table, const Config& c) {
    std::vector<LearnStepInfo> out;
    for (const StepDef& d : step_defs())
        if (d.has(table, c)) out.push_back({d.id, d.title});
    return out;
}

std::vector<LearnStepInfo> learn_steps(const Session& s) {
    const Trace* t = s.trace();
    if (!t || t->empty()) return {};
    return learn_steps(t->table(), s.shown_config());
}

void HandleLearnKeys(ViewCtx& v) {
    if (ImGui::GetIO().WantTextInput) return;
    UiState& ui = v.ui;
    if (ImGui::IsKeyPressed(GLFW_KEY_L, false)) {
        ui.learn = !ui.learn;
        v.notice = ui.learn ? "Learn mode (L: back to the workbench)" : "the workbench (L: Learn mode)";
    }
    // T: the tour of lessons. From the workbench: Learn mode at the tour's lesson (the first one the first
    // time); in Learn mode: the next lesson (Shift+T: the one before).
    if (ImGui::IsKeyPressed(GLFW_KEY_T, false)) {
        if (!ui.learn) {
            ui.learn = true;
            ui.lesson = std::max(ui.lesson, 0);
        } else {
            ui.lesson = std::max(0, ui.lesson + (ImGui::GetIO().KeyShift ? -1 : 1));
        }
        ui.lesson_go = true;
    }
    if (!ui.learn) return;
    const int n = int(learn_steps(v.s).size());
    auto go = [&](int k) {
        ui.learn_step = std::clamp(k, 0, std::max(0, n - 1));
        ui.learn_time = 0;
        ui.learn_zoom = 1;
        ui.learn_fx = ui.learn_fy = 0.5f;
    };
    if (ImGui::IsKeyPressed(GLFW_KEY_SPACE, false)) ui.learn_playing = !ui.learn_playing;
    if (ImGui::IsKeyPressed(GLFW_KEY_RIGHT) || ImGui::IsKeyPressed(GLFW_KEY_N)) go(ui.learn_step + 1);
    if (ImGui::IsKeyPressed(GLFW_KEY_LEFT) || ImGui::IsKeyPressed(GLFW_KEY_P)) go(ui.learn_step - 1);
    if (ImGui::IsKeyPressed(GLFW_KEY_HOME)) go(0);
    if (ImGui::IsKeyPressed(GLFW_KEY_0)) { ui.learn_zoom = 1; ui.learn_fx = ui.learn_fy = 0.5f; }
    // + / -: zoom about the picture's centre (for a trackpad without a wheel: GLFW delivers no pinch gesture)
    if (ImGui::IsKeyPressed(GLFW_KEY_EQUAL) || ImGui::IsKeyPressed(GLFW_KEY_KP_ADD)) ui.learn_zoom = std::min(400.f, ui.learn_zoom * 1.25f);
    if (ImGui::IsKeyPressed(GLFW_KEY_MINUS) || ImGui::IsKeyPressed(GLFW_KEY_KP_SUBTRACT)) ui.learn_zoom = std::max(0.5f, ui.learn_zoom / 1.25f);
}

void DrawLearn(ViewCtx& v, LearnView& lv, float W, float H) {
    UiState& ui = v.ui;
    Probe& pr = v.probe;
    Frame f;
    f.steps = learn_steps(v.s);
    const std::vector<LearnStepInfo>& steps = f.steps;
    const int n = int(steps.size());
    if (!lv.lessons_loaded) {
        lv.lessons_loaded = true;
        try {
            lv.lessons = load_lessons(lv.lessons_path.empty() ? default_lessons_path() : lv.lessons_path);
        } catch (const std::exception& e) {
            lv.lessons_error = e.what();
        }
    }
    // the tour: the lessons this model has; T and --tour put its lesson's step on screen, at the end of its
    // animation (the state the question is about), paused for the answer
    f.tour = tour_lessons(lv.lessons, steps);
    const std::vector<int>& tour = f.tour;
    if (ui.lesson >= 0 && !tour.empty()) ui.lesson = std::min(ui.lesson, int(tour.size()) - 1);
    if (ui.lesson_go && n && !tour.empty()) {
        ui.lesson_go = false;
        const std::string& at = lv.lessons[size_t(tour[size_t(ui.lesson)])].step;
        for (int i = 0; i < n; ++i)
            if (steps[size_t(i)].id == at) ui.learn_step = i;
        ui.learn_time = kLearnStepSeconds;
        ui.learn_playing = false;
        ui.learn_zoom = 1;
        ui.learn_fx = ui.learn_fy = 0.5f;
    }
    if (n) ui.learn_step = std::clamp(ui.learn_step, 0, n - 1);
    // time: the animation runs while playing, then the next step follows after a pause
    const float dur = kLearnStepSeconds;
    if (ui.learn_playing && n) {
        ui.learn_time += std::min(ImGui::GetIO().DeltaTime, 0.1f) * ui.learn_speed;
        if (ui.learn_time > dur + kLearnHoldSeconds) {
            if (ui.learn_step + 1 < n) {
                ++ui.learn_step;
                ui.learn_time = 0;
                ui.learn_zoom = 1;
                ui.learn_fx = ui.learn_fy = 0.5f;
            } else {
                ui.learn_playing = false;
                ui.learn_time = dur;
            }
        }
    }

    const float top = draw_controls(v, lv, f, W, H);
    const float bottom = status_bar_height();
    const float nw = std::clamp(0.3f * W, 320.f, 560.f);
    const Rect picr{0, top, W - nw, H - top - bottom};

    draw_picture(v, lv, f, picr);
    draw_narration(v, lv, f, Rect{W - nw, top, nw, picr.h});
    pr.strings["learn.title"] = f.title;
    pr.strings["learn.narration"] = f.narration;
    pr.strings["learn.torch"] = f.torch;

    DrawStatusWindow(v, W, H);
    DrawErrorPanel(v);
}

// The probe keys this view writes (probe.h): what the sweep's rules and the GUI tests read, declared here
// beside the view and gathered into the schema by probe.cpp's list of views.
std::vector<ProbeKey> probe_keys_learn() {
    using K = ProbeKind;
    return {
        {K::Number, "tour.{step|steps}", "the tour of lessons (Learn mode, lessons.h): the lesson it is at, how many this model has"},
        {K::String, "tour.{id|title}", "the tour's lesson: the Learn step it sits on, its title"},
        {K::Rect, "learn.{picture|narration|controls|key}", "Learn mode's picture, narration panel and controls"},
        {K::Rect, "learn.grid.<what>", "a grid Learn mode drew: its key's name, '#', the how-manieth of that name this frame"},
        {K::Number, "learn.{steps|step|time|phase|zoom|value_texts|keys|token|head|patch|drawn}",
         "Learn mode: its steps, the step and moment shown, the camera's zoom, the values printed in cells, the keys drawn, "
         "the token, head and patch followed"},
        {K::String, "learn.{title|id|narration|torch|message|keys|step_ids}", "Learn mode's texts: the step's title, id, narration, "
         "PyTorch line, why nothing is shown, the colour keys, every step's id"},
        {K::String, "learn.values.<what>", "numbers a Learn step drew (a row of the trace, comma-separated)"},
        {K::Number, "learn.mlp.gate_shut", "the MLP step of a SwiGLU model: how many of the token's gates silu(x1) are under "
                                           "0.05 in size"},
        {K::Number, "learn.rope.turn.<k>", "the RoPE step: the angle (radians, in -pi..pi) the k-th pair drawn turns by, "
         "from the trace's q and q_rot"},
        {K::Number, "learn.lessons", "the lessons read"},
        {K::String, "learn.lesson.{title|ask|answer|truth|verdict|why|truths|titles|verdicts|whys}", "the step's first lesson: its question, the learner's "
         "answer, what the trace says, the verdict and the explanation; every lesson of the step: their truths, titles, verdicts and explanations"},
        {K::String, "learn.lessons_error", "why the lessons file was not read"},
        {K::Group, "learn.{labels|cells|key}", "Learn mode's captions, the values printed in cells, the keys' figures"},
    };
}

}  // namespace vit::app
