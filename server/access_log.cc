#include "server/access_log.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/metrics.h"

namespace pagoda::server {
namespace {

constexpr size_t kMaxErrorBytes = 256;

std::string Millis(const std::optional<absl::Duration>& d) {
  if (!d.has_value()) return "-";
  return absl::StrFormat("%.3f", absl::ToDoubleMilliseconds(*d));
}

}  // namespace

std::string QuoteLogValue(absl::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const auto next = [&](size_t k) {
      return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0;
    };
    if (c == '\\' || c == '"') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else if (c == 0xc2 && next(1) >= 0x80 && next(1) <= 0x9f) {  // C1 control (NEL, ...)
      absl::StrAppendFormat(&out, "\\u{%04x}", next(1));
      i += 1;
    } else if (c == 0xe2 && next(1) == 0x80 && (next(2) == 0xa8 || next(2) == 0xa9)) {
      absl::StrAppendFormat(&out, "\\u{%04x}", 0x2000 + next(2) - 0x80);  // U+2028, U+2029
      i += 2;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

std::string FormatAccessLog(const AccessLogEntry& e) {
  std::string line =
      absl::StrCat("access tenant=", QuoteLogValue(TenantLabel(e.tenant)),
                   " request_id=", QuoteLogValue(e.request_id), " status=", e.status,
                   " finish_reason=", e.finish_reason.empty() ? "-" : e.finish_reason,
                   " prompt_tokens=", e.prompt_tokens, " completion_tokens=", e.completion_tokens,
                   " cached_tokens=", e.cached_tokens, " queue_ms=", Millis(e.queue_time),
                   " ttft_ms=", Millis(e.time_to_first_token), " e2e_ms=", Millis(e.e2e));
  if (e.status != "OK") {
    absl::StrAppend(&line, " error=", QuoteLogValue(e.error.substr(0, kMaxErrorBytes)));
  }
  return line;
}

}  // namespace pagoda::server
