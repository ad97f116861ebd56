// Error details at the server edge: a retry delay rides on an absl::Status as a
// google.rpc.RetryInfo payload and reaches the client as grpc-status-details-bin.
#pragma once

#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/support/status.h"

namespace pagoda::server {

// The type URL of google.rpc.RetryInfo (the payload key and the Any type URL).
inline constexpr char kRetryInfoTypeUrl[] = "type.googleapis.com/google.rpc.RetryInfo";
// The retry delay sent with a RESOURCE_EXHAUSTED that names none (the engine's queue and
// concurrency limits, which free up as soon as a request finishes).
inline constexpr absl::Duration kDefaultRetryDelay = absl::Seconds(1);

// `status` carrying a RetryInfo payload that asks the client to wait `delay` (>= 0).
absl::Status WithRetryDelay(absl::Status status, absl::Duration delay);
// The delay of the RetryInfo payload `status` carries; nullopt when it has none.
std::optional<absl::Duration> RetryDelayOf(const absl::Status& status);
// The gRPC status with the same code and message. A RESOURCE_EXHAUSTED gets google.rpc.Status
// details holding a RetryInfo: its own delay, else kDefaultRetryDelay.
grpc::Status ToGrpcStatusWithDetails(const absl::Status& status);

}  // namespace pagoda::server
