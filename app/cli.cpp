// vitscope-cli: trace, info, convert (and, with the trainer, train / eval).
// Exit codes: 0 success, 1 a file or model could not be used (the message
// names it), 2 bad command-line usage.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <string>

#include "cli_commands.h"
#include "core/kernels/blas.h"

int main(int argc, char** argv) {
    vit::blas::init();  // the BLAS kernel for this CPU, before anything else runs
    CLI::App app{"vitscope-cli: run a Vision Transformer and record every stage"};
    app.require_subcommand(1);
    std::string line = "vitscope-cli";
    for (int i = 1; i < argc; ++i) line += std::string(" ") + argv[i];
    vit::cli::Commands cmds(app, line);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::cerr << "vitscope-cli: " << e.what() << "\n(run 'vitscope-cli --help')\n";
        return 2;
    }
    return cmds.run();
}
