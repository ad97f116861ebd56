// One Generate stream as an explicit state machine, apart from gRPC: it parses, admits and
// submits the request to an engine::EngineClient, queues what the engine delivers (one
// write in flight, later chunks merged), bounds the bytes its client leaves unread and
// finishes with the right status. GenerateReactor is its gRPC shell; tests drive it with a
// fake engine and a fake transport (tests/generate_stream_test.cc).
//
//   kStarted ──accepted──▶ kStreaming ──last output / error / unsent cap──▶ kFinishing
//      │ refused, or an exception in setup (INTERNAL)                          │
//      └──────────────────────────────▶ kFinishing ──queue written──▶ kFinished ──▶ kDrained
//   kStarted/kStreaming/kFinishing ──client cancelled or a write failed──▶ kCancelled ─▶ kFinished
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "engine/engine_client.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"
#include "pagoda/v1/generation.pb.h"
#include "server/generation_call.h"
#include "server/metrics.h"
#include "server/stream_limits.h"
#include "server/tenant_registry.h"
#include "server/token_reservation.h"

namespace pagoda::server {

// Shared by a service's streams. Once a drain deadline is set, a stream cancelled after it
// before the engine finished it (gRPC's shutdown cancels the calls still open then) counts
// as cut off.
struct DrainCounter {
  std::atomic<int64_t> deadline_unix_ns{std::numeric_limits<int64_t>::max()};
  std::atomic<int64_t> cut{0};
};

// Parses a stream's request message into the engine request; `request_id` receives the id
// as sent (for the access log) even when the conversion fails.
using RequestParser = absl::StatusOr<engine::GenerationRequest> (*)(const grpc::ByteBuffer& request,
                                                                    std::string* request_id);

// What a stream needs from the service around it.
struct StreamDeps {
  engine::EngineClient* engine = nullptr;
  ServerMetrics* metrics = nullptr;
  std::atomic<int64_t>* active_streams = nullptr;  // +1 while the stream is not drained
  DrainCounter* drain = nullptr;
  // Output bytes queued or in flight that the client has not taken; beyond it the request
  // is aborted with RESOURCE_EXHAUSTED naming the limit. 0 = no limit.
  int64_t max_unsent_bytes = kDefaultMaxUnsentBytesPerStream;
  RequestParser parse = nullptr;  // null: a GenerateRequest (ParseGenerateRequest)
};

// Where a stream's messages and status go (gRPC's ServerWriteReactor in the daemon).
class StreamTransport {
 public:
  virtual ~StreamTransport() = default;
  // Sends `message` (valid until OnWriteDone); at most one write is in flight.
  virtual void StartWrite(const grpc::ByteBuffer* message) = 0;
  // Ends the stream with `status`; called once, never with a write in flight.
  virtual void Finish(const grpc::Status& status) = 0;
};

enum class StreamState {
  kStarted,    // created; the engine has not accepted the request yet
  kStreaming,  // accepted: writing what the engine delivers
  kFinishing,  // final status known (done, refused, failed, over the unsent cap): writing the rest
  kCancelled,  // the client went away: nothing more is written, the engine request is aborted
  kFinished,   // Finish called, waiting for OnDone
  kDrained,    // OnDone: the stream no longer counts as active
};
// "started", "streaming", "finishing", "cancelled", "finished" or "drained".
const char* StreamStateName(StreamState state);

class GenerateStream : public std::enable_shared_from_this<GenerateStream> {
 public:
  // A stream for `caller` (an error status: refused at Start) writing to `transport`,
  // which must stay valid until OnDone; counts itself in deps.active_streams.
  static std::shared_ptr<GenerateStream> Create(const StreamDeps& deps,
                                                absl::StatusOr<Caller> caller,
                                                StreamTransport* transport);
  ~GenerateStream();

  // Admits (authentication, rate), parses and submits `request`. A refusal finishes the
  // stream with its status; an exception thrown on the way finishes it INTERNAL naming
  // the exception (the engine request, if accepted, is aborted).
  void Start(const grpc::ByteBuffer& request);
  // The transport's events.
  void OnWriteDone(bool ok);
  void OnCancel();
  void OnDone();
  // One output of the request (the engine thread, through the sink Start gave it).
  void Deliver(engine::GenerationOutput output);

  StreamState state() const;
  // Every state taken so far, in order, starting with kStarted.
  std::vector<StreamState> history() const;
  // Output bytes queued or in flight now.
  int64_t unsent_bytes() const;

 private:
  struct Pending {
    v1::GenerateResponse response;
    bool mergeable;     // a chunk that later chunks may be folded into
    int64_t bytes = 0;  // serialized size of the parts folded into it
  };
  enum class Action { kNone, kWrite, kFinish };

  GenerateStream(const StreamDeps& deps, absl::StatusOr<Caller> caller, StreamTransport* transport);
  void Begin(const grpc::ByteBuffer& request);
  // Finishes the stream with `status` before (or instead of) the engine's answer, aborting
  // the engine request if it was accepted.
  void Fail(const absl::Status& status);
  void SetStateLocked(StreamState next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool FinishPendingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Picks the next transport operation; sets the state it implies.
  Action NextActionLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Perform(Action action);
  void Enqueue(v1::GenerateResponse response, bool mergeable) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Over the unsent cap: drops the queue, finishes RESOURCE_EXHAUSTED. True when the engine
  // request must be aborted.
  bool OverUnsentCapLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when the engine request must be aborted now; before the engine accepted it,
  // records that Begin must abort it then.
  bool AbortLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The client cancelled or its stream broke: drop pending output, finish CANCELLED.
  // Returns true (once) when the engine request must be aborted.
  bool ClientGoneLocked(const char* why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const StreamDeps deps_;
  const absl::StatusOr<Caller> caller_;  // who sent the request (set before any delivery)
  StreamTransport* const transport_;     // not called after Finish

  mutable Mutex mu_;
  // Caller, tenant, bucket, timings, counts, metrics and the access log (generation_call.h);
  // its status is the one the stream finishes with.
  GenerationCall call_ ABSL_GUARDED_BY(mu_);
  StreamState state_ ABSL_GUARDED_BY(mu_) = StreamState::kStarted;
  std::vector<StreamState> history_ ABSL_GUARDED_BY(mu_) = {StreamState::kStarted};
  engine::RequestHandle handle_ ABSL_GUARDED_BY(mu_) = 0;
  bool submitted_ ABSL_GUARDED_BY(mu_) = false;      // the engine accepted the request
  bool begun_ ABSL_GUARDED_BY(mu_) = false;          // Start's submission attempt is over
  bool engine_done_ ABSL_GUARDED_BY(mu_) = false;    // the engine delivered its last output
  bool abort_pending_ ABSL_GUARDED_BY(mu_) = false;  // to abort once accepted
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  int64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::ByteBuffer current_ ABSL_GUARDED_BY(mu_);  // the write in flight
  int64_t current_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_token_time_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace pagoda::server
