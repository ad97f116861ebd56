// OpenAI request bodies (POST /v1/completions, /v1/chat/completions, /apply-template) to
// engine requests. Only JSON shapes are checked here (a field of the wrong type, a feature
// the engine lacks); values are validated by the engine (Engine::Submit), once for both
// front doors. Unknown fields are ignored, as OpenAI-compatible servers do.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/request.h"
#include "server/http/openai_tools.h"

namespace pagoda::server::http {

// One prompt of a prompt array (completions): text or token ids.
struct PromptInput {
  std::string text;
  std::vector<int32_t> token_ids;
};

// The most prompts one /v1/completions request may carry (each is a request of its own).
inline constexpr size_t kMaxPromptsPerRequest = 128;

struct OpenAiRequest {
  engine::GenerationRequest request;  // with the first prompt
  // Completions' prompt array past its first prompt: each runs as `request` with its own
  // prompt (its own engine request, validated and admitted on its own); choice i * n + j
  // is prompt i's sample j, as OpenAI.
  std::vector<PromptInput> more_prompts;
  std::string model;           // "model" as sent; "" when absent
  bool stream = false;         // "stream"
  bool include_usage = false;  // "stream_options": {"include_usage": true}
  bool echo = false;           // completions' "echo": the choices' text starts with the prompt
  // Chat's tools, tool_choice and parallel_tool_calls (openai_tools.h); unset: no tools.
  // Applied to `request` once the model's tool-call format is known (ApplyChatTools).
  std::optional<ChatToolsRequest> tools;
  // Chat: the most reasoning tokens (vLLM's thinking_token_budget), then the close marker
  // is forced; unset: the server's --reasoning-budget.
  std::optional<int32_t> reasoning_budget;
  // /v1/responses: the request's fields the response object repeats (instructions, tools,
  // tool_choice, text, ...); null for the other routes.
  nlohmann::json responses;
};

// /v1/completions: prompt (a string, token ids, or an array of strings or of token-id
// arrays: OpenAiRequest::more_prompts), max_tokens (default 16, as OpenAI), temperature (in [0, 2],
// as OpenAI), top_p, seed, stop, n, presence/frequency_penalty, stream, stream_options, and the
// extensions top_k, min_p, repetition_penalty, ignore_eos, stop_token_ids, priority, logit_bias (an
// object of token id strings to biases), logprobs (an integer k: the chosen token and the k
// most likely, 0..20 as vLLM), echo (the prompt's text, and with logprobs its tokens with
// the first one's null, before the completion's; with echo max_tokens may be 0).
// InvalidArgument naming the field for a wrong type, a temperature out of range or an
// unsupported feature (suffix, ...). `body_text`, when given, is the text `body` was parsed
// from (a JSON Schema's key order is taken from it: ParseResponseFormat).
absl::StatusOr<OpenAiRequest> ParseCompletionRequest(const nlohmann::json& body,
                                                     std::string_view body_text = {});

// /v1/chat/completions: messages plus the fields above (max_completion_tokens or
// max_tokens, unset = up to the context), add_generation_prompt (extension, default true),
// logprobs (true/false) with top_logprobs (0..20; only with logprobs true) instead of the
// completions' integer logprobs, tools / tool_choice / parallel_tool_calls
// (ParseChatTools), chat_template_kwargs (an object of template variables),
// reasoning_effort (a string, given to the template as `reasoning_effort` unless the kwargs
// set it) and thinking_token_budget (an integer >= 0; -1: none).
absl::StatusOr<OpenAiRequest> ParseChatCompletionRequest(const nlohmann::json& body,
                                                         std::string_view body_text = {});

// The "messages" array: objects with a string role and content that is a string, null, or
// an array of {"type": "text", "text": ...} parts (joined with newlines, as llama.cpp), the
// tool fields tool_calls and tool_call_id (ParseMessageToolFields), and an assistant
// turn's reasoning_content (or vLLM's reasoning), a string given back to the template.
absl::StatusOr<std::vector<engine::ChatMessage>> ParseMessages(const nlohmann::json& body);

}  // namespace pagoda::server::http
