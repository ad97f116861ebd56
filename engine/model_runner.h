// Turns a SchedulerOutput into the flat batch description and runs the model on it.
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "engine/injected_fault.h"
#include "engine/kv_cache_manager.h"
#include "engine/scheduler.h"
#include "kernels/batch.h"
#include "kernels/kv_cache.h"
#include "model/llama_model.h"

namespace pagoda::engine {

class ModelRunner {
 public:
  // `swap`: the host swap space (a view of no blocks when there is none).
  ModelRunner(model::LlamaModel* model, const KvCacheManager* kv, kernels::PagedKvCache cache,
              kernels::PagedKvCache swap = {})
      : model_(model), kv_(kv), cache_(cache), swap_(swap) {}

  // True when `chunk` computes the last uncomputed token of its sequence, so the step
  // yields that sequence's next token.
  static bool Samples(const ScheduledChunk& chunk) {
    return chunk.seq->num_computed + chunk.num_tokens == chunk.seq->num_tokens();
  }

  // The prompt positions [first, second) of `chunk` whose logits go to prompt logprobs
  // (empty unless asked and not yet done); their rows precede the chunk's sampling row.
  static std::pair<int32_t, int32_t> PromptLogprobRows(const ScheduledChunk& chunk) {
    const Sequence& seq = *chunk.seq;
    const int32_t begin = std::max(seq.num_computed, seq.prompt_logprobs_next);
    const int32_t end = std::min(seq.num_computed + chunk.num_tokens, seq.prompt_logprobs_end());
    return {begin, std::max(begin, end)};
  }

  // Runs the block copies (copy on write, swap out and in), then the chunks (before the scheduler
  // advances their computed counts). `logits` gets one vocab-sized row per sampling chunk, in chunk
  // order, each chunk's prompt logprob rows (PromptLogprobRows) before its sampling row.
  absl::Status Execute(const SchedulerOutput& output, std::vector<float>* logits);

  void set_injected_fault(InjectedFault fault) { fault_ = fault; }

  // The batch description of `output` (exposed for tests).
  void BuildBatch(const SchedulerOutput& output, kernels::BatchInput* batch) const;

 private:
  model::LlamaModel* model_;
  const KvCacheManager* kv_;
  kernels::PagedKvCache cache_;
  kernels::PagedKvCache swap_;
  kernels::BatchInput batch_;
  InjectedFault fault_ = InjectedFault::kNone;
};

}  // namespace pagoda::engine
