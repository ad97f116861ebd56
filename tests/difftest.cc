#include "tests/difftest.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/mutex.h"
#include "engine/collecting_sink.h"
#include "engine/engine.h"
#include "kernels/backend.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/make_model.h"

namespace pagoda::difftest {
namespace {

using engine::CollectedOutput;
using engine::CollectedSample;
using engine::FinishReason;
using engine::GenerationRequest;
using engine::TenantConfig;

constexpr int32_t kVocab = 512;  // the tiny preset's
constexpr int32_t kLayers = 2, kKvHeads = 2, kHeadDim = 16;

const std::vector<uint8_t>& TinyModel() {
  static const auto* bytes = [] {
    auto preset = model::FindPreset("tiny");
    auto writer = model::MakeModel(*preset, 0, gguf::TensorType::kF32);
    return new std::vector<uint8_t>(writer->Serialize());
  }();
  return *bytes;
}

class Random {
 public:
  explicit Random(uint64_t seed) : rng_(seed) {}
  int32_t Uniform(int32_t lo, int32_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng_);
  }
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  template <class T>
  const T& Pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(Uniform(0, static_cast<int32_t>(v.size()) - 1))];
  }
  uint64_t Next() { return rng_(); }

 private:
  std::mt19937_64 rng_;
};

// One request of the workload and when things happen to it (engine step numbers).
struct Planned {
  GenerationRequest request;
  int64_t arrival = 0;
  int64_t abort_at = -1;  // -1: never
};

struct Event {
  int64_t step;
  enum Kind { kSubmit, kAbort, kReload } kind;
  size_t index;  // request (kSubmit, kAbort) or reload table
};

struct Round {
  engine::EngineConfig config;
  std::vector<std::vector<TenantConfig>> tables;  // [0] at start, then reloads
  std::vector<Planned> requests;
  std::string description;
};

int32_t BlocksFor(int64_t tokens, int32_t block_size) {
  return static_cast<int32_t>((tokens + block_size - 1) / block_size);
}

GenerationRequest RandomRequest(Random& r, const std::vector<std::vector<int32_t>>& prefixes,
                                const std::vector<std::string>& tenants) {
  GenerationRequest q;
  const std::vector<int32_t>& prefix = r.Pick(prefixes);
  q.prompt_token_ids = prefix;
  const int32_t tail = r.Chance(0.1) ? r.Uniform(100, 400) : r.Uniform(1, 40);
  for (int32_t i = 0; i < tail; ++i) q.prompt_token_ids.push_back(r.Uniform(3, kVocab - 1));
  q.max_tokens = r.Chance(0.1) ? r.Uniform(60, 120) : r.Uniform(1, 40);
  q.n = r.Chance(0.15) ? r.Uniform(2, 3) : 1;
  q.sampling.seed = r.Next();
  if (r.Chance(0.5)) {
    q.sampling.temperature = 0;
  } else {
    q.sampling.temperature = r.Chance(0.5) ? 0.7f : 1.f;
    if (r.Chance(0.3)) q.sampling.top_k = 20;
    if (r.Chance(0.3)) q.sampling.top_p = 0.9f;
  }
  if (r.Chance(0.15)) q.stop = {r.Pick(std::vector<std::string>{"ee", "th", "a", "zq"})};
  if (r.Chance(0.1)) q.stop_token_ids = {r.Uniform(3, kVocab - 1)};
  q.ignore_eos = r.Chance(0.5);
  if (r.Chance(0.2)) q.sampling.logprobs = 2;
  q.priority = r.Chance(0.2) ? 1 : 0;
  q.tenant = r.Pick(tenants);
  return q;
}

// A tenant table over `names` for a pool of `blocks`, no single request needing more than
// `need` blocks (caps stay at or above it, so most requests fit).
std::vector<TenantConfig> RandomTable(Random& r, const std::vector<std::string>& names,
                                      int32_t blocks, int32_t need) {
  std::vector<TenantConfig> table;
  int32_t floors = 0;
  for (const std::string& name : names) {
    if (name.empty()) continue;
    TenantConfig t;
    t.name = name;
    t.weight = r.Uniform(1, 4);
    if (r.Chance(0.5)) t.kv_cache_cap_blocks = r.Uniform(std::min(need, blocks), blocks);
    if (r.Chance(0.3)) {
      t.kv_cache_floor_blocks = std::min(r.Uniform(0, blocks / 4), blocks - floors);
      if (t.kv_cache_cap_blocks > 0) {
        t.kv_cache_floor_blocks = std::min(t.kv_cache_floor_blocks, t.kv_cache_cap_blocks);
      }
      floors += t.kv_cache_floor_blocks;
    }
    if (r.Chance(0.2)) t.max_running_requests = r.Uniform(3, 6);
    table.push_back(t);
  }
  return table;
}

Round MakeRound(uint64_t seed, const Options& options) {
  Random r(seed);
  Round round;
  engine::EngineConfig& c = round.config;
  c.kv_cache_dtype = r.Pick(std::vector<std::string>{"f32", "f16", "bf16", "int8"});
  c.block_size = r.Pick(std::vector<int32_t>{1, 16, 32});
  c.max_batched_tokens = r.Pick(std::vector<int32_t>{16, 64, 256, 2048});
  c.max_seqs = r.Pick(std::vector<int32_t>{3, 4, 8, 32});
  c.enable_prefix_caching = r.Chance(0.75);
  c.preemption_mode =
      r.Chance(0.5) ? engine::PreemptionMode::kSwap : engine::PreemptionMode::kRecompute;
  c.injected_fault = options.fault;

  std::vector<std::string> tenants = {""};
  const int32_t num_tenants = r.Uniform(0, 3);
  for (int32_t t = 0; t < num_tenants; ++t) tenants.push_back(absl::StrCat("t", t));
  if (num_tenants > 0) tenants.erase(tenants.begin());
  std::vector<std::vector<int32_t>> prefixes;
  for (int32_t p = 0; p < 4; ++p) {
    std::vector<int32_t> prefix = {1};  // BOS
    for (int32_t i = r.Uniform(0, 48); i > 0; --i) prefix.push_back(r.Uniform(3, kVocab - 1));
    prefixes.push_back(std::move(prefix));
  }
  int32_t need = 1;
  const int64_t horizon = 3 * int64_t{options.requests_per_round};
  for (int32_t i = 0; i < options.requests_per_round; ++i) {
    Planned p;
    p.request = RandomRequest(r, prefixes, tenants);
    p.request.request_id = absl::StrCat("r", i);
    p.arrival =
        i < options.requests_per_round / 3 ? 0 : r.Uniform(1, static_cast<int32_t>(horizon));
    if (r.Chance(0.1)) p.abort_at = p.arrival + r.Uniform(0, 30);
    const int64_t total = p.request.prompt_token_ids.size() + *p.request.max_tokens;
    need = std::max(need, BlocksFor(total, c.block_size));
    round.requests.push_back(std::move(p));
  }
  // From barely enough for the largest request (with a block to spare for copy on write)
  // to ample.
  const double factor = r.Pick(std::vector<double>{1.0, 1.3, 2.0, 6.0});
  c.num_blocks = static_cast<int32_t>(need * factor) + 2;
  const int64_t elem = c.kv_cache_dtype == "f32" ? 4 : (c.kv_cache_dtype == "int8" ? 1 : 2);
  // int8 blocks carry float scales too (kernels/kv_cache.h): one per token and head of K and V.
  const int64_t scales = c.kv_cache_dtype == "int8" ? 2 * int64_t{c.block_size} * kKvHeads * 4 : 0;
  const int64_t block_bytes =
      kLayers * (2 * int64_t{c.block_size} * kKvHeads * kHeadDim * elem + scales);
  const int32_t host_blocks = r.Pick(std::vector<int32_t>{1, 4, need, 0});
  c.swap_space = host_blocks > 0 ? host_blocks * block_bytes : 0;

  if (num_tenants > 0) {
    round.tables.push_back(RandomTable(r, tenants, c.num_blocks, need));
    // Reloads may cut a cap below what a stream in flight holds: it must end with an error.
    for (int32_t k = r.Uniform(0, 2); k > 0; --k) {
      round.tables.push_back(RandomTable(r, tenants, c.num_blocks, std::max(1, need / 4)));
    }
  }
  round.description = absl::StrCat(
      "kv ", c.kv_cache_dtype, ", block ", c.block_size, ", ", c.num_blocks, " blocks, budget ",
      c.max_batched_tokens, ", max_seqs ", c.max_seqs, ", prefix cache ",
      c.enable_prefix_caching ? "on" : "off", ", ",
      c.preemption_mode == engine::PreemptionMode::kSwap
          ? absl::StrCat("swap (", host_blocks > 0 ? host_blocks : c.num_blocks, " host blocks)")
          : "recompute",
      ", ", num_tenants, " tenants, ", round.tables.size() > 1 ? round.tables.size() - 1 : 0,
      " reloads");
  return round;
}

std::unique_ptr<engine::Engine> MakeEngine(const engine::EngineConfig& config, std::string* error) {
  auto file = gguf::GgufFile::FromBytes(TinyModel());
  auto backend = kernels::CreateBackend({.device = kernels::DeviceKind::kCpu, .num_threads = 2});
  if (!file.ok() || !backend.ok()) {
    *error = absl::StrCat(file.status().ToString(), " ", backend.status().ToString());
    return nullptr;
  }
  auto engine = engine::Engine::Create(config, *std::move(file), *std::move(backend));
  if (!engine.ok()) {
    *error = engine.status().ToString();
    return nullptr;
  }
  return *std::move(engine);
}

// Fires the round's events at engine step numbers, on the engine thread (after each step)
// or, when every submitted request is done and the engine idles, on the caller's.
class Driver final : public engine::StepObserver {
 public:
  explicit Driver(const Round& round) : round_(round) {
    for (size_t i = 0; i < round.requests.size(); ++i) {
      events_.push_back({round.requests[i].arrival, Event::kSubmit, i});
      if (round.requests[i].abort_at >= 0) {
        events_.push_back({round.requests[i].abort_at, Event::kAbort, i});
      }
    }
    Random r(round.requests.size() * 7919 + round.tables.size());
    for (size_t t = 1; t < round.tables.size(); ++t) {
      events_.push_back(
          {r.Uniform(1, static_cast<int32_t>(2 * round.requests.size())), Event::kReload, t});
    }
    std::stable_sort(events_.begin(), events_.end(),
                     [](const Event& a, const Event& b) { return a.step < b.step; });
    sinks_.resize(round.requests.size());
    handles_.resize(round.requests.size(), 0);
  }

  void OnStep(const engine::StepTiming&) override {
    MutexLock lock(&mu_);
    ++steps_;
    FireUntilLocked(steps_);
  }

  // Starts `engine` (created with this as its step observer) and runs until every event
  // fired and every accepted request finished.
  void Run(engine::Engine* engine) {
    {
      MutexLock lock(&mu_);
      engine_ = engine;
    }
    {
      MutexLock lock(&mu_);
      FireUntilLocked(0);
    }
    engine_->Start();
    // A watchdog, not a measurement: an engine that stops making progress with work in
    // flight (a stalled stream) fails the round instead of hanging it.
    int64_t last_progress = -1;
    absl::Time since = absl::Now();
    bool stalled = false;
    while (true) {
      {
        MutexLock lock(&mu_);
        const bool all_done = done_.load() == accepted_;
        if (all_done && next_ == events_.size()) break;
        // Nothing in flight: the engine takes no step, so the next event fires now.
        if (all_done) FireUntilLocked(events_[next_].step);
        const int64_t progress = steps_ + done_.load();
        if (progress != last_progress) {
          last_progress = progress;
          since = absl::Now();
        } else if (absl::Now() - since > absl::Seconds(30)) {
          errors_.push_back(absl::StrCat("stalled at step ", steps_, " with ",
                                         accepted_ - done_.load(), " requests in flight"));
          stalled = true;
        }
      }
      if (stalled) {
        engine->Stop();  // every request in flight ends with an error (outside mu_: OnStep)
        break;
      }
      absl::SleepFor(absl::Milliseconds(1));
    }
  }

  const std::vector<std::shared_ptr<engine::CollectingSink>>& sinks() const { return sinks_; }
  int64_t refused() const { return refused_; }
  int64_t reloads() const { return reloads_; }
  std::vector<std::string> TakeErrors() { return std::move(errors_); }

 private:
  void FireUntilLocked(int64_t step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (next_ < events_.size() && events_[next_].step <= step) {
      const Event& e = events_[next_++];
      if (e.kind == Event::kSubmit) {
        auto sink =
            std::make_shared<engine::CollectingSink>([this](const engine::GenerationOutput& out) {
              if (out.finished()) done_.fetch_add(1);
            });
        auto submitted = engine_->Submit(round_.requests[e.index].request, sink);
        if (submitted.ok()) {
          sinks_[e.index] = std::move(sink);
          handles_[e.index] = submitted->handle;
          ++accepted_;
        } else if (submitted.status().code() == absl::StatusCode::kResourceExhausted) {
          ++refused_;
        } else {
          errors_.push_back(
              absl::StrCat("request ", e.index, " refused: ", submitted.status().ToString()));
        }
      } else if (e.kind == Event::kAbort) {
        if (handles_[e.index] != 0) engine_->Abort(handles_[e.index]);
      } else {
        const absl::Status s = engine_->SetTenants(round_.tables[e.index]);
        if (!s.ok()) errors_.push_back(absl::StrCat("reload refused: ", s.ToString()));
        ++reloads_;
      }
    }
  }

  const Round& round_;
  Mutex mu_;
  engine::Engine* engine_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<Event> events_;
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t accepted_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t refused_ = 0;
  int64_t reloads_ = 0;
  std::atomic<int64_t> done_{0};
  std::vector<std::shared_ptr<engine::CollectingSink>> sinks_;
  std::vector<engine::RequestHandle> handles_;
  std::vector<std::string> errors_;
};

bool SameLogprobs(const std::vector<engine::TokenLogprob>& a,
                  const std::vector<engine::TokenLogprob>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].token_id != b[i].token_id || a[i].logprob != b[i].logprob || a[i].top != b[i].top) {
      return false;
    }
  }
  return true;
}

// Compares sample `i` of a request run in the mix with its alone run; appends failures.
void Compare(const std::string& where, const CollectedSample& mixed, const CollectedSample& alone,
             const absl::Status& error, Report* report) {
  const size_t common = std::min(mixed.token_ids.size(), alone.token_ids.size());
  const auto diff = std::mismatch(mixed.token_ids.begin(), mixed.token_ids.begin() + common,
                                  alone.token_ids.begin());
  report->tokens += static_cast<int64_t>(common);
  if (diff.first != mixed.token_ids.begin() + common) {
    const auto at = diff.first - mixed.token_ids.begin();
    report->failures.push_back(
        absl::StrCat(where, ": token ", at, " is ", *diff.first, ", alone ", *diff.second));
    return;
  }
  switch (mixed.finish_reason) {
    case FinishReason::kAbort:
      ++report->aborted;
      return;
    case FinishReason::kError:
      if (error.code() != absl::StatusCode::kResourceExhausted) {
        report->failures.push_back(absl::StrCat(where, ": ended with ", error.ToString()));
      } else {
        ++report->ended;
      }
      return;
    default:
      break;
  }
  ++report->finished;
  if (mixed.token_ids.size() != alone.token_ids.size() ||
      mixed.finish_reason != alone.finish_reason) {
    report->failures.push_back(absl::StrCat(
        where, ": ", mixed.token_ids.size(), " tokens (", FinishReasonName(mixed.finish_reason),
        "), alone ", alone.token_ids.size(), " (", FinishReasonName(alone.finish_reason), ")"));
  } else if (!SameLogprobs(mixed.logprobs, alone.logprobs)) {
    size_t at = 0;
    while (at < mixed.logprobs.size() && mixed.logprobs[at].logprob == alone.logprobs[at].logprob) {
      ++at;
    }
    report->failures.push_back(
        absl::StrCat(where, ": log-probabilities differ from token ", at, " (",
                     at < mixed.logprobs.size() ? mixed.logprobs[at].logprob : 0.f, " vs ",
                     at < alone.logprobs.size() ? alone.logprobs[at].logprob : 0.f, ")"));
  }
}

}  // namespace

void Report::Add(const Report& o) {
  rounds += o.rounds;
  requests += o.requests;
  refused += o.refused;
  finished += o.finished;
  aborted += o.aborted;
  ended += o.ended;
  tokens += o.tokens;
  steps += o.steps;
  preemptions += o.preemptions;
  swap_outs += o.swap_outs;
  prefix_hits += o.prefix_hits;
  reloads += o.reloads;
  forks += o.forks;
  failures.insert(failures.end(), o.failures.begin(), o.failures.end());
}

std::string Report::Summary() const {
  return absl::StrCat(rounds, " rounds, ", requests, " requests (", refused, " refused), ",
                      finished, " samples compared whole, ", aborted, " aborted, ", ended,
                      " ended by reloads, ", tokens, " tokens compared; ", steps, " steps, ",
                      preemptions, " preemptions, ", swap_outs, " swap-outs, ", prefix_hits,
                      " prefix-cache tokens, ", forks, " forked samples, ", reloads, " reloads; ",
                      failures.size(), " failures");
}

Report RunRound(uint64_t seed, const Options& options) {
  Report report;
  report.rounds = 1;
  const Round round = MakeRound(seed, options);
  const std::string where = absl::StrCat("seed ", seed, " (", round.description, ")");
  std::string error;
  Driver driver(round);
  engine::EngineConfig config = round.config;
  config.step_observer = &driver;
  // Pacing limits drawn anew every step, from the seed: reproducible where the pacer's
  // measured times would not be.
  auto limits_rng = std::make_shared<Random>(seed ^ 0x9e3779b97f4a7c15ull);
  config.prefill_limits_override = [limits_rng]() {
    Random& r = *limits_rng;
    if (r.Chance(0.4)) return engine::PrefillLimits{};
    return engine::PrefillLimits{.short_len = r.Uniform(1, 32),
                                 .long_chunk = r.Pick(std::vector<int32_t>{0, 0, 4, 16, 64}),
                                 .heavy_context = r.Uniform(8, 256),
                                 .idle_chunk = r.Pick(std::vector<int32_t>{0, 8, 32})};
  };
  std::unique_ptr<engine::Engine> mixed = MakeEngine(config, &error);
  if (mixed == nullptr) {
    report.failures.push_back(absl::StrCat(where, ": engine: ", error));
    return report;
  }
  if (!round.tables.empty()) {
    const absl::Status s = mixed->SetTenants(round.tables[0]);
    if (!s.ok()) report.failures.push_back(absl::StrCat(where, ": tenants: ", s.ToString()));
  }
  driver.Run(mixed.get());
  for (std::string& e : driver.TakeErrors()) {
    report.failures.push_back(absl::StrCat(where, ": ", e));
  }
  // Every block back in the pool and the swap space once idle.
  engine::EngineStats stats;
  for (int i = 0; i < 5000; ++i) {
    stats = mixed->Stats();
    if (stats.num_running == 0 && stats.num_waiting == 0 &&
        stats.num_free_blocks == stats.num_blocks &&
        stats.num_free_swap_blocks == stats.num_swap_blocks) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
  if (stats.num_free_blocks != stats.num_blocks ||
      stats.num_free_swap_blocks != stats.num_swap_blocks || stats.num_swapped != 0) {
    report.failures.push_back(
        absl::StrCat(where, ": at the end ", stats.num_free_blocks, " of ", stats.num_blocks,
                     " blocks free, ", stats.num_free_swap_blocks, " of ", stats.num_swap_blocks,
                     " swap blocks free, ", stats.num_swapped, " swapped"));
  }
  report.steps = stats.num_steps;
  report.preemptions = stats.num_preemptions;
  report.swap_outs = stats.num_swap_outs;
  report.prefix_hits = stats.prefix_cache_hits;
  report.reloads = driver.reloads();
  report.refused = driver.refused();
  mixed->Stop();

  // The oracle: each request alone, on an engine of the same KV type and block size with
  // room for it, no prefix cache, no tenants, no pacing, one whole-prompt chunk.
  engine::EngineConfig alone_config;
  alone_config.kv_cache_dtype = round.config.kv_cache_dtype;
  alone_config.block_size = round.config.block_size;
  alone_config.num_blocks = 4 * round.config.num_blocks + 64;
  alone_config.enable_prefix_caching = false;
  std::unique_ptr<engine::Engine> alone = MakeEngine(alone_config, &error);
  if (alone == nullptr) {
    report.failures.push_back(absl::StrCat(where, ": alone engine: ", error));
    return report;
  }
  alone->Start();
  for (size_t i = 0; i < round.requests.size(); ++i) {
    const std::shared_ptr<engine::CollectingSink>& sink = driver.sinks()[i];
    if (sink == nullptr) continue;  // refused
    ++report.requests;
    const CollectedOutput got = sink->Wait();
    auto reference = std::make_shared<engine::CollectingSink>();
    auto submitted = alone->Submit(round.requests[i].request, reference);
    if (!submitted.ok()) {
      report.failures.push_back(
          absl::StrCat(where, ": request ", i, " alone: ", submitted.status().ToString()));
      continue;
    }
    const CollectedOutput want = reference->Wait();
    report.forks += static_cast<int64_t>(got.samples.size()) - 1;
    for (size_t k = 0; k < want.samples.size(); ++k) {
      const std::string who = absl::StrCat(where, ": request ", i, " sample ", k);
      if (k >= got.samples.size()) {
        // Aborted or ended before its prompt was computed: the samples were never forked.
        if (got.finish_reason == FinishReason::kAbort) {
          ++report.aborted;
        } else if (got.finish_reason == FinishReason::kError &&
                   got.error.code() == absl::StatusCode::kResourceExhausted) {
          ++report.ended;
        } else {
          report.failures.push_back(absl::StrCat(who, ": missing"));
        }
        continue;
      }
      Compare(who, got.samples[k], want.samples[k], got.error, &report);
    }
  }
  alone->Stop();
  return report;
}

}  // namespace pagoda::difftest
