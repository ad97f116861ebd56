// The tokens a matcher may take next. The vocabulary (each token id's bytes, as the
// tokenizer decodes them: SentencePiece "▁" already a space, byte-fallback and byte-level
// tokens already their raw bytes) is sorted once into a byte trie laid out in depth-first
// order; a mask walks it with the matcher, one byte per trie edge, dropping a whole subtree
// at its first byte the grammar refuses. Exact: a token is allowed iff the matcher accepts
// all its bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "grammar/matcher.h"

namespace pagoda::grammar {

class StateStore;

// One bit per token id (bit i of word i / 64); set = allowed.
using TokenBitmask = std::vector<uint64_t>;

inline bool MaskAllows(const TokenBitmask& mask, int32_t id) {
  return (mask[id >> 6] >> (id & 63)) & 1;
}

// What masks keep between steps for one grammar: its states interned by value with their
// byte transitions (StateStore: a walk through known states is one table lookup per trie
// edge), and whole masks by state (a state inside a loop, e.g. an unbounded string, recurs
// at every step). At most `max_masks` masks, about `max_states` states (each ~1 KiB) and
// about `max_state_heads` heads in all states are kept; past that both start over (a walk
// that would grow the states past 4 times those finishes without them). One cache per
// grammar; its matchers (a request's samples) may share it, and then may share one step
// budget (set_epoch). Not thread-safe.
class MaskCache {
 public:
  explicit MaskCache(size_t max_masks = 64, size_t max_states = 4096,
                     size_t max_state_heads = size_t{1} << 18);
  MaskCache(MaskCache&&) noexcept;
  MaskCache& operator=(MaskCache&&) noexcept;
  ~MaskCache();
  size_t hits() const { return hits_; }
  size_t num_states() const;
  // Expansion steps spent by the masks made through this cache (what their limit bounds).
  int64_t steps() const;
  // From now on the masks made through this cache for the same `epoch` (an engine step)
  // share one MatcherLimits::max_steps_per_mask between them: a request's samples together
  // cost what one mask may. Never called: each mask has its own.
  void set_epoch(int64_t epoch);
  // Adds `steps` spent outside a mask (a sample advancing past its sampled token) to the
  // epoch's budget; false when that takes it past `limit` (always true without an epoch).
  bool ChargeEpoch(int64_t steps, int64_t limit);

 private:
  friend class TokenMasker;
  size_t max_masks_;
  size_t max_states_;
  size_t max_state_heads_;
  size_t hits_ = 0;
  int64_t steps_before_store_ = 0;  // steps of stores dropped since
  int64_t uncached_steps_ = 0;      // steps of walks that finished without the store
  int64_t epoch_ = -1;              // -1: no shared budget
  int64_t epoch_steps_ = 0;         // spent in this epoch
  std::unique_ptr<StateStore> store_;
  absl::flat_hash_map<int32_t, TokenBitmask> masks_;
  std::vector<int32_t> level_state_;  // the walk's state ids per depth (scratch)
};

class TokenMasker {
 public:
  // `token_bytes[id]` is token id's bytes; tokens with no bytes (control, unused) are never
  // allowed, except the ids in `eos_ids`, which are allowed exactly where the matcher can end.
  TokenMasker(const std::vector<std::string>& token_bytes, absl::Span<const int32_t> eos_ids);

  int32_t vocab_size() const { return vocab_size_; }
  // Fills `mask` (resized to vocab_size() bits) with the tokens `matcher` may take next.
  // The matcher is used as scratch and left as it was. Not thread-safe per masker (it keeps
  // scratch buffers): use one masker per thread. ResourceExhausted (the mask left empty)
  // when the walk goes over the matcher's limits (MatcherLimits: per byte, per mask), or
  // the matcher's status when it failed before.
  absl::Status FillMask(Matcher* matcher, TokenBitmask* mask);
  // As FillMask, through `cache` (made for matchers of one grammar; another grammar's
  // matcher resets it). Thread-safe on the masker: one cache is all the state it writes.
  absl::Status FillMask(const Matcher& matcher, TokenBitmask* mask, MaskCache* cache) const;

 private:
  using Levels = std::vector<std::vector<Matcher::Head>>;
  // The uncached walk: `m` used as scratch (left as it was), `levels` and `level_arena`
  // (longest token + 1 each) too; at most `max_steps` expansion steps (over them: the error
  // names `limit`, the mask's).
  absl::Status Walk(Matcher* m, TokenBitmask* mask, int64_t max_steps, int64_t limit,
                    Levels* levels, std::vector<size_t>* level_arena) const;
  void AllowEnds(bool can_end, TokenBitmask* mask) const;

  int32_t vocab_size_ = 0;
  std::vector<int32_t> eos_ids_;
  // Non-empty tokens sorted by bytes; lcp_[i] = common prefix length of sorted_[i] and
  // sorted_[i - 1] (0 for i = 0).
  std::vector<int32_t> sorted_;
  std::vector<uint16_t> lcp_;
  std::vector<std::string> bytes_;  // by sorted position
  size_t longest_ = 0;
  // Scratch of the non-const FillMask: the heads after each depth of the current trie path,
  // and the arena size then.
  Levels levels_;
  std::vector<size_t> level_arena_;
};

}  // namespace pagoda::grammar
