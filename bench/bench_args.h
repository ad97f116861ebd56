// Command-line spelling that pagoda-bench accepts beyond absl's own.
#pragma once

#include <string>
#include <vector>

namespace pagoda::bench {

// argv ready for absl::ParseCommandLine: dashed flag names become underscored
// (--request-rate -> --request_rate), and vLLM's space-separated goodput list
// (--goodput ttft:500 tpot:50) becomes one comma-separated value (--goodput=ttft:500,tpot:50).
std::vector<std::string> PrepareArgs(int argc, char** argv);

}  // namespace pagoda::bench
