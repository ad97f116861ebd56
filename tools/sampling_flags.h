// Sampling and request flags shared by `pagoda generate` (offline and --server).
#pragma once

#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "engine/request.h"

ABSL_DECLARE_FLAG(int32_t, max_tokens);
ABSL_DECLARE_FLAG(double, temperature);
ABSL_DECLARE_FLAG(int32_t, top_k);
ABSL_DECLARE_FLAG(double, top_p);
ABSL_DECLARE_FLAG(double, min_p);
ABSL_DECLARE_FLAG(double, repetition_penalty);
ABSL_DECLARE_FLAG(int64_t, seed);
ABSL_DECLARE_FLAG(std::vector<std::string>, stop);
ABSL_DECLARE_FLAG(bool, ignore_eos);
ABSL_DECLARE_FLAG(int32_t, logprobs);

namespace pagoda::tools {

// A request carrying the sampling flags (prompt left empty).
engine::GenerationRequest RequestFromFlags();

}  // namespace pagoda::tools
