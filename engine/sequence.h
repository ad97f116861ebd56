// A request inside the engine: its tokens, how many have K/V in the cache, and the state
// of its output stream. Owned by the engine thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "engine/grammar_state.h"
#include "engine/kv_cache_manager.h"
#include "engine/prefix_hash.h"
#include "engine/reasoning_state.h"
#include "engine/request.h"
#include "model/tokenizer.h"

namespace pagoda::engine {

enum class SeqStatus { kWaiting, kRunning, kFinished };

// Sequence ids: the request's handle times 32 plus the sample index (n <= 16), so ids grow
// in arrival order and a request's samples are neighbours.
inline SeqId SampleSeqId(uint64_t handle, int32_t index) {
  return (handle << 5) | static_cast<uint64_t>(index);
}
inline uint64_t RequestOfSeq(SeqId id) { return id >> 5; }

struct Sequence {
  SeqId id = 0;               // engine-assigned, increasing in arrival order
  GenerationRequest request;  // parameters (prompt text dropped after tokenization)
  std::shared_ptr<OutputSink> sink;
  std::vector<int32_t> tokens;  // prompt then output
  int32_t prompt_len = 0;
  int32_t max_total_tokens = 0;  // prompt_len + max output tokens
  int32_t num_computed = 0;      // tokens whose K/V are in the cache
  SeqStatus status = SeqStatus::kWaiting;
  int32_t num_preemptions = 0;
  // Preempted with its K/V swapped out to host memory: it waits with num_computed kept and
  // swaps back in when it runs again.
  bool swapped = false;
  uint64_t seed = 0;
  int32_t tenant_index = 0;  // into Scheduler::tenants(); set by Scheduler::Add

  // Prefix cache: the chain's root (salted with tenant and model) and the hashes of the
  // leading full blocks of `tokens`, computed as needed (they never change: tokens only grow).
  BlockHash cache_root;
  std::vector<BlockHash> block_hashes;
  int32_t cached_tokens = -1;  // prompt tokens found cached at the first admission; -1 before

  // Parallel sampling: which of the request's samples this is, and (sample 0 only, until
  // its prompt is computed) how many more samples fork from it then.
  int32_t sample_index = 0;
  int32_t pending_forks = 0;

  // Prompt logprobs (request.sampling.prompt_logprobs): prompt_logprobs[p] is prompt token
  // p + 1's, from the logits at position p; positions below prompt_logprobs_next are done.
  std::vector<TokenLogprob> prompt_logprobs;
  int32_t prompt_logprobs_next = 0;

  // Output stream state.
  std::unique_ptr<model::IncrementalDetokenizer> detokenizer;
  // Constrained decoding (request.sampling.grammar): the output's parse state, advanced with
  // each sampled token, and the masks of states seen (shared by the request's samples);
  // started at intake (engine/grammar_state.h).
  GrammarState grammar;
  // Where the output is in its reasoning section (request.reasoning): the grammar waits
  // there, and the close marker is forced once the reasoning budget is spent.
  ReasoningState reasoning;
  std::string text;                                     // output text so far (stop strings cut off)
  size_t text_sent = 0;                                 // bytes of `text` already delivered
  absl::flat_hash_map<int32_t, int32_t> output_counts;  // for penalties

  absl::Time arrival_time;
  absl::Time first_scheduled_time = absl::InfinitePast();
  absl::Time first_token_time = absl::InfinitePast();

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_output() const { return num_tokens() - prompt_len; }
  // Tokens whose K/V still need computing (the whole prompt after a preemption).
  int32_t num_uncomputed() const { return num_tokens() - num_computed; }
  int32_t priority() const { return request.priority; }
  // The prompt positions [0, end) whose logits prompt logprobs need (0 when not asked).
  int32_t prompt_logprobs_end() const {
    return request.sampling.prompt_logprobs.has_value() ? prompt_len - 1 : 0;
  }
};

}  // namespace pagoda::engine
