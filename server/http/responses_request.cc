#include "server/http/responses_request.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pagoda::server::http {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

absl::Status Bad(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

const ordered_json* Field(const ordered_json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return nullptr;
  return &*it;
}

// A content value: a string, or parts of text (input_text, output_text, text, refusal)
// joined by newlines.
absl::StatusOr<std::string> TextOf(const ordered_json& content, const std::string& field) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return Bad(field, "must be a string or an array of text parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const ordered_json& part = content[i];
    const ordered_json* type = part.is_object() ? Field(part, "type") : nullptr;
    const ordered_json* t = part.is_object() ? Field(part, "text") : nullptr;
    if (type != nullptr && *type == "refusal") t = Field(part, "refusal");
    const bool text_part =
        type != nullptr &&
        (*type == "input_text" || *type == "output_text" || *type == "text" || *type == "refusal" ||
         *type == "reasoning_text" || *type == "summary_text");
    if (!text_part || t == nullptr || !t->is_string()) {
      return Bad(absl::StrCat(field, "[", i, "]"), "only text parts are supported");
    }
    if (!text.empty()) text += '\n';
    text += t->get<std::string>();
  }
  return text;
}

// The conversation of `instructions` and `input`.
absl::StatusOr<ordered_json> Messages(const ordered_json& body) {
  ordered_json messages = ordered_json::array();
  if (const ordered_json* instructions = Field(body, "instructions")) {
    if (!instructions->is_string()) return Bad("instructions", "must be a string");
    messages.push_back({{"role", "system"}, {"content", *instructions}});
  }
  const ordered_json* input = Field(body, "input");
  if (input == nullptr) return Bad("input", "is required");
  if (input->is_string()) {
    messages.push_back({{"role", "user"}, {"content", *input}});
    return messages;
  }
  if (!input->is_array() || input->empty()) {
    return Bad("input", "must be a string or a non-empty array of items");
  }
  std::string reasoning;  // a reasoning item's text, for the assistant turn after it
  auto assistant = [&]() -> ordered_json& {
    // Calls right after an assistant turn (or after other calls) belong to that turn.
    if (messages.empty() || messages.back()["role"] != "assistant") {
      messages.push_back({{"role", "assistant"}, {"content", nullptr}});
    }
    ordered_json& turn = messages.back();
    if (!reasoning.empty()) turn["reasoning_content"] = std::exchange(reasoning, {});
    return turn;
  };
  for (size_t k = 0; k < input->size(); ++k) {
    const ordered_json& item = (*input)[k];
    const std::string field = absl::StrCat("input[", k, "]");
    if (!item.is_object()) return Bad(field, "must be an object");
    const ordered_json* type_field = Field(item, "type");
    if (type_field != nullptr && !type_field->is_string()) {
      return Bad(field + ".type", "must be a string");
    }
    const std::string type = type_field != nullptr ? type_field->get<std::string>() : "message";
    if (type == "message") {
      const ordered_json* role = Field(item, "role");
      if (role == nullptr || !role->is_string()) return Bad(field + ".role", "must be a string");
      const ordered_json* content = Field(item, "content");
      if (content == nullptr) return Bad(field + ".content", "is required");
      absl::StatusOr<std::string> text = TextOf(*content, field + ".content");
      if (!text.ok()) return text.status();
      std::string r = role->get<std::string>();
      if (r == "developer") r = "system";
      if (r == "assistant") {
        ordered_json& turn = assistant();
        if (turn.contains("tool_calls")) {  // text after calls: a turn of its own
          messages.push_back({{"role", "assistant"}, {"content", *text}});
        } else {
          turn["content"] = turn["content"].is_string()
                                ? ordered_json(turn["content"].get<std::string>() + *text)
                                : ordered_json(*text);
        }
      } else {
        messages.push_back({{"role", r}, {"content", *std::move(text)}});
      }
    } else if (type == "function_call") {
      const ordered_json* call_id = Field(item, "call_id");
      const ordered_json* name = Field(item, "name");
      const ordered_json* arguments = Field(item, "arguments");
      if (call_id == nullptr || !call_id->is_string()) {
        return Bad(field + ".call_id", "must be a string");
      }
      if (name == nullptr || !name->is_string()) return Bad(field + ".name", "must be a string");
      if (arguments == nullptr || !arguments->is_string()) {
        return Bad(field + ".arguments", "must be a string of JSON");
      }
      ordered_json& turn = assistant();
      if (!turn.contains("tool_calls")) turn["tool_calls"] = ordered_json::array();
      turn["tool_calls"].push_back({{"id", *call_id},
                                    {"type", "function"},
                                    {"function", {{"name", *name}, {"arguments", *arguments}}}});
    } else if (type == "function_call_output") {
      const ordered_json* call_id = Field(item, "call_id");
      const ordered_json* output = Field(item, "output");
      if (call_id == nullptr || !call_id->is_string()) {
        return Bad(field + ".call_id", "must be a string");
      }
      if (output == nullptr) return Bad(field + ".output", "is required");
      absl::StatusOr<std::string> text = TextOf(*output, field + ".output");
      if (!text.ok()) return text.status();
      messages.push_back({{"role", "tool"}, {"tool_call_id", *call_id}, {"content", *text}});
    } else if (type == "reasoning") {
      const ordered_json* content = Field(item, "content");
      if (content == nullptr || content->empty()) content = Field(item, "summary");
      if (content != nullptr) {
        absl::StatusOr<std::string> text = TextOf(*content, field + ".content");
        if (!text.ok()) return text.status();
        reasoning = *std::move(text);
      }
    } else if (type == "item_reference") {
      return Bad(field, "this server keeps no items; send the item itself");
    } else {
      return Bad(field + ".type", absl::StrCat("'", type,
                                               "' is not supported (message, function_call, "
                                               "function_call_output and reasoning items are)"));
    }
  }
  return messages;
}

// Function tools in the chat form ({"type": "function", "function": {...}}).
absl::StatusOr<ordered_json> Tools(const ordered_json& tools) {
  if (!tools.is_array()) return Bad("tools", "must be an array");
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ordered_json& t = tools[i];
    const std::string field = absl::StrCat("tools[", i, "]");
    if (!t.is_object() || t.value("type", "") != "function") {
      return Bad(field + ".type", "only function tools are supported");
    }
    ordered_json function = ordered_json::object();
    for (const char* key : {"name", "description", "parameters", "strict"}) {
      if (const ordered_json* v = Field(t, key)) function[key] = *v;
    }
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return out;
}

absl::StatusOr<ordered_json> ToolChoice(const ordered_json& choice) {
  if (choice.is_string()) return choice;
  if (choice.is_object() && choice.value("type", "") == "function") {
    const ordered_json* name = Field(choice, "name");
    if (name == nullptr || !name->is_string()) return Bad("tool_choice.name", "must be a string");
    return ordered_json{{"type", "function"}, {"function", {{"name", *name}}}};
  }
  return Bad("tool_choice", "must be none, auto, required or {\"type\": \"function\", \"name\"}");
}

// text.format as chat's response_format.
absl::StatusOr<ordered_json> ResponseFormat(const ordered_json& text) {
  if (!text.is_object()) return Bad("text", "must be an object");
  const ordered_json* format = Field(text, "format");
  if (format == nullptr) return ordered_json(nullptr);
  if (!format->is_object()) return Bad("text.format", "must be an object");
  const std::string type = format->value("type", "");
  if (type == "text") return ordered_json(nullptr);
  if (type == "json_object") return ordered_json{{"type", "json_object"}};
  if (type == "json_schema") {
    ordered_json schema = ordered_json::object();
    for (const char* key : {"name", "description", "schema", "strict"}) {
      if (const ordered_json* v = Field(*format, key)) schema[key] = *v;
    }
    return ordered_json{{"type", "json_schema"}, {"json_schema", std::move(schema)}};
  }
  return Bad("text.format.type", "must be text, json_object or json_schema");
}

absl::StatusOr<ordered_json> ChatBody(const ordered_json& body) {
  if (Field(body, "previous_response_id") != nullptr) {
    return Bad("previous_response_id",
               "this server keeps no responses (it is stateless, as with store: false); send "
               "the whole conversation in input");
  }
  if (Field(body, "conversation") != nullptr) {
    return Bad("conversation", "this server keeps no conversations; send them in input");
  }
  if (const ordered_json* background = Field(body, "background");
      background != nullptr && *background != false) {
    return Bad("background", "is not supported by this server");
  }
  ordered_json chat = ordered_json::object();
  absl::StatusOr<ordered_json> messages = Messages(body);
  if (!messages.ok()) return messages.status();
  chat["messages"] = *std::move(messages);
  // Fields chat takes as they are.
  for (const char* key : {"model",
                          "temperature",
                          "top_p",
                          "top_k",
                          "min_p",
                          "seed",
                          "stream",
                          "parallel_tool_calls",
                          "chat_template_kwargs",
                          "thinking_token_budget",
                          "presence_penalty",
                          "frequency_penalty",
                          "repetition_penalty",
                          "stop",
                          "priority",
                          "cache_prompt",
                          "cache_salt",
                          "request_id",
                          "ignore_eos",
                          "logit_bias"}) {
    if (const ordered_json* v = Field(body, key)) chat[key] = *v;
  }
  if (const ordered_json* max = Field(body, "max_output_tokens")) {
    chat["max_completion_tokens"] = *max;
  }
  if (const ordered_json* tools = Field(body, "tools")) {
    absl::StatusOr<ordered_json> t = Tools(*tools);
    if (!t.ok()) return t.status();
    if (!t->empty()) chat["tools"] = *std::move(t);
  }
  if (const ordered_json* choice = Field(body, "tool_choice")) {
    absl::StatusOr<ordered_json> c = ToolChoice(*choice);
    if (!c.ok()) return c.status();
    chat["tool_choice"] = *std::move(c);
  }
  if (const ordered_json* text = Field(body, "text")) {
    absl::StatusOr<ordered_json> format = ResponseFormat(*text);
    if (!format.ok()) return format.status();
    if (!format->is_null()) chat["response_format"] = *std::move(format);
  }
  if (const ordered_json* reasoning = Field(body, "reasoning")) {
    if (!reasoning->is_object()) return Bad("reasoning", "must be an object");
    if (const ordered_json* effort = Field(*reasoning, "effort")) {
      chat["reasoning_effort"] = *effort;
    }
  }
  return chat;
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseResponsesRequest(const json& body, std::string_view body_text) {
  if (!body.is_object()) return Bad("body", "must be a JSON object");
  // The text again, with its keys in the order sent (a schema's properties keep it).
  ordered_json ordered = body_text.empty()
                             ? ordered_json::parse(body.dump())
                             : ordered_json::parse(body_text, nullptr, /*allow_exceptions=*/false);
  if (ordered.is_discarded()) return Bad("body", "not valid JSON");
  absl::StatusOr<ordered_json> chat = ChatBody(ordered);
  if (!chat.ok()) return chat.status();
  const std::string chat_text = chat->dump(-1, ' ', false, json::error_handler_t::replace);
  const json chat_body = json::parse(chat_text);
  absl::StatusOr<OpenAiRequest> out = ParseChatCompletionRequest(chat_body, chat_text);
  if (!out.ok()) return out.status();
  // What the response object repeats.
  json echo = json::object();
  for (const char* key :
       {"instructions", "max_output_tokens", "metadata", "parallel_tool_calls", "temperature",
        "top_p", "tool_choice", "tools", "text", "reasoning", "user"}) {
    auto it = body.find(key);
    echo[key] = it != body.end() ? *it : json(nullptr);
  }
  out->responses = std::move(echo);
  return out;
}

}  // namespace pagoda::server::http
