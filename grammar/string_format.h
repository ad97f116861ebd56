// String contents by `pattern` (a regular-expression subset) and by `format` (internal to
// grammar/): each returns a rule matching the JSON-escaped characters between the quotes.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grammar/grammar.h"

namespace pagoda::grammar {

// The subset (docs/API.md): literals (ASCII and UTF-8), `.`, classes `[a-z]` `[^...]` of
// ASCII, escapes \d \w \s \D \W \S \n \t \r and escaped metacharacters, groups `(...)`
// `(?:...)`, `|`, quantifiers `* + ? {n} {n,} {n,m}` (counts up to 256), anchors `^` `$`
// (an unanchored end takes any characters, as JSON Schema's search semantics); groups
// nest at most 64 deep. Negated
// classes stand for ASCII characters only. `any_char` is the rule of one string character.
// InvalidArgument (the message says what) for a construct outside the subset.
absl::StatusOr<int32_t> CompilePattern(absl::string_view pattern, GrammarBuilder* b,
                                       int32_t any_char);
// Formats date, time, date-time (RFC 3339) and uuid, as anchored patterns; InvalidArgument
// for any other.
absl::StatusOr<int32_t> CompileFormat(absl::string_view format, GrammarBuilder* b,
                                      int32_t any_char);

}  // namespace pagoda::grammar
