#include "tools/engine_flags.h"

#include "absl/strings/str_cat.h"
#include "chat/template_source.h"
#include "chat/tool_call_format.h"
#include "common/status_macros.h"
#include "kernels/backend.h"
#include "model/make_model.h"

namespace pagoda::tools {

std::string EngineFlags::PolicyKindFlag(engine::PolicyKind kind) {
  switch (kind) {
    case engine::PolicyKind::kFcfs:
      return "fcfs";
    case engine::PolicyKind::kFairShare:
      return "fair";
    case engine::PolicyKind::kAuto:
      break;
  }
  return "auto";
}

std::string EngineFlags::PreemptionModeFlag(engine::PreemptionMode mode) {
  switch (mode) {
    case engine::PreemptionMode::kRecompute:
      return "recompute";
    case engine::PreemptionMode::kSwap:
      return "swap";
    case engine::PreemptionMode::kAuto:
      break;
  }
  return "auto";
}

void AddCpuIsaFlag(CLI::App* cmd, std::string* value) {
  cmd->add_option("--cpu-isa", *value,
                  "instruction-set level of the CPU kernels: auto (the CPU's own), or a cap "
                  "below it to measure that level on this machine")
      ->envname("PAGODA_CPU_ISA")
      ->check(CLI::IsMember(kernels::CpuIsaFlagValues()));
}

absl::StatusOr<kernels::CpuIsa> CpuIsaFromFlag(const std::string& value) {
  absl::StatusOr<kernels::CpuIsa> isa = kernels::ParseCpuIsa(value);
  if (!isa.ok())
    return absl::InvalidArgumentError(absl::StrCat("--cpu-isa: ", isa.status().message()));
  return isa;
}

void AddEngineFlags(CLI::App* cmd, EngineFlags* f) {
  cmd->add_option("--model", f->model,
                  "GGUF model file; empty serves the built-in default model (stories260K)");
  cmd->add_option("--device", f->device, "auto (CUDA when a GPU is present), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_option("--threads", f->threads, "CPU backend threads; 0 = one per hardware thread")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--cpu-matmul", f->cpu_matmul,
                  "CPU f32 products: auto (SIMD dot kernels at every batch size: batch "
                  "invariant) or blas (OpenBLAS always, for comparisons; not batch invariant)")
      ->check(CLI::IsMember({"auto", "blas"}));
  AddCpuIsaFlag(cmd, &f->cpu_isa);
  cmd->add_option("--cuda-dtype", f->cuda_dtype,
                  "CUDA element type of activations, weights and the KV cache: f32, bf16 or "
                  "f16 (default: $PAGODA_CUDA_DTYPE, else bf16)")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  cmd->add_option("--cuda-attention", f->cuda_attention,
                  "CUDA attention kernel: auto, or generic for the CUDA-core one (default: "
                  "$PAGODA_CUDA_ATTENTION, else auto)")
      ->check(CLI::IsMember({"auto", "generic"}));
  cmd->add_option("--cuda-split-kv", f->cuda_split_kv,
                  "CUDA split-KV partition: auto, off or a size in tokens (default: "
                  "$PAGODA_CUDA_SPLIT_KV, else auto)");
  cmd->add_option(
         "--cuda-graphs", f->cuda_graphs,
         "CUDA graphs of decode steps, captured per batch size and bucket, replayed: on or "
         "off (default: $PAGODA_CUDA_GRAPHS, else on)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--block-size", f->block_size, "tokens per KV-cache block")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--num-blocks", f->num_blocks,
                  "KV-cache blocks; wins over --kv-cache-memory when > 0")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--kv-cache-memory", f->kv_cache_memory,
                  "bytes of KV cache when --num-blocks is 0; 0 = 1 GiB, capped at what "
                  "--max-seqs full contexts need")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-batched-tokens", f->max_batched_tokens, "token budget of one engine step")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-seqs", f->max_seqs, "sequences running at once at most")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-decode-slowdown", f->max_decode_slowdown,
                  "prefill pacing: while decodes or short prompts share a step with a long "
                  "prompt's prefill, its chunk is sized (from measured step times) so the step "
                  "takes at most this many times a step without it; 0 = off, else > 1")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-prompt-bytes", f->max_prompt_bytes,
                  "longest prompt text accepted, checked before tokenizing; 0 = the context "
                  "length times the longest token (a longer prompt cannot fit anyway)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-stop-strings", f->max_stop_strings, "stop strings per request at most")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-stop-string-bytes", f->max_stop_string_bytes,
                  "bytes of one stop string at most")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--kv-cache-dtype", f->kv_cache_dtype,
                  "KV cache element type: auto (the backend's: f16 on CPU, the activation type on "
                  "CUDA), f32, f16, bf16, "
                  "int8 (CPU: K ranges per block, head and channel, V a scale per token and "
                  "head) or fp8 (CUDA: e4m3); --kv-cache-memory counts its bytes, so a smaller "
                  "type holds more blocks")
      ->check(CLI::IsMember({"auto", "f32", "f16", "bf16", "int8", "fp8"}));
  cmd->add_option("--kv-cache-fp8-scale", f->kv_cache_fp8_scale,
                  "fp8 KV cache: K and V are stored as value / scale in e4m3, whose largest "
                  "magnitude is 448 (beyond it they saturate); > 0")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--scheduling-policy", f->scheduling_policy,
                  "who is admitted next: auto (fair share when --tenants are configured, else "
                  "first come first served), fcfs, or fair (weighted fair share of served "
                  "tokens across tenants)")
      ->check(CLI::IsMember({"auto", "fcfs", "fair"}));
  cmd->add_option("--preemption-mode", f->preemption_mode,
                  "when KV blocks run out, the preempted sequence recomputes its K/V later "
                  "(recompute; its full blocks stay in the prefix cache) or has them copied to "
                  "host memory and back (swap; recompute when --swap-space is full); auto "
                  "(default): swap on CPU, recompute on CUDA, as measured (docs/BENCH.md)")
      ->check(CLI::IsMember({"auto", "recompute", "swap"}));
  cmd->add_option("--swap-space", f->swap_space_gib,
                  "GiB of host memory (page-locked on CUDA) that swapped-out KV blocks go to; "
                  "0 = as much as the KV cache takes, at most half the host memory available; "
                  "more than is available is refused")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--shed-waiting-requests", f->shed_waiting_requests,
                  "sheddable tenants' requests are refused while this many requests wait; "
                  "0 = --max-seqs")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--enable-prefix-caching", f->enable_prefix_caching,
                "reuse the KV cache of full blocks an earlier request of the same tenant "
                "computed (automatic prefix caching; default on; "
                "--enable-prefix-caching=false turns it off)");
  cmd->add_option("--kv-cache", f->kv_cache,
                  "on, or off to recompute every sequence from scratch at every step (the "
                  "baseline the KV cache removes)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--chat-template", f->chat_template,
                  "Jinja chat template file used instead of the model's tokenizer.chat_template "
                  "(a template that cannot be rendered is a start-up error)");
  cmd->add_option("--tool-call-parser", f->tool_call_parser,
                  "how the model writes tool calls: auto (read from the chat template), none, "
                  "hermes, llama3_json or mistral");
}

absl::StatusOr<engine::EngineConfig> EngineConfigFromFlags(const EngineFlags& f,
                                                           engine::EngineConfig c) {
  c.block_size = f.block_size;
  c.num_blocks = f.num_blocks;
  c.kv_cache_memory = f.kv_cache_memory;
  c.max_batched_tokens = f.max_batched_tokens;
  c.max_seqs = f.max_seqs;
  c.max_decode_slowdown = f.max_decode_slowdown;
  if (f.kv_cache != "on" && f.kv_cache != "off") {
    return absl::InvalidArgumentError("--kv-cache must be on or off");
  }
  c.kv_cache = f.kv_cache == "on";
  c.kv_cache_dtype = f.kv_cache_dtype;
  c.kv_cache_fp8_scale = f.kv_cache_fp8_scale;
  c.enable_prefix_caching = f.enable_prefix_caching;
  c.shed_waiting_requests = f.shed_waiting_requests;
  if (f.scheduling_policy == "auto") {
    c.policy = engine::PolicyKind::kAuto;
  } else if (f.scheduling_policy == "fcfs") {
    c.policy = engine::PolicyKind::kFcfs;
  } else if (f.scheduling_policy == "fair") {
    c.policy = engine::PolicyKind::kFairShare;
  } else {
    return absl::InvalidArgumentError("--scheduling-policy must be auto, fcfs or fair");
  }
  if (f.preemption_mode == "auto") {
    c.preemption_mode = engine::PreemptionMode::kAuto;
  } else if (f.preemption_mode == "swap") {
    c.preemption_mode = engine::PreemptionMode::kSwap;
  } else if (f.preemption_mode == "recompute") {
    c.preemption_mode = engine::PreemptionMode::kRecompute;
  } else {
    return absl::InvalidArgumentError("--preemption-mode must be auto, recompute or swap");
  }
  c.swap_space = static_cast<int64_t>(f.swap_space_gib * static_cast<double>(int64_t{1} << 30));
  c.max_prompt_bytes = f.max_prompt_bytes;
  c.max_stop_strings = f.max_stop_strings;
  c.max_stop_string_bytes = f.max_stop_string_bytes;
  if (!f.chat_template.empty()) {
    ASSIGN_OR_RETURN(c.chat_template, chat::ChatTemplateFromFile(f.chat_template));
  }
  absl::StatusOr<std::optional<chat::ToolCallFormat>> parser =
      chat::ParseToolCallFormatFlag(f.tool_call_parser);
  if (!parser.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tool-call-parser: ", parser.status().message()));
  }
  c.tool_call_format = *parser;
  return c;
}

absl::StatusOr<std::unique_ptr<engine::Engine>> StartEngineFromFlags(const EngineFlags& f,
                                                                     engine::EngineConfig base) {
  ASSIGN_OR_RETURN(engine::EngineConfig config, EngineConfigFromFlags(f, base));
  kernels::BackendOptions options;
  if (f.device == "cpu") {
    options.device = kernels::DeviceKind::kCpu;
  } else if (f.device == "cuda") {
    options.device = kernels::DeviceKind::kCuda;
  } else if (f.device != "auto") {
    return absl::InvalidArgumentError("--device must be auto, cpu or cuda");
  }
  options.num_threads = f.threads;
  if (f.cpu_matmul == "blas") {
    options.cpu_blas_only = true;
  } else if (f.cpu_matmul != "auto") {
    return absl::InvalidArgumentError("--cpu-matmul must be auto or blas");
  }
  ASSIGN_OR_RETURN(options.cpu_isa, CpuIsaFromFlag(f.cpu_isa));
  options.cuda_dtype = f.cuda_dtype;
  options.cuda_attention = f.cuda_attention;
  options.cuda_split_kv = f.cuda_split_kv;
  options.cuda_graphs = f.cuda_graphs;
  ASSIGN_OR_RETURN(auto file, model::OpenModel(f.model));
  ASSIGN_OR_RETURN(auto backend, kernels::CreateBackend(options));
  ASSIGN_OR_RETURN(auto engine,
                   engine::Engine::Create(config, std::move(file), std::move(backend)));
  engine->Start();
  return engine;
}

}  // namespace pagoda::tools
