// Command-line parsing shared by pagoda-bench, pagoda-soak and pagoda-decode-bench (CLI11,
// as the `pagoda` binary): flags are declared with dashes (--request-rate) and the
// underscore spelling the absl flags of earlier versions took (--request_rate) still works.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace pagoda::bench {

// Defaults shown in --help; a repeated flag takes its last value, as with absl. Call before
// adding options. A flag that collects several values (a vector) sets its own policy.
void SetUpApp(CLI::App* app);

// `--foo_bar=x_y` -> `--foo-bar=x_y`: underscores in a `--` flag's name (before any '=')
// become dashes; values and anything not starting with `--` are unchanged.
std::string DashedFlagSpelling(const std::string& arg);

// Parses argv (flag names through DashedFlagSpelling) into `app`'s options. Returns the exit
// code when the program should stop: 0 after --help, 2 after an unknown flag, a bad value or a
// stray argument (CLI11 has said which on stderr); nullopt when it should go on.
std::optional<int> ParseCommandLine(CLI::App* app, int argc, char** argv);

// Legacy argv rewriting from the absl-flags parser; no binary calls the two below since the
// switch to CLI11. They are kept only while tests/bench_metrics_test.cc still tests them.
//
// argv with dashed flag names underscored (--request-rate -> --request_rate), and vLLM's
// space-separated goodput list (--goodput ttft:500 tpot:50) joined into one value
// (--goodput=ttft:500,tpot:50).
std::vector<std::string> PrepareArgs(int argc, char** argv);

// Removes every `--NAME VALUE` and `--NAME=VALUE` from `args` (args[0] is the program) and
// returns the values in order. A trailing `--NAME` without a value is left in `args`.
std::vector<std::string> TakeRepeatedFlag(const std::string& name, std::vector<std::string>* args);

}  // namespace pagoda::bench
