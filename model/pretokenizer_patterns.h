// The patterns the pre-tokenizers are built from (internal to pretokenizer.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pagoda::model::pretok {

// Text as code points with their CodePointFlags.
struct CpText {
  std::vector<uint32_t> cps;
  std::vector<uint16_t> flags;
};

// llama.cpp's hand-written matchers: they cover [begin, end) whole, a code point no
// alternative matches being a word of its own, and append each word's length.
// GPT-2's pattern.
void SplitGpt2(const CpText& t, size_t begin, size_t end, std::vector<size_t>* lengths);
// Llama 3's pattern (max_digits 3) or Qwen2's (max_digits 1).
void SplitLlama3(const CpText& t, size_t begin, size_t end, size_t max_digits,
                 std::vector<size_t>* lengths);

// Regex-style patterns: the end of the match starting at `pos` within [pos, end), or `pos`
// when there is none there (the caller searches for the leftmost match).
using Matcher = size_t (*)(const CpText& t, size_t pos, size_t end);
size_t MatchDefaultPunctuation(const CpText& t, size_t pos, size_t end);   // [\p{P}$+<=>^~|]+
size_t MatchNumberRun(const CpText& t, size_t pos, size_t end);            // \p{N}+
size_t MatchNumber(const CpText& t, size_t pos, size_t end);               // \p{N}
size_t MatchThreeDigits(const CpText& t, size_t pos, size_t end);          // [0-9]{3}
size_t MatchNewline(const CpText& t, size_t pos, size_t end);              // [\r\n]
size_t MatchDeepseekLetters(const CpText& t, size_t pos, size_t end);      // \s?[A-Za-zµÀ-...]+
size_t MatchDeepseekPunctuation(const CpText& t, size_t pos, size_t end);  // \s?[!-/:-~...]+
size_t MatchTrailingSpace(const CpText& t, size_t pos, size_t end);        // \s+$
size_t MatchDeepseekCjk(const CpText& t, size_t pos, size_t end);  // [一-龥ࠀ-一가-퟿]+
size_t MatchTekken(const CpText& t, size_t pos, size_t end);       // Tekken's pattern

}  // namespace pagoda::model::pretok
