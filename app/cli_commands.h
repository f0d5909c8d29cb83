#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace vit::cli {
// Registers the subcommands on `app`; run() executes the one parsed.
class Commands {
public:
    explicit Commands(CLI::App& app);
    int run();
    struct State;
private:
    std::function<int()> selected_;
    std::shared_ptr<State> s_;
};
}  // namespace vit::cli
