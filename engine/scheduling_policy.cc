#include "engine/scheduling_policy.h"

namespace pagoda::engine {

bool IsBlocked(const Sequence& seq, const std::vector<bool>& blocked) {
  const auto t = static_cast<size_t>(seq.tenant_index);
  return t < blocked.size() && blocked[t];
}

size_t FirstOfTenantByPriority(const std::deque<Sequence*>& waiting, int32_t tenant) {
  size_t best = waiting.size();
  for (size_t i = 0; i < waiting.size(); ++i) {
    if (waiting[i]->tenant_index != tenant) continue;
    if (best == waiting.size() || waiting[i]->priority() < waiting[best]->priority()) best = i;
  }
  return best;
}

Sequence* VictimOfTenantByPriority(const std::vector<Sequence*>& candidates, int32_t tenant) {
  Sequence* victim = nullptr;
  for (Sequence* s : candidates) {
    if (s->tenant_index != tenant) continue;
    if (victim == nullptr || s->priority() > victim->priority() ||
        (s->priority() == victim->priority() && s->id > victim->id)) {
      victim = s;
    }
  }
  return victim;
}

size_t FcfsPolicy::PickNextWaiting(const std::deque<Sequence*>& waiting,
                                   const std::vector<bool>& blocked) {
  for (size_t i = 0; i < waiting.size(); ++i) {
    if (!IsBlocked(*waiting[i], blocked)) {
      return FirstOfTenantByPriority(waiting, waiting[i]->tenant_index);
    }
  }
  return waiting.size();
}

Sequence* FcfsPolicy::PickVictim(const std::vector<Sequence*>& candidates) {
  Sequence* newest = candidates.front();
  for (Sequence* s : candidates) {
    if (s->id > newest->id) newest = s;
  }
  return VictimOfTenantByPriority(candidates, newest->tenant_index);
}

}  // namespace pagoda::engine
