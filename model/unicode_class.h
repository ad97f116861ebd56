// Unicode character classes as llama.cpp's pre-tokenizers see them: the general category
// (from libutf8proc) folded into one flag, plus White_Space, for text decoded leniently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::model {

// One category flag per code point, plus kWhitespace. \p{L} = kLetter, \p{N} = kNumber,
// \p{P} = kPunctuation, \p{S} = kSymbol, \p{M} = kMark, \p{Z} = kSeparator, \p{C} = kControl
// (Cc, Cf, Co, Cs); kUndefined for unassigned code points.
enum CodePointFlag : uint16_t {
  kUndefined = 1 << 0,
  kNumber = 1 << 1,
  kLetter = 1 << 2,
  kSeparator = 1 << 3,
  kMark = 1 << 4,
  kPunctuation = 1 << 5,
  kSymbol = 1 << 6,
  kControl = 1 << 7,
  kWhitespace = 1 << 8,  // Unicode White_Space (what the pre-tokenizer patterns call \s)
};

// The flags of code point `cp`; kUndefined (alone) above U+10FFFF.
uint16_t CodePointFlags(uint32_t cp);

// The simple lowercase mapping of `cp` (itself when it has none).
uint32_t CodePointToLower(uint32_t cp);

// Code points of `text` as llama.cpp's tokenizers read it: a lead byte followed by the right
// number of continuation bytes is decoded (overlong forms and surrogates included); any
// other byte becomes U+FFFD and reading resumes at the next byte.
std::vector<uint32_t> DecodeCodePoints(std::string_view text);

}  // namespace pagoda::model
