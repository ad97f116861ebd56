// OpenAI's Responses API request (POST /v1/responses) as a chat completion: `input` (a
// string, or message, function_call, function_call_output and reasoning items) and
// `instructions` become the conversation; max_output_tokens, sampling fields, `text.format`
// (structured outputs), function `tools` and `tool_choice`, and `reasoning.effort` become
// their chat fields; the request is then parsed as one (ParseChatCompletionRequest). The
// server keeps no responses: `previous_response_id`, item references and background runs
// are refused with the reason (docs/API.md "Responses").
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/http/openai_request.h"

namespace pagoda::server::http {

// `body` (parsed from `body_text`, whose key order schemas keep) to the chat request it
// asks for, with OpenAiRequest::responses set to the fields its response repeats.
// InvalidArgument naming the field ("input[2].type: ...") for anything else.
absl::StatusOr<OpenAiRequest> ParseResponsesRequest(const nlohmann::json& body,
                                                    std::string_view body_text = {});

}  // namespace pagoda::server::http
