// Prompt logprobs through the engine with stories260K: each prompt token's logprob given the
// tokens before it, exactly the logprob the engine reports when it generates that token
// greedily at that position; max_tokens 0 (the prompt only); chunked prefill, the prefix
// cache, preemption, parallel samples and batch neighbours change no bit.
#include <cmath>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "gtest/gtest.h"
#include "model/tokenizer.h"
#include "tests/engine_test_util.h"

namespace pagoda {
namespace {

using engine::CollectedOutput;
using engine::FinishReason;
using engine::GenerationRequest;
using engine::TokenLogprob;
using testing::GreedyRequest;

// A context and its greedy continuation (with the engine's logprobs of each token, top 3).
struct Continuation {
  std::vector<int32_t> context;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;
};

Continuation Greedy(engine::Engine& engine, const std::string& text, int32_t n) {
  Continuation c;
  c.context = engine.tokenizer().Encode(text, true);
  GenerationRequest r = GreedyRequest(c.context, n);
  r.sampling.logprobs = 3;
  CollectedOutput out = testing::RunOne(engine, r);
  c.tokens = out.token_ids;
  c.logprobs = out.logprobs;
  return c;
}

// lm-evaluation-harness's shape: context + continuation as one prompt, prompt logprobs,
// nothing generated.
GenerationRequest ScoreRequest(const Continuation& c, int32_t top = 3) {
  std::vector<int32_t> prompt = c.context;
  prompt.insert(prompt.end(), c.tokens.begin(), c.tokens.end());
  GenerationRequest r = GreedyRequest(prompt, 0);
  r.sampling.prompt_logprobs = top;
  return r;
}

void ExpectSameLogprob(const TokenLogprob& a, const TokenLogprob& b, const std::string& where) {
  EXPECT_EQ(a.token_id, b.token_id) << where;
  EXPECT_EQ(a.logprob, b.logprob) << where;  // bit for bit: the CPU path is batch-invariant
  EXPECT_EQ(a.top, b.top) << where;
}

// The scored prompt's logprobs over the continuation equal the generation's, token by token.
void ExpectScores(const Continuation& c, const CollectedOutput& scored) {
  ASSERT_TRUE(scored.error.ok()) << scored.error;
  EXPECT_EQ(scored.finish_reason, FinishReason::kLength);
  EXPECT_TRUE(scored.token_ids.empty());
  EXPECT_EQ(scored.text, "");
  EXPECT_EQ(scored.usage.completion_tokens, 0);
  const size_t prompt_len = c.context.size() + c.tokens.size();
  EXPECT_EQ(scored.usage.prompt_tokens, static_cast<int32_t>(prompt_len));
  ASSERT_EQ(scored.prompt_token_ids.size(), prompt_len);
  ASSERT_EQ(scored.prompt_logprobs.size(), prompt_len - 1);  // the first token has none
  for (size_t i = 0; i + 1 < prompt_len; ++i) {
    EXPECT_EQ(scored.prompt_logprobs[i].token_id, scored.prompt_token_ids[i + 1]);
    EXPECT_LE(scored.prompt_logprobs[i].logprob, 0.f);
    EXPECT_EQ(scored.prompt_logprobs[i].top.size(), 3u);
  }
  double sum_scored = 0, sum_generated = 0;
  for (size_t j = 0; j < c.tokens.size(); ++j) {
    const TokenLogprob& s = scored.prompt_logprobs[c.context.size() - 1 + j];
    ExpectSameLogprob(s, c.logprobs[j], "continuation token " + std::to_string(j));
    sum_scored += s.logprob;
    sum_generated += c.logprobs[j].logprob;
  }
  EXPECT_NEAR(sum_scored, sum_generated, 1e-5);
}

TEST(EnginePromptLogprobsTest, ContinuationScoresEqualTheGreedyGenerationsLogprobs) {
  auto engine = testing::StoriesEngine({.enable_prefix_caching = false});
  ASSERT_NE(engine, nullptr);
  const Continuation c = Greedy(*engine, "Once upon a time", 12);
  ASSERT_EQ(c.tokens.size(), 12u);
  ExpectScores(c, testing::RunOne(*engine, ScoreRequest(c)));
}

TEST(EnginePromptLogprobsTest, ChunkedPrefillChangesNoBit) {
  auto engine = testing::StoriesEngine({.max_batched_tokens = 5, .enable_prefix_caching = false});
  ASSERT_NE(engine, nullptr);
  const Continuation c = Greedy(*engine, "The little dog ran to the park and", 20);
  ExpectScores(c, testing::RunOne(*engine, ScoreRequest(c)));
}

TEST(EnginePromptLogprobsTest, APromptLongerThanTheCappedChunkIsScoredAcrossChunks) {
  auto engine = testing::StoriesEngine({.enable_prefix_caching = false});
  ASSERT_NE(engine, nullptr);
  const Continuation c = Greedy(*engine, "Once upon a time", 300);
  ASSERT_GT(c.context.size() + c.tokens.size(), size_t{engine::kMaxPromptLogprobChunk});
  ExpectScores(c, testing::RunOne(*engine, ScoreRequest(c)));
}

TEST(EnginePromptLogprobsTest, PrefixCacheHitsNeverSkipPositionsWhoseLogitsAreNeeded) {
  auto engine = testing::StoriesEngine({.block_size = 4, .enable_prefix_caching = true});
  ASSERT_NE(engine, nullptr);
  const Continuation c = Greedy(*engine, "Lily saw a big red ball in the park", 16);
  // The context's blocks are cached now; the scored prompt starts with them. Twice: the
  // second finds its own whole prompt cached.
  const CollectedOutput first = testing::RunOne(*engine, ScoreRequest(c));
  const CollectedOutput second = testing::RunOne(*engine, ScoreRequest(c));
  ExpectScores(c, first);
  ExpectScores(c, second);
  EXPECT_EQ(first.usage.cached_tokens, 0);
  EXPECT_EQ(second.usage.cached_tokens, 0);
  // A plain request of the same prompt still uses the cache the scored ones filled.
  GenerationRequest plain = GreedyRequest(ScoreRequest(c).prompt_token_ids, 1);
  EXPECT_GT(testing::RunOne(*engine, plain).usage.cached_tokens, 0);
  EXPECT_TRUE(testing::WaitForIdle(*engine));
}

TEST(EnginePromptLogprobsTest, SameValuesAloneAndBesideOtherRequests) {
  auto engine = testing::StoriesEngine({.max_batched_tokens = 64});
  ASSERT_NE(engine, nullptr);
  const std::vector<std::string> texts = {"Once upon a time", "Tom and Sue", "The sun was",
                                          "One day, there was"};
  std::vector<Continuation> conts;
  std::vector<GenerationRequest> requests;
  std::vector<CollectedOutput> alone;
  for (const std::string& t : texts) {
    conts.push_back(Greedy(*engine, t, 10));
    requests.push_back(ScoreRequest(conts.back()));
    alone.push_back(testing::RunOne(*engine, requests.back()));
  }
  // Beside greedy generations and each other, several chunks per step.
  for (const std::string& t : texts) {
    requests.push_back(GreedyRequest(engine->tokenizer().Encode(t + " in the park", true), 20));
  }
  const std::vector<CollectedOutput> together = testing::RunAll(*engine, requests);
  for (size_t i = 0; i < conts.size(); ++i) {
    ExpectScores(conts[i], together[i]);
    ASSERT_EQ(together[i].prompt_logprobs.size(), alone[i].prompt_logprobs.size());
    for (size_t j = 0; j < alone[i].prompt_logprobs.size(); ++j) {
      ExpectSameLogprob(together[i].prompt_logprobs[j], alone[i].prompt_logprobs[j],
                        "request " + std::to_string(i) + " token " + std::to_string(j));
    }
  }
  EXPECT_TRUE(testing::WaitForIdle(*engine));
}

TEST(EnginePromptLogprobsTest, PreemptedAndRecomputedChangesNoBit) {
  // 24 blocks of 4 tokens cannot hold 8 sequences of ~30-token prompts + 24 outputs: the
  // scored prompts preempt each other, some before their prompt logprobs were delivered.
  auto engine = testing::StoriesEngine({.block_size = 4, .num_blocks = 24});
  ASSERT_NE(engine, nullptr);
  std::vector<Continuation> conts;
  std::vector<GenerationRequest> requests;
  for (const std::string& t : {"Once upon a time", "Tom and Sue", "The sun was", "Mom said",
                               "The little dog", "Lily saw", "One day", "A big red ball"}) {
    conts.push_back(Greedy(*engine, t, 24));
    GenerationRequest r = ScoreRequest(conts.back());
    r.max_tokens = 24;  // and generates on, growing into the others' blocks
    requests.push_back(r);
  }
  const std::vector<CollectedOutput> together = testing::RunAll(*engine, requests);
  for (size_t i = 0; i < conts.size(); ++i) {
    const CollectedOutput& out = together[i];
    ASSERT_TRUE(out.error.ok()) << out.error;
    ASSERT_EQ(out.prompt_logprobs.size(), conts[i].context.size() + conts[i].tokens.size() - 1);
    for (size_t j = 0; j < conts[i].tokens.size(); ++j) {
      ExpectSameLogprob(out.prompt_logprobs[conts[i].context.size() - 1 + j], conts[i].logprobs[j],
                        "request " + std::to_string(i) + " token " + std::to_string(j));
    }
    EXPECT_EQ(out.token_ids.size(), 24u);
  }
  EXPECT_GT(engine->Stats().num_preemptions, 0);
  EXPECT_TRUE(testing::WaitForIdle(*engine));
}

TEST(EnginePromptLogprobsTest, WithGenerationTheFirstDeliveryCarriesThePrompt) {
  auto engine = testing::StoriesEngine();
  ASSERT_NE(engine, nullptr);
  const Continuation c = Greedy(*engine, "A big red ball", 8);
  GenerationRequest r = GreedyRequest(c.context, 8);
  r.sampling.prompt_logprobs = 0;
  r.n = 2;
  const CollectedOutput out = testing::RunOne(*engine, r);
  ASSERT_TRUE(out.error.ok()) << out.error;
  EXPECT_EQ(out.token_ids, c.tokens);
  ASSERT_EQ(out.samples.size(), 2u);
  for (const engine::CollectedSample& s : out.samples) {
    EXPECT_EQ(s.token_ids, c.tokens);
    EXPECT_EQ(s.prompt_token_ids, c.context);
    ASSERT_EQ(s.prompt_logprobs.size(), c.context.size() - 1);
    for (const TokenLogprob& lp : s.prompt_logprobs) EXPECT_TRUE(lp.top.empty());
  }
  // A prompt of one token has no prompt logprobs at all.
  GenerationRequest one = GreedyRequest({c.context[0]}, 0);
  one.sampling.prompt_logprobs = 1;
  const CollectedOutput single = testing::RunOne(*engine, one);
  EXPECT_EQ(single.finish_reason, FinishReason::kLength);
  EXPECT_EQ(single.prompt_token_ids, std::vector<int32_t>{c.context[0]});
  EXPECT_TRUE(single.prompt_logprobs.empty());
  EXPECT_TRUE(testing::WaitForIdle(*engine));
}

TEST(EnginePromptLogprobsTest, MaxTokensZeroNeedsPromptLogprobs) {
  auto engine = testing::StoriesEngine();
  ASSERT_NE(engine, nullptr);
  const std::vector<int32_t> prompt = engine->tokenizer().Encode("Once upon a time", true);
  auto sink = std::make_shared<engine::CollectingSink>();
  absl::StatusOr<engine::SubmitResult> r = engine->Submit(GreedyRequest(prompt, 0), sink);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("max_tokens: must be positive"), std::string::npos);
  GenerationRequest bad = GreedyRequest(prompt, 0);
  bad.sampling.prompt_logprobs = 21;
  r = engine->Submit(bad, sink);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("prompt_logprobs: must be in [0, 20]"), std::string::npos);
}

}  // namespace
}  // namespace pagoda
