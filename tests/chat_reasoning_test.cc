// The reasoning parser (chat/reasoning.h): formats by name and from real chat templates,
// the whole-output split, and the streamed split, which for every way of cutting an output
// into pieces reassembles to the whole split.
#include <string>
#include <vector>

#include "chat/reasoning.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagoda::chat {
namespace {

ReasoningFormat Qwen3() { return **ReasoningFormatNamed("qwen3"); }
ReasoningFormat R1() { return **ReasoningFormatNamed("deepseek_r1"); }

TEST(ReasoningFormatTest, NamesAndTemplates) {
  EXPECT_FALSE(ReasoningFormatNamed("none")->has_value());
  EXPECT_EQ(Qwen3().open, "<think>");
  EXPECT_EQ(Qwen3().close, "</think>");
  EXPECT_FALSE(Qwen3().starts_open);
  EXPECT_TRUE(R1().starts_open);
  EXPECT_EQ((**ReasoningFormatNamed("mistral")).open, "[THINK]");
  const absl::StatusOr<std::optional<ReasoningFormat>> bad = ReasoningFormatNamed("o1");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "reasoning parser 'o1' is not known; use auto, none, deepseek_r1, qwen3 or mistral");
  auto detect = [](const std::string& name) -> std::string {
    const std::optional<ReasoningFormat> f = DetectReasoningFormat(
        testing::ReadFileOrDie(testing::ModelPath("chat_templates/" + name + ".jinja")));
    return f.has_value() ? f->name : "none";
  };
  EXPECT_EQ(detect("Qwen-Qwen3-0.6B"), "qwen3");
  EXPECT_EQ(detect("Qwen-QwQ-32B"), "qwen3");
  EXPECT_EQ(detect("deepseek-ai-DeepSeek-R1-Distill-Llama-8B"), "deepseek_r1");
  EXPECT_EQ(detect("Qwen-Qwen2.5-7B-Instruct"), "none");
  EXPECT_EQ(detect("meta-llama-Llama-3.1-8B-Instruct"), "none");
}

TEST(SplitReasoningTest, Whole) {
  ReasoningSplit s = SplitReasoning("<think>\nWhy?\n</think>\n\nBecause.", Qwen3(), false);
  EXPECT_TRUE(s.has_reasoning);
  EXPECT_EQ(s.reasoning, "\nWhy?\n");
  EXPECT_EQ(s.content, "\n\nBecause.");
  // Leading whitespace before the marker is the reasoning's framing, not content.
  s = SplitReasoning("  <think>a</think>b", Qwen3(), false);
  EXPECT_EQ(s.reasoning, "a");
  EXPECT_EQ(s.content, "b");
  // No marker, not opened by the prompt: all content.
  s = SplitReasoning("Hello </think> there", Qwen3(), false);
  EXPECT_FALSE(s.has_reasoning);
  EXPECT_EQ(s.content, "Hello </think> there");
  // Opened by the prompt: reasoning up to the close marker.
  s = SplitReasoning("plan</think>answer", Qwen3(), true);
  EXPECT_EQ(s.reasoning, "plan");
  EXPECT_EQ(s.content, "answer");
  // Cut before the close marker: all reasoning.
  s = SplitReasoning("still thinking", Qwen3(), true);
  EXPECT_TRUE(s.has_reasoning);
  EXPECT_EQ(s.reasoning, "still thinking");
  EXPECT_EQ(s.content, "");
  // DeepSeek-R1 starts inside, and drops an open marker the model writes anyway.
  s = SplitReasoning("<think>x</think>y", R1(), false);
  EXPECT_EQ(s.reasoning, "x");
  EXPECT_EQ(s.content, "y");
  s = SplitReasoning("x</think>y", R1(), false);
  EXPECT_EQ(s.reasoning, "x");
  EXPECT_EQ(s.content, "y");
  // A second close marker is content.
  s = SplitReasoning("a</think>b</think>c", R1(), false);
  EXPECT_EQ(s.reasoning, "a");
  EXPECT_EQ(s.content, "b</think>c");
}

TEST(ReasoningStreamParserTest, EveryCutReassemblesToTheWholeSplit) {
  const std::vector<std::string> outputs = {"<think>\nWhy?\n</think>\n\nBecause.",
                                            "  <think>a</think>b",
                                            "Hello </think> there",
                                            "<thin",
                                            "<think>",
                                            "plan</th",
                                            "a</think>b</think>c",
                                            "\n\n<think></think>",
                                            "",
                                            "<<think>>x</think></think>"};
  for (const ReasoningFormat& format : {Qwen3(), R1()}) {
    for (bool open : {false, true}) {
      for (const std::string& text : outputs) {
        const ReasoningSplit whole = SplitReasoning(text, format, open);
        // Two pieces at every cut, and one byte at a time.
        for (size_t cut = 0; cut <= text.size(); ++cut) {
          ReasoningStreamParser p(format, open);
          ReasoningStreamParser::Delta a = p.Feed(text.substr(0, cut));
          ReasoningStreamParser::Delta b = p.Feed(text.substr(cut));
          ReasoningStreamParser::Delta c = p.Finish();
          EXPECT_EQ(a.reasoning + b.reasoning + c.reasoning, whole.reasoning)
              << format.name << " " << open << " '" << text << "' at " << cut;
          EXPECT_EQ(a.content + b.content + c.content, whole.content)
              << format.name << " " << open << " '" << text << "' at " << cut;
        }
        ReasoningStreamParser p(format, open);
        std::string reasoning, content;
        for (char ch : text) {
          ReasoningStreamParser::Delta d = p.Feed(std::string(1, ch));
          reasoning += d.reasoning;
          content += d.content;
        }
        ReasoningStreamParser::Delta d = p.Finish();
        EXPECT_EQ(reasoning + d.reasoning, whole.reasoning) << text;
        EXPECT_EQ(content + d.content, whole.content) << text;
        EXPECT_EQ(p.has_reasoning(), whole.has_reasoning) << text;
      }
    }
  }
}

TEST(ReasoningStreamParserTest, HoldsBackOnlyWhatMayBeAMarker) {
  ReasoningStreamParser p(Qwen3(), /*open_at_start=*/true);
  ReasoningStreamParser::Delta d = p.Feed("step one </th");
  EXPECT_EQ(d.reasoning, "step one ");
  d = p.Feed("ink");
  EXPECT_EQ(d.reasoning, "");
  d = p.Feed(">Answer");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "Answer");
}

}  // namespace
}  // namespace pagoda::chat
