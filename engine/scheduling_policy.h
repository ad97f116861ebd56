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

// A request's `priority` orders only its own tenant's sequences (never across tenants, so
// no client escapes preemption or jumps another tenant's queue by setting it). Policies
// pick a tenant, then one of its sequences with these two.
// Index into `waiting` of tenant `tenant`'s sequence of lowest priority value (the earliest
// among equals); waiting.size() when it has none.
size_t FirstOfTenantByPriority(const std::deque<Sequence*>& waiting, int32_t tenant);
// Tenant `tenant`'s sequence among `candidates` of highest priority value (the newest among
// equals); null when it has none.
Sequence* VictimOfTenantByPriority(const std::vector<Sequence*>& candidates, int32_t tenant);

// Arrival order (preempted sequences, requeued at the front, come back first), tenants
// ignored except for the blocked ones: the tenant of the first unblocked sequence admits
// its sequence of lowest priority value. The victim's tenant is the newest candidate's;
// among its sequences, the one of lowest priority (highest value), newest among equals.
class FcfsPolicy final : public SchedulingPolicy {
 public:
  size_t PickNextWaiting(const std::deque<Sequence*>& waiting,
                         const std::vector<bool>& blocked) override;
  Sequence* PickVictim(const std::vector<Sequence*>& candidates) override;
};

}  // namespace pagoda::engine
