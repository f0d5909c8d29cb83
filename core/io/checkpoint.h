// Loading and saving whole models: presets, the embedded default, and checkpoints
// (.safetensors, torch.save zips, OpenAI's TorchScript archives) in the layouts of
// timm, Hugging Face, torchvision, OpenAI CLIP, open_clip and facebookresearch's
// DeiT / DINO / DINOv2 / MAE code (core/io/layouts.cpp tells them apart).
#pragma once
#include <map>
#include <string>

#include <optional>
#include <utility>
#include <vector>

#include "core/io/hf_config.h"
#include "core/io/hub.h"
#include "core/io/io.h"
#include "core/model/finite.h"
#include "core/model/model.h"

namespace vit {

// Whose key names a checkpoint uses (the model family itself is Config::family).
enum class Family { Timm, HuggingFace, Torchvision, OpenAI, OpenClip, Facebook, Apple };
// "timm", "huggingface", "torchvision", "openai", "open_clip", "facebookresearch", "apple"
const char* family_name(Family f);

// Settings the shapes cannot tell. Unset fields come from the file's
// __metadata__, then from the family's defaults.
struct LoadOverrides {
    int heads = 0;           // 0: the file's metadata, a config.json beside it, or the published shapes
    float eps = 0.f;         // 0: metadata, else the family's (timm/tv 1e-6, HF 1e-12)
    std::optional<Pooling> pooling;  // empty: metadata/layout
    hub::FetchOptions hub;   // hf:ORG/NAME specs: offline, download progress, cache folder, endpoint
};

struct LoadedModel {
    Weights weights;
    Family family = Family::Timm;
    std::string source;      // file path, "preset:NAME" or "embedded"
    std::map<std::string, std::string> metadata;
    std::string heads_from;    // where the head count came from ("--heads", "__metadata__ num_heads", ...)
    std::string labels_from;   // where the class names came from ("" when the model has none)
    // The file's tensors (by the file's names) that hold NaN or Inf: loaded as they
    // are (a teaching tool shows what they do), and named by nonfinite_warning().
    std::vector<std::pair<std::string, NonFinite>> nonfinite;
    // "x.safetensors: 2 tensors hold non-finite values: ..." ("" when there are none).
    std::string nonfinite_warning() const;
    std::string layout;        // what the file is, in words: "DINOv2 with 4 registers, facebookresearch/dinov2 layout"
    // What the loader ignored or took from outside the weights, each said once ("the text tower
    // (text_model.*, 16 tensors) is not part of the image model: ignored"); also in
    // metadata["vitscope.load_note"], one per line.
    std::vector<std::string> notes;
};

// The config files beside a checkpoint, each read by core/io/hf_config (the one parser of them).
struct SideConfig {
    std::string path;                      // the config.json read ("" when there was none)
    int heads = 0;                         // num_attention_heads (or vision_config's; timm: model_args.num_heads), 0 if absent
    int width = 0;                         // hidden_size (or vision_config's; timm: model_args.embed_dim), 0 if absent
    std::vector<std::string> class_names;  // from id2label (timm: label_names), in index order; empty if absent or placeholders
    std::optional<ConfigFile> config;      // all of config.json: Hugging Face, timm (or open_clip's, by that name)
    std::string open_clip_path;            // open_clip_config.json ("" when there was none)
    std::optional<ConfigFile> open_clip;
    std::string preprocessor_path;         // preprocessor_config.json ("" when there was none)
    std::optional<PreprocessConfig> preprocessor;
    // The checkpoint's own name (file, and the Hugging Face repository of a cache path): open_clip's
    // "-quickgelu" models, DINO's and MAE's released files say what they are only there.
    std::string name;
};
// Reads `dir`/config.json if it exists; a file that is there but malformed is a FileError naming
// it and the field. HF's placeholder labels ("LABEL_0", ...) are not names and are dropped.
SideConfig read_side_config(const std::string& dir);
// The same from the file's text; `path` names it in errors (and is SideConfig::path).
SideConfig parse_side_config(const std::string& text, const std::string& path);
// Every config file beside the checkpoint `weights`: config.json, open_clip_config.json and
// preprocessor_config.json (those that exist), and the checkpoint's name.
SideConfig read_side_files(const std::string& weights);

// The number of heads is not known: not in the file, not in a config.json beside it, not a
// published ViT shape. The message says --heads N is needed and lists the possible N.
struct HeadsNeeded : FileError {
    HeadsNeeded(const std::string& msg, std::string file, int width, std::vector<int> choices)
        : FileError(msg), file(std::move(file)), width(width), choices(std::move(choices)) {}
    std::string file;
    int width;
    std::vector<int> choices;  // the divisors of the width, ascending
};
// The divisors of width, ascending (the head counts a width allows).
std::vector<int> head_choices(int width);
// "1, 2, 4, 8, 16, 32 or 64": head_choices as a sentence.
std::string head_choices_text(int width);

// A setting given by the user that the model cannot take (--heads that does not divide the
// width): bad usage, not a bad file (the CLI exits 2).
struct UsageError : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

// ImageNet-1k's class names in index order (torchvision's list, assets/classes/imagenet1k.txt,
// built into the binary): the names a 1000-class head gets when nothing else names its classes.
const std::vector<std::string>& imagenet1k_class_names();

// The published number of heads of a standard ViT with these shapes (Ti/S/B/L/H), 0 if not one.
// Used when a checkpoint and its config.json do not say; otherwise the loader asks (HeadsNeeded).
int known_heads(int width, int depth, int mlp);

// spec: "default" (the embedded Fashion-MNIST model), a preset name, "hf:ORG/NAME[@REV]" (the
// Hugging Face cache, downloading into it when allowed: core/io/hub.h), or a path. A
// model.safetensors or pytorch_model.bin with a config.json (and preprocessor_config.json) beside
// it, as in a hub snapshot, is read with them: see load_checkpoint_files.
LoadedModel load_model(const std::string& spec, const LoadOverrides& ov = {}, uint64_t seed = 0);
// A weights file with the Hugging Face config.json and preprocessor_config.json of its repository
// ("" for none; an open_clip_config.json beside the weights is read too). The config gives what
// the shapes cannot: num_attention_heads, layer_norm_eps, hidden_act and id2label (Hugging Face),
// model_args, label_names and pretrained_cfg (timm); the preprocessor config the mean, std,
// resize, crop and interpolation. The file's own __metadata__ and the overrides win. Metadata
// records what was used: hf.config, hf.preprocessor, hf.model_type and, for settings that could
// not be followed, vitscope.preprocess_note.
LoadedModel load_checkpoint_files(const std::string& weights, const std::string& config_json,
                                  const std::string& preprocessor_json, const LoadOverrides& ov = {});
// The tensors of a checkpoint file: .safetensors, or a torch.save zip
// (.pth/.pt/.bin/.ckpt, or any file that starts like a zip). Other extensions
// are sniffed; an unknown format is a FileError listing kCheckpointFormats.
SafeTensors read_checkpoint(const std::string& path);
extern const char* const kCheckpointFormats;
// Tensor names, dtypes and shapes of a checkpoint file from its header alone (chosen as read_checkpoint chooses).
TensorIndex index_checkpoint(const std::string& path);
// From already-read tensors (used by load_model and the tests): the layout is told by the key
// names and shapes (core/io/layouts.cpp). `side`: the config files beside the file, or null.
LoadedModel weights_from_tensors(std::map<std::string, Array> tensors,
                                 const std::map<std::string, std::string>& metadata,
                                 const std::string& what, const LoadOverrides& ov,
                                 const SideConfig* side = nullptr);

// From a parsed file: refuses tensors in dtypes it cannot convert, then as above.
struct SafeTensors;
LoadedModel model_from_safetensors(SafeTensors st, const std::string& what, const LoadOverrides& ov,
                                  const SideConfig* side = nullptr);

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
// The embedded scenes model (assets/scenes_vit.safetensors), "" in a build without it.
std::string embedded_scenes_bytes();
// "default" (the embedded Fashion-MNIST model, also "") and "scenes" (the embedded scenes model): the
// specs load_model answers from the binary itself.
bool is_embedded_model(const std::string& spec);
// assets/classes/imagenet1k.txt as built into the binary (empty if the build had none).
std::string imagenet1k_names_text();

}  // namespace vit
