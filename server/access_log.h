// The access log: one info-level line per finished or rejected Generate request. It names
// the tenant and the client's request id, never the API key or the prompt text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace pagoda::server {

struct AccessLogEntry {
  absl::string_view tenant;         // engine tenant name; "" = anonymous
  absl::string_view request_id;     // client-supplied or generated; "" before acceptance
  absl::string_view status;         // gRPC status code name ("OK", "CANCELLED", ...)
  absl::string_view finish_reason;  // "stop", "length", ... ; "" when none
  absl::string_view error;          // the status message when not OK
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;
  std::optional<absl::Duration> queue_time;  // unset when the request never ran
  std::optional<absl::Duration> time_to_first_token;
  absl::Duration e2e;  // arrival to the last output (or to the rejection)
};

// `s` in double quotes, with \, " and every control character escaped (\n, \r, \t,
// \xHH for other C0 and DEL, \u{HHHH} for C1, U+2028 and U+2029), so that no value can
// start a new log line.
std::string QuoteLogValue(absl::string_view s);
// The line (no trailing newline), logfmt style:
// `access tenant="a" request_id="r1" status=OK finish_reason=stop prompt_tokens=5
// completion_tokens=8 cached_tokens=0 queue_ms=1.250 ttft_ms=3.000 e2e_ms=20.000`
// (times "-" when unset; `error="..."` appended when not OK).
std::string FormatAccessLog(const AccessLogEntry& entry);

}  // namespace pagoda::server
