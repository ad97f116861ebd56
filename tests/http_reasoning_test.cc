// Issue 50 on the OpenAI HTTP door, over raw HTTP on loopback against the real server
// (stories260K): reasoning_content in chat answers and stream deltas (DeepSeek-R1's template,
// whose prompt opens the reasoning; thinking_token_budget closes it), chat_template_kwargs
// and reasoning_effort reaching the template, a multi-turn conversation whose history drops
// the reasoning still hitting the prefix cache up to where it differs, and POST
// /v1/responses (text, instructions, input items, tools, text.format, reasoning items,
// streamed events in order, refusals).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/server.h"
#include "tests/engine_test_util.h"
#include "tests/raw_http.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using nlohmann::json;
using ::testing::ElementsAreArray;
using ::testing::StartsWith;

constexpr absl::Duration kReceiveTimeout = absl::Seconds(20);  // a bound on a hang only

// A server-sent event: its "event:" name ("" when none) and its data's JSON.
struct Event {
  std::string name;
  json data;
};

std::vector<Event> Events(const std::string& raw) {
  const std::string body = testing::Dechunked(raw);
  std::vector<Event> events;
  for (absl::string_view text : absl::StrSplit(body, "\n\n", absl::SkipEmpty())) {
    Event e;
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      if (absl::ConsumePrefix(&line, "event: ")) e.name = std::string(line);
      if (absl::ConsumePrefix(&line, "data: ") && line != "[DONE]") {
        e.data = json::parse(std::string(line), nullptr, /*allow_exceptions=*/false);
      }
    }
    if (!e.data.is_null()) events.push_back(std::move(e));
  }
  return events;
}

class HttpReasoningTest : public ::testing::Test {
 protected:
  void Serve(const std::string& chat_template, const std::string& parser = "auto") {
    engine::EngineConfig config;
    config.chat_template = chat_template;
    engine_ = testing::StoriesEngine(config);
    ASSERT_NE(engine_, nullptr);
    auto server = server::Server::Start({.host = "127.0.0.1",
                                         .port = 0,
                                         .metrics_port = -1,
                                         .model_name = "stories260K",
                                         .drain_timeout = absl::Seconds(5),
                                         .http_port = 0,
                                         .reasoning_parser = parser},
                                        engine_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  void ServeTemplateFile(const std::string& name, const std::string& parser = "auto") {
    Serve(testing::ReadFileOrDie(testing::ModelPath("chat_templates/" + name + ".jinja")), parser);
  }

  void TearDown() override {
    server_.reset();
    if (engine_) engine_->Stop();
  }

  std::pair<int, json> Post(const std::string& path, const json& body) {
    testing::RawReply r =
        testing::RawHttp(server_->http_port(), "POST", path, body.dump(), kReceiveTimeout);
    return {r.status, json::parse(r.body, nullptr, /*allow_exceptions=*/false)};
  }
  json Ok(const std::string& path, const json& body) {
    auto [status, out] = Post(path, body);
    EXPECT_EQ(status, 200) << out.dump();
    return out;
  }
  std::vector<Event> Stream(const std::string& path, json body) {
    body["stream"] = true;
    testing::RawReply r =
        testing::RawHttp(server_->http_port(), "POST", path, body.dump(), kReceiveTimeout);
    EXPECT_EQ(r.status, 200) << r.body;
    return Events(r.body);
  }
  std::string Refusal(const std::string& path, const json& body) {
    auto [status, out] = Post(path, body);
    if (status != 400 || !out.is_object() || !out.contains("error")) return out.dump();
    return out["error"].value("message", "");
  }

  // The chat template's prompt for `chat` (its messages and kwargs).
  std::string Rendered(const json& chat) {
    json body = {{"messages", chat["messages"]}};
    if (chat.contains("chat_template_kwargs")) {
      body["chat_template_kwargs"] = chat["chat_template_kwargs"];
    }
    return Ok("/apply-template", body).value("prompt", "");
  }
  // The greedy completion of `prompt`, `n` tokens: what the model writes there.
  std::string Completion(const std::string& prompt, int n) {
    const json out =
        Ok("/v1/completions",
           {{"prompt", prompt}, {"max_tokens", n}, {"temperature", 0}, {"ignore_eos", true}});
    return out["choices"][0].value("text", "");
  }
  std::vector<int> Tokens(const std::string& text) {
    return Ok("/tokenize", {{"content", text}, {"add_special", true}})["tokens"]
        .get<std::vector<int>>();
  }

  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<server::Server> server_;
};

json UserChat(const std::string& text) {
  return {{"messages", json::array({{{"role", "user"}, {"content", text}}})},
          {"temperature", 0},
          {"ignore_eos", true}};
}

// DeepSeek-R1's template ends the prompt with "<think>\n": the output is reasoning until the
// budget forces "</think>"; reasoning_content is what the model wrote there, the content
// what follows, the same streamed (reasoning_content and vLLM's reasoning in the deltas).
TEST_F(HttpReasoningTest, ChatSplitsReasoningContentWholeAndStreamed) {
  ServeTemplateFile("deepseek-ai-DeepSeek-R1-Distill-Llama-8B");
  json chat = UserChat("Tell me a story about a cat.");
  chat["max_tokens"] = 14;
  chat["thinking_token_budget"] = 4;
  const json whole = Ok("/v1/chat/completions", chat);
  const json& message = whole["choices"][0]["message"];
  ASSERT_TRUE(message.contains("reasoning_content")) << whole.dump();
  const std::string reasoning = message["reasoning_content"];
  EXPECT_EQ(message["reasoning"], reasoning);
  // The four reasoning tokens are the model's own; the forced marker may bring a space.
  const std::string four = Completion(Rendered(chat), 4);
  ASSERT_THAT(reasoning, StartsWith(four));
  EXPECT_EQ(absl::StripAsciiWhitespace(reasoning.substr(four.size())), "");
  EXPECT_FALSE(message["content"].get<std::string>().empty());
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "length");
  std::string streamed_reasoning, streamed_content;
  for (const Event& e : Stream("/v1/chat/completions", chat)) {
    const json& delta = e.data["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) {
      EXPECT_EQ(delta["reasoning"], delta["reasoning_content"]);
      streamed_reasoning += delta["reasoning_content"].get<std::string>();
    }
    if (delta.contains("content")) streamed_content += delta["content"].get<std::string>();
  }
  EXPECT_EQ(streamed_reasoning, reasoning);
  EXPECT_EQ(streamed_content, message["content"]);
}

// chat_template_kwargs and reasoning_effort reach the template: enable_thinking false
// closes the reasoning in the prompt (all content); by default the prompt opens it (all
// reasoning); the template's own variables cannot be set.
TEST_F(HttpReasoningTest, TemplateKwargsAndReasoningEffortReachTheTemplate) {
  Serve(
      "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
      "{% if reasoning_effort is defined %}effort {{ reasoning_effort }}\n{% endif %}"
      "{% if add_generation_prompt %}assistant:{% if enable_thinking is defined and "
      "enable_thinking is false %} <think></think>{% else %} <think>\n{% endif %}{% endif %}");
  json chat = UserChat("Once upon a time");
  chat["max_tokens"] = 6;
  chat["chat_template_kwargs"] = {{"enable_thinking", false}};
  json off = Ok("/v1/chat/completions", chat)["choices"][0]["message"];
  EXPECT_FALSE(off.contains("reasoning_content")) << off.dump();
  EXPECT_EQ(off["content"], Completion(Rendered(chat), 6));
  chat.erase("chat_template_kwargs");
  json on = Ok("/v1/chat/completions", chat)["choices"][0]["message"];
  EXPECT_EQ(on["reasoning_content"], Completion(Rendered(chat), 6));
  EXPECT_EQ(on["content"], "");
  // reasoning_effort is a template variable too.
  chat["reasoning_effort"] = "low";
  chat["chat_template_kwargs"] = {{"reasoning_effort", "low"}};  // what /apply-template takes
  const std::string with_effort = Rendered(chat);
  EXPECT_TRUE(absl::StrContains(with_effort, "effort low\n")) << with_effort;
  chat.erase("chat_template_kwargs");
  EXPECT_EQ(Ok("/v1/chat/completions", chat)["choices"][0]["message"]["reasoning_content"],
            Completion(with_effort, 6));
  chat["chat_template_kwargs"] = {{"messages", json::array()}};
  EXPECT_EQ(Refusal("/v1/chat/completions", chat),
            "chat_template_kwargs: 'messages' is set by the server, not the request");
  chat["chat_template_kwargs"] = "yes";
  EXPECT_EQ(Refusal("/v1/chat/completions", chat), "chat_template_kwargs: must be an object");
  chat.erase("chat_template_kwargs");
  chat["thinking_token_budget"] = -2;
  EXPECT_EQ(Refusal("/v1/chat/completions", chat),
            "thinking_token_budget: must be >= 0 (-1: no budget)");
}

// The second turn's history drops the first answer's reasoning (DeepSeek-R1's template
// renders only the content): its prompt still finds every full block it shares with the
// first turn's prompt in the prefix cache.
TEST_F(HttpReasoningTest, HistoryWithoutReasoningStillHitsThePrefixCache) {
  ServeTemplateFile("deepseek-ai-DeepSeek-R1-Distill-Llama-8B");
  const std::string question =
      "Once upon a time there was a little girl named Lily who loved to play in the park "
      "with her dog. What did she find under the big tree one day?";
  json first = UserChat(question);
  first["max_tokens"] = 10;
  first["thinking_token_budget"] = 3;
  const json answer = Ok("/v1/chat/completions", first)["choices"][0]["message"];
  json second = UserChat(question);
  second["messages"].push_back({{"role", "assistant"},
                                {"content", answer["content"]},
                                {"reasoning_content", answer["reasoning_content"]}});
  second["messages"].push_back({{"role", "user"}, {"content", "And then?"}});
  second["max_tokens"] = 2;
  const std::vector<int> a = Tokens(Rendered(first));
  const std::vector<int> b = Tokens(Rendered(second));
  size_t common = 0;
  while (common < a.size() && common < b.size() && a[common] == b[common]) ++common;
  ASSERT_GE(common, 32u);  // the system prompt and the whole first question
  const json usage = Ok("/v1/chat/completions", second)["usage"];
  EXPECT_EQ(usage["prompt_tokens"], b.size());
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], common / 16 * 16);
}

// Responses: text, with instructions, is the chat answer of the same conversation.
TEST_F(HttpReasoningTest, ResponsesAnswerAsChatDoes) {
  ServeTemplateFile("Qwen-Qwen2.5-7B-Instruct");
  const json request = {{"model", "stories260K"},     {"instructions", "Be brief."},
                        {"input", "Tell me a story"}, {"max_output_tokens", 8},
                        {"temperature", 0},           {"ignore_eos", true},
                        {"metadata", {{"run", "7"}}}};
  json chat = UserChat("Tell me a story");
  const json system = {{"role", "system"}, {"content", "Be brief."}};
  chat["messages"].insert(chat["messages"].begin(), system);
  chat["max_tokens"] = 8;
  const json expected = Ok("/v1/chat/completions", chat);
  const json r = Ok("/v1/responses", request);
  EXPECT_THAT(r["id"].get<std::string>(), StartsWith("resp_"));
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["model"], "stories260K");
  EXPECT_EQ(r["instructions"], "Be brief.");
  EXPECT_EQ(r["metadata"], json({{"run", "7"}}));
  EXPECT_EQ(r["store"], false);
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"], json({{"reason", "max_output_tokens"}}));
  ASSERT_EQ(r["output"].size(), 1u) << r.dump();
  const json& item = r["output"][0];
  EXPECT_EQ(item["type"], "message");
  EXPECT_EQ(item["role"], "assistant");
  EXPECT_EQ(item["status"], "completed");
  EXPECT_EQ(item["content"][0]["type"], "output_text");
  EXPECT_EQ(item["content"][0]["text"], expected["choices"][0]["message"]["content"]);
  EXPECT_EQ(r["usage"]["input_tokens"], expected["usage"]["prompt_tokens"]);
  EXPECT_EQ(r["usage"]["output_tokens"], 8);
  EXPECT_EQ(r["usage"]["total_tokens"], expected["usage"]["total_tokens"]);

  // Streamed: the documented events, numbered in order, reassembling to the same text.
  const std::vector<Event> events = Stream("/v1/responses", request);
  std::vector<std::string> types;
  std::string text;
  for (size_t i = 0; i < events.size(); ++i) {
    const json& d = events[i].data;
    EXPECT_EQ(events[i].name, d["type"]);
    EXPECT_EQ(d["sequence_number"], i);
    if (types.empty() || types.back() != d["type"]) types.push_back(d["type"]);
    if (d["type"] == "response.output_text.delta") text += d["delta"].get<std::string>();
  }
  EXPECT_THAT(types, ElementsAreArray({"response.created", "response.in_progress",
                                       "response.output_item.added", "response.content_part.added",
                                       "response.output_text.delta", "response.output_text.done",
                                       "response.content_part.done", "response.output_item.done",
                                       "response.incomplete"}));
  EXPECT_EQ(text, item["content"][0]["text"]);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().data["response"]["output"][0]["content"][0]["text"], text);
}

// Input items (a message with text parts, a function call and its output) become the
// conversation chat would render from the same turns.
TEST_F(HttpReasoningTest, ResponsesInputItemsAreTheConversation) {
  ServeTemplateFile("Qwen-Qwen2.5-7B-Instruct");
  const json input = json::array(
      {{{"role", "user"}, {"content", json::array({{{"type", "input_text"}, {"text", "Hi"}}})}},
       {{"type", "function_call"},
        {"call_id", "call_1"},
        {"name", "get_weather"},
        {"arguments", "{\"city\":\"Paris\"}"}},
       {{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "sunny"}}});
  const json r =
      Ok("/v1/responses", {{"input", input}, {"max_output_tokens", 6}, {"temperature", 0}});
  json chat = {
      {"messages",
       json::array({{{"role", "user"}, {"content", "Hi"}},
                    {{"role", "assistant"},
                     {"content", nullptr},
                     {"tool_calls", json::array({{{"id", "call_1"},
                                                  {"type", "function"},
                                                  {"function",
                                                   {{"name", "get_weather"},
                                                    {"arguments", "{\"city\":\"Paris\"}"}}}}})}},
                    {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}}})},
      {"max_tokens", 6},
      {"temperature", 0}};
  const json expected = Ok("/v1/chat/completions", chat);
  EXPECT_EQ(r["output"][0]["content"][0]["text"], expected["choices"][0]["message"]["content"]);
  EXPECT_EQ(r["usage"]["input_tokens"], expected["usage"]["prompt_tokens"]);
}

// Function tools: tool_choice "required" gives a function_call item whose arguments follow
// the schema; streamed, the argument deltas add up to the done event's arguments.
TEST_F(HttpReasoningTest, ResponsesFunctionCallsAndStructuredText) {
  ServeTemplateFile("Qwen-Qwen2.5-7B-Instruct");
  const json schema = json::parse(R"({"type": "object", "properties": {
      "city": {"type": "string", "maxLength": 8}}, "required": ["city"],
      "additionalProperties": false})");
  const json request = {
      {"input", "Weather in Paris?"},
      {"tools",
       json::array({{{"type", "function"}, {"name", "get_weather"}, {"parameters", schema}}})},
      {"tool_choice", "required"},
      {"max_output_tokens", 64},
      {"temperature", 0}};
  const json r = Ok("/v1/responses", request);
  ASSERT_FALSE(r["output"].empty()) << r.dump();
  const json& call = r["output"][0];
  EXPECT_EQ(call["type"], "function_call") << r.dump();
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_THAT(call["call_id"].get<std::string>(), StartsWith("call_"));
  const json args = json::parse(call["arguments"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(args.is_object()) << call.dump();
  EXPECT_TRUE(args["city"].is_string());
  std::string deltas, done;
  for (const Event& e : Stream("/v1/responses", request)) {
    if (e.data["type"] == "response.function_call_arguments.delta") deltas += e.data["delta"];
    if (e.data["type"] == "response.function_call_arguments.done") done = e.data["arguments"];
  }
  EXPECT_EQ(deltas, done);
  EXPECT_EQ(done, call["arguments"]);

  // text.format json_schema: the text is JSON of the schema.
  const json structured =
      Ok("/v1/responses",
         {{"input", "A city?"},
          {"text", {{"format", {{"type", "json_schema"}, {"name", "city"}, {"schema", schema}}}}},
          {"max_output_tokens", 64},
          {"temperature", 0}});
  const json value =
      json::parse(structured["output"][0]["content"][0]["text"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(value.is_object()) << structured.dump();
  EXPECT_TRUE(value["city"].is_string());
  EXPECT_EQ(structured["text"]["format"]["type"], "json_schema");
}

// A reasoning model's response starts with a reasoning item: the chat answer's
// reasoning_content, then its content as the message.
TEST_F(HttpReasoningTest, ResponsesCarryReasoningItems) {
  ServeTemplateFile("deepseek-ai-DeepSeek-R1-Distill-Llama-8B");
  json chat = UserChat("Tell me a story about a cat.");
  chat["max_tokens"] = 14;
  chat["thinking_token_budget"] = 4;
  const json expected = Ok("/v1/chat/completions", chat)["choices"][0]["message"];
  const json r = Ok("/v1/responses", {{"input", "Tell me a story about a cat."},
                                      {"max_output_tokens", 14},
                                      {"thinking_token_budget", 4},
                                      {"temperature", 0},
                                      {"ignore_eos", true}});
  ASSERT_EQ(r["output"].size(), 2u) << r.dump();
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_EQ(r["output"][0]["content"][0]["type"], "reasoning_text");
  EXPECT_EQ(r["output"][0]["content"][0]["text"], expected["reasoning_content"]);
  EXPECT_EQ(r["output"][1]["content"][0]["text"], expected["content"]);
}

TEST_F(HttpReasoningTest, ResponsesRefusalsNameTheField) {
  ServeTemplateFile("Qwen-Qwen2.5-7B-Instruct");
  EXPECT_EQ(Refusal("/v1/responses", {{"input", "Hi"}, {"previous_response_id", "resp_1"}}),
            "previous_response_id: this server keeps no responses (it is stateless, as with "
            "store: false); send the whole conversation in input");
  EXPECT_EQ(Refusal("/v1/responses", {{"model", "stories260K"}}), "input: is required");
  EXPECT_EQ(Refusal("/v1/responses",
                    {{"input", json::array({{{"type", "item_reference"}, {"id", "msg_1"}}})}}),
            "input[0]: this server keeps no items; send the item itself");
  EXPECT_EQ(Refusal("/v1/responses",
                    {{"input", "Hi"}, {"tools", json::array({{{"type", "web_search"}}})}}),
            "tools[0].type: only function tools are supported");
  EXPECT_EQ(Refusal("/v1/responses", {{"input", "Hi"}, {"background", true}}),
            "background: is not supported by this server");
  auto [status, out] = Post("/v1/responses", {{"input", "Hi"}, {"model", "gpt-5"}});
  EXPECT_EQ(status, 404);
  EXPECT_EQ(out["error"]["code"], "model_not_found");
}

}  // namespace
}  // namespace pagoda
