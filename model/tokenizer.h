// Tokenizers stored in GGUF metadata: `llama` (SentencePiece-style BPE by scores, byte
// fallback, dummy-prefix space) and `gpt2` (byte-level BPE by merge ranks, words split by the
// pre-tokenizer tokenizer.ggml.pre names), with special-token parsing and the
// end-of-generation set as llama.cpp builds them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/gguf.h"

namespace pagoda::model {

class SpecialTokenSplitter;
struct Fragment;

// A byte range [begin, end) of a text.
struct TextRange {
  size_t begin = 0;
  size_t end = 0;
};

// Token kinds as GGUF's tokenizer.ggml.token_type numbers them.
enum class TokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Everything a tokenizer is built from (what GGUF's tokenizer.ggml.* keys hold).
struct TokenizerSpec {
  std::string model;                 // "llama" or "gpt2"
  std::string pre;                   // gpt2: tokenizer.ggml.pre ("" = "default")
  std::string name;                  // general.name (Phi-3 strips spaces after special tokens)
  std::vector<std::string> tokens;   // piece text per id
  std::vector<float> scores;         // llama: merge priority per id (may be empty for gpt2)
  std::vector<int32_t> token_types;  // TokenType per id (empty: see Create)
  std::vector<std::string> merges;   // gpt2: "left right" in rank order
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  // End of turn / message and fill-in-the-middle tokens; -1: found by their text.
  int32_t eot_id = -1;
  int32_t eom_id = -1;
  int32_t fim_pre_id = -1;
  int32_t fim_suf_id = -1;
  int32_t fim_mid_id = -1;
  int32_t fim_pad_id = -1;
  int32_t fim_rep_id = -1;
  int32_t fim_sep_id = -1;
  bool add_bos = true;
  bool add_space_prefix = true;  // llama: prepend one space to the text before encoding
};

// Immutable once created: every method is const and may be called from many threads.
// What tokens decode to: normal and user-defined pieces their text (llama: "▁" as a space;
// gpt2: normal pieces through the byte table, user-defined ones as stored), byte tokens
// their byte, control, unknown (<unk>) and unused tokens nothing.
class Tokenizer {
 public:
  // Validates the spec (ids in range, known model and pre-tokenizer, array lengths, ...) and
  // builds lookup tables; InvalidArgument when the spec is malformed (an unknown pre is
  // "tokenizer: unknown pre-tokenizer '<pre>'"). With empty token_types every token is normal
  // except that bos/eos become control and (llama) "<0xXX>" pieces become byte tokens. Tokens
  // with end-marker text become control tokens (see eog_ids).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(TokenizerSpec spec);
  // Reads tokenizer.ggml.* (and general.name) from a GGUF file with llama.cpp's defaults for
  // absent keys (BOS/EOS ids, add_bos by model and pre-tokenizer); InvalidArgument when a
  // required key is missing or has the wrong type, or the resulting spec is malformed.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const gguf::GgufFile& file);
  virtual ~Tokenizer();

  // Token ids of `text`, with BOS first when `add_bos` (and the vocabulary has one). With
  // `parse_special`, text spelling a control, user-defined or unknown token becomes that
  // token (longest first); without it only user-defined tokens are (as llama.cpp does).
  std::vector<int32_t> Encode(std::string_view text, bool add_bos, bool parse_special) const;
  // As Encode with parse_special, except where special-token text overlaps a range of
  // `plain` (sorted, disjoint ranges of `text`, e.g. a chat prompt's message content): there
  // it is plain text, as without parse_special. Text is cut into the same pieces as by
  // Encode otherwise, so a text with no special-token text in `plain` gets Encode's ids.
  std::vector<int32_t> EncodeWithPlainRanges(std::string_view text, bool add_bos,
                                             absl::Span<const TextRange> plain) const;
  // Encode(text, add_bos, /*parse_special=*/false): plain text, no special-token parsing.
  std::vector<int32_t> Encode(std::string_view text, bool add_bos) const {
    return Encode(text, add_bos, /*parse_special=*/false);
  }
  // The bytes token `id` contributes to text (not necessarily valid UTF-8 alone: byte tokens
  // carry single bytes); "" for control, unknown, unused and out-of-range ids.
  virtual std::string TokenBytes(int32_t id) const = 0;

  // Concatenated TokenBytes of `ids` as valid UTF-8 (each byte that cannot form a character
  // becomes U+FFFD); with `strip_leading_space` a single leading space produced by a llama
  // dummy prefix at the start of text is dropped (SentencePiece).
  std::string Decode(absl::Span<const int32_t> ids, bool strip_leading_space = true) const;

  int32_t vocab_size() const { return static_cast<int32_t>(spec_.tokens.size()); }
  int32_t bos_id() const { return spec_.bos_id; }
  int32_t eos_id() const { return spec_.eos_id; }
  bool add_bos() const { return spec_.add_bos; }
  const std::string& model() const { return spec_.model; }
  // The stored piece text of `id` (e.g. "▁the", "<0x0A>"); "" when out of range.
  std::string_view Piece(int32_t id) const;
  // True for control tokens (BOS, EOS, ...), which decode to nothing.
  bool IsControl(int32_t id) const;
  // True when `id` ends generation: EOS, end of turn/message, and every token whose text is
  // an end marker (<|eot_id|>, <|im_end|>, <|end|>, <|endoftext|>, </s>, ...), as llama.cpp.
  bool IsEog(int32_t id) const;
  // The end-of-generation ids, ascending.
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }

 protected:
  // `spec` is validated, its token types filled and its special tokens resolved.
  Tokenizer(TokenizerSpec spec, std::vector<int32_t> eog_ids);
  // Appends the ids of plain text (no special tokens); `starts_text` is true for text at the
  // start of the input or right after a special token (where llama adds its dummy prefix).
  virtual void EncodeText(std::string_view text, bool starts_text,
                          std::vector<int32_t>* ids) const = 0;
  // Type of a valid id (Create fills token_types to one entry per token).
  TokenType type_of(int32_t id) const { return static_cast<TokenType>(spec_.token_types[id]); }
  bool InRange(int32_t id) const { return id >= 0 && id < vocab_size(); }

  TokenizerSpec spec_;

 private:
  // The ids of `text` cut into `fragments` (SpecialTokenSplitter::Split).
  std::vector<int32_t> EncodeFragments(std::string_view text, bool add_bos,
                                       const std::vector<Fragment>& fragments) const;

  std::vector<int32_t> eog_ids_;
  std::unique_ptr<SpecialTokenSplitter> special_;
};

// Turns a stream of token ids into text deltas that never split a UTF-8 character:
// bytes of an incomplete character are held until it completes; bytes that can never form
// one become U+FFFD, so every delta is valid UTF-8. The deltas of ids followed by Flush()
// concatenate to tokenizer->Decode(ids, false). Never strips a leading space.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer* tokenizer) : tokenizer_(tokenizer) {}
  // Appends one token; returns the newly completed text (possibly empty).
  std::string Append(int32_t id);
  // Returns held bytes (an unfinished character), each as U+FFFD; resets the hold.
  std::string Flush();

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;  // bytes of an incomplete trailing UTF-8 character
};

}  // namespace pagoda::model
