// Swap preemption without a model: the KV cache manager's swap space (exact block ids of
// every copy), the scheduler swapping a victim out and back in with its computed tokens kept
// (or recomputing when the swap space is short), a random workload over a fake KV memory
// (every computed token found in place at every step, through swaps, forks, prefix hits and
// aborts), and CopyKvBlocks moving real bytes between the cache and host memory on the CPU
// backend, int8 parameters included. Every scenario ends with the pool and the swap space
// full again.
#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/fair_share_policy.h"
#include "engine/kv_block_copy.h"
#include "engine/kv_cache_manager.h"
#include "engine/scheduler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "tests/scheduler_sim.h"

namespace pagoda::engine {
namespace {

using ::testing::ElementsAre;

BlockCopy Out(int32_t src, int32_t dst) { return {src, dst, CopyKind::kToHost}; }
BlockCopy In(int32_t src, int32_t dst) { return {src, dst, CopyKind::kFromHost}; }

TEST(KvCacheManagerSwapTest, SwapOutAndBackInWithExactIds) {
  KvCacheManager kv(8, 4, false, PrefixHasher(), 4);
  ASSERT_TRUE(kv.Reserve(1, 12));  // blocks 0, 1, 2
  ASSERT_TRUE(kv.Reserve(2, 4));   // block 3
  // 9 tokens computed (the 12 reserved include this step's): 3 blocks go out.
  ASSERT_TRUE(kv.CanSwapOut(1, 9));
  std::vector<BlockCopy> copies;
  kv.SwapOut(1, 9, &copies);
  EXPECT_THAT(copies, ElementsAre(Out(0, 0), Out(1, 1), Out(2, 2)));
  EXPECT_TRUE(kv.BlockTable(1).empty());
  EXPECT_EQ(kv.NumSwapped(1), 3);
  EXPECT_EQ(kv.num_free_blocks(), 7);
  EXPECT_EQ(kv.num_free_host_blocks(), 1);
  // Only the computed tokens' blocks go out: 5 tokens of 8 reserved take 2 blocks, and
  // the swap space has 1.
  ASSERT_TRUE(kv.Reserve(2, 8));
  EXPECT_FALSE(kv.CanSwapOut(2, 5));
  EXPECT_TRUE(kv.CanSwapOut(2, 4));
  // Back in: fresh blocks, least recently freed first (4..7 were never used, then 2, 1, 0).
  ASSERT_TRUE(kv.Reserve(3, 12));  // takes 5, 6, 7
  EXPECT_THAT(kv.BlockTable(3), ElementsAre(5, 6, 7));
  copies.clear();
  ASSERT_TRUE(kv.SwapIn(1, &copies));
  EXPECT_THAT(copies, ElementsAre(In(0, 2), In(1, 1), In(2, 0)));
  EXPECT_THAT(kv.BlockTable(1), ElementsAre(2, 1, 0));
  EXPECT_EQ(kv.NumSwapped(1), 0);
  EXPECT_EQ(kv.num_free_host_blocks(), 4);
  for (SeqId s : {1, 2, 3}) kv.Free(s);
  EXPECT_EQ(kv.num_free_blocks(), 8);
}

TEST(KvCacheManagerSwapTest, SwapInNeedsFreeBlocksAndFreeReturnsHostBlocks) {
  KvCacheManager kv(4, 4, false, PrefixHasher(), 4);
  ASSERT_TRUE(kv.Reserve(1, 8));
  std::vector<BlockCopy> copies;
  kv.SwapOut(1, 8, &copies);
  ASSERT_TRUE(kv.Reserve(2, 12));  // 3 of 4 blocks: 2 cannot come back
  copies.clear();
  EXPECT_FALSE(kv.SwapIn(1, &copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(kv.NumSwapped(1), 2);
  // Finishing (or aborting) while swapped out gives the host blocks back.
  kv.Free(1);
  EXPECT_EQ(kv.NumSwapped(1), 0);
  EXPECT_EQ(kv.num_free_host_blocks(), 4);
  kv.Free(2);
  EXPECT_EQ(kv.num_free_blocks(), 4);
}

TEST(SchedulerSwapTest, AVictimSwapsOutKeepingItsTokensAndSwapsBackIn) {
  // 6 blocks of 4 slots; 4 sequences grow to 12 tokens (3 blocks each).
  SchedulerSim sim(6, 4, {.max_batched_tokens = 64, .max_seqs = 8}, /*num_host_blocks=*/8);
  std::vector<Sequence*> seqs;
  for (int i = 0; i < 4; ++i) seqs.push_back(sim.Add(4, 8));
  SchedulerOutput out = sim.Step();  // prompts: blocks 0..3
  ASSERT_EQ(out.chunks.size(), 4u);
  // Decoding token 4 needs a second block each: 1 and 2 take 4 and 5, 3 preempts 4 (the
  // newest), whose computed block 3 goes to host block 0 and then to 3.
  out = sim.Step();
  ASSERT_THAT(out.preempted, ElementsAre(seqs[3]));
  EXPECT_THAT(out.copies, ElementsAre(Out(3, 0)));
  EXPECT_TRUE(seqs[3]->swapped);
  EXPECT_EQ(seqs[3]->num_computed, 4);  // kept: it resumes at its first output
  EXPECT_EQ(sim.kv().NumSwapped(seqs[3]->id), 1);
  EXPECT_THAT(sim.kv().BlockTable(seqs[2]->id), ElementsAre(2, 3));
  // When it runs again it first copies its block back, then computes only token 4.
  bool swapped_in = false;
  for (int step = 0; step < 100 && !swapped_in; ++step) {
    out = sim.Step();
    for (const ScheduledChunk& c : out.chunks) {
      if (c.seq != seqs[3] || seqs[3]->swapped) continue;
      swapped_in = true;
      const auto back = std::find_if(out.copies.begin(), out.copies.end(), [](const BlockCopy& b) {
        return b.kind == CopyKind::kFromHost && b.src == 0;
      });
      ASSERT_NE(back, out.copies.end());
      EXPECT_EQ(sim.kv().BlockTable(seqs[3]->id).front(), back->dst);
      EXPECT_EQ(c.num_tokens, 1);
    }
  }
  ASSERT_TRUE(swapped_in);
  sim.RunToEnd();
  const Scheduler& s = sim.scheduler();
  EXPECT_GT(s.num_swap_outs(), 0);
  EXPECT_EQ(s.num_swap_ins(), s.num_swap_outs());
  EXPECT_EQ(s.num_preemptions(), s.num_swap_outs());  // room for every victim
  EXPECT_EQ(sim.kv().num_free_blocks(), 6);
  EXPECT_EQ(sim.kv().num_free_host_blocks(), 8);
}

TEST(SchedulerSwapTest, WithoutRoomInTheSwapSpaceAVictimRecomputes) {
  SchedulerSim sim(6, 4, {.max_batched_tokens = 64, .max_seqs = 8}, /*num_host_blocks=*/1);
  std::vector<Sequence*> seqs;
  for (int i = 0; i < 3; ++i) seqs.push_back(sim.Add(8, 4));  // 2 blocks each
  sim.Step();
  // Token 8 needs a third block each: 1 takes the last free one, 2 preempts 3, whose two
  // computed blocks do not fit in one host block: it starts over.
  const SchedulerOutput out = sim.Step();
  ASSERT_THAT(out.preempted, ElementsAre(seqs[2]));
  EXPECT_TRUE(out.copies.empty());
  EXPECT_FALSE(seqs[2]->swapped);
  EXPECT_EQ(seqs[2]->num_computed, 0);
  sim.RunToEnd();
  EXPECT_EQ(sim.scheduler().num_swap_outs(), 0);
  EXPECT_GT(sim.scheduler().num_preemptions(), 0);
  EXPECT_EQ(sim.kv().num_free_blocks(), 6);
  EXPECT_EQ(sim.kv().num_free_host_blocks(), 1);
}

// A model-free check of the whole block life cycle under swap: a random workload (shared
// prompt prefixes for prefix-cache hits, forked samples, aborts) on a pool and a swap space
// far too small, with a fake KV memory of token ids per slot. Each step's copies run in the
// order listed, then every chunk's sequence must find its computed tokens in its blocks
// before its new tokens are written.
class FakeKvMemory {
 public:
  FakeKvMemory(int32_t blocks, int32_t host_blocks, int32_t block_size)
      : block_size_(block_size),
        device_(static_cast<size_t>(blocks) * block_size, -1),
        host_(static_cast<size_t>(host_blocks) * block_size, -1) {}

  void Run(const std::vector<BlockCopy>& copies) {
    for (const BlockCopy& c : copies) {
      const std::vector<int32_t>& from = c.kind == CopyKind::kFromHost ? host_ : device_;
      std::vector<int32_t>& to = c.kind == CopyKind::kToHost ? host_ : device_;
      std::copy_n(from.begin() + c.src * block_size_, block_size_,
                  to.begin() + c.dst * block_size_);
    }
  }
  int32_t& at(int32_t slot) { return device_[slot]; }

 private:
  int32_t block_size_;
  std::vector<int32_t> device_, host_;
};

// Runs the random workload with `policy`; with `tenants`, requests alternate between two
// tenants (weights 1 and 3: fair share moves run slots, preempting after admissions) and a
// KV cap, so swap-ins and swap-outs mix within steps.
void RunRandomWorkload(std::unique_ptr<SchedulingPolicy> policy,
                       const std::vector<TenantConfig>& tenants) {
  constexpr int32_t kBlocks = 16, kHostBlocks = 10, kBlockSize = 4;
  KvCacheManager kv(kBlocks, kBlockSize, /*prefix_caching=*/true, PrefixHasher(), kHostBlocks);
  Scheduler scheduler({.max_batched_tokens = 24, .max_seqs = 8}, &kv, std::move(policy));
  scheduler.SetTenants(tenants);
  FakeKvMemory memory(kBlocks, kHostBlocks, kBlockSize);
  std::mt19937 rng(5);
  const auto uniform = [&](int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
  };
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<Sequence*> live;
  const auto add = [&](std::vector<int32_t> tokens, int32_t max_total) {
    auto seq = std::make_unique<Sequence>();
    seq->request.tenant = tenants.empty() ? "" : tenants[seqs.size() % tenants.size()].name;
    seq->id = static_cast<SeqId>(seqs.size() + 1);
    seq->prompt_len = static_cast<int32_t>(tokens.size());
    seq->tokens = std::move(tokens);
    seq->max_total_tokens = max_total;
    seq->cache_root = kv.hasher().Root(seq->request.tenant);
    seqs.push_back(std::move(seq));
    live.push_back(seqs.back().get());
    return seqs.back().get();
  };
  int32_t added = 0, checked_tokens = 0;
  for (int step = 0; step < 20000 && (added < 200 || !live.empty()); ++step) {
    if (added < 200 && uniform(0, 1) == 0) {
      // Prompts share one of three 8-token prefixes, so the prefix cache hits.
      std::vector<int32_t> prompt;
      const int32_t prefix = uniform(0, 2);
      for (int32_t t = 0; t < 8; ++t) prompt.push_back(100 * prefix + t);
      for (int32_t t = uniform(1, 10); t > 0; --t) prompt.push_back(uniform(0, 999));
      Sequence* seq = add(prompt, static_cast<int32_t>(prompt.size()) + uniform(1, 14));
      seq->pending_forks = uniform(0, 3) == 0 ? uniform(1, 2) : 0;
      scheduler.Add(seq);
      ++added;
    }
    if (!live.empty() && uniform(0, 30) == 0) {  // an abort, waiting or running
      Sequence* gone = live[uniform(0, static_cast<int32_t>(live.size()) - 1)];
      scheduler.Remove(gone);
      std::erase(live, gone);
    }
    const SchedulerOutput out = scheduler.Schedule();
    memory.Run(out.copies);
    for (const ScheduledChunk& c : out.chunks) {
      for (int32_t t = 0; t < c.seq->num_computed; ++t) {
        ASSERT_EQ(memory.at(kv.Slot(c.seq->id, t)), c.seq->tokens[t])
            << "sequence " << c.seq->id << " token " << t << " step " << step;
        ++checked_tokens;
      }
      for (int32_t t = c.seq->num_computed; t < c.seq->num_computed + c.num_tokens; ++t) {
        memory.at(kv.Slot(c.seq->id, t)) = c.seq->tokens[t];
      }
    }
    std::vector<Sequence*> sampling;
    for (const ScheduledChunk& c : out.chunks) {
      if (c.seq->num_computed + c.num_tokens == c.seq->num_tokens()) sampling.push_back(c.seq);
    }
    scheduler.OnStepDone(out);
    for (size_t i = 0, parents = sampling.size(); i < parents; ++i) {
      Sequence* s = sampling[i];
      // As Engine::Core::Fork: the samples take the prompt and its blocks, then sample.
      for (int32_t f = s->pending_forks; f > 0; --f) {
        Sequence* child = add(s->tokens, s->max_total_tokens);
        child->request.tenant = s->request.tenant;
        child->cache_root = s->cache_root;
        child->prompt_len = s->prompt_len;
        child->block_hashes = s->block_hashes;
        scheduler.AddFork(s, child);
        sampling.push_back(child);
      }
      s->pending_forks = 0;
    }
    for (Sequence* s : sampling) {
      s->tokens.push_back(uniform(0, 999));
      if (s->num_tokens() >= s->max_total_tokens) {
        scheduler.Remove(s);
        std::erase(live, s);
      }
    }
  }
  EXPECT_TRUE(live.empty());
  EXPECT_GT(scheduler.num_swap_outs(), 10);
  EXPECT_GT(scheduler.prefix_cache_hits(), 0);
  EXPECT_GT(checked_tokens, 1000);
  EXPECT_EQ(kv.num_free_blocks(), kBlocks);
  EXPECT_EQ(kv.num_free_host_blocks(), kHostBlocks);
  EXPECT_EQ(scheduler.num_swapped(), 0);  // aborted while swapped out included
}

TEST(SchedulerSwapTest, RandomWorkloadKeepsEveryComputedTokenInPlace) {
  RunRandomWorkload(std::make_unique<FcfsPolicy>(), {});
}

TEST(SchedulerSwapTest, RandomWorkloadOfTwoTenantsUnderFairShareKeepsEveryTokenInPlace) {
  RunRandomWorkload(
      std::make_unique<FairSharePolicy>(),
      {{.name = "a", .weight = 1}, {.name = "b", .weight = 3, .kv_cache_cap_blocks = 12}});
}

// Issue 22's schedule, with the real scheduler and KV cache manager: under pacing a
// sequence can preempt itself (swapping out) in a step that then runs no chunk at all, the
// other tenant's long work being held back. Such a step still has copies, so it is not
// empty: the engine must run them (Engine::Core::Step), else the victim swaps back in from
// host blocks that were never written.
TEST(SchedulerSwapTest, APacedStepCanSwapOutWithNoChunkAndIsNotEmpty) {
  KvCacheManager kv(72, 16, /*prefix_caching=*/true, PrefixHasher(), /*num_host_blocks=*/8);
  Scheduler scheduler({.max_batched_tokens = 2048, .max_seqs = 256}, &kv,
                      std::make_unique<FairSharePolicy>());
  scheduler.SetTenants({{.name = "x"}, {.name = "y"}});
  std::vector<std::unique_ptr<Sequence>> seqs;
  const auto add = [&](const std::string& tenant, int32_t prompt, int32_t output) {
    auto seq = std::make_unique<Sequence>();
    seq->id = static_cast<SeqId>(seqs.size() + 1);
    seq->request.tenant = tenant;
    for (int32_t t = 0; t < prompt; ++t) seq->tokens.push_back(3 + t % 500);
    seq->prompt_len = prompt;
    seq->max_total_tokens = prompt + output;
    seq->cache_root = kv.hasher().Root(tenant);
    scheduler.Add(seq.get());
    seqs.push_back(std::move(seq));
  };
  add("x", 1100, 10);
  int copy_only_step = -1, swapped_in_at = -1, finished = 0;
  for (int step = 0; step < 400 && finished < 2; ++step) {
    if (step == 1) add("y", 3, 60);
    scheduler.SetPrefillLimits({.short_len = 16, .long_chunk = 0, .heavy_context = 1024});
    const SchedulerOutput out = scheduler.Schedule();
    if (out.chunks.empty() && !out.copies.empty() && copy_only_step < 0) {
      copy_only_step = step;
      EXPECT_FALSE(out.empty());
      for (const BlockCopy& c : out.copies) EXPECT_EQ(c.kind, CopyKind::kToHost);
    }
    for (const BlockCopy& c : out.copies) {
      if (c.kind == CopyKind::kFromHost && copy_only_step >= 0 && swapped_in_at < 0) {
        swapped_in_at = step;
      }
    }
    std::vector<Sequence*> sampling;
    for (const ScheduledChunk& c : out.chunks) {
      if (c.seq->num_computed + c.num_tokens == c.seq->num_tokens()) sampling.push_back(c.seq);
    }
    scheduler.OnStepDone(out);
    for (Sequence* s : sampling) {
      s->tokens.push_back(7);
      if (s->num_tokens() >= s->max_total_tokens) {
        scheduler.Remove(s);
        ++finished;
      }
    }
  }
  EXPECT_EQ(finished, 2);
  ASSERT_GE(copy_only_step, 0) << "no step swapped out without a chunk";
  EXPECT_GT(swapped_in_at, copy_only_step);
  EXPECT_EQ(kv.num_free_host_blocks(), 8);
}

// Bytes of block `b` of `cache` across every layer and kind, scales included.
std::vector<char> BlockBytes(const kernels::PagedKvCache& cache, int32_t b) {
  const kernels::KvCacheShape& s = cache.shape;
  const size_t data = static_cast<size_t>(s.block_size * s.token_elems()) * DTypeSize(s.dtype);
  const size_t scales = static_cast<size_t>(s.block_size) * s.num_kv_heads * sizeof(float);
  std::vector<char> out;
  auto append = [&](const void* base, size_t bytes) {
    const char* p = static_cast<const char*>(base) + b * bytes;
    out.insert(out.end(), p, p + bytes);
  };
  for (int32_t layer = 0; layer < s.num_layers; ++layer) {
    for (int32_t kind = 0; kind < 2; ++kind) {
      append(cache.Plane(layer, kind), data);
      if (s.has_scales()) append(cache.Scales(layer, kind), scales);
    }
  }
  return out;
}

TEST(CopyKvBlocksTest, SwapCopiesMoveEveryLayerAndParameter) {
  auto backend = kernels::CreateBackend({.device = kernels::DeviceKind::kCpu, .num_threads = 1});
  ASSERT_TRUE(backend.ok());
  for (kernels::DType dtype : {kernels::DType::kF32, kernels::DType::kI8}) {
    SCOPED_TRACE(kernels::DTypeName(dtype));
    kernels::KvCacheShape shape{.num_layers = 3,
                                .num_blocks = 6,
                                .block_size = 4,
                                .num_kv_heads = 2,
                                .head_dim = 8,
                                .dtype = dtype};
    auto cache_buffer = (*backend)->Allocate(shape.total_bytes());
    kernels::KvCacheShape host_shape = shape;
    host_shape.num_blocks = 3;
    auto host_buffer = (*backend)->AllocateHost(host_shape.total_bytes());
    ASSERT_TRUE(cache_buffer.ok());
    ASSERT_TRUE(host_buffer.ok());
    const kernels::PagedKvCache cache{cache_buffer->data(), shape};
    const kernels::PagedKvCache host{host_buffer->data(), host_shape};
    auto* bytes = static_cast<unsigned char*>(cache_buffer->data());
    for (size_t i = 0; i < shape.total_bytes(); ++i)
      bytes[i] = static_cast<unsigned char>((i * 2654435761u) >> 13);
    std::memset(host_buffer->data(), 0, host_shape.total_bytes());
    const std::vector<char> b1 = BlockBytes(cache, 1), b2 = BlockBytes(cache, 2),
                            b4 = BlockBytes(cache, 4);
    ASSERT_NE(b1, b2);
    // Out: blocks 1, 2 (one run) and 4 to host 0, 1, 2. In: host 1 to block 5 and host 0 to
    // block 0; then a copy on write of block 5 into 3.
    const std::vector<BlockCopy> copies = {Out(1, 0), Out(2, 1), Out(4, 2),
                                           In(1, 5),  In(0, 0),  {5, 3, CopyKind::kDevice}};
    ASSERT_TRUE(CopyKvBlocks(**backend, cache, host, copies).ok());
    EXPECT_EQ(BlockBytes(host, 0), b1);
    EXPECT_EQ(BlockBytes(host, 1), b2);
    EXPECT_EQ(BlockBytes(host, 2), b4);
    EXPECT_EQ(BlockBytes(cache, 5), b2);
    EXPECT_EQ(BlockBytes(cache, 0), b1);
    EXPECT_EQ(BlockBytes(cache, 3), b2);
    EXPECT_EQ(BlockBytes(cache, 1), b1);  // sources are left as they were
  }
}

}  // namespace
}  // namespace pagoda::engine
