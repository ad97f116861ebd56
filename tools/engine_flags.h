// Flags of the commands that run the engine (generate, serve): the model, the device and
// the engine's sizing; and the factory that builds an engine from them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "kernels/cpu_isa.h"

namespace pagoda::tools {

// Every default comes from engine::EngineConfig's (the product's defaults, one place), so
// the engine the tests build with EngineConfig{} is the one `pagoda serve` runs with no
// flags (tests/engine_flags_test.cc).
struct EngineFlags {
  static inline const engine::EngineConfig kDefaults{};
  std::string model;  // empty = the built-in default model
  std::string device = "auto";
  int32_t threads = 0;
  std::string cpu_matmul = "auto";  // auto or blas
  std::string cpu_isa = "auto";     // kernels::CpuIsa's names, or auto (the CPU's own)
  // CUDA settings; "" = the PAGODA_CUDA_* environment variable, else the default
  // (kernels::BackendOptions).
  std::string cuda_dtype;
  std::string cuda_attention;
  std::string cuda_split_kv;
  std::string cuda_graphs;
  int32_t block_size = kDefaults.block_size;
  int32_t num_blocks = kDefaults.num_blocks;
  int64_t kv_cache_memory = kDefaults.kv_cache_memory;
  int32_t max_batched_tokens = kDefaults.max_batched_tokens;
  int32_t max_seqs = kDefaults.max_seqs;
  double max_decode_slowdown = kDefaults.max_decode_slowdown;  // 0 = no prefill pacing
  std::string kv_cache = kDefaults.kv_cache ? "on" : "off";
  bool enable_prefix_caching = kDefaults.enable_prefix_caching;
  std::string kv_cache_dtype = kDefaults.kv_cache_dtype;
  float kv_cache_fp8_scale = kDefaults.kv_cache_fp8_scale;
  std::string scheduling_policy = PolicyKindFlag(kDefaults.policy);  // auto, fcfs or fair
  std::string preemption_mode = PreemptionModeFlag(kDefaults.preemption_mode);  // auto, ...
  double swap_space_gib = 0;  // host memory for swap; 0 = the KV cache's size
  int32_t shed_waiting_requests = kDefaults.shed_waiting_requests;
  int64_t max_prompt_bytes = kDefaults.max_prompt_bytes;  // 0 = what the context can hold
  int32_t max_stop_strings = kDefaults.max_stop_strings;
  int32_t max_stop_string_bytes = kDefaults.max_stop_string_bytes;
  std::string chat_template;  // a Jinja template file overriding the model's; empty = none
  std::string tool_call_parser = "auto";  // auto, none, hermes, llama3_json or mistral

  // The flag spellings of the engine's enums.
  static std::string PolicyKindFlag(engine::PolicyKind kind);
  static std::string PreemptionModeFlag(engine::PreemptionMode mode);
};

// Adds --cpu-isa (PAGODA_CPU_ISA when the flag is not given) to `cmd`, parsed into `value`.
void AddCpuIsaFlag(CLI::App* cmd, std::string* value);
// The level --cpu-isa names (InvalidArgument naming the flag for one that is not a level).
absl::StatusOr<kernels::CpuIsa> CpuIsaFromFlag(const std::string& value);

// Adds --model, --device, --threads, --cpu-matmul, --cpu-isa, the engine sizing flags and the
// request limits to `cmd`, parsed into `flags` (which must outlive the parse).
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
