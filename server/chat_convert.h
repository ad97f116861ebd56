// Chat requests at the gRPC edge: the raw ChatRequest / RenderChatRequest twins to engine
// messages and requests.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/request.h"
#include "grpcpp/support/byte_buffer.h"
#include "pagoda/internal/raw_chat_request.pb.h"

namespace pagoda::server {

// The engine request a serialized ChatRequest describes (a RequestParser): its params as
// for Generate plus the messages. InvalidArgument when it does not parse, when params set
// a prompt, or as ToEngineRequest; `request_id` receives params.request_id as sent.
absl::StatusOr<engine::GenerationRequest> ParseChatRequest(const grpc::ByteBuffer& request,
                                                           std::string* request_id);

// Parses a serialized RenderChatRequest (or ChatRequest); InvalidArgument when it does not.
absl::StatusOr<internal::RawChatRequest> ParseRawChatRequest(const grpc::ByteBuffer& request);

// The engine's messages (bytes as sent; the engine checks UTF-8).
std::vector<engine::ChatMessage> ToEngineMessages(const internal::RawChatRequest& raw);

}  // namespace pagoda::server
