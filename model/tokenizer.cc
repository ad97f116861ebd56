// Spec validation, the dispatch to the llama/gpt2 tokenizers, and what both share.
#include "model/tokenizer.h"

#include <algorithm>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/gpt2_tokenizer.h"
#include "model/llama_tokenizer.h"
#include "model/pretokenizer.h"
#include "model/special_tokens.h"
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
  RETURN_IF_ERROR(CheckId("end-of-turn id", spec.eot_id, n));
  RETURN_IF_ERROR(CheckId("end-of-message id", spec.eom_id, n));
  for (int32_t id : {spec.fim_pre_id, spec.fim_suf_id, spec.fim_mid_id, spec.fim_pad_id,
                     spec.fim_rep_id, spec.fim_sep_id}) {
    RETURN_IF_ERROR(CheckId("fill-in-the-middle id", id, n));
  }
  if (spec.model == "gpt2") RETURN_IF_ERROR(LookupPreTokenizer(spec.pre).status());
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
  std::vector<int32_t> eog_ids = ResolveSpecialTokens(&spec);
  if (spec.model == "llama") return LlamaTokenizer::Create(std::move(spec), std::move(eog_ids));
  return Gpt2Tokenizer::Create(std::move(spec), std::move(eog_ids));
}

Tokenizer::Tokenizer(TokenizerSpec spec, std::vector<int32_t> eog_ids)
    : spec_(std::move(spec)),
      eog_ids_(std::move(eog_ids)),
      special_(std::make_unique<SpecialTokenSplitter>(spec_)) {}

Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  return EncodeFragments(text, add_bos, special_->Split(text, parse_special));
}

std::vector<int32_t> Tokenizer::EncodeWithPlainRanges(std::string_view text, bool add_bos,
                                                      absl::Span<const TextRange> plain) const {
  return EncodeFragments(text, add_bos, special_->Split(text, /*parse_special=*/true, plain));
}

std::vector<int32_t> Tokenizer::EncodeFragments(std::string_view text, bool add_bos,
                                                const std::vector<Fragment>& fragments) const {
  std::vector<int32_t> ids;
  if (add_bos && spec_.bos_id >= 0) ids.push_back(spec_.bos_id);
  bool starts_text = true;
  for (const Fragment& f : fragments) {
    if (f.id >= 0) {
      ids.push_back(f.id);
      starts_text = true;
    } else {
      EncodeText(text.substr(f.begin, f.len), starts_text, &ids);
      starts_text = false;
    }
  }
  return ids;
}

bool Tokenizer::IsEog(int32_t id) const {
  return std::binary_search(eog_ids_.begin(), eog_ids_.end(), id);
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
