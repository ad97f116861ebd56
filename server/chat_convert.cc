#include "server/chat_convert.h"

#include "absl/status/status.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "server/request_convert.h"

namespace pagoda::server {

absl::StatusOr<internal::RawChatRequest> ParseRawChatRequest(const grpc::ByteBuffer& request) {
  internal::RawChatRequest raw;
  grpc::ByteBuffer copy(request);
  grpc::ProtoBufferReader reader(&copy);
  if (!raw.ParseFromZeroCopyStream(&reader)) {
    return absl::InvalidArgumentError("request: not a valid ChatRequest message");
  }
  return raw;
}

std::vector<engine::ChatMessage> ToEngineMessages(const internal::RawChatRequest& raw) {
  std::vector<engine::ChatMessage> messages;
  messages.reserve(raw.messages_size());
  for (const internal::RawChatMessage& m : raw.messages()) {
    messages.push_back({m.role(), m.content()});
  }
  return messages;
}

absl::StatusOr<engine::GenerationRequest> ParseChatRequest(const grpc::ByteBuffer& request,
                                                           std::string* request_id) {
  absl::StatusOr<internal::RawChatRequest> raw = ParseRawChatRequest(request);
  if (!raw.ok()) return raw.status();
  *request_id = raw->params().request_id();
  if (!raw->params().prompt().empty() || raw->params().prompt_token_ids_size() > 0) {
    return absl::InvalidArgumentError(
        "params.prompt: a chat request takes messages; leave prompt and prompt_token_ids empty");
  }
  if (raw->messages_size() == 0) return absl::InvalidArgumentError("messages: is empty");
  absl::StatusOr<engine::GenerationRequest> r = ToEngineRequest(raw->params());
  if (!r.ok()) return r.status();
  r->messages = ToEngineMessages(*raw);
  r->add_generation_prompt = !raw->has_add_generation_prompt() || raw->add_generation_prompt();
  // Content may spell special tokens only when the caller asks for it explicitly.
  r->chat_content_special = raw->params().has_parse_special() && raw->params().parse_special();
  return r;
}

}  // namespace pagoda::server
