// GBNF (llama.cpp's grammar format) compiled to a Grammar over bytes. The sentences are
// those of the rule named `root`.
//
// Syntax:
//   name ::= alternatives    a rule; names are [a-zA-Z0-9_-]+. Rules may be used before
//                            they are defined. A name defined twice is an error (llama.cpp
//                            would keep one definition; here a typo is refused instead).
//   a | b                    alternation; `a b` is a sequence; `( ... )` groups.
//   "text"                   a literal. Escapes: \n \r \t \\ \" \' \[ \] \- \^ \/, \xHH
//                            (the code point U+00HH, as in llama.cpp), \uHHHH, \UHHHHHHHH
//                            (a Unicode scalar value; surrogates and values above
//                            U+10FFFF are refused). Other text, UTF-8 included, stands for
//                            itself; "" is the empty string.
//   [a-z0-9_] [^"\\]         a character class: one code point from the listed characters
//                            and ranges (the same escapes; `-` first or last is itself).
//                            `^` first negates it: every Unicode scalar value not listed.
//                            Matched as UTF-8 (every member's encoding and nothing else).
//   .                        any one UTF-8 encoded Unicode scalar value.
//   x* x+ x? x{m} x{m,} x{m,n} x{,n}
//                            repetition of any element (literal, class, group, rule);
//                            counts up to GbnfLimits::max_repeat.
//   # ...                    a comment, to the end of the line.
// Layout: a rule ends at a newline, except inside parentheses, right after `::=` or `|`,
// and before a line whose first non-blank character is `|` (llama.cpp style continuation
// lines; blank and comment lines may come between). Spaces and tabs separate elements;
// `\r` counts as a space.
//
// Errors are InvalidArgument "gbnf: LINE:COLUMN: cause" (1-based, columns in bytes): an
// undefined rule (named, at its first use), a missing `root`, an unterminated literal, class
// or group, a bad escape, an empty or reversed class, bad repetition bounds, a duplicate
// definition, left recursion (the rule named, with the grammar builder's message), a rule
// that repeats something that can match the empty string without bound (also reported as
// left recursion by the builder), invalid UTF-8, and anything over `limits`.
#pragma once

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grammar/grammar.h"

namespace pagoda::grammar {

// Budgets on what a GBNF text may cost to compile.
struct GbnfLimits {
  size_t max_text_bytes = 64 << 10;  // length of the grammar text
  int max_repeat = 2048;             // largest count in {m,n}
  size_t max_elements = 1 << 20;     // grammar size
  int max_depth = 256;               // nesting of parentheses
};

absl::StatusOr<std::shared_ptr<const Grammar>> CompileGbnf(absl::string_view text,
                                                           const GbnfLimits& limits = {});

}  // namespace pagoda::grammar
