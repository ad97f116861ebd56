#include "server/generate_stream.h"

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/access_log.h"
#include "server/admission.h"
#include "server/request_convert.h"
#include "server/status_details.h"
#include "spdlog/spdlog.h"

namespace pagoda::server {
namespace {

// Hands engine deliveries to the stream; holds it alive until the engine lets go.
class StreamSink final : public engine::OutputSink {
 public:
  explicit StreamSink(std::shared_ptr<GenerateStream> stream) : stream_(std::move(stream)) {}
  void OnOutput(engine::GenerationOutput output) override { stream_->Deliver(std::move(output)); }

 private:
  std::shared_ptr<GenerateStream> stream_;
};

grpc::ByteBuffer Serialize(const v1::GenerateResponse& response) {
  const std::string bytes = response.SerializeAsString();
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// Folds chunk `next` into `into`: tokens, text and logprobs append; a final status wins.
void Merge(const v1::GenerateResponse& next, v1::GenerateResponse* into) {
  into->mutable_token_ids()->MergeFrom(next.token_ids());
  into->mutable_text()->append(next.text());
  into->mutable_logprobs()->MergeFrom(next.logprobs());
  into->mutable_prompt_token_ids()->MergeFrom(next.prompt_token_ids());
  into->mutable_prompt_logprobs()->MergeFrom(next.prompt_logprobs());
  if (!next.finish_reason().empty()) into->set_finish_reason(next.finish_reason());
  if (next.has_usage()) *into->mutable_usage() = next.usage();
}

}  // namespace

const char* StreamStateName(StreamState state) {
  switch (state) {
    case StreamState::kStarted:
      return "started";
    case StreamState::kStreaming:
      return "streaming";
    case StreamState::kFinishing:
      return "finishing";
    case StreamState::kCancelled:
      return "cancelled";
    case StreamState::kFinished:
      return "finished";
    case StreamState::kDrained:
      return "drained";
  }
  return "";
}

std::shared_ptr<GenerateStream> GenerateStream::Create(const StreamDeps& deps,
                                                       absl::StatusOr<Caller> caller,
                                                       StreamTransport* transport) {
  std::shared_ptr<GenerateStream> stream(new GenerateStream(deps, std::move(caller), transport));
  deps.active_streams->fetch_add(1);  // last: nothing after it can throw
  return stream;
}

GenerateStream::GenerateStream(const StreamDeps& deps, absl::StatusOr<Caller> caller,
                               StreamTransport* transport)
    : deps_(deps),
      caller_(std::move(caller)),
      tokens_(caller_.ok() ? caller_->bucket : nullptr,
              caller_.ok() ? caller_->tenant->engine.name : ""),
      transport_(transport),
      tenant_metrics_(&deps.metrics->ForTenant("")) {}

GenerateStream::~GenerateStream() = default;

void GenerateStream::SetTenant(const std::string& tenant) {
  tenant_ = tenant;
  tenant_metrics_ = &deps_.metrics->ForTenant(tenant);
}

StreamState GenerateStream::state() const {
  MutexLock lock(&mu_);
  return state_;
}

std::vector<StreamState> GenerateStream::history() const {
  MutexLock lock(&mu_);
  return history_;
}

int64_t GenerateStream::unsent_bytes() const {
  MutexLock lock(&mu_);
  return queued_bytes_ + current_bytes_;
}

void GenerateStream::SetStateLocked(StreamState next) {
  if (next == state_) return;
  state_ = next;
  history_.push_back(next);
}

bool GenerateStream::FinishPendingLocked() const {
  return state_ == StreamState::kFinishing || state_ == StreamState::kCancelled;
}

absl::Status GenerateStream::Admit() const { return AdmitCaller(caller_); }

void GenerateStream::Start(const grpc::ByteBuffer& request) {
  // Nothing thrown here may escape to gRPC: it would answer an empty UNIMPLEMENTED and this
  // stream would never be drained (issue 14, finding 4).
  try {
    Begin(request);
  } catch (const std::exception& e) {
    Fail(absl::InternalError(absl::StrCat("Generate setup failed: ", e.what())));
  } catch (...) {
    Fail(absl::InternalError("Generate setup failed: unknown exception"));
  }
}

void GenerateStream::Fail(const absl::Status& status) {
  tenant_metrics_->request_failure.Inc(absl::StatusCodeToString(status.code()));
  Action action = Action::kNone;
  bool abort_now = false;
  engine::RequestHandle handle = 0;
  {
    MutexLock lock(&mu_);
    begun_ = true;
    if (state_ == StreamState::kFinished || state_ == StreamState::kDrained) return;
    if (state_ != StreamState::kCancelled) {
      queue_.clear();
      queued_bytes_ = 0;
      final_status_ = ToGrpcStatus(status);
      end_time_ = absl::Now();
      SetStateLocked(StreamState::kFinishing);
    }
    abort_now = submitted_ && !engine_done_;
    handle = handle_;
    action = NextActionLocked();
  }
  if (abort_now) deps_.engine->Abort(handle);
  Perform(action);
}

void GenerateStream::Begin(const grpc::ByteBuffer& request) {
  if (caller_.ok()) SetTenant(caller_->tenant->engine.name);  // else counted as anonymous
  // Authentication and the rate limit come first: a refused caller costs no parsing,
  // tokenization or engine work.
  if (absl::Status admitted = Admit(); !admitted.ok()) return Fail(admitted);
  std::string sent_id;
  absl::StatusOr<engine::GenerationRequest> converted =
      (deps_.parse != nullptr ? deps_.parse : ParseGenerateRequest)(request, &sent_id);
  {
    MutexLock lock(&mu_);
    request_id_ = sent_id;  // for the access log of a refusal; the engine's wins
  }
  if (!converted.ok()) return Fail(converted.status());
  converted->tenant = caller_->tenant->engine.name;  // never from the request body
  converted->admit = tokens_.AdmitHook();
  absl::StatusOr<engine::SubmitResult> submitted =
      deps_.engine->Submit(*std::move(converted), std::make_shared<StreamSink>(shared_from_this()));
  if (!submitted.ok()) {
    tokens_.Settle();  // reserved, perhaps, before a later check refused it
    return Fail(submitted.status());
  }
  {
    MutexLock lock(&mu_);
    handle_ = submitted->handle;
    submitted_ = true;  // from here on a failure aborts the engine request
  }
  tokens_.Use(submitted->prompt_tokens);
  tenant_metrics_->prompt_tokens.fetch_add(submitted->prompt_tokens);
  spdlog::debug("[{}] accepted: {} prompt tokens", QuoteLogValue(submitted->request_id),
                submitted->prompt_tokens);
  v1::GenerateResponse first;
  first.set_request_id(submitted->request_id);
  first.mutable_usage()->set_prompt_tokens(submitted->prompt_tokens);
  Action action;
  bool abort_now;
  {
    MutexLock lock(&mu_);
    request_id_ = submitted->request_id;
    prompt_tokens_ = submitted->prompt_tokens;
    // Outputs the engine delivered before this point are queued already: the first
    // message goes in front of them, and they get the request id.
    for (Pending& p : queue_) p.response.set_request_id(request_id_);
    if (state_ != StreamState::kCancelled) {
      const auto bytes = static_cast<int64_t>(first.ByteSizeLong());
      queue_.push_front({std::move(first), false, bytes});
      queued_bytes_ += bytes;
    }
    if (state_ == StreamState::kStarted) SetStateLocked(StreamState::kStreaming);
    begun_ = true;
    abort_now = abort_pending_ && !engine_done_;
    action = NextActionLocked();
  }
  if (abort_now) deps_.engine->Abort(submitted->handle);
  Perform(action);
}

void GenerateStream::Enqueue(v1::GenerateResponse response, bool mergeable) {
  const auto bytes = static_cast<int64_t>(response.ByteSizeLong());
  queued_bytes_ += bytes;
  // Only chunks of the same sample merge (n > 1 interleaves samples).
  if (writing_ && !queue_.empty() && queue_.back().mergeable &&
      queue_.back().response.index() == response.index()) {
    Merge(response, &queue_.back().response);
    queue_.back().bytes += bytes;
    return;
  }
  response.set_request_id(request_id_);
  queue_.push_back({std::move(response), mergeable, bytes});
}

void GenerateStream::RecordDelivery(const engine::GenerationOutput& output) {
  TenantMetrics& m = *tenant_metrics_;
  const size_t n = output.token_ids.size();
  if (n > 0) {
    const absl::Time now = absl::Now();
    completion_tokens_ += static_cast<int32_t>(n);
    m.generation_tokens.fetch_add(static_cast<int64_t>(n));
    if (last_token_time_ != absl::InfinitePast()) {
      const double gap = absl::ToDoubleSeconds(now - last_token_time_) / static_cast<double>(n);
      for (size_t i = 0; i < n; ++i) m.inter_token_latency.Observe(gap);
    }
    last_token_time_ = now;
  }
  if (!output.finished()) return;
  final_usage_ = output.usage;
  finish_reason_ = output.finish_reason;
  end_time_ = absl::Now();
  if (output.finish_reason == engine::FinishReason::kError) {
    m.request_failure.Inc(absl::StatusCodeToString(output.error.code()));
    return;
  }
  m.request_success.Inc(engine::FinishReasonName(output.finish_reason));
  m.e2e_request_latency.Observe(absl::ToDoubleSeconds(end_time_ - start_time_));
  m.request_queue_time.Observe(absl::ToDoubleSeconds(output.usage.queue_time));
  if (output.usage.completion_tokens > 0) {
    m.time_to_first_token.Observe(absl::ToDoubleSeconds(output.usage.time_to_first_token));
  }
}

bool GenerateStream::OverUnsentCapLocked() {
  const int64_t unsent = queued_bytes_ + current_bytes_;
  const std::string message =
      absl::StrCat("client is not reading: ", unsent, " bytes of output unsent exceed ",
                   deps_.max_unsent_bytes, " (max_unsent_bytes_per_stream)");
  spdlog::warn("[{}] aborted: {}", QuoteLogValue(request_id_), message);
  queue_.clear();
  queued_bytes_ = 0;
  final_status_ = ToGrpcStatus(absl::ResourceExhaustedError(message));
  end_time_ = absl::Now();
  tenant_metrics_->requests_unsent_limit.fetch_add(1);
  tenant_metrics_->request_failure.Inc(
      absl::StatusCodeToString(absl::StatusCode::kResourceExhausted));
  SetStateLocked(StreamState::kFinishing);
  return AbortLocked();
}

bool GenerateStream::AbortLocked() {
  if (engine_done_) return false;
  if (!submitted_) abort_pending_ = true;  // Begin aborts once the submission returns
  return submitted_;
}

void GenerateStream::Deliver(engine::GenerationOutput output) {
  Action action;
  bool abort_now = false;
  engine::RequestHandle handle;
  {
    MutexLock lock(&mu_);
    handle = handle_;
    const bool last = output.finished();
    if (last) engine_done_ = true;
    // Completion tokens count against the tenant's rate whether or not anyone still reads.
    tokens_.Use(static_cast<int64_t>(output.token_ids.size()));
    if (last) tokens_.Settle();
    if (state_ != StreamState::kStarted && state_ != StreamState::kStreaming) return;
    RecordDelivery(output);
    if (output.finish_reason == engine::FinishReason::kError) {
      spdlog::warn("[{}] failed: {}", QuoteLogValue(request_id_),
                   QuoteLogValue(output.error.message()));
      final_status_ = ToGrpcStatus(output.error);
      SetStateLocked(StreamState::kFinishing);
    } else {
      v1::GenerateResponse response;
      ToResponse(output, &response);
      Enqueue(std::move(response), true);
      if (deps_.max_unsent_bytes > 0 && queued_bytes_ + current_bytes_ > deps_.max_unsent_bytes) {
        abort_now = OverUnsentCapLocked();
      } else if (last) {
        spdlog::debug("[{}] finished: {}, {} tokens", QuoteLogValue(request_id_),
                      engine::FinishReasonName(output.finish_reason),
                      output.usage.completion_tokens);
        final_status_ = grpc::Status::OK;
        SetStateLocked(StreamState::kFinishing);
      }
    }
    action = NextActionLocked();
  }
  if (abort_now) deps_.engine->Abort(handle);
  Perform(action);
}

GenerateStream::Action GenerateStream::NextActionLocked() {
  if (writing_ || !begun_) return Action::kNone;
  if (state_ == StreamState::kFinished || state_ == StreamState::kDrained) return Action::kNone;
  if (!queue_.empty()) {
    current_ = Serialize(queue_.front().response);
    current_bytes_ = static_cast<int64_t>(current_.Length());
    queued_bytes_ -= queue_.front().bytes;
    queue_.pop_front();
    writing_ = true;
    return Action::kWrite;
  }
  if (FinishPendingLocked()) {
    SetStateLocked(StreamState::kFinished);
    return Action::kFinish;
  }
  return Action::kNone;
}

void GenerateStream::Perform(Action action) {
  if (action == Action::kWrite) {
    transport_->StartWrite(&current_);
  } else if (action == Action::kFinish) {
    grpc::Status status;
    {
      MutexLock lock(&mu_);
      status = final_status_;
    }
    transport_->Finish(status);
  }
}

void GenerateStream::OnWriteDone(bool ok) {
  Action action;
  bool abort_now = false;
  engine::RequestHandle handle;
  {
    MutexLock lock(&mu_);
    handle = handle_;
    writing_ = false;
    current_bytes_ = 0;
    // A failed write means the client went away: stop the engine work too.
    if (!ok) abort_now = ClientGoneLocked("stream closed by the client");
    action = NextActionLocked();
  }
  if (abort_now) deps_.engine->Abort(handle);
  Perform(action);
}

void GenerateStream::OnCancel() {
  Action action;
  bool abort_now;
  engine::RequestHandle handle;
  {
    MutexLock lock(&mu_);
    handle = handle_;
    if (!engine_done_ && state_ != StreamState::kCancelled &&
        absl::ToUnixNanos(absl::Now()) >= deps_.drain->deadline_unix_ns.load()) {
      deps_.drain->cut.fetch_add(1);
    }
    abort_now = ClientGoneLocked("cancelled");
    action = NextActionLocked();
  }
  if (abort_now) deps_.engine->Abort(handle);
  Perform(action);
}

bool GenerateStream::ClientGoneLocked(const char* why) {
  if (state_ == StreamState::kCancelled || state_ == StreamState::kFinished ||
      state_ == StreamState::kDrained) {
    return false;
  }
  queue_.clear();
  queued_bytes_ = 0;
  if (state_ != StreamState::kFinishing) {
    final_status_ = grpc::Status(grpc::StatusCode::CANCELLED, why);
  }
  SetStateLocked(StreamState::kCancelled);
  if (engine_done_) return false;
  tenant_metrics_->requests_cancelled.fetch_add(1);
  spdlog::debug("[{}] {}", QuoteLogValue(request_id_), why);
  return AbortLocked();
}

void GenerateStream::LogAccessLocked() {
  // grpc::StatusCode and absl::StatusCode share their values.
  const std::string status =
      absl::StatusCodeToString(static_cast<absl::StatusCode>(final_status_.error_code()));
  const std::string error = final_status_.error_message();  // returned by value
  AccessLogEntry e{
      .tenant = tenant_,
      .request_id = request_id_,
      .status = status,
      .finish_reason = engine::FinishReasonName(finish_reason_),
      .error = error,
      .prompt_tokens = prompt_tokens_,
      .completion_tokens = completion_tokens_,
      .e2e = (end_time_ == absl::InfinitePast() ? absl::Now() : end_time_) - start_time_};
  if (final_usage_.has_value()) {
    e.cached_tokens = final_usage_->cached_tokens;
    e.queue_time = final_usage_->queue_time;
    if (final_usage_->completion_tokens > 0) {
      e.time_to_first_token = final_usage_->time_to_first_token;
    }
  }
  spdlog::info("{}", FormatAccessLog(e));
}

void GenerateStream::OnDone() {
  MutexLock lock(&mu_);
  if (state_ == StreamState::kDrained) return;
  LogAccessLocked();
  SetStateLocked(StreamState::kDrained);
  deps_.active_streams->fetch_sub(1);
}

}  // namespace pagoda::server
