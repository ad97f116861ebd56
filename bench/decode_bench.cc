// pagoda-decode-bench: engine-level decode throughput, in-process (no gRPC).
//
//   --mode kv       decode tokens/s with the KV cache vs recomputing the whole context at
//                   every step, at each of --contexts, and their ratio
//   --mode batch    aggregate decode tokens/s at each of --batch-sizes concurrent
//                   sequences of --context prompt tokens, and the ratio to batch 1; on
//                   CUDA then a line of what the CUDA graphs did (captures, replays, ...)
//   --mode profile  wall time per op per step (ms/step, % of step) of the prefill chunk and
//                   the decode steps, at each of --batch-sizes (see decode_profile.h)
//   --mode preempt  recompute vs swap under KV-memory pressure (see decode_preempt.h)
//   --mode waste    KV-cache waste (reserved slots not holding a live token, over reserved
//                   slots) sampled every step over a mixed-length workload
//
// --write-model=PATH writes the --preset/--dtype model to PATH as GGUF and exits, so that
// several runs (tools/gpu-check.sh) synthesize a large preset once and pass it as --model.
// Flags may be spelled with dashes or underscores (--write_model, as tools/gpu-check.sh does).
//
// A benchmark prints numbers; it never fails on them.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/time/clock.h"
#include "bench/bench_args.h"
#include "bench/decode_preempt.h"
#include "bench/decode_profile.h"
#include "common/mutex.h"
#include "engine/engine.h"
#include "kernels/backend.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/llama_config.h"
#include "model/make_model.h"
#include "tools/engine_flags.h"
#ifdef PAGODA_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace pagoda::bench {
namespace {

// Records when each token of one request arrived.
class TimingSink final : public engine::OutputSink {
 public:
  void OnOutput(engine::GenerationOutput out) override {
    MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    for (size_t i = 0; i < out.token_ids.size(); ++i) times_.push_back(now);
    if (out.finished()) {
      done_ = true;
      error_ = out.error;
    }
  }
  std::vector<absl::Time> Wait() {
    MutexLock lock(&mu_);
    mu_.Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return done_; });
    if (!error_.ok())
      std::fprintf(stderr, "request failed: %s\n", std::string(error_.message()).c_str());
    return times_;
  }

 private:
  Mutex mu_;
  std::vector<absl::Time> times_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

// The command line. Engine sizing defaults are the engine's (engine::EngineConfig).
struct Flags {
  static inline const engine::EngineConfig kEngineDefaults{};
  std::string mode = "batch";
  std::string preset = "25m";
  std::string model;
  std::string dtype = "f32";
  std::string write_model;
  std::string device = "cpu";
  int32_t threads = 0;
  std::string cpu_matmul = "auto";
  std::string cpu_isa = "auto";
  std::vector<int32_t> contexts = {128, 512, 1024};
  std::vector<int32_t> batch_sizes = {1, 4, 16, 64};
  int32_t context = 128;
  int32_t decode_tokens = 32;
  int32_t block_size = kEngineDefaults.block_size;
  int64_t kv_cache_memory = kEngineDefaults.kv_cache_memory;
  std::string kv_cache_dtype = kEngineDefaults.kv_cache_dtype;
  int32_t requests = 128;
  int32_t num_blocks = 0;
  int32_t swap_blocks = 0;

  // --model, or the preset's name when there is none.
  const std::string& ModelLabel() const { return model.empty() ? preset : model; }
};

// Adds the flags that say which model runs where.
void AddModelFlags(CLI::App* app, Flags* f) {
  std::vector<std::string> presets;
  for (const model::ModelPreset& p : model::ModelPresets()) presets.push_back(p.name);
  app->add_option("--preset", f->preset,
                  "make-model preset built in memory (when --model is empty)")
      ->check(CLI::IsMember(presets));
  app->add_option("--model", f->model, "GGUF model file instead of a preset");
  app->add_option("--dtype", f->dtype, "weight type of the in-memory preset: f32, f16 or bf16")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  app->add_option("--write-model", f->write_model,
                  "write the --preset/--dtype model to this GGUF file and exit (no benchmark)");
  app->add_option("--device", f->device, "cpu, cuda or auto")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app->add_option("--threads", f->threads, "CPU threads; 0 = all");
  app->add_option("--cpu-matmul", f->cpu_matmul,
                  "CPU f32 products: auto (pagoda's SIMD kernels for decode) or blas (OpenBLAS "
                  "always)")
      ->check(CLI::IsMember({"auto", "blas"}));
  tools::AddCpuIsaFlag(app, &f->cpu_isa);
}

// Adds the flags that shape the workload and the engine.
void AddWorkloadFlags(CLI::App* app, Flags* f) {
  CLI::Range positive(1, std::numeric_limits<int32_t>::max());
  positive.description("POSITIVE");
  app->add_option("--mode", f->mode, "kv, batch, profile, preempt or waste")
      ->check(CLI::IsMember({"kv", "batch", "profile", "preempt", "waste"}));
  app->add_option("--contexts", f->contexts, "--mode kv: context lengths, comma-separated")
      ->delimiter(',')
      ->check(positive)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app->add_option("--batch-sizes", f->batch_sizes,
                  "--mode batch/profile: concurrent sequences, comma-separated")
      ->delimiter(',')
      ->check(positive)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app->add_option("--context", f->context, "--mode batch/profile: prompt tokens per sequence");
  app->add_option("--decode-tokens", f->decode_tokens, "tokens generated per sequence");
  app->add_option("--block-size", f->block_size, "KV block size");
  app->add_option("--kv-cache-memory", f->kv_cache_memory, "KV cache bytes (0 = engine default)");
  app->add_option("--kv-cache-dtype", f->kv_cache_dtype,
                  "KV cache type: auto, f32, f16, bf16, int8 (CPU) or fp8 (CUDA)");
  app->add_option("--requests", f->requests,
                  "--mode waste: requests in the mixed workload; --mode preempt: requests at "
                  "once");
  app->add_option("--num-blocks", f->num_blocks,
                  "--mode preempt: KV blocks (0 = a third of what the requests at full length "
                  "need)");
  app->add_option("--swap-blocks", f->swap_blocks,
                  "--mode preempt: swap-space blocks (0 = --num-blocks)");
}

// The flags' preset (--preset, --dtype) with seed 0.
absl::StatusOr<gguf::GgufWriter> PresetModel(const Flags& f) {
  auto preset = model::FindPreset(f.preset);
  if (!preset.ok()) return preset.status();
  const gguf::TensorType type = f.dtype == "bf16"  ? gguf::TensorType::kBF16
                                : f.dtype == "f16" ? gguf::TensorType::kF16
                                                   : gguf::TensorType::kF32;
  return model::MakeModel(*preset, 0, type);
}

// --write-model: the preset to a file, nothing else.
int WriteModel(const Flags& f) {
  const absl::Time start = absl::Now();
  auto writer = PresetModel(f);
  absl::Status status = writer.ok() ? writer->WriteFile(f.write_model) : writer.status();
  if (!status.ok()) {
    std::fprintf(stderr, "write_model: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  std::printf("wrote %s (preset %s, %s) in %.1f s\n", f.write_model.c_str(), f.preset.c_str(),
              f.dtype.c_str(), absl::ToDoubleSeconds(absl::Now() - start));
  return 0;
}

using BackendWrap =
    std::function<std::unique_ptr<kernels::Backend>(std::unique_ptr<kernels::Backend>)>;

// An engine on the flags' model and device; `wrap` (when set) decorates the backend.
absl::StatusOr<std::unique_ptr<engine::Engine>> MakeEngine(const Flags& f,
                                                           engine::EngineConfig config,
                                                           const BackendWrap& wrap = nullptr) {
  std::unique_ptr<gguf::GgufFile> file;
  if (!f.model.empty()) {
    auto opened = gguf::GgufFile::Open(f.model);
    if (!opened.ok()) return opened.status();
    file = *std::move(opened);
  } else {
    auto writer = PresetModel(f);
    if (!writer.ok()) return writer.status();
    auto made = gguf::GgufFile::FromBytes(writer->Serialize());
    if (!made.ok()) return made.status();
    file = *std::move(made);
  }
  kernels::BackendOptions options;
  options.device = f.device == "cuda"  ? kernels::DeviceKind::kCuda
                   : f.device == "cpu" ? kernels::DeviceKind::kCpu
                                       : kernels::DeviceKind::kAuto;
  options.num_threads = f.threads;
  options.cpu_blas_only = f.cpu_matmul == "blas";
  absl::StatusOr<kernels::CpuIsa> isa = tools::CpuIsaFromFlag(f.cpu_isa);
  if (!isa.ok()) return isa.status();
  options.cpu_isa = *isa;
  auto backend = kernels::CreateBackend(options);
  if (!backend.ok()) return backend.status();
  config.block_size = f.block_size;
  config.kv_cache_memory = f.kv_cache_memory;
  config.kv_cache_dtype = f.kv_cache_dtype;
  std::unique_ptr<kernels::Backend> be = *std::move(backend);
  if (wrap) be = wrap(std::move(be));
  auto engine = engine::Engine::Create(config, std::move(file), std::move(be));
  if (engine.ok()) (*engine)->Start();
  return engine;
}

engine::GenerationRequest RandomRequest(int32_t prompt_len, int32_t max_tokens, int32_t vocab,
                                        std::mt19937* rng) {
  engine::GenerationRequest r;
  std::uniform_int_distribution<int32_t> id(3, vocab - 1);
  r.prompt_token_ids.push_back(1);
  while (static_cast<int32_t>(r.prompt_token_ids.size()) < prompt_len) {
    r.prompt_token_ids.push_back(id(*rng));
  }
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  return r;
}

// Runs `n` identical-length requests at once; returns aggregate decode tokens/s over the
// window in which all of them were decoding.
double DecodeTokensPerSecond(engine::Engine& engine, int32_t n, int32_t context, int32_t tokens) {
  std::mt19937 rng(n * 7919 + context);
  std::vector<std::shared_ptr<TimingSink>> sinks;
  for (int32_t i = 0; i < n; ++i) {
    sinks.push_back(std::make_shared<TimingSink>());
    auto s = engine.Submit(RandomRequest(context, tokens, engine.model_config().vocab_size, &rng),
                           sinks.back());
    if (!s.ok()) {
      std::fprintf(stderr, "submit: %s\n", std::string(s.status().message()).c_str());
      return 0;
    }
  }
  std::vector<std::vector<absl::Time>> times;
  for (auto& s : sinks) times.push_back(s->Wait());
  absl::Time start = absl::InfinitePast(), end = absl::InfiniteFuture();
  for (const auto& t : times) {
    if (t.size() < 2) return 0;
    start = std::max(start, t.front());
    end = std::min(end, t.back());
  }
  int64_t count = 0;
  for (const auto& t : times) {
    for (const absl::Time& at : t) count += (at > start && at <= end) ? 1 : 0;
  }
  const double seconds = absl::ToDoubleSeconds(end - start);
  return seconds > 0 ? count / seconds : 0;
}

int RunKv(const Flags& f) {
  const int32_t tokens = f.decode_tokens;
  auto on = MakeEngine(f, {.kv_cache = true});
  auto off = MakeEngine(f, {.kv_cache = false});
  if (!on.ok() || !off.ok()) {
    std::fprintf(stderr, "engine: %s\n",
                 std::string((on.ok() ? off : on).status().message()).c_str());
    return 1;
  }
  std::printf("model: %s, %.1fM parameters, decode tokens per point: %d\n", f.ModelLabel().c_str(),
              (*on)->model_config().num_parameters() / 1e6, tokens);
  std::printf("%8s %16s %16s %8s\n", "context", "kv-cache tok/s", "recompute tok/s", "ratio");
  for (int32_t ctx : f.contexts) {
    const double a = DecodeTokensPerSecond(**on, 1, ctx, tokens);
    const double b = DecodeTokensPerSecond(**off, 1, ctx, std::max(3, tokens / 4));
    std::printf("%8d %16.1f %16.2f %8.1f\n", ctx, a, b, b > 0 ? a / b : 0);
    std::fflush(stdout);
  }
  return 0;
}

// On a CUDA backend, one line of what its decode-step graphs did; nothing otherwise.
void PrintGraphCounts([[maybe_unused]] const kernels::Backend* backend) {
#ifdef PAGODA_HAVE_CUDA
  absl::StatusOr<kernels::CudaGraphCounts> c = kernels::CudaGraphStats(backend);
  if (!c.ok()) return;
  std::printf("cuda graphs: %lld captures, %lld replays, %lld direct runs, %lld failed captures\n",
              static_cast<long long>(c->captures), static_cast<long long>(c->replays),
              static_cast<long long>(c->eager), static_cast<long long>(c->failed));
#endif
}

int RunBatch(const Flags& f) {
  const int32_t tokens = f.decode_tokens;
  const int32_t context = f.context;
  const std::vector<int32_t>& sizes = f.batch_sizes;
  const int32_t max_n = sizes.empty() ? 1 : *std::max_element(sizes.begin(), sizes.end());
  const kernels::Backend* backend = nullptr;  // owned by the engine
  auto engine = MakeEngine(f, {.max_seqs = std::max(256, max_n)},
                           [&backend](std::unique_ptr<kernels::Backend> be) {
                             backend = be.get();
                             return be;
                           });
  if (!engine.ok()) {
    std::fprintf(stderr, "engine: %s\n", std::string(engine.status().message()).c_str());
    return 1;
  }
  std::printf("model: %s, %.1fM parameters, backend %s, prompt %d, decode %d tokens each\n",
              f.ModelLabel().c_str(), (*engine)->model_config().num_parameters() / 1e6,
              (*engine)->backend_name().c_str(), context, tokens);
  DecodeTokensPerSecond(**engine, 1, context, 4);  // warm-up
  std::printf("%8s %14s %10s\n", "seqs", "decode tok/s", "vs 1 seq");
  double base = 0;
  for (int32_t n : sizes) {
    const double tps = DecodeTokensPerSecond(**engine, n, context, tokens);
    if (base == 0) base = tps;
    std::printf("%8d %14.1f %10.2f\n", n, tps, base > 0 ? tps / base : 0);
    std::fflush(stdout);
  }
  PrintGraphCounts(backend);
  return 0;
}

int RunProfileMode(const Flags& f) {
  ProfileOptions options{.batch_sizes = f.batch_sizes,
                         .context = f.context,
                         .decode_tokens = f.decode_tokens,
                         .model_label = f.ModelLabel()};
  return RunProfile(options, [&f](engine::EngineConfig config, BackendWrap wrap) {
    return MakeEngine(f, config, wrap);
  });
}

int RunPreemptMode(const Flags& f) {
  const PreemptOptions options{.requests = f.requests,
                               .prompt = f.context,
                               .output = f.decode_tokens,
                               .num_blocks = f.num_blocks,
                               .swap_blocks = f.swap_blocks,
                               .block_size = f.block_size,
                               .model_label = f.ModelLabel()};
  return RunPreempt(options, [&f](engine::EngineConfig config, BackendWrap wrap) {
    return MakeEngine(f, config, wrap);
  });
}

int RunWaste(const Flags& f) {
  auto engine = MakeEngine(f, {.max_seqs = 256});
  if (!engine.ok()) {
    std::fprintf(stderr, "engine: %s\n", std::string(engine.status().message()).c_str());
    return 1;
  }
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> prompt_len(8, 600), out_len(8, 300);
  std::vector<std::shared_ptr<TimingSink>> sinks;
  for (int32_t i = 0; i < f.requests; ++i) {
    sinks.push_back(std::make_shared<TimingSink>());
    (void)(*engine)->Submit(
        RandomRequest(prompt_len(rng), out_len(rng), (*engine)->model_config().vocab_size, &rng),
        sinks.back());
  }
  // Sample the cache after each step until everything finished.
  double sum = 0, worst = 0;
  int64_t samples = 0, last_step = -1;
  while (true) {
    const engine::EngineStats s = (*engine)->Stats();
    if (s.num_running == 0 && s.num_waiting == 0) break;
    if (s.num_steps != last_step && s.num_running > 0) {
      last_step = s.num_steps;
      const double reserved = static_cast<double>(s.num_blocks - s.num_free_blocks) * f.block_size;
      const double waste = reserved > 0 ? 1.0 - s.num_cached_tokens / reserved : 0;
      sum += waste;
      worst = std::max(worst, waste);
      ++samples;
    }
    absl::SleepFor(absl::Microseconds(200));
  }
  for (auto& s : sinks) s->Wait();
  std::printf("mixed workload: %d requests, prompts 8..600, outputs 8..300, block size %d\n",
              f.requests, f.block_size);
  std::printf(
      "KV waste (reserved slots not holding a live token / reserved slots): mean %.2f%%, "
      "max %.2f%% over %lld samples\n",
      100 * sum / std::max<int64_t>(samples, 1), 100 * worst, static_cast<long long>(samples));
  return 0;
}

}  // namespace
}  // namespace pagoda::bench

int main(int argc, char** argv) {
  CLI::App app(
      "pagoda-decode-bench --mode kv|batch|profile|preempt|waste [--preset NAME] ...: engine "
      "decode throughput, in-process. Flags may be spelled with dashes or underscores.",
      "pagoda-decode-bench");
  pagoda::bench::SetUpApp(&app);
  pagoda::bench::Flags flags;
  pagoda::bench::AddModelFlags(&app, &flags);
  pagoda::bench::AddWorkloadFlags(&app, &flags);
  if (auto rc = pagoda::bench::ParseCommandLine(&app, argc, argv)) return *rc;
  if (!flags.write_model.empty()) return pagoda::bench::WriteModel(flags);
  if (flags.mode == "kv") return pagoda::bench::RunKv(flags);
  if (flags.mode == "batch") return pagoda::bench::RunBatch(flags);
  if (flags.mode == "profile") return pagoda::bench::RunProfileMode(flags);
  if (flags.mode == "preempt") return pagoda::bench::RunPreemptMode(flags);
  return pagoda::bench::RunWaste(flags);
}
