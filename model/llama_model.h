// The Llama-family forward pass, written once against the kernels::Backend interface.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "model/gguf.h"
#include "model/llama_config.h"

namespace pagoda::model {

class LlamaModel {
 public:
  // Reads the config and every weight from `file` into `backend` memory (fused QKV and
  // gate|up matrices). InvalidArgument on a missing or mis-shaped tensor.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Load(const gguf::GgufFile& file,
                                                          kernels::Backend* backend);

  const LlamaConfig& config() const { return config_; }
  kernels::Backend* backend() const { return backend_; }

  // Runs one step over `batch`: writes the K/V of its tokens into `cache` and stores the
  // logits of the batch.logits_indices rows in `logits` [num_logits * vocab_size] (host).
  // InvalidArgument for token ids outside the vocabulary or malformed batch metadata.
  absl::Status Forward(const kernels::BatchInput& batch, const kernels::PagedKvCache& cache,
                       float* logits);

 private:
  // Weight matrices stacked by rows (Wq, Wk, Wv or Wgate, Wup) that one product computes
  // into adjacent output columns: one fused part when the file stores them in the same
  // type, else one part per matrix (llama-quantize's mixes, e.g. Q4_K with Q6_K).
  struct StackedWeight {
    std::vector<kernels::OwnedTensor> parts;
  };
  struct Layer {
    kernels::OwnedTensor attn_norm;  // [1, dim] f32
    StackedWeight wqkv;              // [q_dim + 2 * kv_dim, dim]: rows of Wq, Wk, Wv
    kernels::OwnedTensor wo;         // [dim, q_dim]
    kernels::OwnedTensor ffn_norm;   // [1, dim] f32
    StackedWeight w_gate_up;         // [2 * ffn_dim, dim]: rows of Wgate, Wup
    kernels::OwnedTensor w_down;     // [dim, ffn_dim]
    // Optional f32 biases (view.data == nullptr when the file has none), laid out like the
    // fused outputs: bq|bk|bv, bo, bgate|bup, bdown.
    kernels::OwnedTensor b_qkv;      // [1, q_dim + 2 * kv_dim]
    kernels::OwnedTensor b_o;        // [1, dim]
    kernels::OwnedTensor b_gate_up;  // [1, 2 * ffn_dim]
    kernels::OwnedTensor b_down;     // [1, dim]
  };
  // Activation buffers sized for `tokens` batch rows and `logit_rows` logits rows.
  struct Workspace {
    int64_t tokens = 0;
    int64_t logit_rows = 0;
    // Process-wide unique for each set of buffers (bumped at every growth), so a recording
    // keyed by it never outlives the buffers it wrote into (Backend::RunRecordable).
    uint64_t generation = 0;
    kernels::OwnedTensor x, xn, qkv, attn, gate_up, act, proj;  // per token
    kernels::OwnedTensor last, last_norm, logits;               // per logits row
  };

  LlamaModel(LlamaConfig config, kernels::Backend* backend)
      : config_(std::move(config)), backend_(backend) {}
  absl::Status LoadWeights(const gguf::GgufFile& file);
  // Loads what only some files have: rope_freqs.weight and the bias vectors the
  // architecture reads (llama.cpp's optional tensors), as f32 backend tensors.
  absl::Status LoadOptionalTensors(const gguf::GgufFile& file);
  // The RoPE parameters of every layer (ggml_rope_ext's, from the config).
  kernels::RopeParams MakeRopeParams() const;
  // Loads the listed [rows, cols] matrices, stacked by rows, in their file types.
  absl::Status LoadStacked(const gguf::GgufFile& file,
                           const std::vector<std::pair<std::string, int64_t>>& parts, int64_t cols,
                           StackedWeight* dst);
  // out = x * w^T, each part into its slice of out's columns.
  void MatMulStacked(const kernels::Tensor& x, const StackedWeight& w, const kernels::Tensor& out);
  absl::Status EnsureWorkspace(int64_t tokens, int64_t logit_rows);
  absl::Status ValidateBatch(const kernels::BatchInput& batch,
                             const kernels::PagedKvCache& cache) const;
  void RunLayer(int32_t index, const kernels::PagedKvCache& cache, int64_t n);

  LlamaConfig config_;
  kernels::Backend* backend_;
  kernels::OwnedTensor token_embd_;   // [vocab, dim]
  kernels::OwnedTensor output_norm_;  // [1, dim]
  // [vocab, dim]; when tied to token_embd_, a view of it (no buffer) or the backend's copy
  // in its product layout (PrepareMatMulWeight).
  kernels::OwnedTensor output_;
  kernels::OwnedTensor output_b_;    // [1, vocab] f32 (qwen2's optional output.bias)
  kernels::OwnedTensor rope_freqs_;  // [1, rope_dim / 2] f32 frequency factors, or empty
  std::vector<Layer> layers_;
  Workspace ws_;
  kernels::BatchInput padded_batch_;  // a decode step padded for the backend (Forward)
};

}  // namespace pagoda::model
