#include "server/server.h"

#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/generation_service.h"
#include "server/metrics.h"
#include "spdlog/spdlog.h"

namespace pagoda::server {

Server::Server(const ServerOptions& options, engine::Engine* engine)
    : options_(options), engine_(engine), metrics_(std::make_unique<ServerMetrics>()) {}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options,
                                                      engine::Engine* engine) {
  std::unique_ptr<Server> server(new Server(options, engine));
  server->service_ =
      std::make_unique<GenerationService>(engine, server->metrics_.get(), options.model_name);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  const std::string address = absl::StrCat(options.host, ":", options.port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &server->port_);
  builder.RegisterService(server->service_.get());
  builder.SetMaxReceiveMessageSize(64 << 20);
  server->grpc_server_ = builder.BuildAndStart();
  if (server->grpc_server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  if (options.metrics_port >= 0) {
    if (absl::Status s = server->StartMetricsEndpoint(); !s.ok()) {
      server->grpc_server_->Shutdown();
      return s;
    }
  }
  server->SetServing(true);
  server->watchdog_ = std::thread([s = server.get()] { s->WatchdogLoop(); });
  spdlog::info("serving on {}:{} (metrics on port {})", options.host, server->port_,
               server->metrics_port_);
  return server;
}

absl::Status Server::StartMetricsEndpoint() {
  http_ = std::make_unique<httplib::Server>();
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(RenderMetrics(), "text/plain; version=0.0.4");
  });
  http_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    MutexLock lock(&mu_);
    res.status = serving_ ? 200 : 503;
    res.set_content(serving_ ? "SERVING\n" : "NOT_SERVING\n", "text/plain");
  });
  if (options_.metrics_port == 0) {
    metrics_port_ = http_->bind_to_any_port(options_.host);
  } else {
    metrics_port_ =
        http_->bind_to_port(options_.host, options_.metrics_port) ? options_.metrics_port : -1;
  }
  if (metrics_port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for metrics on ", options_.host, ":", options_.metrics_port));
  }
  http_thread_ = std::thread([this] { http_->listen_after_bind(); });
  return absl::OkStatus();
}

std::string Server::RenderMetrics() const { return metrics_->Render(engine_->Stats()); }

void Server::SetServing(bool serving) {
  // Under mu_ so that a watchdog update cannot land after (and undo) the drain's.
  MutexLock lock(&mu_);
  if (draining_) serving = false;  // a drain is final
  if (serving_ == serving) return;
  serving_ = serving;
  grpc_server_->GetHealthCheckService()->SetServingStatus(serving);
  spdlog::info("health: {}", serving ? "SERVING" : "NOT_SERVING");
}

void Server::WatchdogLoop() {
  int64_t last_steps = -1;
  absl::Time progress_time = absl::Now();
  while (true) {
    {
      MutexLock lock(&mu_);
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
      if (mu_.AwaitWithTimeout(stopping, absl::Milliseconds(250))) return;
    }
    const engine::EngineStats stats = engine_->Stats();
    const bool busy = stats.num_running + stats.num_waiting > 0;
    if (!busy || stats.num_steps != last_steps) {
      last_steps = stats.num_steps;
      progress_time = absl::Now();
    }
    const bool stalled = busy && absl::Now() - progress_time > options_.stall_timeout;
    if (stalled)
      spdlog::warn("engine made no step for {}s with work queued",
                   absl::ToDoubleSeconds(absl::Now() - progress_time));
    SetServing(!stalled);
  }
}

int64_t Server::Drain() {
  {
    MutexLock lock(&mu_);
    draining_ = true;
  }
  SetServing(false);
  spdlog::info("draining: stop listening, GOAWAY to clients; {} streams in flight",
               service_->active_streams());
  const absl::Time deadline = absl::Now() + options_.drain_timeout;
  service_->SetDrainDeadline(deadline);
  // Returns when every call is done, or at the deadline after cancelling the calls still
  // open; meanwhile new connections are refused and new streams on existing ones are
  // refused by the transport, so they never reach the service.
  grpc_server_->Shutdown(absl::ToChronoTime(deadline));
  const int64_t cut = service_->streams_cut();
  if (cut > 0) {
    spdlog::warn("drain timeout ({}) passed: cut off {} streams",
                 absl::FormatDuration(options_.drain_timeout), cut);
  }
  return cut;
}

int64_t Server::generate_calls() const { return service_->generate_calls(); }

Server::~Server() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (watchdog_.joinable()) watchdog_.join();
  if (http_) http_->stop();
  if (http_thread_.joinable()) http_thread_.join();
  if (grpc_server_) {
    grpc_server_->Shutdown(absl::ToChronoTime(absl::Now()));
    grpc_server_->Wait();
  }
}

}  // namespace pagoda::server
