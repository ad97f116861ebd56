// response_format on the OpenAI door: the shapes it takes, the 400 naming a schema keyword
// outside the subset, and a parsed request run through the engine (stories260K) giving
// output that follows the schema.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
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

}  // namespace
}  // namespace pagoda::server::http
