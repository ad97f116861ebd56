// Tokenizer::FromGguf: the tokenizer.ggml.* metadata keys as a TokenizerSpec. Kept apart
// from tokenizer.cc so code that builds tokenizers from a spec does not link the GGUF
// reader.
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/tokenizer.h"

namespace pagoda::model {
namespace {

// A required key's status with the key named; NotFound becomes InvalidArgument.
absl::Status Required(std::string_view key, const absl::Status& status) {
  if (absl::IsNotFound(status)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer: the GGUF file has no ", std::string(key), " metadata"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("tokenizer: ", std::string(key), ": ", status.message()));
}

// An optional token id: -1 when absent or 0xFFFFFFFF (GGUF's "none"), Create checks range.
absl::StatusOr<int32_t> OptionalId(const gguf::GgufFile& file, std::string_view key) {
  absl::StatusOr<int64_t> value = file.GetIntOr(key, -1);
  if (!value.ok()) return Required(key, value.status());
  if (*value == -1 || *value == 0xFFFFFFFF) return -1;
  if (*value < 0 || *value > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer: ", std::string(key), " ", *value, " is not a valid token id"));
  }
  return static_cast<int32_t>(*value);
}

absl::StatusOr<bool> OptionalBool(const gguf::GgufFile& file, std::string_view key, bool fallback) {
  absl::StatusOr<bool> value = file.GetBoolOr(key, fallback);
  if (!value.ok()) return Required(key, value.status());
  return *value;
}

// Reads the per-token arrays; scores and token types are optional (Create decides whether
// a model needs them), merges are required for gpt2.
absl::Status ReadArrays(const gguf::GgufFile& file, TokenizerSpec* spec) {
  constexpr std::string_view kTokens = "tokenizer.ggml.tokens";
  constexpr std::string_view kScores = "tokenizer.ggml.scores";
  constexpr std::string_view kTypes = "tokenizer.ggml.token_type";
  constexpr std::string_view kMerges = "tokenizer.ggml.merges";
  absl::StatusOr<std::vector<std::string>> tokens = file.GetStringArray(kTokens);
  if (!tokens.ok()) return Required(kTokens, tokens.status());
  spec->tokens = *std::move(tokens);
  if (file.Find(kScores) != nullptr) {
    absl::StatusOr<std::vector<float>> scores = file.GetFloatArray(kScores);
    if (!scores.ok()) return Required(kScores, scores.status());
    spec->scores = *std::move(scores);
  }
  if (file.Find(kTypes) != nullptr) {
    absl::StatusOr<std::vector<int64_t>> types = file.GetIntArray(kTypes);
    if (!types.ok()) return Required(kTypes, types.status());
    spec->token_types.reserve(types->size());
    for (int64_t type : *types) {
      // Out-of-range values stay invalid for Create to reject.
      const bool fits = type >= 0 && type <= std::numeric_limits<int32_t>::max();
      spec->token_types.push_back(fits ? static_cast<int32_t>(type) : -1);
    }
  }
  if (spec->model == "gpt2") {
    absl::StatusOr<std::vector<std::string>> merges = file.GetStringArray(kMerges);
    if (!merges.ok()) return Required(kMerges, merges.status());
    spec->merges = *std::move(merges);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const gguf::GgufFile& file) {
  constexpr std::string_view kModel = "tokenizer.ggml.model";
  TokenizerSpec spec;
  absl::StatusOr<std::string> model = file.GetString(kModel);
  if (!model.ok()) return Required(kModel, model.status());
  spec.model = *std::move(model);
  RETURN_IF_ERROR(ReadArrays(file, &spec));
  ASSIGN_OR_RETURN(spec.bos_id, OptionalId(file, "tokenizer.ggml.bos_token_id"));
  ASSIGN_OR_RETURN(spec.eos_id, OptionalId(file, "tokenizer.ggml.eos_token_id"));
  ASSIGN_OR_RETURN(spec.unk_id, OptionalId(file, "tokenizer.ggml.unknown_token_id"));
  const bool is_llama = spec.model == "llama";
  ASSIGN_OR_RETURN(spec.add_bos, OptionalBool(file, "tokenizer.ggml.add_bos_token", is_llama));
  ASSIGN_OR_RETURN(spec.add_space_prefix,
                   OptionalBool(file, "tokenizer.ggml.add_space_prefix", is_llama));
  return Create(std::move(spec));
}

}  // namespace pagoda::model
