// What every connection of the HTTP front door shares: the engine, the tenants, metrics,
// the served model's name, health, and the registry of generations in flight (for drain
// and shutdown).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "common/mutex.h"
#include "engine/engine.h"
#include "server/http/generation_link.h"
#include "server/metrics.h"
#include "server/tenant_registry.h"

namespace pagoda::server::http {

// The parts of the daemon the HTTP door serves (all outlive it).
struct HttpDeps {
  engine::Engine* engine = nullptr;
  const TenantRegistry* tenants = nullptr;
  ServerMetrics* metrics = nullptr;
  std::string model_name;
  std::function<std::string()> render_metrics;  // the Prometheus exposition
  std::function<bool()> serving;                // health: true = SERVING
};

class HttpContext {
 public:
  explicit HttpContext(HttpDeps deps) : deps_(std::move(deps)) {}

  const HttpDeps& deps() const { return deps_; }
  int64_t created() const { return created_; }
  bool draining() const { return draining_.load(); }
  void set_draining() { draining_.store(true); }

  // Records a generation in flight; returns its registration id.
  uint64_t Register(std::shared_ptr<GenerationLink> link, engine::RequestHandle handle);
  // Its response is complete (or its client gone and the engine told).
  void Unregister(uint64_t id);
  // Waits until no generation is in flight or `deadline` passes; true when none is left.
  bool WaitIdle(absl::Time deadline);
  // Detaches every generation still registered from its connection and aborts it in the
  // engine (their blocks are freed within a step); returns how many.
  int64_t CutAll();
  int64_t in_flight() const;

 private:
  struct Active {
    std::shared_ptr<GenerationLink> link;
    engine::RequestHandle handle;
  };
  const HttpDeps deps_;
  const int64_t created_ = absl::ToUnixSeconds(absl::Now());
  std::atomic<bool> draining_{false};
  mutable Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Active> active_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pagoda::server::http
