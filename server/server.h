// The daemon around one engine: the gRPC server (Generation service, grpc.health.v1,
// reflection), the Prometheus endpoint, a health watchdog and graceful drain.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "engine/engine.h"
#include "server/stream_limits.h"
#include "server/tenant_registry.h"

namespace grpc {
class Server;
}

namespace pagoda::server {

class GenerationService;
struct ServerMetrics;
namespace http {
class HttpServer;
}

struct ServerOptions {
  std::string host = "0.0.0.0";
  int port = 50051;  // 0 = pick a free port
  // /metrics and /health (an event-loop server like the HTTP door's, those two routes only):
  // 0 = pick a free port; -1 = no metrics endpoint.
  int metrics_port = 9090;
  std::string model_name;
  absl::Duration drain_timeout = absl::Seconds(30);
  // Health reads NOT_SERVING when the engine has work but made no step for this long.
  absl::Duration stall_timeout = absl::Seconds(30);
  // Who may call (--tenants, --api-key); no tenants = open, no key required.
  TenantTable tenants;
  // TLS: PEM files of the server's certificate chain and key (both or neither); with
  // tls_client_ca, clients must present a certificate that CA signed (mTLS).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // The OpenAI-compatible HTTP door (docs/API.md): -1 = off, 0 = pick a free port.
  int http_port = -1;
  int http_threads = 2;          // its event-loop threads
  int http_prepare_threads = 2;  // its preparation threads (body parsing, templates)
  // A generation whose client leaves more output than this unread (queued or in flight) is
  // aborted and counted: gRPC streams end RESOURCE_EXHAUSTED naming the limit, HTTP
  // connections are closed (429 when no header was sent yet). 0 = no limit.
  int64_t max_unsent_bytes_per_stream = kDefaultMaxUnsentBytesPerStream;
  // Origins allowed to call the HTTP door from a browser (CORS); empty = none.
  std::vector<std::string> cors_allow_origins;
  // How chat outputs' reasoning is split out (chat/reasoning.h): "auto" (from the chat
  // template), "none", or a parser's name; InvalidArgument at Start for an unknown one.
  std::string reasoning_parser = "auto";
  // The most reasoning tokens of a chat request that sets no thinking_token_budget; -1: no
  // limit.
  int32_t reasoning_budget = -1;
  // The clock the tenants' token buckets refill by (tests freeze it).
  TokenBucket::Clock rate_clock = absl::Now;
};

class Server {
 public:
  // Binds and starts serving `engine` (which must outlive the server). InvalidArgument for
  // unreadable TLS files or tenants the engine rejects; Unavailable when it cannot listen.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options,
                                                       engine::Engine* engine);
  ~Server();

  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  // The HTTP door's port; -1 when off.
  int http_port() const { return http_port_; }
  // Health NOT_SERVING (also on /health, until the server is destroyed), then gRPC's
  // graceful shutdown: stop listening and send HTTP/2 GOAWAY, so new streams fail at the
  // transport (a load balancer retries them elsewhere), while in-flight streams run to
  // completion for up to drain_timeout; those still open then are cancelled. Returns
  // how many were cut off. Call once.
  int64_t Drain();
  // Generate calls that reached the service (a call refused at the transport never does).
  int64_t generate_calls() const;
  // Replaces the tenants (SIGHUP): the engine's terms first, then the keys and rate limits.
  // On error (the engine rejects the table) the old tenants stay. Streams are untouched.
  absl::Status ReloadTenants(TenantTable tenants);
  // The Prometheus exposition (what /metrics serves).
  std::string RenderMetrics() const;

 private:
  Server(const ServerOptions& options, engine::Engine* engine);
  absl::Status StartMetricsEndpoint();
  absl::Status StartOpenAiHttp();
  void WatchdogLoop();
  void SetServing(bool serving);

  ServerOptions options_;
  engine::Engine* engine_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<TenantRegistry> tenants_;
  std::unique_ptr<GenerationService> service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<http::HttpServer> metrics_http_;  // /metrics and /health, when on
  std::unique_ptr<http::HttpServer> openai_http_;   // the OpenAI-compatible door, when on
  std::thread watchdog_;
  int port_ = 0;
  int metrics_port_ = -1;
  int http_port_ = -1;

  Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pagoda::server
