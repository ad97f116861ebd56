// The JSON building blocks every schema grammar shares (internal to grammar/): whitespace,
// string characters, numbers, literals and "any value". Each rule is built once per
// grammar, on first use.
#pragma once

#include <cstdint>

#include "grammar/grammar.h"

namespace pagoda::grammar {

// Whitespace policy (docs/ARCHITECTURE.md, "Constrained decoding"): between tokens at most
// one space, or one newline followed by up to kMaxIndent spaces; none before the first
// value or after the last.
inline constexpr int kMaxIndent = 20;

class JsonRules {
 public:
  explicit JsonRules(GrammarBuilder* b) : b_(b) {}

  int32_t Ws();     // optional whitespace (the policy above)
  int32_t Comma();  // ws "," ws
  int32_t Colon();  // ws ":" ws
  int32_t Char();   // one string character: plain, escape or UTF-8 sequence
  int32_t String(int min_chars, int max_chars);  // a quoted string (max < 0: unbounded)
  int32_t Integer();                             // -?(0|[1-9][0-9]{0,14})
  int32_t Number();  // integer, optional fraction, optional exponent of 1-2 digits
  int32_t Boolean();
  int32_t Null();
  int32_t Value();   // any JSON value
  int32_t Object();  // any JSON object
  int32_t Array();   // any JSON array
  // "{" ws (key ws ":" ws value (comma ...)*)? ws "}" with values of rule `value`.
  int32_t MapOf(int32_t value);
  // "[" ws (item (comma item){min-1..max-1})? ws "]".
  int32_t ArrayOf(int32_t item, int min_items, int max_items);

 private:
  int32_t Digits(int min, int max);

  GrammarBuilder* b_;
  int32_t ws_ = -1, comma_ = -1, char_ = -1, string_ = -1, integer_ = -1, number_ = -1;
  int32_t boolean_ = -1, null_ = -1, value_ = -1, object_ = -1, array_ = -1, colon_ = -1;
};

}  // namespace pagoda::grammar
