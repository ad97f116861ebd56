#include "grammar/token_mask.h"

#include <algorithm>
#include <numeric>

#include "grammar/state_store.h"

namespace pagoda::grammar {

TokenMasker::TokenMasker(const std::vector<std::string>& token_bytes,
                         absl::Span<const int32_t> eos_ids)
    : vocab_size_(static_cast<int32_t>(token_bytes.size())),
      eos_ids_(eos_ids.begin(), eos_ids.end()) {
  for (int32_t id = 0; id < vocab_size_; ++id) {
    const bool eos = std::find(eos_ids_.begin(), eos_ids_.end(), id) != eos_ids_.end();
    if (!token_bytes[id].empty() && !eos) sorted_.push_back(id);
  }
  std::sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) {
    return token_bytes[a] != token_bytes[b] ? token_bytes[a] < token_bytes[b] : a < b;
  });
  size_t longest = 0;
  bytes_.reserve(sorted_.size());
  lcp_.reserve(sorted_.size());
  for (size_t i = 0; i < sorted_.size(); ++i) {
    const std::string& cur = token_bytes[sorted_[i]];
    size_t common = 0;
    if (i > 0) {
      const std::string& prev = bytes_.back();
      while (common < prev.size() && common < cur.size() && prev[common] == cur[common]) ++common;
    }
    lcp_.push_back(static_cast<uint16_t>(std::min<size_t>(common, 65535)));
    bytes_.push_back(cur);
    longest = std::max(longest, cur.size());
  }
  levels_.resize(longest + 1);
  level_arena_.resize(longest + 1);
}

void TokenMasker::FillMask(Matcher* m, TokenBitmask* mask) {
  mask->assign((vocab_size_ + 63) / 64, 0);
  auto allow = [&](int32_t id) { (*mask)[id >> 6] |= uint64_t{1} << (id & 63); };
  if (m->CanEnd()) {
    for (int32_t id : eos_ids_) {
      if (id >= 0 && id < vocab_size_) allow(id);
    }
  }
  if (m->heads_.empty()) return;
  const size_t arena0 = m->arena_.size();
  levels_[0].assign(m->heads_.begin(), m->heads_.end());
  level_arena_[0] = arena0;
  // `ready`: levels_[0..ready] hold the states after the first `ready` bytes of the previous
  // token. `failed_at`: the previous token's byte index the grammar refused (or SIZE_MAX).
  size_t ready = 0;
  size_t failed_at = SIZE_MAX;
  for (size_t i = 0; i < sorted_.size(); ++i) {
    const std::string& t = bytes_[i];
    const size_t common = lcp_[i];
    if (failed_at != SIZE_MAX && common > failed_at) continue;  // same refused prefix
    size_t depth = std::min(common, ready);
    m->arena_.resize(level_arena_[depth]);
    failed_at = SIZE_MAX;
    for (; depth < t.size(); ++depth) {
      const auto& in = levels_[depth];
      bool can_end = false;
      if (!m->Step(in.data(), in.size(), static_cast<uint8_t>(t[depth]), &levels_[depth + 1],
                   &can_end)) {
        failed_at = depth;
        break;
      }
      level_arena_[depth + 1] = m->arena_.size();
    }
    ready = depth;
    if (failed_at == SIZE_MAX) allow(sorted_[i]);
  }
  m->arena_.resize(arena0);
}

MaskCache::MaskCache(size_t max_masks, size_t max_states)
    : max_masks_(max_masks), max_states_(max_states) {}
MaskCache::MaskCache(MaskCache&&) noexcept = default;
MaskCache& MaskCache::operator=(MaskCache&&) noexcept = default;
MaskCache::~MaskCache() = default;
size_t MaskCache::num_states() const { return store_ == nullptr ? 0 : store_->size(); }

void TokenMasker::FillMask(Matcher* m, TokenBitmask* mask, MaskCache* cache) {
  if (cache->store_ == nullptr || cache->store_->grammar() != &m->grammar()) {
    cache->store_ = std::make_unique<StateStore>(m->grammar_);
    cache->masks_.clear();
  }
  StateStore& store = *cache->store_;
  if (store.size() > cache->max_states_) {
    store.Clear();
    cache->masks_.clear();
  }
  const int32_t root = store.Intern(*m);
  if (auto it = cache->masks_.find(root); it != cache->masks_.end()) {
    ++cache->hits_;
    *mask = it->second;
    return;
  }
  // The walk of FillMask above, over interned states.
  mask->assign((vocab_size_ + 63) / 64, 0);
  auto allow = [&](int32_t id) { (*mask)[id >> 6] |= uint64_t{1} << (id & 63); };
  if (store.can_end(root)) {
    for (int32_t id : eos_ids_) {
      if (id >= 0 && id < vocab_size_) allow(id);
    }
  }
  if (!m->heads_.empty()) {
    level_state_.resize(levels_.size());
    level_state_[0] = root;
    size_t ready = 0;
    size_t failed_at = SIZE_MAX;
    for (size_t i = 0; i < sorted_.size(); ++i) {
      const std::string& t = bytes_[i];
      const size_t common = lcp_[i];
      if (failed_at != SIZE_MAX && common > failed_at) continue;
      size_t depth = std::min(common, ready);
      failed_at = SIZE_MAX;
      for (; depth < t.size(); ++depth) {
        const int32_t next = store.Next(level_state_[depth], static_cast<uint8_t>(t[depth]));
        if (next == StateStore::kDead) {
          failed_at = depth;
          break;
        }
        level_state_[depth + 1] = next;
      }
      ready = depth;
      if (failed_at == SIZE_MAX) allow(sorted_[i]);
    }
  }
  if (cache->masks_.size() >= cache->max_masks_) cache->masks_.clear();
  cache->masks_.emplace(root, *mask);
}

}  // namespace pagoda::grammar
