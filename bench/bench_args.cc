#include "bench/bench_args.h"

#include <algorithm>
#include <utility>

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

}  // namespace pagoda::bench
