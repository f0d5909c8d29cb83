// The checkpoint layouts of every family, told apart by their key names and shapes and mapped
// into the canonical Weights (core/model/model.h) with the Config they imply. Internal to
// core/io: checkpoint.cpp hands over a file's tensors and the config files beside it.
#pragma once
#include <map>
#include <string>

#include "core/io/checkpoint.h"

namespace vit {

// src: the file's float tensors (moved into the weights), dtypes: every tensor's stored dtype
// (integer ones are listed there and not in src), meta: the file's __metadata__ (and the pth
// reader's notes: pth.state_dict, pth.torchscript), what: the file, for messages.
LoadedModel load_layout(std::map<std::string, Array>& src, const std::map<std::string, std::string>& dtypes,
                        const std::map<std::string, std::string>& meta, const std::string& what,
                        const LoadOverrides& ov, const SideConfig& side);

// The shape of the canonical parameter `name` (for_each_param's name) under config c.
Shape param_shape(const Config& c, const std::string& name);

// Shared with checkpoint.cpp.
void check_heads_flag(int heads, int width, const std::string& what);
// __metadata__ class_names: a JSON list of strings (bounded), or a FileError naming `what`.
std::vector<std::string> class_names_from_json(const std::string& text, const std::string& what);

}  // namespace vit
