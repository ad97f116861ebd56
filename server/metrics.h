// Prometheus metrics of the daemon, rendered in the text exposition format. Names follow
// vLLM's (prefix "pagoda:" instead of "vllm:") where vLLM has one. Request, token and latency
// families carry a `tenant` label (kAnonymousTenantLabel for the anonymous tenant); the
// engine-wide gauges stay unlabeled (they are what load balancers and autoscalers read).
// docs/API.md lists every family.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "common/mutex.h"
#include "engine/engine.h"
#include "server/histogram.h"

namespace pagoda::server {

// The `tenant` label value of the anonymous tenant (engine tenant name "").
inline constexpr char kAnonymousTenantLabel[] = "anonymous";
// The `tenant` label value of engine tenant `name`.
absl::string_view TenantLabel(absl::string_view name);

// A counter split by one label (besides the tenant). Thread-safe.
class LabeledCounter {
 public:
  void Inc(const std::string& value, int64_t n = 1);
  // The count for `value`; 0 when never incremented.
  int64_t Get(const std::string& value) const;
  // Appends one sample per value, labelled `prefix_labels` then `label`.
  void AppendSamples(absl::string_view name, absl::string_view prefix_labels,
                     absl::string_view label, std::string* out) const;

 private:
  mutable Mutex mu_;
  std::map<std::string, int64_t> values_ ABSL_GUARDED_BY(mu_);
};

// What the server counts for one tenant. Every member is thread-safe.
struct TenantMetrics {
  TenantMetrics();

  Histogram time_to_first_token;
  Histogram inter_token_latency;
  Histogram e2e_request_latency;
  Histogram request_queue_time;
  std::atomic<int64_t> prompt_tokens{0};
  std::atomic<int64_t> generation_tokens{0};
  std::atomic<int64_t> requests_cancelled{0};  // client cancel, disconnect or deadline
  // Aborted because the client left more than max_unsent_bytes_per_stream unread.
  std::atomic<int64_t> requests_unsent_limit{0};
  // CPU time spent preparing its requests: the HTTP door's preparation jobs
  // (HttpContext::Offload), gRPC's parse-and-submit (GenerationCall::AddPreparationCpu).
  std::atomic<int64_t> preparation_cpu_us{0};
  LabeledCounter request_success;  // by finish reason
  LabeledCounter request_failure;  // rejected or failed, by gRPC code name
};

struct ServerMetrics {
 public:
  // `block_size`: KV block size in tokens, reported in pagoda:cache_config_info. The
  // anonymous tenant's series exist from the start (at 0), so counters never appear mid-way.
  explicit ServerMetrics(int32_t block_size = 0);

  // The metrics of engine tenant `tenant` ("" = anonymous), created (at 0) on first use;
  // call it when tenants are configured so their series start at 0. The reference stays
  // valid as long as this object.
  TenantMetrics& ForTenant(absl::string_view tenant);
  // The whole exposition, engine gauges (and per-tenant engine gauges) included.
  std::string Render(const engine::EngineStats& stats) const;

 private:
  // Appends the per-tenant request families (counters and histograms).
  void AppendTenantFamilies(std::string* out) const;

  const int32_t block_size_;
  mutable Mutex mu_;
  // Keyed by label value; entries are never removed (tenant names are bounded by the
  // tenants file, so the label's cardinality is too).
  std::map<std::string, std::unique_ptr<TenantMetrics>> tenants_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pagoda::server
