// Sets of Unicode scalar values (U+0000..U+10FFFF less the surrogates U+D800..U+DFFF) as
// grammars over bytes: a set of code point ranges becomes the UTF-8 byte-range sequences
// whose union is exactly the encodings of its members (each range split by encoded length
// and at continuation-byte boundaries, so every sequence is a product of byte ranges).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "grammar/grammar.h"

namespace pagoda::grammar {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

inline bool IsSurrogate(uint32_t cp) { return cp >= 0xD800 && cp <= 0xDFFF; }

// An inclusive range of code points.
struct CodePointRange {
  uint32_t lo = 0;
  uint32_t hi = 0;
  auto operator<=>(const CodePointRange&) const = default;
};

// One byte of an encoding drawn from [lo, hi].
struct ByteRange {
  uint8_t lo = 0;
  uint8_t hi = 0;
  bool operator==(const ByteRange&) const = default;
};

// The encodings b1 b2 ... of one fixed length with each bi in ranges[i].
using Utf8Sequence = std::vector<ByteRange>;

// `ranges` sorted, overlapping and adjacent ranges merged, values above U+10FFFF and the
// surrogates dropped.
std::vector<CodePointRange> NormalizeScalarRanges(std::vector<CodePointRange> ranges);

// The scalar values not in `normalized` (a NormalizeScalarRanges result).
std::vector<CodePointRange> ComplementScalarRanges(const std::vector<CodePointRange>& normalized);

// Appends to `out`, in ascending order, sequences whose union is exactly the UTF-8
// encodings of the scalar values in `range` (surrogates inside it are skipped).
void AppendUtf8Sequences(CodePointRange range, std::vector<Utf8Sequence>* out);

// Appends the UTF-8 encoding of scalar value `cp`.
void AppendUtf8(uint32_t cp, std::string* out);

// Decodes one well-formed UTF-8 character at the front of `text` into *cp: the number of
// bytes it takes, or 0 when the front is not well-formed (overlong, surrogate, above
// U+10FFFF, truncated, or a stray continuation byte).
int DecodeUtf8(absl::string_view text, uint32_t* cp);

// A symbol matching one encoded member of `normalized` (non-empty): a single byte set when
// the members are all ASCII, else a reference to a new rule named `name` with one
// alternative per group of sequences that differ only in their first byte.
Symbol Utf8SetSymbol(const std::vector<CodePointRange>& normalized, absl::string_view name,
                     GrammarBuilder* b);

}  // namespace pagoda::grammar
