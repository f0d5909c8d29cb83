// PyTorch checkpoints written by torch.save (the zip format, torch >= 1.6):
// a zip whose single top-level folder holds data.pkl, data/<key> storages and
// version. data.pkl is read by a restricted unpickler that knows only the
// opcodes and globals torch.save emits for a state dict; any other global
// (os.system, builtins.eval, ...) is refused by name. Nothing is executed.
// Objects are data only: argparse.Namespace (DINO's full checkpoints) and, in a
// TorchScript archive (torch.jit.save: OpenAI's CLIP releases; it also holds code/
// and constants.pkl, never read), its __torch__.* module classes, each created
// empty and filled with its attributes; the module tree becomes the state dict
// (every tensor attribute under its dotted path, as module.state_dict() names it).
// No xtensor here.
#pragma once
#include <string>

#include "core/io/io.h"

namespace vit {

// The state dict found in the file (at the top level, or under "model",
// "state_dict", "module", "model_state_dict", "state_dict_ema", "model_ema" or
// "teacher"; a TorchScript archive's module tree), as float32
// tensors with their stored dtypes ("F32", "F16", "BF16", "F64"; integer and
// bool tensors are listed in `dtypes` but not converted, as in
// read_safetensors). Non-tensor entries are ignored. A "module." prefix on
// every key (DataParallel) is removed. metadata: "format" "pt", and "pth.state_dict"
// (the wrapper keys taken, e.g. "teacher") or "pth.torchscript" (the archive's top
// module class). Throws FileError naming `what` and the
// reason. Time is linear in the input and memory bounded by a fixed multiple
// of it.
SafeTensors read_pth(const std::string& path);
SafeTensors parse_pth(const std::string& bytes, const std::string& what);
SafeTensors parse_pth(const char* bytes, size_t size, const std::string& what);

// The state dict's tensor names, stored dtypes and shapes, from data.pkl alone (the storages
// are not read). Same errors as read_pth for a file that is not a torch.save checkpoint.
TensorIndex index_pth(const std::string& path);

// True if the bytes start like a zip archive ("PK\3\4" or an empty archive's "PK\5\6").
bool looks_like_zip(const char* bytes, size_t size);

}  // namespace vit
