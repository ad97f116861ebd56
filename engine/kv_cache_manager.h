// Maps sequences to block tables over a BlockPool and turns token indices into cache slots.
//
// Token t of a sequence with block table T lives at slot
//   T[t / block_size] * block_size + t % block_size
// so a sequence of L tokens holds ceil(L / block_size) blocks and only its last block can
// be partly empty.
//
// Blocks can be shared: full blocks found in the prefix cache (by the chained hash of
// their tokens, see prefix_hash.h) and the blocks of a forked sequence (parallel samples).
// A shared block is never written: a write into one is preceded by a copy (copy on write).
//
// Every sequence belongs to a group (the scheduler's tenant; 0 until SetGroup says
// otherwise), and the manager counts the distinct blocks each group holds: a block is held
// while its reference count is above zero, and blocks are shared only within a group (forks
// are the same tenant; the prefix cache is salted per tenant), so a block entering or
// leaving use is charged to the group of the sequence that takes or drops it.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "engine/block_pool.h"
#include "engine/injected_fault.h"
#include "engine/prefix_hash.h"

namespace pagoda::engine {

using SeqId = uint64_t;

// Where a block copy goes: inside the cache (copy on write), or between the cache and the
// host swap space (swap preemption).
enum class CopyKind : uint8_t { kDevice, kToHost, kFromHost };

// Copy the contents of block `src` into block `dst` before the step runs. kToHost: `dst` is
// a swap-space block; kFromHost: `src` is. A step's copies run in the order listed.
struct BlockCopy {
  int32_t src = 0;
  int32_t dst = 0;
  CopyKind kind = CopyKind::kDevice;

  bool operator==(const BlockCopy&) const = default;
};

class KvCacheManager {
 public:
  // `prefix_caching`: full blocks are indexed by hash and reused (see BlockPool).
  // `num_host_blocks`: blocks of host swap space (0: none, preemption recomputes).
  KvCacheManager(int32_t num_blocks, int32_t block_size, bool prefix_caching = false,
                 PrefixHasher hasher = PrefixHasher(), int32_t num_host_blocks = 0);

  // Blocks that `num_tokens` tokens occupy: ceil(num_tokens / block_size).
  int32_t BlocksFor(int32_t num_tokens) const;
  // Blocks `seq` lacks to hold `num_tokens` tokens, plus one when writing from token
  // `first_write` (>= 0) must first copy a shared block.
  int32_t BlocksNeeded(SeqId seq, int32_t num_tokens, int32_t first_write = -1) const;
  // Grows the table of `seq` so it holds `num_tokens` tokens; with `first_write` >= 0, a
  // shared block holding token first_write is replaced by a private copy, appended to
  // `copies` (required then). Returns false, changing nothing, when too few blocks are free.
  bool Reserve(SeqId seq, int32_t num_tokens, int32_t first_write = -1,
               std::vector<BlockCopy>* copies = nullptr);
  // Returns every block of `seq` to the pool (last block first, so a chain's deepest block
  // is evicted before its parents) and forgets its table. Full registered blocks stay cached.
  // Host blocks it holds (swapped out) go back to the swap space.
  void Free(SeqId seq);

  // Swap space. Whether it has room for the blocks of `seq`'s first `num_computed` tokens.
  bool CanSwapOut(SeqId seq, int32_t num_computed) const;
  // Copies the blocks of `seq`'s first `num_computed` tokens to fresh host blocks (kToHost,
  // appended to `copies`) and frees all its blocks; precondition: CanSwapOut, not swapped.
  void SwapOut(SeqId seq, int32_t num_computed, std::vector<BlockCopy>* copies);
  // Host blocks swapped-out `seq` holds (0 when it is not swapped out).
  int32_t NumSwapped(SeqId seq) const;
  // Copies swapped-out `seq` back into fresh blocks (kFromHost, appended to `copies`) and
  // frees its host blocks. Returns false, changing nothing, when too few blocks are free.
  bool SwapIn(SeqId seq, std::vector<BlockCopy>* copies);
  // Gives `child` (no table yet) the blocks of `parent`, shared (one more reference each),
  // and puts it in `parent`'s group.
  void Fork(SeqId parent, SeqId child);

  // Prefix cache. Extends `hashes` (the chain of `tokens` from `root`) to the first
  // `num_blocks` full blocks; precondition: tokens holds them.
  void HashBlocks(const BlockHash& root, absl::Span<const int32_t> tokens, int32_t num_blocks,
                  std::vector<BlockHash>* hashes) const;
  // Leading full blocks of `tokens` cached under `root`, within its first `max_tokens`
  // tokens (0 without prefix caching); extends `hashes` as far as it looked.
  int32_t MatchPrefix(const BlockHash& root, absl::Span<const int32_t> tokens, int32_t max_tokens,
                      std::vector<BlockHash>* hashes) const;
  // How many of the cached blocks `hashes` names are free (taking them uses free blocks).
  int32_t NumFreeAmong(absl::Span<const BlockHash> hashes) const;
  // Starts the empty table of `seq` with the cached blocks `hashes` names (no copy).
  void TakeCached(SeqId seq, absl::Span<const BlockHash> hashes);
  // Names the full blocks of `seq` below token `num_computed` by `hashes` (which must
  // cover them) so later sequences can reuse them.
  void CacheFullBlocks(SeqId seq, absl::Span<const BlockHash> hashes, int32_t num_computed);

  // Groups. Puts `seq` (holding no blocks yet) in `group` (>= 0).
  void SetGroup(SeqId seq, int32_t group);
  // Frees `seq` (Free) and forgets its group: it is gone for good.
  void Forget(SeqId seq);
  // Puts every sequence in `groups` (seq, group) in its group and recounts what each group
  // holds (a new tenant table renumbers the tenants); sequences absent fall back to group 0.
  void Regroup(absl::Span<const std::pair<SeqId, int32_t>> groups);
  // Distinct device blocks the sequences of `group` hold (host swap blocks not counted).
  int32_t BlocksHeld(int32_t group) const;

  // The block table of `seq` (empty when it holds none).
  const std::vector<int32_t>& BlockTable(SeqId seq) const;
  // Cache slot of token `index` of `seq`; the token's block must be reserved.
  int32_t Slot(SeqId seq, int32_t index) const;

  int32_t block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  const PrefixHasher& hasher() const { return hasher_; }
  int32_t num_blocks() const { return pool_.num_blocks(); }
  int32_t num_free_blocks() const { return pool_.num_free(); }
  int32_t num_sequences() const { return static_cast<int32_t>(tables_.size()); }
  double usage() const { return pool_.usage(); }
  const BlockPool& pool() const { return pool_; }
  int32_t num_host_blocks() const { return host_pool_.num_blocks(); }
  int32_t num_free_host_blocks() const { return host_pool_.num_free(); }

  // Tests only (engine/injected_fault.h).
  void set_injected_fault(InjectedFault fault) { fault_ = fault; }

 private:
  int32_t GroupOf(SeqId seq) const;
  // Counts `n` (may be negative) blocks entering use for `seq`'s group.
  void Charge(SeqId seq, int32_t n);
  // Takes `n` fresh blocks for `seq` onto `table`, charging its group.
  bool AllocateFor(SeqId seq, int32_t n, std::vector<int32_t>* table);
  // Drops `seq`'s reference to `block`, uncharging its group when the block leaves use.
  void ReleaseFor(SeqId seq, int32_t block);

  InjectedFault fault_ = InjectedFault::kNone;
  int32_t block_size_;
  bool prefix_caching_;
  PrefixHasher hasher_;
  BlockPool pool_;
  absl::flat_hash_map<SeqId, std::vector<int32_t>> tables_;
  absl::flat_hash_map<SeqId, int32_t> registered_;  // leading blocks already named by hash
  BlockPool host_pool_;                             // the swap space
  absl::flat_hash_map<SeqId, std::vector<int32_t>> host_tables_;  // swapped-out sequences
  absl::flat_hash_map<SeqId, int32_t> groups_;                    // absent: group 0
  std::vector<int32_t> held_;                                     // per group
};

}  // namespace pagoda::engine
