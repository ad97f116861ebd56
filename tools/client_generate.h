// `pagoda generate --server`: streams completions from a running daemon.
#pragma once

#include <string>
#include <vector>

#include "engine/request.h"

namespace pagoda::tools {

// Sends each prompt, with the sampling settings of `base`, to the daemon at `address` in
// turn (authorized by `api_key` when not empty), printing text as it arrives (or one JSON
// object per prompt with `json`). Returns the exit code: 1 when any request failed.
int RunClientGenerate(const std::string& address, const std::string& api_key,
                      const engine::GenerationRequest& base,
                      const std::vector<std::string>& prompts, bool json);

}  // namespace pagoda::tools
