// Paged attention on CUDA against the CPU backend: head_dim {64, 128, 8} x block_size
// {16, 32} x GQA group {1, 4, 8} x dtype, over mixed batches (decode tokens with contexts 1,
// block_size - 1, block_size, block_size + 1 and 4096 beside prefill chunks with and without
// a cached prefix), shuffled block tables, split-KV forced on and off (the split tokens
// counted), batches of 1 to 64, head_dim 256, block sizes 1, 64 and 256, the tensor-core and
// the CUDA-core kernels. Every output element is checked after the
// output was filled with NaN. The plan builder's tests (no device needed) are in
// cuda_attention_plan_test.cc.
#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/cuda_backend.h"
#include "tests/cuda_test_util.h"

namespace pagoda::kernels {
namespace {

using testing::ExpectAllClose;
using testing::MakeOutput;
using testing::MakeTwin;
using testing::RandomValues;
using testing::Read;
using testing::TwinTensor;

using Seq = testing::AttentionSeq;

struct Case {
  DType dtype = DType::kBF16;
  int32_t head_dim = 128;
  int32_t block_size = 16;
  int32_t group = 4;
  int32_t kv_heads = 2;
  std::vector<Seq> seqs;
  CudaOptions options;
  // Decode tokens whose context the plan must split (>= 0: asserted). Forced partitions
  // (options.split_kv_partition >= 0) are counted by ExpectedSplitTokens instead.
  int32_t want_split_tokens = -1;

  std::string Name() const {
    return absl::StrCat(std::string(DTypeName(dtype)), " head_dim ", head_dim, " block_size ",
                        block_size, " group ", group, " kv_heads ", kv_heads, " seqs ", seqs.size(),
                        options.generic_attention ? " generic" : "", " split ",
                        options.split_kv_partition);
  }
};

// The batch of `c` (testing::MakeAttentionBatch).
BatchInput MakeBatch(const Case& c, int32_t num_blocks, std::mt19937& rng) {
  return testing::MakeAttentionBatch(c.seqs, c.block_size, num_blocks, rng);
}

// True when `c` is meant for the tensor-core kernels: 16-bit, head_dim 64 or 128, a group
// of at most 64 query heads per KV head, not forced onto the CUDA-core kernel.
bool MeantForTensorCores(const Case& c) {
  return c.dtype != DType::kF32 && (c.head_dim == 64 || c.head_dim == 128) && c.group <= 64 &&
         !c.options.generic_attention;
}

// Prefill tiles the tensor-core path needs for `c`: each prefill chunk (2+ tokens) in
// tiles of 64 / group consecutive tokens.
int32_t ExpectedTiles(const Case& c) {
  const int32_t per_tile = std::max(1, 64 / c.group);
  int32_t tiles = 0;
  for (const Seq& s : c.seqs) {
    if (s.q_len >= 2) tiles += (s.q_len + per_tile - 1) / per_tile;
  }
  return tiles;
}

// Decode tokens of `c` split under a forced partition: contexts longer than the partition
// rounded up to 16 tokens (0: none); -1 when the plan chooses (not forced) and
// c.want_split_tokens does not say.
int32_t ExpectedSplitTokens(const Case& c) {
  const int32_t partition = c.options.split_kv_partition;
  if (partition < 0) return c.want_split_tokens;
  if (partition == 0) return 0;
  const int32_t rounded = (partition + 15) / 16 * 16;
  int32_t split = 0;
  for (const Seq& s : c.seqs) split += s.q_len == 1 && s.context > rounded ? 1 : 0;
  return split;
}

// Expects the last Attention of `cuda` to have run the kernels `c` is meant for (the test
// hook CudaLastAttention): a silent fallback to the CUDA-core kernel fails here. The split
// tokens are checked where known, so a split that never ran fails too.
void ExpectPathRan(const Case& c, const Backend& cuda) {
  absl::StatusOr<CudaAttentionTrace> trace = CudaLastAttention(&cuda);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_GE(trace->calls, 1);
  EXPECT_EQ(trace->tensor_core, MeantForTensorCores(c)) << "attention path";
  int32_t decode = 0;
  for (const Seq& s : c.seqs) decode += s.q_len == 1 ? 1 : 0;
  EXPECT_GE(trace->decode_items, decode);
  EXPECT_EQ(trace->prefill_tiles, trace->tensor_core ? ExpectedTiles(c) : 0);
  const int32_t split = ExpectedSplitTokens(c);
  if (split >= 0) {
    EXPECT_EQ(trace->split_tokens, split) << "split tokens";
  }
}

// Runs attention of case `c` on both backends (layer 1 of a 2-layer cache filled with random
// values) and compares every output element.
void RunCase(const Case& c, uint32_t seed) {
  SCOPED_TRACE(c.Name());
  std::mt19937 rng(seed);
  testing::BackendPair b =
      testing::MakeBackendPair({.dtype = c.dtype,
                                .generic_attention = c.options.generic_attention,
                                .split_kv_partition = c.options.split_kv_partition});
  ASSERT_NE(b.cuda, nullptr);
  int32_t num_blocks = 3;
  for (const Seq& s : c.seqs) num_blocks += (s.context + c.block_size - 1) / c.block_size;
  const BatchInput batch = MakeBatch(c, num_blocks, rng);
  const int32_t heads = c.group * c.kv_heads;
  const int64_t width = int64_t{heads} * c.head_dim;
  const int64_t n = batch.num_tokens();

  const KvCacheShape shape{.num_layers = 2,
                           .num_blocks = num_blocks,
                           .block_size = c.block_size,
                           .num_kv_heads = c.kv_heads,
                           .head_dim = c.head_dim,
                           .dtype = c.dtype};
  const int64_t cache_rows = 2 * shape.num_layers * int64_t{num_blocks} * c.block_size;
  TwinTensor cache = MakeTwin(b, RandomValues(cache_rows * shape.token_elems(), rng), cache_rows,
                              shape.token_elems());
  PagedKvCache cpu_cache{cache.cpu_buffer.view.data, shape};
  cpu_cache.shape.dtype = DType::kF32;
  const PagedKvCache cuda_cache{cache.cuda_buffer.view.data, shape};

  // q is the first third of a fused qkv-like row; out a strided view as well.
  TwinTensor q = MakeTwin(b, RandomValues(n * width, rng, -3, 3), n, width, 3, 0);
  TwinTensor out = MakeOutput(b, c.dtype, n, width, 2, 1);
  ASSERT_TRUE(b.cpu->PrepareBatch(batch).ok());
  ASSERT_TRUE(b.cuda->PrepareBatch(batch).ok());
  const AttentionParams p{heads, c.kv_heads, c.head_dim,
                          1.f / std::sqrt(static_cast<float>(c.head_dim))};
  b.cpu->Attention(q.cpu, cpu_cache, 1, p, out.cpu);
  b.cuda->Attention(q.cuda, cuda_cache, 1, p, out.cuda);
  const absl::Status st = b.cuda->Synchronize();
  ASSERT_TRUE(st.ok()) << st;
  ExpectAllClose(Read(*b.cuda, out.cuda), Read(*b.cpu, out.cpu), testing::Tolerance(c.dtype),
                 "attention");
  testing::ExpectPoisonOutsideView(*b.cuda, out, "attention");
  ExpectPathRan(c, *b.cuda);
}

// Decode contexts around block boundaries plus prefill chunks, one batch.
std::vector<Seq> MixedSeqs(int32_t block_size, bool long_context) {
  std::vector<Seq> seqs = {{1, 1},          {block_size - 1, 1},
                           {block_size, 1}, {block_size + 1, 1},
                           {37, 37},                  // a whole prompt
                           {300, 1},        {90, 9},  // a chunk after a cached prefix
                           {2, 2}};
  if (long_context) seqs.push_back({4096, 1});
  return seqs;
}

class CudaAttentionGridTest : public ::testing::TestWithParam<std::tuple<DType, int32_t>> {};

TEST_P(CudaAttentionGridTest, MixedBatchesMatchCpu) {
  PAGODA_SKIP_WITHOUT_CUDA();
  const auto [dtype, head_dim] = GetParam();
  uint32_t seed = 1;
  for (int32_t block_size : {16, 32}) {
    for (int32_t group : {1, 4, 8}) {
      Case c;
      c.dtype = dtype;
      c.head_dim = head_dim;
      c.block_size = block_size;
      c.group = group;
      // The 4096 context once per block size keeps the CPU reference quick.
      c.seqs = MixedSeqs(block_size, group == 4);
      RunCase(c, seed++);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaAttentionGridTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16,
                                                              DType::kF16),
                                            ::testing::Values(64, 128, 8)),
                         [](const auto& info) {
                           return absl::StrCat(std::string(DTypeName(std::get<0>(info.param))),
                                               "_hd", std::get<1>(info.param));
                         });

TEST(CudaAttentionTest, SplitKvForcedAndOffMatchCpu) {
  PAGODA_SKIP_WITHOUT_CUDA();
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    // Partition, decode tokens split: 16, all but the context of 1; 64, the contexts 4096, 65
    // and 129; 1000, the 4096.
    const std::pair<int32_t, int32_t> cases[] = {{0, 0}, {16, 4}, {64, 3}, {1000, 1}};
    for (const auto& [partition, split] : cases) {
      Case c;
      c.dtype = dtype;
      c.group = 8;
      c.seqs = {{4096, 1}, {17, 1}, {65, 1}, {200, 3}, {1, 1}, {129, 1}};
      c.options.split_kv_partition = partition;
      ASSERT_EQ(ExpectedSplitTokens(c), split);
      RunCase(c, 100 + partition);
    }
  }
}

TEST(CudaAttentionTest, GenericKernelMatchesCpuWhereTensorCoresApply) {
  PAGODA_SKIP_WITHOUT_CUDA();
  for (int32_t head_dim : {64, 128}) {
    Case c;
    c.head_dim = head_dim;
    c.group = 8;
    c.seqs = MixedSeqs(16, true);
    c.options.generic_attention = true;
    RunCase(c, 200 + head_dim);
  }
}

TEST(CudaAttentionTest, BatchesOfOneToSixtyFourOnTheBenchmarkShape) {
  PAGODA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> context(1, 700);
  for (int32_t batch : {1, 2, 7, 33, 64}) {
    Case c;
    c.group = 8;
    c.kv_heads = 4;
    for (int32_t i = 0; i < batch; ++i) c.seqs.push_back({context(rng), 1});
    RunCase(c, 300 + batch);
  }
  Case single;
  single.group = 8;
  single.kv_heads = 4;
  single.seqs = {{4096, 1}};  // few blocks: the plan splits the context
  single.want_split_tokens = 1;
  RunCase(single, 400);
}

// head_dim 256 (the CUDA-core kernel's largest) and blocks of 64 and 256 tokens on both
// kernels: contexts around the block boundaries, a prefill chunk crossing blocks, a long
// decode context, splitting forced for one run.
TEST(CudaAttentionTest, HeadDim256AndBlocksOf64And256) {
  PAGODA_SKIP_WITHOUT_CUDA();
  uint32_t seed = 900;
  for (int32_t block_size : {64, 256}) {
    for (DType dtype : {DType::kBF16, DType::kF32}) {
      for (int32_t head_dim : {256, 128, 64}) {
        Case c;
        c.dtype = dtype;
        c.head_dim = head_dim;
        c.block_size = block_size;
        c.group = 4;
        c.seqs = {{1, 1},
                  {block_size - 1, 1},
                  {block_size, 1},
                  {block_size + 1, 1},
                  {block_size + 40, 70},
                  {1500, 1}};
        RunCase(c, seed++);
        if (::testing::Test::HasFailure()) return;
      }
    }
    Case split;
    split.head_dim = 256;
    split.block_size = block_size;
    split.group = 2;
    split.seqs = {{1500, 1}, {300, 1}, {40, 40}};
    split.options.split_kv_partition = 128;
    RunCase(split, seed++);
  }
}

TEST(CudaAttentionTest, BlockSizeOneAndLargeGroups) {
  PAGODA_SKIP_WITHOUT_CUDA();
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    Case c;
    c.dtype = dtype;
    c.head_dim = 64;
    c.block_size = 1;
    c.group = 2;
    c.seqs = {{1, 1}, {5, 1}, {40, 40}, {70, 6}};
    RunCase(c, 500);
    Case wide;  // 32 query heads per KV head: two 16-row chunks on the decode path
    wide.dtype = dtype;
    wide.group = 32;
    wide.kv_heads = 1;
    wide.seqs = {{100, 1}, {33, 33}, {300, 1}};
    RunCase(wide, 501);
  }
}

TEST(CudaAttentionTest, UnsupportedShapesAreReported) {
  PAGODA_SKIP_WITHOUT_CUDA();
  auto cuda = CreateCudaBackend({.device = DeviceKind::kCuda}, {});
  ASSERT_TRUE(cuda.ok());
  Backend& be = **cuda;
  BatchInput batch;
  batch.token_ids = {0};
  batch.positions = {0};
  batch.slot_mapping = {0};
  batch.query_start_loc = {0, 1};
  batch.seq_lens = {1};
  batch.block_tables = {0};
  batch.max_blocks_per_seq = 1;
  ASSERT_TRUE(be.PrepareBatch(batch).ok());
  const KvCacheShape shape{.num_layers = 1,
                           .num_blocks = 1,
                           .block_size = 16,
                           .num_kv_heads = 1,
                           .head_dim = 320,
                           .dtype = be.kv_dtype()};
  auto mem = be.Allocate(shape.total_bytes());
  auto q = be.AllocateTensor(be.activation_dtype(), 1, 320);
  ASSERT_TRUE(mem.ok() && q.ok());
  be.Attention(q->view, {mem->data(), shape}, 0, {1, 1, 320, 1.f}, q->view);
  EXPECT_EQ(be.Synchronize().code(), absl::StatusCode::kUnimplemented);
  KvCacheShape odd = shape;
  odd.block_size = 24;
  odd.head_dim = 64;
  auto q64 = be.AllocateTensor(be.activation_dtype(), 1, 64);
  ASSERT_TRUE(q64.ok());
  be.Attention(q64->view, {mem->data(), odd}, 0, {1, 1, 64, 1.f}, q64->view);
  EXPECT_EQ(be.Synchronize().code(), absl::StatusCode::kUnimplemented);
}

// True when some valid row of a tensor-core prefill tile of `s` (group `group`) sees a
// 32-key K/V tile with every key masked while its warp still attends to that tile: the
// warp's 16 rows (token = row / group) straddle a multiple of 32 positions.
bool HasFullyMaskedValidRow(const Seq& s, int32_t group) {
  const int32_t per_tile = std::max(1, 64 / group);
  const int32_t first_pos = s.context - s.q_len;
  for (int32_t t0 = 0; t0 < s.q_len; t0 += per_tile) {
    const int32_t n = std::min(per_tile, s.q_len - t0);
    for (int32_t warp = 0; warp < 4; ++warp) {
      int32_t lo = -1, hi = -1;
      for (int32_t row = 16 * warp; row < 16 * warp + 16; ++row) {
        if (row / group >= n) continue;
        const int32_t pos = first_pos + t0 + row / group;
        if (lo < 0) lo = pos;
        hi = pos;
      }
      if (lo >= 0 && hi / 32 > lo / 32) return true;
    }
  }
  return false;
}

// Prefill chunks whose tiles hold valid rows that are fully masked in one of the K/V
// tiles their warp attends to (positions straddling a multiple of 32 inside a warp): the
// online softmax must skip such a tile for that row without NaN or a wrong rescale.
TEST(CudaAttentionTest, FullyMaskedValidRowsInsidePrefillTiles) {
  const std::vector<Seq> seqs = {{52, 32}, {75, 45}, {100, 7}, {33, 3}};
  for (int32_t group : {1, 2, 3, 4, 8}) {
    bool covered = false;
    for (const Seq& s : seqs) covered = covered || HasFullyMaskedValidRow(s, group);
    ASSERT_TRUE(covered) << "the case no longer masks a whole tile for group " << group;
  }
  PAGODA_SKIP_WITHOUT_CUDA();
  uint32_t seed = 600;
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    for (int32_t head_dim : {64, 128}) {
      for (int32_t group : {1, 2, 3, 4, 8}) {
        Case c;
        c.dtype = dtype;
        c.head_dim = head_dim;
        c.group = group;
        c.seqs = seqs;
        RunCase(c, seed++);
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

// GQA groups that do not divide the 64-row prefill tile leave padding rows in every tile
// (3: 63 valid rows, 6: 60, 7: 63, 12: 60); prefill chunks, chunks after a cached prefix
// and decode tokens side by side, on both paths.
TEST(CudaAttentionTest, PrefillGroupsThatDoNotDivideTheTile) {
  PAGODA_SKIP_WITHOUT_CUDA();
  uint32_t seed = 700;
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (int32_t head_dim : {64, 128}) {
      for (int32_t group : {3, 6, 7, 12}) {
        Case c;
        c.dtype = dtype;
        c.head_dim = head_dim;
        c.group = group;
        c.seqs = {{37, 37}, {90, 29}, {300, 1}, {69, 5}, {17, 1}, {130, 66}};
        RunCase(c, seed++);
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

// The tensor-core kernels run for every shape meant for them (decode and prefill in one
// batch), the CUDA-core kernel for the rest; checked through CudaLastAttention.
TEST(CudaAttentionTest, TensorCorePathRunsForTheShapesMeantForIt) {
  PAGODA_SKIP_WITHOUT_CUDA();
  uint32_t seed = 800;
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (int32_t head_dim : {64, 128, 96, 8}) {
      for (bool generic : {false, true}) {
        Case c;
        c.dtype = dtype;
        c.head_dim = head_dim;
        c.group = 4;
        c.seqs = {{40, 40}, {200, 1}, {70, 3}};
        c.options.generic_attention = generic;
        RunCase(c, seed++);
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

}  // namespace
}  // namespace pagoda::kernels
