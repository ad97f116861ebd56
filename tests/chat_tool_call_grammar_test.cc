// The grammar that forces tool calls (chat/tool_call_grammar.h): for each format, the
// matcher accepts hand-written calls and refuses near misses, and every output it accepts
// (hand-written, and random walks through the grammar) parses into calls of the offered
// tools with arguments that are JSON objects.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "chat/tool_call_grammar.h"
#include "chat/tool_calls.h"
#include "chat/tool_definitions.h"
#include "gmock/gmock.h"
#include "grammar/matcher.h"
#include "gtest/gtest.h"

namespace pagoda::chat {
namespace {

using ::testing::HasSubstr;
using GrammarPtr = std::shared_ptr<const grammar::Grammar>;

std::vector<ToolDefinition> Tools() {
  auto tools = ParseToolDefinitions(nlohmann::json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {
      "type": "object",
      "properties": {"city": {"type": "string", "maxLength": 12},
                     "unit": {"enum": ["c", "f"]}},
      "required": ["city"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "now"}},
    {"type": "function", "function": {"name": "route", "parameters": {
      "type": "object", "$defs": {"point": {"type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
        "required": ["x", "y"]}},
      "properties": {"stops": {"type": "array", "items": {"$ref": "#/$defs/point"},
                               "minItems": 1, "maxItems": 3}},
      "required": ["stops"]}}}])"));
  EXPECT_TRUE(tools.ok()) << tools.status();
  return tools.ok() ? *tools : std::vector<ToolDefinition>{};
}

GrammarPtr Build(ToolCallFormat format, const ToolGrammarOptions& options = {}) {
  auto g = BuildToolCallGrammar(format, Tools(), options);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : nullptr;
}

bool Accepts(const GrammarPtr& g, const std::string& text) {
  grammar::Matcher m(g);
  return m.Advance(text) && m.CanEnd();
}

// The matcher accepts `text`, and it parses into calls named `names`, nothing else.
void ExpectAcceptedCalls(ToolCallFormat format, const GrammarPtr& g, const std::string& text,
                         const std::vector<std::string>& names) {
  SCOPED_TRACE(text);
  EXPECT_TRUE(Accepts(g, text));
  const ParsedToolCalls parsed = ParseToolCalls(format, text, SequentialToolCallIds());
  EXPECT_EQ(parsed.content, "");
  ASSERT_EQ(parsed.tool_calls.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(parsed.tool_calls[i].name, names[i]);
}

TEST(ToolCallGrammarTest, Hermes) {
  const auto f = ToolCallFormat::kHermes;
  const GrammarPtr g = Build(f);
  const std::string weather =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
      "\"unit\": \"c\"}}\n</tool_call>";
  const std::string now = "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
  const std::string route =
      "<tool_call>\n{\"name\": \"route\", \"arguments\": {\"stops\": [{\"x\": 1, \"y\": -2}]}}"
      "\n</tool_call>";
  ExpectAcceptedCalls(f, g, weather, {"get_weather"});
  ExpectAcceptedCalls(f, g, now, {"now"});
  ExpectAcceptedCalls(f, g, route, {"route"});
  ExpectAcceptedCalls(f, g, weather + "\n" + now + "\n" + route, {"get_weather", "now", "route"});
  for (const std::string& bad : std::vector<std::string>{
           std::string("Sure! ") + now,                                           // content first
           now + "\n",                                                            // after the end
           "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>",  // unknown tool
           "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>",  // required
           "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": 3}}\n</tool_call>",
           "<tool_call>\n{\"name\": \"route\", \"arguments\": {\"stops\": []}}\n</tool_call>",
           "<tool_call>\n{\"name\": \"now\", \"arguments\": []}\n</tool_call>",
           now + now,  // blocks need their newline
           std::string(""),
       }) {
    EXPECT_FALSE(Accepts(g, bad)) << bad;
  }
}

TEST(ToolCallGrammarTest, NamedFunctionAndSingleCall) {
  const auto f = ToolCallFormat::kHermes;
  const GrammarPtr g = Build(f, ToolGrammarOptions{.function = "now", .parallel = false});
  const std::string now = "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
  ExpectAcceptedCalls(f, g, now, {"now"});
  EXPECT_FALSE(Accepts(g, now + "\n" + now));
  EXPECT_FALSE(Accepts(g,
                       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                       "\"Rome\"}}\n</tool_call>"));
}

TEST(ToolCallGrammarTest, Llama3Json) {
  const auto f = ToolCallFormat::kLlama3Json;
  const GrammarPtr g = Build(f);
  ExpectAcceptedCalls(f, g, R"({"name": "get_weather", "parameters": {"city": "Oslo"}})",
                      {"get_weather"});
  ExpectAcceptedCalls(f, g, R"({"name": "now", "parameters": {"any": [1, "two"]}})", {"now"});
  EXPECT_FALSE(Accepts(g, R"({"name": "now", "arguments": {}})"));
  EXPECT_FALSE(Accepts(g, R"({"name": "now", "parameters": {}}{"name": "now", "parameters": {}})"));
}

TEST(ToolCallGrammarTest, Mistral) {
  const auto f = ToolCallFormat::kMistral;
  const GrammarPtr g = Build(f);
  ExpectAcceptedCalls(f, g, R"([TOOL_CALLS][{"name": "now", "arguments": {}}])", {"now"});
  ExpectAcceptedCalls(
      f, g,
      R"([TOOL_CALLS][{"name": "now", "arguments": {}}, {"name": "get_weather", "arguments": {"city": "Nice"}}])",
      {"now", "get_weather"});
  EXPECT_FALSE(Accepts(g, R"([TOOL_CALLS][])"));
  EXPECT_FALSE(Accepts(g, R"([{"name": "now", "arguments": {}}])"));
  const GrammarPtr single = Build(f, ToolGrammarOptions{.parallel = false});
  EXPECT_FALSE(Accepts(
      single,
      R"([TOOL_CALLS][{"name": "now", "arguments": {}}, {"name": "now", "arguments": {}}])"));
}

TEST(ToolCallGrammarTest, Refusals) {
  const auto fail = [](ToolCallFormat format, const std::vector<ToolDefinition>& tools,
                       const ToolGrammarOptions& options, const std::string& message) {
    const auto g = BuildToolCallGrammar(format, tools, options);
    ASSERT_FALSE(g.ok()) << message;
    EXPECT_THAT(g.status().message(), HasSubstr(message));
  };
  fail(ToolCallFormat::kNone, Tools(), {}, "no tool-call format");
  fail(ToolCallFormat::kHermes, {}, {}, "no tools given");
  fail(ToolCallFormat::kHermes, Tools(), ToolGrammarOptions{.function = "nope"}, "'nope'");
  ToolDefinition minimum{
      "m", "",
      nlohmann::json::parse(
          R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}})")};
  fail(ToolCallFormat::kHermes, {minimum}, {},
       "tools[0] (m): json schema: unsupported keyword 'minimum'");
  ToolDefinition string_args{"s", "", nlohmann::json::parse(R"({"type": "string"})")};
  fail(ToolCallFormat::kHermes, {string_args}, {}, "type must be \"object\"");
}

// A random sentence of `g`: bytes drawn among those the matcher accepts, preferring the
// ones that close strings and containers so walks end; empty when one runs too long.
std::string RandomSentence(const GrammarPtr& g, std::mt19937* rng) {
  grammar::Matcher m(g);
  std::string out;
  while (out.size() < 600) {
    if (m.CanEnd() && (m.IsDone() || (*rng)() % 4 == 0)) return out;
    std::vector<char> allowed, closing;
    for (int b = 0; b < 256; ++b) {
      const char c = static_cast<char>(b);
      const grammar::Matcher::Snapshot s = m.Save();
      if (!m.Advance(std::string_view(&c, 1))) continue;
      m.Restore(s);
      allowed.push_back(c);
      if (c == '"' || c == '}' || c == ']' || c == '<' || c == '\n') closing.push_back(c);
    }
    if (allowed.empty()) return "";
    const std::vector<char>& from = !closing.empty() && (*rng)() % 2 == 0 ? closing : allowed;
    const char c = from[(*rng)() % from.size()];
    EXPECT_TRUE(m.Advance(std::string_view(&c, 1)));
    out.push_back(c);
  }
  return "";
}

TEST(ToolCallGrammarTest, RandomConstrainedOutputsAlwaysParse) {
  std::mt19937 rng(28);
  for (const auto f :
       {ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json, ToolCallFormat::kMistral}) {
    const GrammarPtr g = Build(f);
    int checked = 0;
    for (int trial = 0; trial < 300 && checked < 100; ++trial) {
      const std::string text = RandomSentence(g, &rng);
      if (text.empty()) continue;
      ++checked;
      SCOPED_TRACE(text);
      const ParsedToolCalls parsed = ParseToolCalls(f, text, SequentialToolCallIds());
      EXPECT_EQ(parsed.content, "");
      ASSERT_FALSE(parsed.tool_calls.empty());
      for (const ToolCall& call : parsed.tool_calls) {
        EXPECT_THAT((std::vector<std::string>{"get_weather", "now", "route"}),
                    ::testing::Contains(call.name));
        EXPECT_TRUE(nlohmann::json::parse(call.arguments).is_object());
      }
    }
    EXPECT_GE(checked, 50) << ToolCallFormatName(f);
  }
}

}  // namespace
}  // namespace pagoda::chat

namespace pagoda::chat {
namespace {

// Issue 44, finding 5: each tool's schema used to get the whole budget again, so many tools
// multiplied it. Now the joined grammar has one budget: what the tools before a tool used is
// gone for it.
TEST(ToolCallGrammarBudgetTest, AllToolsShareOneBudget) {
  nlohmann::json tools = nlohmann::json::array();
  for (int i = 0; i < 8; ++i) {
    nlohmann::json string = {{"type", "string"}, {"maxLength", 300}};
    nlohmann::json parameters = {{"type", "object"}};
    parameters["properties"]["s"] = string;
    nlohmann::json function = {{"name", "f" + std::to_string(i)}};
    function["parameters"] = parameters;
    tools.push_back({{"type", "function"}, {"function", function}});
  }
  auto defs = ParseToolDefinitions(tools);
  ASSERT_TRUE(defs.ok()) << defs.status();
  ToolGrammarOptions options;
  options.limits.max_elements = 4000;
  // One tool fits; eight do not, together.
  options.function = "f0";
  EXPECT_TRUE(BuildToolCallGrammar(ToolCallFormat::kHermes, *defs, options).ok());
  options.function.clear();
  auto all = BuildToolCallGrammar(ToolCallFormat::kHermes, *defs, options);
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(all.status().message(),
              HasSubstr("of the 4000 elements it may have before this tool"));
}

}  // namespace
}  // namespace pagoda::chat
