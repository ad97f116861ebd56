// The part of an HTTP generation that runs off the event loop, on the server's preparation
// threads (HttpContext::Offload): the body's JSON checked against limits (common/json_limits.h)
// and parsed, the OpenAI request converted, the rate-limit tokens reserved, and the engine
// submission (where the chat template renders and the prompt is tokenized). The connection
// picks the result up on its own strand.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/engine.h"
#include "engine/engine_client.h"
#include "server/http/generation_link.h"
#include "server/http/http_context.h"
#include "server/http/http_error.h"
#include "server/http/openai_response.h"
#include "server/http/openai_tools.h"
#include "server/tenant_registry.h"
#include "server/token_reservation.h"

namespace pagoda::server::http {

struct PreparedGeneration {
  // Set when the request was refused: the status (for metrics and the access log) and the
  // answer; nothing below is then set.
  absl::Status refused;
  std::optional<HttpError> answer;
  std::string model;  // as sent; "" when absent
  bool stream = false;
  bool include_usage = false;
  int32_t n = 1;          // samples per prompt
  int32_t parts = 1;      // engine requests: a completion's prompts (choice k * n + j: prompt k)
  bool logprobs = false;  // asked for (the choices then carry them: openai_logprobs.h)
  std::optional<ToolCallParsing> tool_calls;  // chat: how the output's calls are parsed
  // Chat and responses: how the output's reasoning is split out (unset: not at all).
  std::optional<chat::ReasoningFormat> reasoning;
  // Responses: the request's fields its response object repeats (responses_output.h).
  nlohmann::json responses;
  std::shared_ptr<GenerationLink> link;
  // The first part's handle and id, with every part's prompt tokens.
  engine::SubmitResult submitted;
  std::vector<engine::RequestHandle> handles;  // one per part
  std::vector<uint64_t> registrations;         // in the context's registry of generations in flight
};

// Parses `body` as a `kind` request for `caller` and submits it with a link that calls
// `wake`, the engine reserving the caller's tokens through `tokens` (its call's; settled
// here when the submission fails). Thread-safe; touches only `context` (and the engine
// through it) and `tokens`.
PreparedGeneration PrepareGeneration(HttpContext& context, ApiKind kind, const Caller& caller,
                                     const std::string& body, std::function<void()> wake,
                                     TokenReservation* tokens);

// `body` parsed as JSON after CheckJsonLimits; InvalidArgument naming the limit or
// "body: not valid JSON".
absl::StatusOr<nlohmann::json> ParseJsonBody(const std::string& body);

// A body-in, body-out route (/apply-template, /tokenize, /detokenize: tokenize_routes.h).
using JsonRoute =
    std::function<absl::StatusOr<std::string>(const engine::Engine&, const nlohmann::json&)>;
// `route`'s answer to `body` (ParseJsonBody first); with `bucket`, the answer is charged to
// it at a token per 4 bytes (rendering a template costs about what tokenizing its text does).
absl::StatusOr<std::string> AnswerJsonRoute(const engine::Engine& engine, const JsonRoute& route,
                                            const std::string& body, TokenBucket* bucket);

}  // namespace pagoda::server::http
