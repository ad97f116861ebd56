// Tenants as the engine sees them: who shares the engine and on what terms. The server
// authenticates a request and names its tenant; the engine schedules by these terms.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

namespace pagoda::engine {

// Admission order between tenants: every critical request before any standard one, and
// standard before sheddable (which may be rejected when the queue is long).
enum class PriorityClass : int8_t { kCritical = 0, kStandard = 1, kSheddable = 2 };

// "critical", "standard" or "sheddable".
const char* PriorityClassName(PriorityClass priority);

struct TenantConfig {
  std::string name;   // unique; "" is the anonymous tenant
  double weight = 1;  // share of served tokens among backlogged tenants; > 0
  PriorityClass priority = PriorityClass::kStandard;
  int32_t max_running_requests = 0;   // running sequences at most; 0 = no limit
  int32_t max_queued_requests = 0;    // waiting requests at most; 0 = no limit
  int32_t kv_cache_cap_blocks = 0;    // blocks its sequences may hold; 0 = no cap
  int32_t kv_cache_floor_blocks = 0;  // blocks kept free for it while it is idle
};

// Which SchedulingPolicy the engine runs.
enum class PolicyKind : int8_t {
  kAuto,       // fair share when tenants are configured, else FCFS
  kFcfs,       // arrival order for everyone
  kFairShare,  // weighted fair share of served tokens (virtual token counter)
};

// What preemption does with the victim's K/V (EngineConfig::preemption_mode).
enum class PreemptionMode : int8_t {
  kRecompute,  // drop it; the sequence starts over (its full blocks stay in the prefix cache)
  kSwap,       // copy it to host memory and back when the sequence runs again
  kAuto,       // by measurement (docs/BENCH.md, "Preemption"): swap on CPU, recompute on CUDA
};

// The most KV blocks one sequence of a tenant may ever hold, and what bounds it (for
// messages): its kv_cache_cap_blocks when set and smaller, else the pool less the other
// tenants' floors. `config` is the tenant's terms, null for default terms.
struct KvBlockLimit {
  int64_t blocks = 0;
  std::string holder;  // "tenant \"a\"'s kv_cache_cap_blocks (8 blocks)", "the cache", ...
};
KvBlockLimit TenantKvLimit(const TenantConfig* config, const std::string& name,
                           int64_t others_floors, int64_t num_blocks);

// Run slots a tenant under `config` running `running` sequences has left: its
// max_running_requests less them (at least 0), or kNoRunLimit when it has none. Every check
// of max_running_requests (admission, scheduling, slot rebalancing) goes through it.
inline constexpr int32_t kNoRunLimit = INT32_MAX;
inline int32_t RunSlotsLeft(const TenantConfig& config, int32_t running) {
  if (config.max_running_requests <= 0) return kNoRunLimit;
  return std::max(0, config.max_running_requests - running);
}

// A tenant's live accounting in the scheduler (engine thread only). Tenants named by a
// request but absent from the table get default terms and `configured` false. The blocks
// it holds are counted by the KV cache manager (KvCapacity::BlocksHeld).
struct TenantState {
  TenantConfig config;
  bool configured = false;
  int32_t num_running = 0;
  int32_t num_waiting = 0;    // queued in the scheduler, preempted ones included
  int64_t served_tokens = 0;  // tokens computed for it, ever (prompt, output, recompute)

  // Has a sequence waiting or running (is "backlogged").
  bool active() const { return num_running + num_waiting > 0; }
};

}  // namespace pagoda::engine
