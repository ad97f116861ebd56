// Swap preemption on the CUDA backend (skipped without a device): block copies between the
// cache and page-locked host memory, byte-exact, and an engine under memory pressure that
// swaps sequences out and back in and finishes every request with the pool and the swap
// space full again.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/kv_block_copy.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "model/gguf.h"
#include "tests/cuda_test_util.h"
#include "tests/engine_test_util.h"
#include "tests/test_util.h"

namespace pagoda::engine {
namespace {

// Host copy of block `b` of `cache` (every layer, K and V) read through `backend`.
std::vector<char> BlockBytes(kernels::Backend& backend, const kernels::PagedKvCache& cache,
                             int32_t b, bool on_host) {
  const kernels::KvCacheShape& s = cache.shape;
  const size_t data = static_cast<size_t>(s.block_size * s.token_elems()) * DTypeSize(s.dtype);
  std::vector<char> out;
  for (int32_t layer = 0; layer < s.num_layers; ++layer) {
    for (int32_t kind = 0; kind < 2; ++kind) {
      const char* p = static_cast<const char*>(cache.Plane(layer, kind)) + b * data;
      const size_t at = out.size();
      out.resize(at + data);
      if (on_host) {
        std::memcpy(out.data() + at, p, data);
      } else {
        EXPECT_TRUE(backend.CopyToHost(out.data() + at, p, data).ok());
      }
    }
  }
  return out;
}

TEST(CudaSwapTest, BlockCopiesThroughPinnedHostMemoryAreExact) {
  PAGODA_SKIP_WITHOUT_CUDA();
  auto backend = kernels::CreateCudaBackend({.device = kernels::DeviceKind::kCuda},
                                            {.dtype = kernels::DType::kBF16});
  ASSERT_TRUE(backend.ok()) << backend.status();
  kernels::Backend& be = **backend;
  const kernels::KvCacheShape shape{.num_layers = 3,
                                    .num_blocks = 6,
                                    .block_size = 16,
                                    .num_kv_heads = 2,
                                    .head_dim = 64,
                                    .dtype = kernels::DType::kBF16};
  kernels::KvCacheShape host_shape = shape;
  host_shape.num_blocks = 3;
  auto device_buffer = be.Allocate(shape.total_bytes());
  auto host_buffer = be.AllocateHost(host_shape.total_bytes());
  ASSERT_TRUE(device_buffer.ok());
  ASSERT_TRUE(host_buffer.ok());
  std::vector<unsigned char> pattern(shape.total_bytes());
  for (size_t i = 0; i < pattern.size(); ++i) {
    pattern[i] = static_cast<unsigned char>((i * 2654435761u) >> 13);
  }
  ASSERT_TRUE(be.CopyToDevice(device_buffer->data(), pattern.data(), pattern.size()).ok());
  std::memset(host_buffer->data(), 0, host_shape.total_bytes());
  const kernels::PagedKvCache cache{device_buffer->data(), shape};
  const kernels::PagedKvCache host{host_buffer->data(), host_shape};
  const std::vector<char> b1 = BlockBytes(be, cache, 1, false),
                          b2 = BlockBytes(be, cache, 2, false),
                          b4 = BlockBytes(be, cache, 4, false);
  ASSERT_NE(b1, b2);
  const std::vector<BlockCopy> copies = {{1, 0, CopyKind::kToHost},   {2, 1, CopyKind::kToHost},
                                         {4, 2, CopyKind::kToHost},   {1, 5, CopyKind::kFromHost},
                                         {0, 0, CopyKind::kFromHost}, {5, 3, CopyKind::kDevice}};
  ASSERT_TRUE(CopyKvBlocks(be, cache, host, copies).ok());
  ASSERT_TRUE(be.Synchronize().ok());
  EXPECT_EQ(BlockBytes(be, host, 0, true), b1);
  EXPECT_EQ(BlockBytes(be, host, 1, true), b2);
  EXPECT_EQ(BlockBytes(be, host, 2, true), b4);
  EXPECT_EQ(BlockBytes(be, cache, 5, false), b2);
  EXPECT_EQ(BlockBytes(be, cache, 0, false), b1);
  EXPECT_EQ(BlockBytes(be, cache, 3, false), b2);
}

TEST(CudaSwapTest, AnEngineUnderPressureSwapsOutAndBackInAndFinishesEveryRequest) {
  PAGODA_SKIP_WITHOUT_CUDA();
  auto file = gguf::GgufFile::Open(testing::ModelPath("stories260K.gguf"));
  ASSERT_TRUE(file.ok()) << file.status();
  auto backend = kernels::CreateCudaBackend({.device = kernels::DeviceKind::kCuda},
                                            {.dtype = kernels::DType::kF32});
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto engine = Engine::Create({.block_size = 4,
                                .num_blocks = 40,
                                .preemption_mode = PreemptionMode::kSwap,
                                .swap_space = int64_t{1} << 20},
                               *std::move(file), *std::move(backend));
  ASSERT_TRUE(engine.ok()) << engine.status();
  (*engine)->Start();
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 24; ++i) {
    requests.push_back(testing::GreedyRequest({1, 403 + i, 407, 261}, 40 + (i % 4) * 8));
  }
  const std::vector<CollectedOutput> outs = testing::RunAll(**engine, requests);
  ASSERT_EQ(outs.size(), requests.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    EXPECT_EQ(outs[i].token_ids.size(), static_cast<size_t>(*requests[i].max_tokens)) << i;
    EXPECT_EQ(outs[i].finish_reason, FinishReason::kLength) << i;
  }
  EXPECT_TRUE(testing::WaitForIdle(**engine));
  const EngineStats s = (*engine)->Stats();
  EXPECT_GT(s.num_swap_outs, 0);
  EXPECT_EQ(s.num_swap_ins, s.num_swap_outs);
  EXPECT_EQ(s.num_free_blocks, s.num_blocks);
  EXPECT_EQ(s.num_free_swap_blocks, s.num_swap_blocks);
}

}  // namespace
}  // namespace pagoda::engine
