#include "engine/kv_capacity.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pagoda::engine {

int32_t KvCapacity::Find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : it->second;
}

int32_t KvCapacity::Resolve(const std::string& name, bool* added) {
  *added = false;
  if (const int32_t index = Find(name); index >= 0) return index;
  TenantState state;
  state.config.name = name;
  const auto index = static_cast<int32_t>(tenants_.size());
  tenants_.push_back(std::move(state));
  by_name_[name] = index;
  *added = true;
  return index;
}

void KvCapacity::SetTenants(const std::vector<TenantConfig>& table,
                            absl::Span<Sequence* const> running,
                            const std::deque<Sequence*>& waiting) {
  std::vector<TenantState> next;
  absl::flat_hash_map<std::string, int32_t> by_name;
  auto add = [&](TenantConfig config, bool configured) {
    TenantState state;
    state.config = std::move(config);
    state.configured = configured;
    if (const int32_t old = Find(state.config.name); old >= 0) {
      state.served_tokens = tenants_[old].served_tokens;
    }
    by_name[state.config.name] = static_cast<int32_t>(next.size());
    next.push_back(std::move(state));
  };
  for (const TenantConfig& config : table) add(config, true);
  // Tenants that left the table keep their sequences in flight, under default terms.
  for (const TenantState& old : tenants_) {
    if (old.active() && !by_name.contains(old.config.name)) {
      TenantConfig defaults;
      defaults.name = old.config.name;
      add(std::move(defaults), false);
    }
  }
  tenants_ = std::move(next);
  by_name_ = std::move(by_name);
  std::vector<std::pair<SeqId, int32_t>> groups;
  for (Sequence* s : running) {
    s->tenant_index = by_name_.at(s->request.tenant);
    ++tenants_[s->tenant_index].num_running;
    groups.emplace_back(s->id, s->tenant_index);
  }
  for (Sequence* s : waiting) {
    s->tenant_index = by_name_.at(s->request.tenant);
    ++tenants_[s->tenant_index].num_waiting;
    groups.emplace_back(s->id, s->tenant_index);
  }
  kv_->Regroup(groups);
}

void KvCapacity::AddUnsatisfiable(absl::Span<Sequence* const> seqs,
                                  std::vector<std::pair<Sequence*, absl::Status>>* out) const {
  int64_t floors = 0;
  bool bounded = false;
  for (const TenantState& t : tenants_) {
    floors += t.config.kv_cache_floor_blocks;
    bounded = bounded || t.config.kv_cache_cap_blocks > 0 || t.config.kv_cache_floor_blocks > 0;
  }
  if (!bounded) return;
  for (Sequence* s : seqs) {
    const TenantState& t = tenants_[s->tenant_index];
    const KvBlockLimit limit = TenantKvLimit(
        &t.config, t.config.name, floors - t.config.kv_cache_floor_blocks, kv_->num_blocks());
    const int32_t need = kv_->BlocksFor(s->num_tokens());
    if (need <= limit.blocks) continue;
    out->emplace_back(
        s, absl::ResourceExhaustedError(absl::StrCat(
               "KV cache: the request's ", s->num_tokens(), " tokens need ", need, " blocks; ",
               limit.holder, " holds ", limit.blocks, " since the tenant table changed")));
  }
}

bool KvCapacity::HasRunSlots(int32_t index, int32_t slots) const {
  const TenantState& t = tenants_[index];
  return slots <= RunSlotsLeft(t.config, t.num_running);
}

bool KvCapacity::WithinCap(int32_t index, int32_t need) const {
  const int32_t cap = tenants_[index].config.kv_cache_cap_blocks;
  return cap <= 0 || BlocksHeld(index) + need <= cap;
}

int32_t KvCapacity::AvailableBlocks(int32_t index) const {
  int32_t reserved = 0;
  for (size_t t = 0; t < tenants_.size(); ++t) {
    const auto other = static_cast<int32_t>(t);
    if (other == index) continue;
    // The part of its floor a tenant does not use is kept free for it.
    reserved += std::max(0, tenants_[t].config.kv_cache_floor_blocks - BlocksHeld(other));
  }
  return kv_->num_free_blocks() - reserved;
}

std::vector<Sequence*> KvCapacity::VictimCandidates(absl::Span<Sequence* const> running,
                                                    const Sequence* requester) const {
  std::vector<Sequence*> candidates;
  for (Sequence* s : running) {
    const TenantState& t = tenants_[s->tenant_index];
    const auto blocks = static_cast<int32_t>(kv_->BlockTable(s->id).size());
    // Never push a tenant below its floor, except to let a sequence preempt itself.
    if (s == requester || BlocksHeld(s->tenant_index) - blocks >= t.config.kv_cache_floor_blocks) {
      candidates.push_back(s);
    }
  }
  return candidates;
}

void KvCapacity::Enter(Sequence* seq, int32_t index) {
  seq->tenant_index = index;
  kv_->SetGroup(seq->id, index);
}

int32_t KvCapacity::BlocksToRun(const Sequence* seq, int32_t n) const {
  return kv_->BlocksNeeded(seq->id, seq->num_computed + n, seq->num_computed);
}

bool KvCapacity::Reserve(Sequence* seq, int32_t num_tokens, std::vector<BlockCopy>* copies) {
  return kv_->Reserve(seq->id, num_tokens, seq->num_computed, copies);
}

void KvCapacity::TakeBlocks(Sequence* seq, absl::Span<const BlockHash> cached,
                            std::vector<BlockCopy>* copies) {
  const bool swapped = seq->swapped;
  if (swapped) {
    kv_->SwapIn(seq->id, copies);
    seq->swapped = false;
    ++num_swap_ins_;
    --num_swapped_;
  }
  if (!cached.empty()) {
    kv_->TakeCached(seq->id, cached);
    seq->num_computed = static_cast<int32_t>(cached.size()) * kv_->block_size();
  }
  // Swapped sequences and those that skip the cache (cache_prompt false) look nothing up.
  if (kv_->prefix_caching() && !swapped && seq->request.cache_prompt) {
    prefix_cache_queries_ += seq->num_tokens();
    prefix_cache_hits_ += seq->num_computed;
  }
  if (seq->cached_tokens < 0) seq->cached_tokens = seq->num_computed;
}

void KvCapacity::Evict(Sequence* seq, std::vector<BlockCopy>* copies) {
  // The step's copies run in the order listed: one made earlier into its blocks (copy on
  // write, swap in) lands before a swap-out reads them, and one into a block freed here
  // lands before any later use of the block (this step's later copies, then the chunks).
  if (seq->num_computed > 0 && kv_->num_host_blocks() > 0 &&
      kv_->CanSwapOut(seq->id, seq->num_computed)) {
    kv_->SwapOut(seq->id, seq->num_computed, copies);
    seq->swapped = true;
    ++num_swap_outs_;
    ++num_swapped_;
  } else {
    kv_->Free(seq->id);
    seq->num_computed = 0;
  }
}

void KvCapacity::Free(Sequence* seq, bool gone) {
  if (gone) {
    kv_->Forget(seq->id);
  } else {
    kv_->Free(seq->id);
  }
  if (seq->swapped) {
    seq->swapped = false;
    --num_swapped_;
  }
}

void KvCapacity::Fork(Sequence* parent, Sequence* child) {
  kv_->Fork(parent->id, child->id);
  child->tenant_index = parent->tenant_index;
}

}  // namespace pagoda::engine
