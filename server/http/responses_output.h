// One Responses API answer (POST /v1/responses): the response object and, streamed, its
// events in the documented order: response.created, response.in_progress; per output item
// response.output_item.added, response.content_part.added (reasoning and messages), its
// deltas (response.reasoning_text.delta, response.output_text.delta,
// response.function_call_arguments.delta), their .done events, response.content_part.done,
// response.output_item.done;
// then response.completed (response.incomplete when max_output_tokens cut it). Items come
// in the order the output writes them: reasoning, then messages and function calls.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/tool_call_stream.h"
#include "engine/request.h"

namespace pagoda::server::http {

class ResponsesOutput {
 public:
  // `echo`: the request's fields the response repeats (OpenAiRequest::responses).
  ResponsesOutput(std::string id, int64_t created_at, std::string model, nlohmann::json echo);

  // Streamed: the events that open the response.
  std::vector<std::string> Open();
  // The output's next reasoning text and answer (content and tool-call deltas, as
  // chat::ToolCallStreamParser gives them); the events that carry them.
  std::vector<std::string> Add(const std::string& reasoning,
                               const chat::ToolCallStreamDelta& answer);
  // The output ended ("stop", "length", ...): the events that close its items and the
  // response (response.completed or response.incomplete).
  std::vector<std::string> Close(const std::string& finish_reason, const engine::Usage& usage);
  // The response object as it stands (whole after Close).
  nlohmann::json Response() const;
  // An error event for a failure after the stream started (`error_body`: OpenAI's error
  // object, http_error.h).
  std::string ErrorEvent(const std::string& error_body);

  const std::string& id() const { return id_; }

 private:
  enum class Kind { kReasoning, kMessage, kFunctionCall };
  struct Item {
    Kind kind;
    std::string id;
    std::string text;  // reasoning or message text; a call's arguments
    std::string call_id;
    std::string name;
    bool done = false;
  };

  std::string Event(const std::string& type, nlohmann::json data);
  // Opens an item of `kind` (closing the one open); with `call` a function call's.
  void OpenItem(Kind kind, std::vector<std::string>* events,
                const chat::ToolCallDelta* call = nullptr);
  void CloseOpenItem(std::vector<std::string>* events);
  nlohmann::json ItemJson(const Item& item) const;

  std::string id_;
  int64_t created_at_;
  std::string model_;
  nlohmann::json echo_;
  std::vector<Item> items_;
  bool item_open_ = false;  // the last item is still receiving deltas
  int64_t sequence_ = 0;
  std::string status_ = "in_progress";
  std::string incomplete_reason_;
  engine::Usage usage_;
  bool has_usage_ = false;
};

}  // namespace pagoda::server::http
