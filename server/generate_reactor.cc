#include "server/generate_reactor.h"

#include <exception>

#include "absl/strings/str_cat.h"

namespace pagoda::server {

GenerateReactor* GenerateReactor::Start(const grpc::ByteBuffer* request, const StreamDeps& deps,
                                        absl::StatusOr<Caller> caller) {
  auto* reactor = new GenerateReactor();
  try {
    reactor->stream_ = GenerateStream::Create(deps, std::move(caller), reactor);
  } catch (const std::exception& e) {
    // No stream, so nothing counts this call as active: finish it here.
    reactor->ServerWriteReactor::Finish(grpc::Status(
        grpc::StatusCode::INTERNAL, absl::StrCat("Generate setup failed: ", e.what())));
    return reactor;
  }
  reactor->stream_->Start(*request);
  return reactor;
}

void GenerateReactor::StartWrite(const grpc::ByteBuffer* message) {
  ServerWriteReactor::StartWrite(message);
}

void GenerateReactor::Finish(const grpc::Status& status) { ServerWriteReactor::Finish(status); }

void GenerateReactor::OnWriteDone(bool ok) { stream_->OnWriteDone(ok); }

void GenerateReactor::OnCancel() {
  if (stream_) stream_->OnCancel();
}

void GenerateReactor::OnDone() {
  if (stream_) stream_->OnDone();
  delete this;  // the engine's sink may keep the stream a little longer; it never calls us
}

}  // namespace pagoda::server
