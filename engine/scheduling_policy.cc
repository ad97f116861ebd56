#include "engine/scheduling_policy.h"

namespace pagoda::engine {

size_t FcfsPolicy::PickNextWaiting(const std::deque<Sequence*>& waiting) { return 0; }

Sequence* FcfsPolicy::PickVictim(const std::vector<Sequence*>& running) {
  Sequence* victim = running.front();
  for (Sequence* s : running) {
    if (s->priority() > victim->priority() ||
        (s->priority() == victim->priority() && s->id > victim->id)) {
      victim = s;
    }
  }
  return victim;
}

}  // namespace pagoda::engine
