// The checks of a request that need no engine state, shared by the engine's validation
// (engine_validate.cc, the one place a request is validated) and its other entry points.
// Internal to engine/.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/chat_prompt.h"
#include "engine/request.h"
#include "nlohmann/json.hpp"

namespace pagoda::engine {

// InvalidArgument "FIELD: WHY".
absl::Status Invalid(absl::string_view field, absl::string_view why);
// Temperature, top-p/k, min-p, penalties and logprob counts in range.
absl::Status ValidateSampling(const SamplingParams& p);
// Client-chosen ids reach logs and responses: short, UTF-8, no control characters (a
// newline would forge a log line).
absl::Status ValidateRequestId(const std::string& id);
// `messages` (and `tools` and `kwargs`, may be null) rendered by `chat` once they are
// checked: valid UTF-8, at most `max_prompt_bytes` in all (the tools and kwargs counted as
// their JSON text); kwargs a JSON object naming none of the template's own variables.
absl::StatusOr<ChatPromptText> RenderChecked(const ChatPrompt& chat,
                                             const std::vector<ChatMessage>& messages,
                                             const nlohmann::ordered_json* tools,
                                             const nlohmann::json* kwargs,
                                             bool add_generation_prompt, int64_t max_prompt_bytes);
// The variables every render defines; chat_template_kwargs may not name them.
bool IsReservedTemplateVariable(std::string_view name);

}  // namespace pagoda::engine
