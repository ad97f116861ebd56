#include "bench/decode_profile.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/time/clock.h"
#include "common/mutex.h"
#include "kernels/profiling_backend.h"
#include "model/llama_config.h"

namespace pagoda::bench {
namespace {

constexpr char kSampling[] = "sampling";
constexpr char kDetokenize[] = "detokenize";
constexpr char kOther[] = "scheduling/other";

// Totals over the steps of one phase (decode or prefill).
struct PhaseTotals {
  int64_t steps = 0;
  int64_t tokens = 0;
  int64_t seqs = 0;
  double total = 0;                                  // seconds of whole steps
  std::vector<std::string> order;                    // labels in order of first use
  absl::flat_hash_map<std::string, double> seconds;  // per label
  absl::flat_hash_map<std::string, int64_t> calls;

  void Add(const std::string& label, double s, int64_t n) {
    if (!seconds.contains(label)) order.push_back(label);
    seconds[label] += s;
    calls[label] += n;
  }
};

// Sorts each step's op times into the decode or prefill totals.
class Collector final : public engine::StepObserver {
 public:
  explicit Collector(kernels::ProfilingBackend* backend) : backend_(backend) {}

  void OnStep(const engine::StepTiming& t) override {
    std::vector<kernels::ProfilingBackend::OpTime> ops = backend_->TakeTimes();
    MutexLock lock(&mu_);
    ++steps_seen_;
    PhaseTotals& p = t.num_tokens == t.num_seqs ? decode_ : prefill_;
    ++p.steps;
    p.tokens += t.num_tokens;
    p.seqs += t.num_seqs;
    const double total = absl::ToDoubleSeconds(t.total);
    p.total += total;
    double accounted = 0;
    for (const auto& op : ops) {
      p.Add(op.label, op.seconds, op.calls);
      accounted += op.seconds;
    }
    const double sample = absl::ToDoubleSeconds(t.sample);
    const double detok = absl::ToDoubleSeconds(t.detokenize);
    p.Add(kSampling, sample, 1);
    p.Add(kDetokenize, detok, 1);
    p.Add(kOther, std::max(0.0, total - accounted - sample - detok), 1);
  }

  // Drops everything collected so far (and the backend's partial step).
  void Reset() {
    backend_->TakeTimes();
    MutexLock lock(&mu_);
    decode_ = PhaseTotals();
    prefill_ = PhaseTotals();
  }
  int64_t steps_seen() {
    MutexLock lock(&mu_);
    return steps_seen_;
  }
  std::pair<PhaseTotals, PhaseTotals> Take() {
    MutexLock lock(&mu_);
    return {std::exchange(prefill_, PhaseTotals()), std::exchange(decode_, PhaseTotals())};
  }

 private:
  kernels::ProfilingBackend* backend_;
  Mutex mu_;
  int64_t steps_seen_ ABSL_GUARDED_BY(mu_) = 0;
  PhaseTotals decode_ ABSL_GUARDED_BY(mu_);
  PhaseTotals prefill_ ABSL_GUARDED_BY(mu_);
};

// Waits for a request's end.
class DoneSink final : public engine::OutputSink {
 public:
  void OnOutput(engine::GenerationOutput out) override {
    MutexLock lock(&mu_);
    if (!out.finished()) return;
    done_ = true;
    error_ = out.error;
  }
  absl::Status Wait() {
    MutexLock lock(&mu_);
    mu_.Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return done_; });
    return error_;
  }

 private:
  Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

// Runs `n` requests of `context` prompt tokens and `tokens` outputs at once and waits until
// the engine has reported every step. False (after printing why) when one fails.
bool RunBatch(engine::Engine& engine, Collector& collector, int32_t n, int32_t context,
              int32_t tokens) {
  std::mt19937 rng(n * 131 + context);
  std::uniform_int_distribution<int32_t> id(3, engine.model_config().vocab_size - 1);
  std::vector<std::shared_ptr<DoneSink>> sinks;
  engine.Pause();  // all n requests enter in one step, whatever the thread timing
  for (int32_t i = 0; i < n; ++i) {
    engine::GenerationRequest r;
    r.prompt_token_ids.push_back(1);
    while (static_cast<int32_t>(r.prompt_token_ids.size()) < context) {
      r.prompt_token_ids.push_back(id(rng));
    }
    r.max_tokens = tokens;
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    sinks.push_back(std::make_shared<DoneSink>());
    auto s = engine.Submit(std::move(r), sinks.back());
    if (!s.ok()) {
      engine.Resume();
      std::fprintf(stderr, "submit: %s\n", std::string(s.status().message()).c_str());
      return false;
    }
  }
  engine.Resume();
  bool ok = true;
  for (auto& s : sinks) {
    const absl::Status st = s->Wait();
    if (!st.ok()) std::fprintf(stderr, "request failed: %s\n", std::string(st.message()).c_str());
    ok = ok && st.ok();
  }
  // Stats().num_steps advances only after the observer saw the step.
  while (true) {
    const engine::EngineStats st = engine.Stats();
    if (st.num_running == 0 && st.num_steps == collector.steps_seen()) break;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return ok;
}

void PrintPhase(const char* name, const PhaseTotals& p) {
  if (p.steps == 0) {
    std::printf("%s: no steps\n\n", name);
    return;
  }
  const double step_ms = 1e3 * p.total / p.steps;
  std::printf("%s: %lld steps, %.1f seqs and %.1f tokens per step, %.3f ms/step\n", name,
              static_cast<long long>(p.steps), static_cast<double>(p.seqs) / p.steps,
              static_cast<double>(p.tokens) / p.steps, step_ms);
  std::printf("  %-18s %10s %8s %10s\n", "op", "ms/step", "% step", "calls/step");
  std::vector<std::string> rows = ProfileRows();
  for (const std::string& label : p.order) {
    if (std::find(rows.begin(), rows.end(), label) == rows.end()) rows.push_back(label);
  }
  for (const std::string& label : rows) {
    auto it = p.seconds.find(label);
    const double s = it == p.seconds.end() ? 0 : it->second;
    auto c = p.calls.find(label);
    const double calls = c == p.calls.end() ? 0 : static_cast<double>(c->second) / p.steps;
    std::printf("  %-18s %10.3f %7.1f%% %10.1f\n", label.c_str(), 1e3 * s / p.steps,
                p.total > 0 ? 100 * s / p.total : 0, calls);
  }
  std::printf("  %-18s %10.3f %7.1f%%\n\n", "total", step_ms, 100.0);
}

}  // namespace

const std::vector<std::string>& ProfileRows() {
  static const std::vector<std::string>* rows = new std::vector<std::string>{"embed",
                                                                             "rms_norm",
                                                                             "matmul qkv",
                                                                             "matmul o",
                                                                             "matmul gate_up",
                                                                             "matmul down",
                                                                             "matmul lm_head",
                                                                             "rope",
                                                                             "write_kv",
                                                                             "attention",
                                                                             "silu_mul",
                                                                             "add",
                                                                             "add_bias",
                                                                             "prepare_batch",
                                                                             "gather_logits",
                                                                             "read_logits",
                                                                             kSampling,
                                                                             kDetokenize,
                                                                             kOther};
  return *rows;
}

int RunProfile(const ProfileOptions& options, const EngineFactory& make_engine) {
  kernels::ProfilingBackend* profiler = nullptr;
  std::unique_ptr<Collector> collector;
  const int32_t max_n = options.batch_sizes.empty() ? 1
                                                    : *std::max_element(options.batch_sizes.begin(),
                                                                        options.batch_sizes.end());
  // The collector must outlive the engine: declare the engine after it.
  auto wrap = [&](std::unique_ptr<kernels::Backend> inner) -> std::unique_ptr<kernels::Backend> {
    auto p = std::make_unique<kernels::ProfilingBackend>(std::move(inner));
    profiler = p.get();
    collector = std::make_unique<Collector>(profiler);
    return p;
  };
  // The observer is fixed at creation, so route through a forwarding shim.
  struct Forward final : engine::StepObserver {
    Collector** target;
    void OnStep(const engine::StepTiming& t) override {
      if (*target != nullptr) (*target)->OnStep(t);
    }
  };
  Collector* raw = nullptr;
  Forward forward;
  forward.target = &raw;
  engine::EngineConfig config{.max_seqs = std::max(256, max_n), .step_observer = &forward};
  auto engine = make_engine(config, wrap);
  if (!engine.ok()) {
    std::fprintf(stderr, "engine: %s\n", std::string(engine.status().message()).c_str());
    return 1;
  }
  raw = collector.get();
  std::printf("model: %s, %.1fM parameters, backend %s, prompt %d, decode %d tokens each\n\n",
              options.model_label.c_str(), (*engine)->model_config().num_parameters() / 1e6,
              (*engine)->backend_name().c_str(), options.context, options.decode_tokens);
  if (!RunBatch(**engine, *raw, 1, options.context, 2)) return 1;  // warm-up
  for (int32_t n : options.batch_sizes) {
    raw->Reset();
    if (!RunBatch(**engine, *raw, n, options.context, options.decode_tokens)) return 1;
    auto [prefill, decode] = raw->Take();
    std::printf("=== batch %d ===\n", n);
    PrintPhase("prefill", prefill);
    PrintPhase("decode", decode);
    std::fflush(stdout);
  }
  (*engine)->Stop();
  return 0;
}

}  // namespace pagoda::bench
