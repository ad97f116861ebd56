// Whom to admit next and whom to preempt: the one place where fairness, priorities and
// (later) per-tenant quotas plug into the scheduler.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <vector>

#include "engine/sequence.h"

namespace pagoda::engine {

class SchedulingPolicy {
 public:
  virtual ~SchedulingPolicy() = default;
  // Index into non-empty `waiting` of the sequence to admit next.
  virtual size_t PickNextWaiting(const std::deque<Sequence*>& waiting) = 0;
  // The sequence to preempt from non-empty `running` when blocks run out.
  virtual Sequence* PickVictim(const std::vector<Sequence*>& running) = 0;
};

// Arrival order (preempted sequences, requeued at the front, come back first); the victim
// is the one of lowest priority (highest value), newest first among equals.
class FcfsPolicy final : public SchedulingPolicy {
 public:
  size_t PickNextWaiting(const std::deque<Sequence*>& waiting) override;
  Sequence* PickVictim(const std::vector<Sequence*>& running) override;
};

}  // namespace pagoda::engine
