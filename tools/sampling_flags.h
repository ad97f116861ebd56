// Sampling and request flags of `pagoda generate` (offline and --server).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "engine/request.h"

namespace pagoda::tools {

struct SamplingFlags {
  int32_t max_tokens = 128;
  double temperature = 1.0;
  int32_t top_k = 0;
  double top_p = 1.0;
  double min_p = 0.0;
  double repetition_penalty = 1.0;
  int64_t seed = -1;  // -1 = random
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool parse_special = true;  // prompt text spelling a special token becomes that token
  int32_t logprobs = -1;      // -1 = off
};

// Adds --max-tokens, --temperature, --top-k, --top-p, --min-p, --repetition-penalty, --seed,
// --stop, --ignore-eos, --parse-special and --logprobs to `cmd`, parsed into `flags` (which must
// outlive the parse).
void AddSamplingFlags(CLI::App* cmd, SamplingFlags* flags);
// A request carrying the sampling flags (prompt left empty).
engine::GenerationRequest RequestFromFlags(const SamplingFlags& flags);

}  // namespace pagoda::tools
