// Loading and saving whole models: presets, the embedded default, and
// .safetensors checkpoints in timm, Hugging Face or torchvision layout.
#pragma once
#include <map>
#include <string>

#include "core/io/hub.h"
#include "core/io/io.h"
#include "core/model/model.h"
#include <optional>

namespace vit {

enum class Family { Timm, HuggingFace, Torchvision };
const char* family_name(Family f);

// Settings the shapes cannot tell. Unset fields come from the file's
// __metadata__, then from the family's defaults.
struct LoadOverrides {
    int heads = 0;           // 0: metadata, else width/64
    float eps = 0.f;         // 0: metadata, else the family's (timm/tv 1e-6, HF 1e-12)
    std::optional<Pooling> pooling;  // empty: metadata/layout
    hub::FetchOptions hub;   // hf:ORG/NAME specs: offline, download progress, cache folder, endpoint
};

struct LoadedModel {
    Weights weights;
    Family family = Family::Timm;
    std::string source;      // file path, "preset:NAME" or "embedded"
    std::map<std::string, std::string> metadata;
};

// The published number of heads of a standard ViT with these shapes (Ti/S/B/L/H), 0 if not one.
// Used when a checkpoint does not say; otherwise heads = width/64 is a guess (Config::heads_guessed).
int known_heads(int width, int depth, int mlp);

// spec: "default" (the embedded Fashion-MNIST model), a preset name, "hf:ORG/NAME[@REV]" (the
// Hugging Face cache, downloading into it when allowed: core/io/hub.h), or a path. A
// model.safetensors or pytorch_model.bin with a config.json (and preprocessor_config.json) beside
// it, as in a hub snapshot, is read with them: see load_checkpoint_files.
LoadedModel load_model(const std::string& spec, const LoadOverrides& ov = {}, uint64_t seed = 0);
// A weights file with the Hugging Face config.json and preprocessor_config.json of its repository
// ("" for none). The config gives what the shapes cannot: num_attention_heads, layer_norm_eps and
// id2label (Hugging Face), label_names and pretrained_cfg (timm); the preprocessor config the
// mean, std, resize, crop and interpolation. The file's own __metadata__ and the overrides win.
// Metadata records what was used: hf.config, hf.preprocessor, hf.model_type and, for settings that
// could not be followed, vitscope.preprocess_note.
LoadedModel load_checkpoint_files(const std::string& weights, const std::string& config_json,
                                  const std::string& preprocessor_json, const LoadOverrides& ov = {});
// The tensors of a checkpoint file: .safetensors, or a torch.save zip
// (.pth/.pt/.bin/.ckpt, or any file that starts like a zip). Other extensions
// are sniffed; an unknown format is a FileError listing kCheckpointFormats.
SafeTensors read_checkpoint(const std::string& path);
extern const char* const kCheckpointFormats;
// Tensor names, dtypes and shapes of a checkpoint file from its header alone (chosen as read_checkpoint chooses).
TensorIndex index_checkpoint(const std::string& path);
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
