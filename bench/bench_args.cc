#include "bench/bench_args.h"

#include <algorithm>
#include <utility>

#include "common/flag_spelling.h"

namespace pagoda::bench {

void SetUpApp(CLI::App* app) {
  app->option_defaults()->always_capture_default()->multi_option_policy(
      CLI::MultiOptionPolicy::TakeLast);
}

std::string DashedFlagSpelling(const std::string& arg) {
  std::string s = arg;
  if (s.size() < 3 || s.compare(0, 2, "--") != 0) return s;
  const size_t end = std::min(s.find('='), s.size());
  std::replace(s.begin() + 2, s.begin() + static_cast<std::ptrdiff_t>(end), '_', '-');
  return s;
}

std::optional<int> ParseCommandLine(CLI::App* app, int argc, char** argv) {
  std::vector<std::string> args;
  // CLI11 takes the arguments without the program, last first.
  for (int i = argc - 1; i > 0; --i) args.push_back(DashedFlagSpelling(argv[i]));
  try {
    app->parse(std::move(args));
  } catch (const CLI::ParseError& e) {
    return app->exit(e) == 0 ? 0 : 2;
  }
  return std::nullopt;
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
