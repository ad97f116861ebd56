// Pre-tokenizers of byte-level BPE (GGUF `gpt2`) vocabularies, chosen by tokenizer.ggml.pre:
// the word splits llama.cpp makes with its patterns, written out by hand (no regex engine).
// Each pre-tokenizer is a pipeline of patterns; every pattern splits each piece the previous
// ones made into its matches and the text between them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pagoda::model {

enum class PreTokenizer {
  kDefault,      // punctuation runs, then GPT-2's pattern, then digit runs, then 3 digits
  kGpt2,         // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kLlama3,       // Llama 3: contractions (any case), letters, \p{N}{1,3}, punctuation, newlines
  kQwen2,        // Llama 3's pattern with single digits
  kSmollm,       // single digits, then GPT-2's pattern
  kDeepseekLlm,  // newlines, Latin/Greek/Cyrillic letter runs, punctuation, CJK, digit runs
  kTekken,       // Mistral Tekken: case-aware letter runs, single digits
};

// How llama.cpp treats a tokenizer.ggml.pre value.
struct PreTokenizerConfig {
  PreTokenizer type = PreTokenizer::kDefault;
  bool ignore_merges = false;  // a whole word that is a vocabulary piece is taken as one token
  bool add_bos = false;        // BOS default when tokenizer.ggml.add_bos_token is absent
};

// The config a tokenizer.ggml.pre value names ("" = absent = "default"), with llama.cpp's
// aliases; InvalidArgument "tokenizer: unknown pre-tokenizer '<value>'" otherwise.
absl::StatusOr<PreTokenizerConfig> LookupPreTokenizer(std::string_view pre);

// Splits `text` into words covering all of it, re-encoded from its code points as
// DecodeCodePoints reads them (so invalid UTF-8 comes back changed, as in llama.cpp).
std::vector<std::string> PreTokenize(PreTokenizer type, std::string_view text);

}  // namespace pagoda::model
