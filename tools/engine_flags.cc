#include "tools/engine_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/backend.h"
#include "model/make_model.h"

ABSL_FLAG(std::string, model, "",
          "GGUF model file; empty runs the built-in default model (random weights, preset "
          "'tiny')");
ABSL_FLAG(std::string, device, "auto", "auto (CUDA when a GPU is present), cpu or cuda");
ABSL_FLAG(int32_t, threads, 0, "CPU backend threads; 0 = one per hardware thread");
ABSL_FLAG(int32_t, block_size, 16, "tokens per KV-cache block");
ABSL_FLAG(int32_t, num_blocks, 0, "KV-cache blocks; wins over --kv_cache_memory when > 0");
ABSL_FLAG(int64_t, kv_cache_memory, 0,
          "bytes of KV cache when --num_blocks is 0; 0 = 1 GiB, capped at what --max_seqs "
          "full contexts need");
ABSL_FLAG(int32_t, max_batched_tokens, 2048, "token budget of one engine step");
ABSL_FLAG(int32_t, max_seqs, 256, "sequences running at once at most");
ABSL_FLAG(std::string, kv_cache, "on",
          "on, or off to recompute every sequence from scratch at every step (the baseline the "
          "KV cache removes)");

namespace pagoda::tools {

absl::StatusOr<engine::EngineConfig> EngineConfigFromFlags(engine::EngineConfig c) {
  c.block_size = absl::GetFlag(FLAGS_block_size);
  c.num_blocks = absl::GetFlag(FLAGS_num_blocks);
  c.kv_cache_memory = absl::GetFlag(FLAGS_kv_cache_memory);
  c.max_batched_tokens = absl::GetFlag(FLAGS_max_batched_tokens);
  c.max_seqs = absl::GetFlag(FLAGS_max_seqs);
  const std::string kv = absl::GetFlag(FLAGS_kv_cache);
  if (kv != "on" && kv != "off") return absl::InvalidArgumentError("--kv_cache must be on or off");
  c.kv_cache = kv == "on";
  return c;
}

absl::StatusOr<std::unique_ptr<engine::Engine>> StartEngineFromFlags(engine::EngineConfig base) {
  ASSIGN_OR_RETURN(engine::EngineConfig config, EngineConfigFromFlags(base));
  kernels::BackendOptions options;
  const std::string device = absl::GetFlag(FLAGS_device);
  if (device == "cpu") {
    options.device = kernels::DeviceKind::kCpu;
  } else if (device == "cuda") {
    options.device = kernels::DeviceKind::kCuda;
  } else if (device != "auto") {
    return absl::InvalidArgumentError("--device must be auto, cpu or cuda");
  }
  options.num_threads = absl::GetFlag(FLAGS_threads);
  ASSIGN_OR_RETURN(auto file, model::OpenModel(absl::GetFlag(FLAGS_model)));
  ASSIGN_OR_RETURN(auto backend, kernels::CreateBackend(options));
  ASSIGN_OR_RETURN(auto engine,
                   engine::Engine::Create(config, std::move(file), std::move(backend)));
  engine->Start();
  return engine;
}

}  // namespace pagoda::tools
