// Deterministic random-weight Llama models for tests and benchmarks, written as GGUF with a
// SentencePiece-style byte-fallback tokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"

namespace pagoda::model {

struct ModelPreset {
  std::string name;
  int32_t vocab_size;
  int32_t dim;
  int32_t num_layers;
  int32_t num_heads;
  int32_t num_kv_heads;
  int32_t ffn_dim;
  int32_t context_length;
  bool tied_embeddings;
  std::string description;
};

// The built-in presets, smallest first ("tiny" ... "8b").
const std::vector<ModelPreset>& ModelPresets();
// The preset called `name`; NotFound lists the known names.
absl::StatusOr<ModelPreset> FindPreset(const std::string& name);

// A GGUF image of `preset` with weights drawn from `seed`, stored as `dtype` (any type
// gguf::IsSupportedTensorType accepts) with ggml's reference quantizers. Matrices whose
// rows are not whole `dtype` blocks stay F32; norm vectors are F32 in block-quantized
// models (as llama-quantize leaves them). InvalidArgument for an unsupported dtype.
// With `vocab` (a GGUF holding a real tokenizer, such as llama.cpp's ggml-vocab-*.gguf), its
// tokenizer.* metadata replaces the generated tokenizer and its token count the preset's
// vocabulary size; InvalidArgument when it has no tokenizer.ggml.tokens.
absl::StatusOr<gguf::GgufWriter> MakeModel(const ModelPreset& preset, uint64_t seed,
                                           gguf::TensorType dtype,
                                           const gguf::GgufFile* vocab = nullptr);
// Name of the model pagoda serves when no --model is given.
inline constexpr char kBuiltinModelName[] = "stories260K";
// The embedded default model (stories260K.gguf, a real trained Llama linked into the
// binary), parsed in memory.
absl::StatusOr<std::unique_ptr<gguf::GgufFile>> BuiltinModel();
// The file at `path`, or the embedded default model when `path` is empty.
absl::StatusOr<std::unique_ptr<gguf::GgufFile>> OpenModel(const std::string& path);

}  // namespace pagoda::model
