// The checks every generation passes at the server edge before any parsing (gRPC and HTTP
// alike): who the caller is and whether its token bucket has room.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/tenant_registry.h"

namespace pagoda::server {

// OK when `caller` authenticated and its bucket (if any) has tokens; else the
// authentication error, or ResourceExhausted naming the tenant's tokens_per_minute and
// carrying the bucket's delay as a RetryInfo payload (status_details.h).
absl::Status AdmitCaller(const absl::StatusOr<Caller>& caller);

}  // namespace pagoda::server
