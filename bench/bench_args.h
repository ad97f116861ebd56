// Command-line spelling that pagoda-bench accepts beyond absl's own.
#pragma once

#include <string>
#include <vector>

namespace pagoda::bench {

// --help lists only the flags defined in files whose path contains `main_file` (absl's
// default matches files named after the binary); `message` is the usage line.
void SetFlagsUsage(const char* main_file, const char* message);

// argv ready for absl::ParseCommandLine: dashed flag names become underscored
// (--request-rate -> --request_rate), and vLLM's space-separated goodput list
// (--goodput ttft:500 tpot:50) becomes one comma-separated value (--goodput=ttft:500,tpot:50).
std::vector<std::string> PrepareArgs(int argc, char** argv);

// Parses `args` (after PrepareArgs; args[0] is the program) into the absl flags. Exits on a
// bad flag as absl does; returns false, after naming it on stderr, when a positional
// argument is left over.
bool ParseFlags(const char* program, std::vector<std::string>& args);

// Removes every `--NAME VALUE` and `--NAME=VALUE` from `args` (after PrepareArgs; args[0] is
// the program) and returns the values in order: absl keeps only the last of a repeated flag.
// A trailing `--NAME` without a value is left for absl to report.
std::vector<std::string> TakeRepeatedFlag(const std::string& name, std::vector<std::string>* args);

}  // namespace pagoda::bench
