// Learn mode (issue 38): the forward pass of the image and model on screen as one animated lesson.
// One large picture, the narration beside it and a few controls, nothing else: the steps go from the
// whole model (every stage a slab of its real values, as the map has them) through pixels, patches,
// the embedding, one token's LayerNorm, Q/K/V, scores, softmax, the weighted sum of V, the heads, the
// residuals, the MLP, the stack of blocks, the pooling, the logits and the probabilities.
//
// Every number and colour drawn is read from the trace on screen (the arrays the workbench shows),
// and an animation only moves between two real states (a row of the trace, then the next stage's
// row). The steps come from the stage table of the model and options that produced the trace: a step
// whose stage the family lacks is left out; registers, layer scale and an attention-pooling head get
// steps of their own.
#pragma once
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "jobs.h"
#include "lessons.h"
#include "views.h"

namespace vit::app {

struct LearnStepInfo {
    std::string id;     // "model", "pixels", "patches", ..., "probs"
    std::string title;  // "Pixels become patches"
};
// The steps for a stage table (the trace on screen's, or the one --learn is checked against).
std::vector<LearnStepInfo> learn_steps(const StageTable& table, const Config& c);
// The steps of the trace on screen (none without a trace).
std::vector<LearnStepInfo> learn_steps(const Session& s);
// The id of every step Learn mode knows, in its order (the lessons' `step`).
std::vector<std::string> learn_step_ids();

constexpr float kLearnStepSeconds = 4.f;  // one step's animation at speed 1
constexpr float kLearnHoldSeconds = 3.f;  // how long its end state stays before the next step (playing)

// What Learn mode keeps across frames: the textures of the grids it drew (re-uploaded only when the
// trace or what they show changes) and the colour keys of this frame.
struct LearnView {
    struct Tex {
        Texture tex;
        uint64_t key = 0;
    };
    std::map<std::string, Tex> tex;
    Texture input;
    uint64_t input_key = 0;
    std::vector<std::pair<std::string, Colormap>> keys;  // this frame's grids: name, colours
    bool dragging = false;
    std::vector<std::string> samples;  // the bundled images (listed once)
    // the lessons, and the learner's answers (lesson index -> answer) for the trace they were given on
    std::vector<Lesson> lessons;
    std::string lessons_path, lessons_error;
    bool lessons_loaded = false;
    std::map<int, std::string> answers;
    // the "what if" lessons' second passes, one per fact, for the trace of `version`: a job on `jobs` (the
    // window's queue; null: run where asked), its answer once it is done
    struct WhatIfRun {
        uint64_t version = 0;
        std::shared_ptr<Job> job;
        std::shared_ptr<WhatIf> out;
    };
    std::map<std::string, WhatIfRun> what_ifs;
    JobQueue* jobs = nullptr;
    bool working() const;  // a second pass is still running (headless screenshots wait for it)
    uint64_t answers_version = 0;
    std::string pending_answer;  // --learn-answer: given to the first lesson of the step shown, once
};

// The whole window in Learn mode (W x H logical pixels).
void DrawLearn(ViewCtx& v, LearnView& lv, float W, float H);
// L switches between Learn mode and the workbench; in Learn mode, Space plays or pauses, Right / Left
// (or N / P) step, Home goes to the first step, + / - zoom, 0 resets the zoom; T goes to the tour's next
// lesson (Shift+T: back), and from the workbench opens Learn mode at the tour's lesson.
void HandleLearnKeys(ViewCtx& v);

}  // namespace vit::app
