// Swap preemption on the CUDA backend (skipped without a device): block copies between the
// cache and page-locked host memory, byte-exact; an engine under memory pressure that
// swaps sequences out and back in and finishes every request with the pool and the swap
// space full again; and the tokens of swapped runs against an unpreempted run of the same
// requests:
//  - f32 activations (CUDA cores, contexts under the 128 tokens where split-KV starts, so
//    no reduction order depends on the batch) over f32 and fp8 e4m3 caches, with and
//    without a shared prompt prefix (prefix-cache hits on swapped blocks): the swapped
//    run's tokens equal the unpreempted run's exactly.
//  - bf16 on a random head_dim-64 model (tensor-core attention asserted): teacher-forced.
//    Where the swapped run's token differs from the unpreempted run's, it must be a near
//    tie of the unpreempted run's distribution (within kBf16TieNats of its top logprob),
//    at most 1 step in 8; the unpreempted engine then continues from the swapped run's
//    tokens, so one near tie does not derail the rest of the comparison.
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/collecting_sink.h"
#include "engine/engine.h"
#include "engine/kv_block_copy.h"
#include "engine/request.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "model/gguf.h"
#include "model/make_model.h"
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
  // Coalesced: out, runs {1, 2} and {4}; in, {1 -> 5} and {0 -> 0}; each run one range per
  // layer, K and V (2 x 3 x 2 = 12), and each direction one batch.
  const auto counts = kernels::CudaHostCopies(&be);
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->batches, 2);
  EXPECT_EQ(counts->copies, 24);
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

// An engine on `file` over a CUDA backend of `dtype`; `backend_out` (when set) receives the
// backend, which the engine owns.
std::unique_ptr<Engine> CudaEngine(std::unique_ptr<gguf::GgufFile> file, kernels::DType dtype,
                                   const EngineConfig& config,
                                   kernels::Backend** backend_out = nullptr) {
  auto backend =
      kernels::CreateCudaBackend({.device = kernels::DeviceKind::kCuda}, {.dtype = dtype});
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return nullptr;
  if (backend_out != nullptr) *backend_out = backend->get();
  auto engine = Engine::Create(config, std::move(file), *std::move(backend));
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return nullptr;
  (*engine)->Start();
  return *std::move(engine);
}

std::unique_ptr<gguf::GgufFile> Stories() {
  auto file = gguf::GgufFile::Open(testing::ModelPath("stories260K.gguf"));
  EXPECT_TRUE(file.ok()) << file.status();
  return file.ok() ? *std::move(file) : nullptr;
}

// The unpreempted run's top logprobs at a differing step, for the failure message.
std::string DescribeStep(const TokenLogprob& lp) {
  std::string out = absl::StrCat("chosen ", lp.token_id, " (", lp.logprob, "); top:");
  for (const auto& [id, value] : lp.top) absl::StrAppend(&out, " ", id, " (", value, ")");
  return out;
}

struct ExactSwapCase {
  std::string name;
  std::string kv_cache_dtype;  // engine kv_cache_dtype over f32 activations
  bool shared_prefix;          // every prompt starts with the same two blocks
};

class CudaSwapExactTest : public ::testing::TestWithParam<ExactSwapCase> {};

// 24 requests in a pool of 40 four-token blocks (they need about 500): the swapped run's
// tokens equal an unpreempted run's (a pool of 1024 blocks) exactly.
TEST_P(CudaSwapExactTest, SwappedRunEqualsAnUnpreemptedRun) {
  PAGODA_SKIP_WITHOUT_CUDA();
  const ExactSwapCase& c = GetParam();
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 24; ++i) {
    std::vector<int32_t> prompt = {1, 403 + i, 407, 261};
    if (c.shared_prefix) prompt = {1, 403, 407, 261, 298, 350, 282, 289, 410 + i, 300 + i};
    GenerationRequest r = testing::GreedyRequest(prompt, 40 + (i % 4) * 8);
    r.sampling.logprobs = 2;  // for the message when a token differs
    requests.push_back(std::move(r));
  }
  EngineConfig config{.block_size = 4,
                      .num_blocks = 1024,
                      .kv_cache_dtype = c.kv_cache_dtype,
                      .preemption_mode = PreemptionMode::kSwap,
                      .swap_space = int64_t{1} << 20};
  auto alone = CudaEngine(Stories(), kernels::DType::kF32, config);
  ASSERT_NE(alone, nullptr);
  const std::vector<CollectedOutput> want = testing::RunAll(*alone, requests);
  EXPECT_EQ(alone->Stats().num_preemptions, 0);

  config.num_blocks = 40;
  kernels::Backend* backend = nullptr;
  auto swapped = CudaEngine(Stories(), kernels::DType::kF32, config, &backend);
  ASSERT_NE(swapped, nullptr);
  const std::vector<CollectedOutput> got = testing::RunAll(*swapped, requests);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(want[i].token_ids.size(), static_cast<size_t>(*requests[i].max_tokens)) << i;
    EXPECT_EQ(got[i].finish_reason, FinishReason::kLength) << i;
    if (got[i].token_ids == want[i].token_ids) continue;
    size_t at = 0;
    while (at < got[i].token_ids.size() && got[i].token_ids[at] == want[i].token_ids[at]) ++at;
    ADD_FAILURE() << "request " << i << ": the swapped run's tokens differ from step " << at
                  << (at < want[i].logprobs.size()
                          ? absl::StrCat("; unpreempted run there: ",
                                         DescribeStep(want[i].logprobs[at]))
                          : "");
  }
  EXPECT_TRUE(testing::WaitForIdle(*swapped));
  const EngineStats s = swapped->Stats();
  EXPECT_GT(s.num_swap_outs, 0);
  EXPECT_EQ(s.num_swap_ins, s.num_swap_outs);
  EXPECT_EQ(s.num_free_swap_blocks, s.num_swap_blocks);
  if (c.shared_prefix) {
    EXPECT_GT(s.prefix_cache_hits, 0);
  }
  const auto trace = kernels::CudaLastAttention(backend);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_FALSE(trace->tensor_core);
  EXPECT_EQ(trace->split_tokens, 0);
}

INSTANTIATE_TEST_SUITE_P(Caches, CudaSwapExactTest,
                         ::testing::Values(ExactSwapCase{"f32", "f32", false},
                                           ExactSwapCase{"f32_prefix", "f32", true},
                                           ExactSwapCase{"fp8", "fp8", false},
                                           ExactSwapCase{"fp8_prefix", "fp8", true}),
                         [](const auto& info) { return info.param.name; });

// How far (in nats) below the unpreempted run's top logprob a differing bf16 token may lie:
// bf16 keeps 8 significant bits and the two runs batch differently, so logits of the small
// random model differ by a few hundredths; a corrupted swap moves them by far more.
constexpr double kBf16TieNats = 0.25;

// 16 requests of 20-token prompts and 48 outputs in 24 blocks of 16 tokens (they need 80),
// bf16 on a random model with head_dim 64 (GQA 2:1): teacher-forced against the unpreempted
// engine (see the top of the file).
TEST(CudaSwapTest, Bf16SwappedRunTracksAnUnpreemptedRunTeacherForced) {
  PAGODA_SKIP_WITHOUT_CUDA();
  const model::ModelPreset preset{"hd64", 512, 256,  2,     4,
                                  2,      512, 2048, false, "head_dim 64, GQA 2:1"};
  auto make_file = [&preset]() -> std::unique_ptr<gguf::GgufFile> {
    auto writer = model::MakeModel(preset, 7, gguf::TensorType::kBF16);
    EXPECT_TRUE(writer.ok()) << writer.status();
    if (!writer.ok()) return nullptr;
    auto file = gguf::GgufFile::FromBytes(writer->Serialize());
    EXPECT_TRUE(file.ok()) << file.status();
    return file.ok() ? *std::move(file) : nullptr;
  };
  constexpr int32_t kOutput = 48;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> id(3, preset.vocab_size - 1);
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 16; ++i) {
    std::vector<int32_t> prompt = {1};
    while (prompt.size() < 20) prompt.push_back(id(rng));
    requests.push_back(testing::GreedyRequest(prompt, kOutput));
  }
  EngineConfig config{.block_size = 16,
                      .num_blocks = 24,
                      .preemption_mode = PreemptionMode::kSwap,
                      .swap_space = int64_t{8} << 20};
  kernels::Backend* backend = nullptr;
  auto swapped = CudaEngine(make_file(), kernels::DType::kBF16, config, &backend);
  ASSERT_NE(swapped, nullptr);
  const std::vector<CollectedOutput> got = testing::RunAll(*swapped, requests);
  EXPECT_TRUE(testing::WaitForIdle(*swapped));
  const EngineStats s = swapped->Stats();
  EXPECT_GT(s.num_swap_outs, 0);
  EXPECT_EQ(s.num_swap_ins, s.num_swap_outs);
  const auto trace = kernels::CudaLastAttention(backend);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_TRUE(trace->tensor_core);

  config.num_blocks = 256;
  auto alone = CudaEngine(make_file(), kernels::DType::kBF16, config);
  ASSERT_NE(alone, nullptr);
  int32_t differing = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const std::vector<int32_t>& tokens = got[i].token_ids;
    ASSERT_EQ(tokens.size(), static_cast<size_t>(kOutput)) << i;
    // The unpreempted engine from the prompt plus the swapped run's first `at` tokens.
    size_t at = 0;
    while (at < tokens.size()) {
      GenerationRequest r = requests[i];
      r.prompt_token_ids.insert(r.prompt_token_ids.end(), tokens.begin(), tokens.begin() + at);
      r.max_tokens = static_cast<int32_t>(tokens.size() - at);
      r.sampling.logprobs = 5;
      const CollectedOutput want = testing::RunOne(*alone, r);
      ASSERT_EQ(want.token_ids.size(), tokens.size() - at) << i;
      ASSERT_EQ(want.logprobs.size(), want.token_ids.size()) << i;
      size_t j = 0;
      while (j < want.token_ids.size() && want.token_ids[j] == tokens[at + j]) ++j;
      if (j == want.token_ids.size()) break;
      ++differing;
      const TokenLogprob& lp = want.logprobs[j];
      ASSERT_FALSE(lp.top.empty()) << i;
      double chosen = -INFINITY;
      for (const auto& [token, value] : lp.top) {
        if (token == tokens[at + j]) chosen = value;
      }
      EXPECT_LE(lp.top.front().second - chosen, kBf16TieNats)
          << "request " << i << " step " << at + j << ": the swapped run chose " << tokens[at + j]
          << "; unpreempted run: " << DescribeStep(lp);
      at += j + 1;
    }
  }
  EXPECT_LE(differing, static_cast<int32_t>(got.size()) * kOutput / 8);
}

}  // namespace
}  // namespace pagoda::engine
