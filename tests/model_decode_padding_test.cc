// Decode steps padded for a backend that records them (kernels/batch.h PadDecodeBatch,
// Backend::RecordableBatchSize; CUDA graphs use it to share one graph between nearby batch
// sizes). On the CPU backend, wrapped so that it asks for padding: the padded steps give
// bit for bit the logits and the KV cache of unpadded ones, so the added rows neither
// write anything nor reach a real row.
#include <algorithm>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/batch.h"
#include "model/gguf.h"
#include "model/llama_model.h"
#include "model/make_model.h"
#include "tests/seq_batch.h"

namespace pagoda::model {
namespace {

using kernels::BatchInput;
using kernels::Tensor;

TEST(PadDecodeBatchTest, AddsSequencesThatWriteNothingAfterTheRealOnes) {
  BatchInput b;
  b.token_ids = {7, 9};
  b.positions = {4, 20};
  b.slot_mapping = {36, 84};
  b.query_start_loc = {0, 1, 2};
  b.seq_lens = {5, 21};
  b.block_tables = {2, 0, 3, 5};
  b.max_blocks_per_seq = 2;
  b.logits_indices = {0, 1};
  ASSERT_TRUE(kernels::IsPlainDecode(b));
  BatchInput p;
  kernels::PadDecodeBatch(b, 4, &p);
  EXPECT_EQ(p.token_ids, (std::vector<int32_t>{7, 9, 0, 0}));
  EXPECT_EQ(p.positions, (std::vector<int32_t>{4, 20, 0, 0}));
  EXPECT_EQ(p.slot_mapping, (std::vector<int32_t>{36, 84, -1, -1}));
  EXPECT_EQ(p.query_start_loc, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(p.seq_lens, (std::vector<int32_t>{5, 21, 1, 1}));
  EXPECT_EQ(p.block_tables, (std::vector<int32_t>{2, 0, 3, 5, 0, 0, 0, 0}));
  EXPECT_EQ(p.max_blocks_per_seq, 2);
  EXPECT_EQ(p.logits_indices, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_TRUE(kernels::IsPlainDecode(p));
  kernels::PadDecodeBatch(b, 2, &p);  // nothing to add
  EXPECT_EQ(p.token_ids, b.token_ids);
  EXPECT_EQ(p.logits_indices, b.logits_indices);

  // Not plain decode steps: a prefill chunk, a token without logits, logits out of order.
  BatchInput prefill = b;
  prefill.token_ids.push_back(1);
  prefill.positions.push_back(21);
  prefill.slot_mapping.push_back(85);
  prefill.query_start_loc.back() = 3;
  prefill.seq_lens.back() = 22;
  prefill.logits_indices = {0, 2};
  EXPECT_FALSE(kernels::IsPlainDecode(prefill));
  BatchInput no_logits = b;
  no_logits.logits_indices = {1};
  EXPECT_FALSE(kernels::IsPlainDecode(no_logits));
  BatchInput swapped = b;
  swapped.logits_indices = {1, 0};
  EXPECT_FALSE(kernels::IsPlainDecode(swapped));
}

// The CPU backend, asking for decode steps padded to a multiple of 8 sequences and
// remembering the largest batch it was given.
class PaddingBackend final : public kernels::Backend {
 public:
  explicit PaddingBackend(std::unique_ptr<kernels::Backend> inner) : inner_(std::move(inner)) {}

  int32_t largest_batch() const { return largest_batch_; }

  int32_t RecordableBatchSize(int32_t num_seqs) const override { return (num_seqs + 7) / 8 * 8; }
  absl::Status PrepareBatch(const BatchInput& batch) override {
    largest_batch_ = std::max(largest_batch_, batch.num_seqs());
    return inner_->PrepareBatch(batch);
  }

  std::string name() const override { return inner_->name(); }
  kernels::DType activation_dtype() const override { return inner_->activation_dtype(); }
  kernels::DType kv_dtype() const override { return inner_->kv_dtype(); }
  bool SupportsKvDtype(kernels::DType d) const override { return inner_->SupportsKvDtype(d); }
  absl::StatusOr<kernels::DeviceBuffer> Allocate(size_t bytes) override {
    return inner_->Allocate(bytes);
  }
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    return inner_->CopyToDevice(dst, src, bytes);
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    return inner_->CopyToHost(dst, src, bytes);
  }
  absl::Status Zero(void* dst, size_t bytes) override { return inner_->Zero(dst, bytes); }
  absl::StatusOr<kernels::OwnedTensor> CreateWeight(const float* host, int64_t rows,
                                                    int64_t cols) override {
    return inner_->CreateWeight(host, rows, cols);
  }
  absl::StatusOr<kernels::OwnedTensor> CreateWeightRaw(kernels::DType type, const void* data,
                                                       int64_t rows, int64_t cols) override {
    return inner_->CreateWeightRaw(type, data, rows, cols);
  }
  absl::Status PrepareMatMulWeight(kernels::OwnedTensor* weight) override {
    return inner_->PrepareMatMulWeight(weight);
  }
  absl::Status ReadF32(const Tensor& x, float* host) override { return inner_->ReadF32(x, host); }
  absl::Status Synchronize() override { return inner_->Synchronize(); }
  void Embed(const Tensor& table, const Tensor& out) override { inner_->Embed(table, out); }
  void RmsNorm(const Tensor& x, const Tensor& w, float eps, const Tensor& out) override {
    inner_->RmsNorm(x, w, eps, out);
  }
  void MatMul(const Tensor& x, const Tensor& w, const Tensor& out) override {
    inner_->MatMul(x, w, out);
  }
  void Rope(const Tensor& q, const Tensor& k, const kernels::RopeParams& params) override {
    inner_->Rope(q, k, params);
  }
  void SiluMul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
    inner_->SiluMul(gate, up, out);
  }
  void Add(const Tensor& x, const Tensor& y) override { inner_->Add(x, y); }
  void AddBias(const Tensor& x, const Tensor& bias) override { inner_->AddBias(x, bias); }
  void WriteKv(const Tensor& k, const Tensor& v, const kernels::PagedKvCache& cache,
               int32_t layer) override {
    inner_->WriteKv(k, v, cache, layer);
  }
  void Attention(const Tensor& q, const kernels::PagedKvCache& cache, int32_t layer,
                 const kernels::AttentionParams& params, const Tensor& out) override {
    inner_->Attention(q, cache, layer, params, out);
  }
  void GatherLogitRows(const Tensor& x, const Tensor& out) override {
    inner_->GatherLogitRows(x, out);
  }

 private:
  std::unique_ptr<kernels::Backend> inner_;
  int32_t largest_batch_ = 0;
};

using testing::ArgmaxOf;
using testing::SeqBatch;

TEST(ModelDecodePaddingTest, PaddedStepsGiveTheLogitsAndCacheOfUnpaddedOnes) {
  auto preset = FindPreset("tiny");
  ASSERT_TRUE(preset.ok());
  auto writer = MakeModel(*preset, 23, gguf::TensorType::kF32);
  ASSERT_TRUE(writer.ok()) << writer.status();
  auto file = gguf::GgufFile::FromBytes(writer->Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  auto plain_backend = kernels::CreateBackend({.device = kernels::DeviceKind::kCpu});
  auto inner = kernels::CreateBackend({.device = kernels::DeviceKind::kCpu});
  ASSERT_TRUE(plain_backend.ok() && inner.ok());
  PaddingBackend padding(std::move(*inner));
  auto plain = LlamaModel::Load(**file, plain_backend->get());
  auto padded = LlamaModel::Load(**file, &padding);
  ASSERT_TRUE(plain.ok() && padded.ok());

  SeqBatch a(plain->get(), 3, kernels::DType::kF32);
  SeqBatch b(padded->get(), 3, kernels::DType::kF32);
  // Prompts one sequence at a time (prefill chunks: never padded).
  const std::vector<std::vector<int32_t>> prompts = {{1, 40, 41, 42, 43}, {1, 7, 8}, {1, 300}};
  std::vector<int32_t> next(3);
  for (int32_t s = 0; s < 3; ++s) {
    const auto want = a.Feed({s}, {prompts[s]});
    ASSERT_EQ(b.Feed({s}, {prompts[s]}), want);
    next[s] = ArgmaxOf(want[0]);
  }
  EXPECT_EQ(padding.largest_batch(), 1);
  // Decode steps of all three sequences, and of two (0 and 2): padded to 8 on `padded`.
  for (int32_t step = 0; step < 12; ++step) {
    const std::vector<int32_t> seqs =
        step % 3 == 2 ? std::vector<int32_t>{0, 2} : std::vector<int32_t>{0, 1, 2};
    std::vector<std::vector<int32_t>> tokens;
    for (int32_t s : seqs) tokens.push_back({next[s]});
    const auto want = a.Feed(seqs, tokens);
    const auto got = b.Feed(seqs, tokens);
    ASSERT_EQ(got, want) << "step " << step;
    for (size_t i = 0; i < seqs.size(); ++i) next[seqs[i]] = ArgmaxOf(want[i]);
  }
  EXPECT_EQ(padding.largest_batch(), 8);
  EXPECT_EQ(b.CacheBytes(), a.CacheBytes());  // the added rows wrote nothing
}

}  // namespace
}  // namespace pagoda::model
