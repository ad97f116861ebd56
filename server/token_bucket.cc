#include "server/token_bucket.h"

#include <algorithm>

namespace pagoda::server {

TokenBucket::TokenBucket(int64_t tokens_per_minute, Clock clock)
    : clock_(std::move(clock)),
      rate_(tokens_per_minute),
      units_(static_cast<__int128>(tokens_per_minute) * kUnitsPerToken),
      last_(clock_()) {}

void TokenBucket::RefillLocked() {
  const absl::Time now = clock_();
  if (now > last_) {
    const __int128 elapsed_ns = absl::ToInt64Nanoseconds(now - last_);
    const __int128 capacity = static_cast<__int128>(rate_) * kUnitsPerToken;
    units_ = std::min(capacity, units_ + elapsed_ns * rate_);
  }
  last_ = std::max(last_, now);
}

absl::Duration TokenBucket::TimeUntilAvailable() {
  MutexLock lock(&mu_);
  RefillLocked();
  if (units_ >= kUnitsPerToken) return absl::ZeroDuration();
  const __int128 missing = kUnitsPerToken - units_;
  const __int128 ns = (missing + rate_ - 1) / rate_;  // rounded up: then it holds one token
  return absl::Nanoseconds(static_cast<int64_t>(ns));
}

void TokenBucket::Charge(int64_t tokens) {
  MutexLock lock(&mu_);
  RefillLocked();
  units_ -= static_cast<__int128>(tokens) * kUnitsPerToken;
}

void TokenBucket::SetRate(int64_t tokens_per_minute) {
  MutexLock lock(&mu_);
  RefillLocked();
  rate_ = tokens_per_minute;
  units_ = std::min(units_, static_cast<__int128>(rate_) * kUnitsPerToken);
}

int64_t TokenBucket::tokens() {
  MutexLock lock(&mu_);
  RefillLocked();
  __int128 whole = units_ / kUnitsPerToken;
  if (units_ < 0 && whole * kUnitsPerToken != units_) --whole;
  return static_cast<int64_t>(whole);
}

int64_t TokenBucket::tokens_per_minute() {
  MutexLock lock(&mu_);
  return rate_;
}

}  // namespace pagoda::server
