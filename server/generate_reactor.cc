#include "server/generate_reactor.h"

#include "absl/strings/str_cat.h"
#include "server/access_log.h"
#include "server/admission.h"
#include "server/request_convert.h"
#include "server/status_details.h"
#include "spdlog/spdlog.h"

namespace pagoda::server {
namespace {

// Hands engine deliveries to the reactor; holds it alive until the engine lets go.
class ReactorSink final : public engine::OutputSink {
 public:
  explicit ReactorSink(std::shared_ptr<GenerateReactor> reactor) : reactor_(std::move(reactor)) {}
  void OnOutput(engine::GenerationOutput output) override { reactor_->Deliver(std::move(output)); }

 private:
  std::shared_ptr<GenerateReactor> reactor_;
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
  if (!next.finish_reason().empty()) into->set_finish_reason(next.finish_reason());
  if (next.has_usage()) *into->mutable_usage() = next.usage();
}

}  // namespace

GenerateReactor::GenerateReactor(const StreamDeps& deps, absl::StatusOr<Caller> caller)
    : deps_(deps), caller_(std::move(caller)), tenant_metrics_(&deps.metrics->ForTenant("")) {
  deps_.active_streams->fetch_add(1);
}

void GenerateReactor::SetTenant(const std::string& tenant) {
  tenant_ = tenant;
  tenant_metrics_ = &deps_.metrics->ForTenant(tenant);
}

GenerateReactor* GenerateReactor::Start(const grpc::ByteBuffer* request, const StreamDeps& deps,
                                        absl::StatusOr<Caller> caller) {
  std::shared_ptr<GenerateReactor> reactor(new GenerateReactor(deps, std::move(caller)));
  {
    MutexLock lock(&reactor->mu_);
    reactor->self_ = reactor;
  }
  reactor->Begin(request);
  return reactor.get();
}

void GenerateReactor::Reject(const absl::Status& status) {
  tenant_metrics_->request_failure.Inc(absl::StatusCodeToString(status.code()));
  {
    MutexLock lock(&mu_);
    final_status_ = ToGrpcStatus(status);
    end_time_ = absl::Now();
    finished_ = true;
  }
  Finish(ToGrpcStatus(status));
}

absl::Status GenerateReactor::Admit() const { return AdmitCaller(caller_); }

void GenerateReactor::Begin(const grpc::ByteBuffer* request) {
  if (caller_.ok()) SetTenant(caller_->tenant->engine.name);  // else counted as anonymous
  // Authentication and the rate limit come first: a refused caller costs no parsing,
  // tokenization or engine work.
  if (absl::Status admitted = Admit(); !admitted.ok()) {
    Reject(admitted);
    return;
  }
  std::string sent_id;
  absl::StatusOr<engine::GenerationRequest> converted =
      (deps_.parse != nullptr ? deps_.parse : ParseGenerateRequest)(*request, &sent_id);
  {
    MutexLock lock(&mu_);
    request_id_ = sent_id;  // for the access log of a rejection; the engine's wins
  }
  if (!converted.ok()) {
    Reject(converted.status());
    return;
  }
  converted->tenant = caller_->tenant->engine.name;  // never from the request body
  std::shared_ptr<GenerateReactor> self;
  {
    MutexLock lock(&mu_);  // OnDone releases self_
    self = self_;
  }
  absl::StatusOr<engine::SubmitResult> submitted =
      deps_.engine->Submit(*std::move(converted), std::make_shared<ReactorSink>(std::move(self)));
  if (!submitted.ok()) {
    Reject(submitted.status());
    return;
  }
  if (caller_->bucket) caller_->bucket->Charge(submitted->prompt_tokens);
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
    handle_ = submitted->handle;
    submitted_ = true;
    // Outputs the engine delivered before this point are queued already: the first
    // message goes in front of them, and they get the request id.
    for (Pending& p : queue_) p.response.set_request_id(request_id_);
    if (!client_gone_) queue_.push_front({std::move(first), false});
    accepting_ = true;
    abort_now = client_gone_ && !engine_done_;
    action = NextActionLocked();
  }
  if (abort_now) deps_.engine->Abort(submitted->handle);
  Perform(action);
}

void GenerateReactor::Enqueue(v1::GenerateResponse response, bool mergeable) {
  // Only chunks of the same sample merge (n > 1 interleaves samples).
  if (writing_ && !queue_.empty() && queue_.back().mergeable &&
      queue_.back().response.index() == response.index()) {
    Merge(response, &queue_.back().response);
    return;
  }
  response.set_request_id(request_id_);
  queue_.push_back({std::move(response), mergeable});
}

void GenerateReactor::RecordDelivery(const engine::GenerationOutput& output) {
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

void GenerateReactor::Deliver(engine::GenerationOutput output) {
  Action action;
  {
    MutexLock lock(&mu_);
    if (output.finished()) engine_done_ = true;
    // Completion tokens count against the tenant's rate whether or not anyone still reads.
    if (caller_->bucket) caller_->bucket->Charge(static_cast<int64_t>(output.token_ids.size()));
    if (finished_ || finish_pending_) return;  // cancelled: nobody is listening
    RecordDelivery(output);
    if (output.finish_reason == engine::FinishReason::kError) {
      spdlog::warn("[{}] failed: {}", QuoteLogValue(request_id_),
                   QuoteLogValue(output.error.message()));
      final_status_ = ToGrpcStatus(output.error);
      finish_pending_ = true;
    } else {
      v1::GenerateResponse response;
      ToResponse(output, &response);
      Enqueue(std::move(response), true);
      if (output.finished()) {
        spdlog::debug("[{}] finished: {}, {} tokens", QuoteLogValue(request_id_),
                      engine::FinishReasonName(output.finish_reason),
                      output.usage.completion_tokens);
        final_status_ = grpc::Status::OK;
        finish_pending_ = true;
      }
    }
    action = NextActionLocked();
  }
  Perform(action);
}

GenerateReactor::Action GenerateReactor::NextActionLocked() {
  if (writing_ || finished_ || !accepting_) return Action::kNone;
  if (!queue_.empty()) {
    current_ = Serialize(queue_.front().response);
    queue_.pop_front();
    writing_ = true;
    return Action::kWrite;
  }
  if (finish_pending_) {
    finished_ = true;
    return Action::kFinish;
  }
  return Action::kNone;
}

void GenerateReactor::Perform(Action action) {
  if (action == Action::kWrite) {
    StartWrite(&current_);
  } else if (action == Action::kFinish) {
    grpc::Status status;
    {
      MutexLock lock(&mu_);
      status = final_status_;
    }
    Finish(status);
  }
}

void GenerateReactor::OnWriteDone(bool ok) {
  Action action;
  bool abort_now = false;
  engine::RequestHandle handle;
  {
    MutexLock lock(&mu_);
    handle = handle_;
    writing_ = false;
    // A failed write means the client went away: stop the engine work too.
    if (!ok) abort_now = ClientGoneLocked("stream closed by the client");
    action = NextActionLocked();
  }
  if (abort_now) deps_.engine->Abort(handle);
  Perform(action);
}

void GenerateReactor::OnCancel() {
  Action action;
  bool abort_now;
  engine::RequestHandle handle;
  {
    MutexLock lock(&mu_);
    handle = handle_;
    if (!engine_done_ && !client_gone_ &&
        absl::ToUnixNanos(absl::Now()) >= deps_.drain->deadline_unix_ns.load()) {
      deps_.drain->cut.fetch_add(1);
    }
    abort_now = ClientGoneLocked("cancelled");
    action = NextActionLocked();
  }
  if (abort_now) deps_.engine->Abort(handle);
  Perform(action);
}

bool GenerateReactor::ClientGoneLocked(const char* why) {
  if (client_gone_) return false;
  client_gone_ = true;
  queue_.clear();
  if (!finish_pending_) {
    final_status_ = grpc::Status(grpc::StatusCode::CANCELLED, why);
    finish_pending_ = true;
  }
  if (engine_done_) return false;
  tenant_metrics_->requests_cancelled.fetch_add(1);
  spdlog::debug("[{}] {}", QuoteLogValue(request_id_), why);
  return submitted_;  // otherwise Begin() aborts once the submission returns
}

void GenerateReactor::LogAccessLocked() {
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

void GenerateReactor::OnDone() {
  std::shared_ptr<GenerateReactor> keep;  // may be the last reference: released last
  MutexLock lock(&mu_);
  LogAccessLocked();
  deps_.active_streams->fetch_sub(1);
  keep = std::move(self_);
}

}  // namespace pagoda::server
