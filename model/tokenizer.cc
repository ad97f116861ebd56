// Spec validation, the dispatch to the llama/gpt2 tokenizers, and what both share.
#include "model/tokenizer.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/gpt2_tokenizer.h"
#include "model/llama_tokenizer.h"
#include "model/utf8.h"

namespace pagoda::model {
namespace {

absl::Status CheckId(const char* name, int32_t id, size_t vocab) {
  if (id == -1 || (id >= 0 && static_cast<size_t>(id) < vocab)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("tokenizer: ", name, " ", id, " is outside the vocabulary of ", vocab));
}

absl::Status ValidateSpec(const TokenizerSpec& spec) {
  if (spec.model != "llama" && spec.model != "gpt2") {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer: unsupported model \"", spec.model, "\" (want llama or gpt2)"));
  }
  const size_t n = spec.tokens.size();
  if (n == 0) return absl::InvalidArgumentError("tokenizer: the vocabulary is empty");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError("tokenizer: the vocabulary is too large");
  }
  if (spec.model == "llama" && spec.scores.empty()) {
    return absl::InvalidArgumentError("tokenizer: a llama tokenizer needs token scores");
  }
  if (!spec.scores.empty() && spec.scores.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer: ", spec.scores.size(), " scores for ", n, " tokens"));
  }
  if (!spec.token_types.empty() && spec.token_types.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer: ", spec.token_types.size(), " token types for ", n, " tokens"));
  }
  for (size_t id = 0; id < spec.token_types.size(); ++id) {
    const int32_t type = spec.token_types[id];
    // 0 is GGUF's "undefined" type, read as normal.
    if (type < 0 || type > static_cast<int32_t>(TokenType::kByte)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer: token ", id, " has unknown type ", type));
    }
  }
  RETURN_IF_ERROR(CheckId("bos id", spec.bos_id, n));
  RETURN_IF_ERROR(CheckId("eos id", spec.eos_id, n));
  RETURN_IF_ERROR(CheckId("unknown-token id", spec.unk_id, n));
  return absl::OkStatus();
}

// Gives every token an explicit type (see Tokenizer::Create for the rule without types).
void FillTokenTypes(TokenizerSpec* spec) {
  const size_t n = spec->tokens.size();
  if (spec->token_types.empty()) {
    spec->token_types.assign(n, static_cast<int32_t>(TokenType::kNormal));
    if (spec->model == "llama") {
      for (size_t id = 0; id < n; ++id) {
        uint8_t byte = 0;
        if (ParseBytePiece(spec->tokens[id], &byte)) {
          spec->token_types[id] = static_cast<int32_t>(TokenType::kByte);
        }
      }
    }
    for (int32_t id : {spec->bos_id, spec->eos_id}) {
      if (id >= 0) spec->token_types[id] = static_cast<int32_t>(TokenType::kControl);
    }
  }
  for (int32_t& type : spec->token_types) {
    if (type == 0) type = static_cast<int32_t>(TokenType::kNormal);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(TokenizerSpec spec) {
  RETURN_IF_ERROR(ValidateSpec(spec));
  FillTokenTypes(&spec);
  if (spec.model == "llama") return LlamaTokenizer::Create(std::move(spec));
  return Gpt2Tokenizer::Create(std::move(spec));
}

std::string Tokenizer::Decode(absl::Span<const int32_t> ids, bool strip_leading_space) const {
  std::string bytes;
  for (int32_t id : ids) bytes += TokenBytes(id);
  // Control tokens contribute nothing, so bytes[0] is the first byte of the first piece that
  // produced text: the dummy-prefix space when the ids encode a text from its start.
  std::string_view view = bytes;
  if (strip_leading_space && spec_.model == "llama" && spec_.add_space_prefix && !view.empty() &&
      view[0] == ' ') {
    view.remove_prefix(1);
  }
  std::string text;
  text.reserve(view.size());
  AppendSanitizedUtf8(view, /*at_end=*/true, &text);
  return text;
}

std::string_view Tokenizer::Piece(int32_t id) const {
  if (!InRange(id)) return {};
  return spec_.tokens[id];
}

bool Tokenizer::IsControl(int32_t id) const {
  return InRange(id) && type_of(id) == TokenType::kControl;
}

}  // namespace pagoda::model
