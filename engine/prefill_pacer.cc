#include "engine/prefill_pacer.h"

#include <algorithm>
#include <cmath>

namespace pagoda::engine {
namespace {

// Weight of the newest sample in the moving averages.
constexpr double kAlpha = 0.25;
// The chunk before any long token was timed.
constexpr int32_t kInitialChunk = 16;

double Average(double old, double sample) {
  return old < 0 ? sample : (1 - kAlpha) * old + kAlpha * sample;
}

}  // namespace

PrefillPacer::PrefillPacer(double max_slowdown, int32_t max_chunk)
    : enabled_(max_slowdown > 1),
      max_slowdown_(max_slowdown),
      max_chunk_(std::max(1, max_chunk)),
      chunk_(std::min(kInitialChunk, max_chunk_)) {}

PrefillLimits PrefillPacer::Limits() const {
  if (!enabled_) return {};
  // Without a recent baseline, one step without long work measures it.
  const bool wait = baseline_ms_ < 0 || debt_ms_ > 0 || paced_steps_ >= kProbeEvery;
  return {.short_len = std::min(chunk_, kShortPrompt),
          .long_chunk = wait ? 0 : chunk_,
          .heavy_context = kHeavyContext,
          .idle_chunk = since_paced_ < kGraceSteps ? chunk_ : 0};
}

void PrefillPacer::OnStep(const PacedStep& step, absl::Duration took) {
  if (!enabled_) return;
  since_paced_ =
      step.long_seqs > 0 && step.short_seqs > 0 ? 0 : std::min(since_paced_ + 1, kGraceSteps);
  if (step.short_seqs == 0) return;  // nothing waited on long work
  const double ms = absl::ToDoubleMilliseconds(took);
  if (step.long_tokens == 0) {
    baseline_ms_ = Average(baseline_ms_, ms);
    paced_steps_ = 0;
  } else if (++paced_steps_, baseline_ms_ < 0) {
    return;
  }
  const double share = std::max(1.0, static_cast<double>(step.long_seqs) / step.short_seqs);
  const double allowance = (max_slowdown_ - 1) * baseline_ms_ * share;
  const double extra = step.long_tokens == 0 ? 0 : std::max(0.0, ms - baseline_ms_);
  debt_ms_ = std::max(0.0, debt_ms_ + extra - allowance);
  if (step.long_tokens == 0) return;
  token_ms_ = Average(token_ms_, extra / step.long_tokens);
  // Long tokens that add about kBurst allowances, at most twice the last chunk.
  const double fit = token_ms_ > 0 ? kBurst * allowance / token_ms_ : 2.0 * chunk_;
  const double most = std::min(2.0 * chunk_, static_cast<double>(max_chunk_));
  chunk_ = static_cast<int32_t>(std::clamp(std::floor(fit), 1.0, most));
}

}  // namespace pagoda::engine
