#include "server/http/generation_link.h"

#include <algorithm>
#include <utility>

#include "server/generation_call.h"

namespace pagoda::server::http {

GenerationLink::GenerationLink(int32_t n, std::function<void()> wake)
    : n_(std::max(n, 1)), wake_(std::move(wake)) {
  pending_.samples.resize(n_);
  started_.resize(n_, false);
}

void GenerationLink::OnOutput(engine::GenerationOutput output) {
  MutexLock lock(&mu_);
  if (output.index >= 0 && output.index < n_) {
    SampleDelta& sample = pending_.samples[output.index];
    if (!started_[output.index]) {
      started_[output.index] = true;
      if (echo_.has_value()) {
        sample.echo = true;
        sample.text = *echo_;  // nothing of this sample arrived before
        sample.echo_bytes = echo_->size();
      }
      sample.prompt_token_ids = std::move(output.prompt_token_ids);
      sample.prompt_logprobs = std::move(output.prompt_logprobs);
    }
    sample.text += output.text;
    for (engine::TokenLogprob& lp : output.logprobs) sample.logprobs.push_back(std::move(lp));
    if (output.sample_finished()) sample.finish_reason = output.finish_reason;
  }
  if (const auto n = static_cast<int64_t>(output.token_ids.size()); n > 0) {
    pending_.num_tokens += static_cast<int32_t>(n);
    const std::vector<double> gaps = TokenGaps(n, absl::Now(), &last_token_time_);
    pending_.token_gaps.insert(pending_.token_gaps.end(), gaps.begin(), gaps.end());
  }
  if (output.finished()) {
    pending_.finish_reason = output.finish_reason;
    pending_.error = output.error;
    pending_.usage = output.usage;
  }
  // Under the lock, so that no wake follows Detach(); a wake only posts.
  if (!wake_outstanding_ && wake_) {
    wake_outstanding_ = true;
    wake_();
  }
  // wake_ (and the session it holds) stays until Detach(), which the session calls on its
  // own executor: the engine thread never drops the last reference to a session, which
  // could outlive its io_context then.
}

OutputBatch GenerationLink::Take() {
  MutexLock lock(&mu_);
  OutputBatch out = std::move(pending_);
  pending_ = OutputBatch();
  pending_.samples.resize(n_);
  wake_outstanding_ = false;
  return out;
}

void GenerationLink::Detach() {
  std::function<void()> drop;
  MutexLock lock(&mu_);
  drop = std::move(wake_);
  wake_ = nullptr;
}

}  // namespace pagoda::server::http
