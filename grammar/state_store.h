// Matcher states interned by value, with their byte transitions memoized (a DFA built
// lazily as masks explore it; internal to grammar/). Frames are hash-consed, so two states
// with the same heads over equal stacks get one id, and a state met again (every character
// of a string is the same state) costs one table lookup per byte instead of a matcher step.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "grammar/matcher.h"

namespace pagoda::grammar {

class StateStore {
 public:
  static constexpr int32_t kDead = -1;
  // Next() went over the matcher's limits: the store's matcher is failed (status()).
  static constexpr int32_t kOverBudget = -3;

  StateStore(std::shared_ptr<const Grammar> grammar, const MatcherLimits& limits);

  // The id of `m`'s current state (interning it).
  int32_t Intern(const Matcher& m);
  // The state after byte `b` from state `s`; kDead when the grammar refuses it, kOverBudget
  // past the limits. May add states (ids stay valid until Clear).
  int32_t Next(int32_t s, uint8_t b);
  bool can_end(int32_t s) const { return states_[s].can_end; }
  size_t size() const { return states_.size(); }
  // Heads held by all states (what the store's memory grows with besides their count).
  size_t num_heads() const { return num_heads_; }
  // The expansion steps the store's matcher has spent, and its status.
  int64_t steps() const { return matcher_.steps(); }
  const absl::Status& status() const { return matcher_.status(); }
  const Grammar* grammar() const { return &matcher_.grammar(); }
  // Forgets every state and frame.
  void Clear();

 private:
  struct State {
    std::vector<Matcher::Head> heads;  // sorted; frames index matcher_.arena_
    bool can_end = false;
    std::array<int32_t, 256> next;  // kUnknown until computed
  };
  static constexpr int32_t kUnknown = -2;

  int32_t InternHeads(std::vector<Matcher::Head>* heads, bool can_end);

  Matcher matcher_;  // its arena holds the interned frames; its own heads are unused
  absl::flat_hash_map<uint64_t, int32_t> frames_;
  std::vector<State> states_;
  absl::flat_hash_map<std::string, int32_t> ids_;
  size_t num_heads_ = 0;
  std::vector<Matcher::Head> out_;
  std::vector<int32_t> chain_;
  std::vector<int32_t> remap_;  // Intern: the sample's frame -> the interned one
  absl::flat_hash_set<uint64_t> seen_;
};

}  // namespace pagoda::grammar
