#include "grammar/state_store.h"

#include <algorithm>
#include <utility>

namespace pagoda::grammar {

StateStore::StateStore(std::shared_ptr<const Grammar> grammar) : matcher_(std::move(grammar)) {
  Clear();
}

void StateStore::Clear() {
  matcher_.arena_.clear();
  matcher_.heads_.clear();
  frames_.clear();
  states_.clear();
  ids_.clear();
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
    states_.push_back(std::move(s));
  }
  return it->second;
}

int32_t StateStore::Intern(const Matcher& m) {
  out_.clear();
  for (const Matcher::Head& h : m.heads_) {
    // The head's stack from the root down, re-made of interned frames.
    chain_.clear();
    for (int32_t f = h.frame; f >= 0; f = m.arena_[f].parent) chain_.push_back(m.arena_[f].ret);
    int32_t frame = -1;
    for (size_t i = chain_.size(); i-- > 0;) {
      const uint64_t key =
          (uint64_t{static_cast<uint32_t>(chain_[i])} << 32) | static_cast<uint32_t>(frame);
      const auto [it, added] =
          frames_.try_emplace(key, static_cast<int32_t>(matcher_.arena_.size()));
      if (added) matcher_.arena_.push_back(Matcher::Frame{chain_[i], frame});
      frame = it->second;
    }
    const Matcher::Head head{h.pos, frame};
    if (std::find(out_.begin(), out_.end(), head) == out_.end()) out_.push_back(head);
  }
  std::vector<Matcher::Head> heads = out_;
  return InternHeads(&heads, m.can_end_);
}

int32_t StateStore::Next(int32_t s, uint8_t b) {
  const int32_t known = states_[s].next[b];
  if (known != kUnknown) return known;
  bool can_end = false;
  const std::vector<Matcher::Head>& in = states_[s].heads;
  int32_t next = kDead;
  if (matcher_.Step(in.data(), in.size(), b, &out_, &can_end)) {
    std::vector<Matcher::Head> heads = out_;
    next = InternHeads(&heads, can_end);
  }
  states_[s].next[b] = next;
  return next;
}

}  // namespace pagoda::grammar
