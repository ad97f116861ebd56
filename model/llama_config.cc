#include "model/llama_config.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagoda::model {
namespace {

// Upper bounds that keep a hostile file from asking for absurd allocations.
constexpr int64_t kMaxDim = 1 << 16;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxVocab = 1 << 22;
constexpr int64_t kMaxContext = 1 << 22;

absl::StatusOr<int32_t> GetBounded(const gguf::GgufFile& file, const std::string& key,
                                   std::optional<int64_t> fallback, int64_t max) {
  absl::StatusOr<int64_t> v =
      fallback.has_value() ? file.GetIntOr(key, *fallback) : file.GetInt(key);
  if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat("model: ", v.status().message()));
  if (*v <= 0 || *v > max) {
    return absl::InvalidArgumentError(absl::StrCat("model: ", key, " = ", *v, " out of range"));
  }
  return static_cast<int32_t>(*v);
}

}  // namespace

int64_t LlamaConfig::num_parameters() const {
  const int64_t per_layer =
      int64_t{dim} * (q_dim() * 2 + kv_dim() * 2) + int64_t{dim} * ffn_dim * 3 + 2 * int64_t{dim};
  const int64_t embed = int64_t{vocab_size} * dim;
  return per_layer * num_layers + embed * (tied_embeddings ? 1 : 2) + dim;
}

absl::StatusOr<LlamaConfig> LlamaConfig::FromGguf(const gguf::GgufFile& file) {
  LlamaConfig c;
  auto arch = file.GetString("general.architecture");
  if (!arch.ok()) return absl::InvalidArgumentError("model: general.architecture missing");
  if (*arch != "llama") {
    return absl::InvalidArgumentError(
        absl::StrCat("model: unsupported architecture '", *arch, "' (supported: llama)"));
  }
  c.architecture = *arch;
  const std::string p = c.architecture + ".";
  ASSIGN_OR_RETURN(c.dim, GetBounded(file, p + "embedding_length", std::nullopt, kMaxDim));
  ASSIGN_OR_RETURN(c.num_layers, GetBounded(file, p + "block_count", std::nullopt, kMaxLayers));
  ASSIGN_OR_RETURN(c.ffn_dim,
                   GetBounded(file, p + "feed_forward_length", std::nullopt, kMaxDim * 8));
  ASSIGN_OR_RETURN(c.num_heads, GetBounded(file, p + "attention.head_count", std::nullopt, 4096));
  ASSIGN_OR_RETURN(c.num_kv_heads,
                   GetBounded(file, p + "attention.head_count_kv", c.num_heads, 4096));
  ASSIGN_OR_RETURN(c.context_length, GetBounded(file, p + "context_length", 2048, kMaxContext));
  if (c.dim % c.num_heads != 0) {
    return absl::InvalidArgumentError("model: embedding_length not divisible by head_count");
  }
  ASSIGN_OR_RETURN(c.head_dim,
                   GetBounded(file, p + "attention.key_length", c.dim / c.num_heads, 1024));
  if (c.num_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError("model: head_count not a multiple of head_count_kv");
  }
  if (c.head_dim % 2 != 0) return absl::InvalidArgumentError("model: odd head dimension");
  ASSIGN_OR_RETURN(c.rope_dim, GetBounded(file, p + "rope.dimension_count", c.head_dim, 1024));
  if (c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    return absl::InvalidArgumentError("model: rope.dimension_count must be even and <= head dim");
  }
  auto eps = file.GetFloatOr(p + "attention.layer_norm_rms_epsilon", 1e-5);
  auto base = file.GetFloatOr(p + "rope.freq_base", 10000.0);
  if (!eps.ok() || !base.ok() || !(*eps > 0) || !(*eps < 1) || !(*base > 1)) {
    return absl::InvalidArgumentError("model: bad rms epsilon or rope frequency base");
  }
  c.rms_eps = static_cast<float>(*eps);
  c.rope_freq_base = static_cast<float>(*base);

  const gguf::TensorInfo* embd = file.FindTensor("token_embd.weight");
  if (embd == nullptr) return absl::InvalidArgumentError("model: tensor token_embd.weight missing");
  if (embd->dims.size() != 2 || embd->dims[0] != static_cast<uint64_t>(c.dim) ||
      embd->dims[1] == 0 || embd->dims[1] > static_cast<uint64_t>(kMaxVocab)) {
    return absl::InvalidArgumentError("model: token_embd.weight has the wrong shape");
  }
  c.vocab_size = static_cast<int32_t>(embd->dims[1]);
  c.tied_embeddings = file.FindTensor("output.weight") == nullptr;
  return c;
}

}  // namespace pagoda::model
