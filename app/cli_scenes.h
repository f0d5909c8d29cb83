#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace vit::cli {
// `vitscope-cli scenes --split train|test --seed S --count N --out DIR`; sets `selected` when parsed.
void add_scenes_command(CLI::App& app, std::function<int()>& selected);
}  // namespace vit::cli
