// OpenAI's tool calling on /v1/chat/completions (docs/API.md "Tool calls"): the request's
// `tools`, `tool_choice` and `parallel_tool_calls`; the tool fields of its messages
// (an assistant turn's `tool_calls`, a tool turn's `tool_call_id`); what the choice asks of
// the engine (the template's `tools`, a grammar that forces a call); and the answer's
// assistant message with the calls parsed out of the output (chat/tool_calls.h).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chat/tool_call_format.h"
#include "chat/tool_call_id.h"
#include "chat/tool_call_stream.h"
#include "chat/tool_definitions.h"
#include "engine/request.h"

namespace pagoda::server::http {

struct ChatToolsRequest {
  enum class Choice {
    kNone,      // the tools are shown to the template, the output is content only
    kAuto,      // the model may call: the output's calls are parsed, the rest is content
    kRequired,  // at least one call, forced by a grammar
    kFunction,  // a call of `function`, forced by a grammar
  };
  std::vector<chat::ToolDefinition> tools;
  Choice choice = Choice::kAuto;
  std::string function;  // kFunction's tool
  bool parallel = true;  // parallel_tool_calls: more than one call per answer
};

// `tools` (chat::ParseToolDefinitions), `tool_choice` ("none", "auto", "required" or
// {"type": "function", "function": {"name": ...}} naming one of the tools) and
// `parallel_tool_calls`. std::nullopt when the body offers no tools (tool_choice then may
// only be absent, "none" or "auto"). InvalidArgument naming the field.
absl::StatusOr<std::optional<ChatToolsRequest>> ParseChatTools(const nlohmann::json& body);

// A message's tool fields: `tool_calls` (an array of {"id", "type": "function",
// "function": {"name", "arguments"}}; arguments a JSON string or an object) and
// `tool_call_id` (a string). `field` names the message in errors ("messages[2]").
absl::Status ParseMessageToolFields(const nlohmann::json& message, const std::string& field,
                                    engine::ChatMessage* out);

// How the answer's calls are parsed: the model's format, and whether more than one call is
// kept (parallel_tool_calls false keeps the first).
struct ToolCallParsing {
  chat::ToolCallFormat format = chat::ToolCallFormat::kNone;
  bool parallel = true;
  // The tools the request offered: a call to any other function stays content.
  std::shared_ptr<const chat::OfferedTools> offered;
};

// Puts `tools` into `request` for a model writing calls in `format`: the template's tools
// (chat_tools) and, for kRequired and kFunction, the grammar that forces the calls. Returns
// how to parse the output's calls, std::nullopt when it is not parsed (kNone, or a
// model whose format is kNone). InvalidArgument for a forced choice on a template with no
// recognised tool-call format, with a response_format grammar, or with a parameter schema
// the grammar compiler refuses (naming the tool and the keyword), and for tools whose JSON
// is over `max_tools_bytes` (the prompt limit they count toward), checked before any
// grammar is built.
absl::StatusOr<std::optional<ToolCallParsing>> ApplyChatTools(const ChatToolsRequest& tools,
                                                              chat::ToolCallFormat format,
                                                              int64_t max_tools_bytes,
                                                              engine::GenerationRequest* request);

// A chat choice's message for the output `text`: {"role": "assistant", "content": text}, or
// with `parsing` the calls split out: "tool_calls" [{id, type, function: {name,
// arguments}}] and the content around them (null when there is none); *finish_reason
// "stop" becomes "tool_calls" when the text holds calls ("length" stays).
nlohmann::json AssistantMessage(const std::string& text,
                                const std::optional<ToolCallParsing>& parsing,
                                const chat::ToolCallIdSource& ids, std::string* finish_reason);

// Streamed chat choices' tool calls: one chat::ToolCallStreamParser per choice, so that the
// deltas of a choice concatenate to AssistantMessage's message for its whole text.
class ToolCallStreams {
 public:
  ToolCallStreams(ToolCallParsing parsing, int32_t n,
                  chat::ToolCallIdSource ids = chat::RandomToolCallIds());

  // Choice i's delta for its next `text`; with `at_end` (the choice ended) everything still
  // held back too. Calls after the first are dropped when not parallel.
  chat::ToolCallStreamDelta Next(size_t i, std::string_view text, bool at_end);
  // `reason` of choice i, "stop" made "tool_calls" when it called a tool.
  std::string FinishReason(size_t i, const std::string& reason) const;

 private:
  bool parallel_;
  std::vector<chat::ToolCallStreamParser> parsers_;
  std::vector<bool> called_;
};

// OpenAI's delta.tool_calls for `calls`: {"index", "id", "type": "function", "function":
// {"name", "arguments"}} for a call's first delta, {"index", "function": {"arguments"}} after.
nlohmann::json ToolCallDeltasJson(const std::vector<chat::ToolCallDelta>& calls);

}  // namespace pagoda::server::http
