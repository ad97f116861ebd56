// Tokenizer::FromGguf: the tokenizer.ggml.* metadata keys as a TokenizerSpec. Kept apart
// from tokenizer.cc so code that builds tokenizers from a spec does not link the GGUF
// reader.
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/pretokenizer.h"
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

// An optional token id: `fallback` when absent, -1 when 0xFFFFFFFF (GGUF's "none"); Create
// checks the range.
absl::StatusOr<int32_t> OptionalId(const gguf::GgufFile& file, std::string_view key,
                                   int32_t fallback = -1) {
  absl::StatusOr<int64_t> value = file.GetIntOr(key, fallback);
  if (!value.ok()) return Required(key, value.status());
  if (*value == -1 || *value == 0xFFFFFFFF) return -1;
  if (*value < 0 || *value > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer: ", std::string(key), " ", *value, " is not a valid token id"));
  }
  return static_cast<int32_t>(*value);
}

absl::StatusOr<std::string> OptionalString(const gguf::GgufFile& file, std::string_view key) {
  if (file.Find(key) == nullptr) return std::string();
  absl::StatusOr<std::string> value = file.GetString(key);
  if (!value.ok()) return Required(key, value.status());
  return *std::move(value);
}

// A default id as llama.cpp gives it (-1 when outside the vocabulary).
int32_t DefaultId(int32_t id, size_t vocab) { return static_cast<size_t>(id) < vocab ? id : -1; }

// The special ids, with llama.cpp's defaults for absent BOS/EOS/unknown keys (llama: 1, 2, 0;
// gpt2: 11 for BOS and EOS).
absl::Status ReadSpecialIds(const gguf::GgufFile& file, TokenizerSpec* spec) {
  const bool is_llama = spec->model == "llama";
  const size_t n = spec->tokens.size();
  ASSIGN_OR_RETURN(spec->bos_id, OptionalId(file, "tokenizer.ggml.bos_token_id",
                                            DefaultId(is_llama ? 1 : 11, n)));
  ASSIGN_OR_RETURN(spec->eos_id, OptionalId(file, "tokenizer.ggml.eos_token_id",
                                            DefaultId(is_llama ? 2 : 11, n)));
  ASSIGN_OR_RETURN(spec->unk_id, OptionalId(file, "tokenizer.ggml.unknown_token_id",
                                            is_llama ? DefaultId(0, n) : -1));
  const std::pair<std::string_view, int32_t*> keys[] = {
      {"tokenizer.ggml.eot_token_id", &spec->eot_id},
      {"tokenizer.ggml.eom_token_id", &spec->eom_id},
      {"tokenizer.ggml.fim_pre_token_id", &spec->fim_pre_id},
      {"tokenizer.ggml.fim_suf_token_id", &spec->fim_suf_id},
      {"tokenizer.ggml.fim_mid_token_id", &spec->fim_mid_id},
      {"tokenizer.ggml.fim_pad_token_id", &spec->fim_pad_id},
      {"tokenizer.ggml.fim_rep_token_id", &spec->fim_rep_id},
      {"tokenizer.ggml.fim_sep_token_id", &spec->fim_sep_id},
  };
  for (const auto& [key, id] : keys) {
    ASSIGN_OR_RETURN(*id, OptionalId(file, key));
  }
  return absl::OkStatus();
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
  ASSIGN_OR_RETURN(spec.pre, OptionalString(file, "tokenizer.ggml.pre"));
  ASSIGN_OR_RETURN(spec.name, OptionalString(file, "general.name"));
  RETURN_IF_ERROR(ReadSpecialIds(file, &spec));
  const bool is_llama = spec.model == "llama";
  // llama.cpp's add_bos default: always for llama, by pre-tokenizer for gpt2.
  bool add_bos_default = is_llama;
  if (!is_llama) {
    absl::StatusOr<PreTokenizerConfig> pre = LookupPreTokenizer(spec.pre);
    if (pre.ok()) add_bos_default = pre->add_bos;  // else Create reports the unknown pre
  }
  ASSIGN_OR_RETURN(spec.add_bos,
                   OptionalBool(file, "tokenizer.ggml.add_bos_token", add_bos_default));
  ASSIGN_OR_RETURN(spec.add_space_prefix,
                   OptionalBool(file, "tokenizer.ggml.add_space_prefix", is_llama));
  return Create(std::move(spec));
}

}  // namespace pagoda::model
