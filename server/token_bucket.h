// A tenant's token rate limit: a bucket holding at most one minute's worth of tokens,
// refilled continuously at tokens_per_minute. Requests may start while it holds at least one
// token; prompt and completion tokens are charged as they are known, so it may go into debt.
#pragma once

#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "common/mutex.h"

namespace pagoda::server {

class TokenBucket {
 public:
  using Clock = std::function<absl::Time()>;

  // A full bucket for `tokens_per_minute` (> 0) reading time from `clock`.
  TokenBucket(int64_t tokens_per_minute, Clock clock);

  // Zero when a request may start now (at least one token); else how long until it may.
  absl::Duration TimeUntilAvailable();
  // Takes `tokens` (>= 0) out of the bucket, going into debt when it holds fewer.
  void Charge(int64_t tokens);
  // Changes the rate (> 0); the balance is kept, clipped to the new capacity.
  void SetRate(int64_t tokens_per_minute);
  // The balance in whole tokens, rounded toward minus infinity (negative while in debt).
  int64_t tokens();
  int64_t tokens_per_minute();

 private:
  // Balances are kept in units of 1/60e9 token, so that one nanosecond at r tokens per
  // minute refills exactly r units: integer arithmetic, no rounding drift.
  static constexpr __int128 kUnitsPerToken = 60'000'000'000;
  void RefillLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock clock_;
  Mutex mu_;
  int64_t rate_ ABSL_GUARDED_BY(mu_);
  __int128 units_ ABSL_GUARDED_BY(mu_);
  absl::Time last_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pagoda::server
