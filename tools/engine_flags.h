// Flags shared by every command that runs the engine (generate, serve, benchmarks), and
// the factory that builds an engine from them.
#pragma once

#include <memory>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "engine/engine.h"

ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(std::string, device);
ABSL_DECLARE_FLAG(int32_t, threads);
ABSL_DECLARE_FLAG(int32_t, block_size);
ABSL_DECLARE_FLAG(int32_t, num_blocks);
ABSL_DECLARE_FLAG(int64_t, kv_cache_memory);
ABSL_DECLARE_FLAG(int32_t, max_batched_tokens);
ABSL_DECLARE_FLAG(int32_t, max_seqs);
ABSL_DECLARE_FLAG(std::string, kv_cache);

namespace pagoda::tools {

// `base` with the fields the flags describe; InvalidArgument for a bad --kv-cache value.
absl::StatusOr<engine::EngineConfig> EngineConfigFromFlags(engine::EngineConfig base = {});
// Opens --model (or the built-in default model), creates the --device backend and the
// engine (config from the flags over `base`), and starts the engine thread.
absl::StatusOr<std::unique_ptr<engine::Engine>> StartEngineFromFlags(
    engine::EngineConfig base = {});

}  // namespace pagoda::tools
