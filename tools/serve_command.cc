// `pagoda serve`: the gRPC daemon. SIGTERM or SIGINT drains it gracefully and exits 0
// (more of them during the drain change nothing); SIGHUP reloads the tenants file.
#include <pthread.h>

#include <csignal>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "kernels/backend.h"
#include "kernels/cpu_isa.h"
#include "model/make_model.h"
#include "server/server.h"
#include "spdlog/spdlog.h"
#include "tools/commands.h"
#include "tools/engine_flags.h"

namespace pagoda::tools {
namespace {

// What the shutdown may take beyond the drain timeout (stopping the servers and the engine).
constexpr absl::Duration kShutdownGrace = absl::Seconds(10);

struct ServeFlags {
  std::string host = "0.0.0.0";
  int32_t port = 50051;
  int32_t metrics_port = 9090;
  int32_t http_port = -1;
  int32_t http_threads = 2;
  int32_t http_prepare_threads = 2;
  int32_t max_queued_requests = EngineFlags::kDefaults.max_queued_requests;
  int64_t max_unsent_bytes_per_stream = server::kDefaultMaxUnsentBytesPerStream;
  absl::Duration drain_timeout = absl::Seconds(30);
  absl::Duration stall_timeout = absl::Seconds(30);
  std::string log_level = "info";
  std::string tenants_file;
  std::string api_key;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  std::string served_model_name;
  std::vector<std::string> cors_allow_origins;
  std::string reasoning_parser = "auto";
  int32_t reasoning_budget = -1;
  EngineFlags engine;
};

// The thread that takes SIGTERM, SIGINT and SIGHUP with sigwait (they are blocked there).
pthread_t g_signal_thread;

// Threads started before the signals were blocked (OpenBLAS starts its own while the
// library loads, before main) would take a process signal with its default action and kill
// the process; this handler, which only those threads can run, hands the signal on to the
// signal thread instead. pthread_kill is async-signal-safe.
extern "C" void ForwardSignal(int signal) { pthread_kill(g_signal_thread, signal); }

// Blocks `signals` in this thread (and every thread it starts) and routes them to it.
void TakeSignals(const sigset_t& signals) {
  g_signal_thread = pthread_self();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  struct sigaction action = {};
  action.sa_handler = ForwardSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaction(s, &action, nullptr);
}

// What clients see as the model's name: --served-model-name, else the file name without
// directories or ".gguf" (never the path on this machine).
std::string ServedModelName(const ServeFlags& flags) {
  if (!flags.served_model_name.empty()) return flags.served_model_name;
  const std::string& path = flags.engine.model;
  if (path.empty()) return model::kBuiltinModelName;
  const std::filesystem::path file(path);
  return (file.extension() == ".gguf" ? file.stem() : file.filename()).string();
}

// Adds a duration flag ("30s", "500ms", "1m", "inf") parsed into `*d`.
void AddDurationOption(CLI::App* cmd, const std::string& name, absl::Duration* d,
                       const std::string& description) {
  const CLI::Validator is_duration(
      [](std::string& s) -> std::string {
        absl::Duration unused;
        return absl::ParseDuration(s, &unused) ? "" : "not a duration like 30s or 500ms: " + s;
      },
      "");
  cmd->add_option_function<std::string>(
         name, [d](const std::string& s) { (void)absl::ParseDuration(s, d); }, description)
      ->check(is_duration)
      ->type_name("DURATION")
      ->default_str(absl::FormatDuration(*d));
}

// The tenants the flags describe: the --tenants file, the --api-key tenant, or none (open).
absl::StatusOr<server::TenantTable> TenantsFromFlags(const ServeFlags& flags) {
  if (!flags.tenants_file.empty()) return server::LoadTenantsFile(flags.tenants_file);
  if (!flags.api_key.empty()) return server::SingleKeyTable(flags.api_key);
  return server::TenantTable{};
}

// SIGHUP: re-reads the tenants file; a bad file keeps the tenants in force.
void ReloadTenants(const ServeFlags& flags, server::Server* server) {
  if (flags.tenants_file.empty()) {
    spdlog::info("SIGHUP: no --tenants file to reload");
    return;
  }
  absl::StatusOr<server::TenantTable> table = server::LoadTenantsFile(flags.tenants_file);
  absl::Status status = table.ok() ? server->ReloadTenants(*std::move(table)) : table.status();
  if (!status.ok()) {
    spdlog::error("SIGHUP: tenants not reloaded, the previous ones stay: {}",
                  std::string(status.message()));
  }
}

int RunServe(const ServeFlags& flags) {
  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  absl::StatusOr<server::TenantTable> tenants = TenantsFromFlags(flags);
  if (!tenants.ok()) {
    spdlog::error("{}", std::string(tenants.status().message()));
    return 1;
  }

  // Signals are taken synchronously by this thread alone: block them before any other
  // thread of ours starts, so those inherit the mask; earlier threads forward them here.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  TakeSignals(signals);

  engine::EngineConfig base;
  base.max_queued_requests = flags.max_queued_requests;
  auto engine = StartEngineFromFlags(flags.engine, base);
  if (!engine.ok()) {
    spdlog::error("cannot start the engine: {}", std::string(engine.status().message()));
    return 1;
  }
  spdlog::info("CPU kernels: {} (this CPU: {})", kernels::CpuIsaName(kernels::ActiveCpuIsa()),
               kernels::CpuIsaName(kernels::DetectedCpuIsa()));
  if (!kernels::CudaBuiltIn()) {  // serve's log only: generate's stdout is its output
    spdlog::info(
        "this build has no CUDA backend; for a GPU build: make serve PAGODA_CUDA=ON "
        "(needs nvcc)");
  }
  server::ServerOptions options{.host = flags.host,
                                .port = flags.port,
                                .metrics_port = flags.metrics_port,
                                .model_name = ServedModelName(flags),
                                .drain_timeout = flags.drain_timeout,
                                .stall_timeout = flags.stall_timeout,
                                .tenants = *std::move(tenants),
                                .tls_cert = flags.tls_cert,
                                .tls_key = flags.tls_key,
                                .tls_client_ca = flags.tls_client_ca,
                                .http_port = flags.http_port,
                                .http_threads = flags.http_threads,
                                .http_prepare_threads = flags.http_prepare_threads,
                                .max_unsent_bytes_per_stream = flags.max_unsent_bytes_per_stream,
                                .cors_allow_origins = flags.cors_allow_origins,
                                .reasoning_parser = flags.reasoning_parser,
                                .reasoning_budget = flags.reasoning_budget};
  auto server = server::Server::Start(options, engine->get());
  if (!server.ok()) {
    spdlog::error("cannot start the server: {}", std::string(server.status().message()));
    return 1;
  }
  int signal = 0;
  while (sigwait(&signals, &signal) == 0 && signal == SIGHUP) ReloadTenants(flags, server->get());
  spdlog::info("received {}: draining", signal == SIGTERM ? "SIGTERM" : "SIGINT");
  // The drain is bounded; so is the rest of the shutdown: should anything hold it past the
  // drain and a grace period (an engine step that never returns), the process exits anyway.
  std::thread([limit = flags.drain_timeout + kShutdownGrace] {
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(limit));
    spdlog::error("shutdown did not finish within {}: exiting", absl::FormatDuration(limit));
    spdlog::shutdown();
    std::_Exit(1);
  }).detach();
  // Signals that come during the drain stay pending here (blocked, never delivered with their
  // default action): the drain runs to its end either way.
  const int64_t cut = (*server)->Drain();
  server->reset();
  (*engine)->Stop();
  spdlog::info("stopped ({} streams cut off)", cut);
  return 0;
}

}  // namespace

Command AddServeCommand(CLI::App& app) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serves streaming completions over gRPC. SIGTERM or SIGINT drains it gracefully and "
      "exits 0.");
  cmd->add_option("--host", flags->host, "address to listen on");
  cmd->add_option("--port", flags->port, "gRPC port; 0 picks a free one (logged)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--metrics-port", flags->metrics_port,
                  "Prometheus /metrics and /health port (those two routes only); 0 picks a "
                  "free one (logged), -1 disables it")
      ->check(CLI::Range(-1, 65535));
  cmd->add_option("--http-port", flags->http_port,
                  "OpenAI-compatible HTTP port (/v1/completions, /v1/chat/completions, "
                  "/v1/models, /apply-template, /tokenize, /detokenize, /health, /metrics; "
                  "plaintext, same keys as "
                  "gRPC); -1 (default) = off, 0 picks a free one (logged)")
      ->check(CLI::Range(-1, 65535));
  cmd->add_option("--cors-allow-origin", flags->cors_allow_origins,
                  "an origin (e.g. https://app.example.com) whose browser pages may call the "
                  "HTTP port (CORS); repeatable; \"*\" allows any origin; default: none")
      ->take_all()
      ->allow_extra_args(false);
  cmd->add_option("--http-threads", flags->http_threads,
                  "event-loop threads of the HTTP port (connections never get a thread each)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--http-prepare-threads", flags->http_prepare_threads,
                  "threads that parse the HTTP port's request bodies, render chat templates "
                  "and tokenize, off its event loop")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--max-queued-requests", flags->max_queued_requests,
                  "requests waiting to run at most; beyond it new requests get "
                  "RESOURCE_EXHAUSTED; 0 = no limit")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-unsent-bytes-per-stream", flags->max_unsent_bytes_per_stream,
                  "output bytes a client may leave unread, on both doors (gRPC streams: "
                  "queued in the server; HTTP: held, queued and in the socket's send queue); "
                  "beyond it the request is aborted (gRPC: RESOURCE_EXHAUSTED; HTTP: the "
                  "connection closed, or 429 before any header) and counted in "
                  "pagoda:request_unsent_limit_total; 0 = no limit")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--reasoning-parser", flags->reasoning_parser,
                  "how chat outputs' reasoning is split into reasoning_content: auto (from the "
                  "chat template's markers), none, deepseek_r1, qwen3 or mistral")
      ->check(CLI::IsMember({"auto", "none", "deepseek_r1", "qwen3", "qwq", "mistral"}));
  cmd->add_option("--reasoning-budget", flags->reasoning_budget,
                  "the most reasoning tokens of a chat request that sets no "
                  "thinking_token_budget, then the close marker is forced; -1 = no limit")
      ->check(CLI::Range(-1, 1 << 30));
  cmd->add_option("--served-model-name", flags->served_model_name,
                  "the model's name in GetModelInfo and metrics; default: the --model file "
                  "name without directories and .gguf");
  AddDurationOption(cmd, "--drain-timeout", &flags->drain_timeout,
                    "on SIGTERM/SIGINT, how long in-flight streams may run before being cut off");
  AddDurationOption(cmd, "--stall-timeout", &flags->stall_timeout,
                    "health reads NOT_SERVING when the engine has work but made no step for "
                    "this long");
  cmd->add_option("--tenants", flags->tenants_file,
                  "JSON file of tenants, their API key digests and limits (docs/API.md); "
                  "SIGHUP reloads it. Without it (and without --api-key) no key is required");
  cmd->add_option("--api-key", flags->api_key,
                  "one anonymous tenant that must send 'authorization: Bearer <key>'")
      ->excludes("--tenants");
  cmd->add_option("--tls-cert", flags->tls_cert,
                  "PEM certificate chain: serve TLS (with --tls-key)");
  cmd->add_option("--tls-key", flags->tls_key, "PEM private key of --tls-cert");
  cmd->add_option("--tls-client-ca", flags->tls_client_ca,
                  "PEM CA: require client certificates it signed (mutual TLS)");
  cmd->add_option("--log-level", flags->log_level, "log verbosity")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  AddEngineFlags(cmd, &flags->engine);
  return {cmd, [flags] { return RunServe(*flags); }};
}

}  // namespace pagoda::tools
