// `pagoda generate --server`: streams completions from a running daemon.
#pragma once

#include <string>
#include <vector>

namespace pagoda::tools {

// Sends each prompt to the daemon at `address` in turn, printing text as it arrives (or one
// JSON object per prompt with `json`). Returns the exit code.
int RunClientGenerate(const std::string& address, const std::vector<std::string>& prompts,
                      bool json);

}  // namespace pagoda::tools
