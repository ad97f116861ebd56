// Turns one logits row into the next token: logit bias, penalties, temperature, top-k,
// top-p, min-p, then a draw that depends only on (seed, output index), so a request samples the
// same tokens whatever else shares its batch.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/request.h"

namespace pagoda::engine {

struct SampleInput {
  const SamplingParams* params = nullptr;
  uint64_t seed = 0;
  int32_t output_index = 0;           // how many tokens were sampled before
  absl::Span<const int32_t> context;  // prompt and output tokens (repetition penalty)
  const absl::flat_hash_map<int32_t, int32_t>* output_counts = nullptr;  // presence/frequency
  // The tokens a grammar allows (bit id % 64 of word id / 64; at least one set), or null.
  const std::vector<uint64_t>* allowed = nullptr;
};

struct SampleResult {
  int32_t token_id = 0;
  std::optional<TokenLogprob> logprob;  // when params->logprobs is set (from the raw logits)
};

// The most entries a request's logit_bias may have (OpenAI's limit).
inline constexpr size_t kMaxLogitBiasEntries = 300;
// The most a logit_bias entry adds or takes away (OpenAI's range).
inline constexpr float kMaxLogitBias = 100.f;

// InvalidArgument naming "logit_bias" for more than kMaxLogitBiasEntries entries, a token id
// outside [0, vocab), an id given twice, or a bias outside [-100, 100] (NaN included).
absl::Status ValidateLogitBias(absl::Span<const std::pair<int32_t, float>> bias, int32_t vocab);

// Picks a token from `logits` [vocab], which it may modify. params->logit_bias must be valid
// for this vocabulary (ValidateLogitBias); it is added first, so greedy obeys it too. With
// `allowed`, the grammar's mask is applied after the bias and the penalties (which may take
// an allowed logit to -inf) and the token is always an allowed one; logprobs are then of
// the masked logits.
SampleResult Sample(const SampleInput& in, absl::Span<float> logits);

// The log-softmax of raw `logits` [vocab] at `token`, plus the `top_n` most likely tokens
// (most likely first, ties by id): what Sample reports as a token's logprob.
TokenLogprob LogprobOf(absl::Span<const float> logits, int32_t token, int32_t top_n);

// The uniform draw in [0, 1) used for output token `index` of a request seeded `seed`.
double UniformDraw(uint64_t seed, int32_t index);

}  // namespace pagoda::engine
