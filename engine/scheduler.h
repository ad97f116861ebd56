// Iteration-level scheduler (Orca/vLLM style), the micro-batch half: what runs this step.
// Each step it hands out a token budget: running sequences first (a decode token each, or
// their next prefill chunk), then waiting ones in policy order while budget, sequence cap
// and free blocks allow; it chunks and paces prompts and rebalances run slots between
// tenants. There are no prefill/decode phases, only computed vs. needed tokens. It never
// runs the model.
//
// What may hold KV is the capacity half's (kv_capacity.h): tenant quotas (the policy only
// orders), blocks per tenant, and preemption's swap-or-recompute. A tenant's sequences
// never hold more than kv_cache_cap_blocks distinct blocks (one its forks or cache hits
// share counts once), never run more than max_running_requests at once, and the unused part
// of every other tenant's kv_cache_floor_blocks is never handed out.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/kv_cache_manager.h"
#include "engine/kv_capacity.h"
#include "engine/prefill_pacer.h"
#include "engine/scheduling_policy.h"
#include "engine/sequence.h"
#include "engine/tenant.h"

namespace pagoda::engine {

// The most prompt positions a step computes of a sequence whose prompt logprobs still need
// logits: each such position keeps a vocab-sized logits row on the host and the backend.
inline constexpr int32_t kMaxPromptLogprobChunk = 256;

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
  std::vector<BlockCopy> copies;     // block copies to run before the chunks (copy on write)
  PacedStep paced;  // under pacing (SetPrefillLimits), for the PrefillPacer; else zeros

  // Nothing to run: no chunk and no copy. A step with copies and no chunk still runs its
  // copies (a swap-out while everything else was held back).
  bool empty() const { return chunks.empty() && copies.empty(); }
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, KvCacheManager* kv, std::unique_ptr<SchedulingPolicy> policy);

  // Queues a new sequence at the back of the waiting queue under the tenant its request
  // names (a name absent from the table gets default terms).
  void Add(Sequence* seq);
  // Picks this step's work, allocating blocks and preempting when blocks run out. A
  // sequence admitted with num_computed == 0 first takes the longest run of its full
  // blocks found in the prefix cache (never its last token: that one yields the logits).
  SchedulerOutput Schedule();
  // Records that the chunks of `output` ran: advances each sequence's computed count.
  void OnStepDone(const SchedulerOutput& output);
  // Removes `seq` (waiting or running) and frees its blocks; marks it finished.
  void Remove(Sequence* seq);
  // Runs `child`, forked from running `parent` after the step that computed its prompt:
  // it shares parent's blocks and computed count (parallel samples).
  void AddFork(Sequence* parent, Sequence* child);
  // Replaces the tenant table; precondition: valid (unique names, weights > 0, limits >= 0;
  // Engine::SetTenants checks). Sequences in flight keep running, re-resolved by name.
  void SetTenants(const std::vector<TenantConfig>& tenants);
  // Replaces the policy; it learns the tenant table and the backlogged tenants at once.
  void SetPolicy(std::unique_ptr<SchedulingPolicy> policy);
  // Sequences (running or waiting) that can never run again under the tenant terms now:
  // the blocks their tokens need exceed the most their tenant may hold (a reload lowered its
  // cap or raised another tenant's floor). Each with a ResourceExhausted naming the limit;
  // the caller ends them. Under unchanged terms there are none (Submit checked).
  std::vector<std::pair<Sequence*, absl::Status>> Unsatisfiable() const;
  // Limits of the next Schedule() calls (PrefillPacer): while a step carries short work,
  // each long prompt's chunk takes at most limits.long_chunk tokens (long decodes run only
  // when it is > 0). A step that would be empty under a long_chunk of 0 runs with long_chunk
  // = short_len instead. With no short work of another tenant, long prompts' chunks take
  // at most limits.idle_chunk tokens when it is > 0. Default: off.
  void SetPrefillLimits(PrefillLimits limits) { limits_ = limits; }

  const std::vector<Sequence*>& running() const { return running_; }
  const std::deque<Sequence*>& waiting() const { return waiting_; }
  // Every tenant seen: the table's, then names requests brought (default terms).
  const std::vector<TenantState>& tenants() const { return capacity_.tenants(); }
  // Index of tenant `name` in tenants(), or -1.
  int32_t FindTenant(const std::string& name) const { return capacity_.Find(name); }
  // Distinct KV blocks tenant `index`'s sequences hold.
  int32_t blocks_held(int32_t index) const { return capacity_.BlocksHeld(index); }
  const SchedulingPolicy& policy() const { return *policy_; }
  int64_t num_preemptions() const { return num_preemptions_; }
  // Preemptions that swapped the sequence out (the rest recomputed), and swap-ins, ever.
  int64_t num_swap_outs() const { return capacity_.num_swap_outs(); }
  int64_t num_swap_ins() const { return capacity_.num_swap_ins(); }
  // Waiting sequences swapped out now.
  int32_t num_swapped() const { return capacity_.num_swapped(); }
  // Prefix cache lookups at admission: tokens looked up and tokens found, ever.
  int64_t prefix_cache_queries() const { return capacity_.prefix_cache_queries(); }
  int64_t prefix_cache_hits() const { return capacity_.prefix_cache_hits(); }
  const SchedulerConfig& config() const { return config_; }

 private:
  // Index of tenant `name`, appending it with default terms when unknown.
  int32_t ResolveTenant(const std::string& name);
  // Admits waiting `seq`: its cached prefix (if any), then blocks for `n` tokens.
  void Admit(Sequence* seq, size_t index, int32_t n, absl::Span<const BlockHash> cached,
             SchedulerOutput* out, int32_t* budget);
  // Whether waiting `seq` may start now with `n` tokens from `start` (its blocks beyond
  // the cached prefix `cached` taken); else whether its tenant is skipped (its run slots or
  // cap) or the queue waits (the pool, or the engine's run slots).
  enum class Start : int8_t { kNow, kSkipTenant, kWait };
  Start CanStart(const Sequence* seq, int32_t start, int32_t n,
                 absl::Span<const BlockHash> cached) const;
  // Preempts enough for running `seq` to take `n` more tokens' blocks, within its cap and
  // the pool; false when `seq` itself was preempted. `*i` follows running_[*i] == seq.
  bool MakeRoom(Sequence* seq, int32_t n, size_t* i, SchedulerOutput* out, int32_t* budget);
  // Preempts running `victim`, returning its chunk (if any) to the budget.
  void PreemptRunning(Sequence* victim, size_t* i, SchedulerOutput* out, int32_t* budget);
  // Swaps `seq`'s computed blocks out or frees them (KvCapacity::Evict); requeues it at the
  // front of the waiting queue.
  void Preempt(Sequence* seq, SchedulerOutput* out);
  // Tokens `seq` may run this step within `budget`; 0 when it must wait.
  int32_t ChunkSize(const Sequence* seq, int32_t budget) const;
  // Whether `seq`, with `left` tokens to compute, is long work under limits_.
  bool IsLong(const Sequence* seq, int32_t left) const;
  // `n` tokens of `seq`, with `left` still to compute, cut to the long-work chunk when this
  // step is paced, and to kMaxPromptLogprobChunk while its prompt logprobs need logits.
  int32_t Paced(const Sequence* seq, int32_t left, int32_t n) const;
  // Counts the short work of each tenant (short_by_tenant_) and returns the sequences with
  // long work that short work of another tenant shares the step with (those are paced).
  int32_t CountWork();
  // Whether `seq`'s long work is paced this step: another tenant has short work.
  bool PacedFor(const Sequence* seq) const;
  // One scheduling pass (Schedule() may run two).
  void SchedulePass(SchedulerOutput* out);
  void ScheduleRunning(SchedulerOutput* out, int32_t* budget);
  void ScheduleWaiting(SchedulerOutput* out, int32_t* budget);
  // With every run slot taken, moves slots from tenants above their weighted share of
  // max_seqs to the policy's next waiting sequence when its tenant is below its share (when
  // the policy asks for it: SchedulingPolicy::RebalancesRunSlots).
  void RebalanceRunSlots(SchedulerOutput* out, int32_t* budget);

  SchedulerConfig config_;
  KvCacheManager* kv_;
  KvCapacity capacity_;
  std::unique_ptr<SchedulingPolicy> policy_;
  std::vector<Sequence*> running_;  // admission order
  std::deque<Sequence*> waiting_;
  PrefillLimits limits_;
  bool paced_ = false;                    // this step applies limits_ (some long work is paced)
  std::vector<int32_t> short_by_tenant_;  // sequences with short work, per tenant
  int32_t num_short_ = 0;                 // their sum
  int32_t long_chunk_ = 0;                // this step's chunk for long prompts while paced_
  int64_t num_preemptions_ = 0;
};

}  // namespace pagoda::engine
