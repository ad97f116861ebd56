// SentencePiece-style BPE as GGUF `llama` vocabularies use it: the text gets a dummy-prefix
// space, spaces become U+2581 ("▁"), and adjacent symbols merge best-score-first into
// vocabulary pieces; what no piece covers falls back to "<0xXX>" byte tokens.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "model/tokenizer.h"

namespace pagoda::model {

// True when `piece` is spelled "<0xXX>" (two uppercase hex digits); sets `*byte`.
bool ParseBytePiece(std::string_view piece, uint8_t* byte);

class LlamaTokenizer final : public Tokenizer {
 public:
  // `spec` must have passed Tokenizer::Create's validation (token_types filled in, special
  // tokens resolved).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(TokenizerSpec spec,
                                                           std::vector<int32_t> eog_ids);

  std::string TokenBytes(int32_t id) const override;

 private:
  LlamaTokenizer(TokenizerSpec spec, std::vector<int32_t> eog_ids);
  void EncodeText(std::string_view text, bool starts_text,
                  std::vector<int32_t>* ids) const override;
  // Appends the ids of symbol text `piece`: its own id, else one byte token per byte.
  void EmitPiece(std::string_view piece, std::vector<int32_t>* ids) const;

  // Pieces that text may merge into (control, byte, unknown and unused tokens excluded, so
  // text never encodes to a token that does not decode back to it).
  absl::flat_hash_map<std::string, int32_t> piece_to_id_;
  std::array<int32_t, 256> byte_to_id_;   // "<0xXX>" id per byte, -1 when absent
  std::vector<std::string> token_bytes_;  // TokenBytes per id
};

}  // namespace pagoda::model
