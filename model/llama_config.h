// Hyper-parameters of a Llama-family model, read from GGUF metadata and checked.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "model/gguf.h"

namespace pagoda::model {

// The GGUF architectures the forward pass implements (`general.architecture`).
enum class Architecture { kLlama, kQwen2 };
// `rope.scaling.type`: how positions are stretched past the training context.
enum class RopeScaling { kNone, kLinear, kYarn };

struct LlamaConfig {
  std::string architecture = "llama";
  Architecture arch = Architecture::kLlama;
  int32_t vocab_size = 0;
  int32_t dim = 0;  // embedding width
  int32_t num_layers = 0;
  int32_t num_heads = 0;     // query heads
  int32_t num_kv_heads = 0;  // key/value heads (GQA when fewer than num_heads)
  int32_t head_dim = 0;
  int32_t ffn_dim = 0;
  int32_t rope_dim = 0;  // leading dims of each head that RoPE rotates
  float rope_freq_base = 10000.f;
  // RoPE as llama.cpp derives it from the file (llama_model::load_hparams and
  // llama_context's constructor, default context parameters).
  bool rope_neox = false;  // NEOX pair order (qwen2); llama rotates adjacent pairs
  RopeScaling rope_scaling = RopeScaling::kLinear;  // llama.cpp's default when the key is absent
  float rope_freq_scale = 1.f;    // 1 / rope.scaling.factor; 1 without scaling or with kNone
  int32_t rope_orig_context = 0;  // rope.scaling.original_context_length, else context_length
  float rope_ext_factor = 0.f;    // YaRN extrapolation mix: 1 with yarn, else 0
  float rope_attn_factor = 1.f;   // cos/sin magnitude: YaRN's mscale (cancelled as llama.cpp
                                  // does) times rope.scaling.attn_factor
  float rope_beta_fast = 32.f;    // YaRN correction range (llama.cpp's fixed defaults: it
  float rope_beta_slow = 1.f;     // reads no yarn_* keys for llama or qwen2)
  bool has_rope_freqs = false;    // rope_freqs.weight present: per-pair frequency divisors
  float rms_eps = 1e-5f;
  int32_t context_length = 2048;
  bool tied_embeddings = false;  // no output.weight: the LM head reuses token_embd

  int32_t q_dim() const { return num_heads * head_dim; }
  int32_t kv_dim() const { return num_kv_heads * head_dim; }
  // Parameters in the weights (embedding counted once when tied).
  int64_t num_parameters() const;

  // Reads the `<general.architecture>.*` keys (llama or qwen2) and tensor shapes;
  // InvalidArgument "model: unsupported architecture 'x'" for any other architecture, and
  // for missing keys, inconsistent sizes or an unsupported rope scaling type.
  static absl::StatusOr<LlamaConfig> FromGguf(const gguf::GgufFile& file);
};

}  // namespace pagoda::model
