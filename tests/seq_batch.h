// Test helper: sequences decoded side by side on one model through LlamaModel::Forward, each
// in its own blocks of one KV cache, with the batch metadata the scheduler would send.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "model/llama_model.h"

namespace pagoda::testing {

class SeqBatch {
 public:
  static constexpr int32_t kBlock = 16;
  static constexpr int32_t kBlocksPerSeq = 3;  // contexts up to 48 tokens

  // `num_seqs` sequences; sequence s owns blocks [3s, 3s + 3) of a zeroed cache of `kv`.
  SeqBatch(model::LlamaModel* model, int32_t num_seqs, kernels::DType kv);

  // Feeds tokens[i] to sequence seqs[i] (several tokens: a prefill chunk), in one batch;
  // returns each sequence's logits of its last token (fails the test on an error).
  std::vector<std::vector<float>> Feed(const std::vector<int32_t>& seqs,
                                       const std::vector<std::vector<int32_t>>& tokens);
  // The whole cache, copied to the host.
  std::vector<char> CacheBytes();

 private:
  model::LlamaModel* model_;
  std::vector<int32_t> pos_;
  kernels::KvCacheShape shape_;
  kernels::DeviceBuffer memory_;
};

// Index of the largest element (the first on ties).
int32_t ArgmaxOf(const std::vector<float>& v);

}  // namespace pagoda::testing
