#include "engine/kv_cache_manager.h"

#include <algorithm>
#include <cassert>

namespace pagoda::engine {

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size, bool prefix_caching,
                               PrefixHasher hasher, int32_t num_host_blocks)
    : block_size_(block_size),
      prefix_caching_(prefix_caching),
      hasher_(hasher),
      pool_(num_blocks),
      host_pool_(num_host_blocks) {}

int32_t KvCacheManager::BlocksFor(int32_t num_tokens) const {
  return (num_tokens + block_size_ - 1) / block_size_;
}

int32_t KvCacheManager::BlocksNeeded(SeqId seq, int32_t num_tokens, int32_t first_write) const {
  const std::vector<int32_t>& table = BlockTable(seq);
  const auto have = static_cast<int32_t>(table.size());
  int32_t need = std::max(0, BlocksFor(num_tokens) - have);
  if (first_write >= 0) {
    const int32_t b = first_write / block_size_;
    if (b < have && pool_.ref_count(table[b]) > 1) ++need;
  }
  return need;
}

bool KvCacheManager::Reserve(SeqId seq, int32_t num_tokens, int32_t first_write,
                             std::vector<BlockCopy>* copies) {
  const int32_t need = BlocksNeeded(seq, num_tokens, first_write);
  if (need == 0) return true;
  if (need > pool_.num_free()) return false;
  std::vector<int32_t>& table = tables_[seq];
  if (first_write >= 0) {
    const int32_t b = first_write / block_size_;
    if (b < static_cast<int32_t>(table.size()) && pool_.ref_count(table[b]) > 1 &&
        fault_ != InjectedFault::kReuseBlockEarly) {
      std::vector<int32_t> fresh;
      AllocateFor(seq, 1, &fresh);
      copies->push_back({.src = table[b], .dst = fresh[0]});
      ReleaseFor(seq, table[b]);
      table[b] = fresh[0];
      // The copy is private and not yet named: registration resumes from it.
      int32_t& registered = registered_[seq];
      registered = std::min(registered, b);
    }
  }
  const int32_t grow = std::max(0, BlocksFor(num_tokens) - static_cast<int32_t>(table.size()));
  return AllocateFor(seq, grow, &table);
}

void KvCacheManager::Free(SeqId seq) {
  registered_.erase(seq);
  if (const auto h = host_tables_.find(seq); h != host_tables_.end()) {
    for (int32_t b : h->second) host_pool_.Release(b);
    host_tables_.erase(h);
  }
  const auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  for (auto b = it->second.rbegin(); b != it->second.rend(); ++b) ReleaseFor(seq, *b);
  tables_.erase(it);
}

void KvCacheManager::Forget(SeqId seq) {
  Free(seq);
  groups_.erase(seq);
}

void KvCacheManager::SetGroup(SeqId seq, int32_t group) {
  assert(group >= 0 && BlockTable(seq).empty());
  if (group == 0) {
    groups_.erase(seq);
  } else {
    groups_[seq] = group;
  }
}

void KvCacheManager::Regroup(absl::Span<const std::pair<SeqId, int32_t>> groups) {
  groups_.clear();
  for (const auto& [seq, group] : groups) {
    if (group != 0) groups_[seq] = group;
  }
  held_.clear();
  // A block shared by several sequences of a group counts once.
  std::vector<int32_t> counted(pool_.num_blocks(), -1);
  for (const auto& [seq, table] : tables_) {
    const int32_t group = GroupOf(seq);
    for (int32_t b : table) {
      if (counted[b] == group) continue;
      assert(counted[b] < 0);  // never shared across groups
      counted[b] = group;
      Charge(seq, 1);
    }
  }
}

int32_t KvCacheManager::BlocksHeld(int32_t group) const {
  return group < static_cast<int32_t>(held_.size()) ? held_[group] : 0;
}

int32_t KvCacheManager::GroupOf(SeqId seq) const {
  const auto it = groups_.find(seq);
  return it == groups_.end() ? 0 : it->second;
}

void KvCacheManager::Charge(SeqId seq, int32_t n) {
  const int32_t group = GroupOf(seq);
  if (group >= static_cast<int32_t>(held_.size())) held_.resize(group + 1, 0);
  held_[group] += n;
}

bool KvCacheManager::AllocateFor(SeqId seq, int32_t n, std::vector<int32_t>* table) {
  if (!pool_.Allocate(n, table)) return false;
  Charge(seq, n);
  return true;
}

void KvCacheManager::ReleaseFor(SeqId seq, int32_t block) {
  pool_.Release(block);
  if (pool_.ref_count(block) == 0) Charge(seq, -1);
}

bool KvCacheManager::CanSwapOut(SeqId seq, int32_t num_computed) const {
  const auto have = static_cast<int32_t>(BlockTable(seq).size());
  return std::min(BlocksFor(num_computed), have) <= host_pool_.num_free();
}

void KvCacheManager::SwapOut(SeqId seq, int32_t num_computed, std::vector<BlockCopy>* copies) {
  assert(!host_tables_.contains(seq));
  const std::vector<int32_t>& table = BlockTable(seq);
  const int32_t n = std::min(BlocksFor(num_computed), static_cast<int32_t>(table.size()));
  std::vector<int32_t> host;
  host_pool_.Allocate(n, &host);
  for (int32_t i = 0; i < n; ++i) {
    copies->push_back({.src = table[i], .dst = host[i], .kind = CopyKind::kToHost});
  }
  Free(seq);
  host_tables_[seq] = std::move(host);
}

int32_t KvCacheManager::NumSwapped(SeqId seq) const {
  const auto it = host_tables_.find(seq);
  return it == host_tables_.end() ? 0 : static_cast<int32_t>(it->second.size());
}

bool KvCacheManager::SwapIn(SeqId seq, std::vector<BlockCopy>* copies) {
  const auto it = host_tables_.find(seq);
  if (it == host_tables_.end()) return true;
  const auto n = static_cast<int32_t>(it->second.size());
  if (n > pool_.num_free() || !BlockTable(seq).empty()) return false;
  std::vector<int32_t>& table = tables_[seq];
  AllocateFor(seq, n, &table);
  for (int32_t i = 0; i < n; ++i) {
    copies->push_back({.src = it->second[i], .dst = table[i], .kind = CopyKind::kFromHost});
  }
  // The copies run in order, so a later swap-out may reuse these host blocks this step.
  for (int32_t b : it->second) host_pool_.Release(b);
  host_tables_.erase(it);
  registered_[seq] = 0;  // fresh blocks: named again as OnStepDone sees them
  return true;
}

void KvCacheManager::Fork(SeqId parent, SeqId child) {
  assert(!tables_.contains(child));
  const std::vector<int32_t> table = BlockTable(parent);
  SetGroup(child, GroupOf(parent));
  for (int32_t b : table) pool_.AddRef(b);  // held already: the group holds no more
  tables_[child] = table;
  if (const auto it = registered_.find(parent); it != registered_.end()) {
    registered_[child] = it->second;
  }
}

void KvCacheManager::HashBlocks(const BlockHash& root, absl::Span<const int32_t> tokens,
                                int32_t num_blocks, std::vector<BlockHash>* hashes) const {
  while (static_cast<int32_t>(hashes->size()) < num_blocks) {
    const size_t b = hashes->size();
    const BlockHash& parent = b == 0 ? root : (*hashes)[b - 1];
    hashes->push_back(hasher_.Next(parent, tokens.subspan(b * block_size_, block_size_)));
  }
}

int32_t KvCacheManager::MatchPrefix(const BlockHash& root, absl::Span<const int32_t> tokens,
                                    int32_t max_tokens, std::vector<BlockHash>* hashes) const {
  if (!prefix_caching_) return 0;
  const int32_t limit =
      std::min<int32_t>(max_tokens, static_cast<int32_t>(tokens.size())) / block_size_;
  int32_t hit = 0;
  while (hit < limit) {
    HashBlocks(root, tokens, hit + 1, hashes);
    if (pool_.Lookup((*hashes)[hit]) < 0) break;
    ++hit;
  }
  return hit;
}

int32_t KvCacheManager::NumFreeAmong(absl::Span<const BlockHash> hashes) const {
  int32_t n = 0;
  for (const BlockHash& h : hashes) {
    const int32_t id = pool_.Lookup(h);
    if (id >= 0 && pool_.ref_count(id) == 0) ++n;
  }
  return n;
}

void KvCacheManager::TakeCached(SeqId seq, absl::Span<const BlockHash> hashes) {
  if (hashes.empty()) return;
  std::vector<int32_t>& table = tables_[seq];
  assert(table.empty());
  for (const BlockHash& h : hashes) {
    const int32_t id = pool_.Lookup(h);
    assert(id >= 0);
    if (pool_.ref_count(id) == 0) Charge(seq, 1);  // a cached free block taken back
    pool_.AddRef(id);
    table.push_back(id);
  }
  registered_[seq] = static_cast<int32_t>(hashes.size());
}

void KvCacheManager::CacheFullBlocks(SeqId seq, absl::Span<const BlockHash> hashes,
                                     int32_t num_computed) {
  if (!prefix_caching_) return;
  const auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  const int32_t full =
      std::min<int32_t>(num_computed / block_size_, static_cast<int32_t>(it->second.size()));
  int32_t& registered = registered_[seq];
  for (; registered < full; ++registered) {
    // A block whose hash already names another block (computed twice) stays unnamed.
    pool_.Register(it->second[registered], hashes[registered]);
  }
}

const std::vector<int32_t>& KvCacheManager::BlockTable(SeqId seq) const {
  static const std::vector<int32_t> kEmpty;
  const auto it = tables_.find(seq);
  return it == tables_.end() ? kEmpty : it->second;
}

int32_t KvCacheManager::Slot(SeqId seq, int32_t index) const {
  return BlockTable(seq)[index / block_size_] * block_size_ + index % block_size_;
}

}  // namespace pagoda::engine
