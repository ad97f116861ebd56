#include "server/generation_service.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"
#include "pagoda/internal/raw_tokenize_request.pb.h"
#include "server/chat_convert.h"
#include "server/generate_reactor.h"
#include "server/request_convert.h"

namespace pagoda::server {
namespace {

grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

}  // namespace

GenerationService::GenerationService(engine::Engine* engine, ServerMetrics* metrics,
                                     std::string model_name, const TenantRegistry* tenants,
                                     int64_t max_unsent_bytes_per_stream)
    : engine_(engine),
      metrics_(metrics),
      model_name_(std::move(model_name)),
      tenants_(tenants),
      max_unsent_bytes_per_stream_(max_unsent_bytes_per_stream) {}

// Every method authenticates at its top, before any other work (docs/ARCHITECTURE.md says
// why here rather than in an AuthMetadataProcessor or an interceptor).
absl::StatusOr<Caller> GenerationService::Authenticate(grpc::CallbackServerContext* context) const {
  const auto& metadata = context->client_metadata();
  const auto it = metadata.find("authorization");
  std::optional<absl::string_view> value;
  if (it != metadata.end()) value = absl::string_view(it->second.data(), it->second.size());
  return tenants_->Authenticate(value);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerationService::StartStream(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request, RequestParser parse) {
  generate_calls_.fetch_add(1);
  return GenerateReactor::Start(request,
                                {.engine = engine_,
                                 .metrics = metrics_,
                                 .active_streams = &active_streams_,
                                 .drain = &drain_,
                                 .max_unsent_bytes = max_unsent_bytes_per_stream_,
                                 .parse = parse},
                                Authenticate(context));
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerationService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return StartStream(context, request, ParseGenerateRequest);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerationService::Chat(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return StartStream(context, request, ParseChatRequest);
}

grpc::ServerUnaryReactor* GenerationService::RenderChat(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  if (absl::StatusOr<Caller> caller = Authenticate(context); !caller.ok()) {
    return FinishUnary(context, ToGrpcStatus(caller.status()));
  }
  absl::StatusOr<internal::RawChatRequest> raw = ParseRawChatRequest(*request);
  if (!raw.ok()) return FinishUnary(context, ToGrpcStatus(raw.status()));
  absl::StatusOr<std::string> prompt = engine_->RenderChat(
      ToEngineMessages(*raw), !raw->has_add_generation_prompt() || raw->add_generation_prompt());
  if (!prompt.ok()) return FinishUnary(context, ToGrpcStatus(prompt.status()));
  v1::RenderChatResponse out;
  out.set_prompt(*std::move(prompt));
  grpc::ProtoBufferWriter writer(response, grpc::kProtoBufferWriterMaxBufferLength,
                                 static_cast<int>(out.ByteSizeLong()));
  out.SerializeToZeroCopyStream(&writer);
  return FinishUnary(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  if (absl::StatusOr<Caller> caller = Authenticate(context); !caller.ok()) {
    return FinishUnary(context, ToGrpcStatus(caller.status()));
  }
  internal::RawTokenizeRequest raw;
  grpc::ByteBuffer copy(*request);
  grpc::ProtoBufferReader reader(&copy);
  if (!raw.ParseFromZeroCopyStream(&reader)) {
    return FinishUnary(context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                             "request: not a valid TokenizeRequest message"));
  }
  absl::StatusOr<std::vector<int32_t>> ids = engine_->Tokenize(
      raw.text(), raw.has_add_bos() ? std::optional<bool>(raw.add_bos()) : std::nullopt,
      !raw.has_parse_special() || raw.parse_special());
  if (!ids.ok()) return FinishUnary(context, ToGrpcStatus(ids.status()));
  v1::TokenizeResponse out;
  out.mutable_token_ids()->Add(ids->begin(), ids->end());
  grpc::ProtoBufferWriter writer(response, grpc::kProtoBufferWriterMaxBufferLength,
                                 static_cast<int>(out.ByteSizeLong()));
  out.SerializeToZeroCopyStream(&writer);
  return FinishUnary(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* GenerationService::Detokenize(grpc::CallbackServerContext* context,
                                                        const v1::DetokenizeRequest* request,
                                                        v1::DetokenizeResponse* response) {
  if (absl::StatusOr<Caller> caller = Authenticate(context); !caller.ok()) {
    return FinishUnary(context, ToGrpcStatus(caller.status()));
  }
  const std::vector<int32_t> ids(request->token_ids().begin(), request->token_ids().end());
  absl::StatusOr<std::string> text = engine_->Detokenize(ids);
  if (!text.ok()) return FinishUnary(context, ToGrpcStatus(text.status()));
  response->set_text(*std::move(text));
  return FinishUnary(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* context,
                                                          const v1::GetModelInfoRequest* request,
                                                          v1::ModelInfo* info) {
  if (absl::StatusOr<Caller> caller = Authenticate(context); !caller.ok()) {
    return FinishUnary(context, ToGrpcStatus(caller.status()));
  }
  const engine::ModelInfo m = engine_->model_info();
  const engine::EngineStats stats = engine_->Stats();
  info->set_model(model_name_);
  info->set_architecture(m.architecture);
  info->set_vocab_size(m.vocab_size);
  info->set_context_length(m.context_length);
  info->set_num_layers(m.num_layers);
  info->set_hidden_size(m.hidden_size);
  info->set_num_heads(m.num_heads);
  info->set_num_kv_heads(m.num_kv_heads);
  info->set_head_dim(m.head_dim);
  info->set_bos_token_id(m.bos_token_id);
  info->set_eos_token_id(m.eos_token_id);
  info->mutable_eog_token_ids()->Add(m.eog_token_ids.begin(), m.eog_token_ids.end());
  info->set_kv_cache_dtype(m.kv_cache_dtype);
  info->set_prefix_caching(m.prefix_caching);
  info->set_backend(m.backend);
  info->set_block_size(engine_->config().block_size);
  info->set_num_blocks(stats.num_blocks);
  info->set_max_batched_tokens(engine_->config().max_batched_tokens);
  info->set_max_seqs(engine_->config().max_seqs);
  return FinishUnary(context, grpc::Status::OK);
}

}  // namespace pagoda::server
