// A pool of KV-cache block ids with reference counts, free lists and the prefix cache's
// index. It knows nothing of sequences: the KV cache manager maps sequences to blocks. "No
// free block" is an ordinary answer (false), which the scheduler reacts to by preempting.
//
// A free block is either plain (no contents worth keeping) or cached: a full block whose
// contents a hash names (Register). Both count as free. Allocation takes plain blocks
// first, least recently freed first, then evicts cached ones least recently freed first
// (their hashes are forgotten). A cached free block can be taken back by its hash (AddRef)
// without any copy.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/prefix_hash.h"

namespace pagoda::engine {

class BlockPool {
 public:
  // A pool of blocks 0 .. num_blocks-1, all free; a fresh pool hands them out in id order.
  explicit BlockPool(int32_t num_blocks);

  // Takes `n` free blocks (ref count 1), appending their ids to `out`: plain ones first,
  // then evicted cached ones. Returns false and takes nothing when fewer than `n` are free.
  bool Allocate(int32_t n, std::vector<int32_t>* out);
  // Adds a reference to a block: a held one (shared) or a cached free one (taken back).
  void AddRef(int32_t id);
  // Drops one reference; at zero the block goes to the back of its free list (cached when
  // it has a hash), so the least recently freed block is reused first.
  void Release(int32_t id);

  // The block `hash` names, or -1.
  int32_t Lookup(const BlockHash& hash) const;
  // Names held block `id` by `hash`. No-op (false) when `id` already has a hash or `hash`
  // already names another block.
  bool Register(int32_t id, const BlockHash& hash);
  // True when `id` has a hash (held or free).
  bool is_cached(int32_t id) const { return has_hash_[id]; }

  int32_t num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  // Free blocks, plain and cached.
  int32_t num_free() const { return static_cast<int32_t>(plain_.size()) + num_cached_free_; }
  // Free blocks that still hold cached contents.
  int32_t num_cached_free() const { return num_cached_free_; }
  int32_t ref_count(int32_t id) const { return ref_counts_[id]; }
  // Cached blocks evicted (hash dropped to reuse the block), ever.
  int64_t num_evictions() const { return num_evictions_; }
  // The cached free blocks, next to be evicted first (tests).
  std::vector<int32_t> CachedFreeInEvictionOrder() const;
  // Fraction of blocks in use (cached free ones are not), in [0, 1].
  double usage() const;

 private:
  // The cached free list: intrusive doubly-linked, head = least recently freed.
  void LinkBack(int32_t id);
  void Unlink(int32_t id);

  std::vector<int32_t> ref_counts_;
  std::deque<int32_t> plain_;
  std::vector<bool> has_hash_;
  std::vector<BlockHash> hashes_;
  absl::flat_hash_map<BlockHash, int32_t> by_hash_;
  std::vector<int32_t> prev_, next_;  // cached free list links (-1: none)
  int32_t head_ = -1, tail_ = -1;
  int32_t num_cached_free_ = 0;
  int64_t num_evictions_ = 0;
};

}  // namespace pagoda::engine
