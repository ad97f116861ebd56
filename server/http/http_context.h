// What every connection of one HTTP server shares: the engine, the tenants, metrics, the
// served model's name, health, the server's routes and limits, and the registry of
// generations in flight (for drain and shutdown).
#pragma once

#include <atomic>
#include <boost/asio/thread_pool.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "chat/reasoning.h"
#include "common/mutex.h"
#include "engine/engine.h"
#include "server/http/generation_link.h"
#include "server/metrics.h"
#include "server/stream_limits.h"
#include "server/tenant_registry.h"

namespace pagoda::server::http {

// Which requests a server answers.
enum class RouteSet {
  // The OpenAI-compatible door (--http-port): /v1/..., /apply-template, /tokenize,
  // /detokenize, /health (JSON), /metrics; CORS with cors_allow_origins. Needs every HttpDeps
  // field.
  kOpenAi,
  // The probe port (--metrics-port): GET /health (200 "SERVING\n" / 503 "NOT_SERVING\n")
  // and GET /metrics only, anything else 404. Needs only render_metrics and serving.
  kProbes,
};

// How chat outputs' reasoning is parsed (--reasoning-parser, --reasoning-budget).
struct ReasoningOptions {
  std::optional<chat::ReasoningFormat> format;  // unset: outputs are not split
  std::optional<int32_t> budget;                // a request's default reasoning budget
};

// The parts of the daemon the server serves (all outlive it; kProbes needs the last two).
struct HttpDeps {
  engine::Engine* engine = nullptr;
  // Where generations are submitted and aborted; null = `engine`. A seam for tests that
  // script the engine's outputs (tests/door_parity_test.cc), as gRPC's StreamDeps has.
  engine::EngineClient* client = nullptr;
  const TenantRegistry* tenants = nullptr;
  ServerMetrics* metrics = nullptr;
  std::string model_name;
  std::function<std::string()> render_metrics;  // the Prometheus exposition
  std::function<bool()> serving;                // health: true = SERVING
  ReasoningOptions reasoning;
};

// What every connection of one server obeys.
struct SessionOptions {
  RouteSet routes = RouteSet::kOpenAi;
  // Reading a request (its header and body) may take this long; an idle peer is closed then.
  absl::Duration idle_timeout = absl::Seconds(60);
  // Output bytes of a generation not yet taken by the client (held in the server, queued or
  // in flight, and in the socket's send queue); beyond it the request is aborted and the
  // connection closed (--max-unsent-bytes-per-stream). 0 = no limit.
  int64_t max_unsent_bytes = kDefaultMaxUnsentBytesPerStream;
  // Origins whose browsers may call the OpenAI door (--cors-allow-origin; "*" = any, only
  // when given explicitly). Empty = no CORS headers, and OPTIONS is refused (405).
  std::vector<std::string> cors_allow_origins;
};

class HttpContext {
 public:
  HttpContext(HttpDeps deps, SessionOptions options) : deps_(std::move(deps)), options_(options) {}

  const HttpDeps& deps() const { return deps_; }
  // deps().client, else the engine.
  engine::EngineClient& client() const {
    return deps_.client != nullptr ? *deps_.client : *deps_.engine;
  }
  const SessionOptions& options() const { return options_; }
  int64_t created() const { return created_; }
  bool draining() const { return draining_.load(); }
  void set_draining() { draining_.store(true); }

  // The preparation threads (JSON parsing, chat templates, tokenizing: never on the event
  // loop); set once by the server before it accepts connections.
  void set_workers(boost::asio::thread_pool* workers) { workers_ = workers; }
  // Runs `job` on the preparation threads for engine tenant `tenant`, its CPU time counted
  // in the tenant's metrics (preparation_cpu_us). Refused (and `job` dropped) when
  // kMaxPendingJobs are queued or running already (Unavailable "server busy: ..."), or
  // kMaxPendingJobsPerTenant of them are the tenant's (ResourceExhausted, naming it): one
  // tenant never holds the whole queue. An exception `job` lets out is logged and dropped;
  // jobs answer their own failures.
  absl::Status Offload(const std::string& tenant, std::function<void()> job);
  static constexpr int32_t kMaxPendingJobs = 64;
  static constexpr int32_t kMaxPendingJobsPerTenant = kMaxPendingJobs / 2;

  // Records a generation in flight; returns its registration id, or nullopt after CutAll
  // (the server is going away: the caller aborts what it submitted).
  std::optional<uint64_t> Register(std::shared_ptr<GenerationLink> link,
                                   engine::RequestHandle handle);
  // Its response is complete (or its client gone and the engine told).
  void Unregister(uint64_t id);
  // Waits until no generation is in flight or `deadline` passes; true when none is left.
  bool WaitIdle(absl::Time deadline);
  // Detaches every generation still registered from its connection and aborts it in the
  // engine (their blocks are freed within a step); returns how many. Later registrations
  // are refused.
  int64_t CutAll();
  int64_t in_flight() const;

 private:
  struct Active {
    std::shared_ptr<GenerationLink> link;
    engine::RequestHandle handle;
  };
  const HttpDeps deps_;
  const SessionOptions options_;
  const int64_t created_ = absl::ToUnixSeconds(absl::Now());
  std::atomic<bool> draining_{false};
  boost::asio::thread_pool* workers_ = nullptr;
  Mutex jobs_mu_;
  int32_t pending_jobs_ ABSL_GUARDED_BY(jobs_mu_) = 0;
  std::map<std::string, int32_t> pending_by_tenant_ ABSL_GUARDED_BY(jobs_mu_);
  mutable Mutex mu_;
  bool cut_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Active> active_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pagoda::server::http
