// Issue 28 (tools) on the OpenAI HTTP door, over raw HTTP on loopback against the real
// server (stories260K with Qwen2.5's chat template, whose tool-call format is Hermes):
// tool_choice "required" and a named function give parsed calls whose arguments follow the
// tool's schema, bad tools are 400 naming the field, and tool results (role "tool") and an
// assistant's calls go back through the template.
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/server.h"
#include "tests/engine_test_util.h"
#include "tests/json_schema_checker.h"
#include "tests/raw_http.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr absl::Duration kReceiveTimeout = absl::Seconds(20);  // a bound on a hang only

const json& WeatherSchema() {
  static const json* s = new json(json::parse(R"({"type": "object", "properties": {
      "city": {"type": "string", "maxLength": 12}, "unit": {"enum": ["c", "f"]}},
      "required": ["city", "unit"], "additionalProperties": false})"));
  return *s;
}

const json& TimeSchema() {
  static const json* s = new json(json::parse(R"({"type": "object", "properties": {
      "zone": {"type": "string", "maxLength": 8}},
      "required": ["zone"], "additionalProperties": false})"));
  return *s;
}

json Tools() {
  return json::array(
      {{{"type", "function"},
        {"function",
         {{"name", "get_weather"},
          {"description", "The weather"},
          {"parameters", WeatherSchema()}}}},
       {{"type", "function"}, {"function", {{"name", "get_time"}, {"parameters", TimeSchema()}}}}});
}

json UserTurn() { return json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}}); }

// The JSON events of a chunked SSE body, up to [DONE].
std::vector<json> Events(const std::string& data) {
  const std::string body = testing::Dechunked(data);
  std::vector<json> events;
  for (absl::string_view event : absl::StrSplit(body, "\n\n", absl::SkipEmpty())) {
    if (!absl::ConsumePrefix(&event, "data: ") || event == "[DONE]") continue;
    events.push_back(json::parse(std::string(event), nullptr, /*allow_exceptions=*/false));
  }
  return events;
}

class HttpToolsTest : public ::testing::Test {
 protected:
  void StartServer(std::optional<chat::ToolCallFormat> format = std::nullopt,
                   const std::string& chat_template = "Qwen-Qwen2.5-7B-Instruct.jinja") {
    engine::EngineConfig config;
    config.chat_template =
        testing::ReadFileOrDie(testing::ModelPath("chat_templates/" + chat_template));
    config.tool_call_format = format;
    Serve(testing::StoriesEngine(config));
  }

  // A random model over Qwen2's real 152k vocabulary, with Qwen2.5's template.
  void StartQwenVocabServer() {
    Serve(testing::QwenVocabEngine(testing::ReadFileOrDie(
        testing::ModelPath("chat_templates/Qwen-Qwen2.5-7B-Instruct.jinja"))));
  }

  void Serve(std::unique_ptr<engine::Engine> engine) {
    engine_ = std::move(engine);
    ASSERT_NE(engine_, nullptr);
    auto server = server::Server::Start({.host = "127.0.0.1",
                                         .port = 0,
                                         .metrics_port = -1,
                                         .model_name = "stories260K",
                                         .drain_timeout = absl::Seconds(5),
                                         .http_port = 0},
                                        engine_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  void TearDown() override {
    server_.reset();
    if (engine_) engine_->Stop();
  }

  // POST `path` with `body`: the status and the parsed JSON body.
  std::pair<int, json> Post(const std::string& path, const json& body) {
    testing::RawReply r =
        testing::RawHttp(server_->http_port(), "POST", path, body.dump(), kReceiveTimeout);
    return {r.status, json::parse(r.body, nullptr, /*allow_exceptions=*/false)};
  }

  // The message of a 400 answer to `body` on chat completions; "" for another status.
  std::string Refusal(const json& body) {
    auto [status, out] = Post("/v1/chat/completions", body);
    if (status != 400 || !out.is_object() || !out.contains("error")) return "";
    return out["error"].value("message", "");
  }

  // Streams `body` and checks that its deltas reassemble to `whole` (the non-streamed
  // answer of the same body): the content, each call's name and arguments (the ids are
  // drawn afresh), the finish reason. Returns the reassembled calls.
  json StreamedCallsEqualWhole(json body, const json& whole) {
    body["stream"] = true;
    testing::RawReply raw = testing::RawHttp(server_->http_port(), "POST", "/v1/chat/completions",
                                             body.dump(), kReceiveTimeout);
    EXPECT_EQ(raw.status, 200) << raw.body;
    std::string content;
    json calls = json::array();
    std::string finish_reason;
    for (const json& e : Events(raw.body)) {
      if (!e.is_object()) {
        ADD_FAILURE() << raw.body;
        return calls;
      }
      const json& c = e["choices"][0];
      if (c["finish_reason"].is_string()) finish_reason = c["finish_reason"];
      const json& delta = c["delta"];
      if (delta.contains("content")) content += delta["content"].get<std::string>();
      if (!delta.contains("tool_calls")) continue;
      for (const json& d : delta["tool_calls"]) {
        const size_t index = d["index"].get<size_t>();
        if (d.contains("id")) {
          EXPECT_EQ(index, calls.size()) << raw.body;
          EXPECT_THAT(d["id"].get<std::string>(), StartsWith("call_"));
          EXPECT_EQ(d["type"], "function");
          calls.push_back({{"name", d["function"]["name"]}, {"arguments", ""}});
        }
        if (index >= calls.size()) {
          ADD_FAILURE() << raw.body;
          return calls;
        }
        calls[index]["arguments"] = calls[index]["arguments"].get<std::string>() +
                                    d["function"]["arguments"].get<std::string>();
      }
    }
    const json& message = whole["choices"][0]["message"];
    EXPECT_EQ(finish_reason, whole["choices"][0]["finish_reason"]) << raw.body;
    EXPECT_EQ(content, message["content"].is_null() ? "" : message["content"].get<std::string>());
    json expected = json::array();
    for (const json& call : message.value("tool_calls", json::array())) {
      expected.push_back(
          {{"name", call["function"]["name"]}, {"arguments", call["function"]["arguments"]}});
    }
    EXPECT_EQ(calls, expected) << body.dump();
    return calls;
  }

  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<server::Server> server_;
};

// Every call of `message` names a tool and has arguments valid against its schema; the
// names seen.
std::set<std::string> CheckCalls(const json& message) {
  std::set<std::string> names;
  EXPECT_TRUE(message["content"].is_null()) << message.dump();
  EXPECT_TRUE(message["tool_calls"].is_array() && !message["tool_calls"].empty()) << message.dump();
  for (const json& call : message["tool_calls"]) {
    EXPECT_THAT(call["id"].get<std::string>(), StartsWith("call_"));
    EXPECT_EQ(call["type"], "function");
    const std::string name = call["function"]["name"].get<std::string>();
    const std::string text = call["function"]["arguments"].get<std::string>();
    const json args = json::parse(text, nullptr, false);
    EXPECT_TRUE(args.is_object()) << text;
    names.insert(name);
    if (name != "get_weather" && name != "get_time") {
      ADD_FAILURE() << "unknown tool " << name;
      continue;
    }
    const json& schema = name == "get_weather" ? WeatherSchema() : TimeSchema();
    EXPECT_EQ(grammar::testing::CheckSchema(args, schema, schema), "") << text;
  }
  return names;
}

TEST_F(HttpToolsTest, RequiredYieldsOneParsedCallWithValidArguments) {
  StartServer();
  for (int seed = 0; seed < 4; ++seed) {
    auto [status, out] = Post("/v1/chat/completions", {{"messages", UserTurn()},
                                                       {"tools", Tools()},
                                                       {"tool_choice", "required"},
                                                       {"parallel_tool_calls", false},
                                                       {"temperature", 1.0},
                                                       {"seed", seed},
                                                       {"max_tokens", 200}});
    ASSERT_EQ(status, 200) << out.dump();
    const json& choice = out["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls") << out.dump();
    CheckCalls(choice["message"]);
    EXPECT_EQ(choice["message"]["tool_calls"].size(), 1u) << out.dump();
  }
}

TEST_F(HttpToolsTest, NamedFunctionForcesThatName) {
  StartServer();
  for (int seed = 0; seed < 3; ++seed) {
    auto [status, out] =
        Post("/v1/chat/completions",
             {{"messages", UserTurn()},
              {"tools", Tools()},
              {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}},
              {"parallel_tool_calls", false},
              {"temperature", 1.0},
              {"seed", seed},
              {"max_tokens", 300}});
    ASSERT_EQ(status, 200) << out.dump();
    const json& choice = out["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls") << out.dump();
    EXPECT_EQ(CheckCalls(choice["message"]), std::set<std::string>{"get_time"});
    EXPECT_EQ(choice["message"]["tool_calls"].size(), 1u) << out.dump();
  }
  // Parallel calls (the default): every complete call names the function; this random
  // model keeps calling until max_tokens, which then stays the finish reason.
  auto [status, out] =
      Post("/v1/chat/completions",
           {{"messages", UserTurn()},
            {"tools", Tools()},
            {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}},
            {"temperature", 1.0},
            {"seed", 0},
            {"max_tokens", 120}});
  ASSERT_EQ(status, 200) << out.dump();
  const json& message = out["choices"][0]["message"];
  ASSERT_TRUE(message.contains("tool_calls")) << out.dump();
  for (const json& call : message["tool_calls"]) EXPECT_EQ(call["function"]["name"], "get_time");
  if (out["choices"][0]["finish_reason"] != "length") {
    EXPECT_EQ(out["choices"][0]["finish_reason"], "tool_calls");
  }
}

TEST_F(HttpToolsTest, BadToolsAreRefusedNamingTheField) {
  StartServer();
  auto with = [](json extra) {
    json body = {{"messages", UserTurn()}, {"tools", Tools()}};
    for (auto& [k, v] : extra.items()) body[k] = v;
    return body;
  };
  json bad_type = Tools();
  bad_type[1]["type"] = "retrieval";
  json bad_schema = Tools();
  bad_schema[0]["function"]["parameters"]["properties"]["city"]["minimum"] = 3;
  const json bad_call = json::array(
      {{{"role", "user"}, {"content", "x"}},
       {{"role", "assistant"}, {"tool_calls", {{{"id", "c1"}, {"function", "get_time"}}}}}});
  EXPECT_THAT(Refusal(with({{"tools", "get_weather"}})), StartsWith("tools: "));
  EXPECT_THAT(Refusal(with({{"tools", bad_type}})), StartsWith("tools[1].type: "));
  EXPECT_THAT(Refusal(with({{"tool_choice", "sometimes"}})), StartsWith("tool_choice: "));
  EXPECT_THAT(
      Refusal(with({{"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}})),
      StartsWith("tool_choice.function.name: "));
  EXPECT_THAT(Refusal(with({{"parallel_tool_calls", 1}})), StartsWith("parallel_tool_calls: "));
  EXPECT_THAT(Refusal({{"messages", UserTurn()}, {"tool_choice", "required"}}),
              StartsWith("tool_choice: needs \"tools\""));
  const std::string schema = Refusal(with({{"tools", bad_schema}, {"tool_choice", "required"}}));
  EXPECT_THAT(schema, HasSubstr("tools[0]"));
  EXPECT_THAT(schema, HasSubstr("minimum"));
  EXPECT_THAT(Refusal(with({{"messages", bad_call}})),
              StartsWith("messages[1].tool_calls[0].function: "));
  EXPECT_THAT(
      Refusal(with({{"tool_choice", "required"}, {"response_format", {{"type", "json_object"}}}})),
      StartsWith("tool_choice: "));
  // Completions take no tools.
  auto [status, out] = Post("/v1/completions", {{"prompt", "x"}, {"tools", Tools()}});
  EXPECT_EQ(status, 400) << out.dump();
}

// Issue 44, finding 5: tools count toward the prompt, and are refused for their size before
// their grammar is built (which each tool's schema could make large).
TEST_F(HttpToolsTest, ToolsOverThePromptLimitAreRefusedBeforeTheirGrammar) {
  engine::EngineConfig config;
  config.chat_template =
      testing::ReadFileOrDie(testing::ModelPath("chat_templates/Qwen-Qwen2.5-7B-Instruct.jinja"));
  config.max_prompt_bytes = 2000;
  Serve(testing::StoriesEngine(config));
  json tools = json::array();
  for (int i = 0; i < 12; ++i) {
    json tool = Tools()[0];
    tool["function"]["name"] = "get_weather_" + std::to_string(i);
    tools.push_back(tool);
  }
  const std::string message =
      Refusal({{"messages", UserTurn()}, {"tools", tools}, {"tool_choice", "required"}});
  EXPECT_THAT(message, StartsWith("tools: have "));
  EXPECT_THAT(message, HasSubstr("bytes as JSON; at most 2000 are accepted (max_prompt_bytes)"));
  // One of them fits.
  tools = json::array({tools[0]});
  auto [status, out] = Post(
      "/v1/chat/completions",
      {{"messages", UserTurn()}, {"tools", tools}, {"tool_choice", "required"}, {"max_tokens", 4}});
  EXPECT_EQ(status, 200) << out.dump();
}

TEST_F(HttpToolsTest, ForcedCallNeedsAToolCallFormat) {
  StartServer(chat::ToolCallFormat::kNone);  // --tool-call-parser none
  const std::string why =
      Refusal({{"messages", UserTurn()}, {"tools", Tools()}, {"tool_choice", "required"}});
  EXPECT_THAT(why, StartsWith("tool_choice: "));
  EXPECT_THAT(why, HasSubstr("--tool-call-parser"));
  // "auto" answers with text: nothing is parsed.
  auto [status, out] = Post("/v1/chat/completions",
                            {{"messages", UserTurn()}, {"tools", Tools()}, {"max_tokens", 8}});
  ASSERT_EQ(status, 200) << out.dump();
  EXPECT_TRUE(out["choices"][0]["message"]["content"].is_string());
  EXPECT_FALSE(out["choices"][0]["message"].contains("tool_calls"));
}

// Phi-3.5's template never reads `tools`: they go into the system message with the Hermes
// call syntax, which is then parsed and (required) forced.
TEST_F(HttpToolsTest, TemplateWithoutToolsGetsThemInASystemMessage) {
  StartServer(std::nullopt, "microsoft-Phi-3.5-mini-instruct.jinja");
  EXPECT_EQ(engine_->tool_call_format(), chat::ToolCallFormat::kHermes);
  const json with_system = json::array({{{"role", "system"}, {"content", "Be brief."}},
                                        {{"role", "user"}, {"content", "Weather in Paris?"}}});
  const std::vector<json> conversations = {with_system, UserTurn()};
  for (const json& messages : conversations) {
    auto [status, prompt] = Post("/apply-template", {{"messages", messages}, {"tools", Tools()}});
    ASSERT_EQ(status, 200) << prompt.dump();
    const std::string text = prompt["prompt"].get<std::string>();
    const std::string offer = "<|system|>\n" +
                              std::string(messages.size() == 2 ? "Be brief.\n\n" : "") +
                              "You can use these functions; each is described by one JSON "
                              "object on its own line:\n{\"type\":\"function\"";
    EXPECT_THAT(text, StartsWith(offer));
    EXPECT_THAT(text, HasSubstr(R"("name":"get_time")"));
    EXPECT_THAT(text, HasSubstr("<tool_call>\n{\"name\": \"<function name>\", \"arguments\""));
    EXPECT_THAT(text, HasSubstr("<|user|>\nWeather in Paris?<|end|>"));
  }
  // Without tools the prompt is the template's alone.
  auto [plain_status, plain] = Post("/apply-template", {{"messages", UserTurn()}});
  ASSERT_EQ(plain_status, 200);
  EXPECT_THAT(plain["prompt"].get<std::string>(), StartsWith("<|user|>"));
  for (int seed = 0; seed < 3; ++seed) {
    auto [status, out] = Post("/v1/chat/completions", {{"messages", UserTurn()},
                                                       {"tools", Tools()},
                                                       {"tool_choice", "required"},
                                                       {"temperature", 1.0},
                                                       {"seed", seed},
                                                       {"max_tokens", 200},
                                                       {"parallel_tool_calls", false}});
    ASSERT_EQ(status, 200) << out.dump();
    EXPECT_EQ(out["choices"][0]["finish_reason"], "tool_calls") << out.dump();
    CheckCalls(out["choices"][0]["message"]);
  }
}

TEST_F(HttpToolsTest, ToolResultsAndCallsGoThroughTheTemplate) {
  StartServer();
  const json messages = json::array(
      {{{"role", "user"}, {"content", "Weather in Paris?"}},
       {{"role", "assistant"},
        {"content", nullptr},
        {"tool_calls",
         {{{"id", "call_1"},
           {"type", "function"},
           {"function",
            {{"name", "get_weather"}, {"arguments", R"({"city":"Paris","unit":"c"})"}}}}}}},
       {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "18 degrees"}}});
  auto [status, prompt] = Post("/apply-template", {{"messages", messages}, {"tools", Tools()}});
  ASSERT_EQ(status, 200) << prompt.dump();
  const std::string text = prompt["prompt"].get<std::string>();
  // Qwen2.5's template: the tools in the system turn, the call and the result as Hermes.
  EXPECT_THAT(text, HasSubstr("\"name\": \"get_weather\""));
  EXPECT_THAT(text,
              HasSubstr(R"({"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}})"));
  EXPECT_THAT(text, HasSubstr("<tool_response>\n18 degrees\n</tool_response>"));
  auto [gen_status, out] = Post(
      "/v1/chat/completions",
      {{"messages", messages}, {"tools", Tools()}, {"tool_choice", "none"}, {"max_tokens", 8}});
  ASSERT_EQ(gen_status, 200) << out.dump();
  EXPECT_TRUE(out["choices"][0]["message"]["content"].is_string()) << out.dump();
  EXPECT_NE(out["choices"][0]["finish_reason"], "tool_calls");
}

// Streamed, the deltas reassemble to the non-streamed message for the same seed: the
// content, each call's name and arguments (the ids are drawn afresh), the finish reason.
TEST_F(HttpToolsTest, StreamedDeltasReassembleToTheWholeAnswer) {
  StartServer();
  const json named = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
  for (const auto& [choice, parallel] :
       std::vector<std::pair<json, bool>>{{"required", false}, {named, true}, {"auto", true}}) {
    for (int seed = 0; seed < 2; ++seed) {
      json body = {{"messages", UserTurn()}, {"tools", Tools()},
                   {"tool_choice", choice},  {"parallel_tool_calls", parallel},
                   {"temperature", 1.0},     {"seed", seed},
                   {"max_tokens", 120}};
      auto [status, whole] = Post("/v1/chat/completions", body);
      ASSERT_EQ(status, 200) << whole.dump();
      const json calls = StreamedCallsEqualWhole(body, whole);
      if (choice != "auto") EXPECT_FALSE(calls.empty());
    }
  }
}

// The same through a real 152k vocabulary (Qwen2's byte-level BPE, random weights): schema
// outputs validate, json_object parses, a required call parses and validates, and streamed
// deltas reassemble to the whole answer.
TEST_F(HttpToolsTest, QwenVocabularyModelFollowsSchemasAndCalls) {
  StartQwenVocabServer();
  for (int seed = 0; seed < 3; ++seed) {
    json body = {{"messages", UserTurn()},
                 {"temperature", 1.0},
                 {"seed", seed},
                 {"max_tokens", 300},
                 {"response_format",
                  {{"type", "json_schema"},
                   {"json_schema", {{"name", "weather"}, {"schema", WeatherSchema()}}}}}};
    auto [status, out] = Post("/v1/chat/completions", body);
    ASSERT_EQ(status, 200) << out.dump();
    EXPECT_EQ(out["choices"][0]["finish_reason"], "stop") << out.dump();
    const std::string text = out["choices"][0]["message"]["content"].get<std::string>();
    const json value = json::parse(text, nullptr, false);
    EXPECT_EQ(grammar::testing::CheckSchema(value, WeatherSchema(), WeatherSchema()), "") << text;

    body["response_format"] = {{"type", "json_object"}};
    auto [object_status, object] = Post("/v1/chat/completions", body);
    ASSERT_EQ(object_status, 200) << object.dump();
    if (object["choices"][0]["finish_reason"] == "stop") {
      const std::string object_text = object["choices"][0]["message"]["content"];
      EXPECT_TRUE(json::parse(object_text, nullptr, false).is_object()) << object_text;
    } else {  // cut inside a string: a prefix of one
      EXPECT_EQ(object["choices"][0]["finish_reason"], "length");
      grammar::Matcher prefix(grammar::JsonObjectGrammar());
      EXPECT_TRUE(prefix.Advance(object["choices"][0]["message"]["content"].get<std::string>()));
    }

    json call = {{"messages", UserTurn()}, {"tools", Tools()}, {"tool_choice", "required"},
                 {"temperature", 1.0},     {"seed", seed},     {"max_tokens", 300}};
    auto [call_status, whole] = Post("/v1/chat/completions", call);
    ASSERT_EQ(call_status, 200) << whole.dump();
    EXPECT_EQ(whole["choices"][0]["finish_reason"], "tool_calls") << whole.dump();
    CheckCalls(whole["choices"][0]["message"]);
    EXPECT_FALSE(StreamedCallsEqualWhole(call, whole).empty());
  }
}

}  // namespace
}  // namespace pagoda
