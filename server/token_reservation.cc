#include "server/token_reservation.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/status_details.h"

namespace pagoda::server {

TokenReservation::TokenReservation(std::shared_ptr<TokenBucket> bucket, std::string tenant)
    : bucket_(std::move(bucket)), tenant_(std::move(tenant)) {}

absl::Status TokenReservation::Reserve(const engine::TokenCost& cost) {
  if (bucket_ == nullptr) return absl::OkStatus();
  const int64_t total = cost.total();
  const absl::Duration wait = bucket_->TryTake(total);
  const std::string spelled =
      absl::StrCat(total, " tokens (", cost.prompt_tokens, " prompt + ",
                   cost.n > 1 ? absl::StrCat(cost.n, " x ") : "", cost.max_completion_tokens,
                   " completion: max_tokens, or what the context leaves when it is unset)");
  if (wait == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_tokens: the request may cost ", spelled, ", more than tenant \"", tenant_,
                     "\"'s token bucket holds (", bucket_->capacity(), " of tokens_per_minute ",
                     bucket_->tokens_per_minute(), "); lower max_tokens"));
  }
  if (wait > absl::ZeroDuration()) {
    return WithRetryDelay(absl::ResourceExhaustedError(absl::StrCat(
                              "tenant \"", tenant_, "\": tokens_per_minute (",
                              bucket_->tokens_per_minute(), ") exceeded; retry in ",
                              absl::FormatDuration(wait), ": the request may cost ", spelled)),
                          wait);
  }
  MutexLock lock(&mu_);
  reserved_ += total;
  return absl::OkStatus();
}

void TokenReservation::Use(int64_t tokens) {
  if (bucket_ == nullptr || tokens <= 0) return;
  int64_t beyond = 0;
  {
    MutexLock lock(&mu_);
    if (settled_) {
      beyond = tokens;
    } else {
      beyond = std::max<int64_t>(0, used_ + tokens - reserved_) -
               std::max<int64_t>(0, used_ - reserved_);
    }
    used_ += tokens;
  }
  if (beyond > 0) bucket_->Charge(beyond);
}

void TokenReservation::Settle() {
  if (bucket_ == nullptr) return;
  int64_t unused = 0;
  {
    MutexLock lock(&mu_);
    if (settled_) return;
    settled_ = true;
    unused = reserved_ - used_;
  }
  if (unused > 0) bucket_->Refund(unused);
}

std::function<absl::Status(const engine::TokenCost&)> TokenReservation::AdmitHook() {
  return [this](const engine::TokenCost& cost) { return Reserve(cost); };
}

}  // namespace pagoda::server
