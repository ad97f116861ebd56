// The sampler on hand-made logits: exact tokens for greedy and filtered draws, penalties,
// logit bias, seeds and logprobs.
#include "engine/sampler.h"

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace pagoda::engine {
namespace {

SampleResult Draw(const SamplingParams& p, std::vector<float> logits, uint64_t seed = 1,
                  int32_t index = 0, std::vector<int32_t> context = {},
                  absl::flat_hash_map<int32_t, int32_t> counts = {}) {
  SampleInput in{.params = &p,
                 .seed = seed,
                 .output_index = index,
                 .context = context,
                 .output_counts = &counts};
  return Sample(in, absl::MakeSpan(logits));
}

TEST(SamplerTest, GreedyTakesTheLowestIdAmongTies) {
  SamplingParams p{.temperature = 0};
  EXPECT_EQ(Draw(p, {0.1f, 3.f, -1.f, 3.f}).token_id, 1);
}

TEST(SamplerTest, TopKOneAndTinyTopPAreGreedy) {
  const std::vector<float> logits = {0.5f, 2.f, 1.9f, -3.f, 1.f};
  for (uint64_t seed = 0; seed < 50; ++seed) {
    EXPECT_EQ(Draw({.temperature = 1.f, .top_k = 1}, logits, seed).token_id, 1);
    EXPECT_EQ(Draw({.temperature = 1.f, .top_p = 0.01f}, logits, seed).token_id, 1);
  }
}

TEST(SamplerTest, TopKKeepsOnlyTheKMostLikely) {
  const std::vector<float> logits = {5.f, 4.9f, 4.8f, 0.f, 0.f, 0.f};
  for (uint64_t seed = 0; seed < 200; ++seed) {
    EXPECT_LT(Draw({.temperature = 5.f, .top_k = 3}, logits, seed).token_id, 3);
  }
}

TEST(SamplerTest, MinPDropsUnlikelyTokens) {
  // Token 1 has probability e^-3 ~ 0.05 of token 0's: below min_p 0.1.
  const std::vector<float> logits = {3.f, 0.f, 2.9f};
  for (uint64_t seed = 0; seed < 300; ++seed) {
    EXPECT_NE(Draw({.temperature = 1.f, .min_p = 0.1f}, logits, seed).token_id, 1);
  }
}

// Regression: temperature 1e-45 with min_p made every weight NaN, min-p kept nothing and the
// draw read before its buffer; temperatures in (0, 1e-37] always returned the last id.
TEST(SamplerTest, TinyTemperaturesDrawTheMostLikelyToken) {
  const std::vector<float> logits = {0.5f, 2.f, 1.9f, -3.f, 1.f};
  for (float t : {1e-45f, 1e-38f, 1e-20f}) {
    for (uint64_t seed = 0; seed < 50; ++seed) {
      EXPECT_EQ(Draw({.temperature = t, .min_p = 0.5f}, logits, seed).token_id, 1) << t;
      EXPECT_EQ(Draw({.temperature = t}, logits, seed).token_id, 1) << t;
      EXPECT_EQ(Draw({.temperature = t, .top_p = 0.9f}, logits, seed).token_id, 1) << t;
    }
  }
}

TEST(SamplerTest, NonFiniteLogitsAreNeverDrawn) {
  const float nan = std::nanf("");
  const float inf = std::numeric_limits<float>::infinity();
  for (uint64_t seed = 0; seed < 50; ++seed) {
    EXPECT_EQ(Draw({.temperature = 1.f}, {nan, -inf, 0.f, nan}, seed).token_id, 2);
    EXPECT_EQ(Draw({.temperature = 1.f, .min_p = 1.f}, {-inf, 1.f, 1.f - 1e-3f}, seed).token_id, 1);
  }
  // Nothing finite at all: the lowest id, never a read outside the logits.
  EXPECT_EQ(Draw({.temperature = 1.f, .top_k = 2}, {nan, nan, -inf}).token_id, 0);
}

TEST(SamplerTest, DrawsFollowTheDistribution) {
  // softmax([0, ln 3]) = [0.25, 0.75].
  const std::vector<float> logits = {0.f, std::log(3.f)};
  int ones = 0;
  for (int i = 0; i < 4000; ++i) ones += Draw({.temperature = 1.f}, logits, 9, i).token_id;
  EXPECT_NEAR(ones / 4000.0, 0.75, 0.03);
}

TEST(SamplerTest, SameSeedAndIndexSameToken) {
  const std::vector<float> logits = {1.f, 1.2f, 0.9f, 1.1f, 1.05f};
  SamplingParams p{.temperature = 1.f};
  for (int32_t i = 0; i < 20; ++i)
    EXPECT_EQ(Draw(p, logits, 77, i).token_id, Draw(p, logits, 77, i).token_id);
  EXPECT_EQ(UniformDraw(3, 4), UniformDraw(3, 4));
  EXPECT_NE(UniformDraw(3, 4), UniformDraw(3, 5));
  EXPECT_NE(UniformDraw(3, 4), UniformDraw(4, 4));
}

TEST(SamplerTest, PenaltiesChangeTheGreedyChoice) {
  const std::vector<float> logits = {2.f, 1.9f, 1.f};
  // Repetition: token 0 is in the context; 2 / 1.2 < 1.9.
  EXPECT_EQ(Draw({.temperature = 0, .repetition_penalty = 1.2f}, logits, 1, 0, {0}).token_id, 1);
  // Presence and frequency: token 0 was generated twice.
  absl::flat_hash_map<int32_t, int32_t> counts = {{0, 2}};
  EXPECT_EQ(Draw({.temperature = 0, .presence_penalty = 0.2f}, logits, 1, 0, {}, counts).token_id,
            1);
  EXPECT_EQ(Draw({.temperature = 0, .frequency_penalty = 0.06f}, logits, 1, 0, {}, counts).token_id,
            1);
  EXPECT_EQ(Draw({.temperature = 0, .frequency_penalty = 0.04f}, logits, 1, 0, {}, counts).token_id,
            0);
}

TEST(SamplerTest, LogprobsComeFromTheRawLogits) {
  const std::vector<float> logits = {0.f, std::log(3.f), -100.f};
  const SampleResult r = Draw({.temperature = 0, .logprobs = 2}, logits);
  ASSERT_TRUE(r.logprob.has_value());
  EXPECT_EQ(r.logprob->token_id, 1);
  EXPECT_NEAR(r.logprob->logprob, std::log(0.75), 1e-6);
  ASSERT_EQ(r.logprob->top.size(), 2u);
  EXPECT_EQ(r.logprob->top[0].first, 1);
  EXPECT_EQ(r.logprob->top[1].first, 0);
  EXPECT_NEAR(r.logprob->top[1].second, std::log(0.25), 1e-6);
  EXPECT_FALSE(Draw({.temperature = 0}, logits).logprob.has_value());
}

// Issue 27 item 3: logit_bias is added before penalties and sampling, greedy included; a
// bias of -100 bans a token, +100 forces it; logprobs stay those of the raw logits.
TEST(SamplerTest, LogitBiasBansAndForcesTokens) {
  const std::vector<float> logits = {2.f, 1.9f, 1.f, -3.f};
  EXPECT_EQ(Draw({.temperature = 0, .logit_bias = {{0, -100.f}}}, logits).token_id, 1);
  EXPECT_EQ(Draw({.temperature = 0, .logit_bias = {{0, -100.f}, {1, -100.f}}}, logits).token_id, 2);
  EXPECT_EQ(Draw({.temperature = 0, .logit_bias = {{3, 100.f}}}, logits).token_id, 3);
  // A small bias moves the greedy choice exactly when it crosses the gap (0.1).
  EXPECT_EQ(Draw({.temperature = 0, .logit_bias = {{1, 0.2f}}}, logits).token_id, 1);
  EXPECT_EQ(Draw({.temperature = 0, .logit_bias = {{1, 0.05f}}}, logits).token_id, 0);
  for (uint64_t seed = 0; seed < 100; ++seed) {
    EXPECT_EQ(Draw({.temperature = 1.f, .logit_bias = {{3, 100.f}}}, logits, seed).token_id, 3);
    EXPECT_NE(Draw({.temperature = 2.f, .logit_bias = {{0, -100.f}}}, logits, seed).token_id, 0);
    EXPECT_EQ(
        Draw({.temperature = 1.f, .top_k = 1, .logit_bias = {{2, 5.f}}}, logits, seed).token_id, 2);
  }
  // Before the repetition penalty: (2 + 1.5) / 2 = 1.75 < 1.9 (after it, 2 / 2 + 1.5 > 1.9).
  EXPECT_EQ(Draw({.temperature = 0, .repetition_penalty = 2.f, .logit_bias = {{0, 1.5f}}}, logits,
                 1, 0, {0})
                .token_id,
            1);
  // Logprobs: the raw distribution, the banned token still on top.
  const SampleResult r =
      Draw({.temperature = 0, .logprobs = 2, .logit_bias = {{0, -100.f}}}, logits);
  ASSERT_TRUE(r.logprob.has_value());
  EXPECT_EQ(r.logprob->token_id, 1);
  ASSERT_EQ(r.logprob->top.size(), 2u);
  EXPECT_EQ(r.logprob->top[0].first, 0);
  EXPECT_EQ(r.logprob->top[1].first, 1);
  EXPECT_EQ(r.logprob->logprob, r.logprob->top[1].second);
}

TEST(SamplerTest, LogitBiasValidation) {
  EXPECT_TRUE(ValidateLogitBias({}, 4).ok());
  EXPECT_TRUE(ValidateLogitBias({{0, -100.f}, {3, 100.f}}, 4).ok());
  const auto message = [](std::vector<std::pair<int32_t, float>> bias) {
    return std::string(ValidateLogitBias(bias, 4).message());
  };
  EXPECT_EQ(message({{4, 1.f}}), "logit_bias: token 4 is outside the vocabulary [0, 4)");
  EXPECT_EQ(message({{-1, 1.f}}), "logit_bias: token -1 is outside the vocabulary [0, 4)");
  EXPECT_EQ(message({{1, 100.5f}}),
            "logit_bias: the bias of token 1 (100.5) is outside [-100, 100]");
  EXPECT_EQ(message({{1, -101.f}}),
            "logit_bias: the bias of token 1 (-101) is outside [-100, 100]");
  EXPECT_EQ(message({{1, std::nanf("")}}),
            "logit_bias: the bias of token 1 (nan) is outside [-100, 100]");
  EXPECT_EQ(message({{1, 1.f}, {1, 2.f}}), "logit_bias: token 1 is given twice");
  std::vector<std::pair<int32_t, float>> many;
  for (int32_t id = 0; id < 301; ++id) many.emplace_back(id, 1.f);
  EXPECT_EQ(ValidateLogitBias(many, 1000).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateLogitBias(many, 1000).message(), "logit_bias: 301 entries; at most 300");
  many.pop_back();
  EXPECT_TRUE(ValidateLogitBias(many, 1000).ok());
}

}  // namespace
}  // namespace pagoda::engine

namespace pagoda::engine {
namespace {

// Issue 44: a grammar's mask is applied after the penalties. A repetition penalty of 1e38
// takes every allowed logit (-4 and -5: -4e38 is past the float range) to -inf; a refused
// token must still never win, greedy or drawn (the first allowed token does), and logprobs
// are those of the masked logits.
TEST(SamplerMaskTest, RefusedTokensNeverWinWhateverThePenalties) {
  // Tokens 0 and 1 refused; 2 and 3 allowed, both seen in the context.
  const std::vector<uint64_t> allowed = {0b1100};
  const std::vector<int32_t> context = {2, 3};
  absl::flat_hash_map<int32_t, int32_t> counts;
  for (const float temperature : {0.f, 1.f}) {
    SamplingParams p{.temperature = temperature, .repetition_penalty = 1e38f, .logprobs = 1};
    std::vector<float> logits = {5.f, 4.f, -4.f, -5.f};
    SampleInput in{.params = &p,
                   .seed = 7,
                   .output_index = 0,
                   .context = context,
                   .output_counts = &counts,
                   .allowed = &allowed};
    const SampleResult r = Sample(in, absl::MakeSpan(logits));
    EXPECT_EQ(r.token_id, 2);
    EXPECT_EQ(logits[2], -std::numeric_limits<float>::infinity());  // the penalty overflowed
    ASSERT_TRUE(r.logprob.has_value());
    ASSERT_EQ(r.logprob->top.size(), 1u);
    EXPECT_EQ(r.logprob->top[0].first, 2);  // -4 > -5: the likelier allowed token
  }
  // Without a penalty, greedy takes the best allowed token, not the best overall.
  SamplingParams greedy{.temperature = 0.f};
  std::vector<float> logits = {5.f, 4.f, -2.f, -1.f};
  SampleInput in{.params = &greedy, .allowed = &allowed};
  EXPECT_EQ(Sample(in, absl::MakeSpan(logits)).token_id, 3);
}

}  // namespace
}  // namespace pagoda::engine
