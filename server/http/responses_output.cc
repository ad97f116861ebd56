#include "server/http/responses_output.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/http/openai_response.h"

namespace pagoda::server::http {

using nlohmann::json;

namespace {

// The value of `key` in `echo`, or `fallback` when the request left it out.
json Echoed(const json& echo, const char* key, json fallback) {
  auto it = echo.find(key);
  return it == echo.end() || it->is_null() ? std::move(fallback) : *it;
}

}  // namespace

ResponsesOutput::ResponsesOutput(std::string id, int64_t created_at, std::string model, json echo)
    : id_(std::move(id)),
      created_at_(created_at),
      model_(std::move(model)),
      echo_(echo.is_object() ? std::move(echo) : json::object()) {}

std::string ResponsesOutput::Event(const std::string& type, json data) {
  data["type"] = type;
  data["sequence_number"] = sequence_++;
  return absl::StrCat("event: ", type, "\ndata: ", Dump(data), "\n\n");
}

std::vector<std::string> ResponsesOutput::Open() {
  std::vector<std::string> events;
  events.push_back(Event("response.created", {{"response", Response()}}));
  events.push_back(Event("response.in_progress", {{"response", Response()}}));
  return events;
}

json ResponsesOutput::ItemJson(const Item& item) const {
  const char* status = item.done ? "completed" : "in_progress";
  switch (item.kind) {
    case Kind::kReasoning: {
      json content = json::array();
      if (item.done) content.push_back({{"type", "reasoning_text"}, {"text", item.text}});
      return {{"id", item.id},
              {"type", "reasoning"},
              {"summary", json::array()},
              {"content", std::move(content)},
              {"status", status}};
    }
    case Kind::kMessage: {
      json content = json::array();
      if (item.done) {
        content.push_back({{"type", "output_text"},
                           {"text", item.text},
                           {"annotations", json::array()},
                           {"logprobs", json::array()}});
      }
      return {{"id", item.id},
              {"type", "message"},
              {"status", status},
              {"role", "assistant"},
              {"content", std::move(content)}};
    }
    case Kind::kFunctionCall:
      return {{"id", item.id},     {"type", "function_call"},
              {"status", status},  {"call_id", item.call_id},
              {"name", item.name}, {"arguments", item.done ? item.text : std::string()}};
  }
  return nullptr;
}

void ResponsesOutput::OpenItem(Kind kind, std::vector<std::string>* events,
                               const chat::ToolCallDelta* call) {
  CloseOpenItem(events);
  const char* prefix = kind == Kind::kReasoning ? "rs_" : kind == Kind::kMessage ? "msg_" : "fc_";
  Item item{.kind = kind, .id = absl::StrCat(prefix, id_.substr(5), "_", items_.size())};
  if (call != nullptr) {
    item.call_id = call->id;
    item.name = call->name;
  }
  items_.push_back(std::move(item));
  item_open_ = true;
  const size_t index = items_.size() - 1;
  events->push_back(Event("response.output_item.added",
                          {{"output_index", index}, {"item", ItemJson(items_.back())}}));
  if (kind == Kind::kMessage) {
    events->push_back(
        Event("response.content_part.added",
              {{"item_id", items_.back().id},
               {"output_index", index},
               {"content_index", 0},
               {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}}));
  } else if (kind == Kind::kReasoning) {
    events->push_back(Event("response.content_part.added",
                            {{"item_id", items_.back().id},
                             {"output_index", index},
                             {"content_index", 0},
                             {"part", {{"type", "reasoning_text"}, {"text", ""}}}}));
  }
}

void ResponsesOutput::CloseOpenItem(std::vector<std::string>* events) {
  if (!item_open_) return;
  item_open_ = false;
  Item& item = items_.back();
  item.done = true;
  const size_t index = items_.size() - 1;
  switch (item.kind) {
    case Kind::kReasoning:
      events->push_back(Event("response.reasoning_text.done", {{"item_id", item.id},
                                                               {"output_index", index},
                                                               {"content_index", 0},
                                                               {"text", item.text}}));
      events->push_back(Event("response.content_part.done",
                              {{"item_id", item.id},
                               {"output_index", index},
                               {"content_index", 0},
                               {"part", {{"type", "reasoning_text"}, {"text", item.text}}}}));
      break;
    case Kind::kMessage: {
      json part = {{"type", "output_text"}, {"text", item.text}, {"annotations", json::array()}};
      events->push_back(Event("response.output_text.done", {{"item_id", item.id},
                                                            {"output_index", index},
                                                            {"content_index", 0},
                                                            {"text", item.text},
                                                            {"logprobs", json::array()}}));
      events->push_back(Event("response.content_part.done", {{"item_id", item.id},
                                                             {"output_index", index},
                                                             {"content_index", 0},
                                                             {"part", std::move(part)}}));
      break;
    }
    case Kind::kFunctionCall:
      events->push_back(Event("response.function_call_arguments.done", {{"item_id", item.id},
                                                                        {"output_index", index},
                                                                        {"name", item.name},
                                                                        {"arguments", item.text}}));
      break;
  }
  events->push_back(
      Event("response.output_item.done", {{"output_index", index}, {"item", ItemJson(item)}}));
}

std::vector<std::string> ResponsesOutput::Add(const std::string& reasoning,
                                              const chat::ToolCallStreamDelta& answer) {
  std::vector<std::string> events;
  auto open_kind = [this](Kind kind) { return item_open_ && items_.back().kind == kind; };
  if (!reasoning.empty()) {
    if (!open_kind(Kind::kReasoning)) OpenItem(Kind::kReasoning, &events);
    items_.back().text += reasoning;
    events.push_back(Event("response.reasoning_text.delta", {{"item_id", items_.back().id},
                                                             {"output_index", items_.size() - 1},
                                                             {"content_index", 0},
                                                             {"delta", reasoning}}));
  }
  if (!answer.content.empty()) {
    if (!open_kind(Kind::kMessage)) OpenItem(Kind::kMessage, &events);
    items_.back().text += answer.content;
    events.push_back(Event("response.output_text.delta", {{"item_id", items_.back().id},
                                                          {"output_index", items_.size() - 1},
                                                          {"content_index", 0},
                                                          {"delta", answer.content},
                                                          {"logprobs", json::array()}}));
  }
  for (const chat::ToolCallDelta& call : answer.tool_calls) {
    if (!call.id.empty() || !open_kind(Kind::kFunctionCall)) {
      OpenItem(Kind::kFunctionCall, &events, &call);
    }
    if (call.arguments.empty()) continue;
    items_.back().text += call.arguments;
    events.push_back(
        Event("response.function_call_arguments.delta", {{"item_id", items_.back().id},
                                                         {"output_index", items_.size() - 1},
                                                         {"delta", call.arguments}}));
  }
  return events;
}

std::vector<std::string> ResponsesOutput::Close(const std::string& finish_reason,
                                                const engine::Usage& usage) {
  std::vector<std::string> events;
  CloseOpenItem(&events);
  usage_ = usage;
  has_usage_ = true;
  if (finish_reason == "length") {
    status_ = "incomplete";
    incomplete_reason_ = "max_output_tokens";
  } else {
    status_ = "completed";
  }
  events.push_back(Event(status_ == "completed" ? "response.completed" : "response.incomplete",
                         {{"response", Response()}}));
  return events;
}

json ResponsesOutput::Response() const {
  json output = json::array();
  for (const Item& item : items_) output.push_back(ItemJson(item));
  json usage = nullptr;
  if (has_usage_) {
    usage = {{"input_tokens", usage_.prompt_tokens},
             {"input_tokens_details", {{"cached_tokens", usage_.cached_tokens}}},
             {"output_tokens", usage_.completion_tokens},
             {"total_tokens", usage_.prompt_tokens + usage_.completion_tokens}};
  }
  return {
      {"id", id_},
      {"object", "response"},
      {"created_at", created_at_},
      {"status", status_},
      {"error", nullptr},
      {"incomplete_details",
       incomplete_reason_.empty() ? json(nullptr) : json{{"reason", incomplete_reason_}}},
      {"instructions", Echoed(echo_, "instructions", nullptr)},
      {"max_output_tokens", Echoed(echo_, "max_output_tokens", nullptr)},
      {"metadata", Echoed(echo_, "metadata", json::object())},
      {"model", model_},
      {"output", std::move(output)},
      {"parallel_tool_calls", Echoed(echo_, "parallel_tool_calls", true)},
      {"previous_response_id", nullptr},
      {"reasoning", Echoed(echo_, "reasoning", json{{"effort", nullptr}, {"summary", nullptr}})},
      {"store", false},
      {"temperature", Echoed(echo_, "temperature", 1.0)},
      {"text", Echoed(echo_, "text", json{{"format", {{"type", "text"}}}})},
      {"tool_choice", Echoed(echo_, "tool_choice", "auto")},
      {"tools", Echoed(echo_, "tools", json::array())},
      {"top_p", Echoed(echo_, "top_p", 1.0)},
      {"truncation", "disabled"},
      {"usage", std::move(usage)},
      {"user", Echoed(echo_, "user", nullptr)}};
}

std::string ResponsesOutput::ErrorEvent(const std::string& error_body) {
  json body = json::parse(error_body, nullptr, /*allow_exceptions=*/false);
  json error = body.is_object() && body.contains("error") ? body["error"] : json::object();
  return Event("error", {{"code", error.value("code", json(nullptr))},
                         {"message", error.value("message", "")},
                         {"param", error.value("param", json(nullptr))}});
}

}  // namespace pagoda::server::http
