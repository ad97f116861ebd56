#include "common/json_limits.h"

#include "absl/strings/str_cat.h"

namespace pagoda {

absl::Status CheckJsonLimits(std::string_view body, const JsonLimits& limits,
                             absl::string_view what) {
  int32_t depth = 0;
  int64_t values = 0;
  bool in_string = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > limits.max_depth) {
          return absl::InvalidArgumentError(absl::StrCat(what, ": JSON nests deeper than ",
                                                         limits.max_depth, " arrays and objects"));
        }
        ++values;
        break;
      case ']':
      case '}':
        --depth;
        break;
      case ',':
        ++values;
        break;
      default:
        break;
    }
    if (values > limits.max_values) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": JSON holds more than ", limits.max_values, " values"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pagoda
