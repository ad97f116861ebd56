#include "bench/stream_call.h"

#include <chrono>
#include <utility>

namespace pagoda::bench {
namespace {

class StreamCall : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  StreamCall(const CallOptions& options, const v1::GenerateRequest& request, RequestRecord* record,
             std::function<void()> done)
      : request_(request), record_(record), done_(std::move(done)) {
    AddApiKey(&context_, options.api_key);
    if (options.request_timeout_s > 0) {
      context_.set_deadline(
          std::chrono::system_clock::now() +
          std::chrono::microseconds(static_cast<int64_t>(options.request_timeout_s * 1e6)));
    }
  }

  void Start(v1::Generation::Stub* stub) {
    stub->async()->Generate(&context_, &request_, this);
    StartRead(&response_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    const double now = NowSeconds();
    if (response_.token_ids_size() > 0) {
      record_->chunk_times.push_back(now);
      record_->chunk_tokens.push_back(response_.token_ids_size());
    }
    if (response_.has_usage()) {
      const v1::Usage& usage = response_.usage();
      if (usage.prompt_tokens() > 0) record_->prompt_tokens = usage.prompt_tokens();
      if (usage.completion_tokens() > 0) record_->completion_tokens = usage.completion_tokens();
      if (usage.cached_tokens() > 0) record_->cached_tokens = usage.cached_tokens();
    }
    if (!response_.finish_reason().empty()) record_->finish_reason = response_.finish_reason();
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    record_->end_time = NowSeconds();
    if (!status.ok()) {
      record_->status = StatusCodeName(status.error_code());
      record_->error = status.error_message();
    } else if (record_->finish_reason == "abort") {
      record_->status = "ABORTED";
      record_->error = "the server aborted the request (finish_reason \"abort\")";
    }
    std::function<void()> done = std::move(done_);
    delete this;
    done();
  }

 private:
  grpc::ClientContext context_;
  v1::GenerateRequest request_;
  v1::GenerateResponse response_;
  RequestRecord* record_;
  std::function<void()> done_;
};

}  // namespace

void AddApiKey(grpc::ClientContext* context, const std::string& api_key) {
  if (!api_key.empty()) context->AddMetadata("authorization", "Bearer " + api_key);
}

std::string StatusCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "CODE_" + std::to_string(static_cast<int>(code));
  }
}

void StartStreamCall(v1::Generation::Stub* stub, const CallOptions& options,
                     const v1::GenerateRequest& request, RequestRecord* record,
                     std::function<void()> done) {
  auto* call = new StreamCall(options, request, record, std::move(done));
  call->Start(stub);
}

}  // namespace pagoda::bench
