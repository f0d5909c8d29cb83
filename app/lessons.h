// Lessons (issue 38 item 3): "predict, then check", as data a teacher can write (assets/lessons/scenes.txt
// says how). Each sits on a Learn step, asks, takes an answer (a choice, or a click in the picture) and then
// shows what the trace on screen says and why. In the file's order they are the tour (T, --tour N), which
// replaced the workbench's list of chores: T opens Learn mode at the tour's lesson, and in Learn mode goes
// to the next one.
//
// Most answers are read from the trace on screen (learn.cpp); a few ask "what if" and need a second pass of
// the same model on the same input with one thing changed (what_if below): dropping the object's patches,
// dropping the distractors', turning LayerNorm's elementwise_affine off.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "views.h"

namespace vit::app {

struct LearnStepInfo;  // learn.h

struct Lesson {
    std::string title, step, ask, why;
    std::string kind;                  // "click-patch", "click-key", "choice", "choice-classes"
    std::string fact;                  // what the app computes from the trace ("cls-peak", "ln-out-mean-zero", ...)
    std::vector<std::string> choices;  // the buttons of a choice
    int line = 0;                      // where it starts in its file
};
// Parses a lessons file's text; throws std::runtime_error naming `path`, the line and what is wrong.
std::vector<Lesson> parse_lessons(const std::string& text, const std::string& path);
// The bundled lessons (assets/lessons/scenes.txt) or a file of one's own; throws as parse_lessons, or
// naming the file when it cannot be read.
std::vector<Lesson> load_lessons(const std::string& path);
std::string default_lessons_path();

// The tour: the lessons whose step this model has (indices into `lessons`, in the file's order).
std::vector<int> tour_lessons(const std::vector<Lesson>& lessons, const std::vector<LearnStepInfo>& steps);
// Its length for the model loaded: with the stage table of the trace on screen, or (before the first pass)
// the one the model's config and options give.
int tour_size(const Session& s, const std::vector<Lesson>& lessons);

// A "what if" fact: the answer from a second pass of the trace's model on the trace's input with one thing
// changed ("changes" / "stays": the predicted class), and the numbers behind it. answer is "" when this trace
// cannot answer (no classes, no known object); detail then says why.
struct WhatIf {
    std::string answer, detail;
};
bool is_what_if(const std::string& fact);  // drop-object, drop-clutter, affine-off

// The second pass, prepared from the trace on screen (the UI thread) with copies of all it reads, so that it
// can run in a job while the trace is replaced: the model (held), the options, the input, the clean outputs.
struct WhatIfPass {
    std::string fact, what;                      // what changed, in words ("without the object's 9 patches")
    std::string unanswerable;                    // why there is no pass (model null)
    std::shared_ptr<const LoadedModel> model;
    Options opt, base;                           // the second pass's options, the trace's
    Tensor4 x;                                   // the trace's input (1, C, H, W)
    std::vector<float> clean_logits, clean_probs;
};
WhatIfPass prepare_what_if(const Session& s, const Trace& t, const std::string& fact);
// Runs it (a forward pass recording only the logits; `cancel` stops it with Cancelled) and answers.
WhatIf run_what_if(const WhatIfPass& w, const std::atomic<bool>* cancel = nullptr);

}  // namespace vit::app
