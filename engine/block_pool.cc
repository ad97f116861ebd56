#include "engine/block_pool.h"

#include <cassert>

namespace pagoda::engine {

BlockPool::BlockPool(int32_t num_blocks) : ref_counts_(num_blocks, 0) {
  for (int32_t i = 0; i < num_blocks; ++i) free_.push_back(i);
}

bool BlockPool::Allocate(int32_t n, std::vector<int32_t>* out) {
  if (n < 0 || n > num_free()) return false;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t id = free_.front();
    free_.pop_front();
    ref_counts_[id] = 1;
    out->push_back(id);
  }
  return true;
}

void BlockPool::AddRef(int32_t id) {
  assert(ref_counts_[id] > 0);
  ++ref_counts_[id];
}

void BlockPool::Release(int32_t id) {
  assert(ref_counts_[id] > 0);
  if (--ref_counts_[id] == 0) free_.push_back(id);
}

double BlockPool::usage() const {
  if (ref_counts_.empty()) return 0;
  return 1.0 - static_cast<double>(free_.size()) / static_cast<double>(ref_counts_.size());
}

}  // namespace pagoda::engine
