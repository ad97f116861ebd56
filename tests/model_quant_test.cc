// Quantized models end to end on the CPU backend: make-model writes every weight type and
// the model computes close to its F32 original; files that mix types within QKV or
// gate|up (llama-quantize's _M mixes) load as separate products; a quantized model's
// weights take about their file size in memory.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/quant/quantize.h"
#include "model/gguf_writer.h"
#include "model/llama_model.h"
#include "model/make_model.h"

namespace pagoda::model {
namespace {

using gguf::TensorType;

std::unique_ptr<kernels::Backend> Cpu() {
  return *kernels::CreateBackend({.device = kernels::DeviceKind::kCpu, .num_threads = 2});
}

// Logits of the last of `prompt`'s tokens after one prefill.
std::vector<float> PromptLogits(const gguf::GgufFile& file, const std::vector<int32_t>& prompt) {
  auto backend = Cpu();
  auto model = LlamaModel::Load(file, backend.get());
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  const LlamaConfig& c = (*model)->config();
  const kernels::KvCacheShape shape{.num_layers = c.num_layers,
                                    .num_blocks = 4,
                                    .block_size = 16,
                                    .num_kv_heads = c.num_kv_heads,
                                    .head_dim = c.head_dim,
                                    .dtype = backend->kv_dtype()};
  auto memory = backend->Allocate(shape.total_bytes());
  EXPECT_TRUE(memory.ok());
  const kernels::PagedKvCache cache{memory->data(), shape};
  kernels::BatchInput b;
  for (int32_t i = 0; i < static_cast<int32_t>(prompt.size()); ++i) {
    b.token_ids.push_back(prompt[i]);
    b.positions.push_back(i);
    b.slot_mapping.push_back(i);
  }
  b.query_start_loc = {0, b.num_tokens()};
  b.seq_lens = {b.num_tokens()};
  b.block_tables = {0, 1, 2, 3};
  b.max_blocks_per_seq = 4;
  b.logits_indices = {b.num_tokens() - 1};
  std::vector<float> logits(c.vocab_size);
  EXPECT_TRUE((*model)->Forward(b, cache, logits.data()).ok());
  return logits;
}

double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double{a[i]} * b[i];
    aa += double{a[i]} * a[i];
    bb += double{b[i]} * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

std::unique_ptr<gguf::GgufFile> Parse(const gguf::GgufWriter& w) {
  auto f = gguf::GgufFile::FromBytes(w.Serialize());
  EXPECT_TRUE(f.ok()) << f.status();
  return std::move(*f);
}

const std::vector<int32_t> kPrompt = {1, 300, 301, 302, 1000, 57, 99, 2000, 5, 444, 12};

TEST(ModelQuant, MakeModelEveryTypeTracksF32) {
  const ModelPreset p = *FindPreset("small");  // dim 256, ffn 704: K types keep ffn_down F32
  const std::vector<float> ref = PromptLogits(*Parse(*MakeModel(p, 0, TensorType::kF32)), kPrompt);
  const std::pair<TensorType, double> types[] = {
      {TensorType::kF16, 0.99999}, {TensorType::kBF16, 0.9999}, {TensorType::kQ8_0, 0.9995},
      {TensorType::kQ6_K, 0.999},  {TensorType::kQ5_0, 0.995},  {TensorType::kQ5_1, 0.995},
      {TensorType::kQ5_K, 0.995},  {TensorType::kQ4_0, 0.98},   {TensorType::kQ4_1, 0.98},
      {TensorType::kQ4_K, 0.98},   {TensorType::kQ3_K, 0.9},    {TensorType::kQ2_K, 0.8}};
  for (const auto& [type, min_cos] : types) {
    SCOPED_TRACE(std::string(gguf::TensorTypeName(type)));
    auto file = Parse(*MakeModel(p, 0, type));
    const bool k_type = kernels::DTypeBlockElems(gguf::ToDType(type)) == 256;
    EXPECT_EQ(file->FindTensor("blk.0.attn_q.weight")->type, type);
    EXPECT_EQ(file->FindTensor("blk.0.ffn_down.weight")->type, k_type ? TensorType::kF32 : type);
    EXPECT_EQ(file->FindTensor("blk.0.attn_norm.weight")->type,
              kernels::IsBlockType(gguf::ToDType(type)) ? TensorType::kF32 : type);
    const std::vector<float> got = PromptLogits(*file, kPrompt);
    ASSERT_EQ(got.size(), ref.size());
    const double cos = Cosine(got, ref);
    EXPECT_GT(cos, min_cos);
    EXPECT_LT(cos, 1.0 - 1e-9);  // it did compute with the quantized weights
  }
}

// `file` rewritten with each 2-D tensor re-encoded as type_of(name).
std::unique_ptr<gguf::GgufFile> Requantized(const gguf::GgufFile& file,
                                            const std::function<TensorType(std::string)>& type_of) {
  gguf::GgufWriter w;
  for (const auto& [key, value] : file.metadata()) w.AddValue(key, value);
  for (const gguf::TensorInfo& t : file.tensors()) {
    std::vector<float> x(t.num_elements());
    EXPECT_TRUE(gguf::DequantizeToF32(t, absl::MakeSpan(x)).ok());
    const TensorType type = t.dims.size() == 2 ? type_of(t.name) : TensorType::kF32;
    const kernels::DType dt = gguf::ToDType(type);
    const auto cols = static_cast<int64_t>(t.dims[0]);
    const size_t row_bytes = kernels::DTypeRowBytes(dt, cols);
    std::vector<uint8_t> bytes(row_bytes * (x.size() / cols));
    for (size_t r = 0; r < x.size() / cols; ++r) {
      kernels::quant::QuantizeRow(dt, x.data() + r * cols, bytes.data() + r * row_bytes, cols);
    }
    w.AddTensor(t.name, t.dims, type, std::move(bytes));
  }
  return Parse(w);
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Q4_K_M-style: Q4_K with attn_v and ffn_up in Q6_K, so QKV and gate|up mix types and run
// as separate products into their column slices. Against the uniform Q6_K/Q4_K files the
// mixed file's logits lie between in quality and close to F32.
TEST(ModelQuant, MixedTypesWithinFusedMatricesLoad) {
  const ModelPreset p = *FindPreset("small");
  auto f32 = Parse(*MakeModel(p, 0, TensorType::kF32));
  const std::vector<float> ref = PromptLogits(*f32, kPrompt);
  auto mixed = Requantized(*f32, [](const std::string& name) {
    if (EndsWith(name, "ffn_down.weight")) return TensorType::kQ8_0;  // 704 is not 256-aligned
    if (EndsWith(name, "attn_v.weight") || EndsWith(name, "ffn_up.weight")) {
      return TensorType::kQ6_K;
    }
    return TensorType::kQ4_K;
  });
  EXPECT_EQ(mixed->FindTensor("blk.1.attn_v.weight")->type, TensorType::kQ6_K);
  EXPECT_EQ(mixed->FindTensor("blk.1.attn_k.weight")->type, TensorType::kQ4_K);
  const std::vector<float> got = PromptLogits(*mixed, kPrompt);
  ASSERT_EQ(got.size(), ref.size());
  EXPECT_GT(Cosine(got, ref), 0.98);

  // Swapping which part is Q6_K changes the numbers (each part used its own type).
  auto swapped = Requantized(*f32, [](const std::string& name) {
    if (EndsWith(name, "ffn_down.weight")) return TensorType::kQ8_0;
    if (EndsWith(name, "attn_q.weight") || EndsWith(name, "ffn_gate.weight")) {
      return TensorType::kQ6_K;
    }
    return TensorType::kQ4_K;
  });
  const std::vector<float> other = PromptLogits(*swapped, kPrompt);
  EXPECT_GT(Cosine(other, ref), 0.98);
  EXPECT_NE(other, got);
}

int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * 4096;
}

// The 100m preset (~100M parameters, 400 MB as f32) in Q4_0 takes ~56 MB of weights; the
// CPU backend keeps them so (loading adds far less than an f32 copy would).
TEST(ModelQuant, QuantizedWeightsStayCompactInMemory) {
  const ModelPreset p = *FindPreset("100m");
  auto file = Parse(*MakeModel(p, 0, TensorType::kQ4_0));
  uint64_t file_weight_bytes = 0, params = 0;
  for (const gguf::TensorInfo& t : file->tensors()) {
    file_weight_bytes += t.nbytes;
    params += t.num_elements();
  }
  auto backend = Cpu();
  const int64_t before = ResidentBytes();
  auto model = LlamaModel::Load(*file, backend.get());
  ASSERT_TRUE(model.ok()) << model.status();
  const int64_t added = ResidentBytes() - before;
  EXPECT_LT(added, static_cast<int64_t>(file_weight_bytes) * 5 / 4 + (8 << 20));
  EXPECT_LT(added, static_cast<int64_t>(params) * 4 / 5);  // far below 4 bytes per weight
}

}  // namespace
}  // namespace pagoda::model
