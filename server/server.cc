#include "server/server.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/generation_service.h"
#include "server/http/http_server.h"
#include "server/metrics.h"
#include "spdlog/spdlog.h"

namespace pagoda::server {

namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Plaintext, TLS, or TLS that requires and verifies a client certificate.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeCredentials(
    const ServerOptions& options) {
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (options.tls_cert.empty()) {
    if (!options.tls_client_ca.empty()) {
      return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
    }
    return grpc::InsecureServerCredentials();
  }
  grpc::SslServerCredentialsOptions ssl;
  absl::StatusOr<std::string> cert = ReadPem(options.tls_cert, "--tls-cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(options.tls_key, "--tls-key");
  if (!key.ok()) return key.status();
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!options.tls_client_ca.empty()) {
    absl::StatusOr<std::string> ca = ReadPem(options.tls_client_ca, "--tls-client-ca");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

Server::Server(const ServerOptions& options, engine::Engine* engine)
    : options_(options),
      engine_(engine),
      metrics_(std::make_unique<ServerMetrics>(engine->config().block_size)),
      tenants_(std::make_unique<TenantRegistry>(options.tenants, options.rate_clock)) {}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options,
                                                      engine::Engine* engine) {
  std::unique_ptr<Server> server(new Server(options, engine));
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = MakeCredentials(options);
  if (!credentials.ok()) return credentials.status();
  if (absl::Status s = engine->SetTenants(server->tenants_->EngineTenants()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("tenants: ", s.message()));
  }
  server->service_ = std::make_unique<GenerationService>(engine, server->metrics_.get(),
                                                         options.model_name, server->tenants_.get(),
                                                         options.max_unsent_bytes_per_stream);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  const std::string address = absl::StrCat(options.host, ":", options.port);
  builder.AddListeningPort(address, *credentials, &server->port_);
  builder.RegisterService(server->service_.get());
  builder.SetMaxReceiveMessageSize(64 << 20);
  // A second daemon on the same port must fail to start, not share (and take) the traffic.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
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
  if (options.http_port >= 0) {
    if (absl::Status s = server->StartOpenAiHttp(); !s.ok()) {
      server->grpc_server_->Shutdown();
      return s;
    }
  }
  server->SetServing(true);
  server->watchdog_ = std::thread([s = server.get()] { s->WatchdogLoop(); });
  spdlog::info("serving on {}:{} (metrics on port {})", options.host, server->port_,
               server->metrics_port_);
  spdlog::info("{}, {}",
               server->tenants_->open()
                   ? std::string("open: no API key required")
                   : absl::StrCat(options.tenants.tenants.size(), " tenant(s), API key required"),
               options.tls_cert.empty()        ? "plaintext"
               : options.tls_client_ca.empty() ? "TLS"
                                               : "mutual TLS");
  return server;
}

absl::Status Server::StartMetricsEndpoint() {
  // The same event-loop server as the HTTP door, with only the probe routes: an idle peer
  // holds a socket and nothing else, so no number of them delays /health or /metrics.
  absl::StatusOr<std::unique_ptr<http::HttpServer>> server =
      http::HttpServer::Start({.host = options_.host,
                               .port = options_.metrics_port,
                               .num_threads = 1,
                               .session = {.routes = http::RouteSet::kProbes}},
                              {.render_metrics = [this] { return RenderMetrics(); },
                               .serving =
                                   [this] {
                                     MutexLock lock(&mu_);
                                     return serving_;
                                   }});
  if (!server.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot listen for metrics on ", options_.host, ":",
                                               options_.metrics_port, ": ",
                                               server.status().message()));
  }
  metrics_http_ = *std::move(server);
  metrics_port_ = metrics_http_->port();
  return absl::OkStatus();
}

absl::Status Server::StartOpenAiHttp() {
  http::ReasoningOptions reasoning;
  if (options_.reasoning_parser == "auto") {
    reasoning.format = chat::DetectReasoningFormat(engine_->chat_template_source());
  } else {
    absl::StatusOr<std::optional<chat::ReasoningFormat>> named =
        chat::ReasoningFormatNamed(options_.reasoning_parser);
    if (!named.ok()) return named.status();
    reasoning.format = *std::move(named);
  }
  if (options_.reasoning_budget >= 0) reasoning.budget = options_.reasoning_budget;
  if (reasoning.format.has_value()) {
    spdlog::info("reasoning parser: {} ({} ... {})", reasoning.format->name, reasoning.format->open,
                 reasoning.format->close);
  }
  http::HttpDeps deps{.engine = engine_,
                      .tenants = tenants_.get(),
                      .metrics = metrics_.get(),
                      .model_name = options_.model_name,
                      .render_metrics = [this] { return RenderMetrics(); },
                      .serving =
                          [this] {
                            MutexLock lock(&mu_);
                            return serving_;
                          },
                      .reasoning = std::move(reasoning)};
  absl::StatusOr<std::unique_ptr<http::HttpServer>> server =
      http::HttpServer::Start({.host = options_.host,
                               .port = options_.http_port,
                               .num_threads = options_.http_threads,
                               .num_prepare_threads = options_.http_prepare_threads,
                               .session = {.max_unsent_bytes = options_.max_unsent_bytes_per_stream,
                                           .cors_allow_origins = options_.cors_allow_origins}},
                              std::move(deps));
  if (!server.ok()) return server.status();
  openai_http_ = *std::move(server);
  http_port_ = openai_http_->port();
  spdlog::info("OpenAI-compatible HTTP on {}:{}", options_.host, http_port_);
  return absl::OkStatus();
}

absl::Status Server::ReloadTenants(TenantTable tenants) {
  std::vector<engine::TenantConfig> engine_part;
  for (const Tenant& t : tenants.tenants) {
    if (!t.engine.name.empty()) engine_part.push_back(t.engine);
  }
  if (absl::Status s = engine_->SetTenants(std::move(engine_part)); !s.ok()) return s;
  const size_t n = tenants.tenants.size();
  tenants_->Replace(std::move(tenants));
  spdlog::info("tenants reloaded: {} tenant(s)", n);
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
  bool stall_reported = false;
  absl::Time stall_logged = absl::InfinitePast();
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
    const absl::Time now = absl::Now();
    const bool stalled = busy && now - progress_time > options_.stall_timeout;
    // One line when a stall starts, one every kStallLogEvery while it lasts, one at its end
    // (not one per 250 ms poll).
    constexpr absl::Duration kStallLogEvery = absl::Seconds(30);
    if (stalled && (!stall_reported || now - stall_logged >= kStallLogEvery)) {
      spdlog::warn("engine made no step for {}s with work queued",
                   absl::ToDoubleSeconds(now - progress_time));
      stall_reported = true;
      stall_logged = now;
    } else if (!stalled && stall_reported) {
      spdlog::info("engine is making steps again");
      stall_reported = false;
    }
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
  if (openai_http_) openai_http_->StartDraining();
  // Returns when every call is done, or at the deadline after cancelling the calls still
  // open; meanwhile new connections are refused and new streams on existing ones are
  // refused by the transport, so they never reach the service.
  grpc_server_->Shutdown(absl::ToChronoTime(deadline));
  int64_t cut = service_->streams_cut();
  if (openai_http_) cut += openai_http_->Drain(deadline);
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
  openai_http_.reset();
  metrics_http_.reset();
  if (grpc_server_) {
    grpc_server_->Shutdown(absl::ToChronoTime(absl::Now()));
    grpc_server_->Wait();
  }
}

}  // namespace pagoda::server
