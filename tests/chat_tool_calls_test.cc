// Tool calls in whole outputs (chat/tool_calls.h): each format's calls, the content around
// them, and the outputs that must stay content (tool_choice "auto"'s fallback); the
// format read from real templates and from a flag; ids; the tools' definitions.
#include <cctype>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "chat/tool_call_format.h"
#include "chat/tool_call_stream.h"
#include "chat/tool_calls.h"
#include "chat/tool_definitions.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace pagoda::chat {
namespace {

using ::testing::HasSubstr;

struct Expected {
  std::string name;
  std::string arguments;
};

void ExpectCalls(ToolCallFormat format, const std::string& text, const std::string& content,
                 const std::vector<Expected>& calls) {
  SCOPED_TRACE(text);
  const ParsedToolCalls parsed = ParseToolCalls(format, text, SequentialToolCallIds());
  EXPECT_EQ(parsed.content, content);
  ASSERT_EQ(parsed.tool_calls.size(), calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(parsed.tool_calls[i].name, calls[i].name);
    EXPECT_EQ(parsed.tool_calls[i].arguments, calls[i].arguments);
  }
}

void ExpectContent(ToolCallFormat format, const std::string& text) {
  ExpectCalls(format, text, text, {});
}

TEST(ToolCallsTest, Hermes) {
  const auto f = ToolCallFormat::kHermes;
  ExpectCalls(f,
              "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
              "\"unit\": \"c\"}}\n</tool_call>",
              "", {{"get_weather", R"({"city":"Paris","unit":"c"})"}});
  // Key order as written (not sorted), nested values compacted.
  ExpectCalls(f,
              "<tool_call>{\"name\":\"f\",\"arguments\":{\"z\": [1, 2], \"a\": {\"b\": null}}}"
              "</tool_call>",
              "", {{"f", R"({"z":[1,2],"a":{"b":null}})"}});
  ExpectCalls(f,
              "Let me check both.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>"
              "\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": 1}}\n</tool_call>\n",
              "Let me check both.", {{"a", "{}"}, {"b", R"({"x":1})"}});
  ExpectCalls(f, "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n\nDone.",
              "Done.", {{"a", "{}"}});
  // "parameters" is read too; no arguments at all is an empty object.
  ExpectCalls(f, "<tool_call>{\"name\": \"a\", \"parameters\": {\"k\": true}}</tool_call>", "",
              {{"a", R"({"k":true})"}});
  ExpectCalls(f, "<tool_call>{\"name\": \"a\"}</tool_call>", "", {{"a", "{}"}});
  // A model stopped right after the JSON, before the closing tag.
  ExpectCalls(f, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"q\": 1}}\n", "",
              {{"a", R"({"q":1})"}});
  // The closing tag inside an argument's string does not end the block.
  ExpectCalls(f,
              "<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"s\": \"</tool_call> {\\\"\"}}"
              "\n</tool_call>",
              "", {{"echo", R"({"s":"</tool_call> {\""})"}});
  // A malformed block stays content, byte for byte; a good one beside it is still a call.
  ExpectCalls(f,
              "<tool_call>\n{oops}\n</tool_call>\n<tool_call>\n{\"name\": \"a\", \"arguments\": "
              "{}}\n</tool_call>",
              "<tool_call>\n{oops}\n</tool_call>", {{"a", "{}"}});
}

TEST(ToolCallsTest, HermesFallsBackToContent) {
  const auto f = ToolCallFormat::kHermes;
  ExpectContent(f, "Hello! How can I help?");
  ExpectContent(f, "  spaces kept  \n");
  ExpectContent(f, "a partial <tool_ marker");
  ExpectContent(f, "<tool_call>\n{\"arguments\": {}}\n</tool_call>");               // no name
  ExpectContent(f, "<tool_call>\n{\"name\": 3, \"arguments\": {}}\n</tool_call>");  // not a string
  ExpectContent(f, "<tool_call>\n{\"name\": \"a\", \"arguments\": \"{}\"}\n</tool_call>");
  ExpectContent(f, "<tool_call>\n[1, 2]\n</tool_call>");
  ExpectContent(f, "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\ntrailing");
  ExpectContent(f, "<tool_call>");
  ExpectContent(f, "</tool_call> before <tool_call>{\"name\": \"a\"");
}

TEST(ToolCallsTest, Llama3Json) {
  const auto f = ToolCallFormat::kLlama3Json;
  ExpectCalls(f, R"({"name": "get_weather", "parameters": {"city": "Paris"}})", "",
              {{"get_weather", R"({"city":"Paris"})"}});
  ExpectCalls(f, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", "", {{"f", "{}"}});
  ExpectCalls(f, "\n <|python_tag|> {\"name\": \"f\", \"arguments\": {\"a\": 1}}\n", "",
              {{"f", R"({"a":1})"}});
  ExpectContent(f, "The weather is nice.");
  ExpectContent(f, R"({"name": "f", "parameters": {}} and more)");
  ExpectContent(f, R"(Call: {"name": "f", "parameters": {}})");
  ExpectContent(f, R"({"answer": 42})");
  ExpectContent(f, "<|python_tag|>brave_search.call(query=\"pagoda\")");
  ExpectContent(f, "<|python");
  ExpectContent(f, "   ");
}

TEST(ToolCallsTest, Mistral) {
  const auto f = ToolCallFormat::kMistral;
  ExpectCalls(
      f, R"([TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}])",
      "", {{"a", R"({"x":1})"}, {"b", "{}"}});
  ExpectCalls(f, "Sure, one moment. [TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {}}]\n",
              "Sure, one moment.", {{"a", "{}"}});
  // The v11 tokenizer's form.
  ExpectCalls(f, R"([TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]now[ARGS]{})", "",
              {{"get_weather", R"({"city":"Paris"})"}, {"now", "{}"}});
  ExpectContent(f, "No tools needed.");
  ExpectContent(f, "[TOOL_CALLS] not json");
  ExpectContent(f, "[TOOL_CALLS][]");
  ExpectContent(f, R"([TOOL_CALLS][{"name": "a", "arguments": {}}] trailing)");
  ExpectContent(f, R"([TOOL_CALLS][{"arguments": {}}])");
  ExpectContent(f, "[TOOL");
}

TEST(ToolCallsTest, NoneIsAllContent) {
  ExpectContent(ToolCallFormat::kNone,
                "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>");
}

TEST(ToolCallFormatTest, DetectedFromRealTemplates) {
  const std::vector<std::pair<std::string, ToolCallFormat>> cases = {
      {"Qwen-Qwen2.5-7B-Instruct", ToolCallFormat::kHermes},
      {"Qwen-QwQ-32B", ToolCallFormat::kHermes},
      {"Qwen-Qwen3-0.6B", ToolCallFormat::kHermes},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", ToolCallFormat::kHermes},
      {"meta-llama-Llama-3.1-8B-Instruct", ToolCallFormat::kLlama3Json},
      {"meta-llama-Llama-3.2-3B-Instruct", ToolCallFormat::kLlama3Json},
      {"meta-llama-Llama-3.3-70B-Instruct", ToolCallFormat::kLlama3Json},
      {"mistralai-Mistral-Nemo-Instruct-2407", ToolCallFormat::kMistral},
      {"Mistral-Small-3.2-24B-Instruct-2506", ToolCallFormat::kMistral},
      {"Qwen3-Coder", ToolCallFormat::kNone},  // XML bodies we do not parse
      {"GLM-4.6", ToolCallFormat::kNone},
      {"google-gemma-2-2b-it", ToolCallFormat::kNone},
      {"microsoft-Phi-3.5-mini-instruct", ToolCallFormat::kNone},
  };
  for (const auto& [name, format] : cases) {
    const std::string source = pagoda::testing::ReadFileOrDie(
        pagoda::testing::ModelPath("chat_templates/" + name + ".jinja"));
    EXPECT_EQ(DetectToolCallFormat(source), format) << name;
  }
}

TEST(ToolCallFormatTest, Flag) {
  EXPECT_EQ(*ParseToolCallFormatFlag("auto"), std::nullopt);
  EXPECT_EQ(*ParseToolCallFormatFlag("hermes"), ToolCallFormat::kHermes);
  EXPECT_EQ(*ParseToolCallFormatFlag("Qwen"), ToolCallFormat::kHermes);
  EXPECT_EQ(*ParseToolCallFormatFlag("llama3_json"), ToolCallFormat::kLlama3Json);
  EXPECT_EQ(*ParseToolCallFormatFlag("mistral"), ToolCallFormat::kMistral);
  EXPECT_EQ(*ParseToolCallFormatFlag("none"), ToolCallFormat::kNone);
  for (auto f : {ToolCallFormat::kNone, ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json,
                 ToolCallFormat::kMistral}) {
    EXPECT_EQ(*ParseToolCallFormatFlag(ToolCallFormatName(f)), f);
  }
  const auto bad = ParseToolCallFormatFlag("xml");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("'xml'"));
}

TEST(ToolCallIdTest, RandomIdsAreOpenAiShaped) {
  ToolCallIdSource ids = RandomToolCallIds();
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string id = ids();
    ASSERT_EQ(id.size(), 29u) << id;
    EXPECT_EQ(id.substr(0, 5), "call_");
    for (char c : id.substr(5)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << id;
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 100u);
  ToolCallIdSource seq = SequentialToolCallIds();
  EXPECT_EQ(seq(), "call_000000000000000000000000");
  EXPECT_EQ(seq(), "call_000000000000000000000001");
}

TEST(ToolDefinitionsTest, ParsesAndRefuses) {
  const auto tools = ParseToolDefinitions(nlohmann::json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather.",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "now"}}])"));
  ASSERT_TRUE(tools.ok()) << tools.status();
  ASSERT_EQ(tools->size(), 2u);
  EXPECT_EQ((*tools)[0].name, "get_weather");
  EXPECT_EQ((*tools)[0].description, "Weather.");
  EXPECT_EQ((*tools)[0].parameters["properties"]["city"]["type"], "string");
  EXPECT_TRUE((*tools)[1].parameters.empty());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({})", "tools: must be an array"},
      {R"([1])", "tools[0]: must be an object"},
      {R"([{"type": "code", "function": {"name": "a"}}])", "tools[0].type"},
      {R"([{"type": "function"}])", "tools[0].function: must be an object"},
      {R"([{"type": "function", "function": {"name": ""}}])", "tools[0].function.name"},
      {R"([{"type": "function", "function": {"name": "a"}},
           {"type": "function", "function": {"name": "a"}}])",
       "tools[1].function.name: 'a'"},
      {R"([{"type": "function", "function": {"name": "a", "parameters": []}}])",
       "tools[0].function.parameters"},
  };
  for (const auto& [json, message] : bad) {
    const auto r = ParseToolDefinitions(nlohmann::json::parse(json));
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_THAT(r.status().message(), HasSubstr(message)) << json;
  }
}

}  // namespace
}  // namespace pagoda::chat

namespace pagoda::chat {
namespace {

// Issue 44: with tool_choice "auto", a call to a function the request did not offer is not
// a tool call: it stays content, byte for byte, whole and streamed, in every format.
TEST(OfferedToolsTest, CallsToFunctionsNotOfferedStayContent) {
  const OfferedTools offered = {"get_weather"};
  struct Case {
    ToolCallFormat format;
    std::string known, unknown;
  };
  const std::vector<Case> cases = {
      {ToolCallFormat::kHermes,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
       "\"Oslo\"}}\n</tool_call>",
       "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {\"path\": \"/\"}}\n</tool_call>"},
      {ToolCallFormat::kLlama3Json, R"({"name": "get_weather", "parameters": {"city": "Oslo"}})",
       R"({"name": "rm_rf", "parameters": {"path": "/"}})"},
      {ToolCallFormat::kMistral,
       R"([TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}}])",
       R"([TOOL_CALLS][{"name": "rm_rf", "arguments": {"path": "/"}}])"},
      {ToolCallFormat::kMistral, R"([TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"})",
       R"([TOOL_CALLS]rm_rf[ARGS]{"path": "/"})"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.unknown);
    const ParsedToolCalls known =
        ParseToolCalls(c.format, c.known, SequentialToolCallIds(), &offered);
    ASSERT_EQ(known.tool_calls.size(), 1u);
    EXPECT_EQ(known.tool_calls[0].name, "get_weather");
    const ParsedToolCalls unknown =
        ParseToolCalls(c.format, c.unknown, SequentialToolCallIds(), &offered);
    EXPECT_TRUE(unknown.tool_calls.empty());
    EXPECT_EQ(unknown.content, c.unknown);
    // Without the offered set (a parser that does not know the tools) it is a call.
    EXPECT_EQ(ParseToolCalls(c.format, c.unknown, SequentialToolCallIds()).tool_calls.size(), 1u);
    // Streamed, one byte at a time: the same content, no call.
    ToolCallStreamParser parser(c.format, SequentialToolCallIds(),
                                std::make_shared<const OfferedTools>(offered));
    std::string content;
    for (char ch : c.unknown) {
      const ToolCallStreamDelta d = parser.Feed(std::string(1, ch));
      EXPECT_TRUE(d.tool_calls.empty());
      content += d.content;
    }
    const ToolCallStreamDelta rest = parser.Finish();
    EXPECT_TRUE(rest.tool_calls.empty());
    EXPECT_EQ(content + rest.content, c.unknown);
  }
}

// Issue 44, finding 6: the template's copy of a tool's parameters is made in time linear in
// its members (it was quadratic: 70,000 members took seconds), their order kept.
TEST(ToolDefinitionsTest, TemplateJsonOfALargeSchemaKeepsItsOrder) {
  nlohmann::json properties = nlohmann::json::object();
  for (int i = 0; i < 70000; ++i) properties["p" + std::to_string(i)] = {{"type", "string"}};
  nlohmann::json parameters = nlohmann::json::object();
  parameters["required"] = nlohmann::json::array({"p1"});
  parameters["type"] = "object";
  parameters["properties"] = properties;
  parameters["zeta"] = 1;
  parameters["alpha"] = 2;
  nlohmann::json function = {{"name", "big"}};
  function["parameters"] = parameters;
  nlohmann::json tools = nlohmann::json::array();
  tools.push_back({{"type", "function"}, {"function", function}});
  auto defs = ParseToolDefinitions(tools);
  ASSERT_TRUE(defs.ok()) << defs.status();
  const nlohmann::ordered_json out = ToolsTemplateJson(*defs);
  const nlohmann::ordered_json& params = out[0]["function"]["parameters"];
  std::vector<std::string> keys;
  for (const auto& [key, value] : params.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"type", "properties", "required", "alpha", "zeta"}));
  const nlohmann::ordered_json& props = params["properties"];
  ASSERT_EQ(props.size(), 70000u);
  EXPECT_EQ(props.begin().key(), "p0");  // the map's (sorted) order: p0, p1, p10, ...
  EXPECT_EQ(std::next(props.begin()).key(), "p1");
  EXPECT_EQ(std::next(props.begin(), 2).key(), "p10");
  EXPECT_EQ(props.begin().value(), nlohmann::ordered_json({{"type", "string"}}));
}

}  // namespace
}  // namespace pagoda::chat
