// The subcommands of the `pagoda` binary. Each registers itself, with its own flags, on the
// top-level CLI11 App; its `run` executes it once the App has parsed the command line.
#pragma once

#include <functional>

#include "CLI/CLI.hpp"

namespace pagoda::tools {

struct Command {
  CLI::App* app;             // the subcommand, owned by the top-level App
  std::function<int()> run;  // runs the parsed command; returns the process exit code
};

// `generate`: offline generation, or streaming from a daemon with --server.
Command AddGenerateCommand(CLI::App& app);
// `make-model`: writes a random-weight Llama GGUF from a preset.
Command AddMakeModelCommand(CLI::App& app);
// `serve`: the gRPC daemon.
Command AddServeCommand(CLI::App& app);

}  // namespace pagoda::tools
