#include "grammar/state_store.h"

#include <algorithm>
#include <utility>

namespace pagoda::grammar {

StateStore::StateStore(std::shared_ptr<const Grammar> grammar, const MatcherLimits& limits)
    : matcher_(std::move(grammar), limits, Matcher::Unstarted{}) {
  Clear();
}

void StateStore::Clear() {
  matcher_.arena_.clear();
  matcher_.heads_.clear();
  frames_.clear();
  states_.clear();
  ids_.clear();
  num_heads_ = 0;
  matcher_.interned_frames_ = &frames_;
}

int32_t StateStore::InternHeads(std::vector<Matcher::Head>* heads, bool can_end) {
  std::sort(heads->begin(), heads->end(), [](const Matcher::Head& a, const Matcher::Head& b) {
    return a.pos != b.pos ? a.pos < b.pos : a.frame < b.frame;
  });
  std::string key(reinterpret_cast<const char*>(heads->data()),
                  heads->size() * sizeof(Matcher::Head));
  key.push_back(can_end ? 1 : 0);
  const auto [it, added] = ids_.try_emplace(std::move(key), static_cast<int32_t>(states_.size()));
  if (added) {
    State s;
    s.heads = *heads;
    s.can_end = can_end;
    s.next.fill(kUnknown);
    num_heads_ += s.heads.size();
    states_.push_back(std::move(s));
  }
  return it->second;
}

int32_t StateStore::Intern(const Matcher& m) {
  // Each of m's frames is re-made of interned frames once (parents precede children in an
  // arena, so a chain stops at the first frame already done): linear in m's arena and heads,
  // however deep and shared its stacks.
  remap_.assign(m.arena_.size(), kUnknown);
  out_.clear();
  seen_.clear();
  for (const Matcher::Head& h : m.heads_) {
    chain_.clear();
    int32_t f = h.frame;
    while (f >= 0 && remap_[f] == kUnknown) {
      chain_.push_back(f);
      f = m.arena_[f].parent;
    }
    int32_t frame = f < 0 ? -1 : remap_[f];
    for (size_t i = chain_.size(); i-- > 0;) {
      const int32_t ret = m.arena_[chain_[i]].ret;
      const uint64_t key =
          (uint64_t{static_cast<uint32_t>(ret)} << 32) | static_cast<uint32_t>(frame);
      const auto [it, added] =
          frames_.try_emplace(key, static_cast<int32_t>(matcher_.arena_.size()));
      if (added) matcher_.arena_.push_back(Matcher::Frame{ret, frame});
      frame = it->second;
      remap_[chain_[i]] = frame;
    }
    const uint64_t key =
        (uint64_t{static_cast<uint32_t>(h.pos)} << 32) | static_cast<uint32_t>(frame);
    if (seen_.insert(key).second) out_.push_back(Matcher::Head{h.pos, frame});
  }
  std::vector<Matcher::Head> heads = out_;
  return InternHeads(&heads, m.can_end_);
}

int32_t StateStore::Next(int32_t s, uint8_t b) {
  const int32_t known = states_[s].next[b];
  if (known != kUnknown) return known;
  bool can_end = false;
  const std::vector<Matcher::Head>& in = states_[s].heads;
  const Matcher::StepResult result = matcher_.Step(in.data(), in.size(), b, &out_, &can_end);
  if (result == Matcher::StepResult::kOverBudget) return kOverBudget;
  int32_t next = kDead;
  if (result == Matcher::StepResult::kAccepted) {
    std::vector<Matcher::Head> heads = out_;
    next = InternHeads(&heads, can_end);
  }
  states_[s].next[b] = next;
  return next;
}

}  // namespace pagoda::grammar
