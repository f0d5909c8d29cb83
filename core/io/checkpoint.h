// Loading and saving whole models: presets, the embedded default, and
// .safetensors checkpoints in timm, Hugging Face or torchvision layout.
#pragma once
#include <map>
#include <string>

#include <optional>
#include <utility>
#include <vector>

#include "core/io/io.h"
#include "core/model/finite.h"
#include "core/model/model.h"

namespace vit {

enum class Family { Timm, HuggingFace, Torchvision };
const char* family_name(Family f);

// Settings the shapes cannot tell. Unset fields come from the file's
// __metadata__, then from the family's defaults.
struct LoadOverrides {
    int heads = 0;           // 0: metadata, else width/64
    float eps = 0.f;         // 0: metadata, else the family's (timm/tv 1e-6, HF 1e-12)
    std::optional<Pooling> pooling;  // empty: metadata/layout
};

struct LoadedModel {
    Weights weights;
    Family family = Family::Timm;
    std::string source;      // file path, "preset:NAME" or "embedded"
    std::map<std::string, std::string> metadata;
    // The file's tensors (by the file's names) that hold NaN or Inf: loaded as they
    // are (a teaching tool shows what they do), and named by nonfinite_warning().
    std::vector<std::pair<std::string, NonFinite>> nonfinite;
    // "x.safetensors: 2 tensors hold non-finite values: ..." ("" when there are none).
    std::string nonfinite_warning() const;
};

// The published number of heads of a standard ViT with these shapes (Ti/S/B/L/H), 0 if not one.
// Used when a checkpoint does not say; otherwise heads = width/64 is a guess (Config::heads_guessed).
int known_heads(int width, int depth, int mlp);

// spec: "default" (the embedded Fashion-MNIST model), a preset name, or a path.
LoadedModel load_model(const std::string& spec, const LoadOverrides& ov = {}, uint64_t seed = 0);
// The tensors of a checkpoint file: .safetensors, or a torch.save zip
// (.pth/.pt/.bin/.ckpt, or any file that starts like a zip). Other extensions
// are sniffed; an unknown format is a FileError listing kCheckpointFormats.
SafeTensors read_checkpoint(const std::string& path);
extern const char* const kCheckpointFormats;
// From already-read tensors (used by load_model and the tests).
LoadedModel weights_from_tensors(std::map<std::string, Array> tensors,
                                 const std::map<std::string, std::string>& metadata,
                                 const std::string& what, const LoadOverrides& ov);

// From a parsed file: refuses tensors in dtypes it cannot convert, then as above.
struct SafeTensors;
LoadedModel model_from_safetensors(SafeTensors st, const std::string& what, const LoadOverrides& ov);

// Saves under timm's key names, with the config in __metadata__["vitscope.config"]
// plus `extra` metadata. Atomic.
void save_model(const std::string& path, const Weights& w, std::map<std::string, std::string> extra = {});

std::string config_to_json(const Config& c);
Config config_from_json(const std::string& text, const std::string& what);

// Class names from a text file, one per line; must match the number of classes.
void apply_labels_file(Config& c, const std::string& path);
// The same from the file's text; `path` names it in errors.
void apply_labels(Config& c, const std::string& text, const std::string& path);

// The embedded default model's bytes (empty if the build had none).
std::string embedded_model_bytes();

}  // namespace vit
