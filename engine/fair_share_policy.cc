#include "engine/fair_share_policy.h"

#include <algorithm>
#include <limits>

#include "absl/container/flat_hash_map.h"

namespace pagoda::engine {

void FairSharePolicy::OnTenantsChanged(const std::vector<TenantState>& tenants) {
  absl::flat_hash_map<std::string, double> counters;
  for (const Entry& e : tenants_) counters[e.name] = e.counter;
  std::vector<Entry> next(tenants.size());
  for (size_t i = 0; i < tenants.size(); ++i) {
    const TenantConfig& c = tenants[i].config;
    next[i].name = c.name;
    next[i].weight = c.weight > 0 ? c.weight : 1;
    next[i].priority = c.priority;
    if (auto it = counters.find(c.name); it != counters.end()) next[i].counter = it->second;
    next[i].backlogged = tenants[i].active();
  }
  tenants_ = std::move(next);
}

void FairSharePolicy::OnTenantActive(int32_t tenant) {
  if (tenant < 0 || static_cast<size_t>(tenant) >= tenants_.size()) return;
  Entry& entry = tenants_[tenant];
  double lift = std::numeric_limits<double>::infinity();
  for (const Entry& e : tenants_) {
    if (&e != &entry && e.backlogged && e.priority == entry.priority) {
      lift = std::min(lift, e.counter);
    }
  }
  if (lift == std::numeric_limits<double>::infinity()) {
    lift = last_idle_counter_[static_cast<size_t>(entry.priority)];
  }
  entry.counter = std::max(entry.counter, lift);
  entry.backlogged = true;
}

void FairSharePolicy::OnTenantIdle(int32_t tenant) {
  if (tenant < 0 || static_cast<size_t>(tenant) >= tenants_.size()) return;
  Entry& entry = tenants_[tenant];
  entry.backlogged = false;
  for (const Entry& e : tenants_) {
    if (e.backlogged && e.priority == entry.priority) return;
  }
  last_idle_counter_[static_cast<size_t>(entry.priority)] = entry.counter;
}

void FairSharePolicy::OnScheduled(const Sequence& seq, int32_t num_tokens) {
  if (seq.tenant_index < 0 || static_cast<size_t>(seq.tenant_index) >= tenants_.size()) return;
  Entry& entry = tenants_[seq.tenant_index];
  // Tokens [num_computed, num_computed + num_tokens): those before prompt_len are prompt.
  const int32_t prefill = std::clamp(seq.prompt_len - seq.num_computed, 0, num_tokens);
  const int32_t decode = num_tokens - prefill;
  entry.counter += (kPrefillTokenWeight * prefill + kDecodeTokenWeight * decode) / entry.weight;
}

const FairSharePolicy::Entry& FairSharePolicy::EntryOf(const Sequence& seq) const {
  static const Entry kDefault;
  if (seq.tenant_index < 0 || static_cast<size_t>(seq.tenant_index) >= tenants_.size()) {
    return kDefault;
  }
  return tenants_[seq.tenant_index];
}

size_t FairSharePolicy::PickNextWaiting(const std::deque<Sequence*>& waiting,
                                        const std::vector<bool>& blocked) {
  size_t best = waiting.size();
  const Entry* best_entry = nullptr;
  for (size_t i = 0; i < waiting.size(); ++i) {
    if (IsBlocked(*waiting[i], blocked)) continue;
    const Entry& e = EntryOf(*waiting[i]);
    // Strictly better only: a tenant's first sequence in the queue wins over its later
    // ones, and an earlier tenant wins a tie.
    if (best_entry == nullptr || e.priority < best_entry->priority ||
        (e.priority == best_entry->priority && e.counter < best_entry->counter)) {
      best = i;
      best_entry = &e;
    }
  }
  // Within the tenant, its requests' priorities decide.
  return best == waiting.size() ? best
                                : FirstOfTenantByPriority(waiting, waiting[best]->tenant_index);
}

Sequence* FairSharePolicy::PickVictim(const std::vector<Sequence*>& candidates) {
  Sequence* victim = candidates.front();
  for (Sequence* s : candidates) {
    const Entry& e = EntryOf(*s);
    const Entry& v = EntryOf(*victim);
    bool worse;  // s should go before the current victim
    if (e.priority != v.priority) {
      worse = e.priority > v.priority;
    } else if (e.counter != v.counter) {  // equal within a tenant
      worse = e.counter > v.counter;
    } else {
      worse = s->id > victim->id;  // request priorities never decide between tenants
    }
    if (worse) victim = s;
  }
  // Within the tenant, its requests' priorities decide.
  return VictimOfTenantByPriority(candidates, victim->tenant_index);
}

double FairSharePolicy::counter(int32_t tenant) const {
  if (tenant < 0 || static_cast<size_t>(tenant) >= tenants_.size()) return 0;
  return tenants_[tenant].counter;
}

}  // namespace pagoda::engine
