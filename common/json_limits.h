// Limits a JSON text (a request body, a schema sent as text) must meet before it is parsed: a
// parser builds a value per element and recurses per level, so a 16 MiB body of "[" would cost a
// gigabyte and seconds of CPU. One linear pass over the bytes (strings skipped) checks the nesting
// depth and the number of values first.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pagoda {

struct JsonLimits {
  int32_t max_depth = 64;                 // nested arrays and objects
  int64_t max_values = int64_t{1} << 20;  // elements of arrays and members of objects, in all
};

// OK when `body` nests at most max_depth levels and holds at most max_values values;
// InvalidArgument naming the limit otherwise ("WHAT: JSON nests deeper than ..."). Not a validator:
// malformed JSON within the limits passes and is left to the parser.
absl::Status CheckJsonLimits(std::string_view body, const JsonLimits& limits = {},
                             absl::string_view what = "body");

}  // namespace pagoda
