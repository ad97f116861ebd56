#include "server/status_details.h"

#include <string>

#include "absl/strings/cord.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/support/error_details.h"

namespace pagoda::server {

absl::Status WithRetryDelay(absl::Status status, absl::Duration delay) {
  if (delay < absl::ZeroDuration()) delay = absl::ZeroDuration();
  google::rpc::RetryInfo info;
  const int64_t nanos = absl::ToInt64Nanoseconds(delay);
  info.mutable_retry_delay()->set_seconds(nanos / 1'000'000'000);
  info.mutable_retry_delay()->set_nanos(static_cast<int32_t>(nanos % 1'000'000'000));
  status.SetPayload(kRetryInfoTypeUrl, absl::Cord(info.SerializeAsString()));
  return status;
}

std::optional<absl::Duration> RetryDelayOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kRetryInfoTypeUrl);
  google::rpc::RetryInfo info;
  if (!payload.has_value() || !info.ParseFromString(std::string(*payload))) return std::nullopt;
  return absl::Seconds(info.retry_delay().seconds()) +
         absl::Nanoseconds(info.retry_delay().nanos());
}

grpc::Status ToGrpcStatusWithDetails(const absl::Status& status) {
  // absl and gRPC number their canonical codes identically.
  const auto code = static_cast<grpc::StatusCode>(status.code());
  const std::string message(status.message());
  if (status.code() != absl::StatusCode::kResourceExhausted) return grpc::Status(code, message);
  google::rpc::Status details;
  details.set_code(static_cast<int32_t>(code));
  details.set_message(message);
  const absl::Status with_delay =
      RetryDelayOf(status).has_value() ? status : WithRetryDelay(status, kDefaultRetryDelay);
  google::protobuf::Any* any = details.add_details();
  any->set_type_url(kRetryInfoTypeUrl);
  any->set_value(std::string(*with_delay.GetPayload(kRetryInfoTypeUrl)));
  grpc::Status out;
  grpc::SetErrorDetails(details, &out);
  return out;
}

}  // namespace pagoda::server
