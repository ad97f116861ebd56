#include "server/admission.h"

#include "absl/strings/str_cat.h"
#include "server/status_details.h"

namespace pagoda::server {

absl::Status AdmitCaller(const absl::StatusOr<Caller>& caller) {
  if (!caller.ok()) return caller.status();
  if (caller->bucket == nullptr) return absl::OkStatus();
  const absl::Duration wait = caller->bucket->TimeUntilAvailable();
  if (wait == absl::ZeroDuration()) return absl::OkStatus();
  return WithRetryDelay(
      absl::ResourceExhaustedError(absl::StrCat(
          "tenant \"", caller->tenant->engine.name, "\": tokens_per_minute (",
          caller->tenant->tokens_per_minute, ") exceeded; retry in ", absl::FormatDuration(wait))),
      wait);
}

}  // namespace pagoda::server
