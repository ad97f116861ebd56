// An OutputSink that accumulates a whole response and lets another thread wait for it:
// the offline CLI path and tests use it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/mutex.h"
#include "engine/request.h"

namespace pagoda::engine {

// Everything one sample produced, concatenated.
struct CollectedSample {
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<TokenLogprob> logprobs;
  std::vector<int32_t> prompt_token_ids;      // with prompt logprobs
  std::vector<TokenLogprob> prompt_logprobs;  // with prompt logprobs (tokens 1..)
  FinishReason finish_reason = FinishReason::kNone;
};

// Everything a request produced, concatenated: sample 0 at the top, every sample in
// `samples` (n of them once finished; one for n = 1).
struct CollectedOutput {
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<TokenLogprob> logprobs;
  std::vector<int32_t> prompt_token_ids;      // with prompt logprobs
  std::vector<TokenLogprob> prompt_logprobs;  // with prompt logprobs (tokens 1..)
  FinishReason finish_reason = FinishReason::kNone;
  absl::Status error;
  Usage usage;
  int32_t num_deliveries = 0;
  std::vector<CollectedSample> samples;
};

class CollectingSink final : public OutputSink {
 public:
  // `on_output`, when given, also sees each delivery (on the engine thread).
  explicit CollectingSink(std::function<void(const GenerationOutput&)> on_output = nullptr)
      : on_output_(std::move(on_output)) {}

  void OnOutput(GenerationOutput output) override;
  // Blocks until the finished delivery arrived; returns the whole response.
  CollectedOutput Wait();
  // Like Wait() with a timeout; false when it expired.
  bool WaitFor(absl::Duration timeout, CollectedOutput* out);
  bool done() const { return done_.HasBeenNotified(); }

 private:
  std::function<void(const GenerationOutput&)> on_output_;
  mutable Mutex mu_;
  CollectedOutput collected_ ABSL_GUARDED_BY(mu_);
  Notification done_;
};

}  // namespace pagoda::engine
