// Reasoning sections in the engine (GenerationRequest::reasoning, engine/reasoning_state.h)
// on stories260K, greedy: the budget forces the close marker's tokens after exactly that
// many tokens of reasoning, the output then goes on as the model would after them; a
// prompt that ends with the open marker starts the output inside the reasoning (and says
// so in the first delivery); a sampling grammar waits for the close marker; the template
// gets chat_template_kwargs, never ones that name its own variables.
#include <memory>
#include <string>
#include <vector>

#include "engine/request.h"
#include "gmock/gmock.h"
#include "grammar/gbnf.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/engine_test_util.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr char kPrompt[] = "Once upon a time, there was a little dog";

class EngineReasoningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = testing::StoriesEngine();
    ASSERT_NE(engine_, nullptr);
  }
  void TearDown() override { engine_->Stop(); }

  std::vector<int32_t> Ids(const std::string& text, bool bos) {
    absl::StatusOr<std::vector<int32_t>> ids = engine_->Tokenize(text, bos, true);
    EXPECT_TRUE(ids.ok()) << ids.status();
    return ids.ok() ? *ids : std::vector<int32_t>{};
  }

  // The greedy output of `prompt` ids, `n` tokens.
  std::vector<int32_t> Greedy(std::vector<int32_t> prompt, int32_t n) {
    return testing::RunOne(*engine_, testing::GreedyRequest(std::move(prompt), n)).token_ids;
  }

  std::unique_ptr<engine::Engine> engine_;
};

engine::ReasoningSpec Think(bool starts_open, std::optional<int32_t> budget) {
  return {.open = "<think>", .close = "</think>", .starts_open = starts_open, .max_tokens = budget};
}

// Captures each sample's first delivery's reasoning_open.
struct FirstDelivery {
  bool seen = false;
  bool reasoning_open = false;
};

engine::CollectedOutput RunWatched(engine::Engine& engine, engine::GenerationRequest request,
                                   FirstDelivery* first) {
  auto sink = std::make_shared<engine::CollectingSink>([first](const engine::GenerationOutput& o) {
    if (!first->seen) {
      first->seen = true;
      first->reasoning_open = o.reasoning_open;
    }
  });
  absl::StatusOr<engine::SubmitResult> submitted = engine.Submit(std::move(request), sink);
  EXPECT_TRUE(submitted.ok()) << submitted.status();
  return submitted.ok() ? sink->Wait() : engine::CollectedOutput{};
}

TEST_F(EngineReasoningTest, TheBudgetForcesTheCloseMarkerThenTheOutputGoesOn) {
  const std::vector<int32_t> prompt = Ids(kPrompt, true);
  const std::vector<int32_t> close = Ids("</think>", false);
  ASSERT_FALSE(close.empty());
  const std::vector<int32_t> free_run = Greedy(prompt, 3);
  engine::GenerationRequest r = testing::GreedyRequest(prompt, 16);
  r.reasoning = Think(/*starts_open=*/true, /*budget=*/3);
  FirstDelivery first;
  const engine::CollectedOutput out = RunWatched(*engine_, std::move(r), &first);
  ASSERT_TRUE(out.error.ok()) << out.error;
  EXPECT_TRUE(first.reasoning_open);
  // Three tokens of reasoning as the model writes them, the marker, then what the model
  // writes after all of that.
  std::vector<int32_t> expected = free_run;
  expected.insert(expected.end(), close.begin(), close.end());
  std::vector<int32_t> context = prompt;
  context.insert(context.end(), expected.begin(), expected.end());
  const std::vector<int32_t> rest = Greedy(context, 16 - static_cast<int32_t>(expected.size()));
  expected.insert(expected.end(), rest.begin(), rest.end());
  EXPECT_THAT(out.token_ids, ElementsAreArray(expected));
  EXPECT_THAT(out.text, HasSubstr("</think>"));
}

TEST_F(EngineReasoningTest, APromptEndingWithTheOpenMarkerStartsInsideIt) {
  const std::vector<int32_t> close = Ids("</think>", false);
  // Budget 0: the first tokens are the close marker.
  engine::GenerationRequest opened = testing::GreedyRequest(
      Ids(std::string(kPrompt) + " <think>\n", true), static_cast<int32_t>(close.size()));
  opened.reasoning = Think(/*starts_open=*/false, /*budget=*/0);
  FirstDelivery first;
  const engine::CollectedOutput out = RunWatched(*engine_, std::move(opened), &first);
  EXPECT_TRUE(first.reasoning_open);
  EXPECT_THAT(out.token_ids, ElementsAreArray(close));
  // Without the marker the output starts outside: the budget never applies, the output is
  // the model's own.
  const std::vector<int32_t> prompt = Ids(kPrompt, true);
  engine::GenerationRequest plain = testing::GreedyRequest(prompt, 8);
  plain.reasoning = Think(/*starts_open=*/false, /*budget=*/0);
  FirstDelivery plain_first;
  const engine::CollectedOutput plain_out = RunWatched(*engine_, std::move(plain), &plain_first);
  EXPECT_TRUE(plain_first.seen);
  EXPECT_FALSE(plain_first.reasoning_open);
  EXPECT_THAT(plain_out.token_ids, ElementsAreArray(Greedy(prompt, 8)));
}

TEST_F(EngineReasoningTest, TheGrammarWaitsForTheCloseMarker) {
  const std::vector<int32_t> prompt = Ids(kPrompt, true);
  const std::vector<int32_t> free_run = Greedy(prompt, 2);
  absl::StatusOr<std::string> reasoning = engine_->Detokenize(free_run);
  ASSERT_TRUE(reasoning.ok());
  auto grammar = grammar::CompileGbnf(R"(root ::= "yes" | "no")");
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  engine::GenerationRequest r = testing::GreedyRequest(prompt, 24, /*ignore_eos=*/false);
  r.sampling.grammar = *grammar;
  r.reasoning = Think(/*starts_open=*/true, /*budget=*/2);
  FirstDelivery first;
  const engine::CollectedOutput out = RunWatched(*engine_, std::move(r), &first);
  ASSERT_TRUE(out.error.ok()) << out.error;
  // The reasoning is the model's (unconstrained), the answer the grammar's.
  ASSERT_GE(out.token_ids.size(), 2u);
  EXPECT_EQ(std::vector<int32_t>(out.token_ids.begin(), out.token_ids.begin() + 2), free_run);
  const size_t close = out.text.find("</think>");
  ASSERT_NE(close, std::string::npos) << out.text;
  const std::string answer = out.text.substr(close + 8);
  EXPECT_TRUE(answer == "yes" || answer == "no") << out.text;
  EXPECT_EQ(out.finish_reason, engine::FinishReason::kStop);
}

TEST_F(EngineReasoningTest, BadMarkersAreRefused) {
  engine::GenerationRequest r = testing::GreedyRequest(Ids(kPrompt, true), 4);
  r.reasoning = {.open = "<think>", .close = ""};
  absl::StatusOr<engine::SubmitResult> s =
      engine_->Submit(r, std::make_shared<engine::CollectingSink>());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "reasoning.close: must not be empty");
  r.reasoning = {.open = std::string(65, 'x'), .close = "</x>"};
  s = engine_->Submit(r, std::make_shared<engine::CollectingSink>());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "reasoning.open: has 65 bytes; at most 64");
}

TEST(EngineTemplateKwargsTest, TheTemplateSeesThemButNotInPlaceOfItsOwn) {
  engine::EngineConfig config;
  config.chat_template =
      "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"
      "{% if enable_thinking is defined and enable_thinking is false %}(no thinking){% endif %}"
      "{{ reasoning_effort | default('') }}";
  auto engine = testing::StoriesEngine(config);
  ASSERT_NE(engine, nullptr);
  const std::vector<engine::ChatMessage> messages = {{.role = "user", .content = "hi"}};
  const nlohmann::json kwargs = {{"enable_thinking", false}, {"reasoning_effort", "low"}};
  absl::StatusOr<std::string> text = engine->RenderChat(messages, true, nullptr, &kwargs);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "[user]hi(no thinking)low");
  const nlohmann::json reserved = {{"messages", nlohmann::json::array()}};
  text = engine->RenderChat(messages, true, nullptr, &reserved);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().message(),
            "chat_template_kwargs: 'messages' is set by the server, not the request");
  const nlohmann::json not_object = nlohmann::json::array({1});
  text = engine->RenderChat(messages, true, nullptr, &not_object);
  EXPECT_EQ(text.status().message(), "chat_template_kwargs: must be a JSON object");
  engine->Stop();
}

}  // namespace
}  // namespace pagoda
