// UTF-8 helpers shared by the tokenizers and the detokenizer. "Valid" means RFC 3629
// UTF-8: shortest form, no surrogates, nothing above U+10FFFF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pagoda::model {

enum class Utf8Status {
  kComplete,    // a whole valid character starts the text
  kIncomplete,  // the text is a proper prefix of a valid character (more bytes may complete it)
  kInvalid,     // the first byte can start no valid character with what follows
};

// Classifies the character at the start of `text` (non-empty); `*len` gets its byte length
// when kComplete.
Utf8Status CheckUtf8Char(std::string_view text, size_t* len);

// True when all of `text` is valid UTF-8.
bool IsValidUtf8(std::string_view text);

// Decodes the character at `text[pos]`: on success sets `*cp` and `*len`; on an invalid or
// truncated sequence returns false with `*cp` = the raw byte and `*len` = 1.
bool DecodeUtf8Char(std::string_view text, size_t pos, uint32_t* cp, size_t* len);

// Appends code point `cp` (<= U+10FFFF, not a surrogate) encoded as UTF-8.
void AppendUtf8(uint32_t cp, std::string* out);

// Appends `text` to `out` as valid UTF-8: complete characters are copied and each byte that
// cannot start one becomes U+FFFD. When `at_end` is false, a trailing proper prefix of a
// character is left unconsumed (it may complete later); when true, its bytes become U+FFFD
// one each. Returns the number of bytes of `text` consumed. The result for a text fed in
// pieces (each tail carried over) equals the result for the whole text at once.
size_t AppendSanitizedUtf8(std::string_view text, bool at_end, std::string* out);

}  // namespace pagoda::model
