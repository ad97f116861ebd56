#include "model/llama_config.h"

#include <cmath>
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

absl::StatusOr<Architecture> ParseArchitecture(const std::string& name) {
  if (name == "llama") return Architecture::kLlama;
  if (name == "qwen2") return Architecture::kQwen2;
  return absl::InvalidArgumentError(
      absl::StrCat("model: unsupported architecture '", name, "' (supported: llama, qwen2)"));
}

absl::StatusOr<RopeScaling> ParseRopeScaling(const std::string& name) {
  if (name == "none") return RopeScaling::kNone;
  if (name == "linear") return RopeScaling::kLinear;
  if (name == "yarn") return RopeScaling::kYarn;
  return absl::InvalidArgumentError(absl::StrCat("model: unsupported rope.scaling.type '", name,
                                                 "' (supported: none, linear, yarn)"));
}

// Reads a float key (absent: `fallback`) that must be finite.
absl::StatusOr<float> GetFiniteFloat(const gguf::GgufFile& file, const std::string& key,
                                     double fallback) {
  absl::StatusOr<double> v = file.GetFloatOr(key, fallback);
  if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat("model: ", v.status().message()));
  if (!std::isfinite(*v))
    return absl::InvalidArgumentError(absl::StrCat("model: ", key, " not finite"));
  return static_cast<float>(*v);
}

// The rope scaling keys, turned into ggml_rope_ext's parameters the way llama.cpp does
// (llama_model::load_hparams, then llama_context's constructor with default parameters),
// in the same float arithmetic.
absl::Status ReadRopeScaling(const gguf::GgufFile& file, const std::string& p, LlamaConfig* c) {
  std::string type = "linear";  // llama.cpp's default when the key is absent
  if (file.Find(p + "rope.scaling.type") != nullptr) {
    absl::StatusOr<std::string> s = file.GetString(p + "rope.scaling.type");
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("model: ", s.status().message()));
    type = *s;
  }
  ASSIGN_OR_RETURN(c->rope_scaling, ParseRopeScaling(type));
  const std::string factor_key = file.Find(p + "rope.scaling.factor") != nullptr
                                     ? p + "rope.scaling.factor"
                                     : p + "rope.scale_linear";
  ASSIGN_OR_RETURN(const float factor, GetFiniteFloat(file, factor_key, 0.0));
  if (factor < 0.f) return absl::InvalidArgumentError(absl::StrCat("model: ", factor_key, " < 0"));
  c->rope_freq_scale = factor == 0.f ? 1.f : 1.f / factor;
  if (c->rope_scaling == RopeScaling::kNone) c->rope_freq_scale = 1.f;
  ASSIGN_OR_RETURN(const float attn_factor,
                   GetFiniteFloat(file, p + "rope.scaling.attn_factor", 1.0));
  ASSIGN_OR_RETURN(
      c->rope_orig_context,
      GetBounded(file, p + "rope.scaling.original_context_length", c->context_length, kMaxContext));
  c->rope_ext_factor = c->rope_scaling == RopeScaling::kYarn ? 1.f : 0.f;
  c->rope_attn_factor = 1.f;
  if (c->rope_ext_factor != 0.f) {
    // YaRN's magnitude scale 1 + 0.1 ln(factor), then divided back out because ggml's rope
    // applies it again (llama.cpp reads no yarn_log_multiplier for llama or qwen2).
    const float scale = 1.f / c->rope_freq_scale;
    c->rope_attn_factor = scale <= 1.f ? 1.f : 0.1f * std::log(scale) + 1.f;
    c->rope_attn_factor *= 1.f / (1.f + 0.1f * std::log(scale));
  }
  c->rope_attn_factor *= attn_factor;
  return absl::OkStatus();
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
  ASSIGN_OR_RETURN(c.arch, ParseArchitecture(*arch));
  c.architecture = *arch;
  c.rope_neox = c.arch == Architecture::kQwen2;  // llama.cpp's llama_model_rope_type
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
  ASSIGN_OR_RETURN(const int32_t value_dim,
                   GetBounded(file, p + "attention.value_length", c.head_dim, 1024));
  if (value_dim != c.head_dim) {
    return absl::InvalidArgumentError("model: attention.value_length differs from key_length");
  }
  ASSIGN_OR_RETURN(c.rope_dim, GetBounded(file, p + "rope.dimension_count", c.head_dim, 1024));
  auto eps = file.GetFloatOr(p + "attention.layer_norm_rms_epsilon", 1e-5);
  auto base = file.GetFloatOr(p + "rope.freq_base", 10000.0);
  if (!eps.ok() || !base.ok() || !(*eps > 0) || !(*eps < 1) || !(*base > 1)) {
    return absl::InvalidArgumentError("model: bad rms epsilon or rope frequency base");
  }
  c.rms_eps = static_cast<float>(*eps);
  c.rope_freq_base = static_cast<float>(*base);
  RETURN_IF_ERROR(ReadRopeScaling(file, p, &c));

  const gguf::TensorInfo* embd = file.FindTensor("token_embd.weight");
  if (embd == nullptr) return absl::InvalidArgumentError("model: tensor token_embd.weight missing");
  if (embd->dims.size() != 2 || embd->dims[0] != static_cast<uint64_t>(c.dim) ||
      embd->dims[1] == 0 || embd->dims[1] > static_cast<uint64_t>(kMaxVocab)) {
    return absl::InvalidArgumentError("model: token_embd.weight has the wrong shape");
  }
  c.vocab_size = static_cast<int32_t>(embd->dims[1]);
  // llama.cpp rejects a partial rotary dimension for both architectures (checked after the
  // tensor shapes, whose errors say more about a mis-sized file).
  if (c.rope_dim != c.head_dim) {
    return absl::InvalidArgumentError(absl::StrCat("model: rope.dimension_count ", c.rope_dim,
                                                   " must equal the head dimension ", c.head_dim));
  }
  c.tied_embeddings = file.FindTensor("output.weight") == nullptr;
  // Only llama reads rope_freqs.weight (Llama 3.1+ frequency factors); qwen2 has none.
  c.has_rope_freqs =
      c.arch == Architecture::kLlama && file.FindTensor("rope_freqs.weight") != nullptr;
  return c;
}

}  // namespace pagoda::model
