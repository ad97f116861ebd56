#include "engine/kv_cache_manager.h"

#include <algorithm>

namespace pagoda::engine {

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size)
    : block_size_(block_size), pool_(num_blocks) {}

int32_t KvCacheManager::BlocksFor(int32_t num_tokens) const {
  return (num_tokens + block_size_ - 1) / block_size_;
}

int32_t KvCacheManager::BlocksNeeded(SeqId seq, int32_t num_tokens) const {
  const auto it = tables_.find(seq);
  const int32_t have = it == tables_.end() ? 0 : static_cast<int32_t>(it->second.size());
  return std::max(0, BlocksFor(num_tokens) - have);
}

bool KvCacheManager::Reserve(SeqId seq, int32_t num_tokens) {
  const int32_t need = BlocksNeeded(seq, num_tokens);
  if (need == 0) return true;
  if (need > pool_.num_free()) return false;
  return pool_.Allocate(need, &tables_[seq]);
}

void KvCacheManager::Free(SeqId seq) {
  const auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  for (auto b = it->second.rbegin(); b != it->second.rend(); ++b) pool_.Release(*b);
  tables_.erase(it);
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
