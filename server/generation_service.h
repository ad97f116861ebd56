// The pagoda.v1.Generation service on gRPC's callback API. Generate and Tokenize are
// registered raw (they parse their requests themselves, so invalid UTF-8 is an
// INVALID_ARGUMENT naming the field: see raw_generate_request.proto); the others are typed.
// It reaches the model only through the engine API.
#pragma once

#include <atomic>
#include <string>

#include "engine/engine.h"
#include "pagoda/v1/generation.grpc.pb.h"
#include "server/generate_reactor.h"
#include "server/metrics.h"
#include "server/tenant_registry.h"

namespace pagoda::server {

class GenerationService final : public v1::Generation::WithRawCallbackMethod_Generate<
                                    v1::Generation::WithRawCallbackMethod_Chat<
                                        v1::Generation::WithRawCallbackMethod_RenderChat<
                                            v1::Generation::WithRawCallbackMethod_Tokenize<
                                                v1::Generation::CallbackService>>>> {
 public:
  // Serves `engine` to the callers `tenants` authenticates (both must outlive it); a
  // Generate or Chat stream whose client leaves more than `max_unsent_bytes_per_stream` unread
  // (0 = no limit) is aborted with RESOURCE_EXHAUSTED.
  GenerationService(engine::Engine* engine, ServerMetrics* metrics, std::string model_name,
                    const TenantRegistry* tenants,
                    int64_t max_unsent_bytes_per_stream = kDefaultMaxUnsentBytesPerStream);

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request) override;
  // Generate with the prompt the chat template makes of the messages (same stream).
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Chat(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* RenderChat(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* context,
                                       const v1::DetokenizeRequest* request,
                                       v1::DetokenizeResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override;

  // Generate and Chat streams not yet done.
  int64_t active_streams() const { return active_streams_.load(); }
  // Generate and Chat calls that reached this service since it was made.
  int64_t generate_calls() const { return generate_calls_.load(); }
  // From `deadline` on, streams cancelled before their end count as cut off by a drain.
  void SetDrainDeadline(absl::Time deadline) {
    drain_.deadline_unix_ns.store(absl::ToUnixNanos(deadline));
  }
  // Streams cut off after the drain deadline.
  int64_t streams_cut() const { return drain_.cut.load(); }

 private:
  // A Generate or Chat stream for `request`, read by `parse`, with this service's deps.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* StartStream(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request,
                                                          RequestParser parse);

  // The caller the request's `authorization` metadata names (see TenantRegistry).
  absl::StatusOr<Caller> Authenticate(grpc::CallbackServerContext* context) const;

  engine::Engine* engine_;
  ServerMetrics* metrics_;
  std::string model_name_;
  const TenantRegistry* tenants_;
  int64_t max_unsent_bytes_per_stream_;
  std::atomic<int64_t> active_streams_{0};
  std::atomic<int64_t> generate_calls_{0};
  DrainCounter drain_;
};

}  // namespace pagoda::server
