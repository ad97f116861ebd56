// Flags of the commands that run the engine (generate, serve): the model, the device and
// the engine's sizing; and the factory that builds an engine from them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "engine/engine.h"

namespace pagoda::tools {

struct EngineFlags {
  std::string model;  // empty = the built-in default model
  std::string device = "auto";
  int32_t threads = 0;
  std::string cpu_matmul = "auto";  // auto or blas
  int32_t block_size = 16;
  int32_t num_blocks = 0;
  int64_t kv_cache_memory = 0;
  int32_t max_batched_tokens = 2048;
  int32_t max_seqs = 256;
  double max_decode_slowdown = 1.5;  // 0 = no prefill pacing
  std::string kv_cache = "on";
  bool enable_prefix_caching = true;
  std::string kv_cache_dtype = "auto";
  std::string scheduling_policy = "auto";  // auto, fcfs or fair
  std::string preemption_mode = "auto";    // auto, recompute or swap
  double swap_space_gib = 0;               // host memory for swap; 0 = the KV cache's size
  int32_t shed_waiting_requests = 0;
  int64_t max_prompt_bytes = 0;  // 0 = what the context can hold
  int32_t max_stop_strings = 16;
  int32_t max_stop_string_bytes = 256;
  std::string chat_template;  // a Jinja template file overriding the model's; empty = none
  std::string tool_call_parser = "auto";  // auto, none, hermes, llama3_json or mistral
};

// Adds --model, --device, --threads, --cpu-matmul, the engine sizing flags and the request
// limits to `cmd`, parsed into `flags` (which must outlive the parse).
void AddEngineFlags(CLI::App* cmd, EngineFlags* flags);
// `base` with the fields `flags` describe; InvalidArgument for a bad --kv-cache value.
absl::StatusOr<engine::EngineConfig> EngineConfigFromFlags(const EngineFlags& flags,
                                                           engine::EngineConfig base = {});
// Opens --model (or the built-in default model), creates the --device backend and the
// engine (config from `flags` over `base`), and starts the engine thread. The first error of
// those steps otherwise.
absl::StatusOr<std::unique_ptr<engine::Engine>> StartEngineFromFlags(
    const EngineFlags& flags, engine::EngineConfig base = {});

}  // namespace pagoda::tools
