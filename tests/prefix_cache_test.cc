// The prefix cache without a model: the hash chain, cached free blocks in the pool (LRU,
// deepest block of a chain first), hit lengths in the KV cache manager, copy on write, and
// the scheduler taking cached blocks, with exact block ids and the pool full again after
// every scenario.
#include <memory>
#include <vector>

#include "engine/block_pool.h"
#include "engine/kv_cache_manager.h"
#include "engine/prefix_hash.h"
#include "engine/scheduler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const PrefixHasher kHasher(0x0123456789abcdefull, 0xfedcba9876543210ull);

TEST(PrefixHashTest, SameTokensAndSaltGiveTheSameHashOtherwiseNot) {
  const BlockHash a = kHasher.Root("model/tenant-a");
  const BlockHash b = kHasher.Root("model/tenant-b");
  EXPECT_EQ(a, kHasher.Root("model/tenant-a"));
  EXPECT_NE(a, b);
  const std::vector<int32_t> t = {1, 403, 407, 261};
  EXPECT_EQ(kHasher.Next(a, t), kHasher.Next(a, t));
  EXPECT_NE(kHasher.Next(a, t), kHasher.Next(b, t));  // other tenant: other chain
  EXPECT_NE(kHasher.Next(a, t), kHasher.Next(a, std::vector<int32_t>{1, 403, 407, 262}));
  // Chained: the same block after different parents differs.
  const BlockHash p1 = kHasher.Next(a, t);
  const BlockHash p2 = kHasher.Next(a, std::vector<int32_t>{9, 9, 9, 9});
  EXPECT_NE(kHasher.Next(p1, t), kHasher.Next(p2, t));
  // Another key hashes differently (the key is secret per process).
  EXPECT_NE(PrefixHasher(1, 2).Next(a, t), kHasher.Next(a, t));
  // Salt bytes all count, including ones past a multiple of 8.
  EXPECT_NE(kHasher.Root("12345678a"), kHasher.Root("12345678b"));
  EXPECT_NE(kHasher.Root(""), kHasher.Root(std::string(1, '\0')));
}

TEST(BlockPoolCacheTest, CachedFreeBlocksCountAsFreeAndAreEvictedLast) {
  BlockPool pool(4);
  std::vector<int32_t> ids;
  ASSERT_TRUE(pool.Allocate(4, &ids));
  const BlockHash h0 = kHasher.Next(kHasher.Root(""), std::vector<int32_t>{1});
  const BlockHash h1 = kHasher.Next(h0, std::vector<int32_t>{2});
  EXPECT_TRUE(pool.Register(0, h0));
  EXPECT_TRUE(pool.Register(1, h1));
  EXPECT_FALSE(pool.Register(2, h1));  // the hash names block 1 already
  EXPECT_FALSE(pool.Register(1, h0));  // block 1 has a hash already
  // Freed deepest first, as KvCacheManager::Free does.
  for (int32_t id : {3, 2, 1, 0}) pool.Release(id);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.num_cached_free(), 2);
  EXPECT_DOUBLE_EQ(pool.usage(), 0);
  EXPECT_THAT(pool.CachedFreeInEvictionOrder(), ElementsAre(1, 0));
  EXPECT_EQ(pool.Lookup(h0), 0);
  EXPECT_EQ(pool.Lookup(h1), 1);
  // Plain blocks go first: nothing is evicted.
  std::vector<int32_t> got;
  ASSERT_TRUE(pool.Allocate(2, &got));
  EXPECT_THAT(got, ElementsAre(3, 2));
  EXPECT_EQ(pool.num_evictions(), 0);
  // Then the least recently freed cached block: the chain's deepest.
  ASSERT_TRUE(pool.Allocate(1, &got));
  EXPECT_THAT(got, ElementsAre(3, 2, 1));
  EXPECT_EQ(pool.num_evictions(), 1);
  EXPECT_EQ(pool.Lookup(h1), -1);
  EXPECT_FALSE(pool.is_cached(1));
  // A cached free block is taken back by reference, no copy.
  pool.AddRef(0);
  EXPECT_EQ(pool.ref_count(0), 1);
  EXPECT_EQ(pool.num_free(), 0);
  EXPECT_THAT(pool.CachedFreeInEvictionOrder(), IsEmpty());
  for (int32_t id : {3, 2, 1, 0}) pool.Release(id);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_THAT(pool.CachedFreeInEvictionOrder(), ElementsAre(0));
}

TEST(BlockPoolCacheTest, TakingABlockBackMovesItToTheEndOfTheLru) {
  BlockPool pool(3);
  std::vector<int32_t> ids;
  ASSERT_TRUE(pool.Allocate(3, &ids));
  const BlockHash root = kHasher.Root("");
  for (int32_t id : ids) ASSERT_TRUE(pool.Register(id, kHasher.Next(root, std::vector{id})));
  for (int32_t id : {0, 1, 2}) pool.Release(id);
  EXPECT_THAT(pool.CachedFreeInEvictionOrder(), ElementsAre(0, 1, 2));
  pool.AddRef(0);  // used again: most recently freed once released
  pool.Release(0);
  EXPECT_THAT(pool.CachedFreeInEvictionOrder(), ElementsAre(1, 2, 0));
  std::vector<int32_t> got;
  ASSERT_TRUE(pool.Allocate(2, &got));
  EXPECT_THAT(got, ElementsAre(1, 2));
  EXPECT_EQ(pool.num_evictions(), 2);
  pool.Release(1);
  pool.Release(2);
  EXPECT_EQ(pool.num_free(), 3);
}

std::vector<int32_t> Iota(int32_t n, int32_t from = 100) {
  std::vector<int32_t> v(n);
  for (int32_t i = 0; i < n; ++i) v[i] = from + i;
  return v;
}

// Computes `tokens` for `seq` as the scheduler would: reserve, then cache the full blocks.
void Compute(KvCacheManager& kv, SeqId seq, const BlockHash& root,
             const std::vector<int32_t>& tokens, std::vector<BlockHash>* hashes) {
  const auto n = static_cast<int32_t>(tokens.size());
  ASSERT_TRUE(kv.Reserve(seq, n));
  kv.HashBlocks(root, tokens, n / kv.block_size(), hashes);
  kv.CacheFullBlocks(seq, *hashes, n);
}

// Each group's count is its distinct blocks in use, at every kind of operation: growth,
// a cached prefix taken back (free or shared), a fork and its copy on write, swap out and
// in, free, and a renumbering of the groups.
TEST(KvCacheManagerGroupTest, EachGroupHoldsItsDistinctBlocks) {
  KvCacheManager kv(12, 4, /*prefix_caching=*/true, kHasher, /*num_host_blocks=*/4);
  const BlockHash a = kHasher.Root("m/a");
  kv.SetGroup(1, 1);
  kv.SetGroup(2, 1);
  kv.SetGroup(3, 2);
  std::vector<BlockHash> h1;
  Compute(kv, 1, a, Iota(10), &h1);  // 3 blocks, 2 of them cached
  EXPECT_EQ(kv.BlocksHeld(1), 3);
  ASSERT_TRUE(kv.Reserve(3, 5));
  EXPECT_EQ(kv.BlocksHeld(2), 2);
  EXPECT_EQ(kv.BlocksHeld(0), 0);
  // Seq 2 (same group) takes seq 1's cached blocks while they are held: no more blocks.
  std::vector<BlockHash> h2;
  ASSERT_EQ(kv.MatchPrefix(a, Iota(10), 9, &h2), 2);
  kv.TakeCached(2, h2);
  EXPECT_EQ(kv.BlocksHeld(1), 3);
  // A fork shares everything; its write into the shared partial block copies it (+1).
  kv.Fork(1, 4);
  EXPECT_EQ(kv.BlocksHeld(1), 3);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.Reserve(4, 11, /*first_write=*/10, &copies));
  EXPECT_EQ(copies.size(), 1u);
  EXPECT_EQ(kv.BlocksHeld(1), 4);
  // Seq 1 goes: its partial block and the shared ones stay held by 2 and 4.
  kv.Forget(1);
  EXPECT_EQ(kv.BlocksHeld(1), 3);
  // Seq 3 swaps out (device blocks leave its group) and back in.
  copies.clear();
  ASSERT_TRUE(kv.CanSwapOut(3, 5));
  kv.SwapOut(3, 5, &copies);
  EXPECT_EQ(kv.BlocksHeld(2), 0);
  ASSERT_TRUE(kv.SwapIn(3, &copies));
  EXPECT_EQ(kv.BlocksHeld(2), 2);
  // A new table: group 2 becomes 0 and group 1 becomes 2; the counts follow.
  kv.Regroup({{2, 2}, {4, 2}, {3, 0}});
  EXPECT_EQ(kv.BlocksHeld(0), 2);
  EXPECT_EQ(kv.BlocksHeld(1), 0);
  EXPECT_EQ(kv.BlocksHeld(2), 3);
  // Freed, the cached blocks drop out of every count (they are free, not held).
  kv.Forget(2);
  kv.Forget(4);
  kv.Forget(3);
  for (int32_t g : {0, 1, 2}) EXPECT_EQ(kv.BlocksHeld(g), 0) << g;
  EXPECT_EQ(kv.num_free_blocks(), 12);
  // A cached free block taken back is charged again.
  kv.SetGroup(5, 1);
  std::vector<BlockHash> h5;
  ASSERT_EQ(kv.MatchPrefix(a, Iota(10), 9, &h5), 2);
  kv.TakeCached(5, h5);
  EXPECT_EQ(kv.BlocksHeld(1), 2);
  kv.Forget(5);
  EXPECT_EQ(kv.BlocksHeld(1), 0);
}

TEST(KvCacheManagerPrefixTest, HitLengthEvictionOrderAndRefCounts) {
  KvCacheManager kv(6, 4, /*prefix_caching=*/true, kHasher);
  const BlockHash a = kHasher.Root("m/a"), b = kHasher.Root("m/b");
  const std::vector<int32_t> prompt = Iota(10);  // blocks [100..103] [104..107] [108 109]
  std::vector<BlockHash> h1;
  Compute(kv, 1, a, prompt, &h1);
  EXPECT_THAT(kv.BlockTable(1), ElementsAre(0, 1, 2));
  ASSERT_EQ(h1.size(), 2u);

  // Same tokens, same tenant: the two full blocks, shared while seq 1 runs.
  std::vector<BlockHash> h2;
  EXPECT_EQ(kv.MatchPrefix(a, prompt, 9, &h2), 2);
  EXPECT_EQ(h2, h1);
  EXPECT_EQ(kv.NumFreeAmong(h2), 0);
  kv.TakeCached(2, h2);
  EXPECT_THAT(kv.BlockTable(2), ElementsAre(0, 1));
  EXPECT_EQ(kv.pool().ref_count(0), 2);
  EXPECT_EQ(kv.pool().ref_count(1), 2);
  EXPECT_EQ(kv.pool().ref_count(2), 1);
  // The last token is never a hit: 8 tokens may reuse one block only.
  std::vector<BlockHash> h3;
  EXPECT_EQ(kv.MatchPrefix(a, std::vector<int32_t>(prompt.begin(), prompt.begin() + 8), 7, &h3), 1);
  // Another tenant: nothing.
  std::vector<BlockHash> hb;
  EXPECT_EQ(kv.MatchPrefix(b, prompt, 9, &hb), 0);
  // A different second block: the first only.
  std::vector<int32_t> other = prompt;
  other[5] = 7;
  std::vector<BlockHash> ho;
  EXPECT_EQ(kv.MatchPrefix(a, other, 9, &ho), 1);

  kv.Free(2);
  EXPECT_EQ(kv.pool().ref_count(0), 1);
  kv.Free(1);  // blocks stay cached: deepest first in eviction order, the partial one plain
  EXPECT_EQ(kv.num_free_blocks(), 6);
  EXPECT_THAT(kv.pool().CachedFreeInEvictionOrder(), ElementsAre(1, 0));

  // A cached free block taken back counts against the free blocks.
  std::vector<BlockHash> h4;
  ASSERT_EQ(kv.MatchPrefix(a, prompt, 9, &h4), 2);
  EXPECT_EQ(kv.NumFreeAmong(h4), 2);
  // Filling the pool evicts the deepest cached block first.
  ASSERT_TRUE(kv.Reserve(3, 4 * 5));  // 5 blocks: the 4 plain ones (LRU), then block 1
  EXPECT_THAT(kv.BlockTable(3), ElementsAre(3, 4, 5, 2, 1));
  EXPECT_EQ(kv.pool().num_evictions(), 1);
  std::vector<BlockHash> h5;
  EXPECT_EQ(kv.MatchPrefix(a, prompt, 9, &h5), 1);  // the parent survived its child
  kv.Free(3);
  EXPECT_EQ(kv.num_free_blocks(), 6);
}

TEST(KvCacheManagerPrefixTest, ForkSharesBlocksAndAWriteCopiesTheSharedPartialBlock) {
  KvCacheManager kv(8, 4, true, kHasher);
  ASSERT_TRUE(kv.Reserve(1, 6));  // prompt of 6: [0 full, 1 partial]
  kv.Fork(1, 2);
  kv.Fork(1, 3);
  EXPECT_THAT(kv.BlockTable(3), ElementsAre(0, 1));
  EXPECT_EQ(kv.pool().ref_count(0), 3);
  EXPECT_EQ(kv.pool().ref_count(1), 3);
  EXPECT_EQ(kv.num_free_blocks(), 6);
  // Sample 2 writes token 6 into shared block 1: one new block, a copy, no growth.
  EXPECT_EQ(kv.BlocksNeeded(2, 7, 6), 1);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.Reserve(2, 7, 6, &copies));
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, 1);
  EXPECT_EQ(copies[0].dst, 2);
  EXPECT_THAT(kv.BlockTable(2), ElementsAre(0, 2));
  EXPECT_EQ(kv.pool().ref_count(1), 2);
  EXPECT_EQ(kv.pool().ref_count(2), 1);
  ASSERT_TRUE(kv.Reserve(3, 7, 6, &copies));
  EXPECT_THAT(kv.BlockTable(3), ElementsAre(0, 3));
  // The last holder writes in place.
  EXPECT_EQ(kv.BlocksNeeded(1, 7, 6), 0);
  ASSERT_TRUE(kv.Reserve(1, 7, 6, &copies));
  EXPECT_EQ(copies.size(), 2u);
  EXPECT_THAT(kv.BlockTable(1), ElementsAre(0, 1));
  EXPECT_EQ(kv.pool().ref_count(0), 3);
  EXPECT_EQ(kv.pool().ref_count(1), 1);
  for (SeqId s : {1, 2, 3}) kv.Free(s);
  EXPECT_EQ(kv.num_free_blocks(), 8);
}

// Drives the scheduler the engine's way with a fake model that "samples" token 7.
struct Sim {
  Sim(int32_t num_blocks, int32_t block_size, SchedulerConfig config = {})
      : kv(num_blocks, block_size, true, kHasher),
        scheduler(config, &kv, std::make_unique<FcfsPolicy>()) {}

  Sequence* Add(std::vector<int32_t> prompt, int32_t output_len, const std::string& tenant = "") {
    auto seq = std::make_unique<Sequence>();
    seq->id = next_id++;
    seq->request.tenant = tenant;
    seq->cache_root = kHasher.Root("m/" + tenant);
    seq->prompt_len = static_cast<int32_t>(prompt.size());
    seq->tokens = std::move(prompt);
    seq->max_total_tokens = seq->prompt_len + output_len;
    scheduler.Add(seq.get());
    seqs.push_back(std::move(seq));
    return seqs.back().get();
  }

  SchedulerOutput Step() {
    SchedulerOutput out = scheduler.Schedule();
    std::vector<Sequence*> sampling;
    for (const ScheduledChunk& c : out.chunks) {
      if (c.seq->num_computed + c.num_tokens == c.seq->num_tokens()) sampling.push_back(c.seq);
    }
    scheduler.OnStepDone(out);
    for (Sequence* s : sampling) {
      s->tokens.push_back(7);
      if (s->num_tokens() >= s->max_total_tokens) scheduler.Remove(s);
    }
    return out;
  }

  void RunToEnd() {
    for (int i = 0; i < 1000 && (!scheduler.running().empty() || !scheduler.waiting().empty());
         ++i) {
      Step();
    }
    ASSERT_TRUE(scheduler.running().empty() && scheduler.waiting().empty());
  }

  KvCacheManager kv;
  Scheduler scheduler;
  std::vector<std::unique_ptr<Sequence>> seqs;
  SeqId next_id = 1;
};

TEST(SchedulerPrefixTest, ASecondRequestComputesOnlyWhatIsNotCached) {
  Sim sim(16, 4);
  Sequence* first = sim.Add(Iota(10), 3);
  SchedulerOutput out = sim.Step();
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].num_tokens, 10);
  EXPECT_EQ(first->cached_tokens, 0);
  sim.RunToEnd();
  EXPECT_EQ(sim.kv.num_free_blocks(), 16);
  // Prompt and the two computed outputs filled three blocks: 12 tokens are cached.
  EXPECT_EQ(sim.kv.pool().num_cached_free(), 3);

  std::vector<int32_t> longer = Iota(10);
  for (int32_t t : {7, 7, 7, 8}) longer.push_back(t);  // 14 tokens, 3 full blocks cached
  Sequence* second = sim.Add(longer, 2);
  out = sim.Step();
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(second->cached_tokens, 12);
  EXPECT_EQ(out.chunks[0].num_tokens, 2);
  EXPECT_THAT(sim.kv.BlockTable(second->id), ElementsAre(0, 1, 2, 3));
  // The same tokens from another tenant: nothing cached.
  Sequence* other = sim.Add(longer, 2, "b");
  out = sim.Step();
  EXPECT_EQ(other->cached_tokens, 0);
  sim.RunToEnd();
  EXPECT_EQ(sim.scheduler.prefix_cache_queries(), 10 + 14 + 14);
  EXPECT_EQ(sim.scheduler.prefix_cache_hits(), 12);
  EXPECT_EQ(sim.kv.num_free_blocks(), 16);
}

TEST(SchedulerPrefixTest, PreemptedSequenceLeavesItsBlocksCachedAndReusesThem) {
  // 6 blocks of 4: two sequences of 12-token prompts growing to 20 cannot both fit.
  Sim sim(6, 4);
  Sequence* a = sim.Add(Iota(12, 100), 8);
  Sequence* b = sim.Add(Iota(12, 200), 8);
  for (int i = 0; i < 200 && sim.scheduler.num_preemptions() == 0; ++i) sim.Step();
  ASSERT_GT(sim.scheduler.num_preemptions(), 0);
  sim.RunToEnd();
  EXPECT_EQ(a->num_output(), 8);
  EXPECT_EQ(b->num_output(), 8);
  // The preempted one found its own full blocks again when readmitted.
  EXPECT_GT(sim.scheduler.prefix_cache_hits(), 0);
  EXPECT_EQ(sim.kv.num_free_blocks(), 6);
}

TEST(SchedulerForkTest, SamplesShareThePromptAndCopyTheSharedPartialBlockOnWrite) {
  Sim sim(16, 4);
  Sequence* parent = sim.Add(Iota(6), 4);  // blocks 0 (full) and 1 (2 of 4 tokens)
  SchedulerOutput out = sim.Step();        // prefill; "samples" its first token
  ASSERT_EQ(parent->num_computed, 6);
  std::vector<std::unique_ptr<Sequence>> children;
  for (int i = 1; i <= 3; ++i) {
    auto child = std::make_unique<Sequence>();
    child->id = 100 + i;
    child->tokens = Iota(6);
    child->tokens.push_back(7 + i);
    child->prompt_len = 6;
    child->max_total_tokens = 10;
    child->cache_root = parent->cache_root;
    sim.scheduler.AddFork(parent, child.get());
    children.push_back(std::move(child));
  }
  EXPECT_EQ(sim.scheduler.running().size(), 4u);
  EXPECT_EQ(sim.kv.pool().ref_count(0), 4);
  EXPECT_EQ(sim.kv.pool().ref_count(1), 4);
  EXPECT_EQ(sim.kv.num_free_blocks(), 14);
  EXPECT_EQ(sim.scheduler.blocks_held(0), 2);  // a shared block counts once
  // Each writes token 6 into block 1: the first three get copies, the last writes in place.
  out = sim.scheduler.Schedule();
  ASSERT_EQ(out.chunks.size(), 4u);
  ASSERT_EQ(out.copies.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out.copies[i].src, 1);
    EXPECT_EQ(out.copies[i].dst, static_cast<int32_t>(2 + i));
  }
  EXPECT_THAT(sim.kv.BlockTable(parent->id), ElementsAre(0, 2));
  EXPECT_THAT(sim.kv.BlockTable(101), ElementsAre(0, 3));
  EXPECT_THAT(sim.kv.BlockTable(102), ElementsAre(0, 4));
  EXPECT_THAT(sim.kv.BlockTable(103), ElementsAre(0, 1));
  EXPECT_EQ(sim.kv.pool().ref_count(0), 4);
  for (int32_t b : {1, 2, 3, 4}) EXPECT_EQ(sim.kv.pool().ref_count(b), 1);
  EXPECT_EQ(sim.scheduler.blocks_held(0), 5);  // blocks 0-4
  sim.scheduler.OnStepDone(out);
  for (auto& c : children) sim.scheduler.Remove(c.get());  // cancelled: all of them go
  sim.scheduler.Remove(parent);
  EXPECT_EQ(sim.kv.num_free_blocks(), 16);
  EXPECT_EQ(sim.scheduler.blocks_held(0), 0);
}

}  // namespace
}  // namespace pagoda::engine
