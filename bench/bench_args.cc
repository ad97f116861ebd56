#include "bench/bench_args.h"

#include "common/flag_spelling.h"

namespace pagoda::bench {

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

}  // namespace pagoda::bench
