#include "engine/scheduling_policy.h"

namespace pagoda::engine {

bool IsBlocked(const Sequence& seq, const std::vector<bool>& blocked) {
  const auto t = static_cast<size_t>(seq.tenant_index);
  return t < blocked.size() && blocked[t];
}

size_t FcfsPolicy::PickNextWaiting(const std::deque<Sequence*>& waiting,
                                   const std::vector<bool>& blocked) {
  for (size_t i = 0; i < waiting.size(); ++i) {
    if (!IsBlocked(*waiting[i], blocked)) return i;
  }
  return waiting.size();
}

Sequence* FcfsPolicy::PickVictim(const std::vector<Sequence*>& candidates) {
  Sequence* victim = candidates.front();
  for (Sequence* s : candidates) {
    if (s->priority() > victim->priority() ||
        (s->priority() == victim->priority() && s->id > victim->id)) {
      victim = s;
    }
  }
  return victim;
}

}  // namespace pagoda::engine
