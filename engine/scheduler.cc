#include "engine/scheduler.h"

#include <algorithm>

namespace pagoda::engine {

Scheduler::Scheduler(SchedulerConfig config, KvCacheManager* kv,
                     std::unique_ptr<SchedulingPolicy> policy)
    : config_(config), kv_(kv), policy_(std::move(policy)) {}

void Scheduler::Add(Sequence* seq) {
  seq->status = SeqStatus::kWaiting;
  waiting_.push_back(seq);
}

SchedulerOutput Scheduler::Schedule() {
  SchedulerOutput out;
  if (!config_.kv_cache) {
    // Recompute mode: nothing survives from the last step.
    for (Sequence* s : running_) {
      kv_->Free(s->id);
      s->num_computed = 0;
    }
  }
  int32_t budget = config_.max_batched_tokens;
  ScheduleRunning(&out, &budget);
  // A step that had to preempt admits nobody: the pool is already short.
  if (out.preempted.empty()) ScheduleWaiting(&out, &budget);
  return out;
}

int32_t Scheduler::ChunkSize(const Sequence* seq, int32_t budget) const {
  const int32_t n = seq->num_uncomputed();
  if (!config_.kv_cache) return n <= budget ? n : 0;
  return std::min(n, budget);
}

void Scheduler::ScheduleRunning(SchedulerOutput* out, int32_t* budget) {
  size_t i = 0;
  while (i < running_.size() && *budget > 0) {
    Sequence* seq = running_[i];
    const int32_t n = ChunkSize(seq, *budget);
    if (n == 0) {
      ++i;
      continue;
    }
    bool preempted_self = false;
    while (!kv_->Reserve(seq->id, seq->num_computed + n)) {
      Sequence* victim = policy_->PickVictim(running_);
      const size_t victim_index =
          std::find(running_.begin(), running_.end(), victim) - running_.begin();
      // A victim that already got a chunk this step gives its tokens back.
      for (auto c = out->chunks.begin(); c != out->chunks.end(); ++c) {
        if (c->seq == victim) {
          *budget += c->num_tokens;
          out->num_tokens -= c->num_tokens;
          out->chunks.erase(c);
          break;
        }
      }
      Preempt(victim, out);
      if (victim == seq) {
        preempted_self = true;
        break;
      }
      if (victim_index < i) --i;
    }
    if (preempted_self) continue;  // running_[i] is now the next sequence
    out->chunks.push_back({seq, n});
    out->num_tokens += n;
    *budget -= n;
    ++i;
  }
}

void Scheduler::ScheduleWaiting(SchedulerOutput* out, int32_t* budget) {
  while (!waiting_.empty() && *budget > 0 &&
         running_.size() < static_cast<size_t>(config_.max_seqs)) {
    const size_t index = policy_->PickNextWaiting(waiting_);
    Sequence* seq = waiting_[index];
    const int32_t n = ChunkSize(seq, *budget);
    if (n == 0 || !kv_->Reserve(seq->id, seq->num_computed + n)) break;
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(index));
    seq->status = SeqStatus::kRunning;
    running_.push_back(seq);
    out->chunks.push_back({seq, n});
    out->num_tokens += n;
    *budget -= n;
  }
}

void Scheduler::Preempt(Sequence* seq, SchedulerOutput* out) {
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  kv_->Free(seq->id);
  seq->num_computed = 0;
  seq->status = SeqStatus::kWaiting;
  ++seq->num_preemptions;
  ++num_preemptions_;
  waiting_.push_front(seq);
  out->preempted.push_back(seq);
}

void Scheduler::OnStepDone(const SchedulerOutput& output) {
  for (const ScheduledChunk& c : output.chunks) c.seq->num_computed += c.num_tokens;
}

void Scheduler::Remove(Sequence* seq) {
  if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end()) {
    running_.erase(it);
  } else if (auto w = std::find(waiting_.begin(), waiting_.end(), seq); w != waiting_.end()) {
    waiting_.erase(w);
  }
  kv_->Free(seq->id);
  seq->status = SeqStatus::kFinished;
}

}  // namespace pagoda::engine
