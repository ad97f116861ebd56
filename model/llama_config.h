// Hyper-parameters of a Llama-family model, read from GGUF metadata and checked.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "model/gguf.h"

namespace pagoda::model {

struct LlamaConfig {
  std::string architecture = "llama";
  int32_t vocab_size = 0;
  int32_t dim = 0;  // embedding width
  int32_t num_layers = 0;
  int32_t num_heads = 0;     // query heads
  int32_t num_kv_heads = 0;  // key/value heads (GQA when fewer than num_heads)
  int32_t head_dim = 0;
  int32_t ffn_dim = 0;
  int32_t rope_dim = 0;  // leading dims of each head that RoPE rotates
  float rope_freq_base = 10000.f;
  float rms_eps = 1e-5f;
  int32_t context_length = 2048;
  bool tied_embeddings = false;  // no output.weight: the LM head reuses token_embd

  int32_t q_dim() const { return num_heads * head_dim; }
  int32_t kv_dim() const { return num_kv_heads * head_dim; }
  // Parameters in the weights (embedding counted once when tied).
  int64_t num_parameters() const;

  // Reads `llama.*` keys and tensor shapes; InvalidArgument for an unsupported architecture,
  // missing keys or inconsistent sizes.
  static absl::StatusOr<LlamaConfig> FromGguf(const gguf::GgufFile& file);
};

}  // namespace pagoda::model
