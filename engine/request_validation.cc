#include "engine/request_validation.h"

#include <cmath>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "model/utf8.h"

namespace pagoda::engine {

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

absl::Status ValidateSampling(const SamplingParams& p) {
  if (!(p.temperature >= 0) || std::isinf(p.temperature)) {
    return Invalid("temperature", "must be a finite number >= 0");
  }
  if (!(p.top_p > 0 && p.top_p <= 1)) return Invalid("top_p", "must be in (0, 1]");
  if (p.top_k < 0) return Invalid("top_k", "must be >= 0 (0 disables it)");
  if (!(p.min_p >= 0 && p.min_p <= 1)) return Invalid("min_p", "must be in [0, 1]");
  if (!(p.repetition_penalty > 0) || std::isinf(p.repetition_penalty)) {
    return Invalid("repetition_penalty", "must be a finite number > 0");
  }
  if (!(p.presence_penalty >= -2 && p.presence_penalty <= 2)) {
    return Invalid("presence_penalty", "must be in [-2, 2]");
  }
  if (!(p.frequency_penalty >= -2 && p.frequency_penalty <= 2)) {
    return Invalid("frequency_penalty", "must be in [-2, 2]");
  }
  if (p.logprobs.has_value() && (*p.logprobs < 0 || *p.logprobs > 20)) {
    return Invalid("logprobs", "must be in [0, 20]");
  }
  if (p.prompt_logprobs.has_value() && (*p.prompt_logprobs < 0 || *p.prompt_logprobs > 20)) {
    return Invalid("prompt_logprobs", "must be in [0, 20]");
  }
  return absl::OkStatus();
}

absl::Status ValidateRequestId(const std::string& id) {
  if (id.size() > 256) return Invalid("request_id", "is longer than 256 bytes");
  if (!model::IsValidUtf8(id)) return Invalid("request_id", "is not valid UTF-8");
  for (unsigned char c : id) {
    if (c < 0x20 || c == 0x7f) return Invalid("request_id", "contains a control character");
  }
  return absl::OkStatus();
}

absl::StatusOr<ChatPromptText> RenderChecked(const ChatPrompt& chat,
                                             const std::vector<ChatMessage>& messages,
                                             const nlohmann::ordered_json* tools,
                                             const nlohmann::json* kwargs,
                                             bool add_generation_prompt, int64_t max_prompt_bytes) {
  // A message counts its role and content plus what any template frames it with, so that
  // half a million empty messages do not pass as zero bytes.
  constexpr int64_t kFramingBytesPerMessage = 16;
  int64_t bytes = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    std::vector<std::string_view> fields = {m.role, m.content, m.tool_call_id, m.reasoning_content};
    for (const ChatToolCall& c : m.tool_calls) {
      fields.insert(fields.end(), {c.id, c.name, c.arguments});
    }
    // Each tool call is framed too (its tags and JSON keys).
    bytes += kFramingBytesPerMessage * static_cast<int64_t>(1 + m.tool_calls.size());
    for (std::string_view f : fields) {
      bytes += static_cast<int64_t>(f.size());
      if (!model::IsValidUtf8(f)) {
        return Invalid(absl::StrCat("messages[", i, "]"), "is not valid UTF-8");
      }
    }
  }
  // Replaced, not thrown on: the door's JSON parser has already refused invalid UTF-8.
  if (tools != nullptr) {
    bytes += static_cast<int64_t>(
        tools->dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).size());
  }
  if (kwargs != nullptr) {
    if (!kwargs->is_object()) return Invalid("chat_template_kwargs", "must be a JSON object");
    for (const auto& [name, value] : kwargs->items()) {
      if (IsReservedTemplateVariable(name)) {
        return Invalid("chat_template_kwargs",
                       absl::StrCat("'", name, "' is set by the server, not the request"));
      }
    }
    bytes += static_cast<int64_t>(
        kwargs->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size());
  }
  if (bytes > max_prompt_bytes) {
    return Invalid("messages", absl::StrCat("have ", bytes, " bytes; at most ", max_prompt_bytes,
                                            " are accepted (max_prompt_bytes)"));
  }
  return chat.RenderWithSpans(messages, add_generation_prompt, tools, kwargs);
}

bool IsReservedTemplateVariable(std::string_view name) {
  for (std::string_view reserved :
       {"messages", "tools", "bos_token", "eos_token", "add_generation_prompt", "raise_exception",
        "strftime_now", "namespace", "dict", "range"}) {
    if (name == reserved) return true;
  }
  return false;
}

}  // namespace pagoda::engine
