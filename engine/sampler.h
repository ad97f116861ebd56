// Turns one logits row into the next token: penalties, temperature, top-k, top-p, min-p,
// then a draw that depends only on (seed, output index), so a request samples the same
// tokens whatever else shares its batch.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "engine/request.h"

namespace pagoda::engine {

struct SampleInput {
  const SamplingParams* params = nullptr;
  uint64_t seed = 0;
  int32_t output_index = 0;           // how many tokens were sampled before
  absl::Span<const int32_t> context;  // prompt and output tokens (repetition penalty)
  const absl::flat_hash_map<int32_t, int32_t>* output_counts = nullptr;  // presence/frequency
};

struct SampleResult {
  int32_t token_id = 0;
  std::optional<TokenLogprob> logprob;  // when params->logprobs is set (from the raw logits)
};

// Picks a token from `logits` [vocab], which it may modify.
SampleResult Sample(const SampleInput& in, absl::Span<float> logits);

// The uniform draw in [0, 1) used for output token `index` of a request seeded `seed`.
double UniformDraw(uint64_t seed, int32_t index);

}  // namespace pagoda::engine
