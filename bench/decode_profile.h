// pagoda-decode-bench --mode profile: wall time per op per engine step, for a decode batch
// and for the prefill chunk before it, through kernels::ProfilingBackend and the engine's
// StepObserver.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "kernels/backend.h"

namespace pagoda::bench {

struct ProfileOptions {
  std::vector<int32_t> batch_sizes;  // one profile per batch size
  int32_t context = 128;             // prompt tokens per sequence (the prefill chunk)
  int32_t decode_tokens = 32;        // tokens generated per sequence
  std::string model_label;           // printed in the header
};

// Builds an engine with `config` whose backend is the fresh backend passed through `wrap`.
using EngineFactory = std::function<absl::StatusOr<std::unique_ptr<engine::Engine>>(
    engine::EngineConfig config,
    std::function<std::unique_ptr<kernels::Backend>(std::unique_ptr<kernels::Backend>)> wrap)>;

// Prints one table per batch size and phase (prefill, decode) to stdout: ms/step, % of the
// step and calls/step of every op. Returns the process exit code (1 when the engine fails).
int RunProfile(const ProfileOptions& options, const EngineFactory& make_engine);

// The rows every profile table prints, in order (before any unexpected label and "total").
const std::vector<std::string>& ProfileRows();

}  // namespace pagoda::bench
