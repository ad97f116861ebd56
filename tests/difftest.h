// The differential tester: the real Engine on the CPU backend over a tiny random model
// (make-model's "tiny" preset), driven by a seeded random workload, and every request
// checked against the same request run alone. One round draws an engine configuration (KV
// dtype f32/f16/bf16/int8, block size 1/16/32, a pool from barely enough to ample, swap or
// recompute preemption with a small or large swap space, prefix caching on or off, a token
// budget and a run-slot cap) and a workload (tenants with weights, caps and floors; prompts
// sharing prefixes; greedy and seeded sampling; n > 1; stop strings and stop tokens;
// log-probabilities; aborts; tenant reloads mid-run; prefill-pacing limits drawn anew every
// step). Events fire at engine step numbers (from a StepObserver), so a seed replays the
// same schedule.
//
// Checked: every finished sample's tokens, finish reason and log-probabilities (bit for
// bit) equal the alone run's; an aborted or reload-ended sample's tokens are a prefix of
// it; the pool and the swap space are full again at the end of the round. A failure names
// its seed and the round's configuration.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/injected_fault.h"

namespace pagoda::difftest {

struct Report {
  int64_t rounds = 0;
  int64_t requests = 0;  // accepted by Submit
  int64_t refused = 0;   // refused by Submit (a limit they could never fit, shedding)
  int64_t finished = 0;  // samples compared whole
  int64_t aborted = 0;   // samples aborted, compared as a prefix
  int64_t ended = 0;     // samples ended by a reload's lower limit, compared as a prefix
  int64_t tokens = 0;    // tokens compared
  int64_t steps = 0, preemptions = 0, swap_outs = 0, prefix_hits = 0, reloads = 0, forks = 0;
  std::vector<std::string> failures;  // each starts with "seed N"

  void Add(const Report& other);
  std::string Summary() const;
};

struct Options {
  int32_t requests_per_round = 40;
  // A deliberate bug to build into the engine (tests of the tester itself).
  engine::InjectedFault fault = engine::InjectedFault::kNone;
};

// One round from `seed`.
Report RunRound(uint64_t seed, const Options& options);

}  // namespace pagoda::difftest
