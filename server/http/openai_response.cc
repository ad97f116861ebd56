#include "server/http/openai_response.h"

namespace pagoda::server::http {
namespace {

using nlohmann::json;

json FinishReason(const std::string& reason) {
  return reason.empty() ? json(nullptr) : json(reason);
}

std::string Event(const json& data) { return "data: " + Dump(data) + "\n\n"; }

}  // namespace

std::string Dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

json UsageJson(const engine::Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

ResponseFormatter::ResponseFormatter(ApiKind kind, std::string id, int64_t created,
                                     std::string model)
    : kind_(kind), id_(std::move(id)), created_(created), model_(std::move(model)) {}

void ResponseFormatter::set_tool_calls(ToolCallParsing parsing, chat::ToolCallIdSource ids) {
  tool_calls_ = parsing;
  tool_call_ids_ = std::move(ids);
}

json ResponseFormatter::Envelope(bool chunk) const {
  const char* object = kind_ == ApiKind::kCompletion ? "text_completion"
                       : chunk                       ? "chat.completion.chunk"
                                                     : "chat.completion";
  return {{"id", id_},
          {"object", object},
          {"created", created_},
          {"model", model_},
          {"system_fingerprint", nullptr}};
}

std::string ResponseFormatter::Full(const std::vector<std::string>& texts,
                                    const std::vector<std::string>& finish_reasons,
                                    const engine::Usage& usage, const std::vector<json>& logprobs,
                                    const std::vector<bool>& reasoning_open) const {
  json out = Envelope(false);
  json choices = json::array();
  for (size_t i = 0; i < texts.size(); ++i) {
    std::string reason = i < finish_reasons.size() ? finish_reasons[i] : std::string();
    json choice = {{"index", i}, {"logprobs", i < logprobs.size() ? logprobs[i] : json(nullptr)}};
    if (kind_ == ApiKind::kCompletion) {
      choice["text"] = texts[i];
    } else {
      if (!reasoning_.has_value()) {
        choice["message"] = AssistantMessage(texts[i], tool_calls_, tool_call_ids_, &reason);
      } else {
        const bool open = i < reasoning_open.size() && reasoning_open[i];
        chat::ReasoningSplit split = chat::SplitReasoning(texts[i], *reasoning_, open);
        json message = AssistantMessage(split.content, tool_calls_, tool_call_ids_, &reason);
        if (split.has_reasoning) {
          message["reasoning_content"] = split.reasoning;
          message["reasoning"] = std::move(split.reasoning);
        }
        choice["message"] = std::move(message);
      }
    }
    choice["finish_reason"] = FinishReason(reason);
    choices.push_back(std::move(choice));
  }
  out["choices"] = std::move(choices);
  out["usage"] = UsageJson(usage);
  return Dump(out);
}

std::string ResponseFormatter::Chunk(int32_t index, const std::string& text,
                                     const std::string& finish_reason, bool usage_null,
                                     const json& logprobs) const {
  json out = Envelope(true);
  json choice = {
      {"index", index}, {"logprobs", logprobs}, {"finish_reason", FinishReason(finish_reason)}};
  if (kind_ == ApiKind::kCompletion) {
    choice["text"] = text;
  } else {
    choice["delta"] =
        (text.empty() && !finish_reason.empty()) ? json::object() : json{{"content", text}};
  }
  out["choices"] = json::array({choice});
  if (usage_null) out["usage"] = nullptr;
  return Event(out);
}

std::string ResponseFormatter::DeltaChunk(int32_t index, const std::string& reasoning,
                                          const chat::ToolCallStreamDelta& delta, bool usage_null,
                                          const json& logprobs) const {
  json out = Envelope(true);
  json d = json::object();
  if (!reasoning.empty()) {
    d["reasoning_content"] = reasoning;
    d["reasoning"] = reasoning;
  }
  if (!delta.content.empty()) d["content"] = delta.content;
  if (!delta.tool_calls.empty()) d["tool_calls"] = ToolCallDeltasJson(delta.tool_calls);
  out["choices"] = json::array({{{"index", index},
                                 {"delta", std::move(d)},
                                 {"logprobs", logprobs},
                                 {"finish_reason", nullptr}}});
  if (usage_null) out["usage"] = nullptr;
  return Event(out);
}

std::string ResponseFormatter::RoleChunk(int32_t index, bool usage_null) const {
  json out = Envelope(true);
  out["choices"] = json::array({{{"index", index},
                                 {"delta", {{"role", "assistant"}, {"content", ""}}},
                                 {"logprobs", nullptr},
                                 {"finish_reason", nullptr}}});
  if (usage_null) out["usage"] = nullptr;
  return Event(out);
}

std::string ResponseFormatter::UsageChunk(const engine::Usage& usage) const {
  json out = Envelope(true);
  out["choices"] = json::array();
  out["usage"] = UsageJson(usage);
  return Event(out);
}

std::string ResponseFormatter::Done() { return "data: [DONE]\n\n"; }

std::string ResponseFormatter::ErrorEvent(const std::string& error_body) {
  return "data: " + error_body + "\n\n";
}

}  // namespace pagoda::server::http
