#include "server/exposition.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pagoda::server {

std::string FormatSampleValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // Counts stay exact up to 2^53 instead of turning into 9-digit exponent forms.
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  return absl::StrFormat("%.9g", v);
}

std::string LabelPair(absl::string_view name, absl::string_view value) {
  std::string out = absl::StrCat(name, "=\"");
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

void AppendFamilyHeader(absl::string_view name, absl::string_view help, absl::string_view type,
                        std::string* out) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

void AppendSample(absl::string_view name, absl::string_view labels, double value,
                  std::string* out) {
  if (labels.empty()) {
    absl::StrAppend(out, name, " ", FormatSampleValue(value), "\n");
  } else {
    absl::StrAppend(out, name, "{", labels, "} ", FormatSampleValue(value), "\n");
  }
}

std::string JoinLabels(absl::string_view a, absl::string_view b) {
  if (a.empty()) return std::string(b);
  if (b.empty()) return std::string(a);
  return absl::StrCat(a, ",", b);
}

}  // namespace pagoda::server
