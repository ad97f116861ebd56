// A pool of KV-cache block ids with reference counts and a free list. It knows nothing of
// sequences: the KV cache manager maps sequences to blocks. "No free block" is an ordinary
// answer (false), which the scheduler reacts to by preempting.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

namespace pagoda::engine {

class BlockPool {
 public:
  // A pool of blocks 0 .. num_blocks-1, all free; a fresh pool hands them out in id order.
  explicit BlockPool(int32_t num_blocks);

  // Takes `n` free blocks (ref count 1), appending their ids to `out` in free-list order.
  // Returns false and takes nothing when fewer than `n` are free.
  bool Allocate(int32_t n, std::vector<int32_t>* out);
  // Adds a reference to an allocated block (a block shared by several sequences).
  void AddRef(int32_t id);
  // Drops one reference; at zero the block goes to the back of the free list, so the
  // least recently freed block is reused first.
  void Release(int32_t id);

  int32_t num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t ref_count(int32_t id) const { return ref_counts_[id]; }
  // Fraction of blocks in use, in [0, 1].
  double usage() const;

 private:
  std::vector<int32_t> ref_counts_;
  std::deque<int32_t> free_;
};

}  // namespace pagoda::engine
