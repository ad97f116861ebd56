#include "bench/bench_args.h"

#include <cstdio>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "common/flag_spelling.h"

namespace pagoda::bench {

void SetFlagsUsage(const char* main_file, const char* message) {
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [main_file](absl::string_view file) {
    return absl::StrContains(file, main_file);
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(message);
}

std::vector<std::string> PrepareArgs(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    std::string arg = i == 0 ? std::string(argv[0]) : NormalizeFlagSpelling(argv[i]);
    if (arg != "--goodput" && arg.rfind("--goodput=", 0) != 0) {
      args.push_back(std::move(arg));
      continue;
    }
    std::string value = arg == "--goodput" ? "" : arg.substr(10);
    // Every following word that is not a flag is one more METRIC:MS entry.
    while (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
      if (!value.empty()) value += ",";
      value += argv[++i];
    }
    args.push_back("--goodput=" + value);
  }
  return args;
}

bool ParseFlags(const char* program, std::vector<std::string>& args) {
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  const std::vector<char*> rest =
      absl::ParseCommandLine(static_cast<int>(args.size()), cargs.data());
  if (rest.size() > 1) {
    std::fprintf(stderr, "%s: unexpected argument '%s'\n", program, rest[1]);
    return false;
  }
  return true;
}

std::vector<std::string> TakeRepeatedFlag(const std::string& name, std::vector<std::string>* args) {
  const std::string bare = "--" + name, with_value = bare + "=";
  std::vector<std::string> values, kept;
  for (size_t i = 0; i < args->size(); ++i) {
    const std::string& arg = (*args)[i];
    if (i > 0 && arg.rfind(with_value, 0) == 0) {
      values.push_back(arg.substr(with_value.size()));
    } else if (i > 0 && arg == bare && i + 1 < args->size()) {
      values.push_back((*args)[++i]);
    } else {
      kept.push_back(arg);
    }
  }
  *args = std::move(kept);
  return values;
}

}  // namespace pagoda::bench
