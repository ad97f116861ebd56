// pagoda-decode-bench --mode preempt: what preemption costs under KV-memory pressure,
// recomputing vs swapping to host memory, and against spending the swap space's memory on
// more KV blocks instead.
#pragma once

#include <cstdint>
#include <string>

#include "bench/decode_profile.h"

namespace pagoda::bench {

struct PreemptOptions {
  int32_t requests = 64;    // submitted at once, each its own random prompt
  int32_t prompt = 128;     // prompt tokens per request
  int32_t output = 256;     // output tokens per request (ignore_eos)
  int32_t num_blocks = 0;   // KV blocks; 0 = a third of what every request at full length needs
  int32_t swap_blocks = 0;  // host swap-space blocks of the swap run; 0 = num_blocks
  int32_t block_size = 16;  // the engines' block size (the factory sets it)
  std::string model_label;  // printed in the header
};

// Runs the workload on three engines in turn (recompute with num_blocks; swap with
// num_blocks plus swap_blocks of host memory; recompute with num_blocks + swap_blocks) and
// prints a row each: wall time, output tokens/s, TTFT p50, preemptions, swap-outs, prefix
// cache hit tokens. Returns the process exit code (1 when an engine fails).
int RunPreempt(const PreemptOptions& options, const EngineFactory& make_engine);

}  // namespace pagoda::bench
