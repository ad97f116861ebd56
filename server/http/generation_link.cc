#include "server/http/generation_link.h"

#include <algorithm>
#include <utility>

#include "server/generation_call.h"

namespace pagoda::server::http {

namespace {

// Part k's outputs, forwarded to the link it shares with the other parts.
class PartSinkImpl final : public engine::OutputSink {
 public:
  PartSinkImpl(std::shared_ptr<GenerationLink> link, int32_t part)
      : link_(std::move(link)), part_(part) {}
  void OnOutput(engine::GenerationOutput output) override {
    link_->OnPartOutput(part_, std::move(output));
  }

 private:
  const std::shared_ptr<GenerationLink> link_;
  const int32_t part_;
};

}  // namespace

GenerationLink::GenerationLink(int32_t n, std::function<void()> wake, int32_t parts)
    : n_(std::max(n, 1)),
      parts_(std::max(parts, 1)),
      echo_(parts_),
      parts_left_(parts_),
      wake_(std::move(wake)) {
  pending_.samples.resize(static_cast<size_t>(n_) * parts_);
  started_.resize(static_cast<size_t>(n_) * parts_, false);
}

std::shared_ptr<engine::OutputSink> GenerationLink::PartSink(std::shared_ptr<GenerationLink> link,
                                                             int32_t part) {
  if (part == 0) return link;
  return std::make_shared<PartSinkImpl>(std::move(link), part);
}

void GenerationLink::OnOutput(engine::GenerationOutput output) {
  OnPartOutput(0, std::move(output));
}

void GenerationLink::OnPartOutput(int32_t part, engine::GenerationOutput output) {
  MutexLock lock(&mu_);
  if (output.index >= 0 && output.index < n_ && part >= 0 && part < parts_) {
    const size_t choice = static_cast<size_t>(part) * n_ + output.index;
    SampleDelta& sample = pending_.samples[choice];
    if (!started_[choice]) {
      started_[choice] = true;
      if (echo_[part].has_value()) {
        sample.echo = true;
        sample.text = *echo_[part];  // nothing of this sample arrived before
        sample.echo_bytes = echo_[part]->size();
      }
      sample.prompt_token_ids = std::move(output.prompt_token_ids);
      sample.prompt_logprobs = std::move(output.prompt_logprobs);
    }
    if (output.reasoning_open) sample.reasoning_open = true;
    sample.text += output.text;
    for (engine::TokenLogprob& lp : output.logprobs) sample.logprobs.push_back(std::move(lp));
    if (output.sample_finished()) sample.finish_reason = output.finish_reason;
  }
  if (const auto n = static_cast<int64_t>(output.token_ids.size()); n > 0) {
    pending_.num_tokens += static_cast<int32_t>(n);
    const std::vector<double> gaps = TokenGaps(n, absl::Now(), &last_token_time_);
    pending_.token_gaps.insert(pending_.token_gaps.end(), gaps.begin(), gaps.end());
  }
  if (output.finished()) {  // this part's last output
    if (output.finish_reason == engine::FinishReason::kError && error_.ok()) {
      error_ = output.error.ok() ? absl::InternalError("a part failed") : output.error;
    }
    if (reason_ != engine::FinishReason::kError &&
        (reason_ != engine::FinishReason::kAbort ||
         output.finish_reason == engine::FinishReason::kError)) {
      reason_ = output.finish_reason;
    }
    usage_.prompt_tokens += output.usage.prompt_tokens;
    usage_.completion_tokens += output.usage.completion_tokens;
    usage_.cached_tokens += output.usage.cached_tokens;
    if (part == 0) {
      usage_.queue_time = output.usage.queue_time;
      usage_.time_to_first_token = output.usage.time_to_first_token;
    }
    if (--parts_left_ == 0) {
      pending_.finish_reason = reason_;
      pending_.error = error_;
      pending_.usage = usage_;
    }
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
  pending_.samples.resize(static_cast<size_t>(n_) * parts_);
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
