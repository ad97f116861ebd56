#include "tests/seq_batch.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace pagoda::testing {

SeqBatch::SeqBatch(model::LlamaModel* model, int32_t num_seqs, kernels::DType kv)
    : model_(model), pos_(num_seqs, 0) {
  const model::LlamaConfig& c = model->config();
  shape_ = {.num_layers = c.num_layers,
            .num_blocks = num_seqs * kBlocksPerSeq,
            .block_size = kBlock,
            .num_kv_heads = c.num_kv_heads,
            .head_dim = c.head_dim,
            .dtype = kv};
  auto memory = model->backend()->Allocate(shape_.total_bytes());
  EXPECT_TRUE(memory.ok()) << memory.status();
  if (!memory.ok()) return;
  memory_ = std::move(*memory);
  EXPECT_TRUE(model->backend()->Zero(memory_.data(), shape_.total_bytes()).ok());
}

std::vector<std::vector<float>> SeqBatch::Feed(const std::vector<int32_t>& seqs,
                                               const std::vector<std::vector<int32_t>>& tokens) {
  kernels::BatchInput b;
  b.max_blocks_per_seq = kBlocksPerSeq;
  b.query_start_loc = {0};
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int32_t s = seqs[i];
    for (int32_t id : tokens[i]) {
      b.token_ids.push_back(id);
      b.positions.push_back(pos_[s]);
      b.slot_mapping.push_back((s * kBlocksPerSeq + pos_[s] / kBlock) * kBlock + pos_[s] % kBlock);
      ++pos_[s];
    }
    b.query_start_loc.push_back(b.num_tokens());
    b.seq_lens.push_back(pos_[s]);
    for (int32_t j = 0; j < kBlocksPerSeq; ++j) b.block_tables.push_back(s * kBlocksPerSeq + j);
    b.logits_indices.push_back(b.num_tokens() - 1);
  }
  const int32_t vocab = model_->config().vocab_size;
  std::vector<float> flat(static_cast<size_t>(vocab) * seqs.size());
  const absl::Status st = model_->Forward(b, {memory_.data(), shape_}, flat.data());
  EXPECT_TRUE(st.ok()) << st;
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < seqs.size(); ++i) {
    out.emplace_back(flat.begin() + i * vocab, flat.begin() + (i + 1) * vocab);
  }
  return out;
}

std::vector<char> SeqBatch::CacheBytes() {
  std::vector<char> bytes(shape_.total_bytes());
  EXPECT_TRUE(model_->backend()->CopyToHost(bytes.data(), memory_.data(), bytes.size()).ok());
  return bytes;
}

int32_t ArgmaxOf(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace pagoda::testing
