// GPT-2's pre-tokenizer, written out by hand instead of with a regex library: the split that
// the pattern 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// gives, using an approximate Unicode classification (see ClassifyCodePoint).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace pagoda::model {

enum class CharClass { kLetter, kNumber, kSpace, kOther };

// \p{L}, \p{N}, \s or anything else. Exact for ASCII and Latin-1; above that, code points in
// the common Unicode number, whitespace, punctuation, symbol, mark, format and private-use
// ranges are classified by table and every other code point counts as a letter. A full
// category table is not needed for our models: this gets Latin, Greek, Cyrillic, CJK, kana,
// Hangul and emoji text right, and only unusual marks or symbols in other scripts may differ.
CharClass ClassifyCodePoint(uint32_t cp);

// Splits `text` into consecutive pre-tokens (views into `text`) covering all of it. A byte
// that starts no valid UTF-8 character counts as one character of class kOther.
std::vector<std::string_view> Gpt2PreTokenize(std::string_view text);

}  // namespace pagoda::model
