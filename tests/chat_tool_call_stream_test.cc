// Streamed tool calls (chat/tool_call_stream.h): for outputs of every format, fed split at
// every byte position, byte by byte and at random cut points, the deltas reassemble
// (content appended; per call index: id and name from the first delta, arguments appended)
// to exactly ParseToolCalls' result on the whole output.
#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "chat/tool_call_stream.h"
#include "chat/tool_calls.h"
#include "gtest/gtest.h"

namespace pagoda::chat {
namespace {

struct Case {
  ToolCallFormat format;
  std::string text;
};

std::vector<Case> Cases() {
  const auto h = ToolCallFormat::kHermes;
  const auto l = ToolCallFormat::kLlama3Json;
  const auto m = ToolCallFormat::kMistral;
  const std::string call_a =
      "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": \"é\"}}\n</tool_call>";
  const std::string call_b = "<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>";
  return {
      {h, call_a},
      {h, call_a + "\n" + call_b + "\n"},
      {h, "Let me look.\n\n" + call_a + "\n" + call_b},
      {h, call_a + "\n  Then text after.  \n"},
      {h, "Plain answer with a < and <tool but no call."},
      {h, "<tool_call>\n{broken}\n</tool_call>\n" + call_b},
      {h,
       "<tool_call>\n{\"name\": \"s\", \"arguments\": {\"s\": \"</tool_call>}\"}}\n</tool_call>"},
      {h, "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}"},          // unclosed: a call
      {h, "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool"},  // cut close: content
      {h, "text <tool_call> {\"name\": \"a\"} </tool_call> text"},
      {h, "  \n  "},
      {h, ""},
      {l, R"({"name": "get_weather", "parameters": {"city": "Paris"}})"},
      {l, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}"},
      {l, "  \n{\"name\": \"f\", \"parameters\": {\"k\": [1, {\"n\": null}]}}  "},
      {l, R"({"name": "f", "parameters": {}} trailing)"},
      {l, "Just words, then {\"name\": \"f\", \"parameters\": {}}"},
      {l, "<|python_tag|>brave_search.call(query=\"x\")"},
      {l, "  leading spaces"},
      {m, R"([TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}])"},
      {m, "Okay. \n[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}]"},
      {m, R"([TOOL_CALLS]a[ARGS]{"x": 1}[TOOL_CALLS]b[ARGS]{})"},
      {m, "[TOOL_CALLS] broken ["},
      {m, "No call here, only [TOOL and [TOOLS]."},
      {ToolCallFormat::kNone, "anything <tool_call>{}</tool_call>"},
  };
}

// The stream's deltas folded back into one ParsedToolCalls; fails the test on a delta
// that breaks the protocol (an index out of order, id or name repeated after the first).
ParsedToolCalls Reassemble(const std::vector<ToolCallStreamDelta>& deltas) {
  ParsedToolCalls out;
  for (const ToolCallStreamDelta& d : deltas) {
    out.content += d.content;
    for (const ToolCallDelta& t : d.tool_calls) {
      if (t.index == static_cast<int>(out.tool_calls.size())) {
        EXPECT_FALSE(t.id.empty());
        EXPECT_FALSE(t.name.empty());
        out.tool_calls.push_back(ToolCall{t.id, t.name, t.arguments});
        continue;
      }
      EXPECT_EQ(t.index, static_cast<int>(out.tool_calls.size()) - 1);
      EXPECT_TRUE(t.id.empty());
      EXPECT_TRUE(t.name.empty());
      if (!out.tool_calls.empty()) out.tool_calls.back().arguments += t.arguments;
    }
  }
  return out;
}

ParsedToolCalls Stream(ToolCallFormat format, const std::string& text,
                       const std::vector<size_t>& cuts) {
  ToolCallStreamParser parser(format, SequentialToolCallIds());
  std::vector<ToolCallStreamDelta> deltas;
  size_t begin = 0;
  for (size_t cut : cuts) {
    deltas.push_back(parser.Feed(std::string_view(text).substr(begin, cut - begin)));
    begin = cut;
  }
  deltas.push_back(parser.Feed(std::string_view(text).substr(begin)));
  deltas.push_back(parser.Finish());
  return Reassemble(deltas);
}

void ExpectSame(const ParsedToolCalls& got, const ParsedToolCalls& want) {
  EXPECT_EQ(got.content, want.content);
  ASSERT_EQ(got.tool_calls.size(), want.tool_calls.size());
  for (size_t i = 0; i < want.tool_calls.size(); ++i) {
    EXPECT_EQ(got.tool_calls[i].id, want.tool_calls[i].id);
    EXPECT_EQ(got.tool_calls[i].name, want.tool_calls[i].name);
    EXPECT_EQ(got.tool_calls[i].arguments, want.tool_calls[i].arguments);
  }
}

TEST(ToolCallStreamTest, EverySplitReassemblesToTheWholeParse) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.text);
    const ParsedToolCalls want = ParseToolCalls(c.format, c.text, SequentialToolCallIds());
    for (size_t cut = 0; cut <= c.text.size(); ++cut) {
      SCOPED_TRACE(cut);
      ExpectSame(Stream(c.format, c.text, {cut}), want);
    }
    std::vector<size_t> every_byte;
    for (size_t i = 1; i < c.text.size(); ++i) every_byte.push_back(i);
    ExpectSame(Stream(c.format, c.text, every_byte), want);
  }
}

TEST(ToolCallStreamTest, RandomSplitsReassembleToTheWholeParse) {
  std::mt19937 rng(28);
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.text);
    const ParsedToolCalls want = ParseToolCalls(c.format, c.text, SequentialToolCallIds());
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<size_t> cuts;
      std::uniform_int_distribution<size_t> pick(0, c.text.size());
      const int n = std::uniform_int_distribution<int>(1, 8)(rng);
      for (int i = 0; i < n; ++i) cuts.push_back(pick(rng));
      std::sort(cuts.begin(), cuts.end());
      ExpectSame(Stream(c.format, c.text, cuts), want);
    }
  }
}

TEST(ToolCallStreamTest, ContentAndCallsComeOutBeforeTheEnd) {
  ToolCallStreamParser parser(ToolCallFormat::kHermes, SequentialToolCallIds());
  EXPECT_EQ(parser.Feed("Checking").content, "Checking");
  // Whitespace and a possible marker are held until what follows them is known.
  EXPECT_EQ(parser.Feed(" the weather.\n<tool").content, " the weather.");
  EXPECT_TRUE(parser.Feed("_call>\n{\"name\": \"w\", \"arguments\": {\"c\": 1}}\n").empty());
  const ToolCallStreamDelta call = parser.Feed("</tool_call>");
  EXPECT_TRUE(call.content.empty());
  ASSERT_EQ(call.tool_calls.size(), 1u);
  EXPECT_EQ(call.tool_calls[0].index, 0);
  EXPECT_EQ(call.tool_calls[0].id, "call_000000000000000000000000");
  EXPECT_EQ(call.tool_calls[0].name, "w");
  EXPECT_EQ(call.tool_calls[0].arguments, R"({"c":1})");
  EXPECT_TRUE(parser.Feed("\n").empty());
  EXPECT_TRUE(parser.Finish().empty());

  // Mistral: content streams until the marker; the calls come at the end.
  ToolCallStreamParser mistral(ToolCallFormat::kMistral, SequentialToolCallIds());
  EXPECT_EQ(mistral.Feed("Sure [TOOL_CALLS][{\"name\": \"a\"}]").content, "Sure");
  EXPECT_EQ(mistral.Finish().tool_calls.size(), 1u);

  // Llama: plain text streams at once; an output starting like JSON is held whole.
  ToolCallStreamParser llama(ToolCallFormat::kLlama3Json, SequentialToolCallIds());
  EXPECT_EQ(llama.Feed("Hi").content, "Hi");
  ToolCallStreamParser llama_call(ToolCallFormat::kLlama3Json, SequentialToolCallIds());
  EXPECT_TRUE(llama_call.Feed("{\"name\": \"f\", \"parameters\": {}}").empty());
  EXPECT_EQ(llama_call.Finish().tool_calls.size(), 1u);
}

}  // namespace
}  // namespace pagoda::chat
