#include "engine/scheduler.h"

#include <algorithm>
#include <cmath>

namespace pagoda::engine {

Scheduler::Scheduler(SchedulerConfig config, KvCacheManager* kv,
                     std::unique_ptr<SchedulingPolicy> policy)
    : config_(config), kv_(kv), capacity_(kv), policy_(std::move(policy)) {
  policy_->OnTenantsChanged(capacity_.tenants());
}

int32_t Scheduler::ResolveTenant(const std::string& name) {
  bool added = false;
  const int32_t index = capacity_.Resolve(name, &added);
  if (added) policy_->OnTenantsChanged(capacity_.tenants());
  return index;
}

void Scheduler::Add(Sequence* seq) {
  capacity_.Enter(seq, ResolveTenant(seq->request.tenant));
  TenantState& tenant = capacity_.tenant(seq->tenant_index);
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
      capacity_.Free(s);
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
  const std::vector<TenantState>& tenants = capacity_.tenants();
  short_by_tenant_.assign(tenants.size(), 0);
  num_short_ = 0;
  // Pacing is only ever across tenants: with fewer than two active, nothing is paced.
  const auto active = std::count_if(tenants.begin(), tenants.end(),
                                    [](const TenantState& t) { return t.active(); });
  if (active < 2) return 0;
  std::vector<int32_t> long_by_tenant(tenants.size(), 0);
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
  for (size_t t = 0; t < tenants.size(); ++t) {
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

void Scheduler::ScheduleRunning(SchedulerOutput* out, int32_t* budget) {
  size_t i = 0;
  while (i < running_.size() && *budget > 0) {
    Sequence* seq = running_[i];
    const int32_t n = ChunkSize(seq, *budget);
    if (n == 0) {
      ++i;
      continue;
    }
    if (!MakeRoom(seq, n, &i, out, budget)) continue;             // running_[i] is now the next one
    capacity_.Reserve(seq, seq->num_computed + n, &out->copies);  // MakeRoom made sure it fits
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
  // Over its cap, a tenant makes room from its own sequences only (lowest priority first,
  // then the newest).
  while (!capacity_.WithinCap(seq->tenant_index, capacity_.BlocksToRun(seq, n))) {
    Sequence* victim = VictimOfTenantByPriority(running_, seq->tenant_index);
    PreemptRunning(victim, i, out, budget);
    if (victim == seq) return false;
  }
  // (A preempted sibling may release a shared block, so the need is counted again.)
  while (capacity_.BlocksToRun(seq, n) > capacity_.AvailableBlocks(seq->tenant_index)) {
    Sequence* victim = policy_->PickVictim(capacity_.VictimCandidates(running_, seq));
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
  std::vector<bool> blocked(capacity_.tenants().size(), false);
  while (!waiting_.empty() && *budget > 0 &&
         running_.size() < static_cast<size_t>(config_.max_seqs)) {
    const size_t index = policy_->PickNextWaiting(waiting_, blocked);
    if (index >= waiting_.size()) break;
    Sequence* seq = waiting_[index];
    // A sequence starting from scratch first looks for its full blocks in the prefix cache,
    // never its last token (the step must compute something to yield logits).
    int32_t hit = 0;
    if (seq->num_computed == 0 && config_.kv_cache && seq->request.cache_prompt) {
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
    const Start verdict = CanStart(seq, start, n, cached);
    if (verdict == Start::kWait) break;
    if (verdict == Start::kSkipTenant) {
      blocked[seq->tenant_index] = true;
      continue;
    }
    Admit(seq, index, n, cached, out, budget);
  }
}

Scheduler::Start Scheduler::CanStart(const Sequence* seq, int32_t start, int32_t n,
                                     absl::Span<const BlockHash> cached) const {
  // Blocks it will hold, and free blocks that takes (cached ones may be free already).
  const int32_t grow = kv_->BlocksNeeded(seq->id, start + n);
  const int32_t need = grow - static_cast<int32_t>(cached.size()) + kv_->NumFreeAmong(cached);
  // Every sample it forks into takes a run slot of its tenant too.
  const int32_t slots = 1 + seq->pending_forks;
  if (!capacity_.HasRunSlots(seq->tenant_index, slots) ||
      !capacity_.WithinCap(seq->tenant_index, need)) {
    return Start::kSkipTenant;
  }
  // Short of blocks, or of run slots for every sample it forks into: the policy's choice
  // waits for them rather than being overtaken.
  if (need > capacity_.AvailableBlocks(seq->tenant_index)) return Start::kWait;
  if (!running_.empty() && running_.size() + slots > static_cast<size_t>(config_.max_seqs)) {
    return Start::kWait;
  }
  return Start::kNow;
}

void Scheduler::Admit(Sequence* seq, size_t index, int32_t n, absl::Span<const BlockHash> cached,
                      SchedulerOutput* out, int32_t* budget) {
  TenantState& tenant = capacity_.tenant(seq->tenant_index);
  capacity_.TakeBlocks(seq, cached, &out->copies);
  capacity_.Reserve(seq, seq->num_computed + n, &out->copies);
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
  capacity_.Fork(parent, child);
  child->num_computed = parent->num_computed;
  child->status = SeqStatus::kRunning;
  ++capacity_.tenant(child->tenant_index).num_running;
  running_.push_back(child);
}

void Scheduler::RebalanceRunSlots(SchedulerOutput* out, int32_t* budget) {
  if (!policy_->RebalancesRunSlots()) return;
  const auto max_seqs = static_cast<size_t>(config_.max_seqs);
  // Each round admits one sequence of a tenant below its share: at most max_seqs rounds.
  for (int32_t round = 0; round < config_.max_seqs; ++round) {
    if (waiting_.empty() || *budget <= 0 || running_.size() < max_seqs) return;
    const std::vector<TenantState>& tenants = capacity_.tenants();
    double active_weight = 0;
    for (const TenantState& t : tenants) {
      if (t.active()) active_weight += t.config.weight;
    }
    const auto share = [&](const TenantState& t) {
      return static_cast<double>(config_.max_seqs) * t.config.weight / active_weight;
    };
    std::vector<bool> blocked(tenants.size(), false);
    for (size_t t = 0; t < tenants.size(); ++t) {
      blocked[t] = !capacity_.HasRunSlots(static_cast<int32_t>(t), 1);
    }
    const size_t index = policy_->PickNextWaiting(waiting_, blocked);
    if (index >= waiting_.size()) return;
    const Sequence* next = waiting_[index];
    const TenantState& wanting = tenants[next->tenant_index];
    // Strictly below the floor of its share, and the giver strictly above the ceiling of
    // its own: a slot never moves back and forth.
    if (wanting.num_running >= std::floor(share(wanting))) return;
    int32_t giver = -1;
    double most = 0;
    for (size_t t = 0; t < tenants.size(); ++t) {
      const double excess = tenants[t].num_running - std::ceil(share(tenants[t]));
      if (static_cast<int32_t>(t) != next->tenant_index && excess > most) {
        giver = static_cast<int32_t>(t);
        most = excess;
      }
    }
    if (giver < 0) return;
    Sequence* victim =
        VictimOfTenantByPriority(capacity_.VictimCandidates(running_, nullptr), giver);
    if (victim == nullptr) return;
    const int32_t need = kv_->BlocksNeeded(next->id, next->num_computed + ChunkSize(next, *budget));
    const auto freed = static_cast<int32_t>(kv_->BlockTable(victim->id).size());
    if (need > capacity_.AvailableBlocks(next->tenant_index) + freed) return;
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
  TenantState& tenant = capacity_.tenant(seq->tenant_index);
  capacity_.Evict(seq, &out->copies);
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
    capacity_.tenant(seq->tenant_index).served_tokens += c.num_tokens;
    if (kv_->prefix_caching() && seq->request.cache_prompt) {
      // Blocks it just filled become reusable by later sequences.
      const int32_t full = seq->num_computed / kv_->block_size();
      kv_->HashBlocks(seq->cache_root, seq->tokens, full, &seq->block_hashes);
      kv_->CacheFullBlocks(seq->id, seq->block_hashes, seq->num_computed);
    }
  }
}

void Scheduler::Remove(Sequence* seq) {
  TenantState& tenant = capacity_.tenant(seq->tenant_index);
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
  capacity_.Free(seq, /*gone=*/true);  // host blocks too, when it was swapped out
  seq->status = SeqStatus::kFinished;
  if (found && !tenant.active()) policy_->OnTenantIdle(seq->tenant_index);
}

void Scheduler::SetTenants(const std::vector<TenantConfig>& table) {
  capacity_.SetTenants(table, running_, waiting_);
  policy_->OnTenantsChanged(capacity_.tenants());
}

std::vector<std::pair<Sequence*, absl::Status>> Scheduler::Unsatisfiable() const {
  std::vector<std::pair<Sequence*, absl::Status>> out;
  capacity_.AddUnsatisfiable(running_, &out);
  const std::vector<Sequence*> waiting(waiting_.begin(), waiting_.end());
  capacity_.AddUnsatisfiable(waiting, &out);
  return out;
}

void Scheduler::SetPolicy(std::unique_ptr<SchedulingPolicy> policy) {
  policy_ = std::move(policy);
  policy_->OnTenantsChanged(capacity_.tenants());
}

}  // namespace pagoda::engine
