// One Generate stream on gRPC's callback API: a ServerWriteReactor that hands its events to
// a GenerateStream (the state machine) and performs the writes and the Finish it asks for.
#pragma once

#include <memory>

#include "grpcpp/grpcpp.h"
#include "server/generate_stream.h"
#include "server/tenant_registry.h"

namespace pagoda::server {

class GenerateReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                              private StreamTransport {
 public:
  // Starts the stream of `request` for `caller` (GenerateStream::Start: errors, exceptions
  // included, finish the stream with their status). The reactor deletes itself in OnDone.
  static GenerateReactor* Start(const grpc::ByteBuffer* request, const StreamDeps& deps,
                                absl::StatusOr<Caller> caller);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  GenerateReactor() = default;
  // StreamTransport.
  void StartWrite(const grpc::ByteBuffer* message) override;
  void Finish(const grpc::Status& status) override;

  std::shared_ptr<GenerateStream> stream_;  // null only when it could not be made
};

}  // namespace pagoda::server
