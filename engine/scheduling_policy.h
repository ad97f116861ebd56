// Whom to admit next and whom to preempt: the one place where fairness and priorities
// plug into the scheduler. The scheduler enforces quotas (caps, floors, running limits)
// and tells the policy which tenants are blocked and which sequences may be preempted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "engine/sequence.h"
#include "engine/tenant.h"

namespace pagoda::engine {

class SchedulingPolicy {
 public:
  virtual ~SchedulingPolicy() = default;
  // The tenant table changed or grew: Sequence::tenant_index now indexes `tenants` (state
  // is matched by name). Called before any other hook sees a new index.
  virtual void OnTenantsChanged(const std::vector<TenantState>& tenants) {}
  // Tenant `tenant` went from nothing waiting or running to backlogged.
  virtual void OnTenantActive(int32_t tenant) {}
  // Tenant `tenant` has nothing left waiting or running.
  virtual void OnTenantIdle(int32_t tenant) {}
  // `seq` runs tokens [seq.num_computed, seq.num_computed + num_tokens) this step.
  virtual void OnScheduled(const Sequence& seq, int32_t num_tokens) {}
  // Index into `waiting` of the sequence to admit next, skipping sequences whose
  // tenant_index is marked in `blocked` (shorter than the table: unmarked); waiting.size()
  // when every sequence is skipped.
  virtual size_t PickNextWaiting(const std::deque<Sequence*>& waiting,
                                 const std::vector<bool>& blocked) = 0;
  // The sequence to preempt among non-empty `candidates` (running, not floor-protected).
  virtual Sequence* PickVictim(const std::vector<Sequence*>& candidates) = 0;
  // True when a tenant below its weighted share of the run slots may take a slot from a
  // tenant above its share (the newest sequence of the one furthest above is preempted).
  virtual bool RebalancesRunSlots() const { return false; }
};

// True when `blocked` marks `seq`'s tenant.
bool IsBlocked(const Sequence& seq, const std::vector<bool>& blocked);

// Arrival order (preempted sequences, requeued at the front, come back first), tenants
// ignored except for the blocked ones; the victim is the one of lowest priority (highest
// value), newest first among equals.
class FcfsPolicy final : public SchedulingPolicy {
 public:
  size_t PickNextWaiting(const std::deque<Sequence*>& waiting,
                         const std::vector<bool>& blocked) override;
  Sequence* PickVictim(const std::vector<Sequence*>& candidates) override;
};

}  // namespace pagoda::engine
