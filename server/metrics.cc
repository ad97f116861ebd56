#include "server/metrics.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/exposition.h"

namespace pagoda::server {
namespace {

using TenantList = std::vector<std::pair<std::string, const TenantMetrics*>>;

void AppendScalar(absl::string_view name, absl::string_view help, absl::string_view type, double v,
                  std::string* out) {
  AppendFamilyHeader(name, help, type, out);
  AppendSample(name, "", v, out);
}

// One engine gauge per tenant in `stats.tenants`.
template <typename Field>
void AppendTenantGauge(absl::string_view name, absl::string_view help, absl::string_view type,
                       const engine::EngineStats& stats, Field field, std::string* out) {
  AppendFamilyHeader(name, help, type, out);
  for (const engine::TenantStats& t : stats.tenants) {
    AppendSample(name, LabelPair("tenant", TenantLabel(t.name)), static_cast<double>(field(t)),
                 out);
  }
}

template <typename Field>
void AppendTenantCounter(absl::string_view name, absl::string_view help, const TenantList& tenants,
                         Field field, std::string* out) {
  AppendFamilyHeader(name, help, "counter", out);
  for (const auto& [label, m] : tenants) {
    AppendSample(name, LabelPair("tenant", label), static_cast<double>(field(*m).load()), out);
  }
}

template <typename Field>
void AppendTenantHistogram(absl::string_view name, absl::string_view help,
                           const TenantList& tenants, Field field, std::string* out) {
  AppendFamilyHeader(name, help, "histogram", out);
  for (const auto& [label, m] : tenants) {
    field(*m).AppendSamples(name, LabelPair("tenant", label), out);
  }
}

template <typename Field>
void AppendTenantLabeledCounter(absl::string_view name, absl::string_view help,
                                absl::string_view label, const TenantList& tenants, Field field,
                                std::string* out) {
  AppendFamilyHeader(name, help, "counter", out);
  for (const auto& [tenant, m] : tenants) {
    field(*m).AppendSamples(name, LabelPair("tenant", tenant), label, out);
  }
}

}  // namespace

absl::string_view TenantLabel(absl::string_view name) {
  return name.empty() ? absl::string_view(kAnonymousTenantLabel) : name;
}

void LabeledCounter::Inc(const std::string& value, int64_t n) {
  MutexLock lock(&mu_);
  values_[value] += n;
}

int64_t LabeledCounter::Get(const std::string& value) const {
  MutexLock lock(&mu_);
  auto it = values_.find(value);
  return it == values_.end() ? 0 : it->second;
}

void LabeledCounter::AppendSamples(absl::string_view name, absl::string_view prefix_labels,
                                   absl::string_view label, std::string* out) const {
  MutexLock lock(&mu_);
  for (const auto& [value, n] : values_) {
    AppendSample(name, JoinLabels(prefix_labels, LabelPair(label, value)), static_cast<double>(n),
                 out);
  }
}

TenantMetrics::TenantMetrics()
    : time_to_first_token({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                           2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}),
      inter_token_latency({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4,
                           0.5, 0.75, 1.0, 2.5, 5.0, 10.0}),
      e2e_request_latency({0.01, 0.05, 0.1,  0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,
                           5.0,  10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0}),
      request_queue_time({0.001, 0.005, 0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0,
                          10.0, 20.0, 30.0, 60.0, 120.0}) {}

ServerMetrics::ServerMetrics(int32_t block_size) : block_size_(block_size) { ForTenant(""); }

TenantMetrics& ServerMetrics::ForTenant(absl::string_view tenant) {
  const absl::string_view label = TenantLabel(tenant);
  MutexLock lock(&mu_);
  auto it = tenants_.find(std::string(label));
  if (it == tenants_.end()) {
    it = tenants_.emplace(std::string(label), std::make_unique<TenantMetrics>()).first;
  }
  return *it->second;
}

void ServerMetrics::AppendTenantFamilies(std::string* out) const {
  TenantList tenants;
  {
    MutexLock lock(&mu_);
    for (const auto& [label, m] : tenants_) tenants.emplace_back(label, m.get());
  }
  AppendTenantCounter(
      "pagoda:prompt_tokens_total", "Prompt tokens of accepted requests.", tenants,
      [](const TenantMetrics& m) -> auto& { return m.prompt_tokens; }, out);
  AppendTenantCounter(
      "pagoda:generation_tokens_total", "Tokens generated.", tenants,
      [](const TenantMetrics& m) -> auto& { return m.generation_tokens; }, out);
  AppendTenantCounter(
      "pagoda:request_cancelled_total",
      "Requests aborted because the client cancelled, disconnected or hit its deadline.", tenants,
      [](const TenantMetrics& m) -> auto& { return m.requests_cancelled; }, out);
  AppendTenantCounter(
      "pagoda:request_unsent_limit_total",
      "Requests aborted (RESOURCE_EXHAUSTED) because the client left more than "
      "--max-unsent-bytes-per-stream of output unread.",
      tenants, [](const TenantMetrics& m) -> auto& { return m.requests_unsent_limit; }, out);
  AppendTenantCounter(
      "pagoda:tenant_preparation_cpu_microseconds_total",
      "CPU time spent preparing the tenant's requests before the engine runs them (body "
      "parsing, grammars' start and first mask, templates, tokenizing): the HTTP door's "
      "preparation threads and gRPC's callback threads.",
      tenants, [](const TenantMetrics& m) -> auto& { return m.preparation_cpu_us; }, out);
  AppendTenantLabeledCounter(
      "pagoda:request_success_total", "Requests finished, by finish reason.", "finished_reason",
      tenants, [](const TenantMetrics& m) -> auto& { return m.request_success; }, out);
  AppendTenantLabeledCounter(
      "pagoda:request_failure_total", "Requests rejected or failed, by gRPC status code.", "code",
      tenants, [](const TenantMetrics& m) -> auto& { return m.request_failure; }, out);
  AppendTenantHistogram(
      "pagoda:time_to_first_token_seconds", "Arrival to first generated token.", tenants,
      [](const TenantMetrics& m) -> auto& { return m.time_to_first_token; }, out);
  AppendTenantHistogram(
      "pagoda:inter_token_latency_seconds", "Time between consecutive generated tokens.", tenants,
      [](const TenantMetrics& m) -> auto& { return m.inter_token_latency; }, out);
  AppendTenantHistogram(
      "pagoda:e2e_request_latency_seconds", "Arrival to last token.", tenants,
      [](const TenantMetrics& m) -> auto& { return m.e2e_request_latency; }, out);
  AppendTenantHistogram(
      "pagoda:request_queue_time_seconds", "Arrival to first scheduled step.", tenants,
      [](const TenantMetrics& m) -> auto& { return m.request_queue_time; }, out);
}

std::string ServerMetrics::Render(const engine::EngineStats& s) const {
  std::string out;
  // The Gateway API Inference Extension's model-server gauges (TotalQueuedRequests,
  // TotalRunningRequests, KVCacheUtilization), with vLLM's semantics: see docs/API.md.
  AppendScalar("pagoda:num_requests_running", "Requests running in the engine.", "gauge",
               s.num_running, &out);
  AppendScalar("pagoda:num_requests_waiting", "Requests waiting to run (preempted included).",
               "gauge", s.num_waiting, &out);
  AppendScalar("pagoda:kv_cache_usage_perc", "Fraction of KV-cache blocks in use (1 = full).",
               "gauge", s.kv_usage, &out);
  AppendFamilyHeader("pagoda:cache_config_info", "KV-cache configuration (value is always 1).",
                     "gauge", &out);
  AppendSample("pagoda:cache_config_info",
               JoinLabels(LabelPair("block_size", absl::StrCat(block_size_)),
                          LabelPair("num_gpu_blocks", absl::StrCat(s.num_blocks))),
               1, &out);
  AppendScalar("pagoda:kv_cache_total_blocks", "KV-cache blocks in the pool.", "gauge",
               s.num_blocks, &out);
  AppendScalar("pagoda:kv_cache_free_blocks", "KV-cache blocks free.", "gauge", s.num_free_blocks,
               &out);
  AppendScalar("pagoda:num_preemptions_total", "Sequences preempted for lack of KV blocks.",
               "counter", static_cast<double>(s.num_preemptions), &out);
  AppendScalar("pagoda:num_swap_outs_total",
               "Preemptions that swapped the sequence's KV blocks out to host memory.", "counter",
               static_cast<double>(s.num_swap_outs), &out);
  AppendScalar("pagoda:num_requests_swapped", "Requests waiting with their KV swapped out.",
               "gauge", s.num_swapped, &out);
  AppendScalar("pagoda:swap_space_free_blocks",
               "Host swap-space blocks free (of pagoda:swap_space_total_blocks).", "gauge",
               s.num_free_swap_blocks, &out);
  AppendScalar("pagoda:swap_space_total_blocks",
               "Host swap-space blocks (0: preemption recomputes).", "gauge", s.num_swap_blocks,
               &out);
  AppendScalar("pagoda:prefix_cache_queries_total",
               "Tokens looked up in the prefix cache when requests were admitted.", "counter",
               static_cast<double>(s.prefix_cache_queries), &out);
  AppendScalar("pagoda:prefix_cache_hits_total",
               "Tokens found in the prefix cache when requests were admitted.", "counter",
               static_cast<double>(s.prefix_cache_hits), &out);
  AppendScalar("pagoda:prefix_cache_evictions_total", "Cached KV blocks evicted to make room.",
               "counter", static_cast<double>(s.prefix_cache_evictions), &out);
  AppendScalar("pagoda:engine_steps_total", "Engine steps run.", "counter",
               static_cast<double>(s.num_steps), &out);
  AppendScalar("pagoda:engine_requests_submitted_total",
               "Requests the engine accepted (rejected requests never reach it).", "counter",
               static_cast<double>(s.num_submitted), &out);
  AppendTenantGauge(
      "pagoda:tenant_num_requests_running", "Requests running, per tenant.", "gauge", s,
      [](const engine::TenantStats& t) { return t.num_running; }, &out);
  AppendTenantGauge(
      "pagoda:tenant_num_requests_waiting", "Requests waiting, per tenant.", "gauge", s,
      [](const engine::TenantStats& t) { return t.num_waiting; }, &out);
  AppendTenantGauge(
      "pagoda:tenant_kv_cache_blocks", "KV-cache blocks held, per tenant.", "gauge", s,
      [](const engine::TenantStats& t) { return t.num_blocks_held; }, &out);
  AppendTenantGauge(
      "pagoda:tenant_served_tokens_total",
      "Prompt and output tokens the engine computed, per tenant.", "counter", s,
      [](const engine::TenantStats& t) { return t.served_tokens; }, &out);
  AppendTenantGauge(
      "pagoda:tenant_grammar_steps_total",
      "Grammar expansion steps of constrained requests (structured outputs, forced tool "
      "calls), per tenant: at intake and on the engine thread.",
      "counter", s, [](const engine::TenantStats& t) { return t.grammar_steps; }, &out);
  AppendTenantFamilies(&out);
  return out;
}

}  // namespace pagoda::server
