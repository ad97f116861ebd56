// OpenAI response bodies: completion and chat-completion objects, their streamed chunks as
// server-sent events, and usage.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "chat/reasoning.h"
#include "chat/tool_call_id.h"
#include "engine/request.h"
#include "server/http/openai_tools.h"

namespace pagoda::server::http {

enum class ApiKind { kCompletion, kChat, kResponses };

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details":
// {"cached_tokens"}}.
nlohmann::json UsageJson(const engine::Usage& usage);

// JSON text of `value` (invalid UTF-8, which the engine never delivers, is replaced).
std::string Dump(const nlohmann::json& value);

// Formats the responses of one request (its id, creation time and model are fixed).
class ResponseFormatter {
 public:
  ResponseFormatter(ApiKind kind, std::string id, int64_t created, std::string model);

  // Chat: the texts' tool calls are parsed out as `parsing` says (AssistantMessage), with
  // ids from `ids`.
  void set_tool_calls(ToolCallParsing parsing,
                      chat::ToolCallIdSource ids = chat::RandomToolCallIds());
  // Chat: the texts' reasoning is split out as `format` says, into the message's
  // reasoning_content (and vLLM's `reasoning`), before tool calls are looked for.
  void set_reasoning(chat::ReasoningFormat format) { reasoning_ = std::move(format); }

  // The whole non-streamed response: "text_completion" or "chat.completion", choice i
  // with texts[i], finish_reasons[i] (same sizes; "tool_calls" when the text holds tool
  // calls) and logprobs[i] (null or absent: none; openai_logprobs.h); reasoning_open[i]
  // (absent: false) says text i starts inside its reasoning (SplitReasoning).
  std::string Full(const std::vector<std::string>& texts,
                   const std::vector<std::string>& finish_reasons, const engine::Usage& usage,
                   const std::vector<nlohmann::json>& logprobs = {},
                   const std::vector<bool>& reasoning_open = {}) const;
  // One SSE event carrying a text delta of choice `index`; `finish_reason` "" is null. A
  // chat chunk with a finish reason and no text has an empty delta {}. With `usage_null`
  // the chunk carries "usage": null (stream_options.include_usage). `logprobs`: the logprobs
  // of the tokens whose text it carries (openai_logprobs.h), or null.
  std::string Chunk(int32_t index, const std::string& text, const std::string& finish_reason,
                    bool usage_null, const nlohmann::json& logprobs = nullptr) const;
  // Chat: an SSE event carrying `reasoning` (as reasoning_content and reasoning, when not
  // empty) and `delta`'s content and tool calls (ToolCallStreams) of choice `index`, with
  // finish_reason null; otherwise as Chunk.
  std::string DeltaChunk(int32_t index, const std::string& reasoning,
                         const chat::ToolCallStreamDelta& delta, bool usage_null,
                         const nlohmann::json& logprobs = nullptr) const;
  // Chat's first SSE event of choice `index`: the assistant role with empty content.
  std::string RoleChunk(int32_t index, bool usage_null) const;
  // The last SSE event before [DONE] when include_usage: no choices, the usage.
  std::string UsageChunk(const engine::Usage& usage) const;
  // "data: [DONE]".
  static std::string Done();
  // An SSE event carrying an error body (a failure after the stream started).
  static std::string ErrorEvent(const std::string& error_body);

  const std::string& id() const { return id_; }

 private:
  nlohmann::json Envelope(bool chunk) const;

  ApiKind kind_;
  std::string id_;
  int64_t created_;
  std::string model_;
  std::optional<ToolCallParsing> tool_calls_;
  chat::ToolCallIdSource tool_call_ids_;
  std::optional<chat::ReasoningFormat> reasoning_;
};

}  // namespace pagoda::server::http
