// `pagoda generate --server`: streams completions from a running daemon.
#pragma once

#include <string>
#include <vector>

#include "client/generation_client.h"
#include "engine/request.h"

namespace pagoda::tools {

// Sends each prompt, with the sampling settings of `base`, to the daemon `channel` names in
// turn (authorized by its api_key when not empty; TLS when it names a CA), printing text as
// it arrives (or one JSON object per prompt with `json`). Returns the exit code: 1 when any
// request failed or the channel options are bad.
int RunClientGenerate(const client::ChannelOptions& channel, const engine::GenerationRequest& base,
                      const std::vector<std::string>& prompts, bool json);

}  // namespace pagoda::tools
