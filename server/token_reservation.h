// One request's hold on its tenant's token bucket (server/token_bucket.h). Before the
// request is queued it reserves the most it can cost (engine::TokenCost: the prompt plus
// n x the completion budget); as tokens are served they count against the reservation;
// when the request ends the unused rest goes back to the bucket. Concurrent requests
// therefore never take more than the bucket holds. Thread-safe: the engine thread, a
// connection's strand and the submitting thread may each call it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "common/mutex.h"
#include "engine/request.h"
#include "server/token_bucket.h"

namespace pagoda::server {

class TokenReservation {
 public:
  // `bucket` null (an unlimited tenant): Reserve always succeeds and nothing is counted.
  TokenReservation(std::shared_ptr<TokenBucket> bucket, std::string tenant);
  ~TokenReservation() { Settle(); }
  TokenReservation(const TokenReservation&) = delete;
  TokenReservation& operator=(const TokenReservation&) = delete;

  // Takes cost.total() tokens from the bucket. InvalidArgument ("max_tokens: ...") when
  // that exceeds the bucket's capacity, which no wait can help; ResourceExhausted with a
  // RetryInfo delay (status_details.h) when the bucket does not hold that many now.
  absl::Status Reserve(const engine::TokenCost& cost);
  // Counts `tokens` served; beyond the reservation they are charged to the bucket.
  void Use(int64_t tokens);
  // Gives the reserved tokens not used back to the bucket; later calls do nothing.
  void Settle();
  // The engine hook that reserves through this object (engine::GenerationRequest::admit);
  // the object must outlive the Submit call.
  std::function<absl::Status(const engine::TokenCost&)> AdmitHook();

 private:
  const std::shared_ptr<TokenBucket> bucket_;
  const std::string tenant_;
  Mutex mu_;
  int64_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t used_ ABSL_GUARDED_BY(mu_) = 0;
  bool settled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pagoda::server
