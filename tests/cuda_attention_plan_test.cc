// The attention plan builder (kernels/cuda/attention_plan.h): host code, so these run
// without a device. Which kernel path a shape takes, decode items and prefill tiles,
// split-KV partitions, and the padding that keeps a decode step's CUDA graph across steps.
#include <algorithm>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/cuda_graphs.h"
#include "tests/cuda_test_util.h"

namespace pagoda::kernels {
namespace {

using cuda::AttentionPath;
using cuda::AttentionPlanOptions;
using cuda::AttentionShape;
using Seq = testing::AttentionSeq;

// The batch of `seqs` over blocks of 16 tokens drawn from a shuffled pool of `num_blocks`.
BatchInput MakeBatch(const std::vector<Seq>& seqs, int32_t num_blocks, std::mt19937& rng) {
  return testing::MakeAttentionBatch(seqs, 16, num_blocks, rng);
}

TEST(AttentionPlanTest, ChoosesTensorCoresOnlyForSupportedShapes) {
  AttentionShape s{.dtype = DType::kBF16,
                   .head_dim = 128,
                   .block_size = 16,
                   .num_heads = 32,
                   .num_kv_heads = 4,
                   .aligned = true};
  EXPECT_EQ(*cuda::ChooseAttentionPath(s), AttentionPath::kTensorCore);
  s.dtype = DType::kF32;
  EXPECT_EQ(*cuda::ChooseAttentionPath(s), AttentionPath::kGeneric);
  s.dtype = DType::kF16;
  s.head_dim = 8;
  EXPECT_EQ(*cuda::ChooseAttentionPath(s), AttentionPath::kGeneric);
  s.head_dim = 64;
  s.aligned = false;
  EXPECT_EQ(*cuda::ChooseAttentionPath(s), AttentionPath::kGeneric);
  s.aligned = true;
  s.force_generic = true;
  EXPECT_EQ(*cuda::ChooseAttentionPath(s), AttentionPath::kGeneric);
  s.force_generic = false;
  s.num_heads = 30;
  EXPECT_EQ(cuda::ChooseAttentionPath(s).status().code(), absl::StatusCode::kInvalidArgument);
  s.num_heads = 32;
  s.block_size = 12;
  EXPECT_EQ(cuda::ChooseAttentionPath(s).status().code(), absl::StatusCode::kUnimplemented);
  s.block_size = 1;
  s.head_dim = 512;
  EXPECT_EQ(cuda::ChooseAttentionPath(s).status().code(), absl::StatusCode::kUnimplemented);
}

AttentionPlanOptions PlanOptions(AttentionPath path, int32_t split) {
  return {.path = path,
          .num_heads = 8,
          .num_kv_heads = 2,
          .num_blocks = 1000,
          .block_size = 16,
          .num_sms = 132,
          .split_partition = split};
}

TEST(AttentionPlanTest, RoutesDecodeTokensToItemsAndPrefillTokensToTiles) {
  const std::vector<Seq> c = {{10, 1}, {40, 40}, {50, 3}, {7, 1}};
  std::mt19937 rng(1);
  const BatchInput batch = MakeBatch(c, 1000, rng);
  auto tc = cuda::BuildAttentionPlan(batch, PlanOptions(AttentionPath::kTensorCore, 0));
  ASSERT_TRUE(tc.ok()) << tc.status();
  ASSERT_EQ(tc->items.size(), 2u);
  EXPECT_EQ(tc->items[0].token, 0);
  EXPECT_EQ(tc->items[0].kv_end, 10);
  EXPECT_EQ(tc->items[1].token, 44);
  EXPECT_EQ(tc->items[1].seq, 3);
  EXPECT_EQ(tc->items[1].partial, -1);
  // group 4: 16 tokens per tile; 40 tokens -> 16 + 16 + 8, then 3.
  ASSERT_EQ(tc->tiles.size(), 4u);
  EXPECT_EQ(tc->tiles[0].token_begin, 1);
  EXPECT_EQ(tc->tiles[0].num_tokens, 16);
  EXPECT_EQ(tc->tiles[0].kv_end, 16);
  EXPECT_EQ(tc->tiles[2].num_tokens, 8);
  EXPECT_EQ(tc->tiles[2].kv_end, 40);
  EXPECT_EQ(tc->tiles[3].seq, 2);
  EXPECT_EQ(tc->tiles[3].kv_end, 50);

  auto generic = cuda::BuildAttentionPlan(batch, PlanOptions(AttentionPath::kGeneric, 0));
  ASSERT_TRUE(generic.ok());
  EXPECT_EQ(generic->items.size(), 45u);  // every token
  EXPECT_EQ(generic->num_decode_items, 2);
  EXPECT_TRUE(generic->tiles.empty());
  EXPECT_EQ(generic->items[2].token, 1);
  EXPECT_EQ(generic->items[2].kv_end, 1);
}

TEST(AttentionPlanTest, SplitsLongContextsIntoPartitions) {
  const std::vector<Seq> c = {{1000, 1}, {100, 1}};
  std::mt19937 rng(1);
  const BatchInput batch = MakeBatch(c, 1000, rng);
  auto plan = cuda::BuildAttentionPlan(batch, PlanOptions(AttentionPath::kTensorCore, 256));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->partition_size, 256);
  ASSERT_EQ(plan->splits.size(), 1u);
  EXPECT_EQ(plan->splits[0].num_partials, 4);
  EXPECT_EQ(plan->num_partials, 4);
  ASSERT_EQ(plan->items.size(), 5u);
  // 1000 tokens in 4 parts of 256 (rounded to 16): [0,256) [256,512) [512,768) [768,1000).
  EXPECT_EQ(plan->items[3].kv_begin, 768);
  EXPECT_EQ(plan->items[3].kv_end, 1000);
  EXPECT_EQ(plan->items[3].partial, 3);
  EXPECT_EQ(plan->items[4].partial, -1);
}

TEST(AttentionPlanTest, SplitHeuristicFillsTheDeviceOnlyWhenNeeded) {
  // 64 sequences x 4 KV heads = 256 blocks >= 132 SMs: no split.
  EXPECT_EQ(cuda::ChooseSplitPartition(std::vector<int32_t>(64, 2048), 4, 132), 0);
  // Two waves' worth of items (2 x 132 / 4 = 66), as a power of two of at least 128 tokens:
  // 1 x 2048 -> 128 (16 partitions); 16 x 2048 -> 512; 32 x 2048 -> 1024 (2 partitions, not
  // the 1008 of an even share, which leaves a third partition of 32 tokens).
  EXPECT_EQ(cuda::ChooseSplitPartition({2048}, 4, 132), 128);
  EXPECT_EQ(cuda::ChooseSplitPartition(std::vector<int32_t>(16, 2048), 4, 132), 512);
  EXPECT_EQ(cuda::ChooseSplitPartition(std::vector<int32_t>(32, 2048), 4, 132), 1024);
  EXPECT_EQ(cuda::ChooseSplitPartition(std::vector<int32_t>(16, 8192), 4, 132), 2048);
  // At most 32 partitions a sequence: 8192 -> 256 (not 128), 32768 -> 1024 (not 512).
  EXPECT_EQ(cuda::ChooseSplitPartition({8192}, 4, 132), 256);
  EXPECT_EQ(cuda::ChooseSplitPartition({32768}, 4, 132), 1024);
  // Uneven contexts: the share of the total (1000 + 3000) / 66 -> 64 -> 128.
  EXPECT_EQ(cuda::ChooseSplitPartition({1000, 3000}, 4, 132), 128);
  // Short contexts are never split.
  EXPECT_EQ(cuda::ChooseSplitPartition({100, 50}, 4, 132), 0);
  EXPECT_EQ(cuda::ChooseSplitPartition({}, 4, 132), 0);
}

TEST(AttentionPlanTest, GraphBucketsWasteUnderAQuarter) {
  const std::vector<std::pair<int32_t, int32_t>> want = {
      {1, 1},   {2, 2},   {3, 4},   {5, 8},     {8, 8},     {9, 10},    {13, 14},
      {16, 16}, {17, 20}, {33, 40}, {100, 112}, {129, 160}, {257, 320}, {4096, 4096}};
  for (const auto& [n, bucket] : want) EXPECT_EQ(cuda::GraphBucket(n), bucket) << n;
  std::set<int32_t> buckets;
  for (int32_t n = 1; n <= 4096; ++n) {
    const int32_t b = cuda::GraphBucket(n);
    ASSERT_GE(b, n);
    if (n > 8) {
      ASSERT_LT(4 * (b - n), n) << n;  // under a quarter past 8
    }
    buckets.insert(b);
  }
  EXPECT_EQ(buckets.size(), 4u + 4u * 9u);  // 1 2 4 8, then four per power of two to 4096
  EXPECT_EQ(cuda::RoundUpPow2(0), 1);
  EXPECT_EQ(cuda::RoundUpPow2(1), 1);
  EXPECT_EQ(cuda::RoundUpPow2(7), 8);
  EXPECT_EQ(cuda::RoundUpPow2(64), 64);
  EXPECT_EQ(cuda::RoundUpPow2(65), 128);
}

// Batch sizes a decode step is padded to under CUDA graphs (RecordableBatchSize).
TEST(AttentionPlanTest, GraphBatchSizesAreOneTwoFourThenMultiplesOfEight) {
  const std::vector<std::pair<int32_t, int32_t>> want = {
      {0, 0},   {1, 1},   {2, 2},   {3, 4},   {4, 4},     {5, 8},     {8, 8},     {9, 16},
      {15, 16}, {17, 24}, {64, 64}, {65, 72}, {511, 512}, {512, 512}, {513, 513}, {1000, 1000}};
  for (const auto& [n, size] : want) EXPECT_EQ(cuda::GraphBatchSize(n), size) << n;
}

// Two decode steps whose split contexts give 13 and 14 items plan to the same sizes once
// padded: what a CUDA graph of the step bakes in stays the same from one step to the next.
TEST(AttentionPlanTest, GraphPaddingGivesDecodeStepsOneShape) {
  std::mt19937 rng(1);
  const std::vector<Seq> a = {{1000, 1}, {500, 1}, {100, 1}};  // 8 + 4 items (split) + 1
  const std::vector<Seq> b = {{1000, 1}, {520, 1}, {100, 1}};  // 8 + 5 items (split) + 1
  const AttentionPlanOptions o = PlanOptions(AttentionPath::kTensorCore, 128);
  auto pa = cuda::BuildAttentionPlan(MakeBatch(a, 1000, rng), o);
  auto pb = cuda::BuildAttentionPlan(MakeBatch(b, 1000, rng), o);
  ASSERT_TRUE(pa.ok() && pb.ok());
  ASSERT_EQ(pa->items.size(), 13u);
  ASSERT_EQ(pb->items.size(), 14u);
  const cuda::AttentionPlan unpadded = *pa;
  cuda::PadPlanForGraphs(3, &*pa);
  cuda::PadPlanForGraphs(3, &*pb);
  for (const cuda::AttentionPlan* p : {&*pa, &*pb}) {
    EXPECT_EQ(p->items.size(), 14u);
    EXPECT_EQ(p->num_decode_items, 14);
    EXPECT_EQ(p->splits.size(), 3u);  // one per sequence
    EXPECT_EQ(p->num_partials, 14);
    EXPECT_EQ(p->splits.back().token, -1);
    EXPECT_EQ(p->splits.back().num_partials, 0);
    EXPECT_EQ(p->padding_splits, 1);
  }
  EXPECT_EQ(pa->padding_items, 1);
  EXPECT_EQ(pb->padding_items, 0);
  EXPECT_EQ(pa->items.back().token, -1);
  EXPECT_EQ(pa->items.back().partial, -1);
  for (size_t i = 0; i < unpadded.items.size(); ++i) {  // the real work unchanged
    EXPECT_EQ(pa->items[i].token, unpadded.items[i].token);
    EXPECT_EQ(pa->items[i].kv_begin, unpadded.items[i].kv_begin);
    EXPECT_EQ(pa->items[i].kv_end, unpadded.items[i].kv_end);
    EXPECT_EQ(pa->items[i].partial, unpadded.items[i].partial);
  }
  EXPECT_EQ(pa->splits[1].first_partial, unpadded.splits[1].first_partial);

  // Nothing split (one item per sequence already) or prefill work: left alone.
  const std::vector<Seq> short_contexts = {{10, 1}, {20, 1}, {30, 1}};
  auto ps = cuda::BuildAttentionPlan(MakeBatch(short_contexts, 1000, rng), o);
  ASSERT_TRUE(ps.ok());
  cuda::PadPlanForGraphs(3, &*ps);
  EXPECT_EQ(ps->items.size(), 3u);
  EXPECT_TRUE(ps->splits.empty());
  EXPECT_EQ(ps->padding_items, 0);
  const std::vector<Seq> mixed = {{1000, 1}, {40, 40}};
  auto pm = cuda::BuildAttentionPlan(MakeBatch(mixed, 1000, rng), o);
  ASSERT_TRUE(pm.ok());
  const size_t items = pm->items.size();
  cuda::PadPlanForGraphs(2, &*pm);
  EXPECT_EQ(pm->items.size(), items);
  EXPECT_EQ(pm->padding_splits, 0);
}

TEST(AttentionPlanTest, RejectsBlockTablesOutsideTheCache) {
  const std::vector<Seq> c = {{40, 1}};
  std::mt19937 rng(1);
  BatchInput batch = MakeBatch(c, 3, rng);
  AttentionPlanOptions o = PlanOptions(AttentionPath::kGeneric, -1);
  o.num_blocks = 3;
  EXPECT_TRUE(cuda::BuildAttentionPlan(batch, o).ok());
  batch.block_tables[1] = 3;
  EXPECT_EQ(cuda::BuildAttentionPlan(batch, o).status().code(), absl::StatusCode::kInvalidArgument);
  batch.block_tables[1] = 0;
  batch.positions[0] = 400;  // beyond the table's blocks
  EXPECT_EQ(cuda::BuildAttentionPlan(batch, o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagoda::kernels
