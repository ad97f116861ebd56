// Per-sequence parse state of a Grammar: the set of positions the input so far can be at,
// each with its return stack. A stack is a chain of frames in an append-only arena, so
// states share their common tails; a reference in tail position reuses its caller's frame
// (repetitions keep a constant stack).
//
// Bounded: the work of reaching the positions after one byte (or the start) is an
// expansion of references whose paths may multiply with every level of an ambiguous
// grammar. Each (reference, frame) is expanded once per byte (a visit memo), heads are
// deduplicated by hash, and MatcherLimits caps the heads and the expansion steps of one
// byte. A byte over a limit leaves the matcher failed (status() names the limit and the
// rule being expanded): it refuses every later byte, and its owner ends the request.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "grammar/grammar.h"

namespace pagoda::grammar {

class TokenMasker;

// What one matcher may spend.
struct MatcherLimits {
  // Parse positions after one byte: an ambiguous grammar (alternatives that overlap at
  // every level) doubles them per level.
  size_t max_heads = 4096;
  // Expansion steps (elements visited) to reach the positions after one byte or the start.
  int64_t max_steps_per_byte = int64_t{1} << 16;
  // Expansion steps of one token mask (TokenMasker::FillMask walks the vocabulary's byte
  // trie, a byte step per trie edge not already known to the mask cache); with a shared
  // MaskCache epoch, of all the masks of one engine step of one request. About 35 ms on a
  // 128k vocabulary (pagoda-grammar-bench); a nested schema's masks take at most ~47k.
  int64_t max_steps_per_mask = int64_t{1} << 20;
};

class Matcher {
 public:
  // The default MatcherLimits::max_heads.
  static constexpr size_t kMaxHeads = MatcherLimits{}.max_heads;

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
  // What a byte does to a set of heads.
  enum class StepResult : uint8_t {
    kRefused,     // no position takes it
    kAccepted,    // some position takes it (or it ends the sentence)
    kOverBudget,  // a limit was reached: the matcher is failed (status())
  };

  // At the start of `grammar`'s root rule; failed (status()) when the start is over `limits`.
  explicit Matcher(std::shared_ptr<const Grammar> grammar, const MatcherLimits& limits = {});
  Matcher(const Matcher&) = default;
  Matcher& operator=(const Matcher&) = default;
  Matcher(Matcher&&) noexcept = default;
  Matcher& operator=(Matcher&&) noexcept = default;

  // Consumes `bytes`; false (and the state unchanged) when they do not continue a valid
  // prefix of the grammar's language, or when a byte is over the limits (then status()).
  bool Advance(std::string_view bytes);
  // True when the input so far is a whole sentence of the grammar.
  bool CanEnd() const { return can_end_; }
  // True when no byte can follow (the input is complete and nothing may be appended).
  bool IsDone() const { return heads_.empty(); }
  // OK, or ResourceExhausted naming the limit a byte (or the start) went over; sticky.
  const absl::Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }

  Snapshot Save() const { return Snapshot{arena_.size(), heads_, can_end_}; }
  void Restore(const Snapshot& snapshot);
  // Drops arena frames no head reaches (Snapshots taken before become invalid). Call once
  // per accepted token so a long generation keeps a small state.
  void Compact();

  const Grammar& grammar() const { return *grammar_; }
  const std::shared_ptr<const Grammar>& shared_grammar() const { return grammar_; }
  const MatcherLimits& limits() const { return limits_; }
  size_t arena_size() const { return arena_.size(); }
  size_t num_heads() const { return heads_.size(); }
  // Expansion steps spent since construction (every byte tried, masks' included): what the
  // limits bound, and what tests measure cost by.
  int64_t steps() const { return steps_; }

 private:
  friend class TokenMasker;
  friend class StateStore;
  struct Frame {
    int32_t ret;     // element position to continue at when the callee ends
    int32_t parent;  // the caller's frame
  };
  // StateStore's matcher: no heads, no start expanded (it steps states of its own).
  struct Unstarted {};
  Matcher(std::shared_ptr<const Grammar> grammar, const MatcherLimits& limits, Unstarted)
      : grammar_(std::move(grammar)), limits_(limits) {}

  // Starts a byte's expansion into `out` (cleared): resets the memo and the byte's budget.
  void BeginExpansion(std::vector<Head>* out);
  // Adds to the expansion's heads those reached from element `pos` under `frame` without
  // consuming input (expanding references, returning at ends); sets *can_end at the root's
  // end. False when a limit was reached (status_ set).
  bool Expand(int32_t pos, int32_t frame, std::vector<Head>* out, bool* can_end);
  // The heads after byte `b` from `in`.
  StepResult Step(const Head* in, size_t n, uint8_t b, std::vector<Head>* out, bool* can_end);
  // Appends `head` to `out` unless it is there already; false past max_heads.
  bool AddHead(const Head& head, std::vector<Head>* out);
  // Sets status_ for `limit` reached while expanding element `pos`.
  void Exhausted(const char* limit, int64_t value, int32_t pos);

  std::shared_ptr<const Grammar> grammar_;
  MatcherLimits limits_;
  std::vector<Frame> arena_;
  std::vector<Head> heads_;
  bool can_end_ = false;
  absl::Status status_;
  int64_t steps_ = 0;
  std::vector<Head> scratch_;
  // One byte's expansion: its step budget left, the references expanded ((pos, frame)),
  // the heads added (a hash set once there are more than a few), and the pending work.
  int64_t byte_budget_ = 0;
  absl::flat_hash_set<uint64_t> visited_;
  absl::flat_hash_set<uint64_t> head_set_;
  std::vector<Head> todo_;
  // StateStore's matcher only: frames are hash-consed ((ret, parent) -> index), so equal
  // stacks are the same frame and a state is identified by its heads alone.
  absl::flat_hash_map<uint64_t, int32_t>* interned_frames_ = nullptr;
};

}  // namespace pagoda::grammar
