#include "model/make_model.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "kernels/quant/quantize.h"

// Bounds of the embedded model image (builtin_model.S).
extern "C" const char pagoda_builtin_model_begin[];
extern "C" const char pagoda_builtin_model_end[];

namespace pagoda::model {
namespace {

// splitmix64: a small, fast, well-mixed generator; identical on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float Symmetric() { return static_cast<float>(Next() >> 40) / 8388608.f - 1.f; }

 private:
  uint64_t state_;
};

// The type a [rows, cols] matrix is stored in: `dtype`, or F32 when a row is not a whole
// number of `dtype` blocks (llama-quantize picks another block type there instead).
gguf::TensorType MatrixType(gguf::TensorType dtype, uint64_t cols) {
  const auto block = static_cast<uint64_t>(kernels::DTypeBlockElems(gguf::ToDType(dtype)));
  return cols % block == 0 ? dtype : gguf::TensorType::kF32;
}

// `v` ([rows, cols], row-major) encoded as `type` with ggml's reference quantizers.
std::vector<uint8_t> Encode(const std::vector<float>& v, uint64_t cols, gguf::TensorType type) {
  const kernels::DType dt = gguf::ToDType(type);
  const size_t row_bytes = kernels::DTypeRowBytes(dt, static_cast<int64_t>(cols));
  const uint64_t rows = v.size() / cols;
  std::vector<uint8_t> out(rows * row_bytes);
  for (uint64_t r = 0; r < rows; ++r) {
    kernels::quant::QuantizeRow(dt, v.data() + r * cols, out.data() + r * row_bytes,
                                static_cast<int64_t>(cols));
  }
  return out;
}

// Vocabulary: <unk>, <s>, </s>, the 256 byte-fallback tokens, then pieces built from a
// fixed alphabet (single characters, "▁"+letter, then longer letter runs), each reachable
// by merging two shorter pieces, with scores falling in creation order.
void AddTokenizer(int32_t vocab_size, gguf::GgufWriter* w) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    tokens.push_back(buf);
    types.push_back(6);
  }
  const std::string space = "\xE2\x96\x81";  // U+2581, SentencePiece's space
  std::vector<std::string> level = {space};
  for (char c = 33; c < 127; ++c) level.push_back(std::string(1, c));
  const std::string letters = "etaoinshrdlucmfwypvbgkjqxz";
  std::vector<std::string> pieces = level;
  // Grow: every piece of the last level that ends in a letter or "▁" gains a letter.
  while (tokens.size() + pieces.size() < static_cast<size_t>(vocab_size)) {
    std::vector<std::string> next;
    for (const std::string& p : level) {
      const bool extendable = p == space || (p.back() >= 'a' && p.back() <= 'z') ||
                              (p.size() >= 3 && p.compare(0, 3, space) == 0);
      if (!extendable) continue;
      for (char c : letters) next.push_back(p + c);
    }
    if (next.empty()) break;
    pieces.insert(pieces.end(), next.begin(), next.end());
    level = std::move(next);
  }
  std::vector<float> scores(tokens.size(), 0.f);
  for (const std::string& p : pieces) {
    if (tokens.size() >= static_cast<size_t>(vocab_size)) break;
    scores.push_back(-static_cast<float>(tokens.size()));
    tokens.push_back(p);
    types.push_back(1);
  }
  while (tokens.size() < static_cast<size_t>(vocab_size)) {  // unreachable for real sizes
    tokens.push_back(absl::StrCat("<unused", tokens.size(), ">"));
    types.push_back(5);
    scores.push_back(-1e9f);
  }
  w->AddString("tokenizer.ggml.model", "llama");
  w->AddStringArray("tokenizer.ggml.tokens", tokens);
  w->AddFloat32Array("tokenizer.ggml.scores", scores);
  w->AddInt32Array("tokenizer.ggml.token_type", types);
  w->AddUint32("tokenizer.ggml.unknown_token_id", 0);
  w->AddUint32("tokenizer.ggml.bos_token_id", 1);
  w->AddUint32("tokenizer.ggml.eos_token_id", 2);
  w->AddBool("tokenizer.ggml.add_bos_token", true);
}

}  // namespace

const std::vector<ModelPreset>& ModelPresets() {
  static const auto* presets = new std::vector<ModelPreset>{
      {"tiny", 512, 64, 2, 4, 2, 176, 2048, false, "~0.2M parameters, for unit tests"},
      {"small", 2048, 256, 4, 8, 4, 704, 4096, false, "~4M parameters"},
      {"25m", 4096, 512, 8, 8, 4, 1408, 4096, false, "~28M parameters (KV-cache benchmark)"},
      {"100m", 32000, 768, 12, 12, 4, 2048, 4096, true, "~100M parameters, tied embeddings"},
      {"76m", 512, 768, 12, 12, 4, 2048, 4096, false,
       "~76M parameters, vocab 512: the CPU serving comparison with llama.cpp (docs/BENCH.md)"},
      {"1b", 32000, 2048, 16, 16, 2, 8192, 8192, true, "~1B parameters, head_dim 128, GQA 8:1"},
      {"llama3-1b", 128256, 2048, 16, 32, 8, 8192, 8192, true,
       "Llama-3.2-1B shapes (~1.2B parameters, the 128k Llama 3 vocabulary's logits)"},
      {"8b", 128256, 4096, 32, 32, 8, 14336, 8192, false,
       "Llama-3-8B shapes (~8B parameters), for memory measurements"},
  };
  return *presets;
}

absl::StatusOr<ModelPreset> FindPreset(const std::string& name) {
  std::vector<std::string> names;
  for (const ModelPreset& p : ModelPresets()) {
    if (p.name == name) return p;
    names.push_back(p.name);
  }
  return absl::NotFoundError(
      absl::StrCat("unknown preset '", name, "' (known: ", absl::StrJoin(names, ", "), ")"));
}

absl::StatusOr<gguf::GgufWriter> MakeModel(const ModelPreset& preset, uint64_t seed,
                                           gguf::TensorType dtype, const gguf::GgufFile* vocab) {
  if (!gguf::IsSupportedTensorType(static_cast<uint32_t>(dtype))) {
    return absl::InvalidArgumentError(
        absl::StrCat("make-model: unsupported dtype ", static_cast<uint32_t>(dtype)));
  }
  ModelPreset p = preset;
  if (vocab != nullptr) {
    const gguf::Value* tokens = vocab->Find("tokenizer.ggml.tokens");
    if (tokens == nullptr || tokens->type != gguf::ValueType::kArray || tokens->array.empty()) {
      return absl::InvalidArgumentError("make-model: the vocabulary file has no tokens");
    }
    p.vocab_size = static_cast<int32_t>(tokens->array.size());
  }
  // Norm vectors stay F32 in block-quantized models, as llama-quantize leaves them.
  const gguf::TensorType norm_type =
      kernels::IsBlockType(gguf::ToDType(dtype)) ? gguf::TensorType::kF32 : dtype;
  gguf::GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddString("general.name", absl::StrCat("pagoda-", p.name));
  w.AddUint32("llama.context_length", p.context_length);
  w.AddUint32("llama.embedding_length", p.dim);
  w.AddUint32("llama.block_count", p.num_layers);
  w.AddUint32("llama.feed_forward_length", p.ffn_dim);
  w.AddUint32("llama.attention.head_count", p.num_heads);
  w.AddUint32("llama.attention.head_count_kv", p.num_kv_heads);
  w.AddUint32("llama.rope.dimension_count", p.dim / p.num_heads);
  w.AddFloat32("llama.rope.freq_base", 10000.f);
  w.AddFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  if (vocab == nullptr) {
    AddTokenizer(p.vocab_size, &w);
  } else {
    for (const auto& [key, value] : vocab->metadata()) {
      if (key.starts_with("tokenizer.")) w.AddValue(key, value);
    }
  }

  Rng rng(seed);
  const uint64_t hd = static_cast<uint64_t>(p.dim / p.num_heads);
  // Weights are uniform with variance 1 / fan_in, so activations keep their scale.
  auto matrix = [&](const std::string& name, uint64_t rows, uint64_t cols, float gain) {
    std::vector<float> v(rows * cols);
    const float a = gain * std::sqrt(3.f / static_cast<float>(cols));
    for (float& x : v) x = a * rng.Symmetric();
    const gguf::TensorType type = MatrixType(dtype, cols);
    w.AddTensor(name, {cols, rows}, type, Encode(v, cols, type));
  };
  auto norm = [&](const std::string& name) {
    std::vector<float> v(p.dim);
    for (float& x : v) x = 1.f + 0.1f * rng.Symmetric();
    w.AddTensor(name, {static_cast<uint64_t>(p.dim)}, norm_type,
                Encode(v, static_cast<uint64_t>(p.dim), norm_type));
  };
  matrix("token_embd.weight", p.vocab_size, p.dim, std::sqrt(static_cast<float>(p.dim)) * 0.5f);
  norm("output_norm.weight");
  if (!p.tied_embeddings) matrix("output.weight", p.vocab_size, p.dim, 1.f);
  for (int32_t l = 0; l < p.num_layers; ++l) {
    const std::string b = absl::StrCat("blk.", l, ".");
    norm(b + "attn_norm.weight");
    matrix(b + "attn_q.weight", p.num_heads * hd, p.dim, 1.f);
    matrix(b + "attn_k.weight", p.num_kv_heads * hd, p.dim, 1.f);
    matrix(b + "attn_v.weight", p.num_kv_heads * hd, p.dim, 1.f);
    matrix(b + "attn_output.weight", p.dim, p.num_heads * hd, 0.5f);
    norm(b + "ffn_norm.weight");
    matrix(b + "ffn_gate.weight", p.ffn_dim, p.dim, 1.f);
    matrix(b + "ffn_up.weight", p.ffn_dim, p.dim, 1.f);
    matrix(b + "ffn_down.weight", p.dim, p.ffn_dim, 0.5f);
  }
  return w;
}

absl::StatusOr<std::unique_ptr<gguf::GgufFile>> BuiltinModel() {
  const auto* begin = reinterpret_cast<const uint8_t*>(pagoda_builtin_model_begin);
  const auto* end = reinterpret_cast<const uint8_t*>(pagoda_builtin_model_end);
  return gguf::GgufFile::FromBytes(std::vector<uint8_t>(begin, end));
}

absl::StatusOr<std::unique_ptr<gguf::GgufFile>> OpenModel(const std::string& path) {
  if (path.empty()) return BuiltinModel();
  return gguf::GgufFile::Open(path);
}

}  // namespace pagoda::model
