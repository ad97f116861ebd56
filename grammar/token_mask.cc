#include "grammar/token_mask.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
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
  longest_ = longest;
  levels_.resize(longest + 1);
  level_arena_.resize(longest + 1);
}

namespace {

void AllowToken(TokenBitmask* mask, int32_t id) { (*mask)[id >> 6] |= uint64_t{1} << (id & 63); }

absl::Status MaskOverBudget(int64_t limit) {
  return absl::ResourceExhaustedError(
      absl::StrCat("grammar: max_steps_per_mask (", limit,
                   ") reached while computing one token mask: the grammar is too ambiguous "
                   "to follow within the limit"));
}

}  // namespace

void TokenMasker::AllowEnds(bool can_end, TokenBitmask* mask) const {
  if (!can_end) return;
  for (int32_t id : eos_ids_) {
    if (id >= 0 && id < vocab_size_) AllowToken(mask, id);
  }
}

absl::Status TokenMasker::Walk(Matcher* m, TokenBitmask* mask, int64_t max_steps, int64_t limit,
                               Levels* levels, std::vector<size_t>* level_arena) const {
  if (m->heads_.empty()) return absl::OkStatus();
  const size_t arena0 = m->arena_.size();
  const int64_t steps0 = m->steps();
  (*levels)[0].assign(m->heads_.begin(), m->heads_.end());
  (*level_arena)[0] = arena0;
  absl::Status status;
  // `ready`: levels[0..ready] hold the states after the first `ready` bytes of the previous
  // token. `failed_at`: the previous token's byte index the grammar refused (or SIZE_MAX).
  size_t ready = 0;
  size_t failed_at = SIZE_MAX;
  for (size_t i = 0; i < sorted_.size() && status.ok(); ++i) {
    const std::string& t = bytes_[i];
    const size_t common = lcp_[i];
    if (failed_at != SIZE_MAX && common > failed_at) continue;  // same refused prefix
    size_t depth = std::min(common, ready);
    m->arena_.resize((*level_arena)[depth]);
    failed_at = SIZE_MAX;
    for (; depth < t.size(); ++depth) {
      const auto& in = (*levels)[depth];
      bool can_end = false;
      const Matcher::StepResult r = m->Step(in.data(), in.size(), static_cast<uint8_t>(t[depth]),
                                            &(*levels)[depth + 1], &can_end);
      if (r == Matcher::StepResult::kOverBudget) {
        status = m->status();
        break;
      }
      if (m->steps() - steps0 > max_steps) {
        status = MaskOverBudget(limit);
        break;
      }
      if (r == Matcher::StepResult::kRefused) {
        failed_at = depth;
        break;
      }
      (*level_arena)[depth + 1] = m->arena_.size();
    }
    ready = depth;
    if (status.ok() && failed_at == SIZE_MAX) AllowToken(mask, sorted_[i]);
  }
  m->arena_.resize(arena0);
  if (!status.ok()) {
    // The byte that went over the limits failed the matcher: it stays usable for no one.
    mask->assign(mask->size(), 0);
    if (m->ok()) m->status_ = status;
  }
  return status;
}

absl::Status TokenMasker::FillMask(Matcher* m, TokenBitmask* mask) {
  mask->assign((vocab_size_ + 63) / 64, 0);
  if (!m->ok()) return m->status();
  AllowEnds(m->CanEnd(), mask);
  const int64_t limit = m->limits().max_steps_per_mask;
  return Walk(m, mask, limit, limit, &levels_, &level_arena_);
}

MaskCache::MaskCache(size_t max_masks, size_t max_states, size_t max_state_heads)
    : max_masks_(max_masks), max_states_(max_states), max_state_heads_(max_state_heads) {}
MaskCache::MaskCache(MaskCache&&) noexcept = default;
MaskCache& MaskCache::operator=(MaskCache&&) noexcept = default;
MaskCache::~MaskCache() = default;
size_t MaskCache::num_states() const { return store_ == nullptr ? 0 : store_->size(); }
int64_t MaskCache::steps() const {
  return steps_before_store_ + uncached_steps_ + (store_ == nullptr ? 0 : store_->steps());
}
void MaskCache::set_epoch(int64_t epoch) {
  if (epoch == epoch_) return;
  epoch_ = epoch;
  epoch_steps_ = 0;
}

bool MaskCache::ChargeEpoch(int64_t steps, int64_t limit) {
  if (epoch_ < 0) return true;
  epoch_steps_ += steps;
  return epoch_steps_ <= limit;
}

absl::Status TokenMasker::FillMask(const Matcher& m, TokenBitmask* mask, MaskCache* cache) const {
  mask->assign((vocab_size_ + 63) / 64, 0);
  if (!m.ok()) return m.status();
  // The steps this mask may take: its own limit, or what the epoch's masks left of it.
  const int64_t limit = m.limits().max_steps_per_mask;
  const int64_t max_steps = cache->epoch_ >= 0 ? limit - cache->epoch_steps_ : limit;
  const int64_t steps_at_start = cache->steps();
  auto drop_store = [cache] {
    if (cache->store_ == nullptr) return;
    cache->steps_before_store_ += cache->store_->steps();
    cache->store_.reset();
    cache->masks_.clear();
  };
  if (cache->store_ != nullptr &&
      (cache->store_->grammar() != &m.grammar() || cache->store_->size() > cache->max_states_ ||
       cache->store_->num_heads() > cache->max_state_heads_ || !cache->store_->status().ok())) {
    drop_store();
  }
  if (cache->store_ == nullptr) {
    cache->store_ = std::make_unique<StateStore>(m.shared_grammar(), m.limits());
  }
  StateStore& store = *cache->store_;
  const int32_t root = store.Intern(m);
  if (auto it = cache->masks_.find(root); it != cache->masks_.end()) {
    ++cache->hits_;
    *mask = it->second;
    return absl::OkStatus();
  }
  // The walk of Walk above, over interned states.
  AllowEnds(store.can_end(root), mask);
  absl::Status status;
  bool finish_uncached = false;
  std::vector<int32_t>& level_state = cache->level_state_;
  if (!m.heads_.empty()) {
    const int64_t steps0 = store.steps();
    level_state.resize(longest_ + 1);
    level_state[0] = root;
    size_t ready = 0;
    size_t failed_at = SIZE_MAX;
    for (size_t i = 0; i < sorted_.size() && status.ok() && !finish_uncached; ++i) {
      const std::string& t = bytes_[i];
      const size_t common = lcp_[i];
      if (failed_at != SIZE_MAX && common > failed_at) continue;
      size_t depth = std::min(common, ready);
      failed_at = SIZE_MAX;
      for (; depth < t.size(); ++depth) {
        const int32_t next = store.Next(level_state[depth], static_cast<uint8_t>(t[depth]));
        if (next == StateStore::kOverBudget) {
          status = store.status();
          break;
        }
        if (store.steps() - steps0 > max_steps) {
          status = MaskOverBudget(limit);
          break;
        }
        if (store.size() > 4 * cache->max_states_ ||
            store.num_heads() > 4 * cache->max_state_heads_) {
          finish_uncached = true;  // every trie edge a new state: memory, not speed, bounds it
          break;
        }
        if (next == StateStore::kDead) {
          failed_at = depth;
          break;
        }
        level_state[depth + 1] = next;
      }
      ready = depth;
      if (status.ok() && !finish_uncached && failed_at == SIZE_MAX) AllowToken(mask, sorted_[i]);
    }
  }
  if (finish_uncached) {
    // The whole walk again without states (a copy of the matcher as scratch), within what
    // this mask has left, and the store dropped: its memory is bounded, not its use.
    const int64_t spent = cache->steps() - steps_at_start;
    drop_store();
    mask->assign(mask->size(), 0);
    AllowEnds(m.CanEnd(), mask);
    Matcher scratch = m;
    Levels levels(longest_ + 1);
    std::vector<size_t> level_arena(longest_ + 1);
    const int64_t before = scratch.steps();
    status = Walk(&scratch, mask, max_steps - spent, limit, &levels, &level_arena);
    cache->uncached_steps_ += scratch.steps() - before;
  }
  if (cache->epoch_ >= 0) cache->epoch_steps_ += cache->steps() - steps_at_start;
  if (!status.ok()) {
    mask->assign(mask->size(), 0);
    // A store that went over the limits is of no more use: start over next time.
    drop_store();
    return status;
  }
  if (!finish_uncached) {
    if (cache->masks_.size() >= cache->max_masks_) cache->masks_.clear();
    cache->masks_.emplace(root, *mask);
  }
  return absl::OkStatus();
}

}  // namespace pagoda::grammar
