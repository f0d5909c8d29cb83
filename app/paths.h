// Where the app finds its data at run time: samples, class lists, shaders and
// the default model file. Found relative to the executable, never through a
// path baked in at compile time, so an installed copy works wherever its prefix
// is moved:
//   <prefix>/bin/vitscope  ->  <prefix>/share/vitscope/{samples,classes,shaders,fmnist_vit.safetensors}
// Run from a build directory, the executable's folder holds a one-line file
// `vitscope-source-dir` (written by CMake, never installed) naming the source
// tree, whose assets/ and shaders/ are used instead.
#pragma once
#include <string>

namespace vit::app {

struct DataPaths {
    std::string root;      // the data directory ("" if none was found)
    std::string samples;   // bundled sample images
    std::string classes;   // class-name lists (one name per line)
    std::string shaders;   // the GLSL sources (the app embeds them; this copy is for --shader-dir)
    std::string default_model;  // fmnist_vit.safetensors (the app embeds it too)
    std::string how;       // how it was found, for messages: "installed", "source tree", "none"
};

// Resolves from /proc/self/exe (a few file checks: called at launch and for dumps, not per frame).
DataPaths data_paths();
// Resolves for an executable at exe_path (for tests).
DataPaths data_paths_for(const std::string& exe_path);
// The sample shown when no --image is given: for the scenes model a bundled test scene
// (samples/scenes/, with its labels.json), for the others samples/9_ankle_boot_test0.png; "" if missing.
std::string default_sample_image(const std::string& model);

}  // namespace vit::app
