#include "engine/scheduler.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace pagoda::engine {

Scheduler::Scheduler(SchedulerConfig config, KvCacheManager* kv,
                     std::unique_ptr<SchedulingPolicy> policy)
    : config_(config), kv_(kv), policy_(std::move(policy)) {
  policy_->OnTenantsChanged(tenants_);
}

int32_t Scheduler::FindTenant(const std::string& name) const {
  const auto it = tenant_by_name_.find(name);
  return it == tenant_by_name_.end() ? -1 : it->second;
}

int32_t Scheduler::ResolveTenant(const std::string& name) {
  if (const int32_t index = FindTenant(name); index >= 0) return index;
  TenantState state;
  state.config.name = name;
  const auto index = static_cast<int32_t>(tenants_.size());
  tenants_.push_back(std::move(state));
  tenant_by_name_[name] = index;
  policy_->OnTenantsChanged(tenants_);
  return index;
}

void Scheduler::Add(Sequence* seq) {
  seq->tenant_index = ResolveTenant(seq->request.tenant);
  TenantState& tenant = tenants_[seq->tenant_index];
  const bool was_active = tenant.active();
  ++tenant.num_waiting;
  seq->status = SeqStatus::kWaiting;
  waiting_.push_back(seq);
  if (!was_active) policy_->OnTenantActive(seq->tenant_index);
}

SchedulerOutput Scheduler::Schedule() {
  SchedulerOutput out;
  if (!config_.kv_cache) {
    // Recompute mode: nothing survives from the last step.
    for (Sequence* s : running_) {
      FreeBlocks(s);
      s->num_computed = 0;
    }
  }
  const int32_t long_seqs = config_.kv_cache && limits_.short_len > 0 ? CountWork() : 0;
  paced_ = long_seqs > 0;
  long_chunk_ = limits_.long_chunk;
  SchedulePass(&out);
  if (paced_ && long_chunk_ == 0 && out.chunks.empty() && out.preempted.empty()) {
    // Holding long work back left nothing to run (the short work could not start).
    long_chunk_ = limits_.short_len;
    SchedulePass(&out);
  }
  if (!paced_) return out;
  out.paced.long_seqs = long_seqs;
  for (const ScheduledChunk& c : out.chunks) {
    if (!IsLong(c.seq, c.seq->num_uncomputed())) {
      ++out.paced.short_seqs;
    } else if (PacedFor(c.seq)) {
      out.paced.long_tokens += c.num_tokens;
    }
  }
  return out;
}

void Scheduler::SchedulePass(SchedulerOutput* out) {
  int32_t budget = config_.max_batched_tokens;
  ScheduleRunning(out, &budget);
  // A step that had to preempt admits nobody: the pool is already short.
  if (out->preempted.empty()) {
    ScheduleWaiting(out, &budget);
    RebalanceRunSlots(out, &budget);
  }
}

bool Scheduler::IsLong(const Sequence* seq, int32_t left) const {
  return left > limits_.short_len || seq->num_computed > limits_.heavy_context;
}

int32_t Scheduler::CountWork() {
  short_by_tenant_.assign(tenants_.size(), 0);
  num_short_ = 0;
  // Pacing is only ever across tenants: with fewer than two active, nothing is paced.
  const auto active = std::count_if(tenants_.begin(), tenants_.end(),
                                    [](const TenantState& t) { return t.active(); });
  if (active < 2) return 0;
  std::vector<int32_t> long_by_tenant(tenants_.size(), 0);
  const auto count = [&](const Sequence* s) {
    const int32_t left = s->num_uncomputed();
    if (left <= 0) return;
    if (IsLong(s, left)) {
      ++long_by_tenant[s->tenant_index];
    } else {
      ++short_by_tenant_[s->tenant_index];
      ++num_short_;
    }
  };
  for (const Sequence* s : running_) count(s);
  for (const Sequence* s : waiting_) count(s);
  int32_t paced = 0;
  for (size_t t = 0; t < tenants_.size(); ++t) {
    if (num_short_ > short_by_tenant_[t]) paced += long_by_tenant[t];
  }
  return paced;
}

bool Scheduler::PacedFor(const Sequence* seq) const {
  return num_short_ > short_by_tenant_[seq->tenant_index];
}

int32_t Scheduler::Paced(const Sequence* seq, int32_t left, int32_t n) const {
  // Prompt logprobs keep a logits row (vocab floats) per position computed: while they are
  // needed, chunks stay small enough for those rows.
  if (seq->prompt_logprobs_next < seq->prompt_logprobs_end()) {
    n = std::min(n, kMaxPromptLogprobChunk);
  }
  if (paced_) return IsLong(seq, left) && PacedFor(seq) ? std::min(n, long_chunk_) : n;
  // No other tenant's short work now, but lately: prompts keep to the idle chunk.
  const bool capped = config_.kv_cache && limits_.idle_chunk > 0 && left > limits_.short_len;
  return capped ? std::min(n, limits_.idle_chunk) : n;
}

int32_t Scheduler::ChunkSize(const Sequence* seq, int32_t budget) const {
  const int32_t n = seq->num_uncomputed();
  if (!config_.kv_cache) return n <= budget ? n : 0;
  return Paced(seq, n, std::min(n, budget));
}

int32_t Scheduler::UsedBlocks() const { return kv_->num_blocks() - kv_->num_free_blocks(); }

bool Scheduler::ReserveBlocks(Sequence* seq, int32_t num_tokens, std::vector<BlockCopy>* copies) {
  const int32_t before = UsedBlocks();
  if (!kv_->Reserve(seq->id, num_tokens, seq->num_computed, copies)) return false;
  tenants_[seq->tenant_index].num_blocks_held += UsedBlocks() - before;
  return true;
}

int32_t Scheduler::BlocksToRun(const Sequence* seq, int32_t n) const {
  return kv_->BlocksNeeded(seq->id, seq->num_computed + n, seq->num_computed);
}

void Scheduler::FreeBlocks(Sequence* seq) {
  const int32_t before = UsedBlocks();
  kv_->Free(seq->id);
  tenants_[seq->tenant_index].num_blocks_held -= before - UsedBlocks();
}

int32_t Scheduler::AvailableBlocks(int32_t tenant) const {
  int32_t reserved = 0;
  for (size_t t = 0; t < tenants_.size(); ++t) {
    if (static_cast<int32_t>(t) != tenant) reserved += tenants_[t].unused_floor();
  }
  return kv_->num_free_blocks() - reserved;
}

std::vector<Sequence*> Scheduler::VictimCandidates(const Sequence* requester) const {
  std::vector<Sequence*> candidates;
  for (Sequence* s : running_) {
    const TenantState& t = tenants_[s->tenant_index];
    const auto blocks = static_cast<int32_t>(kv_->BlockTable(s->id).size());
    // Never push a tenant below its floor, except to let a sequence preempt itself.
    if (s == requester || t.num_blocks_held - blocks >= t.config.kv_cache_floor_blocks) {
      candidates.push_back(s);
    }
  }
  return candidates;
}

void Scheduler::ScheduleRunning(SchedulerOutput* out, int32_t* budget) {
  size_t i = 0;
  while (i < running_.size() && *budget > 0) {
    Sequence* seq = running_[i];
    const int32_t n = ChunkSize(seq, *budget);
    if (n == 0) {
      ++i;
      continue;
    }
    if (!MakeRoom(seq, n, &i, out, budget)) continue;         // running_[i] is now the next one
    ReserveBlocks(seq, seq->num_computed + n, &out->copies);  // MakeRoom made sure it fits
    out->chunks.push_back({seq, n});
    out->num_tokens += n;
    *budget -= n;
    ++i;
  }
  // Charged only now: a chunk taken back by a later preemption was never served.
  for (const ScheduledChunk& c : out->chunks) policy_->OnScheduled(*c.seq, c.num_tokens);
}

bool Scheduler::MakeRoom(Sequence* seq, int32_t n, size_t* i, SchedulerOutput* out,
                         int32_t* budget) {
  const TenantState& tenant = tenants_[seq->tenant_index];
  const int32_t cap = tenant.config.kv_cache_cap_blocks;
  // Over its cap, a tenant makes room from its own sequences only (lowest priority first,
  // then the newest).
  while (cap > 0 && tenant.num_blocks_held + BlocksToRun(seq, n) > cap) {
    Sequence* victim = VictimOfTenantByPriority(running_, seq->tenant_index);
    PreemptRunning(victim, i, out, budget);
    if (victim == seq) return false;
  }
  // (A preempted sibling may release a shared block, so the need is counted again.)
  while (BlocksToRun(seq, n) > AvailableBlocks(seq->tenant_index)) {
    Sequence* victim = policy_->PickVictim(VictimCandidates(seq));
    PreemptRunning(victim, i, out, budget);
    if (victim == seq) return false;
  }
  return true;
}

void Scheduler::PreemptRunning(Sequence* victim, size_t* i, SchedulerOutput* out, int32_t* budget) {
  const size_t victim_index =
      std::find(running_.begin(), running_.end(), victim) - running_.begin();
  // A victim that already got a chunk this step gives its tokens back.
  for (auto c = out->chunks.begin(); c != out->chunks.end(); ++c) {
    if (c->seq == victim) {
      *budget += c->num_tokens;
      out->num_tokens -= c->num_tokens;
      out->chunks.erase(c);
      break;
    }
  }
  Preempt(victim, out);
  if (victim_index < *i) --*i;
}

void Scheduler::ScheduleWaiting(SchedulerOutput* out, int32_t* budget) {
  // Tenants at their running limit or KV cap are skipped, not waited for.
  std::vector<bool> blocked(tenants_.size(), false);
  while (!waiting_.empty() && *budget > 0 &&
         running_.size() < static_cast<size_t>(config_.max_seqs)) {
    const size_t index = policy_->PickNextWaiting(waiting_, blocked);
    if (index >= waiting_.size()) break;
    Sequence* seq = waiting_[index];
    TenantState& tenant = tenants_[seq->tenant_index];
    // A sequence starting from scratch first looks for its full blocks in the prefix cache,
    // never its last token (the step must compute something to yield logits).
    int32_t hit = 0;
    if (seq->num_computed == 0 && config_.kv_cache) {
      // Prompt logprobs need the logits of positions not done yet: those are computed.
      int32_t max_hit = seq->num_tokens() - 1;
      if (seq->prompt_logprobs_next < seq->prompt_logprobs_end()) {
        max_hit = std::min(max_hit, seq->prompt_logprobs_next);
      }
      hit = kv_->MatchPrefix(seq->cache_root, seq->tokens, max_hit, &seq->block_hashes);
    }
    const absl::Span<const BlockHash> cached = absl::MakeConstSpan(seq->block_hashes).first(hit);
    const int32_t start = std::max(seq->num_computed, hit * kv_->block_size());
    const int32_t left = seq->num_tokens() - start;
    const int32_t n = !config_.kv_cache ? (left <= *budget ? left : 0)
                                        : Paced(seq, left, std::min(left, *budget));
    if (n == 0) {
      if (!config_.kv_cache) break;
      blocked[seq->tenant_index] = true;  // held by pacing: other tenants may still start
      continue;
    }
    // Blocks it will hold, and free blocks that takes (cached ones may be free already).
    const int32_t grow = kv_->BlocksNeeded(seq->id, start + n);
    const int32_t need = grow - hit + kv_->NumFreeAmong(cached);
    const TenantConfig& c = tenant.config;
    // Every sample it forks into takes a run slot of its tenant too.
    if ((c.max_running_requests > 0 &&
         tenant.num_running + 1 + seq->pending_forks > c.max_running_requests) ||
        (c.kv_cache_cap_blocks > 0 && tenant.num_blocks_held + need > c.kv_cache_cap_blocks)) {
      blocked[seq->tenant_index] = true;
      continue;
    }
    // Short of blocks, or of run slots for every sample it forks into: the policy's
    // choice waits for them rather than being overtaken.
    if (need > AvailableBlocks(seq->tenant_index)) break;
    if (!running_.empty() &&
        running_.size() + 1 + seq->pending_forks > static_cast<size_t>(config_.max_seqs)) {
      break;
    }
    Admit(seq, index, n, cached, out, budget);
  }
}

void Scheduler::Admit(Sequence* seq, size_t index, int32_t n, absl::Span<const BlockHash> cached,
                      SchedulerOutput* out, int32_t* budget) {
  TenantState& tenant = tenants_[seq->tenant_index];
  const bool swapped = seq->swapped;
  if (swapped) {
    const int32_t before = UsedBlocks();
    kv_->SwapIn(seq->id, &out->copies);  // the caller checked the blocks are free
    tenant.num_blocks_held += UsedBlocks() - before;
    seq->swapped = false;
    ++num_swap_ins_;
    --num_swapped_;
  }
  if (!cached.empty()) {
    const int32_t before = UsedBlocks();
    kv_->TakeCached(seq->id, cached);
    tenant.num_blocks_held += UsedBlocks() - before;  // cached blocks that were free
    seq->num_computed = static_cast<int32_t>(cached.size()) * kv_->block_size();
  }
  if (kv_->prefix_caching() && !swapped) {  // the others start from scratch
    prefix_cache_queries_ += seq->num_tokens();
    prefix_cache_hits_ += seq->num_computed;
  }
  if (seq->cached_tokens < 0) seq->cached_tokens = seq->num_computed;
  ReserveBlocks(seq, seq->num_computed + n, &out->copies);
  waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(index));
  seq->status = SeqStatus::kRunning;
  --tenant.num_waiting;
  ++tenant.num_running;
  running_.push_back(seq);
  out->chunks.push_back({seq, n});
  out->num_tokens += n;
  *budget -= n;
  policy_->OnScheduled(*seq, n);
}

void Scheduler::AddFork(Sequence* parent, Sequence* child) {
  kv_->Fork(parent->id, child->id);
  child->tenant_index = parent->tenant_index;
  child->num_computed = parent->num_computed;
  child->status = SeqStatus::kRunning;
  TenantState& tenant = tenants_[child->tenant_index];
  ++tenant.num_running;
  // Every block is shared with the parent: the tenant holds no more.
  running_.push_back(child);
}

void Scheduler::RebalanceRunSlots(SchedulerOutput* out, int32_t* budget) {
  if (!policy_->RebalancesRunSlots()) return;
  const auto max_seqs = static_cast<size_t>(config_.max_seqs);
  // Each round admits one sequence of a tenant below its share: at most max_seqs rounds.
  for (int32_t round = 0; round < config_.max_seqs; ++round) {
    if (waiting_.empty() || *budget <= 0 || running_.size() < max_seqs) return;
    double active_weight = 0;
    for (const TenantState& t : tenants_) {
      if (t.active()) active_weight += t.config.weight;
    }
    const auto share = [&](const TenantState& t) {
      return static_cast<double>(config_.max_seqs) * t.config.weight / active_weight;
    };
    std::vector<bool> blocked(tenants_.size(), false);
    for (size_t t = 0; t < tenants_.size(); ++t) {
      const TenantConfig& c = tenants_[t].config;
      blocked[t] = c.max_running_requests > 0 && tenants_[t].num_running >= c.max_running_requests;
    }
    const size_t index = policy_->PickNextWaiting(waiting_, blocked);
    if (index >= waiting_.size()) return;
    const Sequence* next = waiting_[index];
    const TenantState& wanting = tenants_[next->tenant_index];
    // Strictly below the floor of its share, and the giver strictly above the ceiling of
    // its own: a slot never moves back and forth.
    if (wanting.num_running >= std::floor(share(wanting))) return;
    int32_t giver = -1;
    double most = 0;
    for (size_t t = 0; t < tenants_.size(); ++t) {
      const double excess = tenants_[t].num_running - std::ceil(share(tenants_[t]));
      if (static_cast<int32_t>(t) != next->tenant_index && excess > most) {
        giver = static_cast<int32_t>(t);
        most = excess;
      }
    }
    if (giver < 0) return;
    Sequence* victim = VictimOfTenantByPriority(VictimCandidates(nullptr), giver);
    if (victim == nullptr) return;
    const int32_t need = kv_->BlocksNeeded(next->id, next->num_computed + ChunkSize(next, *budget));
    const auto freed = static_cast<int32_t>(kv_->BlockTable(victim->id).size());
    if (need > AvailableBlocks(next->tenant_index) + freed) return;
    size_t end = running_.size();
    PreemptRunning(victim, &end, out, budget);
    const size_t before = running_.size();
    ScheduleWaiting(out, budget);
    // Nothing admitted after all, or the slot went back to the giver: stop.
    if (running_.size() == before || victim->status == SeqStatus::kRunning) return;
  }
}

void Scheduler::Preempt(Sequence* seq, SchedulerOutput* out) {
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  TenantState& tenant = tenants_[seq->tenant_index];
  // The step's copies run in the order listed: one made earlier into its blocks (copy on
  // write, swap in) lands before a swap-out reads them, and one into a block freed here
  // lands before any later use of the block (this step's later copies, then the chunks).
  if (seq->num_computed > 0 && kv_->num_host_blocks() > 0 &&
      kv_->CanSwapOut(seq->id, seq->num_computed)) {
    const int32_t before = UsedBlocks();
    kv_->SwapOut(seq->id, seq->num_computed, &out->copies);
    tenant.num_blocks_held -= before - UsedBlocks();
    seq->swapped = true;
    ++num_swap_outs_;
    ++num_swapped_;
  } else {
    FreeBlocks(seq);
    seq->num_computed = 0;
  }
  --tenant.num_running;
  ++tenant.num_waiting;
  seq->status = SeqStatus::kWaiting;
  ++seq->num_preemptions;
  ++num_preemptions_;
  waiting_.push_front(seq);
  out->preempted.push_back(seq);
}

void Scheduler::OnStepDone(const SchedulerOutput& output) {
  for (const ScheduledChunk& c : output.chunks) {
    Sequence* seq = c.seq;
    seq->num_computed += c.num_tokens;
    tenants_[seq->tenant_index].served_tokens += c.num_tokens;
    if (kv_->prefix_caching()) {
      // Blocks it just filled become reusable by later sequences.
      const int32_t full = seq->num_computed / kv_->block_size();
      kv_->HashBlocks(seq->cache_root, seq->tokens, full, &seq->block_hashes);
      kv_->CacheFullBlocks(seq->id, seq->block_hashes, seq->num_computed);
    }
  }
}

void Scheduler::Remove(Sequence* seq) {
  TenantState& tenant = tenants_[seq->tenant_index];
  bool found = true;
  if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end()) {
    running_.erase(it);
    --tenant.num_running;
  } else if (auto w = std::find(waiting_.begin(), waiting_.end(), seq); w != waiting_.end()) {
    waiting_.erase(w);
    --tenant.num_waiting;
  } else {
    found = false;
  }
  FreeBlocks(seq);  // host blocks too, when it was swapped out
  if (seq->swapped) {
    seq->swapped = false;
    --num_swapped_;
  }
  seq->status = SeqStatus::kFinished;
  if (found && !tenant.active()) policy_->OnTenantIdle(seq->tenant_index);
}

void Scheduler::SetTenants(const std::vector<TenantConfig>& table) {
  std::vector<TenantState> next;
  absl::flat_hash_map<std::string, int32_t> by_name;
  auto add = [&](TenantConfig config, bool configured) {
    TenantState state;
    state.config = std::move(config);
    state.configured = configured;
    if (const int32_t old = FindTenant(state.config.name); old >= 0) {
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
  tenant_by_name_ = std::move(by_name);
  // A block shared by several sequences (same tenant: forks, prefix cache) counts once.
  std::vector<absl::flat_hash_set<int32_t>> held(tenants_.size());
  for (Sequence* s : running_) {
    s->tenant_index = tenant_by_name_.at(s->request.tenant);
    ++tenants_[s->tenant_index].num_running;
    const std::vector<int32_t>& table = kv_->BlockTable(s->id);
    held[s->tenant_index].insert(table.begin(), table.end());
  }
  for (size_t t = 0; t < held.size(); ++t) {
    tenants_[t].num_blocks_held = static_cast<int32_t>(held[t].size());
  }
  for (Sequence* s : waiting_) {
    s->tenant_index = tenant_by_name_.at(s->request.tenant);
    ++tenants_[s->tenant_index].num_waiting;
  }
  policy_->OnTenantsChanged(tenants_);
}

std::vector<std::pair<Sequence*, absl::Status>> Scheduler::Unsatisfiable() const {
  std::vector<std::pair<Sequence*, absl::Status>> out;
  int64_t floors = 0;
  bool bounded = false;
  for (const TenantState& t : tenants_) {
    floors += t.config.kv_cache_floor_blocks;
    bounded = bounded || t.config.kv_cache_cap_blocks > 0 || t.config.kv_cache_floor_blocks > 0;
  }
  if (!bounded) return out;
  const auto check = [&](Sequence* s) {
    const TenantState& t = tenants_[s->tenant_index];
    const KvBlockLimit limit = TenantKvLimit(
        &t.config, t.config.name, floors - t.config.kv_cache_floor_blocks, kv_->num_blocks());
    const int32_t need = kv_->BlocksFor(s->num_tokens());
    if (need <= limit.blocks) return;
    out.emplace_back(
        s, absl::ResourceExhaustedError(absl::StrCat(
               "KV cache: the request's ", s->num_tokens(), " tokens need ", need, " blocks; ",
               limit.holder, " holds ", limit.blocks, " since the tenant table changed")));
  };
  for (Sequence* s : running_) check(s);
  for (Sequence* s : waiting_) check(s);
  return out;
}

void Scheduler::SetPolicy(std::unique_ptr<SchedulingPolicy> policy) {
  policy_ = std::move(policy);
  policy_->OnTenantsChanged(tenants_);
}

}  // namespace pagoda::engine
