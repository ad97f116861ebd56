#include "server/http/openai_tools.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "chat/tool_call_grammar.h"
#include "chat/tool_calls.h"

namespace pagoda::server::http {
namespace {

using nlohmann::json;

absl::Status Bad(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// The field, or null when absent or JSON null.
const json* Field(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

constexpr char kChoiceShapes[] =
    "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": "
    "{\"name\": ...}}";

// tool_choice into `out` (its tools already read).
absl::Status ParseToolChoice(const json& v, ChatToolsRequest* out) {
  using Choice = ChatToolsRequest::Choice;
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "none") {
      out->choice = Choice::kNone;
    } else if (s == "auto") {
      out->choice = Choice::kAuto;
    } else if (s == "required") {
      out->choice = Choice::kRequired;
    } else {
      return Bad("tool_choice", kChoiceShapes);
    }
    return absl::OkStatus();
  }
  if (!v.is_object() || v.value("type", json()) != "function") {
    return Bad("tool_choice", kChoiceShapes);
  }
  const json* fn = Field(v, "function");
  const json* name = fn != nullptr && fn->is_object() ? Field(*fn, "name") : nullptr;
  if (name == nullptr || !name->is_string()) {
    return Bad("tool_choice.function.name", "must be a string");
  }
  out->choice = Choice::kFunction;
  out->function = name->get<std::string>();
  for (const chat::ToolDefinition& t : out->tools) {
    if (t.name == out->function) return absl::OkStatus();
  }
  return Bad("tool_choice.function.name", absl::StrCat("no tool is named \"", out->function, "\""));
}

}  // namespace

absl::StatusOr<std::optional<ChatToolsRequest>> ParseChatTools(const json& body) {
  if (!body.is_object()) return std::nullopt;
  ChatToolsRequest out;
  const json* tools = Field(body, "tools");
  if (tools != nullptr) {
    absl::StatusOr<std::vector<chat::ToolDefinition>> defs = chat::ParseToolDefinitions(*tools);
    if (!defs.ok()) return defs.status();
    out.tools = *std::move(defs);
  }
  if (const json* p = Field(body, "parallel_tool_calls")) {
    if (!p->is_boolean()) return Bad("parallel_tool_calls", "must be true or false");
    out.parallel = p->get<bool>();
  }
  const json* choice = Field(body, "tool_choice");
  if (out.tools.empty()) {
    // OpenAI takes "none" and "auto" without tools; a call cannot be forced without them.
    if (choice != nullptr && !(*choice == "none" || *choice == "auto")) {
      return Bad("tool_choice", "needs \"tools\"");
    }
    return std::nullopt;
  }
  if (choice != nullptr) {
    if (absl::Status s = ParseToolChoice(*choice, &out); !s.ok()) return s;
  }
  return out;
}

absl::Status ParseMessageToolFields(const json& m, const std::string& field,
                                    engine::ChatMessage* out) {
  if (const json* id = Field(m, "tool_call_id")) {
    if (!id->is_string()) return Bad(field + ".tool_call_id", "must be a string");
    out->tool_call_id = id->get<std::string>();
  }
  const json* calls = Field(m, "tool_calls");
  if (calls == nullptr) return absl::OkStatus();
  if (!calls->is_array()) return Bad(field + ".tool_calls", "must be an array");
  for (size_t k = 0; k < calls->size(); ++k) {
    const json& c = (*calls)[k];
    const std::string at = absl::StrCat(field, ".tool_calls[", k, "]");
    if (!c.is_object()) return Bad(at, "must be an object");
    engine::ChatToolCall call;
    if (const json* id = Field(c, "id")) {
      if (!id->is_string()) return Bad(at + ".id", "must be a string");
      call.id = id->get<std::string>();
    }
    if (const json* type = Field(c, "type"); type != nullptr && *type != "function") {
      return Bad(at + ".type", "must be \"function\"");
    }
    const json* fn = Field(c, "function");
    if (fn == nullptr || !fn->is_object()) return Bad(at + ".function", "must be an object");
    const json* name = Field(*fn, "name");
    if (name == nullptr || !name->is_string()) {
      return Bad(at + ".function.name", "must be a string");
    }
    call.name = name->get<std::string>();
    if (const json* args = Field(*fn, "arguments")) {
      if (args->is_string()) {
        call.arguments = args->get<std::string>();
      } else if (args->is_object()) {
        call.arguments = args->dump();
      } else {
        return Bad(at + ".function.arguments", "must be a JSON string or an object");
      }
    } else {
      call.arguments = "{}";
    }
    out->tool_calls.push_back(std::move(call));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<ToolCallParsing>> ApplyChatTools(const ChatToolsRequest& tools,
                                                              chat::ToolCallFormat format,
                                                              int64_t max_tools_bytes,
                                                              engine::GenerationRequest* r) {
  using Choice = ChatToolsRequest::Choice;
  r->chat_tools =
      std::make_shared<const nlohmann::ordered_json>(chat::ToolsTemplateJson(tools.tools));
  // The tools count toward the prompt (the engine's check, RenderChecked): refused here
  // already, before their grammar costs anything.
  const size_t tools_bytes =
      r->chat_tools->dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).size();
  if (static_cast<int64_t>(tools_bytes) > max_tools_bytes) {
    return Bad("tools", absl::StrCat("have ", tools_bytes, " bytes as JSON; at most ",
                                     max_tools_bytes, " are accepted (max_prompt_bytes)"));
  }
  if (tools.choice == Choice::kNone) return std::nullopt;
  auto offered = std::make_shared<chat::OfferedTools>();
  for (const chat::ToolDefinition& t : tools.tools) offered->insert(t.name);
  if (tools.choice == Choice::kAuto) {
    if (format == chat::ToolCallFormat::kNone) return std::nullopt;
    return ToolCallParsing{format, tools.parallel, std::move(offered)};
  }
  if (format == chat::ToolCallFormat::kNone) {
    return Bad("tool_choice",
               "the model's chat template writes tool calls in no format this server parses; "
               "start the server with --tool-call-parser hermes, llama3_json or mistral");
  }
  if (r->sampling.grammar != nullptr) {
    return Bad("tool_choice",
               "\"required\" or a named function cannot be combined with "
               "response_format json_object or json_schema");
  }
  chat::ToolGrammarOptions options;
  options.function = tools.choice == Choice::kFunction ? tools.function : std::string();
  // Llama 3.1's format has room for one call only.
  options.parallel = tools.parallel && format != chat::ToolCallFormat::kLlama3Json;
  absl::StatusOr<std::shared_ptr<const grammar::Grammar>> g =
      chat::BuildToolCallGrammar(format, tools.tools, options);
  if (!g.ok()) return g.status();
  r->sampling.grammar = *std::move(g);
  return ToolCallParsing{format, options.parallel, std::move(offered)};
}

json AssistantMessage(const std::string& text, const std::optional<ToolCallParsing>& parsing,
                      const chat::ToolCallIdSource& ids, std::string* finish_reason) {
  if (!parsing.has_value()) return {{"role", "assistant"}, {"content", text}};
  chat::ParsedToolCalls parsed =
      chat::ParseToolCalls(parsing->format, text, ids, parsing->offered.get());
  if (!parsing->parallel && parsed.tool_calls.size() > 1) parsed.tool_calls.resize(1);
  json message = {{"role", "assistant"}, {"content", parsed.content}};
  if (parsed.tool_calls.empty()) return message;
  if (parsed.content.empty()) message["content"] = nullptr;
  json calls = json::array();
  for (const chat::ToolCall& c : parsed.tool_calls) {
    calls.push_back({{"id", c.id},
                     {"type", "function"},
                     {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  message["tool_calls"] = std::move(calls);
  // An output cut at max_tokens stays "length": its last call may be the one cut.
  if (*finish_reason == "stop") *finish_reason = "tool_calls";
  return message;
}

ToolCallStreams::ToolCallStreams(ToolCallParsing parsing, int32_t n, chat::ToolCallIdSource ids)
    : parallel_(parsing.parallel), called_(n, false) {
  for (int32_t i = 0; i < n; ++i) parsers_.emplace_back(parsing.format, ids, parsing.offered);
}

chat::ToolCallStreamDelta ToolCallStreams::Next(size_t i, std::string_view text, bool at_end) {
  chat::ToolCallStreamDelta out = parsers_[i].Feed(text);
  if (at_end) {
    chat::ToolCallStreamDelta rest = parsers_[i].Finish();
    out.content += rest.content;
    for (chat::ToolCallDelta& d : rest.tool_calls) out.tool_calls.push_back(std::move(d));
  }
  if (!parallel_) {
    std::erase_if(out.tool_calls, [](const chat::ToolCallDelta& d) { return d.index > 0; });
  }
  if (!out.tool_calls.empty()) called_[i] = true;
  return out;
}

std::string ToolCallStreams::FinishReason(size_t i, const std::string& reason) const {
  return called_[i] && reason == "stop" ? std::string("tool_calls") : reason;
}

json ToolCallDeltasJson(const std::vector<chat::ToolCallDelta>& calls) {
  json out = json::array();
  for (const chat::ToolCallDelta& d : calls) {
    json entry = {{"index", d.index}, {"function", {{"arguments", d.arguments}}}};
    if (!d.id.empty()) {
      entry["id"] = d.id;
      entry["type"] = "function";
      entry["function"]["name"] = d.name;
    }
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace pagoda::server::http
