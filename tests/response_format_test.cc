// response_format on the OpenAI door: the shapes it takes, the 400 naming a schema keyword
// outside the subset, and a parsed request run through the engine (stories260K) giving
// output that follows the schema.
#include <regex>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/http/json_span.h"
#include "server/http/openai_request.h"
#include "tests/engine_test_util.h"
#include "tests/json_schema_checker.h"

namespace pagoda::server::http {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json Chat(const json& response_format) {
  return json{{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
              {"response_format", response_format}};
}

TEST(ResponseFormatTest, TextAndAbsentLeaveOutputFree) {
  for (const json& body : {Chat(json{{"type", "text"}}), Chat(nullptr)}) {
    auto r = ParseChatCompletionRequest(body);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->request.sampling.grammar, nullptr);
  }
}

TEST(ResponseFormatTest, JsonObjectAndJsonSchemaSetAGrammar) {
  auto obj = ParseChatCompletionRequest(Chat(json{{"type", "json_object"}}));
  ASSERT_TRUE(obj.ok()) << obj.status();
  EXPECT_NE(obj->request.sampling.grammar, nullptr);
  const json schema = {
      {"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}, {"required", {"a"}}};
  auto chat = ParseChatCompletionRequest(
      Chat(json{{"type", "json_schema"},
                {"json_schema", {{"name", "s"}, {"schema", schema}, {"strict", true}}}}));
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_NE(chat->request.sampling.grammar, nullptr);
  auto completion = ParseCompletionRequest(
      json{{"prompt", "x"},
           {"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", schema}}}}}});
  ASSERT_TRUE(completion.ok()) << completion.status();
  EXPECT_NE(completion->request.sampling.grammar, nullptr);
}

TEST(ResponseFormatTest, RefusalsNameTheFieldOrKeyword) {
  const std::pair<json, std::string> cases[] = {
      {json{{"type", "yaml"}}, "response_format.type"},
      {json("json_object"), "response_format: must be an object"},
      {json{{"type", "json_schema"}}, "response_format.json_schema: must be an object"},
      {json{{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}},
       "response_format.json_schema.schema"},
      {json{{"type", "json_schema"},
            {"json_schema",
             {{"schema",
               {{"type", "object"},
                {"properties", {{"age", {{"type", "integer"}, {"minimum", 0}}}}}}}}}},
       "response_format.json_schema.schema: json schema: unsupported keyword 'minimum' at "
       "/properties/age"},
  };
  for (const auto& [format, message] : cases) {
    auto r = ParseChatCompletionRequest(Chat(format));
    ASSERT_FALSE(r.ok()) << format.dump();
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(message)) << format.dump();
  }
}

TEST(ResponseFormatTest, ParsedCompletionRequestFollowsTheSchemaThroughTheEngine) {
  const json schema = json::parse(R"({"type": "object", "properties": {
      "title": {"type": "string", "maxLength": 16},
      "mood": {"enum": ["happy", "sad"]}, "count": {"type": "integer"}},
      "required": ["title", "mood", "count"], "additionalProperties": false})");
  auto engine = testing::StoriesEngine();
  for (int seed = 0; seed < 6; ++seed) {
    auto r = ParseCompletionRequest(json{
        {"prompt", "Once upon a time"},
        {"max_tokens", 200},
        {"temperature", 1.0},
        {"seed", seed},
        {"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", schema}}}}}});
    ASSERT_TRUE(r.ok()) << r.status();
    const engine::CollectedOutput out = testing::RunOne(*engine, std::move(r->request));
    ASSERT_TRUE(out.error.ok()) << out.error;
    EXPECT_EQ(out.finish_reason, engine::FinishReason::kStop) << out.text;
    const json value = json::parse(out.text, nullptr, false);
    ASSERT_FALSE(value.is_discarded()) << out.text;
    EXPECT_EQ(grammar::testing::CheckSchema(value, schema, schema), "") << out.text;
  }
}

TEST(ResponseFormatTest, GbnfGrammarFieldSetsAGrammarAndRefusalsNameIt) {
  json body = Chat(nullptr);
  body["grammar"] = "root ::= \"yes\" | \"no\"";
  auto r = ParseChatCompletionRequest(body);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->request.sampling.grammar, nullptr);
  const std::pair<json, std::string> cases[] = {
      {json{{"grammar", 5}}, "grammar: must be a string"},
      {json{{"grammar", "root ::= x"}}, "grammar: gbnf: "},
      {json{{"grammar", "root ::= \"a\""}, {"response_format", {{"type", "json_object"}}}},
       "grammar: cannot be combined with a json response_format"},
  };
  for (const auto& [fields, message] : cases) {
    json bad = Chat(nullptr);
    bad.update(fields);
    auto refused = ParseChatCompletionRequest(bad);
    ASSERT_FALSE(refused.ok()) << bad.dump();
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(refused.status().message().rfind(message, 0), 0u) << refused.status();
  }
}

TEST(ResponseFormatTest, GbnfOutputsThroughTheEngineAreInTheLanguage) {
  const std::regex language("\\{\"n\": [1-9][0-9]?, \"pet\": \"(cat|dog)\"\\}");
  auto engine = testing::StoriesEngine();
  for (int seed = 0; seed < 6; ++seed) {
    auto r = ParseCompletionRequest(json{
        {"prompt", "Once upon a time"},
        {"max_tokens", 64},
        {"seed", seed},
        {"grammar", R"(root ::= "{\"n\": " [1-9] [0-9]? ", \"pet\": \"" ("cat" | "dog") "\"}")"}});
    ASSERT_TRUE(r.ok()) << r.status();
    const engine::CollectedOutput out = testing::RunOne(*engine, std::move(r->request));
    ASSERT_TRUE(out.error.ok()) << out.error;
    EXPECT_EQ(out.finish_reason, engine::FinishReason::kStop) << out.text;
    EXPECT_TRUE(std::regex_match(out.text, language)) << out.text;
  }
}

TEST(JsonSpanTest, FindsTheTextOfAValueByPath) {
  const std::string text =
      R"( {"a": {"s": "x}\"]", "b": [1, {"c": true}, "z"]}, "d": 2.5e3 , "a2": null} )";
  EXPECT_EQ(FindJsonValue(text, {"d"}), "2.5e3");
  EXPECT_EQ(FindJsonValue(text, {"a", "s"}), R"("x}\"]")");
  EXPECT_EQ(FindJsonValue(text, {"a", "b"}), R"([1, {"c": true}, "z"])");
  EXPECT_EQ(FindJsonValue(text, {"a", "b", size_t{1}}), R"({"c": true})");
  EXPECT_EQ(FindJsonValue(text, {"a", "b", size_t{1}, "c"}), "true");
  EXPECT_EQ(FindJsonValue(text, {"a", "b", size_t{2}}), R"("z")");
  EXPECT_EQ(FindJsonValue(text, {"a2"}), "null");
  EXPECT_EQ(FindJsonValue(text, {"a", "b", size_t{3}}), std::nullopt);
  EXPECT_EQ(FindJsonValue(text, {"missing"}), std::nullopt);
  EXPECT_EQ(FindJsonValue(text, {"d", "x"}), std::nullopt);
  EXPECT_EQ(FindJsonValue(R"({"k": 1, "k": {"v": 2}})", {"k"}), R"({"v": 2})");  // the last
  EXPECT_EQ(FindJsonValue(R"({"k": [1, 2})", {"k"}), std::nullopt);
  EXPECT_EQ(FindJsonValue(R"({"k": "open)", {"k"}), std::nullopt);
}

TEST(ResponseFormatTest, SchemaPropertiesKeepTheOrderOfTheBodyText) {
  // Sorted, "alpha" would come first; the body's text says "zeta", "mid", "alpha".
  const std::string text = R"({"prompt": "Once upon a time", "max_tokens": 120,
      "temperature": 1, "seed": 3, "response_format": {"type": "json_schema", "json_schema": {
      "name": "s", "schema": {"type": "object", "properties": {"zeta": {"type": "integer"},
      "mid": {"type": "boolean"}, "alpha": {"enum": ["x", "y"]}},
      "required": ["zeta", "mid", "alpha"], "additionalProperties": false}}}})";
  auto engine = testing::StoriesEngine();
  for (const bool with_text : {true, false}) {
    auto r = ParseCompletionRequest(json::parse(text), with_text ? text : "");
    ASSERT_TRUE(r.ok()) << r.status();
    const engine::CollectedOutput out = testing::RunOne(*engine, std::move(r->request));
    ASSERT_TRUE(out.error.ok()) << out.error;
    const json value = json::parse(out.text, nullptr, false);
    ASSERT_TRUE(value.is_object()) << out.text;
    const size_t zeta = out.text.find("\"zeta\""), alpha = out.text.find("\"alpha\"");
    ASSERT_NE(zeta, std::string::npos) << out.text;
    ASSERT_NE(alpha, std::string::npos) << out.text;
    EXPECT_EQ(zeta < alpha, with_text) << out.text;
  }
}

}  // namespace
}  // namespace pagoda::server::http
