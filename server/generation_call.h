// One generation's life at the server edge, the same for both doors: from the moment its
// caller is known (or refused) to its last byte. It owns the caller and tenant, the timings,
// the token counts, the caller's token-bucket reservation, the verdicts that end a call
// early (refused, failed, cancelled by the client, over the unsent-bytes cap), the tenant's
// request metrics and the single access-log line. The doors keep only their framing: gRPC's
// GenerateStream (messages, one write in flight) and the HTTP session (JSON bodies, SSE).
//
// Not thread-safe: each door serializes its calls (gRPC under its stream's mutex, HTTP on
// the connection's strand). tokens() is thread-safe (the engine's admit hook runs it).
//
//   open ──Admit ok──▶ admitted ──Accepted──▶ running ──OnLast──▶ ended ──LogAccess──▶ logged
//     └──Admit refused / Fail / ClientGone / CutAtUnsentCap (any time before OnLast)──▶ ended
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "engine/engine_client.h"
#include "engine/request.h"
#include "server/metrics.h"
#include "server/tenant_registry.h"
#include "server/token_reservation.h"

namespace pagoda::server {

// Inter-token latency as both doors observe it: for a delivery of `n` tokens at `now` after
// an earlier one with tokens at `*last`, (now - *last) / n once per token; nothing for the
// request's first delivery. Updates `*last` when n > 0.
std::vector<double> TokenGaps(int64_t n, absl::Time now, absl::Time* last);

class GenerationCall {
 public:
  enum class Door { kGrpc, kHttp };  // HTTP's access-log lines start with "http "

  // A call that arrived at `start`; its metrics are `metrics`' (per tenant).
  GenerationCall(Door door, ServerMetrics* metrics, absl::Time start = absl::Now());
  // Writes the access-log line if no one did (a call dropped early still leaves one).
  ~GenerationCall();
  GenerationCall(const GenerationCall&) = delete;
  GenerationCall& operator=(const GenerationCall&) = delete;

  // Authentication and the rate limit, before any parsing: names the tenant (anonymous
  // until a caller authenticates) and opens its bucket reservation. A refusal ends the
  // call (Fail) and is returned.
  absl::Status Admit(const absl::StatusOr<Caller>& caller);
  // The caller's bucket hold; the engine request's admit hook reserves through it.
  TokenReservation& tokens() { return *tokens_; }
  // The request id as the client sent it (for the log line of a refusal).
  void set_request_id(std::string id) { request_id_ = std::move(id); }
  // `us` microseconds of CPU spent preparing the request on a thread of the door's (gRPC:
  // parsing and submitting; the HTTP door counts its preparation jobs itself), charged to
  // the tenant (TenantMetrics::preparation_cpu_us).
  void AddPreparationCpu(int64_t us) { tenant_metrics_->preparation_cpu_us.fetch_add(us); }
  // The engine accepted the request: its id and prompt tokens count from here.
  void Accepted(const engine::SubmitResult& submitted);
  // The engine delivered `n` completion tokens (counted against the bucket and the tenant
  // whether or not the client still reads); `gaps` are their inter-token latencies.
  void OnTokens(int64_t n, absl::Span<const double> gaps);
  // The engine's last output: the bucket settles; unless the call already ended, it ends
  // here with the engine's verdict (`error` for kError) and its finish metrics.
  void OnLast(engine::FinishReason reason, const absl::Status& error, const engine::Usage& usage);
  // Ends the call with `status` before (or instead of) the engine's answer: a refusal,
  // a failure on the way, the server going away. Counted as a failure by status code.
  void Fail(absl::Status status);
  // The client cancelled or went away: CANCELLED with `why`, counted as cancelled when the
  // engine was still at work. True when the engine request must be aborted (accepted, not
  // done, not ended already).
  bool ClientGone(absl::string_view why);
  // `unsent` output bytes the client has not taken exceed `cap`: RESOURCE_EXHAUSTED naming
  // the cap (after `what`, e.g. "client is not reading"; `hint` is appended), counted as
  // such. Returns the status. The caller aborts the engine request.
  absl::Status CutAtUnsentCap(int64_t unsent, int64_t cap, absl::string_view what,
                              absl::string_view hint = "");
  // Writes the access-log line (docs/API.md); later calls do nothing.
  void LogAccess();

  bool ended() const { return status_.has_value(); }
  bool accepted() const { return accepted_; }
  bool engine_done() const { return engine_done_; }
  // The final status; OK until the call ended.
  absl::Status status() const { return status_.value_or(absl::OkStatus()); }
  const std::string& tenant() const { return tenant_; }
  const std::string& request_id() const { return request_id_; }
  int32_t completion_tokens() const { return completion_tokens_; }
  absl::Time start() const { return start_; }

 private:
  void End(absl::Status status);

  const Door door_;
  ServerMetrics* const metrics_;
  const absl::Time start_;
  std::unique_ptr<TokenReservation> tokens_;  // an unlimited one until Admit names a bucket
  std::string tenant_;                        // "" = anonymous
  TenantMetrics* tenant_metrics_;
  std::string request_id_;
  bool accepted_ = false;
  bool engine_done_ = false;
  bool logged_ = false;
  int32_t prompt_tokens_ = 0;
  int32_t completion_tokens_ = 0;
  std::optional<absl::Status> status_;  // set once the call ended
  engine::FinishReason finish_reason_ = engine::FinishReason::kNone;
  std::optional<engine::Usage> usage_;          // the engine's last output's
  absl::Time end_time_ = absl::InfinitePast();  // when it ended
};

}  // namespace pagoda::server
