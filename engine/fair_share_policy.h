// Weighted fair share of served tokens between tenants: the Virtual Token Counter of
// Sheng et al., "Fairness in Serving Large Language Models" (OSDI 2024).
//
// Each tenant has a counter of the service it got, normalized by its weight: a token
// computed at a prompt position adds kPrefillTokenWeight / weight, a token at an output
// position (a decode step, or recomputing output after a preemption) adds
// kDecodeTokenWeight / weight, charged when the scheduler hands out the chunk. A tenant that
// becomes backlogged (had nothing waiting or running) has its counter lifted to the lowest
// counter among the backlogged tenants of its priority class (or, when none is, to the
// counter of the last one of its class that went idle), so idle time banks no credit.
//
// Admission: critical before standard before sheddable; within a class the backlogged
// tenant with the lowest counter (ties: the one whose next sequence is earlier in the
// queue); within a tenant the lowest request priority value (ties: queue order, preempted
// sequences first).
// Victim: sheddable before standard before critical; within a class the tenant with the
// highest counter (furthest over its share; ties: the newest sequence's); within that
// tenant the highest request priority value, then the newest sequence.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "engine/scheduling_policy.h"

namespace pagoda::engine {

class FairSharePolicy final : public SchedulingPolicy {
 public:
  // Cost of one prompt token (w_p) and one output token (w_q): a decode token is worth two
  // prompt tokens, as in the paper's evaluation (output tokens cost more to serve).
  static constexpr double kPrefillTokenWeight = 1;
  static constexpr double kDecodeTokenWeight = 2;

  void OnTenantsChanged(const std::vector<TenantState>& tenants) override;
  void OnTenantActive(int32_t tenant) override;
  void OnTenantIdle(int32_t tenant) override;
  void OnScheduled(const Sequence& seq, int32_t num_tokens) override;
  size_t PickNextWaiting(const std::deque<Sequence*>& waiting,
                         const std::vector<bool>& blocked) override;
  Sequence* PickVictim(const std::vector<Sequence*>& candidates) override;
  bool RebalancesRunSlots() const override { return true; }

  // The normalized counter of tenant `tenant` (an index of the last table); 0 if unknown.
  double counter(int32_t tenant) const;

 private:
  struct Entry {
    std::string name;
    double weight = 1;
    PriorityClass priority = PriorityClass::kStandard;
    double counter = 0;
    bool backlogged = false;
  };
  // The entry of `seq`'s tenant; a default one when the index is unknown.
  const Entry& EntryOf(const Sequence& seq) const;

  std::vector<Entry> tenants_;
  // Per class: the counter of the last tenant that went idle leaving none backlogged.
  std::array<double, 3> last_idle_counter_{};
};

}  // namespace pagoda::engine
