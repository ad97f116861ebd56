// Block pool, KV cache manager and scheduler with no model: exact block ids, budgets,
// chunked prefill, preemption and aborts, and no leaked block at the end of any scenario.
#include "engine/scheduler.h"

#include <memory>
#include <vector>

#include "engine/block_pool.h"
#include "engine/kv_cache_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/scheduler_sim.h"

namespace pagoda::engine {
namespace {

using ::testing::ElementsAre;

TEST(BlockPoolTest, FreshPoolHandsOutIdsInOrder) {
  BlockPool pool(4);
  std::vector<int32_t> ids;
  ASSERT_TRUE(pool.Allocate(3, &ids));
  EXPECT_THAT(ids, ElementsAre(0, 1, 2));
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_DOUBLE_EQ(pool.usage(), 0.75);
}

TEST(BlockPoolTest, NotEnoughBlocksTakesNothing) {
  BlockPool pool(2);
  std::vector<int32_t> ids;
  EXPECT_FALSE(pool.Allocate(3, &ids));
  EXPECT_TRUE(ids.empty());
  EXPECT_EQ(pool.num_free(), 2);
}

TEST(BlockPoolTest, LeastRecentlyFreedIsReusedFirst) {
  BlockPool pool(4);
  std::vector<int32_t> ids;
  ASSERT_TRUE(pool.Allocate(4, &ids));
  pool.Release(2);
  pool.Release(0);
  std::vector<int32_t> again;
  ASSERT_TRUE(pool.Allocate(2, &again));
  EXPECT_THAT(again, ElementsAre(2, 0));
}

TEST(BlockPoolTest, SharedBlockFreedAtLastReference) {
  BlockPool pool(1);
  std::vector<int32_t> ids;
  ASSERT_TRUE(pool.Allocate(1, &ids));
  pool.AddRef(0);
  EXPECT_EQ(pool.ref_count(0), 2);
  pool.Release(0);
  EXPECT_EQ(pool.num_free(), 0);
  pool.Release(0);
  EXPECT_EQ(pool.num_free(), 1);
}

TEST(KvCacheManagerTest, SequenceOfLengthLHoldsCeilLOverBlockSizeBlocks) {
  for (int32_t bs : {1, 4, 16}) {
    for (int32_t len : {1, 3, 4, 5, 15, 16, 17, 32, 33, 100}) {
      KvCacheManager kv(1000, bs);
      ASSERT_TRUE(kv.Reserve(7, len));
      EXPECT_EQ(static_cast<int32_t>(kv.BlockTable(7).size()), (len + bs - 1) / bs)
          << "block size " << bs << " length " << len;
      kv.Free(7);
      EXPECT_EQ(kv.num_free_blocks(), 1000);
    }
  }
}

TEST(KvCacheManagerTest, SlotsAtBlockBoundaries) {
  KvCacheManager kv(8, 4);
  ASSERT_TRUE(kv.Reserve(1, 2));  // blocks [0]
  ASSERT_TRUE(kv.Reserve(2, 5));  // blocks [1, 2]
  ASSERT_TRUE(kv.Reserve(1, 9));  // grows to [0, 3, 4]
  EXPECT_THAT(kv.BlockTable(1), ElementsAre(0, 3, 4));
  EXPECT_THAT(kv.BlockTable(2), ElementsAre(1, 2));
  EXPECT_EQ(kv.Slot(1, 0), 0);
  EXPECT_EQ(kv.Slot(1, 3), 3);
  EXPECT_EQ(kv.Slot(1, 4), 12);  // first token of block 3
  EXPECT_EQ(kv.Slot(1, 7), 15);
  EXPECT_EQ(kv.Slot(1, 8), 16);  // first token of block 4
  EXPECT_EQ(kv.Slot(2, 3), 7);
  EXPECT_EQ(kv.Slot(2, 4), 8);
  // Not enough room for 4 more blocks (3 free): nothing is taken.
  EXPECT_FALSE(kv.Reserve(2, 24));
  EXPECT_THAT(kv.BlockTable(2), ElementsAre(1, 2));
  EXPECT_EQ(kv.num_free_blocks(), 3);
  kv.Free(1);
  kv.Free(2);
  EXPECT_EQ(kv.num_free_blocks(), 8);
}

TEST(SchedulerTest, BudgetAndSequenceCapHoldEveryStep) {
  SchedulerSim sim(1000, 16, {.max_batched_tokens = 256, .max_seqs = 4});
  std::vector<Sequence*> seqs;
  for (int i = 0; i < 10; ++i) seqs.push_back(sim.Add(100, 20));
  const SchedulerOutput first = sim.Step();
  // 100 + 100 + 56 (a chunk of the third prompt) fill the budget exactly.
  ASSERT_EQ(first.chunks.size(), 3u);
  EXPECT_EQ(first.chunks[0].num_tokens, 100);
  EXPECT_EQ(first.chunks[1].num_tokens, 100);
  EXPECT_EQ(first.chunks[2].num_tokens, 56);
  EXPECT_EQ(first.num_tokens, 256);
  sim.RunToEnd();
  for (Sequence* s : seqs) EXPECT_EQ(s->num_tokens(), 120);
  EXPECT_EQ(sim.kv().num_free_blocks(), 1000);
}

TEST(SchedulerTest, LongPromptPrefillsInChunksWhileDecodesKeepRunning) {
  SchedulerSim sim(1000, 16, {.max_batched_tokens = 512, .max_seqs = 16});
  std::vector<Sequence*> decoders;
  for (int i = 0; i < 3; ++i) decoders.push_back(sim.Add(8, 100));
  sim.Step();  // prefills the three short prompts
  Sequence* long_seq = sim.Add(5000, 4);
  int prefill_steps = 0;
  while (long_seq->num_computed < 5000) {
    const SchedulerOutput out = sim.Step();
    ++prefill_steps;
    ASSERT_EQ(out.chunks.size(), 4u);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(out.chunks[i].seq, decoders[i]);
      EXPECT_EQ(out.chunks[i].num_tokens, 1);  // a decode token each, every step
    }
    EXPECT_EQ(out.chunks[3].seq, long_seq);
    EXPECT_EQ(out.chunks[3].num_tokens, std::min(509, 5000 - (prefill_steps - 1) * 509));
    EXPECT_EQ(out.num_tokens, 3 + out.chunks[3].num_tokens);
  }
  EXPECT_EQ(prefill_steps, 10);  // ceil(5000 / 509)
  EXPECT_EQ(long_seq->num_output(), 1);
  sim.RunToEnd();
  EXPECT_EQ(long_seq->num_tokens(), 5004);
  EXPECT_EQ(sim.kv().num_free_blocks(), 1000);
}

TEST(SchedulerTest, ARequestWaitsUntilItsTenantHasARunSlotForEverySample) {
  SchedulerSim sim(1000, 4, {.max_batched_tokens = 512, .max_seqs = 8});
  sim.scheduler().SetTenants({{.name = "", .max_running_requests = 2}});
  Sequence* first = sim.Add(4, 3);
  sim.Step();
  Sequence* forking = sim.Add(4, 3);
  forking->pending_forks = 1;  // n = 2: two run slots, and one is taken
  while (first->status != SeqStatus::kFinished) {
    sim.Step();
    if (first->status != SeqStatus::kFinished) {
      EXPECT_EQ(forking->status, SeqStatus::kWaiting);
    }
  }
  sim.Step();
  EXPECT_EQ(forking->status, SeqStatus::kRunning);
  sim.RunToEnd();
  EXPECT_EQ(sim.kv().num_free_blocks(), 1000);
}

TEST(SchedulerTest, ATenantHoldsASharedBlockOnceAndItsCapCountsDistinctBlocks) {
  SchedulerSim sim(1000, 4, {.max_batched_tokens = 512, .max_seqs = 8});
  sim.scheduler().SetTenants({{.name = "", .kv_cache_cap_blocks = 20}});
  Sequence* parent = sim.Add(64, 8);  // 16 full blocks
  sim.Step();
  Sequence child;
  child.id = 99;
  child.tokens = parent->tokens;  // the prompt and a first token of its own
  child.prompt_len = 64;
  child.max_total_tokens = 72;
  child.request.tenant = "";
  sim.scheduler().AddFork(parent, &child);
  const auto held = [&] { return sim.scheduler().blocks_held(0); };
  EXPECT_EQ(held(), 16);  // not 32: the child shares all of them
  // Each writes its next token into a block of its own: 18 distinct blocks, within the cap
  // of 20 (counting per holder would be 34 and preempt one of them).
  const SchedulerOutput out = sim.Step();
  EXPECT_EQ(out.chunks.size(), 2u);
  EXPECT_TRUE(out.preempted.empty());
  EXPECT_EQ(held(), 18);
  EXPECT_EQ(sim.kv().num_free_blocks(), 1000 - 18);
  // Reloading the table recounts the same way.
  sim.scheduler().SetTenants({{.name = "", .kv_cache_cap_blocks = 20}});
  EXPECT_EQ(held(), 18);
  sim.scheduler().Remove(&child);
  EXPECT_EQ(held(), 17);
  sim.RunToEnd();
  EXPECT_EQ(held(), 0);
  EXPECT_EQ(sim.kv().num_free_blocks(), 1000);
}

TEST(SchedulerTest, PreemptsNewestWhenBlocksRunOutAndEverySequenceFinishes) {
  // 6 blocks of 4 slots; each sequence grows to 12 tokens (3 blocks): 4 of them cannot
  // all fit, so the newest running ones are preempted and recomputed later.
  SchedulerSim sim(6, 4, {.max_batched_tokens = 64, .max_seqs = 8});
  std::vector<Sequence*> seqs;
  for (int i = 0; i < 4; ++i) seqs.push_back(sim.Add(4, 8));
  SchedulerOutput out = sim.Step();
  ASSERT_EQ(out.chunks.size(), 4u);  // 4 prompts of one block each fit
  Sequence* first_victim = nullptr;
  for (int step = 0; step < 200 && first_victim == nullptr; ++step) {
    out = sim.Step();
    if (!out.preempted.empty()) first_victim = out.preempted.front();
  }
  ASSERT_NE(first_victim, nullptr);
  EXPECT_EQ(first_victim, seqs[3]);                       // the newest running sequence goes first
  EXPECT_EQ(sim.scheduler().waiting().front(), seqs[3]);  // requeued at the front
  EXPECT_EQ(seqs[3]->num_computed, 0);
  sim.RunToEnd();
  EXPECT_GT(sim.scheduler().num_preemptions(), 0);
  for (Sequence* s : seqs) EXPECT_EQ(s->num_tokens(), 12);
  EXPECT_EQ(sim.kv().num_free_blocks(), 6);
}

TEST(SchedulerTest, LowerPriorityIsPreemptedFirst) {
  SchedulerSim sim(4, 4, {.max_batched_tokens = 64, .max_seqs = 8});
  Sequence* low = sim.Add(4, 8, /*priority=*/5);
  Sequence* high = sim.Add(4, 8, /*priority=*/0);
  std::vector<Sequence*> victims;
  for (int step = 0; step < 100 && sim.finished() < 2; ++step) {
    const SchedulerOutput out = sim.Step();
    victims.insert(victims.end(), out.preempted.begin(), out.preempted.end());
  }
  ASSERT_FALSE(victims.empty());
  EXPECT_EQ(victims.front(), low);
  EXPECT_EQ(high->num_preemptions, 0);
  sim.RunToEnd();
  EXPECT_EQ(sim.kv().num_free_blocks(), 4);
}

TEST(SchedulerTest, AbortWaitingAndRunning) {
  SchedulerSim sim(100, 16, {.max_batched_tokens = 64, .max_seqs = 1});
  Sequence* running = sim.Add(10, 50);
  Sequence* waiting = sim.Add(10, 50);
  sim.Step();
  ASSERT_EQ(sim.scheduler().running().size(), 1u);
  ASSERT_EQ(sim.scheduler().waiting().size(), 1u);
  EXPECT_EQ(sim.kv().num_free_blocks(), 99);
  sim.scheduler().Remove(waiting);
  EXPECT_TRUE(sim.scheduler().waiting().empty());
  EXPECT_EQ(waiting->status, SeqStatus::kFinished);
  sim.scheduler().Remove(running);
  EXPECT_TRUE(sim.scheduler().running().empty());
  EXPECT_EQ(sim.kv().num_free_blocks(), 100);
  EXPECT_TRUE(sim.scheduler().Schedule().empty());
}

TEST(SchedulerTest, RecomputeModeRunsWholeContextsEachStep) {
  SchedulerSim sim(100, 4, {.max_batched_tokens = 64, .max_seqs = 4, .kv_cache = false});
  Sequence* s = sim.Add(10, 3);
  EXPECT_EQ(sim.Step().chunks[0].num_tokens, 10);
  EXPECT_EQ(sim.Step().chunks[0].num_tokens, 11);  // recomputed from scratch
  EXPECT_EQ(sim.Step().chunks[0].num_tokens, 12);
  EXPECT_EQ(s->num_tokens(), 13);
  EXPECT_EQ(sim.kv().num_free_blocks(), 100);
}

}  // namespace
}  // namespace pagoda::engine
