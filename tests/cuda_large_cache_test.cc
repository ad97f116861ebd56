// A KV cache whose planes hold more than 2^31 elements (as a 4.3 GB bf16 plane does): WriteKv
// and both attention kernels reach blocks beyond element 2^31 of K, and beyond byte 2^32 of
// the cache where V starts, with 64-bit offsets. The same tokens written into a small CPU
// cache at low block ids give the reference. Skips without a GPU (it needs about 8.6 GB of
// device memory).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "tests/cuda_test_util.h"

namespace pagoda::kernels {
namespace {

using testing::MakeOutput;
using testing::MakeTwin;
using testing::RandomValues;
using testing::Read;
using testing::TwinTensor;

constexpr int32_t kBlockSize = 16;
constexpr int32_t kKvHeads = 2;
constexpr int32_t kHeadDim = 128;
constexpr int32_t kGroup = 4;
constexpr int32_t kTokenElems = kKvHeads * kHeadDim;
// Blocks so that one plane passes 2^31 elements by 64 blocks.
constexpr int64_t kBigBlocks = (int64_t{1} << 31) / (kBlockSize * kTokenElems) + 64;

// Sequence 0: a 40-token prompt; sequence 1: 300 tokens, then (step 1) one decode token.
// Block i of sequence s is `first_block + 20 * s + i` counted down from the end
// (`from_end`) or up from 0.
BatchInput Step(int32_t step, int64_t num_blocks, bool from_end) {
  BatchInput b;
  b.max_blocks_per_seq = 20;
  b.query_start_loc = {0};
  const int32_t first[2][2] = {{0, 0}, {40, 300}};
  const int32_t last[2][2] = {{40, 300}, {40, 301}};
  for (int32_t s = 0; s < 2; ++s) {
    std::vector<int32_t> table(20);
    for (int32_t i = 0; i < 20; ++i) {
      const int64_t id = 20 * s + i;
      table[i] = static_cast<int32_t>(from_end ? num_blocks - 1 - id : id);
    }
    if (first[step][s] == last[step][s]) continue;
    for (int32_t pos = first[step][s]; pos < last[step][s]; ++pos) {
      b.token_ids.push_back(0);
      b.positions.push_back(pos);
      b.slot_mapping.push_back(table[pos / kBlockSize] * kBlockSize + pos % kBlockSize);
    }
    b.block_tables.insert(b.block_tables.end(), table.begin(), table.end());
    b.query_start_loc.push_back(b.num_tokens());
    b.seq_lens.push_back(last[step][s]);
    b.logits_indices.push_back(b.num_tokens() - 1);
  }
  return b;
}

TEST(CudaLargeCacheTest, OffsetsBeyondTwoToTheThirtyOneElements) {
  PAGODA_SKIP_WITHOUT_CUDA();
  // The slots the test writes lie past element 2^31 of the K plane.
  ASSERT_GT((kBigBlocks - 40) * kBlockSize * kTokenElems, int64_t{1} << 31);
  for (bool generic : {false, true}) {
    SCOPED_TRACE(generic ? "CUDA-core kernel" : "tensor-core kernels");
    testing::BackendPair b =
        testing::MakeBackendPair({.dtype = DType::kBF16, .generic_attention = generic});
    ASSERT_NE(b.cuda, nullptr);
    const KvCacheShape big{.num_layers = 1,
                           .num_blocks = static_cast<int32_t>(kBigBlocks),
                           .block_size = kBlockSize,
                           .num_kv_heads = kKvHeads,
                           .head_dim = kHeadDim,
                           .dtype = DType::kBF16};
    const KvCacheShape small{.num_layers = 1,
                             .num_blocks = 40,
                             .block_size = kBlockSize,
                             .num_kv_heads = kKvHeads,
                             .head_dim = kHeadDim,
                             .dtype = DType::kF32};
    ASSERT_GT(big.total_bytes(), size_t{1} << 32);
    auto cuda_mem = b.cuda->Allocate(big.total_bytes());
    ASSERT_TRUE(cuda_mem.ok()) << cuda_mem.status();
    auto cpu_mem = b.cpu->Allocate(small.total_bytes());
    ASSERT_TRUE(cpu_mem.ok());
    const PagedKvCache cuda_cache{cuda_mem->data(), big};
    const PagedKvCache cpu_cache{cpu_mem->data(), small};
    const AttentionParams p{kKvHeads * kGroup, kKvHeads, kHeadDim,
                            1.f / std::sqrt(static_cast<float>(kHeadDim))};
    std::mt19937 rng(generic ? 2 : 1);
    for (int32_t step = 0; step < 2; ++step) {
      SCOPED_TRACE(absl::StrCat("step ", step));
      const BatchInput cuda_batch = Step(step, kBigBlocks, true);
      const BatchInput cpu_batch = Step(step, kBigBlocks, false);
      const int64_t n = cuda_batch.num_tokens(), width = int64_t{kGroup} * kTokenElems;
      TwinTensor k = MakeTwin(b, RandomValues(n * kTokenElems, rng, -3, 3), n, kTokenElems);
      TwinTensor v = MakeTwin(b, RandomValues(n * kTokenElems, rng, -3, 3), n, kTokenElems);
      TwinTensor q = MakeTwin(b, RandomValues(n * width, rng, -2, 2), n, width);
      TwinTensor out = MakeOutput(b, DType::kBF16, n, width);
      ASSERT_TRUE(b.cpu->PrepareBatch(cpu_batch).ok());
      ASSERT_TRUE(b.cuda->PrepareBatch(cuda_batch).ok());
      b.cpu->WriteKv(k.cpu, v.cpu, cpu_cache, 0);
      b.cuda->WriteKv(k.cuda, v.cuda, cuda_cache, 0);
      b.cpu->Attention(q.cpu, cpu_cache, 0, p, out.cpu);
      b.cuda->Attention(q.cuda, cuda_cache, 0, p, out.cuda);
      const absl::Status st = b.cuda->Synchronize();
      ASSERT_TRUE(st.ok()) << st;
      testing::ExpectAllClose(Read(*b.cuda, out.cuda), Read(*b.cpu, out.cpu),
                              testing::Tolerance(DType::kBF16), "attention");
      absl::StatusOr<CudaAttentionTrace> trace = CudaLastAttention(b.cuda.get());
      ASSERT_TRUE(trace.ok());
      EXPECT_EQ(trace->tensor_core, !generic);
    }
    // The last V row written (sequence 1, position 300) reads back where it belongs: past
    // byte 2^32 of the cache.
    const int64_t slot = (kBigBlocks - 1 - (20 + 300 / kBlockSize)) * kBlockSize + 300 % kBlockSize;
    const auto* v_plane = static_cast<const char*>(cuda_cache.Plane(0, 1));
    const char* row = v_plane + slot * kTokenElems * 2;
    ASSERT_GT(row - static_cast<const char*>(cuda_mem->data()), int64_t{1} << 32);
    std::vector<uint16_t> got(kTokenElems);
    ASSERT_TRUE(b.cuda->CopyToHost(got.data(), row, got.size() * 2).ok());
    const float* cpu_v = static_cast<const float*>(cpu_cache.Plane(0, 1));
    const int64_t cpu_slot = (20 + 300 / kBlockSize) * kBlockSize + 300 % kBlockSize;
    for (int32_t e = 0; e < kTokenElems; ++e) {
      // bf16 is the upper half of the f32 bit pattern; the CPU holds the bf16-rounded value.
      uint32_t bits = uint32_t{got[e]} << 16;
      float value;
      std::memcpy(&value, &bits, 4);
      ASSERT_EQ(value, cpu_v[cpu_slot * kTokenElems + e]) << e;
    }
  }
}

}  // namespace
}  // namespace pagoda::kernels
