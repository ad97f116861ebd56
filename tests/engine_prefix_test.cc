// Automatic prefix caching through the engine with stories260K: lossless (greedy outputs
// identical with the cache on and off, for the golden prompts sent twice and under
// preemption), exact cached_tokens, tenants never sharing, stats, and the pool full again.
#include <string>
#include <vector>

#include "common/mutex.h"
#include "gtest/gtest.h"
#include "model/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tests/engine_test_util.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using engine::CollectedOutput;
using engine::GenerationRequest;
using testing::GreedyRequest;

struct Golden {
  std::vector<int32_t> prompt;
  std::vector<int32_t> output;
};

std::vector<Golden> LoadGolden() {
  const auto j =
      nlohmann::json::parse(testing::ReadFileOrDie(testing::ModelPath("stories260K.golden.json")));
  std::vector<Golden> cases;
  for (const auto& c : j.at("cases")) {
    // Where llama.cpp's flash attention changed a near tie, the plain-attention ids are
    // the reference (as in model_golden_test.cc).
    const char* key = c.contains("output_token_ids_flash_attn_off")
                          ? "output_token_ids_flash_attn_off"
                          : "output_token_ids";
    cases.push_back({c.at("prompt_token_ids").get<std::vector<int32_t>>(),
                     c.at("output_token_ids").get<std::vector<int32_t>>()});
    cases.back().output = c.at(key).get<std::vector<int32_t>>();
  }
  return cases;
}

GenerationRequest Greedy(const std::vector<int32_t>& prompt, size_t n,
                         const std::string& tenant = "") {
  GenerationRequest r = GreedyRequest(prompt, static_cast<int32_t>(n), false);
  r.tenant = tenant;
  return r;
}

TEST(EnginePrefixTest, GoldenPromptsSentTwiceAreLosslessWithExactCachedTokens) {
  const std::vector<Golden> cases = LoadGolden();
  ASSERT_EQ(cases.size(), 2u);
  auto on = testing::StoriesEngine({.block_size = 4});
  auto off = testing::StoriesEngine({.block_size = 4, .enable_prefix_caching = false});
  ASSERT_NE(on, nullptr);
  ASSERT_NE(off, nullptr);
  EXPECT_TRUE(on->model_info().prefix_caching);
  EXPECT_FALSE(off->model_info().prefix_caching);
  // Golden prompt (5 tokens, then 1): the second send reuses floor(4 / 4) blocks.
  const std::vector<std::vector<int32_t>> expected_cached = {{0, 4}, {0, 0}};
  for (size_t i = 0; i < cases.size(); ++i) {
    const Golden& g = cases[i];
    SCOPED_TRACE(::testing::Message() << "case " << i);
    for (int send = 0; send < 2; ++send) {
      const CollectedOutput a = testing::RunOne(*on, Greedy(g.prompt, g.output.size()));
      const CollectedOutput b = testing::RunOne(*off, Greedy(g.prompt, g.output.size()));
      EXPECT_EQ(a.token_ids, g.output) << "send " << send;
      EXPECT_EQ(b.token_ids, g.output) << "send " << send;
      EXPECT_EQ(a.text, b.text);
      EXPECT_EQ(a.usage.cached_tokens, expected_cached[i][send]) << "send " << send;
      EXPECT_EQ(b.usage.cached_tokens, 0);
    }
  }
  // The golden prompt plus half its continuation: the first request computed its prompt
  // and 63 outputs (17 full blocks), so 36 of these 37 tokens are cached; twice.
  const Golden& g = cases[0];
  std::vector<int32_t> longer = g.prompt;
  longer.insert(longer.end(), g.output.begin(), g.output.begin() + 32);
  for (int send = 0; send < 2; ++send) {
    const CollectedOutput a = testing::RunOne(*on, Greedy(longer, 32));
    const CollectedOutput b = testing::RunOne(*off, Greedy(longer, 32));
    EXPECT_EQ(a.token_ids, b.token_ids);
    EXPECT_EQ(a.usage.cached_tokens, 36);
    EXPECT_EQ(a.usage.prompt_tokens, 37);
  }
  EXPECT_TRUE(testing::WaitForIdle(*on));
  EXPECT_TRUE(testing::WaitForIdle(*off));
  const engine::EngineStats s = on->Stats();
  EXPECT_EQ(s.prefix_cache_hits, 4 + 36 + 36);
  EXPECT_EQ(s.prefix_cache_queries, 2 * 5 + 2 * 1 + 2 * 37);
  EXPECT_EQ(off->Stats().prefix_cache_queries, 0);
}

std::vector<std::vector<int32_t>> StoryPrompts(const engine::Engine& engine) {
  const std::vector<std::string> texts = {
      "Once upon a time, there was a little girl named Lily. She loved to play",
      "Once upon a time, there was a little boy named Tom. He had a big red",
      "Once upon a time, there was a little dog",
      "One day, Lily went to the park with her mom. She saw a big tree and",
      "One day, Lily went to the park",
      "The sun was shining and the birds were singing. Tom and Sue went",
      "Once upon a time, there was a little girl named Lily. She loved to play",
      "The little dog was happy"};
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& t : texts) prompts.push_back(engine.tokenizer().Encode(t, true));
  return prompts;
}

TEST(EnginePrefixTest, UnderPreemptionOutputsEqualTheCacheOffOnes) {
  // 40 blocks of 4 tokens cannot hold 16 sequences of ~15-token prompts + 40 outputs.
  auto on = testing::StoriesEngine({.block_size = 4, .num_blocks = 40});
  auto off = testing::StoriesEngine({.enable_prefix_caching = false});
  ASSERT_NE(on, nullptr);
  ASSERT_NE(off, nullptr);
  std::vector<GenerationRequest> requests;
  for (int round = 0; round < 2; ++round) {
    for (const auto& p : StoryPrompts(*on)) requests.push_back(Greedy(p, 40));
  }
  std::vector<CollectedOutput> alone;
  for (const GenerationRequest& r : requests) alone.push_back(testing::RunOne(*off, r));
  const std::vector<CollectedOutput> together = testing::RunAll(*on, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(together[i].token_ids, alone[i].token_ids) << "request " << i;
    EXPECT_EQ(together[i].text, alone[i].text) << "request " << i;
  }
  EXPECT_TRUE(testing::WaitForIdle(*on));
  const engine::EngineStats s = on->Stats();
  EXPECT_GT(s.num_preemptions, 0);
  EXPECT_GT(s.prefix_cache_hits, 0);
  EXPECT_GT(s.prefix_cache_evictions, 0);
  EXPECT_EQ(s.num_free_blocks, s.num_blocks);
  // Sent again one by one after all that: still lossless, now mostly cached.
  for (size_t i = 0; i < 8; ++i) {
    const CollectedOutput again = testing::RunOne(*on, requests[i]);
    EXPECT_EQ(again.token_ids, alone[i].token_ids) << "request " << i;
  }
  EXPECT_TRUE(testing::WaitForIdle(*on));
}

TEST(EnginePrefixTest, AnotherTenantsExactPromptGetsNoCachedTokens) {
  auto engine = testing::StoriesEngine({.block_size = 4});
  ASSERT_NE(engine, nullptr);
  const std::vector<int32_t> prompt = StoryPrompts(*engine)[0];
  const auto n = static_cast<int32_t>(prompt.size());
  const CollectedOutput a1 = testing::RunOne(*engine, Greedy(prompt, 8, "a"));
  const CollectedOutput b1 = testing::RunOne(*engine, Greedy(prompt, 8, "b"));
  const CollectedOutput a2 = testing::RunOne(*engine, Greedy(prompt, 8, "a"));
  EXPECT_EQ(a1.usage.cached_tokens, 0);
  EXPECT_EQ(b1.usage.cached_tokens, 0);
  EXPECT_EQ(a2.usage.cached_tokens, (n - 1) / 4 * 4);
  EXPECT_EQ(a1.token_ids, b1.token_ids);
  EXPECT_EQ(a1.token_ids, a2.token_ids);
  EXPECT_TRUE(testing::WaitForIdle(*engine));
}

// Issue 50: cache_prompt false neither reuses cached blocks nor leaves any; cache_salt
// splits one tenant's cache (a salt finds only its own blocks, and the unsalted cache is
// another). The outputs stay the same whatever the cache does.
TEST(EnginePrefixTest, CachePromptOffAndCacheSaltsKeepBlocksApart) {
  auto engine = testing::StoriesEngine({.block_size = 4});
  ASSERT_NE(engine, nullptr);
  const std::vector<int32_t> prompt = StoryPrompts(*engine)[0];
  const auto n = static_cast<int32_t>(prompt.size());
  const int32_t full = (n - 1) / 4 * 4;
  auto with = [&](bool cache_prompt, const std::string& salt) {
    GenerationRequest r = Greedy(prompt, 8, "a");
    r.cache_prompt = cache_prompt;
    r.cache_salt = salt;
    return testing::RunOne(*engine, std::move(r));
  };
  const CollectedOutput uncached = with(false, "");
  EXPECT_EQ(uncached.usage.cached_tokens, 0);
  const CollectedOutput first = with(true, "");  // nothing was left by the uncached one
  EXPECT_EQ(first.usage.cached_tokens, 0);
  EXPECT_EQ(with(false, "").usage.cached_tokens, 0);  // the cache holds it, unused
  EXPECT_EQ(with(true, "").usage.cached_tokens, full);
  EXPECT_EQ(with(true, "alice").usage.cached_tokens, 0);
  EXPECT_EQ(with(true, "bob").usage.cached_tokens, 0);
  const CollectedOutput again = with(true, "alice");
  EXPECT_EQ(again.usage.cached_tokens, full);
  EXPECT_EQ(uncached.token_ids, first.token_ids);
  EXPECT_EQ(again.token_ids, first.token_ids);
  // A salt over the limit is refused at Submit, naming the field.
  GenerationRequest long_salt = Greedy(prompt, 8, "a");
  long_salt.cache_salt = std::string(engine::kMaxCacheSaltBytes + 1, 's');
  auto refused = engine->Submit(std::move(long_salt), std::make_shared<engine::CollectingSink>());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "cache_salt: has 257 bytes; at most 256");
  EXPECT_TRUE(testing::WaitForIdle(*engine));
}

TEST(EnginePrefixTest, AbortedSequenceLeavesItsFullBlocksCached) {
  auto engine = testing::StoriesEngine({.block_size = 4, .max_seqs = 1});
  ASSERT_NE(engine, nullptr);
  const std::vector<int32_t> prompt = StoryPrompts(*engine)[3];
  Notification some_tokens;
  int delivered = 0;
  // Paused from the engine thread: the abort lands before the next step, however late.
  auto sink = std::make_shared<engine::CollectingSink>([&](const engine::GenerationOutput& o) {
    delivered += static_cast<int>(o.token_ids.size());
    if (delivered >= 20 && !some_tokens.HasBeenNotified()) {
      engine->Pause();
      some_tokens.Notify();
    }
  });
  auto submitted = engine->Submit(GreedyRequest(prompt, 400), sink);
  ASSERT_TRUE(submitted.ok());
  some_tokens.WaitForNotification();
  engine->Abort(submitted->handle);
  engine->Resume();
  const CollectedOutput aborted = sink->Wait();
  ASSERT_EQ(aborted.finish_reason, engine::FinishReason::kAbort);
  EXPECT_TRUE(testing::WaitForIdle(*engine));
  // Its prompt and the outputs it computed: all full blocks are found again.
  std::vector<int32_t> resent = prompt;
  resent.insert(resent.end(), aborted.token_ids.begin(), aborted.token_ids.end() - 1);
  const CollectedOutput again = testing::RunOne(*engine, GreedyRequest(resent, 4));
  EXPECT_EQ(again.usage.cached_tokens, (static_cast<int32_t>(resent.size()) - 1) / 4 * 4);
  EXPECT_TRUE(testing::WaitForIdle(*engine));
}

}  // namespace
}  // namespace pagoda
