// Iteration-level scheduler (Orca/vLLM style). Each step it hands out a token budget:
// running sequences first (a decode token each, or their next prefill chunk), then waiting
// ones in policy order while budget, sequence cap and free blocks allow. There are no
// prefill/decode phases, only computed vs. needed tokens. It never runs the model.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "engine/kv_cache_manager.h"
#include "engine/scheduling_policy.h"
#include "engine/sequence.h"

namespace pagoda::engine {

struct SchedulerConfig {
  int32_t max_batched_tokens = 2048;  // token budget per step
  int32_t max_seqs = 256;             // running sequences at most
  // false: every step recomputes each running sequence from scratch (no KV reuse), so a
  // sequence runs only when its whole context fits in the budget.
  bool kv_cache = true;
};

// Sequence `seq` computes tokens [seq->num_computed, seq->num_computed + num_tokens).
struct ScheduledChunk {
  Sequence* seq = nullptr;
  int32_t num_tokens = 0;
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;
  int32_t num_tokens = 0;
  std::vector<Sequence*> preempted;  // preempted during this Schedule() call

  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, KvCacheManager* kv, std::unique_ptr<SchedulingPolicy> policy);

  // Queues a new sequence at the back of the waiting queue.
  void Add(Sequence* seq);
  // Picks this step's work, allocating blocks and preempting when blocks run out.
  SchedulerOutput Schedule();
  // Records that the chunks of `output` ran: advances each sequence's computed count.
  void OnStepDone(const SchedulerOutput& output);
  // Removes `seq` (waiting or running) and frees its blocks; marks it finished.
  void Remove(Sequence* seq);

  const std::vector<Sequence*>& running() const { return running_; }
  const std::deque<Sequence*>& waiting() const { return waiting_; }
  int64_t num_preemptions() const { return num_preemptions_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  // Frees the blocks of `seq` and requeues it at the front of the waiting queue.
  void Preempt(Sequence* seq, SchedulerOutput* out);
  // Tokens `seq` may run this step within `budget`; 0 when it must wait.
  int32_t ChunkSize(const Sequence* seq, int32_t budget) const;
  void ScheduleRunning(SchedulerOutput* out, int32_t* budget);
  void ScheduleWaiting(SchedulerOutput* out, int32_t* budget);

  SchedulerConfig config_;
  KvCacheManager* kv_;
  std::unique_ptr<SchedulingPolicy> policy_;
  std::vector<Sequence*> running_;  // admission order
  std::deque<Sequence*> waiting_;
  int64_t num_preemptions_ = 0;
};

}  // namespace pagoda::engine
