// Command-line parsing shared by pagoda-bench, pagoda-soak and pagoda-decode-bench (CLI11,
// as the `pagoda` binary): flags are declared with dashes (--request-rate) and the
// underscore spelling the absl flags of earlier versions took (--request_rate) still works.
#pragma once

#include <optional>
#include <string>

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

}  // namespace pagoda::bench
