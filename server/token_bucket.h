// A tenant's token rate limit: a bucket holding at most `burst` tokens (one minute's worth
// unless configured lower), refilled continuously at tokens_per_minute. A request reserves
// the most tokens it can cost before it is queued and is refunded what it did not use
// (server/token_reservation.h), so concurrent requests cannot overdraw the bucket.
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

  // A full bucket for `tokens_per_minute` (> 0) holding at most `burst` tokens (in
  // [0, tokens_per_minute]; 0 = tokens_per_minute), reading time from `clock`.
  TokenBucket(int64_t tokens_per_minute, int64_t burst, Clock clock);
  TokenBucket(int64_t tokens_per_minute, Clock clock)
      : TokenBucket(tokens_per_minute, 0, std::move(clock)) {}

  // Zero when the bucket holds at least one token; else how long until it does.
  absl::Duration TimeUntilAvailable();
  // Takes `tokens` (>= 0) when the bucket holds that many and returns zero; else takes
  // nothing and returns how long until it will hold them (InfiniteDuration when `tokens`
  // exceeds the capacity: never).
  absl::Duration TryTake(int64_t tokens);
  // Takes `tokens` (>= 0) out of the bucket, going into debt when it holds fewer.
  void Charge(int64_t tokens);
  // Gives back `tokens` (>= 0) taken earlier; the balance stays within the capacity.
  void Refund(int64_t tokens);
  // Changes the rate (> 0) and burst (as the constructor's); the balance is kept, clipped
  // to the new capacity.
  void SetRate(int64_t tokens_per_minute, int64_t burst = 0);
  // The balance in whole tokens, rounded toward minus infinity (negative while in debt).
  int64_t tokens();
  int64_t tokens_per_minute();
  // The most tokens the bucket holds.
  int64_t capacity();

 private:
  // Balances are kept in units of 1/60e9 token, so that one nanosecond at r tokens per
  // minute refills exactly r units: integer arithmetic, no rounding drift.
  static constexpr __int128 kUnitsPerToken = 60'000'000'000;
  void RefillLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How long until the balance reaches `units`.
  absl::Duration WaitForLocked(__int128 units) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  __int128 CapacityLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<__int128>(burst_) * kUnitsPerToken;
  }

  const Clock clock_;
  Mutex mu_;
  int64_t rate_ ABSL_GUARDED_BY(mu_);
  int64_t burst_ ABSL_GUARDED_BY(mu_);  // resolved: in [1, rate_]
  __int128 units_ ABSL_GUARDED_BY(mu_);
  absl::Time last_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pagoda::server
