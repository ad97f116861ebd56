// One Generate stream: a ServerWriteReactor with one write in flight and a small queue of
// pending responses, fed by the engine thread through an OutputSink. Reactions never block.
#pragma once

#include <atomic>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "common/mutex.h"
#include "engine/engine.h"
#include "grpcpp/grpcpp.h"
#include "pagoda/v1/generation.pb.h"
#include "server/metrics.h"
#include "server/tenant_registry.h"

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
  engine::Engine* engine = nullptr;
  ServerMetrics* metrics = nullptr;
  std::atomic<int64_t>* active_streams = nullptr;  // incremented while the reactor lives
  DrainCounter* drain = nullptr;
  RequestParser parse = nullptr;  // null: a GenerateRequest (ParseGenerateRequest)
};

class GenerateReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // Parses and validates the request and submits it to the engine for `caller`; errors
  // (including a failed authentication in `caller`, or the caller's token bucket being
  // empty) finish the stream at once. The reactor keeps itself alive until OnDone.
  static GenerateReactor* Start(const grpc::ByteBuffer* request, const StreamDeps& deps,
                                absl::StatusOr<Caller> caller);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;
  // Called by the engine thread with each delivery of this request.
  void Deliver(engine::GenerationOutput output);

 private:
  struct Pending {
    v1::GenerateResponse response;
    bool mergeable;  // a chunk that later chunks may be folded into
  };
  enum class Action { kNone, kWrite, kFinish };

  GenerateReactor(const StreamDeps& deps, absl::StatusOr<Caller> caller);
  void Begin(const grpc::ByteBuffer* request);
  // Unauthenticated, or ResourceExhausted with a retry delay when the caller's bucket is empty.
  absl::Status Admit() const;
  // Finishes the stream with `status` before it was accepted by the engine.
  void Reject(const absl::Status& status);
  // Names the request's tenant (engine name, "" = anonymous) for metrics and the access
  // log. Call before the request reaches the engine.
  void SetTenant(const std::string& tenant);
  // Writes the request's access-log line (docs/API.md).
  void LogAccessLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Picks the next gRPC operation; sets the state it implies.
  Action NextActionLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Perform(Action action);
  void Enqueue(v1::GenerateResponse response, bool mergeable) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecordDelivery(const engine::GenerationOutput& output) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The client cancelled or its stream broke: drop pending output, finish CANCELLED.
  // Returns true (once) when the engine request must be aborted.
  bool ClientGoneLocked(const char* why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  StreamDeps deps_;
  const absl::StatusOr<Caller> caller_;  // who sent the request (set before any delivery)
  std::shared_ptr<GenerateReactor> self_ ABSL_GUARDED_BY(mu_);  // released in OnDone
  const absl::Time start_time_ = absl::Now();
  // Set before the engine sees the request, read after: no lock needed.
  std::string tenant_;
  TenantMetrics* tenant_metrics_;

  Mutex mu_;
  std::string request_id_ ABSL_GUARDED_BY(mu_);
  engine::RequestHandle handle_ ABSL_GUARDED_BY(mu_) = 0;
  bool submitted_ ABSL_GUARDED_BY(mu_) = false;
  bool accepting_ ABSL_GUARDED_BY(mu_) = false;    // the first message is queued
  bool engine_done_ ABSL_GUARDED_BY(mu_) = false;  // the engine delivered its last output
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;  // cancelled, or a write failed
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish() called
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer current_ ABSL_GUARDED_BY(mu_);  // the write in flight
  absl::Time last_token_time_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // For the access log.
  int32_t prompt_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  int32_t completion_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<engine::Usage> final_usage_ ABSL_GUARDED_BY(mu_);  // from the last output
  engine::FinishReason finish_reason_ ABSL_GUARDED_BY(mu_) = engine::FinishReason::kNone;
  absl::Time end_time_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // last output or reject
};

}  // namespace pagoda::server
