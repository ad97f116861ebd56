// OpenAI response bodies: completion and chat-completion objects, their streamed chunks as
// server-sent events, and usage.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/request.h"

namespace pagoda::server::http {

enum class ApiKind { kCompletion, kChat };

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details":
// {"cached_tokens"}}.
nlohmann::json UsageJson(const engine::Usage& usage);

// JSON text of `value` (invalid UTF-8, which the engine never delivers, is replaced).
std::string Dump(const nlohmann::json& value);

// Formats the responses of one request (its id, creation time and model are fixed).
class ResponseFormatter {
 public:
  ResponseFormatter(ApiKind kind, std::string id, int64_t created, std::string model);

  // The whole non-streamed response: "text_completion" or "chat.completion".
  std::string Full(const std::string& text, const std::string& finish_reason,
                   const engine::Usage& usage) const;
  // One SSE event carrying a text delta; `finish_reason` "" is null. With `usage_null` the
  // chunk carries "usage": null (stream_options.include_usage).
  std::string Chunk(const std::string& text, const std::string& finish_reason,
                    bool usage_null) const;
  // Chat's first SSE event: the assistant role with empty content.
  std::string RoleChunk(bool usage_null) const;
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
};

}  // namespace pagoda::server::http
