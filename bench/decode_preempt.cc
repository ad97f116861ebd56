#include "bench/decode_preempt.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/mutex.h"
#include "kernels/kv_cache.h"

namespace pagoda::bench {
namespace {

// Records the first token's time and the end of one request.
class FirstTokenSink final : public engine::OutputSink {
 public:
  void OnOutput(engine::GenerationOutput out) override {
    MutexLock lock(&mu_);
    if (first_ == absl::InfinitePast() && !out.token_ids.empty()) first_ = absl::Now();
    tokens_ += static_cast<int64_t>(out.token_ids.size());
    if (out.finished()) {
      done_ = true;
      if (!out.error.ok()) {
        std::fprintf(stderr, "request failed: %s\n", std::string(out.error.message()).c_str());
      }
    }
  }
  // Waits for the end; returns (time of the first token, output tokens).
  std::pair<absl::Time, int64_t> Wait() {
    MutexLock lock(&mu_);
    mu_.Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return done_; });
    return {first_, tokens_};
  }

 private:
  Mutex mu_;
  absl::Time first_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t tokens_ ABSL_GUARDED_BY(mu_) = 0;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

// Bytes of one KV block of `engine`'s cache (its model, block size and element type).
int64_t BytesPerBlock(const engine::Engine& engine, int32_t block_size) {
  const engine::ModelInfo info = engine.model_info();
  kernels::KvCacheShape shape{.num_layers = info.num_layers,
                              .block_size = block_size,
                              .num_kv_heads = info.num_kv_heads,
                              .head_dim = info.head_dim};
  for (kernels::DType t : {kernels::DType::kF32, kernels::DType::kF16, kernels::DType::kBF16,
                           kernels::DType::kI8, kernels::DType::kF8E4M3}) {
    if (kernels::DTypeName(t) == info.kv_cache_dtype) shape.dtype = t;
  }
  return static_cast<int64_t>(shape.bytes_per_block());
}

struct RunResult {
  double seconds = 0;
  int64_t tokens = 0;
  double ttft_p50_ms = 0;
  engine::EngineStats stats;
};

RunResult RunWorkload(engine::Engine& engine, const PreemptOptions& o) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int32_t> id(3, engine.model_info().vocab_size - 1);
  std::vector<std::shared_ptr<FirstTokenSink>> sinks;
  const absl::Time start = absl::Now();
  for (int32_t i = 0; i < o.requests; ++i) {
    engine::GenerationRequest r;
    r.prompt_token_ids.push_back(1);
    while (static_cast<int32_t>(r.prompt_token_ids.size()) < o.prompt) {
      r.prompt_token_ids.push_back(id(rng));
    }
    r.max_tokens = o.output;
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    sinks.push_back(std::make_shared<FirstTokenSink>());
    if (auto s = engine.Submit(r, sinks.back()); !s.ok()) {
      std::fprintf(stderr, "submit: %s\n", std::string(s.status().message()).c_str());
      sinks.pop_back();
    }
  }
  RunResult result;
  std::vector<double> ttft;
  for (auto& sink : sinks) {
    const auto [first, tokens] = sink->Wait();
    result.tokens += tokens;
    if (first != absl::InfinitePast()) ttft.push_back(absl::ToDoubleMilliseconds(first - start));
  }
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (!ttft.empty()) {
    std::nth_element(ttft.begin(), ttft.begin() + ttft.size() / 2, ttft.end());
    result.ttft_p50_ms = ttft[ttft.size() / 2];
  }
  result.stats = engine.Stats();
  return result;
}

}  // namespace

int RunPreempt(const PreemptOptions& o, const EngineFactory& make_engine) {
  const int32_t per_request = (o.prompt + o.output + o.block_size - 1) / o.block_size;
  const int32_t blocks =
      o.num_blocks > 0 ? o.num_blocks : std::max(per_request, o.requests * per_request / 3);
  const int32_t swap_blocks = o.swap_blocks > 0 ? o.swap_blocks : blocks;
  std::printf(
      "model: %s; %d requests at once, prompt %d, output %d; blocks of %d tokens: %d "
      "(all requests at full length need %d), swap space %d\n",
      o.model_label.c_str(), o.requests, o.prompt, o.output, o.block_size, blocks,
      o.requests * per_request, swap_blocks);
  std::printf("%-34s %9s %10s %12s %12s %10s %12s\n", "preemption", "wall s", "out tok/s",
              "TTFT p50 ms", "preemptions", "swap-outs", "cache hits");
  struct Run {
    const char* name;
    engine::PreemptionMode mode;
    int32_t blocks;
  };
  const Run runs[] = {{"recompute", engine::PreemptionMode::kRecompute, blocks},
                      {"swap", engine::PreemptionMode::kSwap, blocks},
                      {"recompute, pool + the swap's blocks", engine::PreemptionMode::kRecompute,
                       blocks + swap_blocks}};
  int64_t bytes_per_block = 0;
  for (const Run& run : runs) {
    engine::EngineConfig config{.num_blocks = run.blocks,
                                .max_seqs = std::max(o.requests, 1),
                                .preemption_mode = run.mode,
                                .swap_space = bytes_per_block * swap_blocks};
    auto engine = make_engine(config, nullptr);
    if (!engine.ok()) {
      std::fprintf(stderr, "engine: %s\n", std::string(engine.status().message()).c_str());
      return 1;
    }
    // The first run (recompute) learns the block's bytes for the swap run's space.
    if (bytes_per_block == 0) bytes_per_block = BytesPerBlock(**engine, o.block_size);
    const RunResult r = RunWorkload(**engine, o);
    std::printf("%-34s %9.2f %10.1f %12.1f %12lld %10lld %12lld\n", run.name, r.seconds,
                r.seconds > 0 ? static_cast<double>(r.tokens) / r.seconds : 0, r.ttft_p50_ms,
                static_cast<long long>(r.stats.num_preemptions),
                static_cast<long long>(r.stats.num_swap_outs),
                static_cast<long long>(r.stats.prefix_cache_hits));
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace pagoda::bench
