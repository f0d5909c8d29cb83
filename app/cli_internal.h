// What the subcommands of vitscope-cli share across their files (cli_commands.cpp, cli_train.cpp): the parsed
// flags, and the helpers every command that loads a model uses. Not an interface outside vitscope-cli.
#pragma once
#include <string>

#include "cli_commands.h"
#include "core/io/checkpoint.h"
#include "core/io/dataset.h"
#include "core/teach/interventions.h"
#include "core/train/trainer.h"

namespace vit::cli {

struct Commands::State {
    std::string model = "default", image, input, out;
    int heads = 0;
    bool no_affine = false, unbiased = false;
    std::string pooling, labels;
    uint64_t seed = 0;
    // train / eval
    std::string data = default_fashion_mnist_dir(), resume, config = "fmnist";
    TrainSettings ts;
    int width = 0, depth = 0, heads_cfg = 0, mlp = 0, patch = 0, train_size = 0, limit = 0, threads = 0;
    bool no_augment = false;
    // train --scenes, eval --scenes, scenes (core/io/scenes.h)
    bool scenes = false, scenes_crops = false;  // train --scenes-crops: the object squares of scenes
    std::string init_from;                      // train --init-from
    std::string init_pos;                       // train --init-pos keep|resize ("": keep)
    std::string split = "test";
    int count = 0;
    uint64_t scene_seed = 1;
    int distance_n = 1000;
    std::string command_line;
    // convert / info --list
    std::string conv_in, conv_out;
    bool list = false;
    bool explain = false;  // info --explain
    bool stage_table_json = false;  // info --stage-table
    std::string image_size;  // --image-size H[,W]
    bool grads = false;    // trace --grads
    std::string stages;    // trace --stages: comma-separated globs over stage names
    bool record_all = false;  // trace --record-all: the whole trace in memory first (no streaming)
    int grad_class = -1;   // trace --class
    // trace / analyze: the two pitfall switches; analyze: images for the averaged attention distance
    bool bug_scale_after_softmax = false, bug_reshape_patches = false;
    int average = 0;
    float keep = 0.6f;          // analyze: the self-attention masks keep this share of each head's attention
    float norm_factor = 2.f;    // analyze: high-norm tokens are above this many times the median patch norm
    bool offline = false;  // --offline: hf: models from the cache only
    // models
    std::string hf_cache, torch_dir;
    bool json_out = false;
    // trace / analyze / info: interventions (issue 21); analyze: the sweeps
    InterventionFlags iv;
    bool head_importance = false, occlusion = false;
};

// Text from files (class names, config names, paths, tensor names) goes to the terminal escaped.
std::string safe(const std::string& t);
// The model line of every command that runs one, and where its head count came from.
void print_model(const LoadedModel& lm);
void warn(const std::string& m);  // "vitscope-cli: warning: ..." on stderr
// --model, --offline, --heads, --pooling, --seed, --labels
void model_flags(CLI::App* c, Commands::State& s);
// The model those flags name, packed for the GEMM; its notes and non-finite tensors said on stderr.
LoadedModel load(const Commands::State& s);

}  // namespace vit::cli
