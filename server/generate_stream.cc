#include "server/generate_stream.h"

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/thread_cpu.h"
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
      transport_(transport),
      call_(GenerationCall::Door::kGrpc, deps.metrics) {}

GenerateStream::~GenerateStream() = default;

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
  Action action = Action::kNone;
  bool abort_now = false;
  engine::RequestHandle handle = 0;
  {
    MutexLock lock(&mu_);
    begun_ = true;
    if (state_ == StreamState::kFinished || state_ == StreamState::kDrained) return;
    call_.Fail(status);  // nothing when the call ended already (cancelled)
    if (state_ != StreamState::kCancelled) {
      queue_.clear();
      queued_bytes_ = 0;
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
  // Authentication and the rate limit come first: a refused caller costs no parsing,
  // tokenization or engine work.
  TokenReservation* tokens;
  absl::Status admitted;
  {
    MutexLock lock(&mu_);
    admitted = call_.Admit(caller_);  // names the tenant (else counted as anonymous)
    tokens = &call_.tokens();         // set by Admit, stable from here on; thread-safe
  }
  if (!admitted.ok()) return Fail(admitted);
  // This thread's work on the request until it is submitted (parsing, a grammar's start,
  // the template, tokenizing) is charged to the tenant, as the HTTP door's preparation is.
  const int64_t cpu_start = ThreadCpuMicros();
  struct Charge {
    GenerateStream* self;
    int64_t start;
    ~Charge() {
      MutexLock lock(&self->mu_);
      self->call_.AddPreparationCpu(ThreadCpuMicros() - start);
    }
  } charge{this, cpu_start};
  std::string sent_id;
  absl::StatusOr<engine::GenerationRequest> converted =
      (deps_.parse != nullptr ? deps_.parse : ParseGenerateRequest)(request, &sent_id);
  {
    MutexLock lock(&mu_);
    call_.set_request_id(sent_id);  // for the access log of a refusal; the engine's wins
  }
  if (!converted.ok()) return Fail(converted.status());
  converted->tenant = caller_->tenant->engine.name;  // never from the request body
  converted->admit = tokens->AdmitHook();
  absl::StatusOr<engine::SubmitResult> submitted =
      deps_.engine->Submit(*std::move(converted), std::make_shared<StreamSink>(shared_from_this()));
  if (!submitted.ok()) {
    tokens->Settle();  // reserved, perhaps, before a later check refused it
    return Fail(submitted.status());
  }
  {
    MutexLock lock(&mu_);
    handle_ = submitted->handle;
    submitted_ = true;  // from here on a failure aborts the engine request
  }
  spdlog::debug("[{}] accepted: {} prompt tokens", QuoteLogValue(submitted->request_id),
                submitted->prompt_tokens);
  v1::GenerateResponse first;
  first.set_request_id(submitted->request_id);
  first.mutable_usage()->set_prompt_tokens(submitted->prompt_tokens);
  Action action;
  bool abort_now;
  {
    MutexLock lock(&mu_);
    call_.Accepted(*submitted);
    // Outputs the engine delivered before this point are queued already: the first
    // message goes in front of them, and they get the request id.
    for (Pending& p : queue_) p.response.set_request_id(call_.request_id());
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
  response.set_request_id(call_.request_id());
  queue_.push_back({std::move(response), mergeable, bytes});
}

bool GenerateStream::OverUnsentCapLocked() {
  // Its status is the one the stream finishes with (call_.status()).
  call_
      .CutAtUnsentCap(queued_bytes_ + current_bytes_, deps_.max_unsent_bytes,
                      "client is not reading")
      .IgnoreError();
  queue_.clear();
  queued_bytes_ = 0;
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
    const auto n = static_cast<int64_t>(output.token_ids.size());
    call_.OnTokens(n, TokenGaps(n, absl::Now(), &last_token_time_));
    const bool open = state_ == StreamState::kStarted || state_ == StreamState::kStreaming;
    if (open && output.finish_reason == engine::FinishReason::kError) {
      spdlog::warn("[{}] failed: {}", QuoteLogValue(call_.request_id()),
                   QuoteLogValue(output.error.message()));
      SetStateLocked(StreamState::kFinishing);
    } else if (open) {
      v1::GenerateResponse response;
      ToResponse(output, &response);
      Enqueue(std::move(response), true);
      if (deps_.max_unsent_bytes > 0 && queued_bytes_ + current_bytes_ > deps_.max_unsent_bytes) {
        abort_now = OverUnsentCapLocked();
      } else if (last) {
        spdlog::debug("[{}] finished: {}, {} tokens", QuoteLogValue(call_.request_id()),
                      engine::FinishReasonName(output.finish_reason),
                      output.usage.completion_tokens);
        SetStateLocked(StreamState::kFinishing);
      }
    }
    // After the cap's verdict: a last output over the cap is cut, not finished.
    if (last) call_.OnLast(output.finish_reason, output.error, output.usage);
    if (!open) return;
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
      status = ToGrpcStatus(call_.status());
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
  call_.ClientGone(why);  // nothing when its verdict is known already (finishing)
  SetStateLocked(StreamState::kCancelled);
  if (engine_done_) return false;
  return AbortLocked();
}

void GenerateStream::OnDone() {
  MutexLock lock(&mu_);
  if (state_ == StreamState::kDrained) return;
  call_.LogAccess();
  SetStateLocked(StreamState::kDrained);
  deps_.active_streams->fetch_sub(1);
}

}  // namespace pagoda::server
