// Byte-level BPE as GGUF `gpt2` vocabularies (GPT-2, Llama 3, Qwen2, ...) use it: text is
// split into words by the pre-tokenizer tokenizer.ggml.pre names, each byte is spelled as one
// printable character (GPT-2's byte-to-unicode table), and adjacent symbols merge
// lowest-rank-first (a whole word that is a piece first, for pre-tokenizers that say so).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "model/pretokenizer.h"
#include "model/tokenizer.h"

namespace pagoda::model {

// GPT-2's byte-to-unicode table: the code point that spells byte `b` in vocabulary pieces.
// Bytes 33..126, 161..172 and 174..255 spell themselves; the other 68 bytes take 256, 257,
// ... in increasing byte order.
uint32_t Gpt2ByteToCodePoint(uint8_t b);

class Gpt2Tokenizer final : public Tokenizer {
 public:
  // `spec` must have passed Tokenizer::Create's validation (pre-tokenizer known, special
  // tokens resolved); InvalidArgument when a merge is not "left right" with both sides
  // non-empty.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(TokenizerSpec spec,
                                                           std::vector<int32_t> eog_ids);

  std::string TokenBytes(int32_t id) const override;

 private:
  Gpt2Tokenizer(TokenizerSpec spec, std::vector<int32_t> eog_ids, PreTokenizerConfig pre);
  void EncodeText(std::string_view text, bool starts_text,
                  std::vector<int32_t>* ids) const override;
  // Appends the ids of one pre-token.
  void EncodeWord(std::string_view word, std::vector<int32_t>* ids) const;
  // Appends the id of a merged symbol; when it is no piece, the id of each of its bytes that
  // is a one-byte piece (llama.cpp's fallback; other bytes are dropped).
  void EmitSymbol(std::string_view symbol, std::vector<int32_t>* ids) const;

  PreTokenizerConfig pre_;
  std::array<std::string, 256> byte_text_;  // byte -> its spelling (UTF-8)
  // Rank per merge, keyed "left right" exactly as stored (spelled pieces hold no U+0020).
  absl::flat_hash_map<std::string, int32_t> merge_rank_;
  // Every token's text (the last of equal texts wins), as llama.cpp looks pieces up.
  absl::flat_hash_map<std::string, int32_t> text_to_id_;
  std::vector<std::string> token_bytes_;  // TokenBytes per id
};

}  // namespace pagoda::model
