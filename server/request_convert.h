// Conversions at the server edge: wire requests to engine requests, engine outputs to wire
// responses, absl::Status to grpc::Status. Nothing below the server sees a proto or gRPC type.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "engine/request.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"
#include "pagoda/internal/raw_generate_request.pb.h"
#include "pagoda/v1/generation.pb.h"

namespace pagoda::server {

// The engine request a wire request describes. InvalidArgument (naming the field) for
// invalid UTF-8 in prompt/stop/request_id or for both prompt and prompt_token_ids set.
// Unset optional fields keep the engine defaults.
absl::StatusOr<engine::GenerationRequest> ToEngineRequest(const internal::RawGenerateRequest& raw);

// ToEngineRequest of a serialized GenerateRequest; `request_id` receives the id as sent
// (for the access log) even when the conversion fails. InvalidArgument when it does not
// parse.
absl::StatusOr<engine::GenerationRequest> ParseGenerateRequest(const grpc::ByteBuffer& request,
                                                               std::string* request_id);

// Fills `response` (request id aside) from one engine delivery: its sample's index, the
// sample's finish reason on its last delivery, the usage on the request's last.
void ToResponse(const engine::GenerationOutput& output, v1::GenerateResponse* response);

// The gRPC status carrying the same code and message (and a RetryInfo detail on
// RESOURCE_EXHAUSTED, see status_details.h).
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace pagoda::server
