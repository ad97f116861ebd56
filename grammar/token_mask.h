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
// at every step). At most `max_masks` masks and about `max_states` states (each ~1 KiB)
// are kept; past that both start over. One cache per grammar and masker; not thread-safe.
class MaskCache {
 public:
  explicit MaskCache(size_t max_masks = 64, size_t max_states = 4096);
  MaskCache(MaskCache&&) noexcept;
  MaskCache& operator=(MaskCache&&) noexcept;
  ~MaskCache();
  size_t hits() const { return hits_; }
  size_t num_states() const;

 private:
  friend class TokenMasker;
  size_t max_masks_;
  size_t max_states_;
  size_t hits_ = 0;
  std::unique_ptr<StateStore> store_;
  absl::flat_hash_map<int32_t, TokenBitmask> masks_;
};

class TokenMasker {
 public:
  // `token_bytes[id]` is token id's bytes; tokens with no bytes (control, unused) are never
  // allowed, except the ids in `eos_ids`, which are allowed exactly where the matcher can end.
  TokenMasker(const std::vector<std::string>& token_bytes, absl::Span<const int32_t> eos_ids);

  int32_t vocab_size() const { return vocab_size_; }
  // Fills `mask` (resized to vocab_size() bits) with the tokens `matcher` may take next.
  // The matcher is used as scratch and left as it was. Not thread-safe per masker (it keeps
  // scratch buffers): use one masker per thread.
  void FillMask(Matcher* matcher, TokenBitmask* mask);
  // As FillMask, through `cache` (made for matchers of one grammar; another grammar's
  // matcher resets it).
  void FillMask(Matcher* matcher, TokenBitmask* mask, MaskCache* cache);

 private:
  int32_t vocab_size_ = 0;
  std::vector<int32_t> eos_ids_;
  // Non-empty tokens sorted by bytes; lcp_[i] = common prefix length of sorted_[i] and
  // sorted_[i - 1] (0 for i = 0).
  std::vector<int32_t> sorted_;
  std::vector<uint16_t> lcp_;
  std::vector<std::string> bytes_;  // by sorted position
  // Scratch: the heads after each depth of the current trie path, and the arena size then.
  std::vector<std::vector<Matcher::Head>> levels_;
  std::vector<size_t> level_arena_;
  std::vector<int32_t> level_state_;  // the cached walk's state ids per depth
};

}  // namespace pagoda::grammar
