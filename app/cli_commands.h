#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace vit {
struct LoadedModel;
struct Dataset;
}
namespace vit::cli {
// Registers the subcommands on `app`; run() executes the one parsed.
class Commands {
public:
    Commands(CLI::App& app, const std::string& command_line);
    int run();
    struct State;
private:
    void add_training(CLI::App& app);
    void add_trace(CLI::App& app);
    void add_info(CLI::App& app);
    void add_convert(CLI::App& app);
    void add_models(CLI::App& app);
    int eval_scenes(const LoadedModel& lm, const Dataset& test);
    std::function<int()> selected_;
    CLI::App* app_ = nullptr;  // which subcommand was parsed (run() checks its output flags)
    std::shared_ptr<State> s_;
};
}  // namespace vit::cli
