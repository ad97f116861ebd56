// End to end on CUDA: greedy decoding of stories260K and its RoPE / qwen2 variants in fp32
// reproduces the golden token ids (llama.cpp's), prefill then one token per step through a
// shuffled block table; a bf16 run must produce in-vocabulary tokens; every quantized weight
// type gives the CPU's logits on the dequantized weights, in f32 within 1e-3 and through the
// bf16 expansion within 5%. Skips without a device.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/llama_model.h"
#include "nlohmann/json.hpp"
#include "tests/cuda_test_util.h"
#include "tests/test_util.h"

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

// Greedy continuation of `prompt` for `steps` tokens on `model`'s backend.
std::vector<int32_t> Greedy(LlamaModel& model, const std::vector<int32_t>& prompt, int32_t steps) {
  const LlamaConfig& c = model.config();
  kernels::Backend& be = *model.backend();
  constexpr int32_t kBlock = 16;
  const int32_t total = static_cast<int32_t>(prompt.size()) + steps;
  const int32_t blocks = (total + kBlock - 1) / kBlock;
  const KvCacheShape shape{.num_layers = c.num_layers,
                           .num_blocks = blocks + 2,
                           .block_size = kBlock,
                           .num_kv_heads = c.num_kv_heads,
                           .head_dim = c.head_dim,
                           .dtype = OracleKvDtype(be)};
  auto memory = be.Allocate(shape.total_bytes());
  EXPECT_TRUE(memory.ok());
  if (!memory.ok()) return {};
  const PagedKvCache cache{memory->data(), shape};
  std::vector<int32_t> table(shape.num_blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(3));

  std::vector<int32_t> out;
  std::vector<int32_t> feed = prompt;
  int32_t pos = 0;
  std::vector<float> logits(c.vocab_size);
  for (int32_t step = 0; step < steps; ++step) {
    BatchInput b;
    for (int32_t id : feed) {
      b.token_ids.push_back(id);
      b.positions.push_back(pos);
      b.slot_mapping.push_back(table[pos / kBlock] * kBlock + pos % kBlock);
      ++pos;
    }
    b.query_start_loc = {0, b.num_tokens()};
    b.seq_lens = {pos};
    b.block_tables = table;
    b.max_blocks_per_seq = shape.num_blocks;
    b.logits_indices = {b.num_tokens() - 1};
    const absl::Status st = model.Forward(b, cache, logits.data());
    EXPECT_TRUE(st.ok()) << st;
    if (!st.ok()) return out;
    const int32_t next =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(next);
    feed = {next};
  }
  return out;
}

class CudaModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PAGODA_SKIP_WITHOUT_CUDA();
    auto file = gguf::GgufFile::Open(pagoda::testing::ModelPath("stories260K.gguf"));
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = std::move(*file);
    golden_ = nlohmann::json::parse(
        pagoda::testing::ReadFileOrDie(pagoda::testing::ModelPath("stories260K.golden.json")));
  }
  std::unique_ptr<LlamaModel> Load(kernels::DType dtype) {
    auto backend =
        kernels::CreateCudaBackend({.device = kernels::DeviceKind::kCuda}, {.dtype = dtype});
    EXPECT_TRUE(backend.ok()) << backend.status();
    if (!backend.ok()) return nullptr;
    backend_ = std::move(*backend);
    auto model = LlamaModel::Load(*file_, backend_.get());
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? std::move(*model) : nullptr;
  }

  std::unique_ptr<gguf::GgufFile> file_;
  nlohmann::json golden_;
  std::unique_ptr<kernels::Backend> backend_;
};

TEST_F(CudaModelTest, GreedyF32MatchesGolden) {
  std::unique_ptr<LlamaModel> model = Load(kernels::DType::kF32);
  ASSERT_NE(model, nullptr);
  for (const auto& c : golden_["cases"]) {
    const auto prompt = c["prompt_token_ids"].get<std::vector<int32_t>>();
    const auto want = c["output_token_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(Greedy(*model, prompt, static_cast<int32_t>(want.size())), want)
        << "prompt: " << c["prompt"];
  }
}

TEST_F(CudaModelTest, GreedyBf16StaysInVocabulary) {
  std::unique_ptr<LlamaModel> model = Load(kernels::DType::kBF16);
  ASSERT_NE(model, nullptr);
  const auto& c = golden_["cases"][0];
  const auto prompt = c["prompt_token_ids"].get<std::vector<int32_t>>();
  const std::vector<int32_t> got = Greedy(*model, prompt, 32);
  ASSERT_EQ(got.size(), 32u);
  for (int32_t id : got) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, model->config().vocab_size);
  }
}

// The stories260K variants (rope_freqs, qwen2 with biases, linear and YaRN scaling) in
// fp32 reproduce llama.cpp's greedy tokens on CUDA too.
class CudaVariantTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaVariantTest, GreedyF32MatchesGolden) {
  PAGODA_SKIP_WITHOUT_CUDA();
  auto file = gguf::GgufFile::Open(pagoda::testing::ModelPath(GetParam() + ".gguf"));
  ASSERT_TRUE(file.ok()) << file.status();
  const auto golden = nlohmann::json::parse(
      pagoda::testing::ReadFileOrDie(pagoda::testing::ModelPath(GetParam() + ".golden.json")));
  auto backend = kernels::CreateCudaBackend({.device = kernels::DeviceKind::kCuda},
                                            {.dtype = kernels::DType::kF32});
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto model = LlamaModel::Load(**file, backend->get());
  ASSERT_TRUE(model.ok()) << model.status();
  for (const auto& c : golden["cases"]) {
    const auto prompt = c["prompt_token_ids"].get<std::vector<int32_t>>();
    // The ids of llama.cpp's plain attention path where its CPU flash attention differs
    // (see model_golden_test.cc).
    auto want = c.value("output_token_ids_flash_attn_off",
                        c["output_token_ids"].get<std::vector<int32_t>>());
    std::vector<int32_t> got = Greedy(**model, prompt, static_cast<int32_t>(want.size()));
    EXPECT_EQ(got, want) << "prompt of " << prompt.size() << " tokens";
  }
}

INSTANTIATE_TEST_SUITE_P(Stories260KVariants, CudaVariantTest,
                         ::testing::Values("stories260K-rope-freqs", "stories260K-qwen2",
                                           "stories260K-linear", "stories260K-yarn"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param.substr(info.param.find('-') + 1);
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

// An F32 image of `file` with every tensor dequantized on the host: what the CUDA backend
// computes from when it expands quantized weights at load.
std::unique_ptr<gguf::GgufFile> DequantizedCopy(const gguf::GgufFile& file) {
  gguf::GgufWriter w;
  for (const auto& [key, value] : file.metadata()) {
    if (key != "general.alignment") w.AddValue(key, value);
  }
  for (const gguf::TensorInfo& t : file.tensors()) {
    std::vector<float> values(t.num_elements());
    EXPECT_TRUE(gguf::DequantizeToF32(t, absl::MakeSpan(values)).ok()) << t.name;
    std::vector<uint8_t> bytes(values.size() * sizeof(float));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    w.AddTensor(t.name, t.dims, gguf::TensorType::kF32, std::move(bytes));
  }
  auto copy = gguf::GgufFile::FromBytes(w.Serialize());
  EXPECT_TRUE(copy.ok()) << copy.status();
  return copy.ok() ? std::move(*copy) : nullptr;
}

// Logits of the last of `prompt`'s tokens after one prefill on `model`.
std::vector<float> LastLogits(LlamaModel& model, const std::vector<int32_t>& prompt) {
  const LlamaConfig& c = model.config();
  kernels::Backend& be = *model.backend();
  constexpr int32_t kBlock = 16;
  const int32_t n = static_cast<int32_t>(prompt.size());
  const KvCacheShape shape{.num_layers = c.num_layers,
                           .num_blocks = (n + kBlock - 1) / kBlock,
                           .block_size = kBlock,
                           .num_kv_heads = c.num_kv_heads,
                           .head_dim = c.head_dim,
                           .dtype = OracleKvDtype(be)};
  auto memory = be.Allocate(shape.total_bytes());
  EXPECT_TRUE(memory.ok());
  if (!memory.ok()) return {};
  BatchInput b;
  b.token_ids = prompt;
  for (int32_t i = 0; i < n; ++i) {
    b.positions.push_back(i);
    b.slot_mapping.push_back(i);
  }
  b.query_start_loc = {0, n};
  b.seq_lens = {n};
  for (int32_t i = 0; i < shape.num_blocks; ++i) b.block_tables.push_back(i);
  b.max_blocks_per_seq = shape.num_blocks;
  b.logits_indices = {n - 1};
  std::vector<float> logits(c.vocab_size);
  const absl::Status st = model.Forward(b, PagedKvCache{memory->data(), shape}, logits.data());
  EXPECT_TRUE(st.ok()) << st;
  return logits;
}

// Every weight type on CUDA (expanded at load) against the CPU oracle on the same weights
// dequantized: llama-quantize's --pure files of tests/data/quant_ref_models.tar.xz, f32.
class CudaQuantizedTest : public ::testing::TestWithParam<std::string> {};

// The last prompt token's logits of the quantized file on CUDA with `dtype` and of its
// dequantized copy on the CPU: {got, want}.
std::pair<std::vector<float>, std::vector<float>> QuantizedLogits(const std::string& type,
                                                                  kernels::DType dtype) {
  auto file = gguf::GgufFile::Open(pagoda::testing::ModelPath("quant_ref/qref-" + type + ".gguf"));
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return {};
  std::unique_ptr<gguf::GgufFile> f32 = DequantizedCopy(**file);
  auto cpu = kernels::CreateBackend({.device = kernels::DeviceKind::kCpu, .num_threads = 2});
  auto cuda = kernels::CreateCudaBackend({.device = kernels::DeviceKind::kCuda}, {.dtype = dtype});
  EXPECT_TRUE(f32 != nullptr && cpu.ok() && cuda.ok());
  if (f32 == nullptr || !cpu.ok() || !cuda.ok()) return {};
  auto cpu_model = LlamaModel::Load(*f32, cpu->get());
  auto cuda_model = LlamaModel::Load(**file, cuda->get());
  EXPECT_TRUE(cpu_model.ok()) << cpu_model.status();
  EXPECT_TRUE(cuda_model.ok()) << cuda_model.status();
  if (!cpu_model.ok() || !cuda_model.ok()) return {};
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 9, 77, 300, 12, 5, 411, 260, 2};
  return {LastLogits(**cuda_model, prompt), LastLogits(**cpu_model, prompt)};
}

TEST_P(CudaQuantizedTest, LogitsMatchCpuOnDequantizedWeights) {
  PAGODA_SKIP_WITHOUT_CUDA();
  const auto [got, want] = QuantizedLogits(GetParam(), kernels::DType::kF32);
  ASSERT_FALSE(want.empty());
  ASSERT_EQ(got.size(), want.size());
  float scale = 1.f;
  for (float v : want) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-3f * scale) << GetParam() << " logit " << i;
  }
}

// Through the bf16 expansion (the CUDA default): weights dequantized then rounded to bf16,
// bf16 activations and KV; within 5% of (|logit| + rms), bf16's 2^-9 rounding on every
// weight and on the activations of five layers.
TEST_P(CudaQuantizedTest, Bf16LogitsTrackCpuOnDequantizedWeights) {
  PAGODA_SKIP_WITHOUT_CUDA();
  const auto [got, want] = QuantizedLogits(GetParam(), kernels::DType::kBF16);
  ASSERT_FALSE(want.empty());
  pagoda::testing::ExpectAllClose(got, want, 5e-2, GetParam() + " bf16 logits");
}

INSTANTIATE_TEST_SUITE_P(WeightTypes, CudaQuantizedTest,
                         ::testing::Values("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K",
                                           "Q4_K", "Q5_K", "Q6_K"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace pagoda::model
