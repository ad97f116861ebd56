// Maps sequences to block tables over a BlockPool and turns token indices into cache slots.
//
// Token t of a sequence with block table T lives at slot
//   T[t / block_size] * block_size + t % block_size
// so a sequence of L tokens holds ceil(L / block_size) blocks and only its last block can
// be partly empty.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/block_pool.h"

namespace pagoda::engine {

using SeqId = uint64_t;

class KvCacheManager {
 public:
  KvCacheManager(int32_t num_blocks, int32_t block_size);

  // Blocks that `num_tokens` tokens occupy: ceil(num_tokens / block_size).
  int32_t BlocksFor(int32_t num_tokens) const;
  // Blocks `seq` still lacks to hold `num_tokens` tokens.
  int32_t BlocksNeeded(SeqId seq, int32_t num_tokens) const;
  // Grows the table of `seq` so it holds `num_tokens` tokens. Returns false, allocating
  // nothing, when the pool has too few free blocks.
  bool Reserve(SeqId seq, int32_t num_tokens);
  // Returns every block of `seq` to the pool (last block first) and forgets its table.
  void Free(SeqId seq);

  // The block table of `seq` (empty when it holds none).
  const std::vector<int32_t>& BlockTable(SeqId seq) const;
  // Cache slot of token `index` of `seq`; the token's block must be reserved.
  int32_t Slot(SeqId seq, int32_t index) const;

  int32_t block_size() const { return block_size_; }
  int32_t num_blocks() const { return pool_.num_blocks(); }
  int32_t num_free_blocks() const { return pool_.num_free(); }
  int32_t num_sequences() const { return static_cast<int32_t>(tables_.size()); }
  double usage() const { return pool_.usage(); }
  const BlockPool& pool() const { return pool_; }

 private:
  int32_t block_size_;
  BlockPool pool_;
  absl::flat_hash_map<SeqId, std::vector<int32_t>> tables_;
};

}  // namespace pagoda::engine
