// Keeps long work from stalling the short work that shares its steps. Long work is a chunk
// of a prompt with more than 32 tokens left, or a decode whose context exceeds 1,024 tokens
// (its attention reads that much KV); short work is everything else (decodes of short
// contexts, short prompts). In a step that carries both, the time long work adds is charged
// to a debt; while the debt is positive long work waits, and every step without it pays back
// the allowance: (max_slowdown - 1) x the baseline x max(1, long sequences / short ones).
// So with one sequence of each, the short one runs at most max_slowdown times slower than
// alone over a stretch of steps, whatever the long work costs. A prompt chunk is sized so a
// step adds about kBurst allowances: big enough to amortize a step's fixed costs, small
// enough to bound the gap between two tokens. For kGraceSteps steps after one that was
// paced, long prompts keep that chunk even when no short work is in the step, so short work
// that arrives next (a client's next request) waits for one chunk, not a whole budget.
//
// It learns from the steps the engine reports: the baseline (a step with short work only,
// refreshed at least every kProbeEvery steps) and the cost of one long token on top of it. A step
// with only long work is never paced. Sarathi-Serve's stall-free batching, with the budget set by
// measured time instead of a fixed token count.
#pragma once

#include <cstdint>

#include "absl/time/time.h"

namespace pagoda::engine {

// What the scheduler applies to one step.
struct PrefillLimits {
  // Prompts with more than this many tokens left are long; 0 = pacing off (no limit).
  int32_t short_len = 0;
  // While the step carries short work, a long prompt computes at most this many tokens;
  // 0 = no long work this step.
  int32_t long_chunk = 0;
  // Decodes of sequences with more context than this are long work.
  int32_t heavy_context = 0;
  // With no short work in the step, a long prompt still computes at most this many tokens
  // (0 = no limit): for a while after a paced step, so that short work arriving next does
  // not wait behind a whole budget of another tenant's prefill.
  int32_t idle_chunk = 0;
};

// What the scheduler reports of one paced step.
struct PacedStep {
  int32_t long_tokens = 0;  // computed for long work
  int32_t long_seqs = 0;    // sequences with long work, run or made to wait
  int32_t short_seqs = 0;   // sequences with short work in the step
};

class PrefillPacer {
 public:
  // A paced step adds about this many allowances of time.
  static constexpr double kBurst = 4;
  // Prompts with at most this many tokens left are short.
  static constexpr int32_t kShortPrompt = 32;
  // Decodes with more context than this are long work.
  static constexpr int32_t kHeavyContext = 1024;
  // After this many steps with long work in a row, one step without it refreshes the
  // baseline.
  static constexpr int32_t kProbeEvery = 16;
  // Steps after the last paced one during which long prompts keep the chunk size.
  static constexpr int32_t kGraceSteps = 16;

  // `max_slowdown` <= 1 turns pacing off; `max_chunk` (> 0) bounds the chunk.
  PrefillPacer(double max_slowdown, int32_t max_chunk);

  bool enabled() const { return enabled_; }
  // The limits of the next step.
  PrefillLimits Limits() const;
  // Records the step just run and how long it took (scheduling to delivery).
  void OnStep(const PacedStep& step, absl::Duration took);

  // The chunk, the baseline (ms; < 0 before the first), the cost of one long token (ms;
  // < 0 before the first) and the debt (ms): for tests.
  int32_t chunk() const { return chunk_; }
  double baseline_ms() const { return baseline_ms_; }
  double token_ms() const { return token_ms_; }
  double debt_ms() const { return debt_ms_; }

 private:
  bool enabled_;
  double max_slowdown_;
  int32_t max_chunk_;
  int32_t chunk_;
  double baseline_ms_ = -1;
  double token_ms_ = -1;
  double debt_ms_ = 0;
  int32_t paced_steps_ = 0;            // steps with long work since the last baseline sample
  int32_t since_paced_ = kGraceSteps;  // steps since the last one with paced long work
};

}  // namespace pagoda::engine
