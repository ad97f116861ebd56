#include "engine/collecting_sink.h"

namespace pagoda::engine {

void CollectingSink::OnOutput(GenerationOutput output) {
  if (on_output_) on_output_(output);
  {
    MutexLock lock(&mu_);
    CollectedOutput& c = collected_;
    const auto index = static_cast<size_t>(output.index);
    if (c.samples.size() <= index) c.samples.resize(index + 1);
    CollectedSample& s = c.samples[index];
    s.token_ids.insert(s.token_ids.end(), output.token_ids.begin(), output.token_ids.end());
    s.text += output.text;
    s.logprobs.insert(s.logprobs.end(), output.logprobs.begin(), output.logprobs.end());
    if (output.sample_finished()) s.finish_reason = output.finish_reason;
    if (!output.prompt_token_ids.empty()) s.prompt_token_ids = output.prompt_token_ids;
    if (!output.prompt_logprobs.empty()) s.prompt_logprobs = output.prompt_logprobs;
    if (index == 0) {
      if (!output.prompt_token_ids.empty()) c.prompt_token_ids = output.prompt_token_ids;
      if (!output.prompt_logprobs.empty()) c.prompt_logprobs = output.prompt_logprobs;
      c.token_ids.insert(c.token_ids.end(), output.token_ids.begin(), output.token_ids.end());
      c.text += output.text;
      for (TokenLogprob& lp : output.logprobs) c.logprobs.push_back(std::move(lp));
    }
    ++c.num_deliveries;
    if (!output.finished()) return;
    c.finish_reason = output.finish_reason;
    c.error = output.error;
    c.usage = output.usage;
  }
  done_.Notify();
}

CollectedOutput CollectingSink::Wait() {
  done_.WaitForNotification();
  MutexLock lock(&mu_);
  return collected_;
}

bool CollectingSink::WaitFor(absl::Duration timeout, CollectedOutput* out) {
  if (!done_.WaitForNotificationWithTimeout(timeout)) return false;
  MutexLock lock(&mu_);
  *out = collected_;
  return true;
}

}  // namespace pagoda::engine
