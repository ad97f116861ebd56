// Parallel sampling (n > 1) through the engine: the prompt is computed once and shared by
// reference count; sample i is seeded seed + i and equals a separate request with that
// seed (exact token ids); each sample has its own stop state and finish reason; blocks
// held; cancelling frees every sample.
#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/mutex.h"
#include "gtest/gtest.h"
#include "model/tokenizer.h"
#include "tests/engine_test_util.h"

namespace pagoda {
namespace {

using engine::CollectedOutput;
using engine::GenerationRequest;

GenerationRequest Sampled(const std::vector<int32_t>& prompt, uint64_t seed, int32_t n,
                          int32_t max_tokens) {
  GenerationRequest r;
  r.prompt_token_ids = prompt;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0.9f;
  r.sampling.top_k = 40;
  r.sampling.top_p = 0.95f;
  r.sampling.seed = seed;
  r.n = n;
  return r;
}

TEST(EngineParallelSamplingTest, SamplesEqualSeparateRequestsSeededSeedPlusIndex) {
  for (int32_t block_size : {4, 16}) {
    SCOPED_TRACE(::testing::Message() << "block size " << block_size);
    auto engine = testing::StoriesEngine({.block_size = block_size});
    auto separate =
        testing::StoriesEngine({.block_size = block_size, .enable_prefix_caching = false});
    ASSERT_NE(engine, nullptr);
    ASSERT_NE(separate, nullptr);
    // A partial last block, shared by the samples until each writes into it (a copy).
    const std::vector<int32_t> prompt =
        engine->tokenizer().Encode("Once upon a time, there was a little dog named", true);
    ASSERT_NE(prompt.size() % 4, 0u);
    ASSERT_NE(prompt.size() % 16, 0u);
    const CollectedOutput together = testing::RunOne(*engine, Sampled(prompt, 1234, 4, 40));
    ASSERT_EQ(together.samples.size(), 4u);
    EXPECT_EQ(together.finish_reason, engine::FinishReason::kLength);
    EXPECT_EQ(together.usage.prompt_tokens, static_cast<int32_t>(prompt.size()));
    EXPECT_EQ(together.usage.completion_tokens, 4 * 40);
    for (int32_t i = 0; i < 4; ++i) {
      const CollectedOutput alone = testing::RunOne(*separate, Sampled(prompt, 1234 + i, 1, 40));
      EXPECT_EQ(together.samples[i].token_ids, alone.token_ids) << "sample " << i;
      EXPECT_EQ(together.samples[i].text, alone.text) << "sample " << i;
      EXPECT_EQ(together.samples[i].finish_reason, engine::FinishReason::kLength);
    }
    EXPECT_EQ(together.token_ids, together.samples[0].token_ids);
    EXPECT_NE(together.samples[0].token_ids, together.samples[1].token_ids);
    EXPECT_TRUE(testing::WaitForIdle(*engine));
  }
}

// A copy on write of an int8 block must carry its K parameters and V scales: the samples
// then still equal separate requests.
TEST(EngineParallelSamplingTest, Int8CacheCopiesCarryTheirParameters) {
  auto engine = testing::StoriesEngine({.block_size = 4, .kv_cache_dtype = "int8"});
  auto separate = testing::StoriesEngine(
      {.block_size = 4, .enable_prefix_caching = false, .kv_cache_dtype = "int8"});
  ASSERT_NE(engine, nullptr);
  ASSERT_NE(separate, nullptr);
  const std::vector<int32_t> prompt =
      engine->tokenizer().Encode("Once upon a time, there was a little dog named", true);
  ASSERT_NE(prompt.size() % 4, 0u);
  const CollectedOutput together = testing::RunOne(*engine, Sampled(prompt, 99, 3, 30));
  ASSERT_EQ(together.samples.size(), 3u);
  for (int32_t i = 0; i < 3; ++i) {
    const CollectedOutput alone = testing::RunOne(*separate, Sampled(prompt, 99 + i, 1, 30));
    EXPECT_EQ(together.samples[i].token_ids, alone.token_ids) << "sample " << i;
  }
  EXPECT_TRUE(testing::WaitForIdle(*engine));
}

// Samples preempted by swap: a sample swapped out copies the blocks it shares with the
// others (they keep theirs) and comes back to private blocks; each still equals a separate
// request, and the pool and the swap space are full again.
TEST(EngineParallelSamplingTest, SamplesSwappedOutAndBackInEqualSeparateRequests) {
  // 4 samples of ~50 tokens need ~40 blocks of 4: 24 force preemptions.
  auto engine = testing::StoriesEngine({.block_size = 4,
                                        .num_blocks = 24,
                                        .preemption_mode = engine::PreemptionMode::kSwap,
                                        .swap_space = int64_t{1} << 20});
  auto separate = testing::StoriesEngine({.enable_prefix_caching = false});
  ASSERT_NE(engine, nullptr);
  ASSERT_NE(separate, nullptr);
  const std::vector<int32_t> prompt =
      engine->tokenizer().Encode("Once upon a time, there was a little dog named", true);
  const CollectedOutput together = testing::RunOne(*engine, Sampled(prompt, 7, 4, 40));
  ASSERT_EQ(together.samples.size(), 4u);
  for (int32_t i = 0; i < 4; ++i) {
    const CollectedOutput alone = testing::RunOne(*separate, Sampled(prompt, 7 + i, 1, 40));
    EXPECT_EQ(together.samples[i].token_ids, alone.token_ids) << "sample " << i;
  }
  EXPECT_TRUE(testing::WaitForIdle(*engine));
  const engine::EngineStats s = engine->Stats();
  EXPECT_GT(s.num_swap_outs, 0);
  EXPECT_EQ(s.num_swap_ins, s.num_swap_outs);
  EXPECT_EQ(s.num_free_blocks, s.num_blocks);
  EXPECT_EQ(s.num_free_swap_blocks, s.num_swap_blocks);
}

TEST(EngineParallelSamplingTest, EachSampleHasItsOwnStopStateAndFinishReason) {
  auto engine = testing::StoriesEngine();
  ASSERT_NE(engine, nullptr);
  const std::vector<int32_t> prompt = engine->tokenizer().Encode("Once upon a time", true);
  // Find a token that sample 1 produces early and sample 0 does not: sample 1 stops there.
  const CollectedOutput probe = testing::RunOne(*engine, Sampled(prompt, 7, 2, 24));
  ASSERT_EQ(probe.samples.size(), 2u);
  int32_t stop = -1;
  size_t at = 0;
  for (size_t k = 0; k < probe.samples[1].token_ids.size() && stop < 0; ++k) {
    const int32_t t = probe.samples[1].token_ids[k];
    const auto& s0 = probe.samples[0].token_ids;
    if (std::find(s0.begin(), s0.end(), t) == s0.end()) {
      stop = t;
      at = k;
    }
  }
  ASSERT_GE(stop, 0) << "no token of sample 1 is absent from sample 0";
  GenerationRequest r = Sampled(prompt, 7, 2, 24);
  r.stop_token_ids = {stop};
  const CollectedOutput out = testing::RunOne(*engine, r);
  ASSERT_EQ(out.samples.size(), 2u);
  EXPECT_EQ(out.samples[0].token_ids, probe.samples[0].token_ids);
  EXPECT_EQ(out.samples[0].finish_reason, engine::FinishReason::kLength);
  EXPECT_EQ(out.samples[1].token_ids,
            std::vector<int32_t>(probe.samples[1].token_ids.begin(),
                                 probe.samples[1].token_ids.begin() + at + 1));
  EXPECT_EQ(out.samples[1].finish_reason, engine::FinishReason::kStop);
  EXPECT_EQ(out.usage.completion_tokens, static_cast<int32_t>(24 + at + 1));
  EXPECT_TRUE(testing::WaitForIdle(*engine));
}

TEST(EngineParallelSamplingTest, CancellingFreesEverySample) {
  auto engine = testing::StoriesEngine();
  ASSERT_NE(engine, nullptr);
  Notification some;
  int delivered = 0;
  // Paused from the engine thread: the abort lands before the next step, however late.
  auto sink = std::make_shared<engine::CollectingSink>([&](const engine::GenerationOutput& o) {
    delivered += static_cast<int>(o.token_ids.size());
    if (delivered >= 40 && !some.HasBeenNotified()) {
      engine->Pause();
      some.Notify();
    }
  });
  auto submitted = engine->Submit(Sampled({1, 403, 407}, 5, 8, 400), sink);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  some.WaitForNotification();
  engine->Abort(submitted->handle);
  engine->Resume();
  const CollectedOutput out = sink->Wait();
  EXPECT_EQ(out.finish_reason, engine::FinishReason::kAbort);
  ASSERT_EQ(out.samples.size(), 8u);
  for (const auto& s : out.samples) EXPECT_EQ(s.finish_reason, engine::FinishReason::kAbort);
  EXPECT_TRUE(testing::WaitForIdle(*engine));
  EXPECT_EQ(engine->Stats().num_aborted, 1);
}

TEST(EngineParallelSamplingTest, NOutsideOneToSixteenIsInvalid) {
  auto engine = testing::StoriesEngine();
  ASSERT_NE(engine, nullptr);
  for (int32_t n : {0, -1, 17}) {
    auto s = engine->Submit(Sampled({1, 403}, 1, n, 4), std::make_shared<engine::CollectingSink>());
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.status().message(), "n: must be in [1, 16]");
  }
}

TEST(EngineParallelSamplingTest, MoreSamplesThanRunSlotsIsInvalid) {
  auto engine = testing::StoriesEngine({.max_seqs = 4});
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(engine->SetTenants({{.name = "", .max_running_requests = 2}}).ok());
  auto s = engine->Submit(Sampled({1, 403}, 1, 5, 4), std::make_shared<engine::CollectingSink>());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(), "n: 5 samples run at once, more than max_seqs (4)");
  s = engine->Submit(Sampled({1, 403}, 1, 3, 4), std::make_shared<engine::CollectingSink>());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "n: 3 samples run at once, more than tenant \"\"'s max_running_requests (2)");
  auto sink = std::make_shared<engine::CollectingSink>();
  ASSERT_TRUE(engine->Submit(Sampled({1, 403}, 1, 2, 4), sink).ok());
  EXPECT_EQ(sink->Wait().samples.size(), 2u);
}

// Blocks held right after the first decode step of every sample, for a 1,024-token prompt
// (64 full blocks of 16): n = 1 holds 65, n = 4 holds the 64 shared ones plus one each.
int32_t BlocksHeldAfterFirstDecode(int32_t n) {
  auto engine = testing::PresetEngine("tiny");
  EXPECT_NE(engine, nullptr);
  if (engine == nullptr) return -1;
  std::vector<int32_t> prompt(1024);
  for (int32_t i = 0; i < 1024; ++i) prompt[i] = 3 + (i * 7919) % 500;
  std::atomic<int64_t> step_before{-1};
  std::vector<int> tokens(n, 0);
  auto sink = std::make_shared<engine::CollectingSink>([&](const engine::GenerationOutput& o) {
    tokens[o.index] += static_cast<int>(o.token_ids.size());
    if (o.index == n - 1 && tokens[o.index] == 2) {
      engine->Pause();  // this step finishes, its stats are published, then nothing runs
      step_before = engine->Stats().num_steps;
    }
  });
  GenerationRequest r = Sampled(prompt, 3, n, 8);
  auto submitted = engine->Submit(r, sink);
  EXPECT_TRUE(submitted.ok()) << submitted.status();
  while (step_before.load() < 0 || engine->Stats().num_steps <= step_before.load()) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  const engine::EngineStats s = engine->Stats();
  engine->Resume();
  sink->Wait();
  EXPECT_TRUE(testing::WaitForIdle(*engine));
  return s.num_blocks - s.num_free_blocks;
}

TEST(EngineParallelSamplingTest, FourSamplesOfA1024TokenPromptHoldUnder1Point3TimesTheBlocks) {
  const int32_t one = BlocksHeldAfterFirstDecode(1);
  const int32_t four = BlocksHeldAfterFirstDecode(4);
  EXPECT_EQ(one, 65);
  EXPECT_EQ(four, 68);
  EXPECT_LT(four, 1.3 * one);
}

}  // namespace
}  // namespace pagoda
