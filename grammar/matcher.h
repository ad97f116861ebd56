// Per-sequence parse state of a Grammar: the set of positions the input so far can be at,
// each with its return stack. A stack is a chain of frames in an append-only arena, so
// states share their common tails; a reference in tail position reuses its caller's frame
// (repetitions keep a constant stack).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "grammar/grammar.h"

namespace pagoda::grammar {

class TokenMasker;

class Matcher {
 public:
  // A byte that would leave more heads than this is refused (a bound on the work per byte
  // for grammars whose alternatives overlap at every level, e.g. nested identical anyOf).
  static constexpr size_t kMaxHeads = 4096;

  // A position in the element array (always a kBytes element) and its return stack.
  struct Head {
    int32_t pos;
    int32_t frame;  // index into the arena; -1: the root (its end accepts)
    bool operator==(const Head&) const = default;
  };
  // What Save returns; Restore brings the matcher back to it (valid until Compact).
  struct Snapshot {
    size_t arena_size = 0;
    std::vector<Head> heads;
    bool can_end = false;
  };

  // At the start of `grammar`'s root rule.
  explicit Matcher(std::shared_ptr<const Grammar> grammar);

  // Consumes `bytes`; false (and the state unchanged) when they do not continue a valid
  // prefix of the grammar's language.
  bool Advance(std::string_view bytes);
  // True when the input so far is a whole sentence of the grammar.
  bool CanEnd() const { return can_end_; }
  // True when no byte can follow (the input is complete and nothing may be appended).
  bool IsDone() const { return heads_.empty(); }

  Snapshot Save() const { return Snapshot{arena_.size(), heads_, can_end_}; }
  void Restore(const Snapshot& snapshot);
  // Drops arena frames no head reaches (Snapshots taken before become invalid). Call once
  // per accepted token so a long generation keeps a small state.
  void Compact();

  const Grammar& grammar() const { return *grammar_; }
  size_t arena_size() const { return arena_.size(); }
  size_t num_heads() const { return heads_.size(); }

 private:
  friend class TokenMasker;
  friend class StateStore;
  struct Frame {
    int32_t ret;     // element position to continue at when the callee ends
    int32_t parent;  // the caller's frame
  };

  // Appends to `out` the heads reached from element `pos` under `frame` without consuming
  // input (expanding references, returning at ends); sets *can_end at the root's end.
  void Expand(int32_t pos, int32_t frame, std::vector<Head>* out, bool* can_end);
  // The heads after byte `b` from `in`; false when none survive and the end is not reached.
  bool Step(const Head* in, size_t n, uint8_t b, std::vector<Head>* out, bool* can_end);

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Frame> arena_;
  std::vector<Head> heads_;
  bool can_end_ = false;
  std::vector<Head> scratch_;
  // StateStore's matcher only: frames are hash-consed ((ret, parent) -> index), so equal
  // stacks are the same frame and a state is identified by its heads alone.
  absl::flat_hash_map<uint64_t, int32_t>* interned_frames_ = nullptr;
};

}  // namespace pagoda::grammar
