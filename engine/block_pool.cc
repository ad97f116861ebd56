#include "engine/block_pool.h"

#include <cassert>

namespace pagoda::engine {

BlockPool::BlockPool(int32_t num_blocks)
    : ref_counts_(num_blocks, 0),
      has_hash_(num_blocks, false),
      hashes_(num_blocks),
      prev_(num_blocks, -1),
      next_(num_blocks, -1) {
  for (int32_t i = 0; i < num_blocks; ++i) plain_.push_back(i);
}

void BlockPool::LinkBack(int32_t id) {
  prev_[id] = tail_;
  next_[id] = -1;
  if (tail_ >= 0) {
    next_[tail_] = id;
  } else {
    head_ = id;
  }
  tail_ = id;
  ++num_cached_free_;
}

void BlockPool::Unlink(int32_t id) {
  if (prev_[id] >= 0) {
    next_[prev_[id]] = next_[id];
  } else {
    head_ = next_[id];
  }
  if (next_[id] >= 0) {
    prev_[next_[id]] = prev_[id];
  } else {
    tail_ = prev_[id];
  }
  prev_[id] = next_[id] = -1;
  --num_cached_free_;
}

bool BlockPool::Allocate(int32_t n, std::vector<int32_t>* out) {
  if (n < 0 || n > num_free()) return false;
  for (int32_t i = 0; i < n; ++i) {
    int32_t id;
    if (!plain_.empty()) {
      id = plain_.front();
      plain_.pop_front();
    } else {
      id = head_;
      Unlink(id);
      by_hash_.erase(hashes_[id]);
      has_hash_[id] = false;
      ++num_evictions_;
    }
    ref_counts_[id] = 1;
    out->push_back(id);
  }
  return true;
}

void BlockPool::AddRef(int32_t id) {
  if (ref_counts_[id] == 0) {
    assert(has_hash_[id]);  // only cached free blocks are taken back
    Unlink(id);
  }
  ++ref_counts_[id];
}

void BlockPool::Release(int32_t id) {
  assert(ref_counts_[id] > 0);
  if (--ref_counts_[id] > 0) return;
  if (has_hash_[id]) {
    LinkBack(id);
  } else {
    plain_.push_back(id);
  }
}

int32_t BlockPool::Lookup(const BlockHash& hash) const {
  const auto it = by_hash_.find(hash);
  return it == by_hash_.end() ? -1 : it->second;
}

bool BlockPool::Register(int32_t id, const BlockHash& hash) {
  assert(ref_counts_[id] > 0);
  if (has_hash_[id] || by_hash_.contains(hash)) return false;
  by_hash_[hash] = id;
  hashes_[id] = hash;
  has_hash_[id] = true;
  return true;
}

std::vector<int32_t> BlockPool::CachedFreeInEvictionOrder() const {
  std::vector<int32_t> ids;
  for (int32_t id = head_; id >= 0; id = next_[id]) ids.push_back(id);
  return ids;
}

double BlockPool::usage() const {
  if (ref_counts_.empty()) return 0;
  return 1.0 - static_cast<double>(num_free()) / static_cast<double>(ref_counts_.size());
}

}  // namespace pagoda::engine
