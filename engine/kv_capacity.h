// The capacity half of the scheduler (as TensorRT-LLM splits a capacity scheduler from a
// micro-batch scheduler): who may hold KV blocks and run slots. It keeps the tenant table
// with each tenant's running and waiting counts, reads what each tenant holds from the KV
// cache manager (which counts it per group = tenant index), and is the one place every
// tenant limit is checked: kv_cache_cap_blocks, kv_cache_floor_blocks and (through
// RunSlotsLeft) max_running_requests. It moves a sequence's blocks for the micro-batch
// scheduler (scheduler.h): admission (swap-in, cached prefix, growth), preemption (swap out
// when the swap space has room, else free: recompute) and removal. It never decides what
// runs this step, and never reorders a queue.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/kv_cache_manager.h"
#include "engine/sequence.h"
#include "engine/tenant.h"

namespace pagoda::engine {

class KvCapacity {
 public:
  explicit KvCapacity(KvCacheManager* kv) : kv_(kv) {}

  // Tenants. Index of tenant `name` in tenants(), or -1.
  int32_t Find(const std::string& name) const;
  // Index of `name`, appending it with default terms when unknown (*added = true then).
  int32_t Resolve(const std::string& name, bool* added);
  // Every tenant seen: the table's, then names requests brought (default terms).
  const std::vector<TenantState>& tenants() const { return tenants_; }
  TenantState& tenant(int32_t index) { return tenants_[index]; }
  // Distinct KV blocks tenant `index`'s sequences hold (a block forks or cache hits share
  // counts once).
  int32_t BlocksHeld(int32_t index) const { return kv_->BlocksHeld(index); }
  // Replaces the tenant table (precondition: valid); the sequences in flight keep running
  // under the terms of their name (default terms when it left the table), their counts
  // and blocks recounted.
  void SetTenants(const std::vector<TenantConfig>& table, absl::Span<Sequence* const> running,
                  const std::deque<Sequence*>& waiting);
  // Those of `seqs` whose tokens need more blocks than their tenant may ever hold, each
  // with a ResourceExhausted naming the limit (Scheduler::Unsatisfiable).
  void AddUnsatisfiable(absl::Span<Sequence* const> seqs,
                        std::vector<std::pair<Sequence*, absl::Status>>* out) const;

  // Limits. Whether tenant `index` may run `slots` more sequences (max_running_requests).
  bool HasRunSlots(int32_t index, int32_t slots) const;
  // Whether `need` more blocks keep tenant `index` within its kv_cache_cap_blocks.
  bool WithinCap(int32_t index, int32_t need) const;
  // Free blocks tenant `index` may take: free minus the unused floors of the others.
  int32_t AvailableBlocks(int32_t index) const;
  // Those of `running` that may be preempted for `requester` (itself always may): never
  // one whose preemption would push its tenant below its floor.
  std::vector<Sequence*> VictimCandidates(absl::Span<Sequence* const> running,
                                          const Sequence* requester) const;

  // Blocks. Puts new `seq` under tenant `index` (it holds no block yet).
  void Enter(Sequence* seq, int32_t index);
  // Blocks running `seq` lacks to compute `n` more tokens (a copy on write included).
  int32_t BlocksToRun(const Sequence* seq, int32_t n) const;
  // Grows `seq`'s blocks to hold `num_tokens` tokens (copying a shared block it is about to
  // write into `copies`); false, changing nothing, when too few blocks are free.
  bool Reserve(Sequence* seq, int32_t num_tokens, std::vector<BlockCopy>* copies);
  // Admission of waiting `seq`: its blocks back from the swap space, or the cached prefix
  // blocks `cached` names (setting num_computed); the caller checked the blocks are free.
  void TakeBlocks(Sequence* seq, absl::Span<const BlockHash> cached,
                  std::vector<BlockCopy>* copies);
  // Preemption: swaps `seq`'s computed blocks out when the swap space has room for them,
  // else frees them and resets num_computed (recompute).
  void Evict(Sequence* seq, std::vector<BlockCopy>* copies);
  // Frees every block of `seq` (host blocks too) and clears its swapped state; with `gone`,
  // forgets it for good.
  void Free(Sequence* seq, bool gone = false);
  // `child` shares running `parent`'s blocks (its tenant holds no more).
  void Fork(Sequence* parent, Sequence* child);

  int64_t num_swap_outs() const { return num_swap_outs_; }
  int64_t num_swap_ins() const { return num_swap_ins_; }
  int32_t num_swapped() const { return num_swapped_; }
  int64_t prefix_cache_queries() const { return prefix_cache_queries_; }
  int64_t prefix_cache_hits() const { return prefix_cache_hits_; }

 private:
  KvCacheManager* kv_;
  std::vector<TenantState> tenants_;
  absl::flat_hash_map<std::string, int32_t> by_name_;
  int64_t num_swap_outs_ = 0;
  int64_t num_swap_ins_ = 0;
  int32_t num_swapped_ = 0;
  int64_t prefix_cache_queries_ = 0;
  int64_t prefix_cache_hits_ = 0;
};

}  // namespace pagoda::engine
