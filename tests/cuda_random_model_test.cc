// End to end on CUDA with models that reach the tensor-core attention kernels: random
// Llama models (model/make_model.h, built in the test) with head_dim 64 and 128 and GQA,
// greedy-decoded after a multi-token prefill through a shuffled block table, compared
// with the CPU backend on the same GGUF.
//  - f32: CUDA's exact path (fp32 GEMMs without TF32, CUDA-core attention) must produce
//    exactly the CPU's greedy tokens.
//  - bf16: activations, weights and the KV cache are bf16 on CUDA (tensor-core attention
//    and GEMMs, fp32 accumulation); the CPU runs the same bf16-stored weights with fp32
//    activations. Each step is teacher-forced with the CPU's token, so one near tie does
//    not derail the rest; logits must agree within 3% of (|logit| + rms(logits)): bf16
//    keeps 8 significant bits (relative rounding 2^-9 = 0.2%) and two layers round the
//    activations and K/V about ten times on the way, each product summing hundreds of
//    such errors with random signs. Where CUDA's argmax differs, the CPU's two candidates
//    must lie within that tolerance of each other (a near tie), and at most 1 step in 8.
// Skips without a device.
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "model/gguf.h"
#include "model/llama_model.h"
#include "model/make_model.h"
#include "tests/cuda_test_util.h"

namespace pagoda::model {
namespace {

// The backend's own KV type, but f32 on the CPU: the oracle keeps the exact float32 cache
// (the CPU default is f16).
kernels::DType OracleKvDtype(const kernels::Backend& be) {
  return be.name() == "cpu" ? kernels::DType::kF32 : be.kv_dtype();
}

using kernels::BatchInput;
using kernels::KvCacheShape;
using kernels::PagedKvCache;

constexpr int32_t kBlock = 16;
constexpr int32_t kSteps = 24;
constexpr double kBf16Tolerance = 3e-2;

// Two small random models, one per tensor-core head_dim, both with GQA.
ModelPreset Preset(int32_t head_dim) {
  if (head_dim == 64) {
    return {"hd64", 512, 256, 2, 4, 2, 512, 2048, false, "head_dim 64, GQA 2:1"};
  }
  return {"hd128", 512, 512, 2, 4, 1, 768, 2048, false, "head_dim 128, GQA 4:1"};
}

// A prompt of `n` in-vocabulary ids (BOS first).
std::vector<int32_t> Prompt(int32_t n, int32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(3, vocab - 1);
  std::vector<int32_t> p = {1};
  while (static_cast<int32_t>(p.size()) < n) p.push_back(id(rng));
  return p;
}

// One sequence decoded step by step on one model: the prompt as one prefill chunk, then one
// token per step, through a shuffled block table.
class Decoder {
 public:
  Decoder(LlamaModel* model, int32_t max_tokens) : model_(model) {
    const LlamaConfig& c = model->config();
    kernels::Backend& be = *model->backend();
    shape_ = {.num_layers = c.num_layers,
              .num_blocks = (max_tokens + kBlock - 1) / kBlock + 2,
              .block_size = kBlock,
              .num_kv_heads = c.num_kv_heads,
              .head_dim = c.head_dim,
              .dtype = OracleKvDtype(be)};
    auto memory = be.Allocate(shape_.total_bytes());
    EXPECT_TRUE(memory.ok()) << memory.status();
    if (memory.ok()) memory_ = std::move(*memory);
    table_.resize(shape_.num_blocks);
    std::iota(table_.begin(), table_.end(), 0);
    std::shuffle(table_.begin(), table_.end(), std::mt19937(5));
  }

  // Feeds `tokens` (positions continue from the last call); returns the last one's logits.
  std::vector<float> Feed(const std::vector<int32_t>& tokens) {
    BatchInput b;
    for (int32_t id : tokens) {
      b.token_ids.push_back(id);
      b.positions.push_back(pos_);
      b.slot_mapping.push_back(table_[pos_ / kBlock] * kBlock + pos_ % kBlock);
      ++pos_;
    }
    b.query_start_loc = {0, b.num_tokens()};
    b.seq_lens = {pos_};
    b.block_tables = table_;
    b.max_blocks_per_seq = shape_.num_blocks;
    b.logits_indices = {b.num_tokens() - 1};
    std::vector<float> logits(model_->config().vocab_size);
    const absl::Status st = model_->Forward(b, PagedKvCache{memory_.data(), shape_}, logits.data());
    EXPECT_TRUE(st.ok()) << st;
    return logits;
  }

 private:
  LlamaModel* model_;
  KvCacheShape shape_;
  kernels::DeviceBuffer memory_;
  std::vector<int32_t> table_;
  int32_t pos_ = 0;
};

int32_t Argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

double Rms(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += double{x} * x;
  return v.empty() ? 0 : std::sqrt(sum / v.size());
}

struct Loaded {
  std::unique_ptr<kernels::Backend> backend;
  std::unique_ptr<LlamaModel> model;
};

// `file` on the CPU backend, or on CUDA with `dtype`.
Loaded Load(const gguf::GgufFile& file, bool cuda, kernels::DType dtype) {
  Loaded l;
  auto backend =
      cuda ? kernels::CreateCudaBackend({.device = kernels::DeviceKind::kCuda}, {.dtype = dtype})
           : kernels::CreateBackend({.device = kernels::DeviceKind::kCpu, .num_threads = 2});
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return l;
  l.backend = std::move(*backend);
  auto model = LlamaModel::Load(file, l.backend.get());
  EXPECT_TRUE(model.ok()) << model.status();
  if (model.ok()) l.model = std::move(*model);
  return l;
}

std::unique_ptr<gguf::GgufFile> MakeFile(int32_t head_dim, gguf::TensorType type) {
  auto writer = MakeModel(Preset(head_dim), 17, type);
  EXPECT_TRUE(writer.ok()) << writer.status();
  if (!writer.ok()) return nullptr;
  auto file = gguf::GgufFile::FromBytes(writer->Serialize());
  EXPECT_TRUE(file.ok()) << file.status();
  return file.ok() ? std::move(*file) : nullptr;
}

class CudaRandomModelTest : public ::testing::TestWithParam<int32_t> {
 protected:
  void SetUp() override { PAGODA_SKIP_WITHOUT_CUDA(); }
};

TEST_P(CudaRandomModelTest, GreedyF32EqualsCpuTokens) {
  std::unique_ptr<gguf::GgufFile> file = MakeFile(GetParam(), gguf::TensorType::kF32);
  ASSERT_NE(file, nullptr);
  Loaded cpu = Load(*file, false, kernels::DType::kF32);
  Loaded cuda = Load(*file, true, kernels::DType::kF32);
  ASSERT_TRUE(cpu.model != nullptr && cuda.model != nullptr);
  for (int32_t prompt_len : {45, 7}) {
    const std::vector<int32_t> prompt = Prompt(prompt_len, 512, prompt_len);
    Decoder on_cpu(cpu.model.get(), prompt_len + kSteps);
    Decoder on_cuda(cuda.model.get(), prompt_len + kSteps);
    std::vector<int32_t> want = {Argmax(on_cpu.Feed(prompt))};
    std::vector<int32_t> got = {Argmax(on_cuda.Feed(prompt))};
    for (int32_t step = 1; step < kSteps; ++step) {
      want.push_back(Argmax(on_cpu.Feed({want.back()})));
      got.push_back(Argmax(on_cuda.Feed({got.back()})));
    }
    EXPECT_EQ(got, want) << "prompt of " << prompt_len << " tokens, head_dim " << GetParam();
  }
}

TEST_P(CudaRandomModelTest, GreedyBf16TracksCpuWithinTolerance) {
  std::unique_ptr<gguf::GgufFile> file = MakeFile(GetParam(), gguf::TensorType::kBF16);
  ASSERT_NE(file, nullptr);
  Loaded cpu = Load(*file, false, kernels::DType::kF32);
  Loaded cuda = Load(*file, true, kernels::DType::kBF16);
  ASSERT_TRUE(cpu.model != nullptr && cuda.model != nullptr);
  const std::vector<int32_t> prompt = Prompt(45, 512, 3);
  Decoder on_cpu(cpu.model.get(), 45 + kSteps);
  Decoder on_cuda(cuda.model.get(), 45 + kSteps);
  std::vector<float> want = on_cpu.Feed(prompt);
  std::vector<float> got = on_cuda.Feed(prompt);
  // The prefill took the tensor-core prefill kernel (64 / group tokens per tile).
  absl::StatusOr<kernels::CudaAttentionTrace> trace =
      kernels::CudaLastAttention(cuda.backend.get());
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_TRUE(trace->tensor_core);
  EXPECT_GT(trace->prefill_tiles, 0);
  int32_t flips = 0;
  for (int32_t step = 0; step < kSteps; ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step << ", head_dim " << GetParam());
    testing::ExpectAllClose(got, want, kBf16Tolerance, "bf16 logits");
    const int32_t w = Argmax(want);
    const int32_t g = Argmax(got);
    if (g != w) {
      ++flips;
      const double bound = kBf16Tolerance * (std::fabs(want[w]) + Rms(want));
      EXPECT_LE(want[w] - want[g], bound) << "token " << g << " instead of " << w;
    }
    if (step + 1 == kSteps) break;
    want = on_cpu.Feed({w});
    got = on_cuda.Feed({w});
    trace = kernels::CudaLastAttention(cuda.backend.get());
    ASSERT_TRUE(trace.ok());
    EXPECT_TRUE(trace->tensor_core);  // the decode steps take the tensor-core decode kernel
  }
  EXPECT_LE(flips, kSteps / 8);
}

// The premise of the comparisons above, checked on the CPU alone (runs without a device):
// both models load in f32 and bf16 and their greedy continuations vary, so equal token
// sequences on CUDA mean something.
TEST(RandomModelPremiseTest, CpuGreedyContinuationsVary) {
  for (int32_t head_dim : {64, 128}) {
    for (gguf::TensorType type : {gguf::TensorType::kF32, gguf::TensorType::kBF16}) {
      std::unique_ptr<gguf::GgufFile> file = MakeFile(head_dim, type);
      ASSERT_NE(file, nullptr);
      Loaded cpu = Load(*file, false, kernels::DType::kF32);
      ASSERT_NE(cpu.model, nullptr);
      EXPECT_EQ(cpu.model->config().head_dim, head_dim);
      Decoder decoder(cpu.model.get(), 45 + kSteps);
      std::vector<int32_t> tokens = {Argmax(decoder.Feed(Prompt(45, 512, 3)))};
      for (int32_t step = 1; step < kSteps; ++step) {
        tokens.push_back(Argmax(decoder.Feed({tokens.back()})));
      }
      std::sort(tokens.begin(), tokens.end());
      const auto distinct = std::unique(tokens.begin(), tokens.end()) - tokens.begin();
      EXPECT_GE(distinct, 4) << "head_dim " << head_dim;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(HeadDims, CudaRandomModelTest, ::testing::Values(64, 128),
                         [](const ::testing::TestParamInfo<int32_t>& info) {
                           return "head_dim" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace pagoda::model
