// pagoda-decode-bench: engine-level decode throughput, in-process (no gRPC).
//
//   --mode kv       decode tokens/s with the KV cache vs recomputing the whole context at
//                   every step, at each of --contexts, and their ratio
//   --mode batch    aggregate decode tokens/s at each of --batch-sizes concurrent
//                   sequences of --context prompt tokens, and the ratio to batch 1
//   --mode profile  wall time per op per step (ms/step, % of step) of the prefill chunk and
//                   the decode steps, at each of --batch-sizes (see decode_profile.h)
//   --mode preempt  recompute vs swap under KV-memory pressure (see decode_preempt.h)
//   --mode waste    KV-cache waste (reserved slots not holding a live token, over reserved
//                   slots) sampled every step over a mixed-length workload
//
// --write_model=PATH writes the --preset/--dtype model to PATH as GGUF and exits, so that
// several runs (tools/gpu-check.sh) synthesize a large preset once and pass it as --model.
//
// A benchmark prints numbers; it never fails on them.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/decode_preempt.h"
#include "bench/decode_profile.h"
#include "common/flag_spelling.h"
#include "common/mutex.h"
#include "engine/engine.h"
#include "kernels/backend.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/llama_config.h"
#include "model/make_model.h"

ABSL_FLAG(std::string, mode, "batch", "kv, batch, profile, preempt or waste");
ABSL_FLAG(std::string, preset, "25m", "make-model preset built in memory (when --model is empty)");
ABSL_FLAG(std::string, model, "", "GGUF model file instead of a preset");
ABSL_FLAG(std::string, dtype, "f32", "weight type of the in-memory preset: f32, f16 or bf16");
ABSL_FLAG(std::string, write_model, "",
          "write the --preset/--dtype model to this GGUF file and exit (no benchmark)");
ABSL_FLAG(std::string, device, "cpu", "cpu, cuda or auto");
ABSL_FLAG(int32_t, threads, 0, "CPU threads; 0 = all");
ABSL_FLAG(std::string, cpu_matmul, "auto",
          "CPU f32 products: auto (pagoda's SIMD kernels for decode) or blas (OpenBLAS always)");
ABSL_FLAG(std::string, contexts, "128,512,1024", "--mode kv: context lengths");
ABSL_FLAG(std::string, batch_sizes, "1,4,16,64", "--mode batch/profile: concurrent sequences");
ABSL_FLAG(int32_t, context, 128, "--mode batch/profile: prompt tokens per sequence");
ABSL_FLAG(int32_t, decode_tokens, 32, "tokens generated per sequence");
ABSL_FLAG(int32_t, block_size, 16, "KV block size");
ABSL_FLAG(int64_t, kv_cache_memory, 0, "KV cache bytes (0 = engine default)");
ABSL_FLAG(int32_t, requests, 128,
          "--mode waste: requests in the mixed workload; --mode preempt: requests at once");
ABSL_FLAG(int32_t, num_blocks, 0,
          "--mode preempt: KV blocks (0 = a third of what the requests at full length need)");
ABSL_FLAG(int32_t, swap_blocks, 0, "--mode preempt: swap-space blocks (0 = --num-blocks)");

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

// A comma-separated list of positive integers; anything else ends the program with the
// reason (a typo must not silently shrink the measurement).
std::vector<int32_t> ParseList(const std::string& s) {
  std::vector<int32_t> out;
  for (absl::string_view part : absl::StrSplit(s, ',', absl::SkipEmpty())) {
    int32_t v;
    if (!absl::SimpleAtoi(part, &v) || v <= 0) {
      std::fprintf(stderr, "not a list of positive integers: \"%s\"\n", s.c_str());
      std::exit(2);
    }
    out.push_back(v);
  }
  return out;
}

// The flags' preset (--preset, --dtype) with seed 0.
absl::StatusOr<gguf::GgufWriter> PresetModel() {
  auto preset = model::FindPreset(absl::GetFlag(FLAGS_preset));
  if (!preset.ok()) return preset.status();
  const std::string d = absl::GetFlag(FLAGS_dtype);
  if (d != "f32" && d != "f16" && d != "bf16") {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype must be f32, f16 or bf16, not \"", d, "\""));
  }
  const gguf::TensorType type = d == "bf16"  ? gguf::TensorType::kBF16
                                : d == "f16" ? gguf::TensorType::kF16
                                             : gguf::TensorType::kF32;
  return model::MakeModel(*preset, 0, type);
}

// --write_model: the preset to a file, nothing else.
int WriteModel() {
  const std::string path = absl::GetFlag(FLAGS_write_model);
  const absl::Time start = absl::Now();
  auto writer = PresetModel();
  absl::Status status = writer.ok() ? writer->WriteFile(path) : writer.status();
  if (!status.ok()) {
    std::fprintf(stderr, "write_model: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  std::printf("wrote %s (preset %s, %s) in %.1f s\n", path.c_str(),
              absl::GetFlag(FLAGS_preset).c_str(), absl::GetFlag(FLAGS_dtype).c_str(),
              absl::ToDoubleSeconds(absl::Now() - start));
  return 0;
}

using BackendWrap =
    std::function<std::unique_ptr<kernels::Backend>(std::unique_ptr<kernels::Backend>)>;

// An engine on the flags' model and device; `wrap` (when set) decorates the backend.
absl::StatusOr<std::unique_ptr<engine::Engine>> MakeEngine(engine::EngineConfig config,
                                                           const BackendWrap& wrap = nullptr) {
  std::unique_ptr<gguf::GgufFile> file;
  if (!absl::GetFlag(FLAGS_model).empty()) {
    auto f = gguf::GgufFile::Open(absl::GetFlag(FLAGS_model));
    if (!f.ok()) return f.status();
    file = *std::move(f);
  } else {
    auto writer = PresetModel();
    if (!writer.ok()) return writer.status();
    auto f = gguf::GgufFile::FromBytes(writer->Serialize());
    if (!f.ok()) return f.status();
    file = *std::move(f);
  }
  kernels::BackendOptions options;
  const std::string device = absl::GetFlag(FLAGS_device);
  const std::string matmul = absl::GetFlag(FLAGS_cpu_matmul);
  if (device != "cpu" && device != "cuda" && device != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("--device must be cpu, cuda or auto, not \"", device, "\""));
  }
  if (matmul != "auto" && matmul != "blas") {
    return absl::InvalidArgumentError(
        absl::StrCat("--cpu_matmul must be auto or blas, not \"", matmul, "\""));
  }
  options.device = device == "cuda"  ? kernels::DeviceKind::kCuda
                   : device == "cpu" ? kernels::DeviceKind::kCpu
                                     : kernels::DeviceKind::kAuto;
  options.num_threads = absl::GetFlag(FLAGS_threads);
  options.cpu_blas_only = matmul == "blas";
  auto backend = kernels::CreateBackend(options);
  if (!backend.ok()) return backend.status();
  config.block_size = absl::GetFlag(FLAGS_block_size);
  config.kv_cache_memory = absl::GetFlag(FLAGS_kv_cache_memory);
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

int RunKv() {
  const int32_t tokens = absl::GetFlag(FLAGS_decode_tokens);
  auto on = MakeEngine({.kv_cache = true});
  auto off = MakeEngine({.kv_cache = false});
  if (!on.ok() || !off.ok()) {
    std::fprintf(stderr, "engine: %s\n",
                 std::string((on.ok() ? off : on).status().message()).c_str());
    return 1;
  }
  std::printf("model: %s, %.1fM parameters, decode tokens per point: %d\n",
              absl::GetFlag(FLAGS_model).empty() ? absl::GetFlag(FLAGS_preset).c_str()
                                                 : absl::GetFlag(FLAGS_model).c_str(),
              (*on)->model_config().num_parameters() / 1e6, tokens);
  std::printf("%8s %16s %16s %8s\n", "context", "kv-cache tok/s", "recompute tok/s", "ratio");
  for (int32_t ctx : ParseList(absl::GetFlag(FLAGS_contexts))) {
    const double a = DecodeTokensPerSecond(**on, 1, ctx, tokens);
    const double b = DecodeTokensPerSecond(**off, 1, ctx, std::max(3, tokens / 4));
    std::printf("%8d %16.1f %16.2f %8.1f\n", ctx, a, b, b > 0 ? a / b : 0);
    std::fflush(stdout);
  }
  return 0;
}

int RunBatch() {
  const int32_t tokens = absl::GetFlag(FLAGS_decode_tokens);
  const int32_t context = absl::GetFlag(FLAGS_context);
  const std::vector<int32_t> sizes = ParseList(absl::GetFlag(FLAGS_batch_sizes));
  const int32_t max_n = sizes.empty() ? 1 : *std::max_element(sizes.begin(), sizes.end());
  auto engine = MakeEngine({.max_seqs = std::max(256, max_n)});
  if (!engine.ok()) {
    std::fprintf(stderr, "engine: %s\n", std::string(engine.status().message()).c_str());
    return 1;
  }
  std::printf("model: %s, %.1fM parameters, backend %s, prompt %d, decode %d tokens each\n",
              absl::GetFlag(FLAGS_model).empty() ? absl::GetFlag(FLAGS_preset).c_str()
                                                 : absl::GetFlag(FLAGS_model).c_str(),
              (*engine)->model_config().num_parameters() / 1e6, (*engine)->backend_name().c_str(),
              context, tokens);
  DecodeTokensPerSecond(**engine, 1, context, 4);  // warm-up
  std::printf("%8s %14s %10s\n", "seqs", "decode tok/s", "vs 1 seq");
  double base = 0;
  for (int32_t n : sizes) {
    const double tps = DecodeTokensPerSecond(**engine, n, context, tokens);
    if (base == 0) base = tps;
    std::printf("%8d %14.1f %10.2f\n", n, tps, base > 0 ? tps / base : 0);
    std::fflush(stdout);
  }
  return 0;
}

int RunProfileMode() {
  ProfileOptions options{.batch_sizes = ParseList(absl::GetFlag(FLAGS_batch_sizes)),
                         .context = absl::GetFlag(FLAGS_context),
                         .decode_tokens = absl::GetFlag(FLAGS_decode_tokens),
                         .model_label = absl::GetFlag(FLAGS_model).empty()
                                            ? absl::GetFlag(FLAGS_preset)
                                            : absl::GetFlag(FLAGS_model)};
  return RunProfile(options, [](engine::EngineConfig config, BackendWrap wrap) {
    return MakeEngine(config, wrap);
  });
}

int RunPreemptMode() {
  const PreemptOptions options{.requests = absl::GetFlag(FLAGS_requests),
                               .prompt = absl::GetFlag(FLAGS_context),
                               .output = absl::GetFlag(FLAGS_decode_tokens),
                               .num_blocks = absl::GetFlag(FLAGS_num_blocks),
                               .swap_blocks = absl::GetFlag(FLAGS_swap_blocks),
                               .block_size = absl::GetFlag(FLAGS_block_size),
                               .model_label = absl::GetFlag(FLAGS_model).empty()
                                                  ? absl::GetFlag(FLAGS_preset)
                                                  : absl::GetFlag(FLAGS_model)};
  return RunPreempt(options, [](engine::EngineConfig config, BackendWrap wrap) {
    return MakeEngine(config, wrap);
  });
}

int RunWaste() {
  auto engine = MakeEngine({.max_seqs = 256});
  if (!engine.ok()) {
    std::fprintf(stderr, "engine: %s\n", std::string(engine.status().message()).c_str());
    return 1;
  }
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> prompt_len(8, 600), out_len(8, 300);
  std::vector<std::shared_ptr<TimingSink>> sinks;
  for (int32_t i = 0; i < absl::GetFlag(FLAGS_requests); ++i) {
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
      const double reserved =
          static_cast<double>(s.num_blocks - s.num_free_blocks) * absl::GetFlag(FLAGS_block_size);
      const double waste = reserved > 0 ? 1.0 - s.num_cached_tokens / reserved : 0;
      sum += waste;
      worst = std::max(worst, waste);
      ++samples;
    }
    absl::SleepFor(absl::Microseconds(200));
  }
  for (auto& s : sinks) s->Wait();
  std::printf("mixed workload: %d requests, prompts 8..600, outputs 8..300, block size %d\n",
              absl::GetFlag(FLAGS_requests), absl::GetFlag(FLAGS_block_size));
  std::printf(
      "KV waste (reserved slots not holding a live token / reserved slots): mean %.2f%%, "
      "max %.2f%% over %lld samples\n",
      100 * sum / std::max<int64_t>(samples, 1), 100 * worst, static_cast<long long>(samples));
  return 0;
}

}  // namespace
}  // namespace pagoda::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "pagoda-decode-bench --mode kv|batch|profile|preempt|waste [--preset NAME] ...");
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i)
    args.push_back(i == 0 ? argv[0] : pagoda::NormalizeFlagSpelling(argv[i]));
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  absl::ParseCommandLine(argc, cargs.data());
  if (!absl::GetFlag(FLAGS_write_model).empty()) return pagoda::bench::WriteModel();
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "kv") return pagoda::bench::RunKv();
  if (mode == "batch") return pagoda::bench::RunBatch();
  if (mode == "profile") return pagoda::bench::RunProfileMode();
  if (mode == "preempt") return pagoda::bench::RunPreemptMode();
  if (mode == "waste") return pagoda::bench::RunWaste();
  std::fprintf(stderr, "--mode must be kv, batch, profile, preempt or waste\n");
  return 2;
}
