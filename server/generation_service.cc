#include "server/generation_service.h"

#include "absl/strings/str_cat.h"
#include "model/llama_config.h"
#include "model/tokenizer.h"
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
                                     std::string model_name, const TenantRegistry* tenants)
    : engine_(engine), metrics_(metrics), model_name_(std::move(model_name)), tenants_(tenants) {}

// Every method authenticates at its top, before any other work (docs/ARCHITECTURE.md says
// why here rather than in an AuthMetadataProcessor or an interceptor).
absl::StatusOr<Caller> GenerationService::Authenticate(grpc::CallbackServerContext* context) const {
  const auto& metadata = context->client_metadata();
  const auto it = metadata.find("authorization");
  std::optional<absl::string_view> value;
  if (it != metadata.end()) value = absl::string_view(it->second.data(), it->second.size());
  return tenants_->Authenticate(value);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerationService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  generate_calls_.fetch_add(1);
  return GenerateReactor::Start(request,
                                {.engine = engine_,
                                 .metrics = metrics_,
                                 .active_streams = &active_streams_,
                                 .drain = &drain_},
                                Authenticate(context));
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* context,
                                                      const v1::TokenizeRequest* request,
                                                      v1::TokenizeResponse* response) {
  if (absl::StatusOr<Caller> caller = Authenticate(context); !caller.ok()) {
    return FinishUnary(context, ToGrpcStatus(caller.status()));
  }
  const model::Tokenizer& tok = engine_->tokenizer();
  const bool add_bos = request->has_add_bos() ? request->add_bos() : tok.add_bos();
  const bool parse_special = !request->has_parse_special() || request->parse_special();
  for (int32_t id : tok.Encode(request->text(), add_bos, parse_special)) {
    response->add_token_ids(id);
  }
  return FinishUnary(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* GenerationService::Detokenize(grpc::CallbackServerContext* context,
                                                        const v1::DetokenizeRequest* request,
                                                        v1::DetokenizeResponse* response) {
  if (absl::StatusOr<Caller> caller = Authenticate(context); !caller.ok()) {
    return FinishUnary(context, ToGrpcStatus(caller.status()));
  }
  const model::Tokenizer& tok = engine_->tokenizer();
  for (int i = 0; i < request->token_ids_size(); ++i) {
    const int32_t id = request->token_ids(i);
    if (id < 0 || id >= tok.vocab_size()) {
      return FinishUnary(context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                               absl::StrCat("token_ids: ", id, " at index ", i,
                                                            " is outside the vocabulary")));
    }
  }
  const std::vector<int32_t> ids(request->token_ids().begin(), request->token_ids().end());
  response->set_text(tok.Decode(ids, /*strip_leading_space=*/true));
  return FinishUnary(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* context,
                                                          const v1::GetModelInfoRequest* request,
                                                          v1::ModelInfo* info) {
  if (absl::StatusOr<Caller> caller = Authenticate(context); !caller.ok()) {
    return FinishUnary(context, ToGrpcStatus(caller.status()));
  }
  const model::LlamaConfig& c = engine_->model_config();
  const engine::EngineStats stats = engine_->Stats();
  info->set_model(model_name_);
  info->set_architecture(c.architecture);
  info->set_vocab_size(c.vocab_size);
  info->set_context_length(c.context_length);
  info->set_num_layers(c.num_layers);
  info->set_hidden_size(c.dim);
  info->set_num_heads(c.num_heads);
  info->set_num_kv_heads(c.num_kv_heads);
  info->set_head_dim(c.head_dim);
  info->set_bos_token_id(engine_->tokenizer().bos_id());
  info->set_eos_token_id(engine_->tokenizer().eos_id());
  info->set_backend(engine_->backend_name());
  info->set_block_size(engine_->config().block_size);
  info->set_num_blocks(stats.num_blocks);
  info->set_max_batched_tokens(engine_->config().max_batched_tokens);
  info->set_max_seqs(engine_->config().max_seqs);
  return FinishUnary(context, grpc::Status::OK);
}

}  // namespace pagoda::server
