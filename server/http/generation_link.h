// The bridge between the engine thread and an HTTP connection: an OutputSink that only
// accumulates a request's outputs under a mutex and wakes the connection (on its own
// executor) once per batch, so the engine thread never blocks and a slow connection sees
// merged deltas. Detach() cuts it from the connection, after which nothing is posted any
// more; the session calls it once it has the last output, and shutdown for the rest. Until
// then the link holds `wake` (and what it holds), so the engine thread never releases it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "engine/request.h"

namespace pagoda::server::http {

// What one sample (choice) delivered since the last Take().
struct SampleDelta {
  std::string text;
  std::vector<engine::TokenLogprob> logprobs;  // one per token, when requested
  engine::FinishReason finish_reason = engine::FinishReason::kNone;  // it ended in this batch
  // The sample's first delivery only: the echoed prompt's bytes at the start of `text`
  // (GenerationLink::set_echo), and the prompt's ids and logprobs when asked for.
  bool echo = false;  // the request asked for echo
  size_t echo_bytes = 0;
  std::vector<int32_t> prompt_token_ids;
  std::vector<engine::TokenLogprob> prompt_logprobs;
  // The sample's output starts inside its reasoning (engine GenerationOutput::reasoning_open).
  bool reasoning_open = false;
};

// What arrived since the last Take().
struct OutputBatch {
  std::vector<SampleDelta> samples;  // one per choice (part k's sample j at k * n + j)
  int32_t num_tokens = 0;            // over all samples
  // Inter-token latency, timed as the engine delivers (not when the connection wakes, which
  // may merge deliveries): for each delivery after the request's first with tokens, the
  // time since the previous one divided over its tokens, once per token (as gRPC's
  // GenerateStream observes it).
  std::vector<double> token_gaps;
  // The whole generation's: set by the last delivery of its last part (every sample
  // ended). Of several parts: the first error, else an abort, else the last part's reason;
  // token counts summed, times the first part's.
  engine::FinishReason finish_reason = engine::FinishReason::kNone;
  absl::Status error;   // when finish_reason is kError
  engine::Usage usage;  // complete when finished

  bool finished() const { return finish_reason != engine::FinishReason::kNone; }
};

class GenerationLink final : public engine::OutputSink {
 public:
  // For `parts` engine requests (a prompt array: one per prompt) of `n` samples each, so
  // n * parts choices. `wake` is called (from the engine thread, under no lock of the
  // caller's) when a batch becomes available and no wake is outstanding; it must only post
  // work elsewhere.
  GenerationLink(int32_t n, std::function<void()> wake, int32_t parts = 1);

  // Echo: every sample of part `part` starts its text with `text` (its prompt), in its first
  // delivery. Set before the part is submitted.
  void set_echo(std::string text) { set_echo(0, std::move(text)); }
  void set_echo(int32_t part, std::string text) { echo_[part] = std::move(text); }

  // Part 0's outputs.
  void OnOutput(engine::GenerationOutput output) override;
  // The sink of part `part` of `link` (part 0: the link itself).
  static std::shared_ptr<engine::OutputSink> PartSink(std::shared_ptr<GenerationLink> link,
                                                      int32_t part);
  // Part `part`'s outputs (what PartSink's sinks deliver).
  void OnPartOutput(int32_t part, engine::GenerationOutput output);
  // Everything delivered since the last call; allows the next wake.
  OutputBatch Take();
  // No more wakes; releases `wake` (and what it holds) on the calling thread.
  void Detach();

 private:
  const int32_t n_;
  const int32_t parts_;
  std::vector<std::optional<std::string>> echo_;  // per part; set before the engine delivers
  Mutex mu_;
  std::vector<bool> started_ ABSL_GUARDED_BY(mu_);  // per choice: delivered before
  // Parts whose last output has not come yet, and what the ended ones make the whole's.
  int32_t parts_left_ ABSL_GUARDED_BY(mu_);
  engine::FinishReason reason_ ABSL_GUARDED_BY(mu_) = engine::FinishReason::kNone;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  engine::Usage usage_ ABSL_GUARDED_BY(mu_);
  absl::Time last_token_time_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  OutputBatch pending_ ABSL_GUARDED_BY(mu_);
  bool wake_outstanding_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> wake_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pagoda::server::http
