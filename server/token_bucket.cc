#include "server/token_bucket.h"

#include <algorithm>

namespace pagoda::server {
namespace {

int64_t ResolveBurst(int64_t tokens_per_minute, int64_t burst) {
  return burst > 0 ? std::min(burst, tokens_per_minute) : tokens_per_minute;
}

}  // namespace

TokenBucket::TokenBucket(int64_t tokens_per_minute, int64_t burst, Clock clock)
    : clock_(std::move(clock)),
      rate_(tokens_per_minute),
      burst_(ResolveBurst(tokens_per_minute, burst)),
      units_(static_cast<__int128>(burst_) * kUnitsPerToken),
      last_(clock_()) {}

void TokenBucket::RefillLocked() {
  const absl::Time now = clock_();
  if (now > last_) {
    const __int128 elapsed_ns = absl::ToInt64Nanoseconds(now - last_);
    units_ = std::min(CapacityLocked(), units_ + elapsed_ns * rate_);
  }
  last_ = std::max(last_, now);
}

absl::Duration TokenBucket::WaitForLocked(__int128 units) {
  if (units_ >= units) return absl::ZeroDuration();
  const __int128 ns = (units - units_ + rate_ - 1) / rate_;  // rounded up
  return absl::Nanoseconds(static_cast<int64_t>(ns));
}

absl::Duration TokenBucket::TimeUntilAvailable() {
  MutexLock lock(&mu_);
  RefillLocked();
  return WaitForLocked(kUnitsPerToken);
}

absl::Duration TokenBucket::TryTake(int64_t tokens) {
  MutexLock lock(&mu_);
  RefillLocked();
  const __int128 units = static_cast<__int128>(tokens) * kUnitsPerToken;
  if (units > CapacityLocked()) return absl::InfiniteDuration();
  const absl::Duration wait = WaitForLocked(units);
  if (wait == absl::ZeroDuration()) units_ -= units;
  return wait;
}

void TokenBucket::Charge(int64_t tokens) {
  MutexLock lock(&mu_);
  RefillLocked();
  units_ -= static_cast<__int128>(tokens) * kUnitsPerToken;
}

void TokenBucket::Refund(int64_t tokens) {
  MutexLock lock(&mu_);
  RefillLocked();
  units_ = std::min(CapacityLocked(), units_ + static_cast<__int128>(tokens) * kUnitsPerToken);
}

void TokenBucket::SetRate(int64_t tokens_per_minute, int64_t burst) {
  MutexLock lock(&mu_);
  RefillLocked();
  rate_ = tokens_per_minute;
  burst_ = ResolveBurst(tokens_per_minute, burst);
  units_ = std::min(units_, CapacityLocked());
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

int64_t TokenBucket::capacity() {
  MutexLock lock(&mu_);
  return burst_;
}

}  // namespace pagoda::server
